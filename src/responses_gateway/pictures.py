"""Image bytes as the image tools meet them (image_generation's results and edits, computer use's screenshots):
what format they are (from their first bytes, never from what a sender claims), how large they are in pixels,
and the data URLs and base64 they arrive in (tools/image_generation/b64.py decodes).

The item's echoed `size` and `output_format` are read from the image itself when the images server does not
say them: a PNG's IHDR, a JPEG's first start-of-frame, a WebP's VP8/VP8L/VP8X header. Nothing here decodes
pixels; each function reads a few dozen bytes (a JPEG's markers are walked, each a 4-byte step).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
EXTENSIONS = {"png": "png", "jpeg": "jpg", "webp": "webp", "gif": "gif"}


class BadImage(ValueError):
    """Bytes that are not an image the tool can send or keep; `str(exc)` says why, for the model."""


@dataclass(frozen=True)
class Picture:
    """An image to send (an edit's image or mask) or that came back."""

    data: bytes
    format: str  # png, jpeg, webp, gif

    @property
    def media_type(self) -> str:
        return FORMATS[self.format]

    def filename(self, stem: str) -> str:
        return f"{stem}.{EXTENSIONS[self.format]}"


def sniff(data: bytes) -> str | None:
    """The format of these bytes by their signature, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


def picture(data: bytes, what: str = "the image") -> Picture:
    kind = sniff(data)
    if kind is None:
        raise BadImage(f"{what} is not a PNG, JPEG, WebP or GIF image")
    return Picture(data, kind)


def dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the image's header, or None when it cannot be read."""
    kind = sniff(data)
    try:
        if kind == "png" and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if kind == "gif":
            width, height = struct.unpack("<HH", data[6:10])
            return int(width), int(height)
        if kind == "jpeg":
            return _jpeg(data)
        if kind == "webp":
            return _webp(data)
    except struct.error:
        return None
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    pos = 2
    while pos + 9 < len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            return int(width), int(height)
        pos += 2 + length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return int(width & 0x3FFF), int(height & 0x3FFF)
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def size_of(data: bytes) -> str | None:
    """The `WIDTHxHEIGHT` OpenAI's items echo."""
    found = dimensions(data)
    return f"{found[0]}x{found[1]}" if found else None


def decoded_length(text: str) -> int:
    """The bytes a base64 text decodes to, without decoding it (for limits checked before the work)."""
    padding = text.count("=", max(0, len(text) - 2))
    return len(text) * 3 // 4 - padding


def data_url_payload(url: str, what: str = "the image") -> str:
    """The base64 of a `data:image/...;base64,...` URL."""
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise BadImage(f"{what} is not a base64 data URL (data:image/png;base64,...)")
    return payload
