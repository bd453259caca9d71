"""OpenTelemetry tracing through the real gateway (in-memory exporter): one span per response, with a child
span for the upstream step and one for the store write; an upstream that refuses ends the span in error."""

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from responses_gateway import tracing  # noqa: E402
from tests.helpers import create  # noqa: E402
from tests.support.fake_chat import Stream, error_json, make_usage, text_stream  # noqa: E402


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.enable(None)


def test_a_span_per_response_with_upstream_and_store_children(http, upstream, spans):
    upstream.enqueue(Stream(text_stream(["Hel", "lo"], usage=make_usage(prompt_tokens=11, completion_tokens=7))))
    made = create(http, {"model": "fake-model", "input": "hi"})
    by_name = {span.name: span for span in spans.get_finished_spans()}
    assert set(by_name) == {"response", "upstream", "store"}
    root = by_name["response"]
    assert root.parent is None
    assert root.attributes["responses_gateway.response_id"] == made["id"]
    assert root.attributes["responses_gateway.status"] == "completed"
    assert root.attributes["gen_ai.request.model"] == "fake-model"
    assert root.attributes["gen_ai.usage.input_tokens"] == 11 and root.attributes["gen_ai.usage.output_tokens"] == 7
    for child in (by_name["upstream"], by_name["store"]):
        assert child.parent.span_id == root.context.span_id and child.context.trace_id == root.context.trace_id
        assert root.start_time <= child.start_time <= child.end_time <= root.end_time
    assert by_name["upstream"].end_time <= by_name["store"].start_time


def test_an_upstream_refusal_ends_the_span_in_error(http, upstream, spans):
    upstream.enqueue(error_json(503, "overloaded", type="server_error"))
    r = http.post("/v1/responses", json={"model": "fake-model", "input": "hi"})
    assert r.status_code == 503
    by_name = {span.name: span for span in spans.get_finished_spans()}
    assert set(by_name) == {"response", "upstream"}
    assert by_name["response"].status.status_code == StatusCode.ERROR


def test_serve_exports_over_otlp_when_the_endpoint_is_set(upstream):
    """A real process with OTEL_EXPORTER_OTLP_ENDPOINT set posts its spans (OTLP/HTTP protobuf) to it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.test_cli import serve, stop

    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    upstream.enqueue(Stream(text_stream(["Hel", "lo"], usage=make_usage())))
    proc, url = serve("--db", "none", env={"RG_UPSTREAM_URL": upstream.base_url,
                                           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}"})
    try:
        import httpx

        made = httpx.post(f"{url}/v1/responses", json={"model": "fake-model", "input": "hi"}, timeout=30).json()
    finally:
        logs = stop(proc)  # the SDK flushes its batch at exit
        collector.shutdown()
    assert [path for path, _ in received], logs
    assert all(path == "/v1/traces" for path, _ in received)
    body = b"".join(data for _, data in received)
    assert made["id"].encode() in body and b"upstream" in body and b"responses-gateway" in body
