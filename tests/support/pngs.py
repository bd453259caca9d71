"""Real PNG files, drawn and read with zlib and struct (no imaging library): what the fake images server
answers, the masks and input images the tests send, and a check that a result is the picture it should be.

`draw` makes a solid picture (with a square of a second colour, so an edit can be told from a generation) or
one of random noise, which does not compress: a 1 MiB noise PNG is 1 MiB on the wire, as a photograph is.
`read` decodes what `draw` writes (8-bit RGB or RGBA, every row filtered with filter 0) back into pixels.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode(width: int, height: int, rows: list[bytes], alpha: bool = False) -> bytes:
    """A PNG of these rows (each `width` pixels of 3 or 4 bytes)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    raw = b"".join(b"\x00" + row for row in rows)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def draw(width: int = 64, height: int = 64, color: tuple[int, int, int] = (200, 40, 40), *,
         square: tuple[int, int, int] | None = None, alpha: int | None = None) -> bytes:
    """A picture of one colour, with a centred square of `square` when given; RGBA when `alpha` is given."""
    pixel = bytes(color) + (bytes([alpha]) if alpha is not None else b"")
    inner = (bytes(square) + (bytes([alpha]) if alpha is not None else b"")) if square else pixel
    rows = []
    for y in range(height):
        if square and height // 4 <= y < 3 * height // 4:
            quarter = width // 4
            rows.append(pixel * quarter + inner * (width - 2 * quarter) + pixel * quarter)
        else:
            rows.append(pixel * width)
    return encode(width, height, rows, alpha is not None)


def noise(size_bytes: int, seed: bytes = b"") -> bytes:
    """A square RGB picture of random pixels whose PNG is about `size_bytes` long (it cannot be compressed)."""
    side = max(1, int((size_bytes / 3) ** 0.5))
    data = os.urandom(side * side * 3) if not seed else _stretch(seed, side * side * 3)
    rows = [data[y * side * 3:(y + 1) * side * 3] for y in range(side)]
    return encode(side, side, rows)


def _stretch(seed: bytes, length: int) -> bytes:
    import hashlib

    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1
    return bytes(out[:length])


def mask(width: int, height: int) -> bytes:
    """An inpainting mask as OpenAI's Images API takes it: RGBA, opaque, with a transparent centre square
    (alpha 0 marks where the image is to be edited)."""
    opaque, clear = b"\x00\x00\x00\xff", b"\x00\x00\x00\x00"
    rows = []
    for y in range(height):
        if height // 4 <= y < 3 * height // 4:
            q = width // 4
            rows.append(opaque * q + clear * (width - 2 * q) + opaque * q)
        else:
            rows.append(opaque * width)
    return encode(width, height, rows, alpha=True)


@dataclass(frozen=True)
class Picture:
    width: int
    height: int
    channels: int  # 3 (RGB) or 4 (RGBA)
    pixels: bytes  # rows, top to bottom, without filter bytes

    def at(self, x: int, y: int) -> tuple[int, ...]:
        start = (y * self.width + x) * self.channels
        return tuple(self.pixels[start:start + self.channels])


def size(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk."""
    if data[:8] != SIGNATURE or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def read(data: bytes) -> Picture:
    """Decode a PNG written by `encode` (8-bit RGB/RGBA, filter 0 on every row)."""
    width, height = size(data)
    color_type = data[25]
    channels = 4 if color_type == 6 else 3
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        if raw[start] != 0:
            raise ValueError("only filter 0 is read here")
        rows.append(raw[start + 1:start + 1 + stride])
    return Picture(width, height, channels, b"".join(rows))
