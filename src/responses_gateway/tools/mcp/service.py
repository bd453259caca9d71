"""MCP's part of one process: the deployment's policy for the servers requests name (docs/mcp.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ..frame import Start
from .settings import MCPSettings


@dataclass(frozen=True)
class MCP:
    """The hosts admitted although loopback or private (`--mcp-allow-hosts`), and seconds per call."""

    allow_hosts: tuple[str, ...] = ()
    timeout: float = 60.0

    def describe(self) -> str:
        hosts = ", ".join(self.allow_hosts) if self.allow_hosts else "none (--mcp-allow-hosts)"
        return f"the servers requests name; private hosts allowed: {hosts}; {self.timeout:g} s a call"

    async def aclose(self) -> None:
        """Nothing is kept between responses: each opens its own sessions."""


async def serve(start: Start[MCPSettings]) -> MCP:
    return MCP(tuple(start.group.hosts()), start.group.mcp_timeout)
