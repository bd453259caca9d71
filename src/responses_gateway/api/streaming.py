"""The SSE sink: an ASGI response that writes each batch of events in one send and ends with [DONE].

The batch with the terminal event goes out in the same send as [DONE] (and ends the body): one write, one
wake-up of the client, fewer per response.

A client that goes away is noticed at once (a task waits on `http.disconnect`), and the pump is
cancelled, which closes the upstream request: nobody pays for tokens no one will read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from starlette.types import Receive, Scope, Send

from ..sse import DONE, encode_all

TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})

HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class EventStreamResponse:
    def __init__(self, batches: AsyncGenerator[list[dict[str, Any]], None]):
        self.batches = batches

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("EventStreamResponse must run inside a task")
        gone = False

        async def watch() -> None:
            nonlocal gone
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone = True
                    task.cancel()
                    return

        watcher = asyncio.create_task(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            ended = False
            async for events in self.batches:
                ended = bool(events) and events[-1]["type"] in TERMINAL  # the last batch: nothing follows it
                body = encode_all(events) + DONE if ended else encode_all(events)
                await send({"type": "http.response.body", "body": body, "more_body": not ended})
            if not ended:
                await send({"type": "http.response.body", "body": DONE, "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()
        except OSError:  # the server reports a send to a closed connection
            pass
        finally:
            watcher.cancel()
            await self.batches.aclose()
