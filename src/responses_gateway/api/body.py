"""A request body read whole before its request is admitted, at a minimum pace.

A body still arriving holds no place in flight (api/admission.py admits the request once it is here), so
it is held to a pace instead: once its first --body-rate-grace seconds are over it must have averaged
--min-body-rate bytes a second (Apache's `mod_reqtimeout` MinRate), or it is answered 408
`request_timeout` and its connection closed, counted in
`responses_gateway_connections_closed_total{reason="body_rate"}`. A body that arrived fast and then stopped
keeps a good average for a long time, so a body is also cut when nothing of it has come for
--body-idle-timeout seconds (408, reason `body_idle`). `--body-timeout` (edge.py) still bounds the whole
body, and --max-body-bytes its size (413). While it arrives a body holds its bytes in the process's budget
(bodies.py, --max-bodies-bytes): past it, 503 with `Retry-After`.

The pace is checked once a second by one timer for all bodies still arriving (`Readers`), not by a timer
per request: almost every body arrives with its headers, and each would pay for a timer it never needs.
A multipart upload is not read here (its endpoint streams it to disk within its own bound): it is held to
the same pace as its endpoint reads it (`Readers.paced`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive

from .. import metrics
from ..bodies import BUDGET, BodiesBusy
from ..door import Door
from ..errors import APIError

SLOW = "the request body arrived too slowly"  # the cancellation message of a body behind its pace
IDLE = "nothing of the request body came for too long"  # ... of a body that stopped
SWEEP_EVERY = 1.0  # seconds between two checks of the bodies still arriving


@dataclass(frozen=True)
class BodyPace:
    """The slowest a body may arrive: `rate` bytes a second on average after its first `grace` seconds."""

    rate: float = 500.0  # 0: no minimum
    grace: float = 10.0
    idle: float = 15.0  # seconds without a byte of the body (0: no limit)


class CutBody(APIError):
    """A body cut before its end: 408, and the connection closed (the rest of the body is never read)."""

    def __init__(self, message: str):
        super().__init__(408, message, code="request_timeout")

    def headers(self) -> dict[str, str]:
        return {"connection": "close"}


class SlowBody(CutBody):
    def __init__(self, pace: BodyPace):
        super().__init__(f"The request body arrived too slowly: after {pace.grace:g}s a body must arrive at "
                         f"{pace.rate:g} bytes a second or more.")


class IdleBody(CutBody):
    def __init__(self, pace: BodyPace):
        super().__init__(f"Nothing of the request body came for {pace.idle:g}s.")


class Reading:
    """One body still arriving: the task reading it, since when, how many bytes have come, and when the last."""

    __slots__ = ("task", "started", "received", "last")

    def __init__(self, task: asyncio.Task[object], started: float):
        self.task = task
        self.started = started
        self.received = 0
        self.last = started


class Readers:
    """The bodies still arriving in this process; one timer, armed only while there are some, cancels the
    reading of each that has fallen behind the pace."""

    def __init__(self, pace: BodyPace):
        self.pace = pace
        self.reading: set[Reading] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, reading: Reading) -> None:
        self.reading.add(reading)
        if self.timer is None and (self.pace.rate > 0 or self.pace.idle > 0):
            self.timer = asyncio.get_running_loop().call_later(SWEEP_EVERY, self.sweep)

    def sweep(self) -> None:
        self.timer = None
        now = asyncio.get_running_loop().time()
        pace = self.pace
        for reading in list(self.reading):
            if pace.rate > 0 and now > reading.started + pace.grace + reading.received / pace.rate:
                self.reading.discard(reading)
                reading.task.cancel(SLOW)
            elif pace.idle > 0 and now > reading.last + pace.idle:
                self.reading.discard(reading)
                reading.task.cancel(IDLE)
        if self.reading:
            self.timer = asyncio.get_running_loop().call_later(SWEEP_EVERY, self.sweep)

    async def read(self, receive: Receive, door: Door) -> bytearray:
        """The body, appended chunk by chunk as it arrives (one join of tens of MB at the end would be a
        single step of tens of milliseconds on the event loop). Raises the 413 or 408 to answer, or
        ClientDisconnect."""
        loop = asyncio.get_running_loop()
        reading = Reading(current(), loop.time())
        body = bytearray()
        try:
            while True:
                message = await self.next(receive, reading)
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect
                chunk = message.get("body", b"")
                door.check_size(len(body) + len(chunk))
                if not message.get("more_body", False):
                    body += chunk  # whole: the budget is for bodies still arriving, this one is not any more
                    return body
                if not BUDGET.take(len(chunk)):
                    metrics.connections_closed.labels("bodies_budget").inc()
                    raise BodiesBusy(BUDGET.limit)
                body += chunk
                reading.received = len(body)
                reading.last = loop.time()
        finally:
            BUDGET.give(reading.received)

    def paced(self, receive: Receive, at_end: Callable[[], Awaitable[None]]) -> Receive:
        """`receive` for an app that reads the body itself (a multipart upload, bounded by its endpoint): held
        to the same pace, and `at_end` awaited when the body has come (it may raise, e.g. RateLimited)."""
        reading: Reading | None = None
        done = False

        async def next_message() -> Message:
            nonlocal reading, done
            if done:
                return await receive()
            if reading is None:
                reading = Reading(current(), asyncio.get_running_loop().time())
            message = await self.next(receive, reading)
            reading.received += len(message.get("body", b""))
            reading.last = asyncio.get_running_loop().time()
            if message["type"] != "http.request" or not message.get("more_body", False):
                done = True
                if message["type"] == "http.request":
                    await at_end()
            return message

        return next_message

    async def next(self, receive: Receive, reading: Reading) -> Message:
        """The next message of a body, its reading watched only while it is awaited here (the app may await
        other things between two reads); SlowBody when the body fell behind the pace meanwhile."""
        self.add(reading)
        try:
            return await receive()
        except asyncio.CancelledError as exc:
            if exc.args not in ((SLOW,), (IDLE,)):
                raise
            reading.task.uncancel()
            idle = exc.args == (IDLE,)
            metrics.connections_closed.labels("body_idle" if idle else "body_rate").inc()
            raise (IdleBody if idle else SlowBody)(self.pace) from None
        finally:
            self.reading.discard(reading)


def current() -> asyncio.Task[object]:
    task = asyncio.current_task()
    assert task is not None
    return task


def after_body(receive: Receive) -> Receive:
    """The app's `receive` once the body has been read: the body's end, then what the server says next (a
    disconnect)."""
    ended = False

    async def next_message() -> Message:
        nonlocal ended
        if not ended:
            ended = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await receive()

    return next_message
