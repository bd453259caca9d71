"""The agentic loop for gateway-executed MCP tools.

Before the first upstream step: list each declared server's tools (or reuse the list stored earlier in the
chain, as OpenAI does) and run the calls the client approved. After each step: run the MCP calls the model
made, hand the results back, and call the upstream again — until the model answers in text or calls a
client tool (which ends the response for the client), `max_tool_calls` is spent (further MCP tools are
withdrawn so the model must answer), or the round cap stops a runaway loop (`response.incomplete`,
reason `max_messages`, as OpenAI names an agent loop cut short). Every event still comes from the one composer.

When tracing, each listing and each call sent to a server is a child span of the response's (`mcp.list_tools`,
`mcp.call`): the server's label and host — never its headers or credentials — and the error, if any.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..composer import Composer, _Item
from ..observe import Observation, failed
from ..protocol.mcp_tool import MCPServer
from ..upstreams.base import Call, EventStream, Upstream
from .errors import MCPError
from .history import CLIENT_CALLS, lower_mcp
from .session import MCPSession
from .urls import check_url

log = logging.getLogger("responses_gateway.mcp")


class MCPLoop:
    def __init__(self, call: Call, history: list[dict[str, Any]], upstream: Upstream, *, allow_hosts: list[str], timeout: float,
                 max_rounds: int, render: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lower_mcp):
        self.call = call
        self.history = history  # the raw items (MCP items included); call.items is what upstreams see
        self.render = render  # raw items → what upstreams see (respond.start's choice)
        self.upstream = upstream
        self.servers: dict[str, MCPServer] = {s.label: s for s in call.tools.mcp}
        self.allow_hosts = allow_hosts
        self.timeout = timeout
        self.max_rounds = max_rounds
        self.max_calls = call.request.max_tool_calls
        self.sessions: dict[str, MCPSession] = {}
        self.unusable: dict[str, str] = {}  # label -> why its server cannot be reached
        self.calls_made = 0
        self.rounds = 0
        self.step_start = 0
        self.again = False
        self.incomplete: str | None = None
        self.seen: Observation | None = None  # the response's (the pipeline sets it): spans of the MCP work

    # -- before the first step -------------------------------------------------------------------------

    async def prelude(self, composer: Composer) -> AsyncIterator[list[dict[str, Any]]]:
        for server in self.servers.values():
            stored = _stored_list(self.history, server.label)
            if stored is not None:
                self.call.tools.offer_listed(server, server.filter_tools(stored))
                continue
            item, events = composer.list_tools_started(server.label)
            yield events
            tools, error = await self._list(server)
            yield composer.list_tools_done(item, tools, error)
            if tools is not None:
                self.call.tools.offer_listed(server, tools)
        async for events in self._approved(composer):
            yield events

    async def _approved(self, composer: Composer) -> AsyncIterator[list[dict[str, Any]]]:
        requests = {i.get("id"): i for i in self.history if i["type"] == "mcp_approval_request"}
        done = {i.get("approval_request_id") for i in self.history if i["type"] == "mcp_call"}
        for answer in self.history:
            if answer["type"] != "mcp_approval_response" or not answer["approve"]:
                continue
            request = requests.get(answer["approval_request_id"])
            if request is None or request.get("id") in done:
                continue
            call, events = composer.mcp_call_added(request["server_label"], request["name"],
                                                   request.get("arguments") or "{}", request.get("id"))
            yield events
            yield await self._run(composer, call)

    # -- between steps ---------------------------------------------------------------------------------

    def open_next(self, composer: Composer) -> Awaitable[EventStream]:
        """Start the next upstream step with everything so far, this response's own items included."""
        self.call.items = self.render(self.history + composer.output)
        self.step_start = len(composer.output)
        if self.rounds:
            self.call.tools.unforce()
        composer.next_step()
        return self.upstream.open(self.call)

    async def after_step(self, composer: Composer) -> AsyncIterator[list[dict[str, Any]]]:
        self.again = False
        pending = composer.take_pending()
        if not pending:
            return
        for call in pending:
            yield await self._run(composer, call)
        if any(item["type"] in CLIENT_CALLS for item in composer.output[self.step_start:]):
            return  # the client has calls of its own to run: the response ends here
        self.rounds += 1
        if self.rounds >= self.max_rounds:
            self.incomplete = "max_messages"
            return
        if self.max_calls is not None and self.calls_made >= self.max_calls:
            self.call.tools.withdraw_mcp()
        self.again = True

    async def aclose(self) -> None:
        for session in self.sessions.values():
            try:
                await session.aclose()
            except Exception:  # closing must never hide the response's own outcome
                log.debug("closing an MCP session failed", exc_info=True)
        self.sessions = {}

    # -- helpers ---------------------------------------------------------------------------------------

    async def _run(self, composer: Composer, call: _Item) -> list[dict[str, Any]]:
        item = call.item
        server = self.servers.get(item["server_label"])
        if self.max_calls is not None and self.calls_made >= self.max_calls:
            return composer.mcp_result(call, None, f"Not run: max_tool_calls ({self.max_calls}) was reached.")
        if server is None:
            return composer.mcp_result(call, None, f"No MCP server '{item['server_label']}' in this request.")
        try:
            arguments = orjson.loads(item["arguments"] or "{}")
        except orjson.JSONDecodeError:
            return composer.mcp_result(call, None, "The tool arguments are not valid JSON.")
        if not isinstance(arguments, dict):
            return composer.mcp_result(call, None, "The tool arguments must be a JSON object.")
        self.calls_made += 1
        output, error = await self._call(server, item["name"], arguments)
        return composer.mcp_result(call, output, error)

    async def _list(self, server: MCPServer) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The server's tools, or why they could not be listed."""
        with self._span("mcp.list_tools", server, {"mcp.method.name": "tools/list"}) as span:
            try:
                session = await self._session(server)
                tools = await session.list_tools()
            except (MCPError, ValueError) as exc:
                failed(span, "mcp_protocol_error", str(exc))
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
                text, is_error = await session.call_tool(name, arguments, timeout=self.timeout)
            except (MCPError, ValueError) as exc:
                failed(span, "mcp_protocol_error", str(exc))
                return None, str(exc)
            if is_error:  # the tool ran and reported a failure
                failed(span, "mcp_tool_execution_error", text)
                return None, {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}
            return text, None

    def _span(self, name: str, server: MCPServer, attributes: dict[str, Any]) -> AbstractContextManager[Any]:
        """A child span of the response's (None inside when not tracing): the server's label and host only."""
        if self.seen is None:
            return nullcontext()
        return self.seen.child(name, {"responses_gateway.mcp.server_label": server.label,
                                      "server.address": _host(server.url), **attributes})

    async def _session(self, server: MCPServer) -> MCPSession:
        if server.label in self.unusable:
            raise MCPError(self.unusable[server.label])
        session = self.sessions.get(server.label)
        if session is None:
            try:
                address = await check_url(server.url, self.allow_hosts)
                session = MCPSession(server, timeout=self.timeout, address=address)
                await session.connect()
            except (MCPError, ValueError) as exc:
                self.unusable[server.label] = str(exc)
                raise
            self.sessions[server.label] = session
        return session


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _stored_list(history: list[dict[str, Any]], label: str) -> list[dict[str, Any]] | None:
    for item in reversed(history):
        if item["type"] == "mcp_list_tools" and item.get("server_label") == label and not item.get("error"):
            return item.get("tools") or []
    return None
