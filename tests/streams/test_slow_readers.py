"""Clients that stop reading, against a real gateway process over real sockets: the send deadline
(--send-timeout) ends the response as failed and stored, closes the upstream, frees the in-flight slot and
drops the connection; the upstream's total deadline ends a response whether or not anyone reads it; at
SIGTERM such streams are ended and stored, without tracebacks; over WebSocket the same, and a keepalive
timeout drops the connection rather than wait on a buffer that never drains.

Each client reads about 2 KB and then nothing, with a small receive buffer, so the gateway's writes back
up within a few megabytes of a fast upstream stream."""

from __future__ import annotations

import re
import signal
import socket
import sqlite3
import time

import httpx
import orjson
import pytest
from websockets.client import ClientProtocol
from websockets.uri import parse_uri

from tests.support.backends import GatewayProcess
from tests.support.fake_chat import Stream, text_stream

SLACK = 8.0  # on top of each bound: a loaded machine is slow, but never this slow
BIG = 20_000  # tokens of 1000 characters: far more than the socket buffers between the gateway and a client


def _big_stream() -> Stream:
    return Stream(text_stream(["x" * 1000] * BIG))


def _small_buffer_socket(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def stalled_sse(port: int, input_: str = "hi") -> tuple[socket.socket, str]:
    """POST a streamed response, read about 2 KB of it, then read nothing more. Returns the socket and the
    response's id."""
    body = orjson.dumps({"model": "m", "input": input_, "stream": True})
    s = _small_buffer_socket(port)
    s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while len(got) < 2048 or b'"resp_' not in got:
        got += s.recv(2048)
    match = re.search(rb'"(resp_[0-9a-zA-Z]+)"', got)
    assert match, got[:500]
    return s, match.group(1).decode()


TCP_ESTABLISHED = 1


def _closed_within(s: socket.socket, limit: float) -> float:
    """Seconds until the server drops or closes the connection, read without reading from the socket (the
    kernel's TCP state), so the client stays a client that reads nothing."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != TCP_ESTABLISHED:
            return time.monotonic() - started
        time.sleep(0.05)
    return float("inf")


def stored(db, response_id: str, limit: float = 20.0) -> dict | None:
    """The stored response, once it is there (waiting up to `limit` seconds)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT body FROM responses WHERE id = ?", (response_id,)).fetchone()
        if row is not None:
            return orjson.loads(row[0])
        time.sleep(0.1)
    return None


def _metric(gw: GatewayProcess, sample: str) -> float:
    for line in httpx.get(f"{gw.url}/metrics", timeout=10).text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


def test_a_client_that_stops_reading_is_ended_within_the_send_timeout(upstream, tmp_path):
    db = tmp_path / "slow.db"
    upstream.enqueue(_big_stream(), text_stream(["next ", "one"]))
    gw = GatewayProcess(upstream.base_url, str(db), "--send-timeout", "2", "--max-in-flight", "1",
                        log_path=tmp_path / "gw.log", log_level="info").wait_ready()
    try:
        s, rid = stalled_sse(gw.port)
        time.sleep(1)  # the gateway's writes back up, then nothing is read for 2 s
        took = _closed_within(s, 2 + SLACK + 10)
        assert took < 2 + SLACK, took  # dropped, not held
        final = stored(db, rid)
        assert final is not None and final["status"] == "failed", final
        assert "send timeout" in final["error"]["message"], final["error"]
        assert upstream.wait_disconnect(10)  # the upstream request was closed
        # the in-flight slot is free again (--max-in-flight 1)
        answer = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "again"}, timeout=30)
        assert answer.status_code == 200 and answer.json()["output"][0]["content"][0]["text"] == "next one"
        assert _metric(gw, 'responses_gateway_connections_closed_total{reason="send_timeout"}') == 1
        s.close()
    finally:
        gw.kill()
    log = (tmp_path / "gw.log").read_text()
    assert "send timeout" in log and "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


def test_a_stream_that_began_before_its_upstream_answered_is_ended_too(upstream, tmp_path):
    """A stream whose upstream took longer than its --sse-keepalive grace starts before the response does
    (api/responses.py started_late); a client that then stops reading is ended and stored all the same."""
    db = tmp_path / "late.db"
    upstream.enqueue(Stream(text_stream(["x" * 1000] * BIG), before_headers=1.5))
    gw = GatewayProcess(upstream.base_url, str(db), "--send-timeout", "2", "--sse-keepalive", "0.5",
                        log_path=tmp_path / "gw.log").wait_ready()
    try:
        s, rid = stalled_sse(gw.port)
        assert _closed_within(s, 2 + SLACK + 10) < 2 + SLACK
        final = stored(db, rid)
        assert final is not None and final["status"] == "failed", final
        assert "send timeout" in final["error"]["message"], final["error"]
        s.close()
    finally:
        gw.kill()
    log = (tmp_path / "gw.log").read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


def test_a_slow_reader_that_reads_is_not_cut(upstream, tmp_path):
    """The send deadline counts time without progress, not the time the buffer stays full: a client that
    reads 4 KB every half second keeps its stream well past --send-timeout."""
    upstream.enqueue(_big_stream())
    gw = GatewayProcess(upstream.base_url, "none", "--send-timeout", "2", log_path=tmp_path / "gw.log").wait_ready()
    try:
        s, _ = stalled_sse(gw.port)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            time.sleep(0.5)
            assert s.recv(4096), "closed"
        assert _closed_within(s, 0.2) == float("inf")  # still open, 4 periods of the deadline later
        s.close()
    finally:
        gw.kill()
    assert "send timeout" not in (tmp_path / "gw.log").read_text()


