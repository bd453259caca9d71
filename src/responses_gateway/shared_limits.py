"""Per-API-key concurrency and request rate kept in Redis, so they hold across workers and replicas.

One Lua script checks both limits atomically in one round trip, on Redis's own clock (`TIME`), so
replicas with skewed clocks agree:

- concurrency: a sorted set `rg:limit:{<owner>}:in_flight` of request tokens scored by lease expiry (ms).
  Expired entries are dropped before counting, so the slots of a crashed process free themselves after a
  lease; this process renews its own entries every `RENEW_EVERY` seconds while they are in flight (one
  task, one pipelined round), and removes each when its response has been sent.
- rate: a token bucket in a hash `rg:limit:{<owner>}:rate` (`tokens`, `at`). A bucket left alone refills
  within a minute, and a missing bucket is a full one, so the hash expires after a minute.

`<owner>` is the HMAC of the API key (auth.py), never the key. Every key expires, so Redis never grows
without bound. The braces are a Redis Cluster hash tag: an owner's two keys hash to one slot, so the script
that reads and writes both runs on a Cluster too (`--redis-cluster`, redisconn.py); the renewals go in one
pipeline, which the Cluster client splits by node (EVAL, as its pipelines refuse EVALSHA).

Every call has a deadline (`TIMEOUT`). When Redis fails or is slow the request is admitted (fail open, as
Envoy's rate limit service does by default): an outage of the limiter must not become an outage of the
gateway. Each failure is counted in `responses_gateway_limiter_errors_total{op}` and logged at most once a
minute.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from . import metrics
from .redisconn import connect

log = logging.getLogger("responses_gateway.limits")

PREFIX = "rg:limit:"
TIMEOUT = 0.5  # seconds: the longest a request waits for the limiter
OPEN_TIMEOUT = 5.0  # seconds startup gives the limiter to connect and load its script
LEASE = 30.0  # seconds an in-flight entry lives without renewal
RENEW_EVERY = 10.0  # seconds between renewals: a lease survives two missed rounds
WARN_EVERY = 60.0  # seconds between warnings about a failing limiter

T = TypeVar("T")

# KEYS: in_flight set, rate hash. ARGV: max in flight (0 off), requests a minute (0 off), lease ms, token.
# Returns {0, 0} admitted, {1, wait ms} over the concurrency cap, {2, wait ms} over the rate.
ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap, rate, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= cap then
    return {1, 1000}
  end
end
if rate > 0 then
  local saved = redis.call('HMGET', KEYS[2], 'tokens', 'at')
  local tokens, at = tonumber(saved[1]) or rate, tonumber(saved[2]) or now
  tokens = math.min(rate, tokens + math.max(0, now - at) * rate / 60000)
  if tokens < 1 then
    return {2, math.ceil((1 - tokens) * 60000 / rate)}
  end
  redis.call('HSET', KEYS[2], 'tokens', tostring(tokens - 1), 'at', now)
  redis.call('PEXPIRE', KEYS[2], 60000)
end
if cap > 0 then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], lease)
end
return {0, 0}
"""

# KEYS: one in_flight set. ARGV: lease ms, then this process's tokens in it. Only entries still there are
# renewed (XX): one already expired stays gone.
RENEW = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', until_, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
"""

REASONS = {1: "key_concurrency", 2: "key_rate"}


def in_flight_key(owner: str) -> str:
    return f"{PREFIX}{{{owner}}}:in_flight"


def rate_key(owner: str) -> str:
    return f"{PREFIX}{{{owner}}}:rate"


class SharedLimits:
    """The per-key limits of `Admission` when `--redis` is set."""

    def __init__(self, url: str, key_max_in_flight: int, key_requests_per_minute: float, cluster: bool = False):
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # no retries and short socket deadlines: the caller's deadline (TIMEOUT) is the whole budget
        self.redis = connect(url, cluster, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                             retry=Retry(NoBackoff(), 0))
        self.admit_script = self.redis.register_script(ADMIT)
        self.cap = key_max_in_flight
        self.rate = key_requests_per_minute
        self.lease_ms = max(1, int(LEASE * 1000))
        self.renew_every = RENEW_EVERY
        self.held: dict[str, set[str]] = {}  # owner -> this process's tokens in its in_flight set
        self.renewer: asyncio.Task[None] | None = None
        self.process = f"{os.getpid()}-{os.urandom(4).hex()}"  # tokens unique across processes and restarts
        self.count = itertools.count()
        self.warned = -WARN_EVERY

    async def open(self) -> None:
        """Before the first request: the script is loaded (on every node of a Cluster, whose client learns
        the cluster's layout on the way), so the first admission costs one round trip like any other rather
        than several under its deadline. A failure is the limiter's like any other: counted, logged, and
        requests are admitted meanwhile."""
        await self._bounded(self.redis.script_load(ADMIT), "open", OPEN_TIMEOUT)

    async def admit(self, owner: str) -> str | tuple[str, float]:
        """Admitted: a token for `release` once the response is sent ("" without a concurrency cap).
        Refused: (reason, seconds to wait)."""
        token = f"{self.process}-{next(self.count)}" if self.cap > 0 else ""
        call = self.admit_script(keys=[in_flight_key(owner), rate_key(owner)],
                                 args=[self.cap, self.rate, self.lease_ms, token])
        answer = await self._bounded(call, "admit")
        code, wait_ms = answer or (0, 0)  # failed: admitted, the token held in case the script did run
        if code:
            return REASONS[int(code)], int(wait_ms) / 1000
        if token:
            self.held.setdefault(owner, set()).add(token)
            if self.renewer is None:
                self.renewer = asyncio.create_task(self._renew())
        return token

    async def release(self, owner: str, token: str) -> None:
        if not token:
            return
        tokens = self.held[owner]
        tokens.discard(token)
        if not tokens:
            del self.held[owner]
        await self._bounded(self.redis.zrem(in_flight_key(owner), token), "release")  # failed: expires

    async def close(self) -> None:
        if self.renewer is not None:
            self.renewer.cancel()
        await self.redis.aclose()

    async def _renew(self) -> None:
        """Renew this process's leases until it has none in flight (the next admission starts it again)."""
        try:
            while self.held:
                await asyncio.sleep(self.renew_every)
                pipe = self.redis.pipeline(transaction=False)
                for owner, tokens in list(self.held.items()):
                    pipe.execute_command("EVAL", RENEW, 1, in_flight_key(owner), self.lease_ms, *tokens)
                await self._bounded(pipe.execute(), "renew")  # failed: a lease outlives two missed rounds
        finally:
            self.renewer = None

    async def _bounded(self, call: Awaitable[T], op: str, timeout: float = TIMEOUT) -> T | None:
        """The call's result within `timeout`, else None (counted, logged now and then). A call past its
        deadline is cancelled and left to clean up on its own, so the request never waits for that."""
        task = asyncio.ensure_future(call)
        task.add_done_callback(_retrieve)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if done and task.exception() is None:
            return task.result()
        task.cancel()
        error = task.exception() if done else None
        problem = f"{type(error).__name__}: {error}" if done else f"no answer within {timeout:g}s"
        metrics.limiter_errors.labels(op).inc()
        if time.monotonic() - self.warned >= WARN_EVERY:
            self.warned = time.monotonic()
            log.warning("Redis limiter %s failed (%s); admitting requests without the per-key limits "
                        "meanwhile (warned at most once a minute)", op, problem[:200])
        return None


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
