"""A route's coordinate profile: how the model's coordinates map to the display's pixels, and back.

GUI-agent models answer in their own frame: Qwen2.5-VL and the models built on it (UI-TARS-1.5, OpenCUA, Holo)
in pixels of the screenshot as their processor resized it (`smart_resize`: both sides multiples of 28, the
area within [min, max] pixels), Qwen3-VL in 0..1000 of the width and height, GLM-4.5V in 0..999; others in
the screenshot's own pixels. The display is what the client acts on: the declaration's size for
`computer_use_preview`, the screenshot's for `computer` (screens.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...route import COMPUTER_PROFILES, ComputerCoordinates

FACTOR = 28  # Qwen2-VL's patch merge: both sides a multiple of 28
MIN_PIXELS = 56 * 56


@dataclass(frozen=True)
class Profile:
    coordinates: ComputerCoordinates = "pixels"
    max_pixels: int | None = None  # the model's own resize (smart_resize), for pixel coordinates

    @classmethod
    def named(cls, name: str) -> Profile:
        coordinates, max_pixels = COMPUTER_PROFILES[name]
        return cls(coordinates, max_pixels)

    def frame(self, width: int, height: int) -> tuple[float, float]:
        """The model's frame for a screen of this size: the largest x and y it may answer (exclusive for
        pixels, inclusive for the normalized ranges)."""
        if self.coordinates == "normalized_1000":
            return 1000.0, 1000.0
        if self.coordinates == "normalized_999":
            return 999.0, 999.0
        if self.max_pixels is None:
            return float(width), float(height)
        resized_h, resized_w = smart_resize(height, width, max_pixels=self.max_pixels)
        return float(resized_w), float(resized_h)

    def to_display(self, x: float, y: float, width: int, height: int) -> tuple[int, int]:
        """The model's point on a `width` x `height` display, in the display's pixels."""
        fw, fh = self.frame(width, height)
        if self.coordinates == "pixels" and self.max_pixels is None:
            return round(x), round(y)
        return min(width - 1, round(x * width / fw)), min(height - 1, round(y * height / fh))

    def to_model(self, x: int, y: int, width: int, height: int) -> tuple[int, int]:
        """A display point in the model's frame (an earlier call, shown to the model on a later turn)."""
        fw, fh = self.frame(width, height)
        if self.coordinates == "pixels" and self.max_pixels is None:
            return x, y
        return round(x * fw / width), round(y * fh / height)

    def inside(self, x: float, y: float, width: int, height: int) -> bool:
        fw, fh = self.frame(width, height)
        if self.coordinates == "pixels":
            return 0 <= x < fw and 0 <= y < fh
        return 0 <= x <= fw and 0 <= y <= fh

    def describe(self, width: int | None, height: int | None) -> str:
        """The coordinates the model is asked for, in words (the function's description)."""
        if self.coordinates == "normalized_1000":
            return "x and y from 0 to 1000, relative to the screenshot's width and height"
        if self.coordinates == "normalized_999":
            return "x and y from 0 to 999, relative to the screenshot's width and height"
        if width and height and self.max_pixels is None:
            return f"x and y in pixels of the screenshot ({width}x{height}), from its top left corner"
        return "x and y in pixels of the screenshot as you see it, from its top left corner"


def smart_resize(height: int, width: int, factor: int = FACTOR, min_pixels: int = MIN_PIXELS,
                 max_pixels: int = 14 * 14 * 4 * 1280) -> tuple[int, int]:
    """Qwen2-VL's image resize, as its processor does it: (height, width), both multiples of `factor`, the
    area within [min_pixels, max_pixels], the aspect ratio kept as closely as that allows."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
