"""Upstream deadlines (connect, first byte, idle, total), each reported as itself, and SSE keep-alive comments
while the upstream is silent. The fake upstream stalls and trickles for real over loopback."""

from __future__ import annotations

import socket

import httpx
import pytest

from responses_gateway.config import Settings
from tests.support.fake_chat import Sleep, Stream, text_stream
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream


@pytest.fixture
def gateway_with(upstream):
    servers: list[GatewayServer] = []

    def start(**settings) -> httpx.Client:
        server = GatewayServer(Settings(**{"upstream_url": upstream.base_url, "db": "none", **settings}))
        servers.append(server.__enter__())
        return httpx.Client(base_url=server.url, timeout=30)

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_an_upstream_that_never_answers_hits_the_first_byte_deadline(gateway_with, upstream):
    http = gateway_with(upstream_first_byte_timeout=1.0)
    upstream.enqueue(Stream(text_stream(["late"]), before_headers=30))
    r = http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True})
    assert r.status_code == 504
    assert r.json()["error"]["code"] == "upstream_first_byte_timeout" and "first-byte" in r.json()["error"]["message"]
    assert upstream.wait_disconnect(timeout=5)


def test_a_silent_stream_hits_the_idle_deadline(gateway_with, upstream):
    http = gateway_with(upstream_read_timeout=1.0)
    frames = text_stream(["Hel", "lo"])
    upstream.enqueue(Stream(frames[:2] + [Sleep(30)] + frames[2:]))
    result = check_stream(http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True}).content)
    assert result.terminal["type"] == "response.failed"
    error = result.events[-2]
    assert error["code"] == "upstream_idle_timeout" and "idle timeout" in error["message"]
    assert upstream.wait_disconnect(timeout=5)


def test_a_trickling_stream_hits_the_total_deadline(gateway_with, upstream):
    """One byte-sized token every 0.2 s never trips the idle deadline; the total deadline still ends it."""
    http = gateway_with(upstream_read_timeout=5.0, upstream_total_timeout=1.5)
    upstream.enqueue(Stream(text_stream(["t"] * 60), delay=0.2))
    result = check_stream(http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True}).content)
    assert result.terminal["type"] == "response.failed"
    assert result.events[-2]["code"] == "upstream_total_timeout"
    assert 0 < len(result.text) < 60


def test_connect_deadline_is_reported_as_such(upstream):
    """A listener whose backlog is full never completes the handshake (SYNs are dropped)."""
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(0)
    fillers = []
    try:
        for _ in range(8):  # fill the accept queue so further connects hang in SYN_SENT
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(blackhole.getsockname())
            fillers.append(s)
        url = f"http://127.0.0.1:{blackhole.getsockname()[1]}/v1"
        with GatewayServer(Settings(upstream_url=url, db="none", upstream_connect_timeout=1.0)) as gw:
            r = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "x"}, timeout=30)
        assert r.status_code == 504, r.text  # the kernel drops the SYNs: the connect deadline runs out
        assert r.json()["error"]["code"] == "upstream_connect_timeout"
    finally:
        for s in fillers:
            s.close()
        blackhole.close()


def test_keep_alive_comments_while_the_upstream_is_silent(gateway_with, upstream):
    http = gateway_with(sse_keepalive=0.3)
    frames = text_stream(["a", "b"])
    upstream.enqueue(Stream(frames[:3] + [Sleep(1.5)] + frames[3:]))
    raw = http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True}).content
    assert raw.count(b": keep-alive\n\n") >= 2
    result = check_stream(raw)  # comments are not events: the stream is still exactly right
    assert result.terminal["type"] == "response.completed" and result.text == "ab"


def test_a_non_streamed_response_reports_its_own_deadline(gateway_with, upstream):
    """Without `stream`, the 502 carries the deadline's own code (as the stream's `error` event does), not
    `server_error`."""
    http = gateway_with(upstream_read_timeout=1.0, upstream_total_timeout=30.0)
    frames = text_stream(["Hel", "lo"])
    upstream.enqueue(Stream(frames[:2] + [Sleep(30)] + frames[2:]))
    r = http.post("/v1/responses", json={"model": "m", "input": "x"})
    assert r.status_code == 502
    assert r.json()["error"]["code"] == "upstream_idle_timeout" and "idle timeout" in r.json()["error"]["message"]

    http = gateway_with(upstream_read_timeout=5.0, upstream_total_timeout=1.5)
    upstream.enqueue(Stream(text_stream(["t"] * 60), delay=0.2))
    r = http.post("/v1/responses", json={"model": "m", "input": "x"})
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_total_timeout", r.json()


def test_compact_reports_its_own_deadline(gateway_with, upstream):
    """`/v1/responses/compact` failing on a deadline answers with the deadline's own code, as a non-streamed
    response does, not the closed-set `server_error` of the response object."""
    http = gateway_with(upstream_read_timeout=1.0, upstream_total_timeout=30.0)
    frames = text_stream(["Sum", "mary"])
    upstream.enqueue(Stream(frames[:2] + [Sleep(30)] + frames[2:]))
    r = http.post("/v1/responses/compact", json={"model": "m", "input": "hello"})
    assert r.status_code == 502
    error = r.json()["error"]
    assert error["code"] == "upstream_idle_timeout" and "idle timeout" in error["message"], error
    assert error["type"] == "server_error"
