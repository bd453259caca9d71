"""HTTP's way through the front door (door.py): a `/v1` request is admitted once its body has arrived, and
holds its place until its response has been sent.

A request with a body is read whole here first (within --max-body-bytes, else 413), then admitted: a body
still arriving holds no slot in flight, so clients that trickle bodies cannot make everyone else's requests
429s. Such a body must keep pace instead: once its first --body-rate-grace seconds are over it must have
averaged --min-body-rate bytes a second, or it is answered 408 `request_timeout` and its connection closed
(counted in `responses_gateway_connections_closed_total{reason="body_rate"}`); `--body-timeout` (edge.py)
still bounds the whole body. The handler finds the body in the scope (`body_of`).

The ticket is released when the app has sent its response — a stream's last event included. A background
response takes the ticket over (`hand_over`): its job releases it when the response ends. `/health` and
`/metrics` pass untouched.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import metrics
from ..door import Door, Ticket
from ..errors import APIError, RateLimited
from .errors import render

BODY = "responses_gateway.body"  # the request body, read here before admission
TICKET = "responses_gateway.ticket"  # the request's admission, until its response has been sent


@dataclass(frozen=True)
class BodyPace:
    """The slowest a body may arrive: `rate` bytes a second on average after its first `grace` seconds."""

    rate: float = 500.0  # 0: no minimum
    grace: float = 10.0

    def deadline(self, started: float, received: int) -> float | None:
        return started + self.grace + received / self.rate if self.rate > 0 else None


class Admission:
    """ASGI middleware (inside KeyAuth, so the caller's owner is known)."""

    def __init__(self, app: ASGIApp, door: Door, pace: BodyPace):
        self.app = app
        self.door = door
        self.pace = pace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        length = body_length(scope)
        if length != 0:
            try:
                if length is not None:
                    self.door.check_size(length)  # announced too large: refused before a byte is read
                scope[BODY] = await read_whole(receive, self.door, self.pace)
            except ClientDisconnect:
                return  # nobody to answer
            except APIError as exc:
                return await refuse(exc, scope, receive, send)
            receive = after_body(receive)
        try:
            ticket = await self.door.admit(scope.get("state", {}).get("owner", ""))
        except RateLimited as exc:
            return await refuse(exc, scope, receive, send)
        scope[TICKET] = ticket
        try:
            await self.app(scope, receive, send)
        finally:
            if scope.get(TICKET) is ticket:
                await ticket.release()


def body_length(scope: Scope) -> int | None:
    """The announced length of the body: 0 for none, None when it is sent chunked (its length unknown)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.strip().isdigit() else None
        if name == b"transfer-encoding":
            return None
    return 0


class SlowBody(APIError):
    def __init__(self, pace: BodyPace):
        super().__init__(408, f"The request body arrived too slowly: after {pace.grace:g}s a body must arrive at "
                              f"{pace.rate:g} bytes a second or more.", code="request_timeout")

    def headers(self) -> dict[str, str]:
        return {"connection": "close"}  # the rest of the body is never read: the connection cannot be reused


async def read_whole(receive: Receive, door: Door, pace: BodyPace) -> bytearray:
    """The body, appended chunk by chunk as it arrives (one join of tens of MB at the end would be a single
    step of tens of milliseconds on the event loop). Raises the 413 or 408 to answer, or ClientDisconnect."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    body = bytearray()
    try:
        async with asyncio.timeout_at(pace.deadline(started, 0)) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect
                chunk = message.get("body", b"")
                door.check_size(len(body) + len(chunk))
                body += chunk
                if not message.get("more_body", False):
                    return body
                deadline.reschedule(pace.deadline(started, len(body)))
    except TimeoutError:
        metrics.connections_closed.labels("body_rate").inc()
        raise SlowBody(pace) from None


def after_body(receive: Receive) -> Receive:
    """The app's `receive` once the body has been read here: the body's end, then what the server says next
    (a disconnect)."""
    ended = False

    async def next_message() -> Message:
        nonlocal ended
        if not ended:
            ended = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await receive()

    return next_message


async def refuse(error: APIError, scope: Scope, receive: Receive, send: Send) -> None:
    await render(error)(scope, receive, send)


def body_of(scope: Scope) -> bytearray | None:
    """The body read before admission; None for a request without one."""
    body: bytearray | None = scope.get(BODY)
    return body


def hand_over(scope: Scope) -> Ticket | None:
    """The request's ticket, now the caller's to release (a background job holds it for its life)."""
    ticket: Ticket | None = scope.pop(TICKET, None)
    return ticket
