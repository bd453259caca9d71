"""OpenTelemetry tracing through the real gateway (in-memory exporter): one span per response, with a child
span for the upstream step and one for the store write; an upstream that refuses ends the span in error;
MCP tool listings and calls (a real MCP server on loopback) are children of the response's span."""

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


@pytest.fixture(scope="module")
def mcp_http(_upstream_server, tmp_path_factory):
    import httpx

    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    settings = Settings(upstream_url=_upstream_server.base_url, db=str(tmp_path_factory.mktemp("mcp") / "db"),
                        mcp_allow_hosts="127.0.0.1", mcp_timeout=5.0)
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        yield client


def trace_lines(spans) -> str:
    """Spans as docs/observability.md shows them: name, parent, id, times relative to the first span's start,
    attributes (and the status when it is not OK)."""
    spans = sorted(spans, key=lambda s: s.start_time)
    zero = spans[0].start_time
    lines = []
    for span in spans:
        parent = f"{span.parent.span_id:016x}" if span.parent else "-"
        times = f"+{(span.start_time - zero) / 1e6:.1f}ms..+{(span.end_time - zero) / 1e6:.1f}ms"
        attrs = [f"{k}={v}" for k, v in span.attributes.items()]
        if span.status.status_code == StatusCode.ERROR:
            attrs.append(f"status=ERROR({span.status.description})")
        lines.append(f"{span.name:<14} parent={parent:<16} span={span.context.span_id:016x}  {times}  "
                     + "  ".join(attrs))
    return "\n".join(lines)


def test_mcp_listing_and_calls_are_children_of_the_response_span(mcp_http, upstream, mcp_server, spans):
    from tests.support.fake_chat import tool_calls_stream

    secret = "mcp-secret-token-42"
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url, "require_approval": "never",
            "headers": {"X-Trace": "t1"}, "authorization": secret}
    gone = {"type": "mcp", "server_label": "gone", "server_url": "http://127.0.0.1:9/mcp", "require_approval": "never"}
    upstream.enqueue(tool_calls_stream([("c1", "calc__add", ['{"a": 2, "b": 40}']), ("c2", "calc__explode", ["{}"])]))
    upstream.enqueue(text_stream(["42, and the other tool failed."]))
    made = create(mcp_http, {"model": "fake-model", "input": "2+40?", "tools": [tool, gone]})
    assert [(i["type"], i.get("status")) for i in made["output"]] == [
        ("mcp_list_tools", None), ("mcp_list_tools", None), ("mcp_call", "completed"), ("mcp_call", "failed"),
        ("message", "completed")]
    finished = spans.get_finished_spans()
    print(trace_lines(finished))  # what docs/observability.md shows
    assert [s.name for s in sorted(finished, key=lambda s: s.start_time)] == [
        "response", "mcp.list_tools", "mcp.list_tools", "upstream", "mcp.call", "mcp.call", "upstream", "store"]
    (root,) = [s for s in finished if s.name == "response"]
    assert root.attributes["responses_gateway.response_id"] == made["id"]
    for child in finished:
        if child is not root:
            assert child.parent.span_id == root.context.span_id and child.context.trace_id == root.context.trace_id
            assert root.start_time <= child.start_time <= child.end_time <= root.end_time
    listed, unreachable = sorted((s for s in finished if s.name == "mcp.list_tools"),
                                 key=lambda s: s.attributes["responses_gateway.mcp.server_label"])
    assert dict(listed.attributes) == {"responses_gateway.mcp.server_label": "calc", "server.address": "127.0.0.1",
                                       "mcp.method.name": "tools/list",
                                       "responses_gateway.mcp.tools": len(made["output"][0]["tools"])}
    assert listed.status.status_code == StatusCode.UNSET
    assert unreachable.attributes["responses_gateway.mcp.server_label"] == "gone"
    assert unreachable.attributes["error.type"] == "mcp_protocol_error"
    assert "responses_gateway.mcp.tools" not in unreachable.attributes
    assert unreachable.status.status_code == StatusCode.ERROR
    assert unreachable.status.description == made["output"][1]["error"]
    added, exploded = (s for s in sorted(finished, key=lambda s: s.start_time) if s.name == "mcp.call")
    assert dict(added.attributes) == {"responses_gateway.mcp.server_label": "calc", "server.address": "127.0.0.1",
                                      "mcp.method.name": "tools/call", "gen_ai.tool.name": "add"}
    assert added.status.status_code == StatusCode.UNSET
    assert exploded.attributes["gen_ai.tool.name"] == "explode"
    assert exploded.attributes["error.type"] == "mcp_tool_execution_error"
    assert exploded.status.status_code == StatusCode.ERROR and "kaboom" in exploded.status.description
    assert exploded.status.description == made["output"][3]["error"]["content"][0]["text"]
    # the server's credentials and headers are used, never recorded
    recorded = trace_lines(finished) + repr([dict(s.attributes) for s in finished])
    assert secret not in recorded and "X-Trace" not in recorded and "t1" not in recorded


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
