"""OpenTelemetry tracing through the real gateway (in-memory exporter): one span per response, with a child
span for the upstream step and one for the store write; an upstream that refuses ends the span in error;
MCP tool listings and calls (a real MCP server on loopback) are children of the response's span."""

import contextlib
import time

import pytest

from tests.support import needs

needs.python_package("opentelemetry.sdk")

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

    from responses_gateway.configure import make as make_settings
    from tests.support.server import GatewayServer

    settings = make_settings(upstream_url=_upstream_server.base_url, db=str(tmp_path_factory.mktemp("mcp") / "db"),
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
        lines.append((f"{span.name:<14} parent={parent:<16} span={span.context.span_id:016x}  {times}  "
                     + "  ".join(attrs)).rstrip())
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


def test_mcp_spans_of_an_answer_after_compaction_are_children_of_the_response_span(mcp_http, upstream, mcp_server,
                                                                                     spans):
    """A threshold compaction runs the MCP loop for its answer: its spans have the same parent."""
    from tests.support.fake_chat import tool_calls_stream

    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url, "require_approval": "never"}
    upstream.enqueue(text_stream(["The user wants sums."]),
                     tool_calls_stream([("c1", "calc__add", ['{"a": 1, "b": 2}'])]), text_stream(["3"]))
    made = create(mcp_http, {"model": "fake-model", "input": "1+2? " * 20, "tools": [tool], "store": False,
                             "context_management": [{"type": "compaction", "compact_threshold": 5}]})
    assert [i["type"] for i in made["output"]] == ["compaction", "mcp_list_tools", "mcp_call", "message"]
    finished = sorted(spans.get_finished_spans(), key=lambda s: s.start_time)
    assert [s.name for s in finished] == ["response", "upstream", "mcp.list_tools", "upstream", "mcp.call",
                                          "upstream"]
    assert all(s.parent.span_id == finished[0].context.span_id for s in finished[1:])


def test_the_resource_names_the_process_and_the_operator_may_rename_the_service(monkeypatch):
    import os

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    ours = tracing.resource().attributes
    assert ours["service.name"] == "responses-gateway" and ours["process.pid"] == os.getpid()
    assert ours["service.instance.id"] != tracing.resource().attributes["service.instance.id"]
    monkeypatch.setenv("OTEL_SERVICE_NAME", "edge-gateway")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging")
    theirs = tracing.resource().attributes
    assert theirs["service.name"] == "edge-gateway" and theirs["deployment.environment.name"] == "staging"


@contextlib.contextmanager
def collector():
    """A tiny OTLP/HTTP receiver on loopback: yields its endpoint and the spans posted to /v1/traces so far,
    each a dict of its name, ids, attributes and its resource's attributes."""
    import gzip
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["content-length"]))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            assert self.path == "/v1/traces", self.path
            for batch in ExportTraceServiceRequest.FromString(body).resource_spans:
                resource = values(batch.resource.attributes)
                for scope in batch.scope_spans:
                    received.extend({"name": span.name, "trace": span.trace_id.hex(), "span": span.span_id.hex(),
                                     "parent": span.parent_span_id.hex(), "attributes": values(span.attributes),
                                     "resource": resource} for span in scope.spans)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()


def values(attributes) -> dict:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in attributes}


def test_serve_exports_over_otlp_when_the_endpoint_is_set(upstream):
    """A real process with OTEL_EXPORTER_OTLP_ENDPOINT set posts its spans (OTLP/HTTP protobuf) to it."""
    import httpx

    from tests.operations.test_cli import serve, stop

    upstream.enqueue(Stream(text_stream(["Hel", "lo"], usage=make_usage())))
    with collector() as (endpoint, received):
        proc, url = serve("--db", "none", env={"RG_UPSTREAM_URL": upstream.base_url,
                                               "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
        try:
            made = httpx.post(f"{url}/v1/responses", json={"model": "fake-model", "input": "hi"}, timeout=30).json()
        finally:
            logs = stop(proc)  # spans still batched are flushed at shutdown
    assert [s["name"] for s in received] == ["upstream", "response"], logs
    root = received[1]
    assert root["attributes"]["responses_gateway.response_id"] == made["id"]
    assert root["resource"]["service.name"] == "responses-gateway"
    assert received[0]["parent"] == root["span"] and received[0]["trace"] == root["trace"]


def test_each_worker_exports_its_own_spans_and_flushes_them_at_shutdown(upstream, tmp_path):
    """`serve --workers 2 --otel`: both worker processes export, each response's span with its children, and
    nothing is lost at SIGTERM although the batch delay is far longer than the test (only the flush at
    shutdown sends them)."""
    import httpx

    from tests.operations.test_cli import serve, stop

    upstream.default = Stream(text_stream(["Hel", "lo"], usage=make_usage()))
    with collector() as (endpoint, received):
        proc, url = serve("--workers", "2", "--otel", "--db", str(tmp_path / "r.db"), "--log-level", "warning",
                          env={"RG_UPSTREAM_URL": upstream.base_url, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                               "OTEL_BSP_SCHEDULE_DELAY": "600000"})
        try:
            def one(_):
                r = httpx.post(f"{url}/v1/responses", json={"model": "fake-model", "input": "hi"},
                               headers={"connection": "close"}, timeout=30)
                assert r.status_code == 200, r.text
                return r.json()["id"]

            # one connection at a time, a moment apart: both workers wait on the one socket and race for each
            # (requests sent at once are all taken by whichever worker wakes first: asyncio accepts every
            # connection queued at a wake-up)
            made = []
            for i in range(24):
                made.append(one(i))
                time.sleep(0.02)
            assert received == []  # still batched in the workers
        finally:
            logs = stop(proc)
    roots = {s["attributes"]["responses_gateway.response_id"]: s for s in received if s["name"] == "response"}
    assert set(roots) == set(made), logs
    pids = {s["resource"]["process.pid"] for s in received}
    instances = {s["resource"]["service.instance.id"] for s in received}
    assert len(pids) == 2 and len(instances) == 2 and proc.pid not in pids, logs
    for root in roots.values():
        children = [s for s in received if s["parent"] == root["span"]]
        assert sorted(s["name"] for s in children) == ["store", "upstream"]
        for child in children:
            assert child["trace"] == root["trace"] and child["resource"] == root["resource"]


def test_workers_without_the_otel_extra_is_one_clear_error(tmp_path):
    """Checked before the workers start: not a traceback from each worker and an exit status of 0."""
    import os
    import subprocess
    import sys

    from tests.operations.test_cli import free_port

    stub = tmp_path / "opentelemetry"
    stub.mkdir()
    (stub / "__init__.py").write_text("raise ImportError('opentelemetry is not installed (a stub)')\n")
    done = subprocess.run([sys.executable, "-m", "responses_gateway", "serve", "--workers", "2", "--otel",
                           "--db", "none", "--port", str(free_port())], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert done.returncode == 1
    assert done.stderr.strip().endswith("tracing needs the otel extra: pip install 'responses-gateway[otel]'")
    assert "Traceback" not in done.stderr
