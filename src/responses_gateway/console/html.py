"""HTML of the console, server-rendered: every stored text goes through `esc` (prompts and outputs are hostile:
a stored `<script>` is shown as text), no inline script or style (the CSP forbids both), and no secret — a
JSON value under a key that names one (authorization, headers, api_key, …) is shown as `[redacted]`.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlencode

import orjson

# Strict: nothing but this origin's stylesheet; no script at all; forms post only here; never framed.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
           "x-frame-options": "DENY", "cache-control": "no-store"}
SECRET_KEYS = ("authorization", "headers", "api_key", "apikey", "password", "secret", "token", "access_token",
               "client_secret", "private_key")
NAV = (("responses", "Responses"), ("live", "Live"), ("conversations", "Conversations"), ("files", "Files"),
       ("containers", "Containers"), ("usage", "Usage"))


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def href(*parts: str, **query: Any) -> str:
    """A console URL, each path part and query value escaped (ids are stored text too)."""
    path = "/console/" + "/".join(quote(str(p), safe="") for p in parts)
    wanted = {k: v for k, v in query.items() if v not in (None, "")}
    return esc(path + ("?" + urlencode(wanted) if wanted else ""))


def link(text: Any, *parts: str, **query: Any) -> str:
    return f'<a href="{href(*parts, **query)}">{esc(text)}</a>'


def when(seconds: Any) -> str:
    if seconds is None:
        return ""
    try:
        stamp = datetime.datetime.fromtimestamp(int(seconds), datetime.UTC)
    except (TypeError, ValueError, OverflowError):
        return esc(seconds)
    return esc(stamp.strftime("%Y-%m-%d %H:%M:%S"))


def redacted(value: Any) -> Any:
    """`value` with what looks like a secret replaced (a tool's declared headers, an MCP authorization)."""
    if isinstance(value, dict):
        return {k: "[redacted]" if isinstance(k, str) and _secret(k) and v else redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def _secret(key: str) -> bool:
    low = key.lower()
    return low in SECRET_KEYS or low.endswith(("_key", "_token", "_secret", "password"))


def pretty(value: Any) -> str:
    """A JSON value, indented, escaped, secrets redacted: a `<pre>`."""
    text = orjson.dumps(redacted(value), option=orjson.OPT_INDENT_2).decode()
    return f"<pre>{esc(text)}</pre>"


def table(head: Iterable[str], rows: Iterable[Iterable[str]], empty: str = "nothing here") -> str:
    """`rows`' cells are HTML already (each made with `esc` or `link`)."""
    lines = [f"<tr>{''.join(f'<td>{cell}</td>' for cell in row)}</tr>" for row in rows]
    if not lines:
        return f'<p class="empty">{esc(empty)}</p>'
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def page(title: str, body: str, csrf: str | None = None, current: str = "") -> str:
    """The whole page; with `csrf` (a session), the navigation and the logout form."""
    nav = ""
    if csrf is not None:
        items = "".join(f'<a href="{href(key)}"{" class=current" if key == current else ""}>{esc(name)}</a>'
                        for key, name in NAV)
        nav = (f'<nav>{items}<form method="post" action="{href("logout")}" class="logout">'
               f'<input type="hidden" name="csrf" value="{esc(csrf)}"><button>Log out</button></form></nav>')
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)} · responses-gateway console</title>'
            '<link rel="stylesheet" href="/console/static/console.css"></head>'
            f'<body><header><span class="brand">responses-gateway</span>{nav}</header>'
            f"<main><h1>{esc(title)}</h1>{body}</main></body></html>")


def badge(status: Any) -> str:
    return f'<span class="status s-{esc(status)}">{esc(status)}</span>'
