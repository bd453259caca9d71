"""Screenshots as the tool meets them: checked (an image, within the size limit), measured (the display's size
for the `computer` tool, which declares none), and found in a history (the latest one, the page it shows); and
where a history left the pointer.

Only a screenshot's header is decoded (a few dozen bytes of the base64): the rest stays as the client sent it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ...pictures import BadImage, data_url_payload, decoded_length, dimensions, sniff
from .actions import pointer_after

HEAD = 64 * 1024  # base64 characters decoded to read an image's size (a JPEG's start-of-frame may come late)

Item = dict[str, Any]


@dataclass(frozen=True)
class Shot:
    """What a screenshot says of the screen: its size (None: a URL the gateway does not fetch) and the page's
    address when the client sent it (`current_url`, a browser environment)."""

    size: tuple[int, int] | None
    current_url: str | None


def check(url: Any, limit: int, where: str) -> tuple[int, int] | None:
    """A screenshot's `image_url`: a base64 data URL of an image within `limit` bytes (its size in pixels), or
    an http(s) URL (None). ValueError naming `where` otherwise."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"'{where}' must be an image URL (data:image/png;base64,... or https://...)")
    if url.startswith(("http://", "https://")):
        return None
    try:
        payload = data_url_payload(url, f"'{where}'")
    except BadImage as exc:
        raise ValueError(str(exc)) from None
    if decoded_length(payload) > limit:
        raise ValueError(f"'{where}' is larger than the {limit:,} bytes a screenshot may have")
    head = _head(payload)
    if head is None or sniff(head) is None:
        raise ValueError(f"'{where}' is not a PNG, JPEG, WebP or GIF image")
    return dimensions(head)


def size(url: Any) -> tuple[int, int] | None:
    """A screenshot's width and height, when its data URL says them."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    try:
        head = _head(data_url_payload(url))
    except BadImage:
        return None
    return dimensions(head) if head is not None else None


def _head(payload: str) -> bytes | None:
    piece = payload[:HEAD]
    piece = piece[:len(piece) - len(piece) % 4]
    try:
        return base64.b64decode(piece, validate=False)
    except (binascii.Error, ValueError):
        return None


def latest(items: Sequence[Item]) -> Shot | None:
    """The last screenshot of a history (a `computer_call_output`), if any."""
    for item in reversed(items):
        if item.get("type") == "computer_call_output":
            output = item.get("output") or {}
            current = output.get("current_url") if isinstance(output, dict) else None
            return Shot(size(output.get("image_url")) if isinstance(output, dict) else None,
                        current if isinstance(current, str) else None)
    return None


def pointer(items: Sequence[Item]) -> tuple[int, int] | None:
    """Where the last computer call of a history left the pointer (display pixels), if it said."""
    for item in reversed(items):
        if item.get("type") == "computer_call":
            done = item.get("actions") or ([item["action"]] if isinstance(item.get("action"), dict) else [])
            cursor = None
            for action in done:
                cursor = pointer_after(action, cursor)
            return cursor
    return None


def host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""


def denied(url: str | None, domains: Sequence[str]) -> str | None:
    """The denied domain a page is on (a subdomain counts), or None."""
    if not url or not domains:
        return None
    name = host(url)
    return next((d for d in domains if name == d or name.endswith("." + d)), None)
