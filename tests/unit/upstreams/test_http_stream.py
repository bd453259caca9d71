"""An adapter's stream over the lean HTTP/1.1 client (upstreams/http.py + net/http1.py), against a raw server
on loopback: a gzip-compressed SSE answer, the kept-alive connection reused by the next response and a stale
one retried, an error answer raised as the route's HTTP error, and an idle deadline mid-stream."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import pytest
import uvloop

from responses_gateway import generation as g
from responses_gateway.errors import UpstreamError
from responses_gateway.protocol.items import normalize_input
from responses_gateway.protocol.request import CreateResponse
from responses_gateway.protocol.tools import EMPTY, normalize_tools
from responses_gateway.route import Route
from responses_gateway.upstreams.base import Call
from responses_gateway.upstreams.registry import build_upstream

SSE = (b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
       b'data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\n\n'
       b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
       b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
       b"data: [DONE]\n\n")


def chunked(body: bytes, headers: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n" + headers
            + b"\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    await reader.readexactly(length)


async def generate(route: Route) -> str:
    adapter = build_upstream(route)
    try:
        return await text_of(adapter)
    finally:
        await adapter.close()


async def text_of(adapter: Any) -> str:
    req = CreateResponse(model="m", input="x", stream=True)
    stream = await adapter.open(Call(req, normalize_input(req.input, EMPTY), normalize_tools(None, None)))
    text = ""
    try:
        async for batch in stream:
            text += "".join(e.text for e in batch if isinstance(e, g.TextDelta))
    finally:
        await stream.aclose()
    return text


async def serve(handler: Any) -> tuple[asyncio.Server, str, list[int]]:
    connections: list[int] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer, len(connections))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", connections


def test_a_gzip_answer_is_decoded_into_events():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(chunked(gzip.compress(SSE), b"Content-Encoding: gzip\r\n"))
        await reader.read()

    async def main() -> None:
        server, url, _ = await serve(handler)
        async with server:
            assert await generate(Route(kind="chat_completions", base_url=url)) == "Hello"

    uvloop.run(main())


def test_the_next_response_reuses_the_connection_and_a_stale_one_is_retried():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(chunked(SSE))
        await read_request(reader)
        writer.write(chunked(SSE))
        if n == 1:
            await reader.readuntil(b"\r\n\r\n")  # the third request: dropped unanswered (a stale connection)
            return
        await reader.read()

    async def main() -> None:
        server, url, connections = await serve(handler)
        async with server:
            adapter = build_upstream(Route(kind="chat_completions", base_url=url))
            try:
                assert [await text_of(adapter) for _ in range(3)] == ["Hello"] * 3
            finally:
                await adapter.close()
            assert len(connections) == 2

    uvloop.run(main())


def test_an_error_answer_is_the_routes_http_error():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        body = b'{"error":{"message":"The model `m` does not exist","type":"invalid_request_error"}}'
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
        await reader.read()

    async def main() -> None:
        server, url, _ = await serve(handler)
        async with server:
            with pytest.raises(UpstreamError) as caught:
                await generate(Route(kind="chat_completions", base_url=url))
            assert caught.value.status == 404 and "does not exist" in caught.value.message

    uvloop.run(main())


def test_an_upstream_silent_mid_stream_ends_at_the_idle_deadline():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        first = SSE.split(b"\n\n")[0] + b"\n\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + b"%x\r\n%s\r\n" % (len(first), first))
        await reader.read()  # and nothing more

    async def main() -> None:
        server, url, _ = await serve(handler)
        async with server:
            with pytest.raises(UpstreamError) as caught:
                await generate(Route(kind="chat_completions", base_url=url, read_timeout=0.2))
            assert caught.value.code == "upstream_idle_timeout"

    uvloop.run(main())