def test_the_total_deadline_ends_a_stream_nobody_reads(upstream, tmp_path):
    db = tmp_path / "total.db"
    upstream.enqueue(_big_stream())
    gw = GatewayProcess(upstream.base_url, str(db), "--send-timeout", "0", "--upstream-total-timeout", "3",
                        log_path=tmp_path / "gw.log").wait_ready()
    try:
        started = time.monotonic()
        s, rid = stalled_sse(gw.port)
        final = stored(db, rid, limit=3 + SLACK)
        assert final is not None and final["status"] == "failed", final
        assert "total timeout" in final["error"]["message"], final["error"]
        assert time.monotonic() - started < 3 + SLACK
        assert upstream.wait_disconnect(10)
        assert _closed_within(s, 10) < 10  # the last events could not go out: the connection is dropped
        s.close()
    finally:
        gw.kill()
    log = (tmp_path / "gw.log").read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


@pytest.mark.parametrize("send_timeout", ["0", "3"])
def test_sigterm_ends_and_stores_streams_nobody_reads(upstream, tmp_path, send_timeout):
    """The drain timeout ends streams whose clients read nothing like any other: stored as failed
    (server_shutting_down), no tracebacks, and the process exits. With a send timeout that runs out while
    the drain's last events wait on the client, still no traceback."""
    db = tmp_path / "drain.db"
    upstream.enqueue(*[_big_stream() for _ in range(3)])
    gw = GatewayProcess(upstream.base_url, str(db), "--send-timeout", send_timeout, "--drain-timeout", "2",
                        log_path=tmp_path / "gw.log").wait_ready()
    try:
        streams = [stalled_sse(gw.port, f"n{i}") for i in range(3)]
        time.sleep(0.5)
        gw.proc.send_signal(signal.SIGTERM)
        assert gw.proc.wait(timeout=2 + 5 + SLACK) is not None
    finally:
        gw.kill()
    for s, rid in streams:
        final = stored(db, rid, limit=1)
        assert final is not None and final["status"] == "failed", (rid, final)
        assert "shutting down" in final["error"]["message"] or send_timeout != "0", final["error"]
        s.close()
    log = (tmp_path / "gw.log").read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


class RawWebSocket:
    """A WebSocket client on a plain socket (websockets' sans-I/O protocol), so the test decides when it
    reads: the library clients read in the background."""

    def __init__(self, port: int):
        self.sock = _small_buffer_socket(port)
        self.proto = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/v1/responses"))
        self.proto.send_request(self.proto.connect())
        self._flush()
        while self.proto.handshake_exc is None and not self._handshaken():
            self.proto.receive_data(self.sock.recv(4096))

    def _handshaken(self) -> bool:
        return any(getattr(e, "status_code", None) == 101 for e in self.proto.events_received())

    def _flush(self) -> None:
        for data in self.proto.data_to_send():
            self.sock.sendall(data)

    def send(self, obj: dict) -> None:
        self.proto.send_text(orjson.dumps(obj))
        self._flush()

    def read_bytes(self, at_least: int) -> bytes:
        got = b""
        while len(got) < at_least:
            data = self.sock.recv(2048)
            assert data, "closed"
            got += data
            self.proto.receive_data(data)
        return got


def _stalled_turn(gw: GatewayProcess, db) -> dict | None:
    """A WebSocket turn whose client reads about 2 KB and then nothing: dropped within the bound; the
    response as stored."""
    ws = RawWebSocket(gw.port)
    ws.send({"type": "response.create", "model": "m", "input": "hi"})
    rid = re.search(rb'"(resp_[0-9a-zA-Z]+)"', ws.read_bytes(2048)).group(1).decode()
    took = _closed_within(ws.sock, 2 + SLACK + 10)
    assert took < 2 + SLACK, took
    ws.sock.close()
    return stored(db, rid)


def test_a_websocket_client_that_stops_reading_is_ended_and_stored(upstream, tmp_path):
    db = tmp_path / "ws.db"
    upstream.enqueue(_big_stream(), _big_stream())
    gw = GatewayProcess(upstream.base_url, str(db), "--send-timeout", "2", "--websocket-ping-interval", "0",
                        log_path=tmp_path / "gw.log").wait_ready()
    try:
        final = _stalled_turn(gw, db)
        assert final is not None and final["status"] == "failed" and "send timeout" in final["error"]["message"]
        assert upstream.wait_disconnect(10)

        # the keepalive: no pong (the ping sits behind what the client does not read) drops the connection
        # at once, rather than close it gracefully and wait on the buffer
        gw.kill()
        upstream.reset()
        upstream.enqueue(_big_stream())
        gw = GatewayProcess(upstream.base_url, str(db), "--send-timeout", "0", "--websocket-ping-interval", "1",
                            log_path=tmp_path / "gw2.log").wait_ready()
        final = _stalled_turn(gw, db)
        assert final is not None and final["status"] == "failed" and "keepalive" in final["error"]["message"]
    finally:
        gw.kill()
    for name in ("gw.log", "gw2.log"):
        log = (tmp_path / name).read_text()
        assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]
