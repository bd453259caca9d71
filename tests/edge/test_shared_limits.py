"""Per-API-key limits kept in Redis (`--redis`): two real gateways on loopback share one key's request rate
and concurrency cap; leases are renewed while a stream lasts, and a crashed holder's lease expires; a
Redis that is down or silent admits requests within the limiter's deadline (fail open), counted and logged.

Each runs against one Redis and against a real three-node Redis Cluster (`--redis-cluster`), where an
owner's keys must share a hash slot for the limiter's script to run at all.

Each test uses an API key of its own (so its Redis keys are its own) and deletes them afterwards."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from responses_gateway import shared_limits
from responses_gateway.api.auth import owner_of
from responses_gateway.config import Settings
from tests.support import backends, redis_cluster
from tests.support.fake_chat import Stream, text_stream
from tests.support.server import GatewayServer

redis_url = backends.redis_url
redis_cluster_url = redis_cluster.redis_cluster_url

SECRET = "shared-limits-test-secret"  # the same in both gateways, so a key has the same owner in each
BOUND = 10.0  # seconds: far above any wait here, far below "forever"


@dataclass
class Target:
    """Where the limits are kept: one Redis, or a Redis Cluster (`url` names one of its nodes)."""

    url: str
    cluster: bool = False

    def client(self) -> redis.Redis | redis.RedisCluster:
        kind = redis.RedisCluster if self.cluster else redis.Redis
        return kind.from_url(self.url, socket_connect_timeout=1)


@pytest.fixture(params=["single", "cluster"])
def target(request) -> Target:
    if request.param == "cluster":
        return Target(request.getfixturevalue("redis_cluster_url"), cluster=True)
    return Target(request.getfixturevalue("redis_url"))


METRICS_KEY = "metrics-key"  # with API keys set, /metrics answers only this key (scrape.py)


@contextlib.contextmanager
def gateways(upstream, target: Target, **limits) -> Iterator[tuple[str, list[GatewayServer]]]:
    """Two gateways sharing `target` (one Redis or Cluster) and one fresh API key; its Redis keys are
    deleted after."""
    key = f"key-{uuid.uuid4().hex}"
    settings = Settings(upstream_url=upstream.base_url, db="none", api_keys=key, owner_secret=SECRET,
                        metrics_key=METRICS_KEY, redis_url=target.url, redis_cluster=target.cluster, **limits)
    try:
        with GatewayServer(settings) as a, GatewayServer(settings) as b:
            yield key, [a, b]
    finally:
        owner = owner_of(key, SECRET)
        with contextlib.suppress(redis.RedisError):
            target.client().delete(shared_limits.in_flight_key(owner), shared_limits.rate_key(owner))


def post(gw: GatewayServer, key: str, stream: bool = False) -> httpx.Response:
    return httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "x", "stream": stream},
                      headers={"authorization": f"Bearer {key}"}, timeout=30)


def wait_until(check, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def redis_now_ms(r: redis.Redis | redis.RedisCluster) -> int:
    seconds, micros = r.time()
    return seconds * 1000 + micros // 1000


def in_background(call) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    return thread, out


def limited(gw: GatewayServer, reason: str) -> float:
    text = httpx.get(f"{gw.url}/metrics", headers={"authorization": f"Bearer {METRICS_KEY}"}).text
    line = f'responses_gateway_requests_limited_total{{reason="{reason}"}}'
    return next((float(x.split()[-1]) for x in text.splitlines() if x.startswith(line)), 0.0)


def test_request_rate_is_shared_across_gateways(upstream, target):
    upstream.default = Stream(text_stream(["ok"]))
    with gateways(upstream, target, key_requests_per_minute=2) as (key, (a, b)):
        before = limited(a, "key_rate")
        assert post(a, key).status_code == 200
        assert post(b, key).status_code == 200
        third = post(a, key)  # each gateway alone would still have a token
        assert third.status_code == 429, third.text
        error = third.json()["error"]
        assert error["type"] == "requests" and error["code"] == "rate_limit_exceeded"
        assert "Rate limit reached for requests per min (RPM): Limit 2. Please try again in" in error["message"]
        assert 25 <= int(third.headers["retry-after"]) <= 30  # the script's wait: half a minute for a token
        assert post(b, key).status_code == 429
        assert limited(a, "key_rate") == before + 2  # one registry here: both gateways count into it
        assert httpx.get(f"{b.url}/health").status_code == 200  # never limited

        r = target.client()
        bucket = shared_limits.rate_key(owner_of(key, SECRET))
        assert 0 < r.pttl(bucket) <= 60_000  # a bucket left alone is full within a minute: it expires
        assert key not in str(r.keys(f"{shared_limits.PREFIX}*"))  # the owner's HMAC, never the key


def test_concurrency_cap_is_shared_across_gateways(upstream, target):
    upstream.default = Stream(text_stream(["a", "b", "c", "d"]), delay=0.5)
    with gateways(upstream, target, key_max_in_flight=1) as (key, (a, b)):
        r = target.client()
        slots = shared_limits.in_flight_key(owner_of(key, SECRET))
        first, got = in_background(lambda: post(a, key, stream=True))
        wait_until(lambda: r.zcard(slots) == 1, "the first stream holds its slot")
        assert 0 < r.pttl(slots) <= shared_limits.LEASE * 1000  # the set expires with its last lease

        second = post(b, key, stream=True)  # the other gateway
        assert second.status_code == 429, second.text
        assert second.json()["error"]["code"] == "rate_limit_exceeded"
        assert "at most 1 concurrent requests per API key" in second.json()["error"]["message"]
        assert second.headers["retry-after"] == "1"

        first.join(30)
        assert got[0].status_code == 200 and "response.completed" in got[0].text
        wait_until(lambda: r.zcard(slots) == 0, "the slot is released once the stream is sent")
        assert post(b, key, stream=True).status_code == 200


def test_a_long_stream_keeps_its_slot_past_the_lease(upstream, target, monkeypatch):
    monkeypatch.setattr(shared_limits, "LEASE", 1.0)
    monkeypatch.setattr(shared_limits, "RENEW_EVERY", 0.2)
    upstream.default = Stream(text_stream(["a", "b", "c", "d", "e", "f"]), delay=0.5)  # about 3 s
    with gateways(upstream, target, key_max_in_flight=1) as (key, (a, b)):
        r = target.client()
        slots = shared_limits.in_flight_key(owner_of(key, SECRET))
        first, got = in_background(lambda: post(a, key, stream=True))
        wait_until(lambda: r.zcard(slots) == 1, "the first stream holds its slot")
        time.sleep(2)  # twice the lease: without renewal the entry would have expired
        assert first.is_alive()
        assert post(b, key).status_code == 429
        first.join(30)
        assert got[0].status_code == 200


def test_a_crashed_holders_lease_expires(upstream, target):
    upstream.default = Stream(text_stream(["ok"]))
    with gateways(upstream, target, key_max_in_flight=1) as (key, (a, b)):
        r = target.client()
        slots = shared_limits.in_flight_key(owner_of(key, SECRET))
        r.zadd(slots, {"crashed-long-ago": redis_now_ms(r) - 1})  # a lease already past
        assert post(a, key).status_code == 200
        assert r.zscore(slots, "crashed-long-ago") is None  # dropped before counting

        until = redis_now_ms(r) + 1500
        r.zadd(slots, {"crashed-just-now": until})  # its process died: nobody renews or removes it
        assert post(b, key).status_code == 429
        wait_until(lambda: redis_now_ms(r) > until, "the lease has run out")
        assert post(b, key).status_code == 200


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


@pytest.mark.parametrize("redis_down", ["closed_port", "silent"])
def test_limits_fail_open_when_redis_is_unusable(upstream, redis_down, caplog):
    upstream.default = Stream(text_stream(["ok"]))
    caplog.set_level(logging.WARNING, logger="responses_gateway.limits")
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(silent_server()) if redis_down == "silent" else backends.free_port()
        key, (a, _) = stack.enter_context(gateways(upstream, Target(f"redis://127.0.0.1:{port}/0"),
                                                   key_max_in_flight=1, key_requests_per_minute=1))
        errors = _limiter_errors(a)
        for _ in range(3):  # the rate (1 a minute) would refuse the second
            started = time.monotonic()
            assert post(a, key).status_code == 200
            assert time.monotonic() - started < 5  # the limiter's deadline is half a second
        wait_until(lambda: _limiter_errors(a)["admit"] >= errors["admit"] + 3, "each failure is counted")
        warnings = [rec.getMessage() for rec in caplog.records if rec.name == "responses_gateway.limits"]
        # each gateway warned once at startup (its script could not be loaded); then at most once a minute
        assert len(warnings) == 2 and all("open failed" in w for w in warnings), warnings
        assert all("admitting requests without the per-key limits" in w for w in warnings)


def _limiter_errors(gw: GatewayServer) -> dict[str, float]:
    counts = {"admit": 0.0, "release": 0.0}
    scraped = httpx.get(f"{gw.url}/metrics", headers={"authorization": f"Bearer {METRICS_KEY}"})
    for line in scraped.text.splitlines():
        if line.startswith("responses_gateway_limiter_errors_total{"):
            op = line.split('op="', 1)[1].split('"', 1)[0]
            counts[op] = float(line.split()[-1])
    return counts


def test_workers_without_a_database_share_a_keys_limit(upstream, target):
    """`serve --workers 2 --db none`: no database keeps an owner secret for the workers to share, so `serve`
    gives them one; before, each worker made its own, one key was two owners and got twice its rate."""
    from tests.operations.test_cli import serve, stop

    upstream.default = Stream(text_stream(["ok"]))
    key = f"key-{uuid.uuid4().hex}"
    cluster = ["--redis-cluster"] if target.cluster else []
    proc, url = serve("--workers", "2", "--db", "none", "--redis", target.url, *cluster, "--api-keys", key,
                      "--key-requests-per-minute", "3", "--log-level", "warning",
                      env={"RG_UPSTREAM_URL": upstream.base_url})
    try:
        statuses = [httpx.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"}, timeout=30,
                               headers={"authorization": f"Bearer {key}", "connection": "close"}).status_code
                    for _ in range(12)]  # a new connection each: the kernel spreads them over both workers
    finally:
        stop(proc)
    assert statuses.count(200) == 3 and statuses.count(429) == 9, statuses
