"""The front door: the one admission and the one set of request bounds, whatever carries the request.

Every way a response starts — `POST /v1/responses` (streamed, whole or background), each WebSocket turn,
`/v1/responses/compact`, `/v1/responses/input_tokens`, a response that continues a conversation — passes
the same checks, so a limit added here holds on every transport at once (docs/limits.md has the table):

- admission (`Door.admit`): a cap on requests in flight in this process, and per API key a concurrency cap
  and a request rate, kept in Redis (shared_limits.py) when `--redis` is set. Beyond a limit:
  `RateLimited`, OpenAI's 429 (`type: "requests"`, `code: "rate_limit_exceeded"`), counted in
  `responses_gateway_requests_limited_total{reason}`. An admitted request holds a `Ticket` until its
  response has been sent — a stream until its last event, a background response until its job ends — and
  releases it then. The transports admit a request once it has arrived whole (an HTTP body still trickling
  in holds no slot: api/admission.py), and every other `/v1` HTTP request passes the same admission.
- bounds: the body's size (`check_size`), what its JSON may cost (`scan`: depth, objects and arrays,
  integer width, on the raw bytes before anything is parsed) and the number of input items
  (`check_request`, which respond.prepare calls for every response).

The in-flight cap is this process's (it protects the process's own resources); the per-key limits are kept
here too unless `--redis` is set, and then they hold across workers and replicas.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import metrics
from .errors import APIError, RateLimited, invalid
from .offload import LARGE_BYTES
from .protocol.bounds import Bounds, InputLayout, check_body, plainly_within

if TYPE_CHECKING:
    from .config import Settings
    from .protocol.request import CreateResponse
    from .shared_limits import SharedLimits


@dataclass(frozen=True)
class Limits:
    """The front door's limits (flags in docs/limits.md); 0 switches a per-key limit off."""

    max_in_flight: int = 512
    key_max_in_flight: int = 0
    key_requests_per_minute: float = 0
    max_body_bytes: int = 32 * 1024 * 1024
    max_json_depth: int = 64
    max_json_containers: int = 200_000
    max_input_items: int = 20_000

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(settings.max_in_flight, settings.key_max_in_flight, settings.key_requests_per_minute,
                   settings.max_body_bytes, settings.max_json_depth, settings.max_json_containers,
                   settings.max_input_items)


@dataclass
class Bucket:
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


class Ticket:
    """An admitted request's place: held until its response has been sent, then released (once)."""

    __slots__ = ("door", "owner", "token", "held")

    def __init__(self, door: Door, owner: str, token: str | None):
        self.door = door
        self.owner = owner
        self.token = token  # the Redis limiter's, when the per-key limits are shared
        self.held = True

    async def release(self) -> None:
        if self.held:
            self.held = False
            await self.door.leave(self)


