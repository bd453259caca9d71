"""Reasoning carried through stateless clients.

Clients that keep no server state (Codex with `store: false`) send reasoning back only as the opaque
`encrypted_content` they were given. For upstreams whose reasoning is plain text, that token is the text
(and any upstream signature) in a versioned envelope; it is opaque to clients, not secret: the same text is
in the item's `content`.
"""

from __future__ import annotations

import base64

import orjson

PREFIX = "rg1."


def seal(text: str, signature: str | None = None) -> str:
    payload = {"t": text}
    if signature:
        payload["s"] = signature
    return PREFIX + base64.urlsafe_b64encode(orjson.dumps(payload)).decode()


def unseal(token: str | None) -> tuple[str, str | None] | None:
    """The (text, signature) of a token we issued, or None for anything else (e.g. OpenAI's own)."""
    if not token or not token.startswith(PREFIX):
        return None
    try:
        payload = orjson.loads(base64.urlsafe_b64decode(token[len(PREFIX):]))
        return str(payload.get("t", "")), payload.get("s")
    except (ValueError, TypeError):
        return None
