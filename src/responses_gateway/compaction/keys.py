"""Sealing compaction items: only this gateway can read what it summarised, and nobody can forge one.

The summary travels inside `encrypted_content` as AES-256-GCM ciphertext under a key id, so keys can rotate:
the first configured key seals, every configured key opens. The caller's owner (API-key tenant) is bound as
associated data, so one tenant's item does not open for another. Without configured keys, a key is generated
once and kept in the store, so every replica and worker sharing the store shares it; with no store either,
the key lives as long as the process (logged).

Token: `rgc1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`; the plaintext is JSON `{"s": summary}`.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import APIError

log = logging.getLogger("responses_gateway.compaction")

PREFIX = "rgc1"
STORE_NAME = "compaction_key"


class Keyring:
    def __init__(self, secrets_: list[str]):
        self.keys: dict[str, AESGCM] = {}
        self.current = ""
        for secret in secrets_:
            raw = HKDF(hashes.SHA256(), 32, salt=None, info=b"responses-gateway compaction v1").derive(secret.encode())
            kid = hashlib.sha256(b"rgc key id " + raw).hexdigest()[:8]
            self.keys.setdefault(kid, AESGCM(raw))
            self.current = self.current or kid

    def seal(self, summary: str, owner: str) -> str:
        nonce = os.urandom(12)
        box = self.keys[self.current].encrypt(nonce, orjson.dumps({"s": summary}), self._aad(self.current, owner))
        return f"{PREFIX}.{self.current}.{base64.urlsafe_b64encode(nonce + box).decode()}"

    def open(self, token: Any, owner: str, where: str) -> str:
        """The summary inside a token this gateway sealed; a 400 naming `where` for anything else."""
        parts = token.split(".") if isinstance(token, str) else ()
        if len(parts) != 3 or parts[0] != PREFIX:
            raise unopenable(where, "it was not produced by this gateway")
        key = self.keys.get(parts[1])
        if key is None:
            raise unopenable(where, "its key is not configured here (rotated out, or another gateway's)")
        try:
            blob = base64.urlsafe_b64decode(parts[2])
            plain = key.decrypt(blob[:12], blob[12:], self._aad(parts[1], owner))
            return str(orjson.loads(plain)["s"])
        except (ValueError, InvalidTag, KeyError, TypeError, orjson.JSONDecodeError):
            raise unopenable(where, "it was altered or belongs to another API key") from None

    @staticmethod
    def _aad(kid: str, owner: str) -> bytes:
        return f"{PREFIX}.{kid}|{owner}".encode()


def unopenable(where: str, why: str) -> APIError:
    return APIError(400, f"The compaction item at '{where}' cannot be opened: {why}.",
                    param=f"{where}.encrypted_content", code="invalid_encrypted_content")
