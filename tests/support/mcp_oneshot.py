"""One-shot MCP calls for tests: connect, do one thing, disconnect (the gateway keeps a session per response)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from responses_gateway.tools.mcp.declaration import MCPServer
from responses_gateway.tools.mcp.errors import MCPError, timed_out
from responses_gateway.tools.mcp.session import DEFAULT_TIMEOUT, MCPSession


def _remaining(deadline: float, loop: asyncio.AbstractEventLoop) -> float:
    return max(deadline - loop.time(), 0.001)


async def list_tools(server: MCPServer, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    """Connect, list the tools (`mcp_list_tools` shape, filtered by `allowed_tools`), disconnect.

    `timeout` bounds connecting plus listing; raises `MCPError`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        async with MCPSession(server, timeout=timeout) as session:
            return await session.list_tools(timeout=_remaining(deadline, loop))
    except MCPError as exc:
        if exc.timed_out:
            raise timed_out(f"listing the tools of MCP server {server.label!r}", timeout) from None
        raise


async def call_tool(
    server: MCPServer, name: str, arguments: Mapping[str, Any] | None, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str, bool]:
    """Connect, call one tool, disconnect: `(output text, is_error)`.

    `timeout` bounds connecting plus the call; raises `MCPError` ("... timed out after Xs" on timeout).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        async with MCPSession(server, timeout=timeout) as session:
            return await session.call_tool(name, arguments, timeout=_remaining(deadline, loop))
    except MCPError as exc:
        if exc.timed_out:
            raise timed_out(f"MCP tool {name!r} on server {server.label!r}", timeout) from None
        raise
