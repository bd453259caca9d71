"""Bounded request cost: nesting, object count, input length and integer width are refused with 400s, and a
large body is scanned and parsed off the event loop so other requests keep being answered meanwhile."""

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from responses_gateway.config import Settings
from tests.edge.test_requests import error_of
from tests.support.fake_chat import text_stream
from tests.support.server import GatewayServer

BIG = 2**70
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "maximum": BIG}}}


@pytest.mark.parametrize(("extra", "param"), [
    ({"max_output_tokens": BIG}, "max_output_tokens"),
    ({"max_tool_calls": BIG}, "max_tool_calls"),
    ({"max_output_tokens": -BIG}, "max_output_tokens"),
    ({"tools": [{"type": "function", "name": "f", "parameters": SCHEMA}]}, "tools[0].parameters.properties.a.maximum"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": SCHEMA}}},
     "text.format.schema.properties.a.maximum"),
])
def test_integers_wider_than_64_bits_are_a_400(http, upstream, extra, param):
    err = error_of(http, {"model": "m", "input": "x", **extra})
    assert err["param"] == param and err["code"] == "integer_out_of_range"
    assert str(abs(BIG)) in err["message"]
    assert upstream.requests == []


def test_allowed_tools_that_is_not_an_array_is_a_400(http, upstream):
    err = error_of(http, {"model": "m", "input": "x", "tool_choice": {"type": "allowed_tools", "tools": 5}})
    assert err["param"] == "tool_choice.tools" and err["code"] == "invalid_type"


def test_64_bit_integers_still_pass(http, upstream):
    upstream.enqueue(text_stream(["ok"]))
    schema = {"type": "object", "properties": {"a": {"type": "integer", "maximum": 2**63 - 1}}}
    resp = http.post("/v1/responses", json={"model": "m", "input": "x", "text": {
        "format": {"type": "json_schema", "name": "x", "schema": schema}}})
    assert resp.status_code == 200, resp.text
    assert upstream.requests[0].body["response_format"]["json_schema"]["schema"] == schema


def test_nesting_too_deep_is_a_400(http, upstream):
    deep: dict = {"type": "string"}
    for _ in range(80):
        deep = {"type": "array", "items": deep}
    err = error_of(http, {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f",
                                                                 "parameters": deep}]})
    assert err["code"] == "nesting_too_deep" and "64" in err["message"]


def test_too_many_input_items_is_a_400(http, upstream):
    err = error_of(http, {"model": "m", "input": [{"role": "user", "content": "x"}] * 20_001})
    assert err["param"] == "input" and err["code"] == "array_above_max_length"


def test_too_many_objects_is_a_400(http, upstream):
    err = error_of(http, {"model": "m", "input": [{"role": "user", "content": "x"}] * 200_001})
    assert err["code"] == "request_too_complex"


def _probe_while(gateway, send) -> tuple[list[float], object]:
    """Probe /health continuously while `send()` runs in another thread; the probes' latencies and its result."""
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("r", send()))
    latencies = []
    with httpx.Client(base_url=gateway.url, timeout=30) as probe:
        probe.get("/health")
        worker.start()
        while worker.is_alive():
            t = time.perf_counter()
            assert probe.get("/health").status_code == 200
            latencies.append(time.perf_counter() - t)
            time.sleep(0.02)
    worker.join()
    return latencies, result["r"]


@pytest.mark.parametrize("kind", ["refused", "accepted"])
def test_a_30_mb_body_does_not_stall_health(kind):
    """The gateway alone does the work (no fake model server in this process parsing the body too, which
    would hold the same GIL): an unreachable upstream, reached only after the body is parsed and validated."""
    if kind == "refused":  # 700k tiny items: over every count limit, found by the scan alone
        body = {"model": "m", "input": [{"role": "user", "content": f"hello there {i}"} for i in range(700_000)]}
    else:  # 1,500 items of 20 kB: within the limits, parsed and validated in a worker thread
        body = {"model": "m", "input": [{"role": "user", "content": "y" * 20_000 + str(i)} for i in range(1_500)]}
    raw = orjson.dumps(body)
    assert len(raw) > 25_000_000

    with GatewayServer(Settings(upstream_url="http://127.0.0.1:9/v1", db="none")) as gateway:
        def send():
            with httpx.Client(timeout=120) as c:
                return c.post(f"{gateway.url}/v1/responses", content=raw,
                              headers={"content-type": "application/json"})

        latencies, resp = _probe_while(gateway, send)
    if kind == "refused":
        assert resp.status_code == 400 and resp.json()["error"]["code"] == "request_too_complex"
    else:  # parsed, validated, and sent on: the upstream is what failed
        assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unreachable", resp.text
    assert latencies and max(latencies) < 1.0, latencies  # a generous bound; bench/ measures properly


