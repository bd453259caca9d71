"""MCP's settings (docs/mcp.md), declared once (settings.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...settings import setting


@dataclass(frozen=True)
class MCPSettings:
    """MCP (docs/mcp.md)"""

    mcp_allow_hosts: str | None = setting(
        None, metavar="H1,H2",
        help="MCP server hosts admitted although loopback/private (host, host:port, IP or CIDR)",
        doc="MCP server hosts admitted although loopback/private ([docs/mcp.md](docs/mcp.md))")
    mcp_timeout: float = setting(60.0, check="positive", help="seconds per MCP call")

    def hosts(self) -> list[str]:
        return [h.strip() for h in (self.mcp_allow_hosts or "").split(",") if h.strip()]
