"""Base64 with pybase64 and without it: the same bytes, decoded in turns of the event loop without it."""

from __future__ import annotations

import asyncio
import base64

import pytest

from tests.support import pngs


def test_base64_is_the_same_with_pybase64_and_without(monkeypatch):
    from responses_gateway.tools.image_generation import b64

    png = pngs.noise(5000)
    fast = (b64.encode(png), b64.decode(base64.b64encode(png)))
    monkeypatch.setattr(b64, "_fast", None)
    monkeypatch.setattr(b64, "FAST", False)
    monkeypatch.setattr(b64, "SLICE", 1024)  # several slices, decoded in turns
    text = base64.b64encode(png).decode()
    assert (b64.encode(png), b64.decode(text)) == fast == (text, png)
    assert asyncio.run(b64.decode_in_turns(text, validate=True)) == png
    with pytest.raises(b64.Error):
        asyncio.run(b64.decode_in_turns("not base64!" * 200, validate=True))
