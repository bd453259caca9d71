"""The agentic loop for gateway-executed MCP tools.

Before the first upstream step: list each declared server's tools (or reuse the list stored earlier in the
chain, as OpenAI does) and run the calls the client approved. After each step: run the MCP calls the model
made, hand the results back, and call the upstream again — until the model answers in text or calls a
client tool (which ends the response for the client), `max_tool_calls` is spent (further MCP tools are
withdrawn so the model must answer), or the round cap stops a runaway loop (`response.incomplete`,
reason `max_messages`, as OpenAI names an agent loop cut short). Every event still comes from the one composer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from ..composer import Composer, _Item
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

    # -- before the first step -------------------------------------------------------------------------

    async def prelude(self, composer: Composer) -> AsyncIterator[list[dict[str, Any]]]:
        for server in self.servers.values():
            stored = _stored_list(self.history, server.label)
            if stored is not None:
                self.call.tools.offer_listed(server, server.filter_tools(stored))
                continue
            item, events = composer.list_tools_started(server.label)
            yield events
            try:
                session = await self._session(server)
                tools = await session.list_tools()
            except (MCPError, ValueError) as exc:
                yield composer.list_tools_done(item, None, str(exc))
                continue
            yield composer.list_tools_done(item, tools, None)
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
        try:
            session = await self._session(server)
            text, is_error = await session.call_tool(item["name"], arguments, timeout=self.timeout)
        except (MCPError, ValueError) as exc:
            return composer.mcp_result(call, None, str(exc))
        if is_error:  # the tool ran and reported a failure
            return composer.mcp_result(call, None, {"type": "mcp_tool_execution_error",
                                                    "content": [{"type": "text", "text": text}]})
        return composer.mcp_result(call, text, None)

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


def _stored_list(history: list[dict[str, Any]], label: str) -> list[dict[str, Any]] | None:
    for item in reversed(history):
        if item["type"] == "mcp_list_tools" and item.get("server_label") == label and not item.get("error"):
            return item.get("tools") or []
    return None
