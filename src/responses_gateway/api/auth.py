"""Inbound API keys and tenancy.

With keys configured, every /v1 request must carry `Authorization: Bearer <key>`. A request's owner is a
keyed hash of its key, HMAC-SHA256 with the server's owner secret (the key itself is never stored or
logged, and a leaked database does not let anyone test guessed keys against the owner column without the
secret); stored responses belong to their owner, and any other key sees them as not found. Without keys,
everyone shares one owner.

The secret is --owner-secret, or else one generated at first start and kept in the store (`rg_secrets`), so
every replica sharing the database derives the same owners. Rows written before owners were keyed carry
the unsalted SHA-256 prefix (`legacy_owner_of`); `reown` moves them to the keyed owner at startup.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import APIError
from ..services import of
from ..store.secrets import Secrets
from .errors import render

MISSING = APIError(
    401,
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
    "auth (i.e. Authorization: Bearer YOUR_KEY).",
    code=None,
)
WRONG = APIError(401, "Incorrect API key provided.", code="invalid_api_key")


log = logging.getLogger("responses_gateway")
SECRET_NAME = "owner_hmac"


def owner_of(key: str, secret: str) -> str:
    return hmac.new(secret.encode(), key.encode(), hashlib.sha256).hexdigest()[:32]


def legacy_owner_of(key: str) -> str:
    """The owner id before owners were keyed: an unsalted SHA-256 prefix."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


async def owner_secret(configured: str | None, store: Secrets | None) -> str:
    """--owner-secret, else the store's (made by the first replica to start), else one for this process."""
    if configured:
        return configured
    fresh = secrets.token_urlsafe(32)
    if store is None:
        return fresh  # nothing is stored, so nothing needs the same owner tomorrow
    kept: str = await store.secret(SECRET_NAME, fresh)
    return kept


async def start_owners(keys: list[str], configured_secret: str | None, store: Secrets | None) -> dict[bytes, str]:
    """Each key's owner id; rows still under a key's legacy owner id are moved to the keyed one."""
    if not keys:
        return {}  # everyone shares the owner "": no secret needed
    secret = await owner_secret(configured_secret, store)
    owners = {key: owner_of(key, secret) for key in keys}
    if store is not None:
        await store.reown({legacy_owner_of(key): owner for key, owner in owners.items()})
    return {key.encode(): owner for key, owner in owners.items()}


class KeyAuth:
    """ASGI middleware: puts the caller's owner id in `scope["state"]["owner"]`.

    `keys` turns authentication on; the owner ids need the store's secret, so the app's startup computes
    them into the app's services (`start_owners`)."""

    def __init__(self, app: ASGIApp, keys: list[str]):
        self.app = app
        self.keys = bool(keys)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        owner = ""
        if self.keys:
            checked = self._check(of(scope["app"]).owners, scope)
            if isinstance(checked, APIError):
                if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
                    return await send({"type": "websocket.close", "code": 1008})
                # a refused WebSocket upgrade gets the same 401 and body as HTTP (the server's denial response)
                return await render(checked)(scope, receive, send)
            owner = checked
        scope.setdefault("state", {})["owner"] = owner
        await self.app(scope, receive, send)

    @staticmethod
    def _check(owners: dict[bytes, str], scope: Scope) -> str | APIError:
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if not header or header[:7].lower() != b"bearer ":
            return MISSING
        given = header[7:].strip()
        for key, owner in owners.items():
            if hmac.compare_digest(given, key):
                return owner
        return WRONG
