"""`MCPError`: every MCP failure as one readable message, without secrets."""

from __future__ import annotations

import httpx2
from mcp.shared.exceptions import MCPError as SDKError

from ...net.urls import safe_url


class MCPError(Exception):
    """A failure talking to an MCP server; `str(exc)` is a readable message without secrets.

    `timed_out` tells a timeout from other failures.
    """

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.message = message
        self.timed_out = timed_out

    def __str__(self) -> str:
        return self.message


def timed_out(what: str, timeout: float) -> MCPError:
    return MCPError(f"{what} timed out after {timeout:g}s", timed_out=True)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for sub in exc.exceptions:
            out.extend(_leaves(sub))
        return out
    return [exc]


def is_network_error(exc: BaseException) -> bool:
    """Errors reaching the host itself (refused, unreachable, DNS...): another transport would fail too."""
    return any(isinstance(e, (httpx2.ConnectError, httpx2.ConnectTimeout, OSError)) for e in _leaves(exc))


def describe(exc: BaseException, url: str) -> str:
    """One readable message for a failure (exception groups flattened), with `url` made safe to show."""
    messages: list[str] = []
    for leaf in _leaves(exc):
        if isinstance(leaf, httpx2.HTTPStatusError):
            msg = f"HTTP {leaf.response.status_code} {leaf.response.reason_phrase}".strip()
        elif isinstance(leaf, SDKError):
            msg = leaf.message or f"MCP error {leaf.code}"
        elif isinstance(leaf, httpx2.TimeoutException):
            msg = "the HTTP request timed out"
        else:
            msg = str(leaf) or type(leaf).__name__
        # Never echo a URL with its query string / userinfo (tokens sometimes live there).
        if url and url in msg:
            msg = msg.replace(url, safe_url(url))
        if msg not in messages:
            messages.append(msg)
    return "; ".join(messages) or type(exc).__name__
