"""Every limit through every transport (door.py): a table of limits × transports against a real gateway on
loopback — HTTP, a WebSocket turn, a background response, /v1/responses/compact, /v1/responses/input_tokens.

Two tables: a request over a limit is refused with the status and code HTTP gives, whatever carries it
(`test_a_request_over_a_limit_is_refused`); and a response holds its place in flight until its response has
been sent — a WebSocket turn until its last event, a background response until its job ends — and frees it
then (`test_a_response_holds_its_place_until_it_ends`). The per-key limits are tried in this process and
through Redis.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis
from websockets.sync.client import ClientConnection, connect

from responses_gateway import shared_limits
from responses_gateway.api.auth import owner_of
from responses_gateway.config import Settings
from tests.support import backends
from tests.support.fake_chat import Sleep, Stream, text_stream
from tests.support.server import GatewayServer

redis_url = backends.redis_url

KEY = "sk-a"
BOUND = 20.0  # seconds: far above any wait here, far below "forever"
HOLD = 3.0  # seconds a holding response's upstream stays silent


def items(n: int) -> list[dict]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"m{i}"}]}
            for i in range(n)]


@dataclass
class Outcome:
    status: int
    code: str | None = None


OK = Outcome(200)


class Transport:
    """One way of asking for a response; `send` a request body (a dict, or raw JSON text)."""

    name = ""

    def __init__(self, gw: GatewayServer, key: str | None):
        self.gw = gw
        self.headers = {"authorization": f"Bearer {key}"} if key else {}

    def body(self, fields: dict) -> dict:
        return fields

    def send(self, request: dict | str) -> Outcome:
        raw = request if isinstance(request, str) else json.dumps(self.body(request))
        answer = httpx.post(f"{self.gw.url}{self.path}", content=raw, timeout=BOUND,
                            headers={**self.headers, "content-type": "application/json"})
        if answer.status_code == 200:
            return OK
        return Outcome(answer.status_code, answer.json()["error"]["code"])

    def close(self) -> None:
        pass

    path = "/v1/responses"


class HTTP(Transport):
    name = "http"


class Background(Transport):
    name = "background"

    def body(self, fields: dict) -> dict:
        return {**fields, "background": True}


class Compact(Transport):
    name = "compact"
    path = "/v1/responses/compact"


class InputTokens(Transport):
    name = "input_tokens"
    path = "/v1/responses/input_tokens"


class WebSocketTurn(Transport):
    """Turns over one WebSocket connection, opened on first use."""

    name = "websocket"
    ws: ClientConnection | None = None

    def send(self, request: dict | str) -> Outcome:
        if self.ws is None:
            url = self.gw.url.replace("http://", "ws://", 1) + "/v1/responses"
            self.ws = connect(url, additional_headers=self.headers, max_size=None)
        if isinstance(request, str):
            self.ws.send(request)
        else:
            self.ws.send(json.dumps({"type": "response.create", **request}))
        while True:
            event = json.loads(self.ws.recv(timeout=BOUND))
            if event["type"] == "error" and "status" in event:
                return Outcome(event["status"], event["error"]["code"])
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                return OK if event["type"] == "response.completed" else Outcome(502, "failed")

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()


TRANSPORTS = [HTTP, WebSocketTurn, Background, Compact, InputTokens]


def frame(body: str) -> str:
    """A raw body as a WebSocket frame would carry it (the transports that speak HTTP send it as it is)."""
    return '{"type": "response.create", ' + body[1:]


# --------------------------------------------------------------------------- refused over a limit


@dataclass
class Limit:
    """Settings that make a limit small, and how to go over it: `over(transport)` returns what the request
    over the limit got."""

    name: str
    settings: dict
    over: Callable[[Transport, object], Outcome]
    expected: Outcome


def over_items(t: Transport, upstream) -> Outcome:
    assert t.send({"model": "m", "input": items(2)}) == OK  # at the limit: served
    return t.send({"model": "m", "input": items(3)})


def over_depth(t: Transport, upstream) -> Outcome:
    body = '{"model": "m", "input": [[[[[[[["deep"]]]]]]]]}'
    return t.send(frame(body) if isinstance(t, WebSocketTurn) else body)


def over_size(t: Transport, upstream) -> Outcome:
    return t.send({"model": "m", "input": "x" * 5000})


def over_rate(t: Transport, upstream) -> Outcome:
    assert t.send({"model": "m", "input": items(1)}) == OK
    return t.send({"model": "m", "input": items(1)})


def over_concurrency(t: Transport, upstream) -> Outcome:
    """While an HTTP stream of the same key holds the only place, the transport's request is refused."""
    seen = len(upstream.requests)
    upstream.enqueue(holding_script())
    body = {"model": "m", "input": items(1), "stream": True}
    with httpx.stream("POST", f"{t.gw.url}/v1/responses", json=body, headers=t.headers, timeout=BOUND) as held:
        assert held.status_code == 200
        wait_until(lambda: len(upstream.requests) > seen, "the holding stream reaches the upstream")
        return t.send({"model": "m", "input": items(1)})  # the holder leaves then, closing its upstream