@pytest.fixture
def model_server():
    """The benchmark's fake model server, in its own process: parsing the 30 MB it is sent must not count
    against the gateway."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens", "5"], cwd=root,
                            env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        assert "listening on" in line, line
        yield line.split()[-2]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


@contextlib.contextmanager
def cpu_per_callback(thread_id: int, but: str = "\0"):
    """The CPU time of each callback the asyncio loop on `thread_id` runs (a task's step is one): CPU, not
    wall time, so a busy machine does not make a short callback look long. Callbacks named `but` are left
    out."""
    spent: list[tuple[float, str]] = []
    run = asyncio.events.Handle._run

    def timed(handle):
        before = repr(handle)[:300]
        if threading.get_ident() != thread_id or but in before:
            return run(handle)
        began = time.thread_time()
        try:
            return run(handle)
        finally:
            took = time.thread_time() - began
            spent.append((took, before if took > 0.01 else ""))

    asyncio.events.Handle._run = timed
    try:
        yield spent
    finally:
        asyncio.events.Handle._run = run


def test_no_step_of_a_30_mb_request_holds_the_event_loop(model_server, tmp_path):
    """15,000 items of 2 kB, streamed, stored: read, scanned, parsed, normalized, numbered, converted, sent
    upstream and stored without any one callback on the event loop taking more than 40 ms of CPU (before,
    normalizing, numbering and converting the items ran in single steps of a few hundred ms)."""
    items = [{"role": "user", "content": "y" * 2000 + str(i)} for i in range(15_000)]
    raw = orjson.dumps({"model": "m", "input": items, "stream": True})
    assert len(raw) > 30_000_000
    settings = Settings(upstream_url=model_server, db=f"sqlite:///{tmp_path}/gw.db")
    with GatewayServer(settings, loop="asyncio") as gateway, httpx.Client(base_url=gateway.url, timeout=120) as c:
        with cpu_per_callback(gateway.thread.ident) as spent:
            resp = c.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
        assert resp.status_code == 200 and '"response.completed"' in resp.text, resp.text[-500:]
        rid = orjson.loads(resp.text.split("data: ", 2)[1].split("\n")[0])["response"]["id"]
        listed = c.get(f"/v1/responses/{rid}/input_items", params={"limit": 1, "order": "asc"}).json()
        assert listed["data"][0]["content"][0]["text"] == "y" * 2000 + "0"
    assert spent and max(spent)[0] < 0.040, sorted(spent)[-5:]


def test_no_step_of_a_20_mb_websocket_frame_holds_the_event_loop(model_server, tmp_path):
    """The same for a response.create frame: scanned and parsed (its input element by element) in a worker
    thread, validated without encoding it again. Left out: the socket read that completes the frame, where
    the WebSocket library unmasks and joins all 20 MB in one step (about 3 ms a MB, docs/limits.md)."""
    from websockets.sync.client import connect

    items = [{"role": "user", "content": "y" * 2000 + str(i)} for i in range(10_000)]
    frame = orjson.dumps({"type": "response.create", "model": "m", "input": items})
    settings = Settings(upstream_url=model_server, db=f"sqlite:///{tmp_path}/gw.db")
    with GatewayServer(settings, loop="asyncio") as gateway, \
            connect(gateway.url.replace("http://", "ws://") + "/v1/responses", max_size=None) as ws:
        with cpu_per_callback(gateway.thread.ident, but="_SelectorSocketTransport._read_ready") as spent:
            ws.send(frame)
            events = []
            while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
                events.append(orjson.loads(ws.recv(timeout=60)))
        assert events[-1]["type"] == "response.completed", events[-1]
    assert spent and max(spent)[0] < 0.040, sorted(spent)[-5:]
