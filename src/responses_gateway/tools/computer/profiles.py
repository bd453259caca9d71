"""A route's coordinate profile: the frame a model's points are in, mapped to the display's pixels and back.

A vision model sees the screenshot after its own processor resized it, and answers in its own frame:
Qwen2.5-VL and the models built on it (UI-TARS-1.5, OpenCUA, Holo) in pixels of the resized image
(`smart_resize`: both sides multiples of 28, the area within [min, max] pixels), Qwen3-VL in 0..1000 of the
width and height, GLM-4.5V in 0..999, Claude in pixels of the screenshot as Anthropic's API scaled it down to
its image limits; others in the screenshot's own pixels. The client acts on its display: the declaration's
size for `computer_use_preview` (a HiDPI screenshot may be larger), the screenshot's for `computer` (which
declares none). A profile also names the function the model is offered (functions.py): the gateway's
`computer`, the `computer_use` function Qwen's models were trained with, or `ui-tars`: UI-TARS's own action
language, in text (uitars.py).

Named profiles preset all of it for a model family (`--computer-profile`, `computer_profile` of a route); a
route may change each part (`computer_coordinates`, `computer_max_pixels`, `computer_min_pixels`,
`computer_function`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...route import ComputerCoordinates, ComputerFunction, Route

Size = tuple[int, int]  # width, height in pixels

FACTOR = 28  # Qwen2-VL's patch merge: both sides a multiple of 28
MIN_PIXELS = 56 * 56  # Qwen2.5-VL's processor default
MAX_PIXELS = 12_845_056  # Qwen2.5-VL's processor default (16384 * 28 * 28)


@dataclass(frozen=True)
class SmartResize:
    """Qwen2-VL's image processor: both sides multiples of `factor`, the area within [min, max] pixels."""

    min_pixels: int = MIN_PIXELS
    max_pixels: int = MAX_PIXELS
    factor: int = FACTOR

    def apply(self, width: int, height: int) -> Size:
        h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
        return w, h


@dataclass(frozen=True)
class Fit:
    """Scaled down (never up), keeping the aspect ratio, to at most `max_side` on the long side and
    `max_pixels` in all: Anthropic's API does this to every image before Claude sees it."""

    max_side: int
    max_pixels: int

    def apply(self, width: int, height: int) -> Size:
        scale = min(1.0, self.max_side / max(width, height), math.sqrt(self.max_pixels / (width * height)))
        return max(1, round(width * scale)), max(1, round(height * scale))


@dataclass(frozen=True)
class Profile:
    coordinates: ComputerCoordinates = "pixels"
    resize: SmartResize | Fit | None = None  # the model's own resize, for pixel coordinates (None: none)
    function: ComputerFunction = "computer"

    @property
    def identity(self) -> bool:
        """The model answers in the screenshot's own pixels: no screen size is needed to map its points."""
        return self.coordinates == "pixels" and self.resize is None

    def frame(self, image: Size) -> Size:
        """The model's frame for a screenshot of this size: its width and height (the largest x and y it may
        answer: exclusive for pixels, inclusive for the normalized ranges)."""
        if self.coordinates == "normalized_1000":
            return 1000, 1000
        if self.coordinates == "normalized_999":
            return 999, 999
        if self.resize is None:
            return image
        return self.resize.apply(*image)

    def inside(self, x: float, y: float, image: Size) -> bool:
        fw, fh = self.frame(image)
        if self.coordinates == "pixels":
            return 0 <= x < fw and 0 <= y < fh
        return 0 <= x <= fw and 0 <= y <= fh

    def to_display(self, x: float, y: float, image: Size, display: Size) -> tuple[int, int]:
        """The model's point (on a screenshot of size `image`) on the display, in the display's pixels."""
        fw, fh = self.frame(image)
        dw, dh = display
        if (fw, fh) == (dw, dh) and self.coordinates == "pixels":
            return round(x), round(y)
        return min(dw - 1, max(0, round(x * dw / fw))), min(dh - 1, max(0, round(y * dh / fh)))

    def to_model(self, x: int, y: int, image: Size, display: Size) -> tuple[int, int]:
        """A display point in the model's frame (an earlier call, shown to the model on a later turn)."""
        fw, fh = self.frame(image)
        dw, dh = display
        if (fw, fh) == (dw, dh) and self.coordinates == "pixels":
            return x, y
        mx, my = round(x * fw / dw), round(y * fh / dh)
        if self.coordinates == "pixels":
            return min(fw - 1, mx), min(fh - 1, my)
        return mx, my

    def describe(self, image: Size | None) -> str:
        """The coordinates the model is asked for, in words (the function's description)."""
        if self.coordinates == "normalized_1000":
            return "x and y from 0 to 1000, relative to the screenshot's width and height (500, 500 is its centre)"
        if self.coordinates == "normalized_999":
            return "x and y from 0 to 999, relative to the screenshot's width and height"
        if image is not None:
            w, h = self.frame(image)
            return f"x and y in pixels of the screenshot ({w}x{h}), from its top left corner"
        return "x and y in pixels of the screenshot as you see it, from its top left corner"


PROFILES: dict[str, Profile] = {
    "pixels": Profile(),  # a model that answers in the screenshot's own pixels
    # UI-TARS-1.5: absolute, on the smart-resized image (its README: min 100*28*28, max 16384*28*28 pixels),
    # written in its own action language (uitars.py)
    "ui-tars-1.5": Profile("pixels", SmartResize(100 * 28 * 28, 16384 * 28 * 28), "ui-tars"),
    # Qwen2.5-VL: absolute, on the smart-resized image; trained with the `computer_use` function
    "qwen2.5-vl": Profile("pixels", SmartResize(), "computer_use"),
    "opencua": Profile("pixels", SmartResize()),  # OpenCUA-7B/32B (Qwen2.5-VL based)
    "holo": Profile("pixels", SmartResize()),  # Holo1 / Holo1.5 (Qwen2.5-VL based)
    "qwen3-vl": Profile("normalized_1000", None, "computer_use"),  # Qwen3-VL: relative, 0..1000
    "glm-4.5v": Profile("normalized_999"),  # GLM-4.5V / GLM-4.1V: relative, 0..999
}


def for_route(route: Route | None, default: str) -> Profile:
    """A route's profile: its named one (else the deployment's default), with what the route changes of it."""
    name = route.computer_profile if route is not None and route.computer_profile else default
    profile = PROFILES[name]
    if route is None:
        return profile
    if route.computer_coordinates is not None:
        profile = replace(profile, coordinates=route.computer_coordinates)
    if route.computer_max_pixels is not None or route.computer_min_pixels is not None:
        base = profile.resize if isinstance(profile.resize, SmartResize) else SmartResize()
        profile = replace(profile, resize=SmartResize(route.computer_min_pixels or base.min_pixels,
                                                      route.computer_max_pixels or base.max_pixels, base.factor))
    if route.computer_function is not None:
        profile = replace(profile, function=route.computer_function)
    return profile


def smart_resize(height: int, width: int, factor: int = FACTOR, min_pixels: int = MIN_PIXELS,
                 max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
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