LIMITS = [
    Limit("max_input_items", {"max_input_items": 2}, over_items, Outcome(400, "array_above_max_length")),
    Limit("max_json_depth", {"max_json_depth": 6}, over_depth, Outcome(400, "nesting_too_deep")),
    Limit("max_body_bytes", {"max_body_bytes": 4096}, over_size, Outcome(413, "request_too_large")),
    Limit("key_requests_per_minute", {"key_requests_per_minute": 1}, over_rate, Outcome(429, "rate_limit_exceeded")),
    Limit("key_max_in_flight", {"key_max_in_flight": 1}, over_concurrency, Outcome(429, "rate_limit_exceeded")),
    Limit("max_in_flight", {"max_in_flight": 1}, over_concurrency, Outcome(429, "rate_limit_exceeded")),
]



@contextlib.contextmanager
def gateway(upstream, tmp_path, redis_at: str | None = None, **limits) -> Iterator[GatewayServer]:
    """A gateway storing in SQLite (background responses need a store) with one API key; with `redis_at`, the
    per-key limits are kept there, under a key of this test's own (deleted afterwards)."""
    key = f"sk-{uuid.uuid4().hex}" if redis_at else KEY
    secret = "front-door-test-secret"
    upstream.default = lambda request: Stream(text_stream(["fine"]))  # quick answers; holders queue their own
    settings = Settings(upstream_url=upstream.base_url, db=str(tmp_path / "rg.db"), api_keys=key,
                        owner_secret=secret, redis_url=redis_at, **limits)
    try:
        with GatewayServer(settings) as gw:
            gw.key = key
            yield gw
    finally:
        if redis_at:
            owner = owner_of(key, secret)
            with contextlib.suppress(redis.RedisError):
                redis.Redis.from_url(redis_at, socket_connect_timeout=1).delete(
                    shared_limits.in_flight_key(owner), shared_limits.rate_key(owner))


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def holding_script() -> Stream:
    return Stream([*text_stream(["held"])[:1], Sleep(HOLD), *text_stream(["held"])[1:]])


def hold(t: Transport, headers: dict, upstream) -> Callable[[], None]:
    """Start a response through `t` whose upstream stays silent for HOLD seconds; returns once the upstream
    has it (so it is in flight). The function returned waits for the response's end."""
    t.headers = headers
    seen = len(upstream.requests)
    upstream.enqueue(holding_script())
    done: list[Outcome] = []
    if isinstance(t, Background):
        answer = httpx.post(f"{t.gw.url}/v1/responses", json={"model": "m", "input": items(1), "background": True},
                            headers=headers, timeout=BOUND).json()

        def ended() -> None:
            def finished() -> bool:
                got = httpx.get(f"{t.gw.url}/v1/responses/{answer['id']}", headers=headers, timeout=BOUND)
                return got.status_code == 200 and got.json()["status"] == "completed"
            wait_until(finished, "the background response ends")
    else:
        thread = threading.Thread(target=lambda: done.append(t.send({"model": "m", "input": items(1)})))
        thread.start()

        def ended() -> None:
            thread.join(BOUND)
            assert done == [OK], done
    wait_until(lambda: len(upstream.requests) > seen, "the holding response reaches the upstream")
    return ended


def cases(limits: list[Limit], transports: list[type[Transport]]) -> list:
    """Each limit × each transport, and again with Redis for the per-key limits (the in-flight cap and the
    bounds are always this process's)."""
    return [pytest.param(limit, transport, shared, id=f"{limit.name}-{transport.name}{'-redis' if shared else ''}")
            for limit in limits for transport in transports
            for shared in ((False, True) if limit.name.startswith("key_") else (False,))]


@pytest.mark.parametrize(("limit", "transport", "shared"), cases(LIMITS, TRANSPORTS))
def test_a_request_over_a_limit_is_refused(limit, transport, shared, upstream, tmp_path, request):
    at = request.getfixturevalue("redis_url") if shared else None
    with gateway(upstream, tmp_path, at, **limit.settings) as gw:
        t = transport(gw, gw.key)
        try:
            assert limit.over(t, upstream) == limit.expected
        finally:
            t.close()


