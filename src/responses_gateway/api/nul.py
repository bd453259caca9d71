"""NUL characters are refused at the door of every route: a 400 naming the parameter that holds one.

PostgreSQL's text cannot hold U+0000 ("invalid byte sequence for encoding UTF8: 0x00"), so an id, a cursor,
a name or a filter with one in it failed deep in a query — a 500 with a traceback on PostgreSQL, while
SQLite stored or compared it quietly. No parameter of the API has a use for NUL, so it is refused before
any handler runs, the same on both databases: in the path (`%00`: the route's parameter is named), in the
query string (the parameter's name), and in a JSON body (`\\u0000` in a key or a string: its path, as
`input[0].content`). `NulGuard` runs for every HTTP route, inside `Admission` (which has read the body);
WebSocket messages are checked by `check_json` where they are parsed (api/websocket.py). A multipart upload
is its endpoint's business (a file's bytes may hold NUL; its filename is cleaned of control characters).

The body is only searched for the escape (a memchr-speed `find`, in a worker thread for a large body); it
is parsed again only when the escape is there, to name where.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qsl, unquote

import orjson
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import offload
from ..errors import APIError, invalid
from .admission import body_of
from .errors import render

ESCAPE = b"u0000"  # after an odd number of backslashes, the JSON escape of NUL


def refused(param: str) -> APIError:
    return invalid(f"Invalid '{param}': the value contains a NUL character (U+0000), which is not accepted.", param)


def in_path(scope: Scope) -> APIError | None:
    """A NUL in the path: named after the route's parameter that holds it (else `path`)."""
    path: str = scope.get("path", "")
    if "\x00" not in path:
        return None
    router = getattr(scope.get("app"), "router", None)
    for route in getattr(router, "routes", ()):
        match, child = route.matches(scope)
        if match != Match.NONE:
            for name, value in child.get("path_params", {}).items():
                if isinstance(value, str) and "\x00" in value:
                    return refused(name)
    return refused("path")


def in_query(scope: Scope) -> APIError | None:
    raw: bytes = scope.get("query_string", b"")
    if b"%00" not in raw and b"\x00" not in raw:
        return None
    for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return refused(unquote(name).replace("\x00", "") or "query")
    return refused("query")


def escaped(raw: bytes | bytearray) -> bool:
    """Whether a JSON text holds the escape `\\u0000` (a NUL in a key or a string)."""
    at = raw.find(ESCAPE)
    while at != -1:
        slashes = 0
        while at - slashes - 1 >= 0 and raw[at - slashes - 1] == 0x5C:  # backslash
            slashes += 1
        if slashes % 2 == 1:
            return True
        at = raw.find(ESCAPE, at + 1)
    return False


def where(value: Any, path: str) -> str | None:
    """The path of the first key or string holding NUL."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                return inner.replace("\x00", "") or "body"
            found = where(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = where(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def check_json(raw: bytes | bytearray) -> None:
    """A JSON body (or WebSocket message): `APIError` 400 naming the first parameter that holds NUL. A body
    that is not JSON is left to its endpoint."""
    if not escaped(raw):
        return
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    found = where(body, "")
    if found is not None:
        raise refused(found or "body")


class NulGuard:
    """ASGI middleware: a request with NUL in its path, its query or its JSON body is a 400."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            error = in_path(scope) or in_query(scope)
            raw = body_of(scope)
            if error is None and raw:
                try:
                    if len(raw) > offload.LARGE_BYTES:
                        await asyncio.to_thread(check_json, raw)
                    else:
                        check_json(raw)
                except APIError as exc:
                    error = exc
            if error is not None:
                await render(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)
