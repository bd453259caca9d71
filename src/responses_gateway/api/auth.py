"""Inbound API keys and tenancy.

With keys configured, every /v1 request must carry `Authorization: Bearer <key>`. A request's owner is a
hash of its key (the key itself is never stored or logged); stored responses belong to their owner, and
any other key sees them as not found. Without keys, everyone shares one owner.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import APIError
from .errors import render

MISSING = APIError(
    401,
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
    "auth (i.e. Authorization: Bearer YOUR_KEY).",
    code=None,
)
WRONG = APIError(401, "Incorrect API key provided.", code="invalid_api_key")


def owner_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class KeyAuth:
    """ASGI middleware: puts the caller's owner id in `scope["state"]["owner"]`."""

    def __init__(self, app: ASGIApp, keys: list[str]):
        self.app = app
        self.owners = {key.encode(): owner_of(key) for key in keys}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        owner = ""
        if self.owners:
            checked = self._check(scope)
            if isinstance(checked, APIError):
                if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
                    return await send({"type": "websocket.close", "code": 1008})
                # a refused WebSocket upgrade gets the same 401 and body as HTTP (the server's denial response)
                return await render(checked)(scope, receive, send)
            owner = checked
        scope.setdefault("state", {})["owner"] = owner
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> str | APIError:
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if not header or header[:7].lower() != b"bearer ":
            return MISSING
        given = header[7:].strip()
        for key, owner in self.owners.items():
            if hmac.compare_digest(given, key):
                return owner
        return WRONG
