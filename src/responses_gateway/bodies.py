"""The process's budget of request bytes held while they arrive: bodies not yet whole, WebSocket messages
not yet complete.

Each connection's body is bounded (--max-body-bytes), but not their sum: forty clients that each send 30 MiB
fast and then withhold the last byte held 1.2 GiB for a minute (the pace check never fires: the body came
fast). This budget (--max-bodies-bytes) is one counter for the process: a body or message that would take
it past its limit is refused at once (`BodiesBusy`: 503 with `Retry-After`, OpenAI's error shape; a
WebSocket is closed 1013, "try again later") rather than held, and what a body held is given back when it
is whole, refused or cut. One integer add per chunk: nothing per token, nothing per request without a body.
"""

from __future__ import annotations

from .errors import APIError

MiB = 1024 * 1024


class BodiesBusy(APIError):
    """Over the process's budget for bodies in flight: 503, retry in a moment (the budget frees as bodies end)."""

    def __init__(self, limit: int):
        super().__init__(503, f"The gateway is receiving too many request bodies at once (over {limit // MiB} MiB "
                              "in flight); retry in a moment.", type="server_error", code="server_busy")

    def headers(self) -> dict[str, str]:
        # the rest of the body is never read: the connection cannot be reused
        return {"retry-after": "1", "connection": "close"}


class Budget:
    """Bytes held by bodies still arriving in this process, against `limit` (0: no limit)."""

    __slots__ = ("limit", "held")

    def __init__(self, limit: int = 0):
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold `size` more bytes; False (nothing held) when that would pass the limit."""
        if self.limit and self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


BUDGET = Budget()  # this process's; `serve` sets its limit (app.configure_edge)
