"""A stream's body written straight to the connection by the edge (edge.HttpEdge, api/streaming.py), against
a real gateway under the gateway's own protocol, over raw sockets: the bytes are what uvicorn's `send` would
have written (chunked, one chunk per batch, ended by the zero chunk), the connection serves the next
request after a stream, a client that leaves closes the upstream, keep-alive comments come from a timer,
and the stream costs no task besides the server's."""

from __future__ import annotations

import asyncio
import re
import socket
import time

import orjson
import pytest

from responses_gateway.config import Settings
from tests.support.fake_chat import Sleep, Stream, text_stream
from tests.support.server import GatewayServer

EDGE = "responses_gateway.edge:EdgeProtocol"


@pytest.fixture
def served(upstream, tmp_path):
    servers: list[GatewayServer] = []

    def start(edge: bool = True, **settings) -> GatewayServer:
        options = {"http": EDGE if edge else "httptools"}
        server = GatewayServer(Settings(**{"upstream_url": upstream.base_url, "db": str(tmp_path / "rg.db"),
                                           **settings}), **options)
        servers.append(server.__enter__())
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def _post(sock: socket.socket, body: dict) -> None:
    raw = orjson.dumps(body)
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(raw) + raw)


class Reader:
    def __init__(self, sock: socket.socket):
        self.sock, self.buf = sock, b""

    def until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            more = self.sock.recv(65536)
            assert more, self.buf[-300:]
            self.buf += more
        out, _, self.buf = self.buf.partition(marker)
        return out

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            more = self.sock.recv(65536)
            assert more
            self.buf += more
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self) -> tuple[bytes, list[bytes]]:
        """One chunked response: its head and its chunks (the zero chunk that ends it not included)."""
        head = self.until(b"\r\n\r\n")
        chunks = []
        while True:
            size = int(self.until(b"\r\n"), 16)
            chunk = self.exactly(size + 2)
            assert chunk.endswith(b"\r\n")
            if size == 0:
                return head, chunks
            chunks.append(chunk[:-2])