# --------------------------------------------------------------------------- a place held until the end

HOLDERS = [HTTP, WebSocketTurn, Background, Compact]
CAPS = [limit for limit in LIMITS if limit.over is over_concurrency]


@pytest.mark.parametrize(("cap", "holder", "shared"), cases(CAPS, HOLDERS))
def test_a_response_holds_its_place_until_it_ends(cap, holder, shared, upstream, tmp_path, request):
    at = request.getfixturevalue("redis_url") if shared else None
    with gateway(upstream, tmp_path, at, **cap.settings) as gw:
        t = holder(gw, gw.key)
        probe = HTTP(gw, gw.key)
        try:
            ended = hold(t, probe.headers, upstream)
            assert probe.send({"model": "m", "input": items(1)}) == Outcome(429, "rate_limit_exceeded")
            ended()
            wait_until(lambda: probe.send({"model": "m", "input": items(1)}) == OK, "the place is free again")
        finally:
            t.close()


# --------------------------------------------------------------------------- the reproduction


def test_three_websocket_turns_over_the_limits_each_get_the_http_answer(upstream):
    """serve --db none --api-keys sk-a --key-requests-per-minute 1 --max-input-items 2: three requests of 3
    items each, over HTTP and over one WebSocket, get the same answers; the connection stays usable."""
    settings = Settings(upstream_url=upstream.base_url, db="none", api_keys=KEY, key_requests_per_minute=1,
                        max_input_items=2)
    upstream.default = lambda request: Stream(text_stream(["never"]))
    answers = {}
    for transport in (HTTP, WebSocketTurn):
        with GatewayServer(settings) as gw:
            t = transport(gw, KEY)
            try:
                answers[transport.name] = [t.send({"model": "m", "input": items(3)}) for _ in range(3)]
                if isinstance(t, WebSocketTurn):
                    assert t.send('{"type": "nonsense"}') == Outcome(400, "invalid_value")  # still answering
            finally:
                t.close()
    assert answers["websocket"] == answers["http"] == [
        Outcome(400, "array_above_max_length"), Outcome(429, "rate_limit_exceeded"),
        Outcome(429, "rate_limit_exceeded")]
    assert upstream.requests == []


# --------------------------------------------------------------------------- bad input, every endpoint


class ConversationItems(Transport):
    """Items added to a new conversation (POST /v1/conversations/{id}/items)."""

    name = "conversation_items"

    def send(self, request: dict | str) -> Outcome:
        created = httpx.post(f"{self.gw.url}/v1/conversations", json={}, headers=self.headers, timeout=BOUND)
        self.path = f"/v1/conversations/{created.json()['id']}/items"
        assert isinstance(request, dict)
        return Transport.send(self, json.dumps({"items": request["input"]}))


class NewConversation(Transport):
    name = "conversation"
    path = "/v1/conversations"

    def body(self, fields: dict) -> dict:
        return {"items": fields["input"]}


@pytest.mark.parametrize("kind", [["message"], {"type": "message"}], ids=["array", "object"])
@pytest.mark.parametrize("transport", [*TRANSPORTS, NewConversation, ConversationItems], ids=lambda t: t.name)
def test_an_item_type_that_is_not_a_string_is_a_400(transport, kind, upstream, tmp_path):
    with gateway(upstream, tmp_path) as gw:
        t = transport(gw, gw.key)
        try:
            for bad in ({"type": kind, "role": "user", "content": "hi"},
                        {"type": "message", "role": "user", "content": [{"type": kind, "text": "hi"}]}):
                assert t.send({"model": "m", "input": [bad]}) == Outcome(400, "invalid_type")
        finally:
            t.close()
    assert upstream.requests == []


def test_other_requests_pass_the_same_admission_once(upstream, tmp_path):
    """Retrieving, listing and deleting are admitted as before: each counts once against the key's rate."""
    with gateway(upstream, tmp_path, key_requests_per_minute=3) as gw:
        headers = {"authorization": f"Bearer {gw.key}"}
        created = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "hi"}, headers=headers)
        assert created.status_code == 200
        rid = created.json()["id"]
        assert httpx.get(f"{gw.url}/v1/responses/{rid}", headers=headers).status_code == 200
        assert httpx.get(f"{gw.url}/v1/responses/{rid}/input_items", headers=headers).status_code == 200
        refused = httpx.delete(f"{gw.url}/v1/responses/{rid}", headers=headers)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert httpx.get(f"{gw.url}/health").status_code == 200  # never limited
