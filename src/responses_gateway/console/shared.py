"""The live responses of every replica, through Redis (`--redis` with `--console`): each process publishes
its own — a summary in one hash while it runs, its events in a capped, expiring stream — and the console of
any replica lists the others' and follows them.

The watcher (live.py) never waits on Redis: what it hands over goes into a bounded queue that one task sends in
pipelined batches; when Redis is slow the queue fills and further events of this process are not mirrored
(counted in `dropped`; the replica's own console still has them all). A replica that died leaves its summaries
behind: they are ignored, and removed, once older than STALE seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

from ..redisconn import connect

log = logging.getLogger("responses_gateway.console")

LIVE = "rg:console:live"  # hash: response id -> its summary (JSON)
EVENTS = "rg:console:events:"  # + response id: a stream of its events
TTL = 600  # seconds a stream lives after its last event
STALE = 3600  # a summary older than this is a dead replica's
MAXLEN = 20_000
QUEUE = 10_000
TERMINAL = (b"response.completed", b"response.failed", b"response.incomplete", b"response.cancelled")


class Shared:
    def __init__(self, url: str, cluster: bool = False):
        self.redis = connect(url, cluster)
        self.replica = uuid.uuid4().hex[:12]
        self.queue: asyncio.Queue[tuple[str, str, Any]] = asyncio.Queue(QUEUE)
        self.dropped = 0
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await self.redis.ping()
        self.task = asyncio.create_task(self._pump())

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        await self.redis.aclose()

    # -- from this process's watcher (never waits) --------------------------------------------------------

    def _put(self, what: str, rid: str, value: Any) -> None:
        try:
            self.queue.put_nowait((what, rid, value))
        except asyncio.QueueFull:
            self.dropped += 1

    def opened(self, summary: dict[str, Any]) -> None:
        self._put("open", str(summary["id"]), orjson.dumps({**summary, "replica": self.replica}))

    def batch(self, rid: str, events: list[dict[str, Any]]) -> None:
        self._put("events", rid, [orjson.dumps(e) for e in events])

    def closed(self, rid: str) -> None:
        self._put("close", rid, None)

    async def _pump(self) -> None:
        while True:
            first = await self.queue.get()
            work = [first]
            while not self.queue.empty() and len(work) < 500:
                work.append(self.queue.get_nowait())
            pipe = self.redis.pipeline(transaction=False)
            for what, rid, value in work:
                if what == "open":
                    pipe.hset(LIVE, rid, value)
                elif what == "events":
                    for event in value:
                        pipe.xadd(EVENTS + rid, {"e": event}, maxlen=MAXLEN, approximate=True)
                    pipe.expire(EVENTS + rid, TTL)
                else:
                    pipe.hdel(LIVE, rid)
            try:
                await pipe.execute(raise_on_error=False)
            except Exception as exc:  # Redis away: the other replicas miss these, this one has them
                log.warning("console: could not share live responses through Redis: %s", exc)

    # -- the console's reads ---------------------------------------------------------------------------

    async def others(self) -> list[dict[str, Any]]:
        """The other replicas' responses in flight, oldest first."""
        found: dict[Any, Any] = await self.redis.hgetall(LIVE)
        now, out, stale = time.time(), [], []
        for rid, raw in found.items():
            summary = orjson.loads(raw)
            if now - float(summary.get("started", 0)) > STALE:
                stale.append(rid)
            elif summary.get("replica") != self.replica:
                out.append(summary)
        if stale:
            await self.redis.hdel(LIVE, *stale)
        return sorted(out, key=lambda s: float(s.get("started", 0)))

    async def summary(self, rid: str) -> dict[str, Any] | None:
        raw = await self.redis.hget(LIVE, rid)
        if raw is None and not await self.redis.exists(EVENTS + rid):
            return None
        return orjson.loads(raw) if raw is not None else {"id": rid}

    async def follow(self, rid: str, idle: float = 15.0) -> AsyncIterator[list[dict[str, Any]]]:
        """Its events from the first, until its terminal event (or until its stream is gone and it is no
        longer running anywhere)."""
        key, pos = EVENTS + rid, "0-0"
        quiet = 0.0
        while True:
            got: Any = await self.redis.xread({key: pos}, count=1000, block=1000)
            if got:
                quiet = 0.0
                entries = got[0][1]
                pos = entries[-1][0]
                events = [orjson.loads(fields[b"e"]) for _, fields in entries]
                yield events
                if any(str(e.get("type", "")).encode() in TERMINAL for e in events):
                    return
                continue
            quiet += 1.0
            if not await self.redis.hexists(LIVE, rid) and not await self.redis.exists(key):
                return
            if quiet >= idle:
                quiet = 0.0
                yield []