def _connect(server: GatewayServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def test_the_stream_is_the_same_under_both_servers_and_the_connection_serves_the_next_request(served, upstream):
    edge, plain = served(edge=True), served(edge=False)
    got = {}
    for name, server in (("edge", edge), ("plain", plain)):
        upstream.enqueue(text_stream(["one ", "two ", "three"]))
        upstream.enqueue(text_stream(["again"]))
        with _connect(server) as sock:
            reader = Reader(sock)
            _post(sock, {"model": "m", "input": "x", "stream": True})
            head, chunks = reader.response()
            _post(sock, {"model": "m", "input": "x"})  # the same connection: kept alive after the stream
            nxt = reader.until(b"\r\n\r\n")
            assert nxt.startswith(b"HTTP/1.1 200"), nxt
        lines = [line for line in head.split(b"\r\n")[1:] if not line.startswith(b"date:")]
        body = b"".join(chunks)
        # ids and timestamps differ between two runs, and how events are batched into chunks follows the
        # upstream's reads: the events do not
        got[name] = (lines, re.findall(rb"event: ([a-z_.]+)\n", body))
        assert body.endswith(b"data: [DONE]\n\n") and b"response.completed" in chunks[-1]
    assert got["edge"] == got["plain"]
    assert b"transfer-encoding: chunked" in got["edge"][0]


def test_a_client_that_leaves_closes_the_upstream(served, upstream):
    server = served()
    frames = text_stream(["one ", "two "])
    upstream.enqueue(Stream(frames[:3] + [Sleep(30)] + frames[3:]))
    with _connect(server) as sock:
        reader = Reader(sock)
        _post(sock, {"model": "m", "input": "x", "stream": True})
        reader.until(b"output_text.delta")
    assert upstream.wait_disconnect(timeout=5), "the upstream never saw the connection close"
    upstream.enqueue(text_stream(["still here"]))
    with _connect(server) as sock:
        reader = Reader(sock)
        _post(sock, {"model": "m", "input": "x", "stream": True})
        _, chunks = reader.response()
        assert b"still here" in b"".join(chunks)


def test_keep_alive_comments_come_while_the_upstream_is_silent(served, upstream):
    server = served(sse_keepalive=0.3)
    frames = text_stream(["a", "b"])
    upstream.enqueue(Stream(frames[:3] + [Sleep(1.5)] + frames[3:]))
    with _connect(server) as sock:
        _post(sock, {"model": "m", "input": "x", "stream": True})
        _, chunks = Reader(sock).response()
    assert chunks.count(b": keep-alive\n\n") >= 2
    body = b"".join(chunks)
    assert body.endswith(b"data: [DONE]\n\n") and b"response.completed" in body


def test_a_stream_runs_in_the_servers_task_alone(served, upstream):
    """No task is started for the stream itself: the pump, the disconnect watch and the keep-alive run in
    the server's task and on loop callbacks."""
    server = served(sse_keepalive=0.2)
    frames = text_stream(["a", "b"])
    upstream.enqueue(Stream(frames[:3] + [Sleep(1.0)] + frames[3:]))
    with _connect(server) as sock:
        reader = Reader(sock)
        _post(sock, {"model": "m", "input": "x", "stream": True})
        seen = reader.until(b"response.in_progress")
        time.sleep(0.5)  # the upstream is silent: keep-alive comments go out meanwhile
        (request,) = server.server.server_state.tasks
        names = asyncio.run_coroutine_threadsafe(_task_names(), request.get_loop()).result(5)
        seen += reader.until(b"0\r\n\r\n")
    assert b": keep-alive\n\n" in seen and b"data: [DONE]" in seen
    assert [name for name in names if re.search(r"_pump|watch|beat", name)] == [], names


async def _task_names() -> list[str]:
    return [task.get_coro().__qualname__ for task in asyncio.all_tasks()]


def _cycle(transport, flow):
    import logging

    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    return RequestResponseCycle(
        scope={"type": "http", "method": "POST", "path": "/v1/responses"}, transport=transport, flow=flow,
        logger=logging.getLogger("t"), access_logger=logging.getLogger("t"), access_log=False,
        default_headers=[(b"date", b"Fri, 27 Nov 2026 00:00:00 GMT"), (b"server", b"uvicorn")],
        message_event=asyncio.Event(), expect_100_continue=False, keep_alive=True, on_response=lambda: None)


class _Transport:
    def __init__(self):
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False


def test_each_write_is_byte_for_byte_what_uvicorns_send_writes():
    from types import SimpleNamespace

    from uvicorn.protocols.http.flow_control import FlowControl

    from responses_gateway.api.streaming import HEADERS
    from responses_gateway.edge import HttpEdge

    start = {"type": "http.response.start", "status": 200, "headers": HEADERS}
    batches = [b"event: a\ndata: {}\n\n", b"event: b\ndata: {}\n\n", b"data: [DONE]\n\n"]

    async def ours() -> list[bytes]:
        transport = _Transport()
        protocol = SimpleNamespace(transport=transport, flow=FlowControl(transport), _abort=lambda: None)
        edge = HttpEdge(protocol)
        edge._cycle = cycle = _cycle(transport, protocol.flow)
        await cycle.send(start)  # the head, through the server's `send`
        assert edge.writable()
        edge.write(batches[0])
        edge.write(batches[1])
        edge.finish(batches[2])
        assert cycle.response_complete and not edge.writable() and edge.sent == sum(map(len, batches))
        return transport.writes

    async def uvicorns() -> list[bytes]:
        transport = _Transport()
        cycle = _cycle(transport, FlowControl(transport))
        await cycle.send(start)
        for body in batches[:-1]:
            await cycle.send({"type": "http.response.body", "body": body, "more_body": True})
        await cycle.send({"type": "http.response.body", "body": batches[-1], "more_body": False})
        assert cycle.response_complete
        return transport.writes

    assert asyncio.run(ours()) == asyncio.run(uvicorns())


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout_from_its_last_response(served, upstream):
    """One keep-alive timer per connection, left running (edge.py): a connection busy again before it fires is
    not closed early, one idle for the whole timeout since its last response is."""
    server = served()
    server.server.config.timeout_keep_alive = 1.0  # read by each new connection
    with _connect(server) as sock:
        reader = Reader(sock)
        for pause in (0.0, 0.6, 0.6, 0.6):  # 1.8 s after the first response, never 1 s idle
            time.sleep(pause)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert reader.until(b"\r\n\r\n").startswith(b"HTTP/1.1 200"), "closed while in use"
            reader.until(b"}")
        started = time.monotonic()
        sock.settimeout(5)
        assert sock.recv(1) == b"" and 0.9 < time.monotonic() - started < 3.0
