"""HTTP's way through the front door (door.py): a `/v1` request is admitted once its body has arrived, and
holds its place until its response has been sent.

A request with a body is read whole here first, at a minimum pace and within --max-body-bytes (body.py),
then admitted: a body still arriving holds no place in flight, so clients that trickle bodies cannot make
everyone else's requests 429s. The handler finds the body in the scope (`body_of`). A multipart upload is
read by its endpoint instead (to disk, within that endpoint's bound), held to the same pace, and admitted
when its last byte has come.

The ticket is released when the app has sent its response — a stream's last event included. A background
response takes the ticket over (`hand_over`): its job releases it when the response ends. `/health` and
`/metrics` pass untouched.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from ..door import Door, Ticket
from ..errors import APIError, RateLimited
from .body import BodyPace, Readers, after_body
from .errors import render

BODY = "responses_gateway.body"  # the request body, read here before admission
TICKET = "responses_gateway.ticket"  # the request's admission, until its response has been sent


class Admission:
    """ASGI middleware (inside KeyAuth, so the caller's owner is known)."""

    def __init__(self, app: ASGIApp, door: Door, pace: BodyPace):
        self.app = app
        self.door = door
        self.readers = Readers(pace)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        length = body_length(scope)
        if length != 0 and is_upload(scope):  # read by its endpoint: admitted when its body has come
            receive = self.readers.paced(receive, lambda: self.enter(scope))
        else:
            if length != 0:
                try:
                    if length is not None:
                        self.door.check_size(length)  # announced too large: refused before a byte is read
                    scope[BODY] = await self.readers.read(receive, self.door)
                except ClientDisconnect:
                    return  # nobody to answer
                except APIError as exc:
                    return await refuse(exc, scope, receive, send)
                receive = after_body(receive)
            try:
                await self.enter(scope)
            except RateLimited as exc:
                return await refuse(exc, scope, receive, send)
        try:
            await self.app(scope, receive, send)
        finally:
            ticket = hand_over(scope)
            if ticket is not None:
                await ticket.release()

    async def enter(self, scope: Scope) -> None:
        scope[TICKET] = await self.door.admit(scope.get("state", {}).get("owner", ""))


def is_upload(scope: Scope) -> bool:
    """A multipart body: its endpoint streams it (to disk) within a bound of its own (e.g. --max-file-bytes)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.lower().startswith(b"multipart/form-data"))
    return False


def body_length(scope: Scope) -> int | None:
    """The announced length of the body: 0 for none, None when it is sent chunked (its length unknown)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.strip().isdigit() else None
        if name == b"transfer-encoding":
            return None
    return 0


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
