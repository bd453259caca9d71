"""Per-provider rate limit and result cache: a token bucket, and a small LRU whose entries expire.

Both live in the process (one per provider of the chain): a cached result is served to any request of this
deployment for the same query and options, as a search engine's own cache would be.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TokenBucket:
    """`rate` requests per second on average, bursts up to `burst` (0 rate: unlimited)."""

    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self.tokens = self.burst
        self.clock = clock
        self.at = self._now()

    def _now(self) -> float:
        return self.clock()

    def _fill(self) -> None:
        now = self._now()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def take(self) -> bool:
        if self.rate <= 0:
            return True
        self._fill()
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def wait(self) -> float:
        """Seconds until a token is there."""
        if self.rate <= 0:
            return 0.0
        self._fill()
        return max(0.0, (1 - self.tokens) / self.rate)


class TTLCache(Generic[V]):
    """At most `size` entries, each kept `ttl` seconds (0: nothing is kept)."""

    def __init__(self, ttl: float, size: int = 1024, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self.size = size
        self.clock = clock
        self.entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= self.clock():
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: V) -> None:
        if self.ttl <= 0:
            return
        self.entries[key] = (self.clock() + self.ttl, value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)
