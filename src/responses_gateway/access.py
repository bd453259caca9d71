"""The access log (`--access-log`, off by default): one line per HTTP request, and one when a WebSocket
connection opens and one when it closes, on the `responses_gateway.access` logger.

A line is written when the request is over (a stream: when its last byte went out), so it carries the
status, the bytes of the body, the time taken and the response id the request made or `-`. In text it reads
like a web server's access line; in JSON (`--log-format json`) the same facts are fields of their own.

The app (`app.Gateway`) calls `served` around each HTTP request only when the log is on: then each body
chunk the server sends passes one counting function; when it is off nothing is wrapped. A stream's body,
which goes straight to the connection under the edge (api/streaming.py), is counted by the edge
(`HttpEdge.sent`) and added here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .edge import HttpEdge, edge_of
from .logs import REPLICA, RESPONSE_ID

log = logging.getLogger("responses_gateway.access")


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def _target(scope: Scope) -> str:
    query: bytes = scope.get("query_string") or b""
    path: str = scope.get("path", "")
    return path + ("?" + query.decode("latin-1") if query else "")


async def served(scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
    """Serve one HTTP request through `app`, then log it."""
    started = time.perf_counter()
    status = 500  # an app that failed before answering: the server answers 500
    sent = 0

    async def counting(message: Message) -> None:
        nonlocal status, sent
        if message["type"] == "http.response.body":
            sent += len(message.get("body", b""))
        elif message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    token = RESPONSE_ID.set(None)  # the id this request makes, if any, is read back below
    replica = REPLICA.set(None)  # and the replica of a pool it went to (upstreams/pool.py)
    try:
        await app(scope, receive, counting)
    finally:
        ms = round((time.perf_counter() - started) * 1000, 1)
        edge = edge_of(scope)
        if isinstance(edge, HttpEdge):
            sent += edge.sent
        response_id = RESPONSE_ID.get()
        method, target = scope.get("method", ""), _target(scope)
        version = scope.get("http_version", "1.1")
        fields: dict[str, Any] = {"client": _client(scope), "method": method, "path": scope.get("path", ""),
                                  "status": status, "bytes": sent, "duration_ms": ms}
        served_by = REPLICA.get()
        if served_by is not None:
            fields["replica"] = served_by
        log.info('%s "%s %s HTTP/%s" %d %d %.1fms %s%s', fields["client"], method, target, version, status, sent, ms,
                 response_id or "-", f" replica={served_by}" if served_by else "", extra={"fields": fields})
        RESPONSE_ID.reset(token)
        REPLICA.reset(replica)


def websocket_opened(scope: Scope) -> float:
    """Log a WebSocket connection accepted; returns when, for `websocket_closed`."""
    client = _client(scope)
    log.info("%s WebSocket %s open", client, scope.get("path", ""),
             extra={"fields": {"client": client, "websocket": "open", "path": scope.get("path", "")}})
    return time.perf_counter()


def websocket_closed(scope: Scope, opened: float) -> None:
    client = _client(scope)
    seconds = round(time.perf_counter() - opened, 3)
    log.info("%s WebSocket %s closed after %.1fs", client, scope.get("path", ""), seconds,
             extra={"fields": {"client": client, "websocket": "closed", "path": scope.get("path", ""),
                               "duration_ms": round(seconds * 1000, 1)}})
