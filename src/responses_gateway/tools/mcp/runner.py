"""The MCP servers of one response, in the tool loop (tools/loop.py).

Before the first upstream step: list each declared server's tools (or reuse the list stored earlier in the
chain, as OpenAI does) and queue the calls the client approved. The model's calls become `mcp_call` items —
or `mcp_approval_request` items for tools that need the client's approval first, which end the response for
the client to answer. Running a call sends it to its server over the session opened for this response.

When tracing, each listing and each call sent to a server is a child span of the response's (`mcp.list_tools`,
`mcp.call`): the server's label and host — never its headers or credentials — and the error, if any.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import orjson

from ...generation import ToolCallStart
from ...ids import new_id
from ...net.urls import check_url
from ...observe import failed
from ...protocol.tools import Tool, ToolSet, wire_name
from ..frame import Annotator, Calls, Context, Events, Item, OpenItem, Spec
from .declaration import MCPServer
from .errors import MCPError
from .service import MCP
from .session import MCPSession

log = logging.getLogger("responses_gateway.mcp")

PROTOCOL_ERROR = "mcp_protocol_error"


class MCPRunner:
    def __init__(self, servers: list[MCPServer], context: Context[MCP]):
        self.servers = {s.label: s for s in servers}
        self.context = context
        policy = context.service
        self.allow_hosts: list[str] = list(policy.allow_hosts)
        self.timeout: float = policy.timeout + 5  # the loop's deadline; each request has mcp_timeout
        self.call_timeout: float = policy.timeout
        self.history: list[Item] = context.history
        self.sessions: dict[str, MCPSession] = {}
        self.unusable: dict[str, str] = {}  # label -> why its server cannot be reached
        self.approval: set[str] = set()  # wire names of the tools that need the client's approval

    # -- before the first step ---------------------------------------------------------------------------

    async def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        for server in self.servers.values():
            stored = _stored_list(self.history, server.label)
            if stored is not None:
                self._offer(tools, server, server.filter_tools(stored))
                continue
            item, events = calls.add_item("mcp", {"id": new_id("mcpl"), "type": "mcp_list_tools",
                                                     "server_label": server.label, "tools": []},
                                             [("response.mcp_list_tools.in_progress", {})])
            yield events
            listed, error = await self._list(server)
            if error is None:
                item.item["tools"] = listed or []
            else:
                item.item["error"] = error
            yield calls.end_call(item, None, [("response.mcp_list_tools.completed" if error is None
                                                  else "response.mcp_list_tools.failed", {})])
            if listed is not None:
                self._offer(tools, server, listed)
        requests = {i.get("id"): i for i in self.history if i["type"] == "mcp_approval_request"}
        done = {i.get("approval_request_id") for i in self.history if i["type"] == "mcp_call"}
        for answer in self.history:
            if answer["type"] != "mcp_approval_response" or not answer["approve"]:
                continue
            request = requests.get(answer["approval_request_id"])
            if request is None or request.get("id") in done:
                continue
            arguments = request.get("arguments") or "{}"
            _, events = calls.add_item("mcp", _call_item(request["server_label"], request["name"],
                                                            arguments, request.get("id")), [
                ("response.mcp_call.in_progress", {}),
                ("response.mcp_call_arguments.delta", {"delta": arguments}),
                ("response.mcp_call_arguments.done", {"arguments": arguments}),
            ], run=True)
            yield events

    def _offer(self, tools: ToolSet, server: MCPServer, listed: list[dict[str, Any]]) -> None:
        """Offer the tools a server listed (`mcp_list_tools` shape), named `<server_label>__<tool>`."""
        for spec in listed:
            name = spec["name"]
            tool = Tool("function", name, wire_name(name, server.label), spec.get("description"),
                        spec.get("input_schema") or {"type": "object", "properties": {}}, namespace=server.label,
                        runner="mcp")
            if server.requires_approval(name, spec.get("annotations")):
                self.approval.add(tool.wire_name)
            tools.offer(tool, f"tools.{server.label}")

    # -- the model's calls -----------------------------------------------------------------------------

    def item(self, start: ToolCallStart) -> Item:
        label = start.namespace or ""
        if wire_name(start.name, label) in self.approval:
            return {"id": new_id("mcpr"), "type": "mcp_approval_request", "server_label": label,
                    "name": start.name, "arguments": ""}
        return _call_item(label, start.name, "")

    def added(self, call: OpenItem) -> list[Spec]:
        return [("response.mcp_call.in_progress", {})] if call.item["type"] == "mcp_call" else []

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        if call.item["type"] != "mcp_call":
            return []  # an approval request's arguments come whole, in output_item.done
        return [("response.mcp_call_arguments.delta", {"delta": text})]

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        arguments = call.arguments
        call.item["arguments"] = arguments
        if call.item["type"] != "mcp_call":
            return [], False  # an approval request: done now; the client answers it
        return [("response.mcp_call_arguments.done", {"arguments": arguments})], True

    async def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        item = call.item
        server = self.servers.get(item["server_label"])
        if server is None:
            yield calls.fail_call(call, f"No MCP server '{item['server_label']}' in this request.")
            return
        try:
            arguments = orjson.loads(item["arguments"] or "{}")
        except orjson.JSONDecodeError:
            yield calls.fail_call(call, "The tool arguments are not valid JSON.")
            return
        if not isinstance(arguments, dict):
            yield calls.fail_call(call, "The tool arguments must be a JSON object.")
            return
        output, error = await self._call(server, item["name"], arguments)
        if error is not None:
            yield self._ended(calls, call, None, error)
            return
        yield self._ended(calls, call, output, None)

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        if call.item["type"] != "mcp_call":
            return None, []  # an approval request the response ended on: nothing ran
        call.item["output"] = None
        call.item["error"] = {"type": PROTOCOL_ERROR, "code": -32000, "message": message}
        return "failed", [("response.mcp_call.failed", {})]

    def annotator(self) -> Annotator | None:
        return None

    async def aclose(self) -> None:
        for session in self.sessions.values():
            try:
                await session.aclose()
            except Exception:  # closing must never hide the response's own outcome
                log.debug("closing an MCP session failed", exc_info=True)
        self.sessions = {}

    # -- helpers ---------------------------------------------------------------------------------------

    def _ended(self, calls: Calls, call: OpenItem, output: str | None,
               error: str | dict[str, Any] | None) -> Events:
        if isinstance(error, str):
            return calls.fail_call(call, error)
        call.item["output"] = output
        call.item["error"] = error
        ok = error is None
        return calls.end_call(call, "completed" if ok else "failed",
                                 [("response.mcp_call.completed" if ok else "response.mcp_call.failed", {})])

    async def _list(self, server: MCPServer) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The server's tools, or why they could not be listed."""
        with self._span("mcp.list_tools", server, {"mcp.method.name": "tools/list"}) as span:
            try:
                session = await self._session(server)
                tools = await session.list_tools()
            except (MCPError, ValueError) as exc:
                failed(span, PROTOCOL_ERROR, str(exc))
                return None, str(exc)
            if span is not None:
                span.set_attribute("responses_gateway.mcp.tools", len(tools))
            return tools, None

    async def _call(self, server: MCPServer, name: str, arguments: dict[str, Any]
                    ) -> tuple[str | None, str | dict[str, Any] | None]:
        """One call: its output, or its error as the `mcp_call` item carries it."""
        with self._span("mcp.call", server, {"mcp.method.name": "tools/call", "gen_ai.tool.name": name}) as span:
            try:
                session = await self._session(server)
                text, is_error = await session.call_tool(name, arguments, timeout=self.call_timeout)
            except (MCPError, ValueError) as exc:
                failed(span, PROTOCOL_ERROR, str(exc))
                return None, str(exc)
            if is_error:  # the tool ran and reported a failure
                failed(span, "mcp_tool_execution_error", text)
                return None, {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}
            return text, None

    def _span(self, name: str, server: MCPServer, attributes: dict[str, Any]) -> AbstractContextManager[Any]:
        """A child span of the response's (None inside when not tracing): the server's label and host only."""
        seen = self.context.seen
        if seen is None:
            return nullcontext()
        return seen.child(name, {"responses_gateway.mcp.server_label": server.label,
                                 "server.address": _host(server.url), **attributes})

    async def _session(self, server: MCPServer) -> MCPSession:
        if server.label in self.unusable:
            raise MCPError(self.unusable[server.label])
        session = self.sessions.get(server.label)
        if session is None:
            try:
                address = await check_url(server.url, self.allow_hosts)
                session = MCPSession(server, timeout=self.call_timeout, address=address)
                await session.connect()
            except (MCPError, ValueError) as exc:
                self.unusable[server.label] = str(exc)
                raise
            self.sessions[server.label] = session
        return session


def _call_item(server_label: str, name: str, arguments: str, approval_request_id: str | None = None) -> Item:
    return {"id": new_id("mcp"), "type": "mcp_call", "status": "in_progress", "server_label": server_label,
            "name": name, "arguments": arguments, "approval_request_id": approval_request_id, "output": None,
            "error": None}


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _stored_list(history: list[Item], label: str) -> list[dict[str, Any]] | None:
    for item in reversed(history):
        if item["type"] == "mcp_list_tools" and item.get("server_label") == label and not item.get("error"):
            return item.get("tools") or []
    return None
