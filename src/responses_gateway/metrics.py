"""Process-wide counters, served at /metrics in Prometheus' text format (prometheus_client).

With several worker processes (`serve --workers N`) every worker counts into its own files under
`PROMETHEUS_MULTIPROC_DIR` (prometheus_client's multiprocess mode, which `serve` sets up before the workers
start), and /metrics sums all workers' counters, whichever worker answers the scrape. One process serves
its own counters plus the usual process and Python collectors.
"""

from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, Counter, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

responses = Counter("responses_gateway_responses", "Responses finished, by terminal status.", ["status"])
store_failures = Counter("responses_gateway_store_failures",
                         "Responses whose store write failed (the stream still ended properly).")
store_purged = Counter("responses_gateway_store_purged", "Expired responses removed by retention.")
websocket_connections = Counter("responses_gateway_websocket_connections",
                                "WebSocket connections accepted on /v1/responses.")
websocket_messages = Counter("responses_gateway_websocket_messages",
                             "WebSocket messages received, by type (invalid: answered with an error frame).", ["type"])
connections_closed = Counter("responses_gateway_connections_closed",
                             "Client connections the gateway closed at its edge, by reason (header_timeout, "
                             "body_timeout, idle, over_capacity).", ["reason"])
requests_limited = Counter("responses_gateway_requests_limited",
                           "Requests refused with a 429, by reason (in_flight, key_concurrency, key_rate).",
                           ["reason"])


def render() -> bytes:
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        return generate_latest(registry)
    return generate_latest(REGISTRY)
