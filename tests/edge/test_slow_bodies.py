"""Slow request bodies against a real gateway process and real sockets (issue 25.2): a request is admitted
once its body has arrived, so bodies that trickle in hold no place in flight and everyone else is still
served; and a body slower than --min-body-rate (after --body-rate-grace) is answered 408 and its connection
closed, counted in the metrics."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time

import httpx

from tests.support.backends import GatewayProcess
from tests.support.fake_chat import Stream, text_stream

SLACK = 5.0  # on top of each bound: a loaded machine is slow, but never this slow

HEADERS = (b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: 1000\r\n\r\n")
# a file upload, which its endpoint reads itself (to disk) rather than the front door
UPLOAD = (b"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
          b"Content-Length: 1000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nuser_data\r\n"
          b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n")


def trickle(port: int, n: int) -> list[socket.socket]:
    """`n` connections that each sent the headers of a 1000-byte body and its first bytes: half of them
    a JSON request, half a file upload."""
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(HEADERS + b'{"model": ' if i % 2 else UPLOAD)
        socks.append(s)
    return socks


class Trickler(threading.Thread):
    """Sends each socket one more body byte every `every` seconds until stopped (or the server closes it)."""

    def __init__(self, socks: list[socket.socket], every: float):
        super().__init__(daemon=True)
        self.socks, self.every = socks, every
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            for s in self.socks:
                with contextlib.suppress(OSError):  # closed by the server
                    s.send(b" ")


def test_trickling_bodies_hold_no_place_in_flight(upstream, tmp_path):
    upstream.default = lambda request: Stream(text_stream(["served"]))
    gw = GatewayProcess(upstream.base_url, str(tmp_path / "rg.db"), "--max-in-flight", "4",
                        log_path=tmp_path / "gw.log")
    socks: list[socket.socket] = []
    try:
        gw.wait_ready()
        socks = trickle(gw.port, 8)  # twice the cap, each a body that is still arriving
        trickler = Trickler(socks, 0.2)
        trickler.start()
        time.sleep(0.5)  # every trickling request has reached the app
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            statuses = [client.post("/v1/responses", json={"model": "m", "input": "hi"}).status_code
                        for _ in range(6)]
        trickler.stop.set()
        assert statuses == [200] * 6
    finally:
        for s in socks:
            s.close()
        gw.kill()


def test_a_body_slower_than_the_minimum_rate_is_answered_408_and_closed(upstream, tmp_path):
    upstream.default = lambda request: Stream(text_stream(["served"]))
    gw = GatewayProcess(upstream.base_url, str(tmp_path / "rg.db"), "--min-body-rate", "100",
                        "--body-rate-grace", "1", log_path=tmp_path / "gw.log")
    socks: list[socket.socket] = []
    try:
        gw.wait_ready()
        started = time.monotonic()
        socks = trickle(gw.port, 10)
        trickler = Trickler(socks, 0.2)  # 5 bytes a second: far below 100
        trickler.start()
        for _ in range(2):  # and bodies that never send a byte
            silent = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            silent.sendall(HEADERS)
            socks.append(silent)
        answers: dict[socket.socket, bytes] = {}
        while len(answers) < len(socks) and time.monotonic() - started < 1 + SLACK:
            readable, _, _ = select.select([s for s in socks if s not in answers], [], [], 0.05)
            for s in readable:
                answers[s] = read_until_closed(s)
        trickler.stop.set()
        assert len(answers) == len(socks), f"{len(answers)} of {len(socks)} answered within the bound"
        for answer in answers.values():
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
            assert b"connection: close" in answer.lower() and b'"code":"request_timeout"' in answer

        # a body that keeps pace is served, however long it takes past the grace
        body = b'{"model": "m", "input": "' + b"x" * 3000 + b'"}'
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
            s.sendall(HEADERS.replace(b"1000", str(len(body)).encode()))
            for i in range(0, len(body), 400):  # 2 KB a second for 1.5 s
                s.sendall(body[i:i + 400])
                time.sleep(0.2)
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")

        metrics = httpx.get(f"{gw.url}/metrics", timeout=10).text
        line = next(x for x in metrics.splitlines()
                    if x.startswith('responses_gateway_connections_closed_total{reason="body_rate"}'))
        assert float(line.split()[-1]) == len(socks)
        assert "Traceback" not in gw.output()
    finally:
        for s in socks:
            s.close()
        gw.kill()


def read_until_closed(s: socket.socket) -> bytes:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data
