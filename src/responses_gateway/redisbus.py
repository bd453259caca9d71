"""Redis as the live bus between replicas: one Stream per background response, one cancel channel.

Why Streams: a stream is an append-only log with ids we choose, so the event with sequence number s gets
the id `s-1`, and `XREAD BLOCK` from `N-1` returns exactly the events after N — resuming from a
`starting_after` cursor is the data structure's own operation: no gap, no duplicate, no bookkeeping. Any
number of followers read one stream without the writer knowing about them (pub/sub would drop what a late
follower missed; a list would need polling). Each stream is capped (`MAXLEN ~`) and expires
`redis_event_ttl` seconds after its last event, so Redis never grows without bound; the database keeps its
own copy of the log for longer.

Cancel signals are PUBLISHed on one channel: fire and forget is enough, because the cancel flag is also
written to the database, which each replica polls — Redis only makes the cancel immediate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from .eventlog import Ended, follow_db
from .redisconn import connect
from .sse import is_terminal

if TYPE_CHECKING:
    from .store.jobs import EventLogs

log = logging.getLogger("responses_gateway.redis")

PREFIX = "rg:events:"
CANCEL_CHANNEL = "rg:cancel"
MAXLEN = 100_000


class RedisBus:
    def __init__(self, url: str, ttl: float, cluster: bool = False):
        self.redis = connect(url, cluster)
        self.ttl = max(1, int(ttl))
        self.listener: asyncio.Task[None] | None = None

    async def open(self, on_cancel: Callable[[str], None]) -> None:
        await self.redis.ping()  # fail at startup, not at the first background response
        self.listener = asyncio.create_task(self._listen(on_cancel))

    async def close(self) -> None:
        if self.listener is not None:
            self.listener.cancel()
        await self.redis.aclose()

    async def add(self, response_id: str, first_seq: int, frames: list[bytes]) -> None:
        """Append frames (sequence numbers first_seq, first_seq + 1, ...) in one round trip."""
        key = PREFIX + response_id
        pipe = self.redis.pipeline(transaction=False)
        for i, frame in enumerate(frames):
            pipe.xadd(key, {"f": frame}, id=f"{first_seq + i}-1", maxlen=MAXLEN, approximate=True)
        pipe.expire(key, self.ttl)
        await pipe.execute(raise_on_error=False)  # an id already there (a reaper raced the job) is skipped

    async def last(self, response_id: str) -> int:
        entries = await self.redis.xrevrange(PREFIX + response_id, count=1)
        return _seq(entries[0][0]) if entries else -1

    async def cancel(self, response_id: str) -> None:
        await self.redis.publish(CANCEL_CHANNEL, response_id)

    async def follow(self, store: EventLogs, response_id: str, after: int, poll: float,
                     ended: Ended) -> AsyncGenerator[bytes, None]:
        """Events after `after`, live until the terminal one. A stream that is gone (expired) or trimmed
        past the cursor is read from the database instead."""
        key = PREFIX + response_id
        end: Any = await self.redis.xrevrange(key, count=1)
        if end and _seq(end[0][0]) <= after and is_terminal(end[0][1][b"f"]):
            return  # resumed at (or past) the terminal event: nothing follows it
        first = await self.redis.xrange(key, count=1)
        if not first and await ended() is not None or first and _seq(first[0][0]) > after + 1:
            async for chunk in follow_db(store, response_id, after, poll, ended):
                yield chunk
            return
        pos = after
        while True:
            got: Any = await self.redis.xread({key: f"{pos}-1" if pos >= 0 else "0-0"}, count=1000, block=1000)
            if got:
                entries = got[0][1]
                pos = _seq(entries[-1][0])
                yield b"".join(fields[b"f"] for _, fields in entries)
                if is_terminal(entries[-1][1][b"f"]):
                    return
                continue
            if await ended() is not None:  # ended, yet no terminal event here: the database has the rest
                async for chunk in follow_db(store, response_id, pos, poll, ended):
                    yield chunk
                return

    async def _listen(self, on_cancel: Callable[[str], None]) -> None:
        while True:
            try:
                pubsub = self.redis.pubsub()
                await pubsub.subscribe(CANCEL_CHANNEL)
                async for message in pubsub.listen():
                    if message["type"] == "message":
                        on_cancel(message["data"].decode())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarted or unreachable: the database flag still cancels
                log.warning("Redis cancel channel lost (%s); resubscribing", exc)
                await asyncio.sleep(1)


def _seq(entry_id: bytes | str | None) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    return int(text.split("-", 1)[0])
