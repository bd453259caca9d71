"""Why a connection failed, in the words an operator acts on: refused, host not found, TLS, timed out.

Drivers wrap the error that says it (aiohttp's `ClientConnectorError` holds the `OSError`, asyncpg raises the
socket's own), and their messages name the exception class rather than the cause. `cause` gives the detail
for a log line or a one-line startup error; `kind` only the few words a client may see (a TLS message can
name an internal host).
"""

from __future__ import annotations

import socket
import ssl

KINDS = (
    (ssl.SSLError, "TLS failed"),  # (a certificate not accepted is one too: SSLCertVerificationError)
    (ConnectionRefusedError, "connection refused"),
    (socket.gaierror, "host name not found"),
    (TimeoutError, "timed out"),
    (ConnectionResetError, "connection reset"),
)


def root(exc: BaseException) -> BaseException:
    """The error inside the wrappers: aiohttp's `os_error` / `certificate_error`, or the explicit cause."""
    seen = 0
    while seen < 5:
        seen += 1
        inner = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None) or exc.__cause__
        if not isinstance(inner, BaseException) or inner is exc:
            break
        exc = inner
    return exc


def kind(exc: BaseException) -> str:
    """A few words for a client: "connection refused", "host name not found", "TLS failed", "timed out"..."""
    inner = root(exc)
    for types, words in KINDS:
        if isinstance(inner, types) or isinstance(exc, types):
            return words
    return "network error"


def cause(exc: BaseException) -> str:
    """The kind and its detail for an operator, e.g. "host name not found (Name or service not known)"."""
    inner = root(exc)
    words = kind(exc)
    if isinstance(inner, ssl.SSLCertVerificationError):
        detail = inner.verify_message or inner.reason or str(inner)
    elif isinstance(inner, ssl.SSLError):
        detail = inner.reason or str(inner)
    elif isinstance(inner, OSError) and inner.strerror:
        detail = inner.strerror + (f": {inner.filename}" if inner.filename else "")
    else:
        detail = str(inner)
    if words == "network error":
        return detail or type(inner).__name__
    if not detail or words == "connection refused" or detail.lower() == words:
        return words
    return f"{words} ({detail})"
