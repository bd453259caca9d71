"""Connection-level limits uvicorn does not have: slow and idle clients are closed, open connections capped.

uvicorn closes an idle keep-alive connection (`timeout_keep_alive`) but has no header or body read timeout:
a client that connects and never sends, sends its headers a byte at a time, or announces a body and never
finishes it holds a socket (and a file descriptor) forever, and enough of them starve the process. This
protocol (uvicorn's httptools one, used with `Config(http=EdgeProtocol)`) adds, per connection:

- a header deadline, from the connection's first byte of a request (or from the connection itself, for a
  client that sends nothing) until the request line and headers are complete;
- a body deadline, from the end of the headers until the whole body has arrived;
- a cap on open connections per process: one more is closed at once.

Each close is logged (the client address and why) and counted in
`responses_gateway_connections_closed_total{reason}`; idle keep-alive closes are counted too. Deadlines do
not apply while the gateway itself is answering (a long stream is not a slow client).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from . import metrics

log = logging.getLogger("responses_gateway.edge")


@dataclass(frozen=True)
class EdgeLimits:
    header_timeout: float = 30.0
    body_timeout: float = 60.0
    max_connections: int = 0  # 0: three quarters of the open-file limit

    def connection_cap(self) -> int:
        if self.max_connections > 0:
            return self.max_connections
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return max(16, soft * 3 // 4) if soft != resource.RLIM_INFINITY else 50_000


class EdgeProtocol(HttpToolsProtocol):
    limits = EdgeLimits()
    cap = limits.connection_cap()

    @classmethod
    def configure(cls, limits: EdgeLimits) -> None:
        """Set this process's limits (before serving; each worker process calls it for itself)."""
        cls.limits, cls.cap = limits, limits.connection_cap()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.cap:
            self._close("over_capacity", f"{len(self.connections) - 1} connections already open")
            return
        self._arm(self.limits.header_timeout, "header_timeout")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:
            self._arm(self.limits.header_timeout, "header_timeout")

    def on_headers_complete(self) -> None:
        self._disarm()
        self._arm(self.limits.body_timeout, "body_timeout")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._disarm()  # the connection becomes a WebSocket's: no HTTP deadline applies any more
        super().handle_websocket_upgrade()

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            metrics.connections_closed.labels("idle").inc()
        super().timeout_keep_alive_handler()

    def _arm(self, seconds: float, reason: str) -> None:
        if seconds > 0:
            self._deadline = self.loop.call_later(seconds, self._close, reason, f"not done within {seconds:g}s")

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self, reason: str, detail: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        metrics.connections_closed.labels(reason).inc()
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.warning("closing the connection from %s: %s (%s)", client, reason.replace("_", " "), detail)
        self.transport.close()
