"""Event logs of background responses, and the followers that read them.

A background response's events are encoded once, as SSE frames, by the job that runs it (frame i carries
sequence number i). Three places hold them, and a follower (`GET /v1/responses/{id}?stream=true`) reads the
cheapest one that has them:

- `LiveLog`: in the memory of the process running the job — followers in that process slice a list;
- Redis (redisbus.py), when configured — followers on other replicas block on XREAD;
- the database (`response_events`), flushed every `background_poll` seconds and at the end — followers on
  other replicas without Redis poll it, and it keeps the log after the job for `event_retention_hours`.

Every follower ends after the terminal event (`response.completed` / `.incomplete` / `.failed`); one that
resumes after it (`starting_after` its number, or beyond) gets an empty stream at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from .composer import Composer
from .sse import encode_all, ends_terminal
from .store.jobs import EventLogs

ACTIVE = ("queued", "in_progress")


def skip_frames(frames: str, count: int) -> str:
    """The frames after the first `count` of a run."""
    at = 0
    for _ in range(count):
        at = frames.index("\n\n", at) + 2
    return frames[at:]


class LiveLog:
    """The frames of one running response, in this process. Followers wait on one shared `asyncio.Event` that
    the writer sets when frames arrive and then replaces (no per-follower task, nothing to wake when nobody
    waits). An Event, not a bare future: a follower that is cancelled must not cancel the others' wait."""

    __slots__ = ("frames", "done", "_wake")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.done = False
        self._wake: asyncio.Event | None = None

    def extend(self, frames: list[bytes]) -> None:
        self.frames.extend(frames)
        self._notify()

    def close(self) -> None:
        self.done = True
        self._notify()

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    async def follow(self, after: int) -> AsyncGenerator[bytes, None]:
        pos = after + 1
        while True:
            frames = self.frames
            if pos < len(frames):
                end = len(frames)
                yield b"".join(frames[pos:end])
                pos = end
                continue
            if self.done:
                return
            if self._wake is None:
                self._wake = asyncio.Event()
            await self._wake.wait()


Ended = Callable[[], Awaitable[dict[str, Any] | None]]
"""Returns the stored response if it has ended (not queued / in_progress), else None."""


async def follow_db(store: EventLogs, response_id: str, after: int, poll: float, ended: Ended) -> AsyncGenerator[bytes, None]:
    """Follow the database copy of a log, polling every `poll` seconds until the terminal event.

    If the response has ended but its log never got a terminal event (the replica died between storing the
    final state and flushing the log), the stored final state ends the stream: no follower waits forever."""
    pos = after
    idle = 0
    while True:
        rows = await store.events_after(response_id, pos)
        if rows:
            idle = 0
            first, _, frames = rows[0]
            parts = [skip_frames(frames, pos - first + 1) if first <= pos else frames]
            parts += [frames for _, _, frames in rows[1:]]
            pos = rows[-1][1]
            chunk = "".join(parts).encode()
            yield chunk
            if ends_terminal(chunk):
                return
            continue
        if idle == 0 and await logged_end(store, response_id, pos):
            return  # resumed at (or past) the terminal event: nothing follows it
        idle += 1
        if idle % 4 == 0:
            final = await ended()
            if final is not None and not await store.events_after(response_id, pos, 1):
                if not await logged_end(store, response_id, pos):
                    yield encode_all(Composer.replay_end(final, pos + 1))
                return
        await asyncio.sleep(poll)


async def logged_end(store: EventLogs, response_id: str, after: int) -> bool:
    """Whether the database copy of the log ends with its terminal event at or before `after`: a follower
    resuming there is answered an empty stream at once (not the stored final state again, seconds later)."""
    last = await store.last_event(response_id)
    if last < 0 or last > after:
        return False
    rows = await store.events_after(response_id, last - 1, 1)
    return bool(rows) and ends_terminal(rows[0][2].encode())
