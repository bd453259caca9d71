"""Who may read /metrics, and /metrics on a listener of its own (--metrics-port).

The counters say which routes and models are used, how much, and how often they fail: not a secret like a
key, but not for everyone on a public port either. So, in order:

- `--metrics-port`: /metrics is served only there, on `--metrics-host` (127.0.0.1 unless set), by a thread
  of the process that serves (the supervisor with `--workers`, summing every worker's counters): the public
  port answers it 404, as any path it does not serve;
- `--metrics-key`: /metrics answers only `Authorization: Bearer <key>` (401 otherwise), wherever it is served;
- neither, with API keys set: off the public port (404) — a deployment that keeps its API private keeps its
  counters private too, unless it says where they go;
- neither, without API keys: open, as before (a gateway on loopback for one team).
"""

from __future__ import annotations

import hmac
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

import orjson

from . import metrics
from .errors import APIError

log = logging.getLogger("responses_gateway.metrics")

Access = Literal["open", "key", "off"]


def public_access(metrics_key: str | None, metrics_port: int, api_keys: bool) -> Access:
    """How the public port answers /metrics (see the module's docstring)."""
    if metrics_port:
        return "off"
    if metrics_key:
        return "key"
    return "off" if api_keys else "open"


def authorized(header: str | None, key: str) -> bool:
    """`Authorization: Bearer <key>`, compared in constant time."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), key.encode())


UNAUTHORIZED = APIError(401, "/metrics needs Authorization: Bearer <the --metrics-key>.", code="invalid_api_key")


class _Handler(BaseHTTPRequestHandler):
    key: str | None = None
    server_version = "responses-gateway"

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        if self.path.split("?", 1)[0] != "/metrics":
            return self._error(APIError(404, f"Invalid URL (GET {self.path.split('?', 1)[0]})"))
        if self.key is not None and not authorized(self.headers.get("authorization"), self.key):
            return self._error(UNAUTHORIZED)
        body = metrics.render()
        self.send_response(200)
        self.send_header("content-type", metrics.CONTENT_TYPE)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, error: APIError) -> None:
        body = orjson.dumps(error.body())
        self.send_response(error.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (http.server's name)
        return  # scrapes are not logged: one every few seconds would drown the log


class MetricsListener(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 16
    timeout = 10


def serve_metrics(host: str, port: int, key: str | None) -> MetricsListener:
    """Start /metrics on `host:port` in a daemon thread (scrapes never touch the event loop); `shutdown()` ends it."""
    handler = type("Handler", (_Handler,), {"key": key, "timeout": 10})
    listener = MetricsListener((host, port), handler)
    threading.Thread(target=listener.serve_forever, name="metrics-listener", daemon=True).start()
    log.info("/metrics on http://%s:%d/metrics%s", host, listener.server_address[1],
             " (bearer key required)" if key else "")
    return listener
