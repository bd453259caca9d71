"""A pool of replicas of one model server: several base URLs behind one route (docs/routing.md, "Pools").

Teams that outgrow one GPU run the same model on several vLLM or SGLang replicas. What decides time to first
token for a long agent session is whether the replica it lands on still holds the session's prefix in its
KV cache; a router in front of the replicas cannot know a Responses session, the gateway does. So a pool
is an `Upstream` of upstreams, one per replica (each its own connection pool), and each generation step:

- **names its session** (`session_key`): the request's `prompt_cache_key`, else its conversation, else the
  first item of its whole input (its content) — the same item every turn of a `previous_response_id` chain
  (the history is read from the store) or of a WebSocket connection's chain. Every gateway replica reading the same store
  names a session the same way;
- **picks a replica** (`balance = "affinity"`, the default): the replica the session's last turn ran on here,
  while it is healthy and its load (requests in flight per unit of weight) is at most `affinity_max_load`
  times the pool's mean; else the first of the session's rendezvous-hash order (weighted) that is healthy and
  under that bound — consistent hashing with bounded load, the same order on every gateway replica, so a
  session routes the same way wherever it lands; else the least loaded. A session that moves lives on its
  new replica from then on. `least_loaded` (weighted least outstanding requests) and `round_robin` are there
  to compare (bench/pools.py);
- **fails over** before the first event only: a replica that refuses the connection, times out before its
  first byte, or answers 5xx or 429 is retried on the next one — no new attempt once the step's first-byte
  deadline (else its total one) has passed since it began — and is ejected
  for a cooldown that doubles while it keeps failing (Envoy's outlier detection); `probe_interval` seconds,
  when set, sends `GET /models` to each ejected replica and brings back one that answers. With every replica
  ejected the pool answers 503 with `Retry-After` (OpenAI's error shape).

Once a stream has started it is the replica's: the gateway never retries mid-stream (the client has events).
The per-step cost is a hash of the session key per replica and a few integer updates (bench/pools.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .. import metrics
from ..errors import UpstreamError
from ..logs import REPLICA
from ..net.urls import safe_url
from .base import Batch, Call, EventStream, Route, Upstream

log = logging.getLogger("responses_gateway.pool")

Balance = Literal["affinity", "least_loaded", "round_robin"]
BALANCES: tuple[str, ...] = ("affinity", "least_loaded", "round_robin")
COOLDOWN = 5.0  # seconds a replica is ejected after its first failure; doubled per failure in a row
MAX_COOLDOWN = 300.0
SESSIONS = 100_000  # sessions whose last replica is remembered here (the least recently used are forgotten)


@dataclass(frozen=True)
class Replica:
    """One replica as configured: where it is, its key, its share of the load."""

    base_url: str
    api_key: str | None = None
    weight: float = 1.0


@dataclass(eq=False)  # compared by identity: `in` over members is per step, field-by-field equality is not cheap
class Member:
    """A replica in use: its upstream, and what the pool knows of it."""

    replica: Replica
    upstream: Upstream
    label: str
    in_flight: int = 0
    failures: int = 0  # in a row
    ejected_until: float = 0.0
    requests: int = 0  # counts for /metrics, read at scrape time (COLLECTOR): no metric call per step
    failed: int = 0
    ejections: int = 0


    def healthy(self, now: float) -> bool:
        return now >= self.ejected_until

    def load(self) -> float:
        return (self.in_flight + 1) / self.replica.weight


class Pool:
    """An `Upstream` over several replicas of one route (see the module's docstring)."""

    def __init__(self, route: Route, replicas: list[Replica], build: Any, *, name: str = "*",
                 balance: Balance = "affinity", max_load: float = 1.5, probe_interval: float | None = None):
        self.route = route
        self.name = name
        self.balance = balance
        self.max_load = max_load
        self.probe_interval = probe_interval
        self.members = [Member(r, build(replace(route, base_url=r.base_url, api_key=r.api_key)),
                               safe_url(r.base_url)) for r in replicas]
        self.weight = sum(m.replica.weight for m in self.members)
        self.hits = 0  # continuing sessions kept on their replica, and moved
        self.moves = 0
        COLLECTOR.pools.add(self)
        self.label = f"pool of {len(self.members)} ({', '.join(m.label for m in self.members)})"
        self.sessions: OrderedDict[str, Member] = OrderedDict()
        self.turn = 0  # round robin's position
        self.prober: asyncio.Task[None] | None = None

    # -- the Upstream protocol -----------------------------------------------------------------------------

    async def open(self, call: Call) -> EventStream:
        if self.probe_interval and self.prober is None:
            self.prober = asyncio.create_task(self._probe_forever(self.probe_interval))
        key = session_key(call) if self.balance == "affinity" else ""
        tried: list[Member] = []
        last: UpstreamError | None = None
        # retries stay within the step's own deadline: no new attempt starts once its first byte is overdue
        limit = self.route.first_byte_timeout or self.route.total_timeout
        deadline = time.monotonic() + limit if limit else math.inf
        while True:
            if last is not None and time.monotonic() >= deadline:
                raise last
            member = self.choose(key, tried)
            if member is None:
                if last is not None and not self._any_healthy():
                    raise self._none_healthy()
                if last is not None:
                    raise last
                raise self._none_healthy()
            tried.append(member)
            member.in_flight += 1
            member.requests += 1
            try:
                stream = await member.upstream.open(call)
            except UpstreamError as exc:
                self._done(member)
                if not retryable(exc):
                    raise
                self._failed(member, exc)
                last = exc
                continue
            except BaseException:
                self._done(member)
                raise
            member.failures = 0
            REPLICA.set(member.label)  # the access log line and the response's span name it
            if key:
                self._remember(key, member)
            return Released(stream, lambda m=member: self._done(m))

    async def list_models(self) -> list[dict[str, Any]]:
        last: UpstreamError | None = None
        for member in self._order_by_health():
            try:
                models: list[dict[str, Any]] = await member.upstream.list_models()
                return models
            except UpstreamError as exc:
                last = exc
        assert last is not None
        raise last

    async def close(self) -> None:
        if self.prober is not None:
            self.prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.prober
        for member in self.members:
            await member.upstream.close()

    # -- choosing -----------------------------------------------------------------------------------------

    def choose(self, key: str, tried: list[Member]) -> Member | None:
        """The replica for a step of session `key` ("" for none), none of `tried`; None when none is left."""
        now = time.monotonic()
        last = self.sessions.get(key) if key and self.balance == "affinity" else None
        if last is not None and now >= last.ejected_until and last not in tried and last.load() <= self._bound():
            self.hits += 1  # the common case: a continuing session on its healthy, not overloaded replica
            return last
        healthy = [m for m in self.members if m not in tried and m.healthy(now)]
        if not healthy:
            return None
        if self.balance == "round_robin":
            self.turn += 1
            return healthy[self.turn % len(healthy)]
        if self.balance == "least_loaded" or not key:
            return min(healthy, key=Member.load)
        bound = self._bound()
        for member in sorted(healthy, key=lambda m: rendezvous(key, m), reverse=True):
            if member.load() <= bound:
                chosen = member
                break
        else:
            chosen = min(healthy, key=Member.load)
        if last is not None:
            self.moves += 1
        return chosen

    def _bound(self) -> float:
        """The most load (in flight + this step, per unit of weight) a replica may take for affinity."""
        flying = 0
        for member in self.members:
            flying += member.in_flight
        return max(1.0, self.max_load * (flying + 1) / self.weight) + 1e-9

    def _remember(self, key: str, member: Member) -> None:
        self.sessions[key] = member
        self.sessions.move_to_end(key)
        if len(self.sessions) > SESSIONS:
            self.sessions.popitem(last=False)

    def _order_by_health(self) -> list[Member]:
        now = time.monotonic()
        return sorted(self.members, key=lambda m: not m.healthy(now))

    def _any_healthy(self) -> bool:
        now = time.monotonic()
        return any(m.healthy(now) for m in self.members)

    def _none_healthy(self) -> UpstreamError:
        now = time.monotonic()
        wait = min((m.ejected_until - now for m in self.members), default=COOLDOWN)
        error = NoReplica(f"No replica of the upstream model server is available (route {self.name}); retry "
                          "in a moment.", max(1, math.ceil(wait)))
        return error

    # -- health -------------------------------------------------------------------------------------------

    def _done(self, member: Member) -> None:
        member.in_flight -= 1

    def _failed(self, member: Member, exc: UpstreamError) -> None:
        member.failures += 1
        cooldown = min(MAX_COOLDOWN, COOLDOWN * 2 ** (member.failures - 1))
        member.ejected_until = time.monotonic() + cooldown
        member.failed += 1
        member.ejections += 1
        log.warning("pool %s: replica %s failed (%s); ejected for %g s", self.name, member.label, exc.message,
                    cooldown)

    async def _probe_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for member in self.members:
                if member.healthy(now):
                    continue
                try:
                    async with asyncio.timeout(max(1.0, every)):
                        await member.upstream.list_models()
                except (UpstreamError, TimeoutError):
                    continue
                except Exception:  # a probe must never end the prober
                    log.warning("pool %s: probing %s failed", self.name, member.label, exc_info=True)
                    continue
                member.ejected_until = 0.0
                log.info("pool %s: replica %s answers again; back in the pool", self.name, member.label)

    def health(self) -> list[dict[str, Any]]:
        """Each replica's state, for /health."""
        now = time.monotonic()
        return [{"replica": m.label, "healthy": m.healthy(now), "in_flight": m.in_flight, "weight": m.replica.weight,
                 **({} if m.healthy(now) else {"back_in_s": round(m.ejected_until - now, 1)})}
                for m in self.members]


class NoReplica(UpstreamError):
    """Every replica of a pool is ejected: 503 with `Retry-After`."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message, status=503, code="upstream_unavailable")
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"retry-after": str(self.retry_after)}


class Released:
    """A replica's stream that frees its place in the pool's count when closed (the pipeline always closes)."""

    __slots__ = ("stream", "release")

    def __init__(self, stream: EventStream, release: Any):
        self.stream = stream
        self.release = release

    def __aiter__(self) -> AsyncIterator[Batch]:
        return self.stream.__aiter__()

    async def aclose(self) -> None:
        release, self.release = self.release, None
        try:
            await self.stream.aclose()
        finally:
            if release is not None:
                release()


class Collector:
    """The pools' per-replica counts for /metrics, read at scrape time."""

    def __init__(self) -> None:
        self.pools: weakref.WeakSet[Pool] = weakref.WeakSet()

    def collect(self) -> Iterator[Metric]:
        in_flight = GaugeMetricFamily("responses_gateway_pool_in_flight",
                                      "Generation steps in flight on each replica of a pool.", labels=LABELS)
        requests = CounterMetricFamily("responses_gateway_pool_requests",
                                       "Generation steps sent to each replica of a pool.", labels=LABELS)
        failures = CounterMetricFamily("responses_gateway_pool_failures", "Steps a replica failed before its "
                                       "stream started (retried on another).", labels=LABELS)
        ejections = CounterMetricFamily("responses_gateway_pool_ejections",
                                        "Times a replica was ejected for a cooldown.", labels=LABELS)
        affinity = CounterMetricFamily("responses_gateway_pool_affinity", "Continuing sessions that stayed on "
                                       "their replica (hit) or moved (move).", labels=["route", "outcome"])
        for pool in list(self.pools):
            for m in pool.members:
                in_flight.add_metric([pool.name, m.label], m.in_flight)
                requests.add_metric([pool.name, m.label], m.requests)
                failures.add_metric([pool.name, m.label], m.failed)
                ejections.add_metric([pool.name, m.label], m.ejections)
            affinity.add_metric([pool.name, "hit"], pool.hits)
            affinity.add_metric([pool.name, "move"], pool.moves)
        yield from (in_flight, requests, failures, ejections, affinity)


LABELS = ["route", "replica"]
COLLECTOR = Collector()
metrics.register(COLLECTOR)


def retryable(exc: UpstreamError) -> bool:
    """Failed before the stream in a way another replica may not: unreachable, a timeout, 5xx, 429."""
    return exc.status >= 500 or exc.status == 429


def session_key(call: Call) -> str:
    """What names the session this step belongs to (see the module's docstring); "" for none."""
    request = call.request
    if request.prompt_cache_key:
        return "k:" + request.prompt_cache_key
    conversation = request.conversation
    if conversation:
        return "c:" + (conversation if isinstance(conversation, str) else str(conversation.get("id", "")))
    for item in call.items:
        if isinstance(item, dict):
            # its content, not its id: the first turn's input has none yet, the next turns' history has it
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            seen = f"{item.get('type')}\0{item.get('role')}\0{str(content)[:4096]}"
            return "t:" + hashlib.blake2b(seen.encode(errors="replace"), digest_size=12).hexdigest()
    return ""


def rendezvous(key: str, member: Member) -> float:
    """Weighted rendezvous (highest random weight) score of `member` for `key`: each session's order of
    replicas, the same on every gateway replica, moving only the sessions of a replica that comes or goes."""
    digest = hashlib.blake2b(f"{key}\0{member.replica.base_url}".encode(), digest_size=8).digest()
    uniform = (int.from_bytes(digest, "big") + 1) / (2**64 + 2)
    return -member.replica.weight / math.log(uniform)
