"""The lean HTTP/1.1 client of the streaming POST, against real servers on loopback: each answer framing
(chunked, content-length, the connection's close), compressed bodies, keep-alive reuse and the retry of a stale
pooled connection, a connection lost mid-body, TLS, and failures named as `causes` names them."""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from responses_gateway import causes
from responses_gateway.net import http1
from tests.support.certs import self_signed

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request: its head and its body (by content-length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


class Server:
    """A scripted server: `handler(reader, writer, connection number)` per connection."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None):
        self.handler = handler
        self.ssl_context = ssl_context
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []

    async def __aenter__(self) -> Server:
        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer, self.connections)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(on_connection, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: Any) -> None:
        self.server.close()

    def url(self, scheme: str = "http", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{self.port}/v1/chat/completions"

    async def answer(self, reader: asyncio.StreamReader) -> bytes:
        request = await read_request(reader)
        self.requests.append(request)
        return request[0]


def run(coro: Awaitable[Any]) -> Any:
    return uvloop.run(coro)  # type: ignore[arg-type]


def test_a_chunked_answer_arrives_piece_by_piece_and_the_request_is_sent_whole():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        for piece in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.write(b"0\r\n\r\n")
        await reader.read()  # until the client closes

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client(connect_timeout=5)
            resp = await client.post(server.url(), {"authorization": "Bearer k"}, b'{"a":1}')
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            first = resp.take()
            if first is None:
                await resp.wait()
                first = resp.take()
            assert first == b"data: 1\n\n"  # the first piece, before the second was sent
            assert await resp.read() == b"data: 2\n\n"
            resp.release()
            head, body = server.requests[0]
            assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
            assert b"\r\nContent-Length: 7\r\n" in head and b"\r\nauthorization: Bearer k\r\n" in head
            assert f"\r\nHost: 127.0.0.1:{server.port}\r\n".encode() in head
            assert body == b'{"a":1}'
            client.close()

    server: Server
    run(main())


def test_content_length_answers_reuse_the_kept_alive_connection():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await server.answer(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            for _ in range(3):
                resp = await client.post(server.url(), {}, b"{}")
                assert await resp.read() == b"hello"
                resp.release()
            assert server.connections == 1 and len(server.requests) == 3
            client.close()

    server: Server
    run(main())


def test_a_body_ended_by_the_close_is_whole_and_its_connection_not_reused():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of")
        await writer.drain()
        writer.write(b" it")

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            for _ in range(2):
                resp = await client.post(server.url(), {}, b"{}")
                assert await resp.read() == b"all of it"
                resp.release()
            assert server.connections == 2
            client.close()

    server: Server
    run(main())


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_compressed_answers_are_decoded(encoding: str):
    text = b"data: " + b"token " * 2000 + b"\n\n"
    if encoding == "gzip":
        packed = gzip.compress(text)
    elif encoding == "deflate":
        packed = zlib.compress(text)
    else:
        z = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        packed = z.compress(text) + z.flush()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        head = await server.answer(reader)
        assert b"\r\nAccept-Encoding: gzip, deflate\r\n" in head
        name = "deflate" if encoding == "raw-deflate" else encoding
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Encoding: {name}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        for start in range(0, len(packed), 7):  # cut anywhere
            piece = packed[start:start + 7]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        writer.write(b"0\r\n\r\n")
        await reader.read()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            assert await resp.read() == text
            resp.release()
            client.close()

    server: Server
    run(main())


def test_a_stale_pooled_connection_is_retried_once_on_a_new_one():
    """The server closes a kept-alive connection as the second request arrives, before answering it: the
    request goes again on a new connection, and the caller sees only the answer."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        if n == 1:
            await reader.readuntil(b"\r\n\r\n")  # the second request: dropped unanswered
            return
        await reader.read()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            for _ in range(2):
                resp = await client.post(server.url(), {}, b"{}")
                assert await resp.read() == b"ok"
                resp.release()
            assert server.connections == 2
            client.close()

    server: Server
    run(main())


def test_a_connection_lost_before_any_answer_on_a_new_connection_is_not_retried():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)  # and close

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            with pytest.raises(http1.ConnectionLost):
                await client.post(server.url(), {}, b"{}")
            assert server.connections == 1
            client.close()

    server: Server
    run(main())


def test_a_connection_lost_mid_body_gives_the_bytes_before_it_then_the_loss_and_is_not_reused():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ndata: 1\n\n")
        await writer.drain()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            await asyncio.sleep(0.2)  # the bytes and the loss have both arrived: a late reader
            assert resp.take() == b"data: 1\n\n"
            with pytest.raises(http1.ConnectionLost):
                resp.take()
            resp.release()
            pool = next(iter(client.pools.values()))
            assert not pool.idle and not pool.busy
            client.close()

    server: Server
    run(main())


def test_a_reader_that_goes_away_closes_the_connection():
    closed = asyncio.Event

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        assert await reader.read() == b""  # the client closed
        seen.set()

    async def main() -> None:
        nonlocal server, seen
        seen = closed()
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            resp.release()  # mid-body: closed, not pooled
            await asyncio.wait_for(seen.wait(), 5)
            client.close()

    server: Server
    seen: asyncio.Event
    run(main())


