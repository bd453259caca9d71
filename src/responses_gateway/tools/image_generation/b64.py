"""Base64 for images: pybase64 (SIMD, the `image-generation` extra) when installed, else the standard library.

An image's base64 is decoded to be kept in the files store and to be edited, and encoded again when a stored
response is read back: for a 1 MiB PNG the standard library takes about 2.6 ms to decode and 0.8 ms to encode,
pybase64 about 0.07 ms and 0.06 ms (bench/image_generation.py; docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any


def _load() -> Any:
    try:
        import pybase64
    except ImportError:  # the extra is not installed: the standard library, slower, the same bytes
        return None
    return pybase64


_fast: Any = _load()

Error = (binascii.Error, ValueError)
FAST = _fast is not None
SLICE = 256 * 1024  # base64 characters decoded between two turns of the event loop, without pybase64


def decode(text: str | bytes, validate: bool = False) -> bytes:
    """Raises one of `Error` for text that is not base64 (any non-alphabet character, with `validate`)."""
    module: Any = _fast if _fast is not None else base64
    return bytes(module.b64decode(text, validate=validate))


async def decode_in_turns(text: str, validate: bool = False) -> bytes:
    """A whole image's base64 decoded on the event loop without holding it: at once with pybase64 (a tenth of a
    millisecond a megabyte), else a slice at a time with the loop's other work in between. (Not a worker thread:
    the standard library's decoder keeps the GIL, and the loop would wait for the thread's whole switch
    interval.)"""
    if FAST:
        return decode(text, validate)
    parts = []
    for start in range(0, len(text), SLICE):  # SLICE is a multiple of 4: each slice decodes on its own
        parts.append(decode(text[start:start + SLICE], validate))
        await asyncio.sleep(0)
    return b"".join(parts)


def encode(data: bytes) -> str:
    module: Any = _fast if _fast is not None else base64
    return bytes(module.b64encode(data)).decode("ascii")
