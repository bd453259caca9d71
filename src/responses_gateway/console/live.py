"""Responses in flight on this process, as the console's live view follows them (the `tap.Watcher`).

Installed only with `--console` (tap.py: without it the response path does not see this at all). Each running
response keeps its events here while it runs (at most MAX_EVENTS; a follower that opens it later sees them
from the start) and for a little while after it ended, so that a follower who opened it near its end still
sees how it ended. Followers wait on an `asyncio.Event` renewed at each batch: the watcher never blocks and
never waits for a follower (a slow browser only misses nothing; it reads the list at its own pace).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_EVENTS = 20_000  # per response; beyond, the deltas are no longer kept (the terminal event always is)
KEEP_ENDED = 50  # recently ended responses kept for followers
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "response.cancelled", "error")


@dataclass
class Running:
    id: str
    owner: str
    model: str
    started: float
    background: bool
    events: list[dict[str, Any]] = field(default_factory=list)
    status: str = "in_progress"
    ended: bool = False
    dropped: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class Mirror(Protocol):
    """Where this process's live responses are also published for the other replicas (shared.py)."""

    def opened(self, summary: dict[str, Any]) -> None: ...

    def batch(self, rid: str, events: list[dict[str, Any]]) -> None: ...

    def closed(self, rid: str) -> None: ...


class Live:
    """The `tap.Watcher` of the console."""

    def __init__(self, mirror: Mirror | None = None) -> None:
        self.running: dict[str, Running] = {}
        self.ended: OrderedDict[str, Running] = OrderedDict()
        self.mirror = mirror

    # -- tap.Watcher -----------------------------------------------------------------------------------

    def opened(self, response: dict[str, Any], owner: str) -> None:
        rid = str(response.get("id"))
        one = self.running[rid] = Running(rid, owner, str(response.get("model") or ""), time.time(),
                                          bool(response.get("background")))
        if self.mirror is not None:
            self.mirror.opened({"id": rid, "owner": owner, "model": one.model, "started": one.started,
                                "background": one.background})

    def batch(self, response_id: str, events: list[dict[str, Any]]) -> None:
        one = self.running.get(response_id)
        if one is None:
            return
        if self.mirror is not None:
            self.mirror.batch(response_id, events)
        for event in events:
            kind = event.get("type")
            if len(one.events) < MAX_EVENTS or kind in TERMINAL:
                one.events.append(event)
            else:
                one.dropped += 1
            if kind in TERMINAL:
                response = event.get("response")
                one.status = str(response.get("status")) if isinstance(response, dict) else "failed"
        one.wake()

    def closed(self, response_id: str) -> None:
        one = self.running.pop(response_id, None)
        if one is None:
            return
        if self.mirror is not None:
            self.mirror.closed(response_id)
        one.ended = True
        if one.status == "in_progress":
            one.status = "cancelled"  # the client left before any terminal event
        self.ended[response_id] = one
        while len(self.ended) > KEEP_ENDED:
            self.ended.popitem(last=False)
        one.wake()

    # -- the console's reads ---------------------------------------------------------------------------

    def find(self, response_id: str) -> Running | None:
        return self.running.get(response_id) or self.ended.get(response_id)

    async def follow(self, one: Running, idle: float = 15.0) -> AsyncIterator[list[dict[str, Any]]]:
        """Its events from the first, as they come, until it ends; an empty list every `idle` seconds of quiet
        (so a follower that left is noticed when the keepalive fails to send)."""
        sent = 0
        while True:
            changed = one.changed
            if sent < len(one.events):
                batch = one.events[sent:]
                sent += len(batch)
                yield batch
                continue
            if one.ended:
                return
            try:
                await asyncio.wait_for(changed.wait(), idle)
            except TimeoutError:
                yield []
