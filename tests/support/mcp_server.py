"""A real MCP server (the official `mcp` SDK's MCPServer, formerly FastMCP) for the tests.

`MCPTestServer()` runs it with uvicorn on a loopback port in a background thread, serving both transports from
one app: streamable HTTP at `/mcp` (`.url`) and the legacy SSE transport at `/sse` (`.sse_url`, messages posted
to `/messages/`). Tools:

- `add(a, b)`, `echo(text)`: plain results (both annotated read-only);
- `lookup(city)`: structured content (a dict), plus the SDK's JSON text rendering of it;
- `lookup_structured_only(city)`: structured content with no text part at all;
- `picture()`: an image content block;
- `explode()`: raises, so the result has `isError: true`;
- `slow(seconds)`: sleeps, for timeouts;
- `whoami()`: the `Authorization` header the request carried (so tests can check headers are forwarded).

`.calls` counts tool calls by name (thread-safe enough for the tests: the GIL and one event loop).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import Counter
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from starlette.applications import Starlette

from tests.support.server import UvicornThread

# A 1x1 transparent PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

CITIES: dict[str, dict[str, Any]] = {
    "Paris": {"city": "Paris", "country": "France", "population": 2102650},
    "Lyon": {"city": "Lyon", "country": "France", "population": 522250},
}

READ_ONLY = ToolAnnotations(read_only_hint=True)


def build_mcp_server(calls: Counter[str] | None = None) -> MCPServer:
    calls = calls if calls is not None else Counter()
    mcp = MCPServer(name="test-mcp", instructions="Tools for the gateway's tests.", log_level="WARNING")

    @mcp.tool(description="Add two integers.", annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        calls["add"] += 1
        return a + b

    @mcp.tool(description="Echo the text back.", annotations=READ_ONLY)
    def echo(text: str) -> str:
        calls["echo"] += 1
        return text

    @mcp.tool(description="Look a city up: structured facts about it.")
    def lookup(city: str) -> dict[str, Any]:
        calls["lookup"] += 1
        if city not in CITIES:
            raise ToolError(f"unknown city: {city}")
        return CITIES[city]

    @mcp.tool(description="Like lookup, but the result has structured content only, no text part.")
    def lookup_structured_only(city: str) -> CallToolResult:
        calls["lookup_structured_only"] += 1
        return CallToolResult(content=[], structured_content=CITIES.get(city, {"city": city}))

    @mcp.tool(description="Return a tiny PNG image.")
    def picture() -> Image:
        calls["picture"] += 1
        return Image(data=PNG_1X1, format="png")

    @mcp.tool(description="Always fails.")
    def explode() -> str:
        calls["explode"] += 1
        raise ToolError("kaboom: the tool exploded")

    @mcp.tool(description="Sleep for the given number of seconds, then answer.")
    async def slow(seconds: float) -> str:
        calls["slow"] += 1
        await asyncio.sleep(seconds)
        return f"slept {seconds}s"

    @mcp.tool(description="Return the Authorization header this request carried.")
    def whoami(ctx: Context) -> str:
        calls["whoami"] += 1
        headers = ctx.headers or {}
        return headers.get("authorization", "<none>")

    return mcp


def build_app(mcp: MCPServer) -> Starlette:
    """One Starlette app serving streamable HTTP at /mcp and SSE at /sse (+ /messages/)."""
    app = mcp.streamable_http_app(streamable_http_path="/mcp")  # carries the session manager's lifespan
    sse = mcp.sse_app(sse_path="/sse", message_path="/messages/")
    app.router.routes.extend(sse.routes)
    return app


class MCPTestServer(UvicornThread):
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.mcp = build_mcp_server(self.calls)
        super().__init__(build_app(self.mcp), name="mcp-test-server")
        self.base_url = self.url
        self.url = f"{self.base_url}/mcp"
        self.sse_url = f"{self.base_url}/sse"


if __name__ == "__main__":  # manual use: python -m tests.support.mcp_server
    with MCPTestServer() as srv:
        print(f"streamable HTTP: {srv.url}\nSSE: {srv.sse_url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
