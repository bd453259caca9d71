"""A fetched body as readable text: HTML through selectolax (the Lexbor HTML5 parser, in C), other text as is.

HTML loses what a reader does not read — scripts, styles, templates, SVG, frames, forms, navigation, headers,
footers, asides — and inline elements are unwrapped so a sentence stays on one line; the text of `<main>` (or
the one `<article>`) is taken when the page has it, else the body's. One line per block, whitespace collapsed.
The title is the page's `<title>` (or its `og:title`).

It is CPU work in C that grows with the page (about 0.1 s per MB) — but not linearly with its depth: 100,000 nested
`<div>` (1.1 MB) took the parser 25 s. So it runs in a child process (`read`, through readable.py and
isolated.py), killed at `--web-extract-timeout`, at most `CONCURRENT` at a time, on a body already cut at the
fetcher's byte limit; the text kept is cut at `MAX_CHARS`. This module is what the child imports: selectolax and
nothing of the gateway's network side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser

MAX_CHARS = 1_000_000  # text kept of one page (what find_in_page searches)
CONCURRENT = 2  # extractions at once (child processes), per process
DROP = ["script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed", "canvas", "form",
        "nav", "header", "footer", "aside", "button", "select", "head"]
INLINE = ["a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "kbd", "mark", "q", "s",
          "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "label", "del", "ins"]
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([a-zA-Z0-9_\-]{1,40})""", re.IGNORECASE)
_SPACE = re.compile(r"[ \t\r\f\v\u00a0\u200b]+")


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str


def extract(body: bytes, content_type: str, charset: str | None, url: str) -> Page:
    """The page's title and readable text."""
    html = content_type in ("text/html", "application/xhtml+xml") or (not content_type and _looks_html(body))
    text = _decode(body, charset, html)
    if not html:
        return Page(url, "", _lines(text)[:MAX_CHARS])
    tree = LexborHTMLParser(text)
    title = _title(tree)
    tree.strip_tags(DROP)
    tree.unwrap_tags(INLINE)
    tree.merge_text_nodes()
    root = tree.css_first("main")
    if root is None:
        articles = tree.css("article")
        root = articles[0] if len(articles) == 1 else tree.body
    if root is None:
        return Page(url, title, "")
    return Page(url, title, _lines(root.text(separator="\n"))[:MAX_CHARS])


def read(body: bytes, args: list[str]) -> dict[str, str]:
    """In the child process (isolated.py): `extract` of a fetched body, as JSON."""
    content_type, charset, url = args
    page = extract(body, content_type, charset or None, url)
    return {"url": page.url, "title": page.title, "text": page.text}


def _title(tree: LexborHTMLParser) -> str:
    node = tree.css_first("title")
    title = node.text(strip=True) if node is not None else ""
    if not title:
        meta = tree.css_first('meta[property="og:title"]')
        title = (meta.attributes.get("content") or "") if meta is not None else ""
    return " ".join(title.split())[:300]


def _lines(text: str) -> str:
    out = []
    for line in text.split("\n"):
        line = _SPACE.sub(" ", line).strip()
        if line:
            out.append(line)
    return "\n".join(out)


def _looks_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<meta", b"<title"))


def _decode(body: bytes, charset: str | None, html: bool) -> str:
    if charset is None and html:
        found = _META_CHARSET.search(body[:4096])
        charset = found.group(1).decode("ascii").lower() if found else None
    for name in (charset, "utf-8"):
        if not name:
            continue
        try:
            return body.decode(name, errors="replace")
        except LookupError:  # an unknown charset name
            continue
    return body.decode("utf-8", errors="replace")