def test_an_error_answer_is_read_whole():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n'
                     b'{"e":"nf"}\n')
        await reader.read()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            assert resp.status == 404 and resp.content_type == "application/json"
            assert await resp.read() == b'{"e":"nf"}\n'
            resp.release()
            client.close()

    server: Server
    run(main())


def test_an_endless_answer_head_fails_at_its_bound():
    """A server that sends header lines for ever: the client stops at MAX_HEAD bytes with BadResponse (the
    headers it kept are bounded), instead of growing them until the connection ends."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        for i in range(100_000):
            writer.write(b"X-Filler-%d: %s\r\n" % (i, b"x" * 100))
            await writer.drain()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            with pytest.raises(http1.BadResponse, match="head is longer"):
                await asyncio.wait_for(client.post(server.url(), {}, b"{}"), 10)
            client.close()

    server: Server
    run(main())


def test_idle_connections_expire(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(http1, "IDLE_EXPIRY", 0.1)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await server.answer(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            for _ in range(2):
                resp = await client.post(server.url(), {}, b"{}")
                assert await resp.read() == b"ok"
                resp.release()
                await asyncio.sleep(0.3)
            assert server.connections == 2
            assert not next(iter(client.pools.values())).idle  # swept
            client.close()

    server: Server
    run(main())


def test_connection_refused_is_named_so():
    async def main() -> None:
        async with Server(lambda r, w, n: asyncio.sleep(0)) as server:
            port = server.port
        client = http1.Client(connect_timeout=5)
        with pytest.raises(OSError) as caught:
            await client.post(f"http://127.0.0.1:{port}/v1", {}, b"{}")
        assert causes.kind(caught.value) == "connection refused"
        with pytest.raises(OSError) as caught:
            await client.post(f"http://localhost:{port}/v1", {}, b"{}")  # (each address refused: still refused)
        assert causes.kind(caught.value) == "connection refused"
        client.close()

    run(main())




def test_tls_with_a_trusted_certificate_and_sni(tmp_path: Path):
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    names: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await server.answer(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")

    async def main() -> None:
        nonlocal server
        async with Server(handler, server_ctx) as server:
            client_ctx = ssl.create_default_context(cafile=str(cert))
            client = http1.Client(ssl_context=client_ctx)
            for _ in range(2):
                resp = await client.post(server.url("https", "localhost"), {}, b"{}")
                assert await resp.read() == b"ok"
                resp.release()
            assert server.connections == 1 and names == ["localhost"]
            client.close()

            untrusting = http1.Client()  # the default context: the self-signed certificate is refused
            with pytest.raises(OSError) as caught:
                await untrusting.post(server.url("https", "localhost"), {}, b"{}")
            assert causes.kind(caught.value) == "TLS failed"
            untrusting.close()

    server: Server
    run(main())


def test_a_large_body_is_sent_whole_in_pieces():
    import io

    payload = b"x" * (3 * http1.WRITE_PIECE + 5)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await reader.read()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, io.BytesIO(payload))
            assert await resp.read() == b""
            resp.release()
            assert server.requests[0][1] == payload
            client.close()

    server: Server
    run(main())


def test_a_body_ended_by_a_deadline_stays_ended_when_more_bytes_come():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(b"1\r\nb\r\n")
        await reader.read()

    class Expired(Exception):
        pass

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            resp.fail(Expired())
            await asyncio.sleep(0.3)  # the second piece was sent meanwhile
            with pytest.raises(Expired):
                resp.take()
            resp.release()
            client.close()

    server: Server
    run(main())


def test_a_slow_reader_pauses_the_socket_and_gets_every_byte_in_order():
    pieces = [bytes([65 + i % 26]) * 16384 for i in range(40)]  # 640 KiB: past the high-water mark

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await reader.read()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            await asyncio.sleep(0.3)
            conn = next(iter(next(iter(client.pools.values())).busy))
            assert conn.paused  # not reading past the mark while nobody takes
            assert await resp.read() == b"".join(pieces)
            resp.release()
            client.close()

    server: Server
    run(main())


def test_headers_that_would_split_the_request_are_refused():
    async def main() -> None:
        client = http1.Client()
        with pytest.raises(ValueError):
            await client.post("http://127.0.0.1:9/v1", {"authorization": "Bearer k\r\nx: y"}, b"{}")
        client.close()

    run(main())


def test_a_host_name_not_found_is_named_so():
    async def main() -> None:
        client = http1.Client(connect_timeout=10)
        with pytest.raises(OSError) as caught:
            await client.post("http://no-such-host.invalid/v1/chat/completions", {}, b"{}")
        assert causes.kind(caught.value) == "host name not found"
        client.close()

    run(main())


def test_a_url_that_cannot_be_called_is_a_client_error():
    async def main() -> None:
        client = http1.Client()
        for url in ("ftp://host/x", "http:///nohost", "http://h/a b"):
            with pytest.raises(http1.InvalidURL):
                await client.post(url, {}, b"{}")
        client.close()

    run(main())


def test_an_informational_answer_before_the_real_one_is_skipped():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.answer(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 4\r\n\r\nok\n\n")
        await reader.read()

    async def main() -> None:
        nonlocal server
        async with Server(handler) as server:
            client = http1.Client()
            resp = await client.post(server.url(), {}, b"{}")
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            assert await resp.read() == b"ok\n\n"
            resp.release()
            client.close()

    server: Server
    run(main())
