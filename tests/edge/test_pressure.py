"""The edge under pressure that each connection's own limits do not see (issue 34, items 5-7), against a real
gateway process and raw sockets: pipelined requests queue to a bound and memory stays bounded; bodies and
WebSocket messages still arriving share one budget (503 / 1013 past it) and are cut when they stop coming;
under a low `ulimit -n`, idle connections make room for new requests."""

from __future__ import annotations

import base64
import os
import socket
import struct
import threading
import time

import httpx
import orjson

from tests.support.backends import GatewayProcess, closed_counts

MiB = 1024 * 1024
HEALTH = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"


def _connect(port: int, timeout: float = 10) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _answer(sock: socket.socket, limit: float = 15.0) -> bytes:
    """What the server sends until it closes (or `limit` seconds pass)."""
    sock.settimeout(limit)
    out = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not data:
            break
        out += data
    return out


def _closed_counts(gw: GatewayProcess) -> dict[str, float]:
    return closed_counts(gw.url)


def test_a_pipelined_flood_queues_to_a_bound_and_memory_stays_bounded(upstream, tmp_path):
    """One connection pipelining 4 MiB of `GET /health` (113k requests) while reading the answers: all are
    answered, in order, and the process grows by tens of MiB at most (uvicorn's queue grew by 300 MiB: it
    read on after each response, whatever was queued)."""
    gw = GatewayProcess(upstream.base_url, "none", log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        for _ in range(200):  # warm: the first requests allocate what every later one reuses
            httpx.get(f"{gw.url}/health", timeout=10)
        before = gw.rss()
        total = 4 * MiB // len(HEALTH)
        sock = _connect(gw.port, timeout=60)
        answered = 0
        peak = before

        def read() -> None:
            nonlocal answered
            tail = b""
            while answered < total:
                data = sock.recv(1 << 20)
                if not data:
                    return
                chunk = tail + data
                answered += chunk.count(b"HTTP/1.1 200 OK")
                tail = chunk[-16:]

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        sender = threading.Thread(target=lambda: sock.sendall(HEALTH * total), daemon=True)
        sender.start()
        deadline = time.monotonic() + 120
        while reader.is_alive() and time.monotonic() < deadline:
            peak = max(peak, gw.rss())
            time.sleep(0.02)
        sock.close()
        assert answered == total
        assert peak - before < 48 * MiB, f"grew {(peak - before) / MiB:.0f} MiB"
        assert "Traceback" not in (tmp_path / "gw.log").read_text()
    finally:
        gw.kill()


def _withhold(port: int, size: int, sent: int) -> socket.socket:
    """A POST announcing `size` bytes of body that sends `sent` of them, then nothing."""
    sock = _connect(port)
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n" % size)
    sock.sendall(b" " * sent)
    return sock


def test_bodies_in_flight_share_a_budget(upstream, tmp_path):
    """Three bodies of 3 MiB withheld before their end, against an 8 MiB budget: the third is answered 503
    with Retry-After (OpenAI's error shape) at once, not held; once the others are gone the budget is free."""
    gw = GatewayProcess(upstream.base_url, "none", "--max-bodies-bytes", str(8 * MiB), log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        held = [_withhold(gw.port, 4 * MiB, 3 * MiB) for _ in range(2)]
        time.sleep(0.5)
        third = _withhold(gw.port, 4 * MiB, 3 * MiB)
        started = time.monotonic()
        answer = _answer(third)
        assert time.monotonic() - started < 10
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), head
        assert b"retry-after: 1" in head.lower()
        error = orjson.loads(body)["error"]
        assert error["code"] == "server_busy" and error["type"] == "server_error"
        for sock in held:
            sock.close()
        third.close()
        time.sleep(0.5)
        again = _withhold(gw.port, 3 * MiB + 2, 3 * MiB)
        again.sendall(b"{}")  # whole: an invalid request, answered as such (not 503)
        assert _answer(again, 10).startswith(b"HTTP/1.1 400")
        assert _closed_counts(gw)["bodies_budget"] >= 1
    finally:
        gw.kill()


def test_a_body_that_stops_coming_is_cut(upstream, tmp_path):
    """A body sent fast, then stopped: its average pace stays good for hours, so the pace check never fires;
    the idle deadline does (408, connection closed), long before --body-timeout."""
    gw = GatewayProcess(upstream.base_url, "none", "--body-idle-timeout", "1", log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        sock = _withhold(gw.port, 2 * MiB, MiB)
        started = time.monotonic()
        answer = _answer(sock, 20)
        took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert 0.9 < took < 8, took
        assert b"Nothing of the request body came for 1s" in answer
        assert _closed_counts(gw)["body_idle"] >= 1
    finally:
        gw.kill()


def _ws_open(port: int) -> socket.socket:
    sock = _connect(port)
    key = base64.b64encode(os.urandom(16))
    sock.sendall(b"GET /v1/responses HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                 b"sec-websocket-key: %s\r\nsec-websocket-version: 13\r\n\r\n" % key)
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def _ws_partial(sock: socket.socket, size: int, sent: int) -> None:
    """A masked text frame announcing `size` bytes, of which `sent` are sent."""
    sock.sendall(struct.pack("!BBQ", 0x81, 0x80 | 127, size) + b"\0\0\0\0" + b"{" * sent)


def _ws_close_code(sock: socket.socket, limit: float = 15.0) -> int | None:
    data = _answer(sock, limit)
    at = data.find(b"\x88")
    if at < 0 or len(data) < at + 4:
        return None
    return int(struct.unpack("!H", data[at + 2:at + 4])[0])


def test_websocket_messages_share_the_budget_and_are_cut_when_they_stop(upstream, tmp_path):
    gw = GatewayProcess(upstream.base_url, "none", "--max-bodies-bytes", str(4 * MiB), "--body-idle-timeout", "1",
                        log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        idle = _ws_open(gw.port)
        _ws_partial(idle, 2 * MiB, MiB)
        started = time.monotonic()
        assert _ws_close_code(idle) == 1008  # nothing more came for 1 s
        assert time.monotonic() - started < 8

        first, second = _ws_open(gw.port), _ws_open(gw.port)
        _ws_partial(first, 8 * MiB, 3 * MiB)
        time.sleep(0.3)
        _ws_partial(second, 8 * MiB, 3 * MiB)  # 6 MiB arriving: over the 4 MiB budget
        assert _ws_close_code(second, 5) == 1013  # try again later
        first.close()
        counts = _closed_counts(gw)
        assert counts["body_idle"] >= 1 and counts["bodies_budget"] >= 1
        assert "Traceback" not in (tmp_path / "gw.log").read_text()
    finally:
        gw.kill()


def test_idle_connections_make_room_when_descriptors_run_short(upstream, tmp_path):
    """`ulimit -n 64`: 30 connections kept alive after a request and 30 that never sent one hold the process's
    descriptors; new requests still succeed at once (the longest idle are closed to make room), where before
    they failed until the idle ones timed out."""
    gw = GatewayProcess(upstream.base_url, "none", "--keep-alive-timeout", "60", "--header-timeout", "60",
                        log_path=tmp_path / "gw.log", nofile=64)
    try:
        gw.wait_ready()
        kept = []
        for _ in range(30):
            sock = _connect(gw.port)
            sock.sendall(HEALTH)
            sock.recv(65536)  # answered; the connection stays open, idle
            kept.append(sock)
        silent = [_connect(gw.port) for _ in range(30)]
        time.sleep(0.3)
        for _ in range(20):
            with httpx.Client(timeout=5) as client:  # a new connection each time
                assert client.get(f"{gw.url}/health").status_code == 200
        assert _closed_counts(gw)["idle_evicted"] >= 10
        for sock in kept + silent:
            sock.close()
        assert "Traceback" not in (tmp_path / "gw.log").read_text()
    finally:
        gw.kill()
