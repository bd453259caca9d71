"""The body of `POST /images/edits`: multipart/form-data, as the openai SDK sends it.

Text fields first, then the files: one image as `image`, several as `image[]` (the SDK's array form), the mask
as `mask`; each file with its filename and media type. Booleans are `true`/`false`, numbers their decimal text.
The body is built once in memory: the images are already there, bounded by --image-generation-max-bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...pictures import Picture


def encode(fields: Mapping[str, Any], images: Sequence[Picture], mask: Picture | None) -> tuple[bytes, str]:
    """(body, content-type header value)."""
    boundary = "----responses-gateway-" + os.urandom(12).hex()
    dash = b"--" + boundary.encode()
    parts: list[bytes] = []
    for name, value in fields.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        parts += (dash, b'\r\nContent-Disposition: form-data; name="%s"\r\n\r\n' % name.encode(),
                  text.encode(), b"\r\n")
    image_field = "image" if len(images) == 1 else "image[]"
    files = [(image_field, p, f"image_{i + 1}") for i, p in enumerate(images)]
    if mask is not None:
        files.append(("mask", mask, "mask"))
    for name, pic, stem in files:
        parts += (dash, b'\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\nContent-Type: %s\r\n\r\n'
                  % (name.encode(), pic.filename(stem).encode(), pic.media_type.encode()), pic.data, b"\r\n")
    parts += (dash, b"--\r\n")
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"
