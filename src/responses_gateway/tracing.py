"""OpenTelemetry tracing, opt-in: a span per response with a child span per upstream step, one for the store
write, and one per MCP tool listing or call. Off (the default) it costs one `is None` check per response: the
SDK is not even imported.

`serve --otel` (or RG_OTEL, or OTEL_EXPORTER_OTLP_ENDPOINT set) exports over OTLP/HTTP to the endpoint the
standard OTEL_EXPORTER_OTLP_* variables name (default http://localhost:4318), from every worker process.
Tests install their own provider with `enable(provider)` and an in-memory exporter.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

TRACER: Any = None  # an opentelemetry Tracer once tracing is on
PROVIDER: Any = None


def wanted(otel: bool) -> bool:
    return otel or bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def installed() -> bool:
    """The otel extra is there (checked before serving: workers would each fail with a traceback)."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def setup() -> None:
    """Export this process's spans over OTLP/HTTP in batches (`flush` sends the last ones at shutdown)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    enable(provider)


def resource() -> Any:
    """Who sends the spans: the service, and this process — with `--workers N` each worker exports its own,
    told apart by `service.instance.id` (unique per process) and `process.pid`. OTEL_SERVICE_NAME and
    OTEL_RESOURCE_ATTRIBUTES, when set, win over these."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    ours: dict[str, str | int] = {"service.name": "responses-gateway", "service.instance.id": str(uuid.uuid4()),
                                  "process.pid": os.getpid()}
    return Resource.create(ours).merge(OTELResourceDetector().detect())


def enable(provider: Any) -> None:
    """Trace with `provider` (None: stop tracing)."""
    global TRACER, PROVIDER
    PROVIDER = provider
    TRACER = None if provider is None else provider.get_tracer("responses_gateway")


def flush() -> None:
    """Export what is batched (at shutdown: the SDK's own exit hook does not run after every SIGTERM)."""
    if PROVIDER is not None:
        PROVIDER.force_flush(5000)
