"""Image bytes: formats and sizes read from their first bytes, data URLs, base64 lengths."""

from __future__ import annotations

import base64

import pytest

from responses_gateway import pictures
from tests.support import pngs


def test_formats_and_sizes_are_read_from_the_bytes():
    png = pngs.draw(33, 17)
    assert pictures.sniff(png) == "png" and pictures.size_of(png) == "33x17"
    jpeg = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffc0001108002a003003012200021101031101")
    assert pictures.sniff(jpeg) == "jpeg" and pictures.size_of(jpeg) == "48x42"
    webp = b"RIFF\x00\x00\x00\x00WEBPVP8X" + bytes(8) + (99).to_bytes(3, "little") + (49).to_bytes(3, "little")
    assert pictures.sniff(webp) == "webp" and pictures.size_of(webp) == "100x50"
    assert pictures.sniff(b"<svg") is None and pictures.size_of(b"nothing") is None
    with pytest.raises(pictures.BadImage):
        pictures.picture(b"%PDF-1.7")


def test_data_urls_and_base64():
    png = pngs.draw(4, 4)
    encoded = base64.b64encode(png).decode()
    assert pictures.data_url_payload(f"data:image/png;base64,{encoded}") == encoded
    assert pictures.decoded_length(encoded) == len(png)
    with pytest.raises(pictures.BadImage):
        pictures.data_url_payload("https://example.com/a.png")
