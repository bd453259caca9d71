"""Admission at the edge: a cap on requests in flight, and per API key a concurrency cap and a request rate.

Beyond a limit the request is refused at once with OpenAI's 429 body (`type: "requests"`,
`code: "rate_limit_exceeded"`) and a `retry-after` header, and counted in
`responses_gateway_requests_limited_total{reason}`. A request is in flight from its arrival until its
response (a whole stream included) is sent. Only `/v1/` requests are admitted or refused; `/health` and
`/metrics` always answer.

The in-flight cap is this process's (it protects the process's own resources). The per-key limits live in
this process too, unless `--redis` is set: then they are kept in Redis (shared_limits.py) and hold across
workers and replicas.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Receive, Scope, Send

from .. import metrics
from ..errors import APIError
from .errors import render
from .shared_limits import SharedLimits

Refusal = tuple[str, tuple[APIError, dict[str, str]]]  # the reason (a metric label), the error and headers


@dataclass(frozen=True)
class AdmissionLimits:
    max_in_flight: int = 512
    key_max_in_flight: int = 0  # 0: no per-key cap
    key_requests_per_minute: float = 0  # 0: no per-key rate


@dataclass
class _Bucket:
    """A token bucket: `rate` tokens a minute, at most `rate` saved up (a minute's burst)."""

    rate: float
    tokens: float
    at: float = field(default_factory=time.monotonic)

    def take(self) -> float:
        """0 when a token was taken, else the seconds until one is available."""
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate / 60)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) * 60 / self.rate


def too_many(message: str, retry_after: float) -> tuple[APIError, dict[str, str]]:
    error = APIError(429, message, type="requests", code="rate_limit_exceeded")
    return error, {"retry-after": str(max(1, math.ceil(retry_after)))}


class Admission:
    """ASGI middleware (inside KeyAuth, so the caller's owner is known). `shared`: the per-key limits in
    Redis instead of this process."""

    def __init__(self, app: ASGIApp, limits: AdmissionLimits, shared: SharedLimits | None = None):
        self.app = app
        self.limits = limits
        self.shared = shared
        self.in_flight = 0
        self.by_key: dict[str, int] = {}
        self.buckets: dict[str, _Bucket] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        key = scope.get("state", {}).get("owner", "")
        if self.shared is not None:
            return await self._with_shared(self.shared, key, scope, receive, send)
        refusal = self._refusal(key)
        if refusal is not None:
            return await _refuse(refusal, scope, receive, send)
        self.in_flight += 1
        self.by_key[key] = self.by_key.get(key, 0) + 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            left = self.by_key[key] - 1
            if left:
                self.by_key[key] = left
            else:
                del self.by_key[key]

    async def _with_shared(self, shared: SharedLimits, key: str, scope: Scope, receive: Receive,
                           send: Send) -> None:
        """This process's in-flight cap, then one round trip to Redis for the key's limits."""
        if self._over_in_flight():
            return await _refuse(over_in_flight(self.limits), scope, receive, send)
        self.in_flight += 1  # counted while Redis answers, so concurrent arrivals cannot pass the cap
        try:
            got = await shared.admit(key)
            if isinstance(got, tuple):
                reason, wait = got
                refusal = over_key_concurrency(self.limits) if reason == "key_concurrency" else \
                    over_key_rate(self.limits, wait)
                return await _refuse(refusal, scope, receive, send)
            try:
                await self.app(scope, receive, send)
            finally:
                await shared.release(key, got)
        finally:
            self.in_flight -= 1

    def _over_in_flight(self) -> bool:
        return self.limits.max_in_flight > 0 and self.in_flight >= self.limits.max_in_flight

    def _refusal(self, key: str) -> Refusal | None:
        limits = self.limits
        if self._over_in_flight():
            return over_in_flight(limits)
        if limits.key_max_in_flight > 0 and self.by_key.get(key, 0) >= limits.key_max_in_flight:
            return over_key_concurrency(limits)
        if limits.key_requests_per_minute > 0:
            bucket = self.buckets.get(key)
            if bucket is None:
                bucket = self.buckets[key] = _Bucket(limits.key_requests_per_minute,
                                                     limits.key_requests_per_minute)
            wait = bucket.take()
            if wait:
                return over_key_rate(limits, wait)
        return None


def over_in_flight(limits: AdmissionLimits) -> Refusal:
    return "in_flight", too_many(f"The gateway is at its limit of {limits.max_in_flight} requests in flight. "
                                 "Please try again shortly.", 1)


def over_key_concurrency(limits: AdmissionLimits) -> Refusal:
    return "key_concurrency", too_many(
        f"Rate limit reached: at most {limits.key_max_in_flight} concurrent requests per API key. "
        "Please try again when one has finished.", 1)


def over_key_rate(limits: AdmissionLimits, wait: float) -> Refusal:
    return "key_rate", too_many(
        f"Rate limit reached for requests per min (RPM): Limit {limits.key_requests_per_minute:g}. "
        f"Please try again in {wait:.3g}s.", wait)


async def _refuse(refusal: Refusal, scope: Scope, receive: Receive, send: Send) -> None:
    reason, (error, headers) = refusal
    metrics.requests_limited.labels(reason).inc()
    response = render(error)
    response.headers.update(headers)
    await response(scope, receive, send)
