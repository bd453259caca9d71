"""`url_citation` annotations while the answer streams: a markdown link to a page this response found or opened.

The model cites as OpenAI's models do — an inline markdown link, usually wrapped in parentheses:
`([example.com](https://example.com/page))`. When a link completes and its URL is one this response's searches
returned or its pages opened (compared without fragment, trailing slash, case of the host or `utm_*` parameters),
the annotation goes out right after the text that completes it, spanning the link exactly — the surrounding
parentheses included when there are both, as OpenAI's span does — with the URL as written and the result's
title. Nothing is held back or changed: the deltas always add up to the final text, and an answer without links
costs one scan of each delta for `[`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MAX_LINK = 2400  # characters a link may span ([text](url)); longer is not a citation
MAX_LABEL = 300


def canonical(url: str) -> str:
    """The form two URLs of one page share: scheme and host lower case, no default port, no fragment, no
    trailing slash, no `utm_*` parameters."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:
        return url
    scheme = parts.scheme.lower()
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    query = parts.query
    if "utm_" in query:
        query = urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not k.startswith("utm_")])
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), query, ""))


class Citations:
    """The Annotator (tools/frame.py) of one response. `known` maps canonical URLs to titles; the runner adds to
    it as searches return and pages open."""

    def __init__(self, known: Mapping[str, str]):
        self.known = known
        self.buf = ""  # text of this part from `start` on, still able to hold a link
        self.start = 0  # index in the part of buf[0]
        self.before = ""  # the character before buf[0] (a "(" wrapping a link)
        self.pending: dict[str, Any] | None = None  # a link after "(": waiting to see if ")" follows

    def feed(self, text: str, at: int) -> tuple[str, list[dict[str, Any]]]:
        if at == 0:
            self.buf, self.start, self.before, self.pending = "", 0, "", None
        notes: list[dict[str, Any]] = []
        if self.pending is not None and text:
            note = self.pending
            self.pending = None
            if text[0] == ")":
                note["end_index"] += 1
                note["start_index"] -= 1
            notes.append(note)
        if not self.known or ("[" not in text and not self.buf):
            if text:
                self.before = text[-1]
            return text, notes
        if not self.buf:
            self.start = at  # the text goes out at `at`: buf[0] is there
        self.buf += text
        notes += self._scan()
        return text, notes

    def flush(self, at: int) -> tuple[str, list[dict[str, Any]]]:
        notes = [self.pending] if self.pending is not None else []
        self.buf, self.start, self.before, self.pending = "", 0, "", None
        return "", notes

    def _scan(self) -> list[dict[str, Any]]:
        notes: list[dict[str, Any]] = []
        buf = self.buf
        i = 0
        while True:
            open_at = buf.find("[", i)
            if open_at < 0:
                self._keep(len(buf))
                return notes
            close = buf.find("](", open_at + 1)
            if close < 0:
                if len(buf) - open_at > MAX_LABEL or "\n" in buf[open_at:]:
                    i = open_at + 1
                    continue
                self._keep(open_at)  # a link may still be written here
                return notes
            label = buf[open_at + 1:close]
            if "[" in label:  # a bracket inside: the link starts at the last one
                i = open_at + 1 + label.rfind("[")
                continue
            if len(label) > MAX_LABEL or "\n" in label:
                i = open_at + 1
                continue
            end = _url_end(buf, close + 2)
            if end is None:
                if len(buf) - open_at > MAX_LINK:
                    i = open_at + 1
                    continue
                self._keep(open_at)
                return notes
            if end < 0:  # not a link after all
                i = close + 1
                continue
            url = buf[close + 2:end]
            title = self.known.get(canonical(url))
            i = end + 1
            if title is None:
                continue
            note: dict[str, Any] = {"type": "url_citation", "end_index": self.start + end + 1,
                    "start_index": self.start + open_at, "title": title, "url": url}
            if (buf[open_at - 1] if open_at > 0 else self.before) == "(":
                if end + 1 < len(buf):
                    if buf[end + 1] == ")":
                        note["start_index"] -= 1
                        note["end_index"] += 1
                        i = end + 2
                    notes.append(note)
                else:
                    self.pending = note  # the next character decides the span
            else:
                notes.append(note)

    def _keep(self, index: int) -> None:
        """Forget the text before `index`."""
        if index > 0:
            self.before = self.buf[index - 1]
            self.buf = self.buf[index:]
            self.start += index


def _url_end(buf: str, start: int) -> int | None:
    """The index of the ")" closing a link's URL that starts at `start`; None: not written yet; -1: not a URL."""
    depth = 0
    for j in range(start, len(buf)):
        c = buf[j]
        if c in " \t\n<>\"":
            return -1
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return j if j > start else -1
            depth -= 1
    return None
