"""The SSE sink: an ASGI response that writes each batch of events in one send and ends with [DONE].

The batch with the terminal event goes out in the same send as [DONE] (and ends the body): one write, one
wake-up of the client, fewer per response.

A client that goes away is noticed at once, and the pump is cancelled, which closes the upstream request:
nobody pays for tokens no one will read.

Under the gateway's own server protocol (edge.py: what `serve` runs) a stream costs one task besides the
server's, the pump's: the body goes straight to the connection (`HttpEdge.write`: one transport write per
batch, no ASGI message or `send` coroutine per token), the edge says when the connection is lost
(`on_lost`), and the keep-alive comment comes from a loop timer. Under any other ASGI server (the tests'
in-process ones) the pump writes through the server's `send`, a second task waits on `http.disconnect` and
a third sends the keep-alive comments.

The pump has a task of its own rather than running in the server's: every token resumes the task that waits
for it through every coroutine it is nested in, 7 frames in the pump's task where the server's has 14 more
(uvicorn's and starlette's layers and our middleware): 2.3 k instructions per token more, measured.

A response can also be ended from outside while the pump waits for the client to take a write: the drain
at SIGTERM, the send deadline (a client that stopped reading: the edge calls `on_stall`, then drops the
connection), an upstream deadline that ran out while nobody read. Each cancels the pump with the error to
end with (pipeline.ending); the pump hands it to the pipeline, which ends the response as failed and stores
it, and the last events go out if the client takes them within `GRACE` seconds, else the connection is
dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

from starlette.types import Receive, Scope, Send

from ..edge import Edge, HttpEdge, edge_of
from ..errors import APIError
from ..pipeline import ending
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
GRACE = 2.0  # seconds the last events of a response ended from outside get to go out


def suspended(batches: Any) -> bool:
    """The generator waits at a `yield` (its consumer is busy elsewhere), so an ending can be thrown in."""
    return getattr(batches, "ag_frame", None) is not None and not getattr(batches, "ag_running", True)


async def end_from_outside(batches: Any, exc: BaseException) -> list[dict[str, Any]] | None:
    """Hand an ending that reached the consumer (while it waited on the client) to the pipeline, which ends
    the response (stored, counted) and gives back its last events; None when there is no response to end
    (the generator had not started, had already finished, or is not a pipeline's)."""
    if not suspended(batches):
        return None
    try:
        events: list[dict[str, Any]] = await batches.athrow(exc)
    except (asyncio.CancelledError, StopAsyncIteration):
        return None
    return events


class EventStreamResponse:
    """`batches`: lists of events to encode, or (`encoded`) SSE bytes already encoded, as event logs hold."""

    def __init__(self, batches: AsyncGenerator[list[dict[str, Any]], None] | AsyncGenerator[bytes, None],
                 keepalive: float | None = 15.0, encoded: bool = False):
        self.batches = batches
        self.keepalive = keepalive  # seconds of silence before a comment goes out; None: never
        self.encode: Callable[[Any], bytes] = _as_is if encoded else encode_all
        self.ends: Callable[[Any], bool] = ends_terminal if encoded else ends
        self._gone = False  # the client went away
        self._ending = False  # the response is being ended from outside: a disconnect must not cut that short

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The stream runs in a task of its own (see the module's docstring).
        edge = edge_of(scope)
        if isinstance(edge, HttpEdge):
            await asyncio.create_task(self._direct(edge, send))  # cancelling this task cancels the pump too
            return
        pump = asyncio.create_task(self._pump(send, scope.get(SERVER_SEND, send), edge))
        if edge is not None:
            def stalled(error: APIError) -> None:  # the client reads nothing: end the response, then it is dropped
                if not self._ending:  # (one already being ended just loses its last words)
                    self._ending = True
                    pump.cancel(error)

            edge.on_stall = stalled

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self._gone = True
                    if not self._ending:
                        pump.cancel()
                    return

        watcher = asyncio.create_task(watch())
        try:
            await pump  # cancelling this task cancels the pump too
        finally:
            watcher.cancel()

    async def _direct(self, edge: HttpEdge, send: Send) -> None:
        """The pump, the body written straight to the connection. The edge ends it from outside by cancelling
        its task: `on_lost` (the client left), `on_stall` (it stopped reading); as do the drain and the
        upstream deadline while nobody reads (pipeline.RUNNING holds this task). The hooks are set here, in
        the pump's task, so they never cancel a pump that has not started."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        every = self.keepalive or 0.0  # 0: no keep-alive comments
        last = loop.time()  # when anything was last written
        timer: asyncio.TimerHandle | None = None

        def beat() -> None:  # a keep-alive comment after `every` seconds of silence (none while the buffer is full)
            nonlocal timer, last
            idle = loop.time() - last
            if idle >= every:
                if not edge.paused:
                    edge.write(KEEPALIVE)
                    last = loop.time()
                idle = 0.0
            timer = loop.call_later(every - idle, beat)

        def lost() -> None:
            self._gone = True
            if not self._ending:
                task.cancel()

        def stalled(error: APIError) -> None:  # the client reads nothing: end the response, then it is dropped
            if not self._ending:  # (one already being ended just loses its last words)
                self._ending = True
                task.cancel(error)

        ended = False
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            if not edge.writable():  # the client left already, or a HEAD: no body goes out
                self._gone = edge.lost
                if not self._gone:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            edge.on_lost, edge.on_stall = lost, stalled
            if every:
                timer = loop.call_later(every, beat)
            encode, ends = self.encode, self.ends
            async for events in self.batches:
                ended = ends(events)  # the last batch: nothing follows it
                if edge.paused:
                    await edge.drain()
                if ended:
                    if timer is not None:
                        timer.cancel()  # nothing may follow the end of the body
                    edge.finish(encode(events) + DONE)
                else:
                    edge.write(encode(events))
                    last = loop.time()
            if not ended:
                if timer is not None:
                    timer.cancel()
                if edge.paused:
                    await edge.drain()
                edge.finish(DONE)
        except asyncio.CancelledError as exc:
            if not ended and ending(exc) is not None and suspended(self.batches):
                self._ending = True  # waiting on the client when the response was ended: the pipeline ends it
                task.uncancel()
                if timer is not None:
                    timer.cancel()
                await self._last_words_direct(await end_from_outside(self.batches, exc), edge)
            elif self._gone or ended or ending(exc) is not None:
                task.uncancel()
            else:
                raise  # cancelled for another reason (the server stopping): as any task
        finally:
            edge.on_lost = edge.on_stall = None  # the response is over: nothing to end from outside
            if timer is not None:
                timer.cancel()
            await self.batches.aclose()

    async def _last_words_direct(self, events: list[dict[str, Any]] | None, edge: HttpEdge) -> None:
        """`_last_words` written straight to the connection."""
        if events is None:
            return
        if edge.paused:
            try:
                async with asyncio.timeout(GRACE):
                    await edge.drain()
            except TimeoutError:
                edge.abort()
                await asyncio.sleep(0)  # the server sees the connection lost before the app returns
                return
        edge.finish(self.encode(events) + DONE)

    async def _pump(self, send: Send, body_send: Send, edge: Edge | None) -> None:
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
        ended = False
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            if self.keepalive:
                beater = asyncio.create_task(beat(self.keepalive))
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
        except asyncio.CancelledError as exc:
            if not ended and ending(exc) is not None and suspended(self.batches):
                self._ending = True  # waiting on the client when the response was ended: the pipeline ends it
                if beater is not None:
                    beater.cancel()
                await self._last_words(await end_from_outside(self.batches, exc), body_send, edge)
            elif not (self._gone or ended or ending(exc) is not None):
                raise  # cancelled for another reason (the server stopping): as any task
        except OSError:  # the server reports a send to a closed connection
            pass
        finally:
            if beater is not None:
                beater.cancel()
            await self.batches.aclose()

    async def _last_words(self, events: list[dict[str, Any]] | None, body_send: Send, edge: Edge | None) -> None:
        """The last events of a response ended from outside, if the client takes them within GRACE; else the
        connection is dropped (a graceful close would wait on the same full buffer)."""
        if events is None:
            return
        try:
            async with asyncio.timeout(GRACE):
                await body_send({"type": "http.response.body", "body": self.encode(events) + DONE,
                                 "more_body": False})
        except TimeoutError:
            if edge is not None:
                edge.abort()
                await asyncio.sleep(0)  # the server sees the connection lost before the app returns
        except OSError:
            pass