class Door:
    """This process's admission state, and the bounds. `shared`: the per-key limits in Redis."""

    def __init__(self, limits: Limits, shared: SharedLimits | None = None):
        self.limits = limits
        self.shared = shared
        self.bounds = Bounds(limits.max_json_depth, limits.max_json_containers)
        self.in_flight = 0
        self.by_key: dict[str, int] = {}
        self.buckets: dict[str, Bucket] = {}

    # -- admission ----------------------------------------------------------------------------------------

    async def admit(self, owner: str) -> Ticket:
        """A ticket for one request of `owner` (the caller's keyed id, "" without API keys), or RateLimited."""
        try:
            if self.shared is None:
                self.refuse_locally(owner)
                self.enter(owner)
                return Ticket(self, owner, None)
            return await self.admit_shared(self.shared, owner)
        except RateLimited as exc:
            metrics.requests_limited.labels(exc.reason).inc()
            raise

    async def admit_shared(self, shared: SharedLimits, owner: str) -> Ticket:
        """This process's in-flight cap, then one round trip to Redis for the key's limits."""
        if self.over_in_flight():
            raise over_in_flight(self.limits)
        self.in_flight += 1  # counted while Redis answers, so concurrent arrivals cannot pass the cap
        try:
            got = await shared.admit(owner)
        except BaseException:
            self.in_flight -= 1
            raise
        if isinstance(got, tuple):
            self.in_flight -= 1
            reason, wait = got
            raise over_key_concurrency(self.limits) if reason == "key_concurrency" else \
                over_key_rate(self.limits, wait)
        return Ticket(self, owner, got)

    def refuse_locally(self, owner: str) -> None:
        limits = self.limits
        if self.over_in_flight():
            raise over_in_flight(limits)
        if limits.key_max_in_flight > 0 and self.by_key.get(owner, 0) >= limits.key_max_in_flight:
            raise over_key_concurrency(limits)
        if limits.key_requests_per_minute > 0:
            bucket = self.buckets.get(owner)
            if bucket is None:
                bucket = self.buckets[owner] = Bucket(limits.key_requests_per_minute,
                                                      limits.key_requests_per_minute)
            wait = bucket.take()
            if wait:
                raise over_key_rate(limits, wait)

    def over_in_flight(self) -> bool:
        return self.limits.max_in_flight > 0 and self.in_flight >= self.limits.max_in_flight

    def enter(self, owner: str) -> None:
        self.in_flight += 1
        self.by_key[owner] = self.by_key.get(owner, 0) + 1

    async def leave(self, ticket: Ticket) -> None:
        """Called once per ticket, by `Ticket.release`."""
        self.in_flight -= 1
        if ticket.token is not None:
            if self.shared is not None:
                await self.shared.release(ticket.owner, ticket.token)
            return
        left = self.by_key[ticket.owner] - 1
        if left:
            self.by_key[ticket.owner] = left
        else:
            del self.by_key[ticket.owner]

    # -- bounds -------------------------------------------------------------------------------------------

    def check_size(self, size: int, what: str = "Request body") -> None:
        """413 above --max-body-bytes (an HTTP body, a WebSocket message)."""
        if size > self.limits.max_body_bytes:
            raise too_large(self.limits.max_body_bytes, what)

    def scan(self, raw: bytes | bytearray) -> InputLayout | None:
        """400 for a body too deep, with too many objects and arrays, or an integer wider than 64 bits; else
        where its input items lie (protocol/bounds.py) when the body is large (offload.py: it is then parsed
        in pieces), None for a small one (parsed whole). Costs one pass over the bytes: offload it when large.
        A small body that plainly cannot break the bounds (most bodies) is not scanned token by token."""
        if len(raw) <= LARGE_BYTES and plainly_within(raw, self.bounds):
            return None
        return check_body(raw, self.bounds)

    def check_request(self, req: CreateResponse) -> None:
        """400 `array_above_max_length` for more input items than --max-input-items. A final compaction
        trigger is a request, not an item (`/v1/responses/compact` adds one), so it is not counted."""
        items: Any = req.input
        if not isinstance(items, list):
            return
        count = len(items) - (1 if items and _is_trigger(items[-1]) else 0)
        limit = self.limits.max_input_items
        if count > limit:
            raise invalid(f"Invalid 'input': array too long. Expected an array with maximum length {limit}, but "
                          f"got an array with length {count} instead.", "input", "array_above_max_length")


def _is_trigger(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "compaction_trigger"


def too_large(limit: int, what: str = "Request body") -> APIError:
    return APIError(413, f"{what} too large: the limit is {limit} bytes.", code="request_too_large")


def over_in_flight(limits: Limits) -> RateLimited:
    return RateLimited(f"The gateway is at its limit of {limits.max_in_flight} requests in flight. "
                       "Please try again shortly.", "in_flight", 1)


def over_key_concurrency(limits: Limits) -> RateLimited:
    return RateLimited(f"Rate limit reached: at most {limits.key_max_in_flight} concurrent requests per API key. "
                       "Please try again when one has finished.", "key_concurrency", 1)


def over_key_rate(limits: Limits, wait: float) -> RateLimited:
    return RateLimited(f"Rate limit reached for requests per min (RPM): Limit {limits.key_requests_per_minute:g}. "
                       f"Please try again in {wait:.3g}s.", "key_rate", wait)
