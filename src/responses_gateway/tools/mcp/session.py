"""`MCPSession`: one connection to an MCP server, for a listing and any number of calls.

Streamable HTTP first, falling back to the legacy SSE transport when the endpoint does not speak it
(404/405, protocol error...); not when the host itself is unreachable, which another transport cannot fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp import types as mcp_types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as SDKError

from ...net.pinning import client_factory
from ...net.urls import safe_url
from ...version import __version__
from .declaration import MCPServer
from .errors import MCPError, describe, is_network_error, timed_out
from .results import result_to_text, tool_dict

logger = logging.getLogger(__name__)

# httpx2 (the SDK's HTTP client) logs every request URL at INFO, and a server_url may carry a token in its
# query string: keep it quiet unless the operator configured that logger explicitly.
if logging.getLogger("httpx2").level == logging.NOTSET:
    logging.getLogger("httpx2").setLevel(logging.WARNING)

DEFAULT_TIMEOUT = 30.0
SSE_READ_TIMEOUT = 300.0  # longest wait between two events on an SSE stream (servers ping far more often)
_REQUEST_TIMEOUT_CODE = -32001  # mcp_types.REQUEST_TIMEOUT
_MAX_LIST_PAGES = 100
_CLOSE_GRACE = 5.0
_GUARD = 1.0  # extra seconds for our own guard around a request the SDK already times out


class MCPSession:
    """One connection to an MCP server, for a listing and any number of calls, e.g. during one response.

        async with MCPSession(server, timeout=30) as session:
            tools = await session.list_tools()
            output, is_error = await session.call_tool("add", {"a": 1, "b": 2})

    The SDK connection lives in a background task owned by the session, so the session may be opened, used
    and closed from different tasks (or inside an async generator) without anyio cancel-scope trouble.
    `timeout` bounds connecting and is the default per-request timeout; calls run concurrently if you like.
    """

    def __init__(self, server: MCPServer, *, timeout: float = DEFAULT_TIMEOUT, address: str | None = None):
        self.server = server
        # `address`: the IP `check_url` admitted for the URL's host; connections go there, never re-resolved.
        self._client_factory = client_factory(urlsplit(server.url).hostname, address)
        self.timeout = timeout
        self.transport: str | None = None  # "streamable_http" or "sse" once connected
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lost: str | None = None
        self._annotations: dict[str, dict[str, Any] | None] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def __aenter__(self) -> MCPSession:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def connect(self, timeout: float | None = None) -> None:
        """Connect (streamable HTTP, then SSE); raises `MCPError`. Idempotent."""
        if self._task is not None:
            if self._client is None:
                raise MCPError(self._lost or f"MCP server {self.server.label!r}: not connected")
            return
        timeout = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own(timeout), name=f"mcp-session:{self.server.label}")
        self._task.add_done_callback(self._owner_done)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            await self.aclose()
            raise MCPError(
                f"connecting to MCP server {self.server.label!r} at {safe_url(self.server.url)} "
                f"timed out after {timeout:g}s",
                timed_out=True,
            ) from None
        except BaseException:
            await self.aclose()
            raise

    def _owner_done(self, task: asyncio.Task[None]) -> None:
        self._client = None
        if not task.cancelled() and task.exception() is not None:
            logger.debug("MCP session task for %r ended with %s", self.server.label, type(task.exception()).__name__)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(MCPError(f"cannot connect to MCP server {self.server.label!r}"))

    async def aclose(self) -> None:
        """Close the connection (ends the server session); never raises."""
        task, self._task = self._task, None
        self._client = None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        if self._ready is not None and not self._ready.done():
            task.cancel()  # still connecting: nothing to close gracefully
        if not task.done():
            try:
                async with asyncio.timeout(_CLOSE_GRACE):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
            except BaseException:  # the owner task logs its own errors
                pass
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # mark retrieved

    async def _open(self, stack: AsyncExitStack, kind: str, timeout: float) -> Client:
        server = self.server
        headers = dict(server.headers)
        if kind == "streamable_http":
            http = self._client_factory(headers=headers, timeout=httpx2.Timeout(timeout, read=SSE_READ_TIMEOUT))
            await stack.enter_async_context(http)
            transport: Any = streamable_http_client(server.url, http_client=http)
        else:
            transport = sse_client(server.url, headers=headers, timeout=timeout, sse_read_timeout=SSE_READ_TIMEOUT,
                                   httpx_client_factory=self._client_factory)
        client = Client(
            transport,
            read_timeout_seconds=timeout,
            client_info=mcp_types.Implementation(name="responses-gateway", version=__version__),
            cache=None,
        )
        return await stack.enter_async_context(client)

    async def _own(self, timeout: float) -> None:
        assert self._ready is not None and self._stop is not None
        ready, stop = self._ready, self._stop
        label, url = self.server.label, self.server.url
        failures: list[str] = []
        for kind in ("streamable_http", "sse"):
            try:
                async with AsyncExitStack() as stack:
                    client = await self._open(stack, kind, timeout)
                    self._client, self.transport = client, kind
                    logger.debug("MCP server %r connected via %s at %s", label, kind, safe_url(url))
                    if not ready.done():
                        ready.set_result(None)
                    await stop.wait()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every failure becomes a readable message
                me = asyncio.current_task()
                if me is not None and me.cancelling():
                    raise  # being closed: an error that wraps our cancellation is not a failure to report
                if ready.done():  # the connection was up and broke (or failed while closing)
                    self._client = None
                    if not stop.is_set():
                        self._lost = f"connection to MCP server {label!r} was lost: {describe(exc, url)}"
                        logger.warning("MCP server %r at %s: connection lost", label, safe_url(url))
                    else:
                        logger.debug("MCP server %r: error while closing: %s", label, describe(exc, url))
                    return
                name = "streamable HTTP" if kind == "streamable_http" else "SSE"
                failures.append(f"{name}: {describe(exc, url)}")
                if is_network_error(exc):
                    break
        if not ready.done():
            ready.set_exception(
                MCPError(f"cannot connect to MCP server {label!r} at {safe_url(url)}: {'; '.join(failures)}")
            )

    def _timeout(self, what: str, timeout: float) -> MCPError:
        return timed_out(f"{what} MCP server {self.server.label!r}", timeout)

    def _connected(self) -> Client:
        if self._client is None:
            if self._lost:
                raise MCPError(self._lost)
            raise MCPError(f"MCP server {self.server.label!r}: not connected")
        return self._client

    # -- requests -------------------------------------------------------------------------------------------

    async def list_tools(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """The server's tools in `mcp_list_tools` shape, filtered by `allowed_tools`; raises `MCPError`."""
        timeout = self.timeout if timeout is None else timeout
        client = self._connected()
        tools: list[dict[str, Any]] = []
        try:
            async with asyncio.timeout(timeout + _GUARD):  # the SDK's own request timeout fires first
                cursor: str | None = None
                for _ in range(_MAX_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)  # read_timeout_seconds set on the Client
                    tools.extend(tool_dict(t) for t in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError:
            raise self._timeout("listing the tools of", timeout) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, SDKError) and exc.code == _REQUEST_TIMEOUT_CODE:
                raise self._timeout("listing the tools of", timeout) from None
            raise MCPError(
                f"listing the tools of MCP server {self.server.label!r} failed: {describe(exc, self.server.url)}"
            ) from None
        self._annotations = {t["name"]: t["annotations"] for t in tools}
        return self.server.filter_tools(tools)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None
    ) -> tuple[str, bool]:
        """Call a tool: `(output text, is_error)`; raises `MCPError` on timeout / connection / protocol errors.

        A tool that `allowed_tools` hides is refused without contacting the server.
        """
        timeout = self.timeout if timeout is None else timeout
        label = self.server.label
        allowed = self.server.allowed_tools is None or name in self.server.allowed_tools
        if allowed and self.server.read_only is not None and name in self._annotations:
            allowed = self.server.allows(name, self._annotations[name])  # read-only filter, when listed here
        if not allowed:
            raise MCPError(f"tool {name!r} is not allowed on MCP server {label!r}")
        client = self._connected()
        try:
            async with asyncio.timeout(timeout + _GUARD):  # the SDK's own request timeout fires first
                result = await client.call_tool(name, dict(arguments or {}), read_timeout_seconds=timeout)
        except TimeoutError:
            raise self._timeout(f"MCP tool {name!r} on", timeout) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, SDKError) and exc.code == _REQUEST_TIMEOUT_CODE:
                raise self._timeout(f"MCP tool {name!r} on", timeout) from None
            raise MCPError(f"MCP tool {name!r} on server {label!r} failed: {describe(exc, self.server.url)}") from None
        return result_to_text(result), bool(result.is_error)
