"""The console's admin session: its own key (RG_CONSOLE_KEY, never an API key), a signed session cookie, and
CSRF tokens.

Nothing is kept server-side: the session cookie is `<expiry>.<HMAC(key, "session" expiry)>`, so every worker
and replica accepts it and changing the key logs everyone out. It is HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it) and `Secure` when the console is served over https. A form's
CSRF token is the HMAC of the session it belongs to, so a token works only with its own cookie; the login
form, before any session, is tied the same way to a random pre-login cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SESSION_COOKIE = "rg_console"
LOGIN_COOKIE = "rg_console_login"
SESSION_SECONDS = 12 * 3600
LOGIN_SECONDS = 600


class Keys:
    def __init__(self, key: str):
        self.key = key.encode()

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self.key, f"{purpose}\0{value}".encode(), hashlib.sha256).hexdigest()

    def is_key(self, given: str) -> bool:
        """The admin key, compared in constant time."""
        return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), hashlib.sha256(self.key).digest())

    def session(self, now: float | None = None) -> str:
        expiry = str(int((now or time.time()) + SESSION_SECONDS))
        return f"{expiry}.{self._mac('session', expiry)}"

    def valid_session(self, cookie: str | None, now: float | None = None) -> bool:
        if not cookie or "." not in cookie:
            return False
        expiry, _, mac = cookie.partition(".")
        if not expiry.isdigit() or int(expiry) < (now or time.time()):
            return False
        return hmac.compare_digest(mac, self._mac("session", expiry))

    def csrf(self, cookie: str) -> str:
        """The CSRF token of forms shown to the holder of `cookie` (the session, or the pre-login cookie)."""
        return self._mac("csrf", cookie)

    def valid_csrf(self, cookie: str | None, token: str | None) -> bool:
        return bool(cookie) and bool(token) and hmac.compare_digest(self.csrf(cookie or ""), token or "")


def login_nonce() -> str:
    return secrets.token_urlsafe(24)
