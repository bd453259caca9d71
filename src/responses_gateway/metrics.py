"""Process-wide counters, served at /metrics in Prometheus' text format (prometheus_client).

With several worker processes (`serve --workers N`) every worker counts into its own files under
`PROMETHEUS_MULTIPROC_DIR` (prometheus_client's multiprocess mode, which `serve` sets up before the workers
start), and /metrics sums all workers' counters, whichever worker answers the scrape. One process serves
its own counters plus the usual process and Python collectors.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
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
                             "body_timeout, body_rate, idle, over_capacity, headers_too_large, too_many_headers, "
                             "request_line_too_long, send_timeout, keepalive_timeout).", ["reason"])
requests_limited = Counter("responses_gateway_requests_limited",
                           "Requests refused with a 429, by reason (in_flight, key_concurrency, key_rate).",
                           ["reason"])
hosted_tools_dropped = Counter("responses_gateway_hosted_tools_dropped",
                               "Hosted tools left out of requests because this deployment cannot run them "
                               "(--hosted-tools drop), by tool type.", ["type"])
tool_calls = Counter("responses_gateway_tool_calls", "Calls of gateway-run tools, by tool (mcp, file_search, "
                     "...) and the item's final status.", ["tool", "status"])
web_search_requests = Counter("responses_gateway_web_search_requests",
                              "Searches asked of a web search provider, by provider kind and outcome (ok, error, "
                              "rate_limited, cached).", ["provider", "outcome"])
web_fetches = Counter("responses_gateway_web_fetches", "Pages fetched for web_search (open_page, find_in_page), by "
                      "outcome (ok, refused, error, too_large).", ["outcome"])
limiter_errors = Counter("responses_gateway_limiter_errors",
                         "Calls to the Redis limiter that failed or timed out, by operation (open, admit, "
                         "release, renew); the requests were admitted (per-key limits fail open).", ["op"])

_finished: dict[str, Counter] = {}


def finished(status: str) -> Counter:
    """`responses`' child for a terminal status, kept here: prometheus_client's `labels()` checks and locks on
    every call, and every response ends with one."""
    child = _finished.get(status)
    if child is None:
        child = _finished[status] = responses.labels(status=status)
    return child


# Seconds. Token streams start in tens of milliseconds (a local model, a cache hit) and run for minutes.
LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
STORE = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

# Observed once per response (pipeline.Observation), never per token. `route` is the matching rule's
# `match` (bounded by the routing file); `model` the requested name.
time_to_first_token = Histogram("responses_gateway_time_to_first_token_seconds",
                                "From the request to the first output event sent, per response.", ["route"],
                                buckets=LATENCY)
duration = Histogram("responses_gateway_response_duration_seconds",
                     "From the request to the terminal event, by route and terminal status.", ["route", "status"],
                     buckets=LATENCY)
upstream_latency = Histogram("responses_gateway_upstream_latency_seconds",
                             "From opening the upstream request to its first events (first byte of the body).",
                             ["route"], buckets=LATENCY)
store_latency = Histogram("responses_gateway_store_latency_seconds",
                          "Time to save one finished response (successful saves).", buckets=STORE)
# Per store write (a save, a queued background response, an event-log flush...): the time it waited before
# its transaction could start — SQLite's write lock, held by another process; a pooled connection on
# PostgreSQL. And the writes that waited at all, by how: `host` queued on the host's writer lock (woken the
# moment it is released), `busy` slept in SQLite's busy handler, `pool` waited for a PostgreSQL connection.
LOCK_WAIT = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 10.0)
store_lock_wait = Histogram("responses_gateway_store_lock_wait_seconds",
                            "Time each store write waited for the database's write lock (SQLite) or a pooled "
                            "connection (PostgreSQL) before its transaction started.", buckets=LOCK_WAIT)
store_lock_waits = Counter("responses_gateway_store_lock_waits",
                           "Store writes that found the write lock held (or no pooled connection free), by how "
                           "they waited: host, busy (SQLite's busy handler, which sleeps), pool.", ["how"])
tokens = Counter("responses_gateway_tokens", "Tokens used, from each response's final usage, by direction "
                 "(input, output), model and route.", ["direction", "model", "route"])
in_flight = Gauge("responses_gateway_responses_in_flight", "Responses being generated now (streamed or not), "
                  "summed over live workers.", multiprocess_mode="livesum")


# Collectors read at scrape time (e.g. the pools' per-replica counts, upstreams/pool.py): plain integers on the
# request path, no metric call per request. With several workers each scrape shows the answering worker's.
EXTRA: list[Any] = []


def render() -> bytes:
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        for collector in EXTRA:
            registry.register(collector)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def register(collector: Any) -> None:
    """A collector read at every scrape, in single- and multi-process mode alike."""
    EXTRA.append(collector)
    REGISTRY.register(collector)
