"""The SSE sink: an ASGI response that writes each batch of events in one send and ends with [DONE].

The batch with the terminal event goes out in the same send as [DONE] (and ends the body): one write, one
wake-up of the client, fewer per response.

A client that goes away is noticed at once (a task waits on `http.disconnect`), and the pump is
cancelled, which closes the upstream request: nobody pays for tokens no one will read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

from starlette.types import Receive, Scope, Send

from ..sse import DONE, encode_all, ends, ends_terminal


def _as_is(chunk: bytes) -> bytes:
    return chunk


HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


# Where the server's own `send` waits in the scope (app.Gateway puts it there) for the body of a stream.
SERVER_SEND = "responses_gateway.server_send"
KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: clients ignore it; proxies see the connection is alive


class EventStreamResponse:
    """`batches`: lists of events to encode, or (`encoded`) SSE bytes already encoded, as event logs hold."""

    def __init__(self, batches: AsyncGenerator[list[dict[str, Any]], None] | AsyncGenerator[bytes, None],
                 keepalive: float | None = 15.0, encoded: bool = False):
        self.batches = batches
        self.keepalive = keepalive  # seconds of silence before a comment goes out; None: never
        self.encode: Callable[[Any], bytes] = _as_is if encoded else encode_all
        self.ends: Callable[[Any], bool] = ends_terminal if encoded else ends
        self._gone = False  # the client went away

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The stream runs in a task of its own. Every token resumes the task that waits for it, through
        # every coroutine it is nested in: here 7 frames, where the server's task has 14 more (uvicorn and
        # starlette layers and our middleware) above this one.
        pump = asyncio.create_task(self._pump(send, scope.get(SERVER_SEND, send)))

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self._gone = True
                    pump.cancel()
                    return

        watcher = asyncio.create_task(watch())
        try:
            await pump  # cancelling this task cancels the pump too
        finally:
            watcher.cancel()

    async def _pump(self, send: Send, body_send: Send) -> None:
        """`send` starts the response (every layer sees it start); `body_send`, the server's own, carries the
        body past starlette's two send wrappers, which only watch for the start: two calls fewer per token."""
        loop = asyncio.get_running_loop()
        last = loop.time()  # when anything was last sent

        async def beat(every: float) -> None:
            while True:
                await asyncio.sleep(max(every - (loop.time() - last), 0.0))
                if loop.time() - last >= every:
                    await body_send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                    _sent()

        def _sent() -> None:
            nonlocal last
            last = loop.time()

        beater = None
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            if self.keepalive:
                beater = asyncio.create_task(beat(self.keepalive))
            ended = False
            encode, ends = self.encode, self.ends
            async for events in self.batches:
                ended = ends(events)  # the last batch: nothing follows it
                if ended and beater is not None:
                    beater.cancel()  # nothing may follow the end of the body
                body = encode(events) + DONE if ended else encode(events)
                await body_send({"type": "http.response.body", "body": body, "more_body": not ended})
                last = loop.time()
            if beater is not None:
                beater.cancel()
            if not ended:
                await body_send({"type": "http.response.body", "body": DONE, "more_body": False})
        except asyncio.CancelledError:
            if not self._gone:
                raise
        except OSError:  # the server reports a send to a closed connection
            pass
        finally:
            if beater is not None:
                beater.cancel()
            await self.batches.aclose()
