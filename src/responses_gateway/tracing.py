"""OpenTelemetry tracing, opt-in: a span per response with a child span per upstream step and one for the
store write. Off (the default) it costs one `is None` check per response: the SDK is not even imported.

`serve --otel` (or RG_OTEL, or OTEL_EXPORTER_OTLP_ENDPOINT set) exports over OTLP/HTTP to the endpoint the
standard OTEL_EXPORTER_OTLP_* variables name (default http://localhost:4318). Tests install their own
provider with `enable(provider)` and an in-memory exporter.
"""

from __future__ import annotations

import os
from typing import Any

TRACER: Any = None  # an opentelemetry Tracer once tracing is on
PROVIDER: Any = None


def wanted(otel: bool) -> bool:
    return otel or bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def setup() -> None:
    """Export spans over OTLP/HTTP in batches (the SDK flushes them at exit)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "responses-gateway"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    enable(provider)


def enable(provider: Any) -> None:
    """Trace with `provider` (None: stop tracing)."""
    global TRACER, PROVIDER
    PROVIDER = provider
    TRACER = None if provider is None else provider.get_tracer("responses_gateway")


def flush() -> None:
    """Export what is batched (at shutdown: the SDK's own exit hook does not run after every SIGTERM)."""
    if PROVIDER is not None:
        PROVIDER.force_flush(5000)
