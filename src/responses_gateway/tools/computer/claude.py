"""Claude's own computer-use tool, for an Anthropic route: its version for the model, its declaration, the frame
Claude answers in, and OpenAI's actions written back as Claude's.

The tool is versioned (`computer_20251124`, `computer_20250124`, `computer_20241022`), each with its beta header
(`computer-use-2025-11-24`..., which the Anthropic adapter derives from the type). Claude answers in pixels of
the display its declaration names; Anthropic's API scales every screenshot down to its image limits (1568
pixels on the long side and about 1.15 megapixels; Opus 4.7: 2576 and 3.75) before Claude sees it, so the
gateway names the screenshot's size as scaled that way and maps Claude's points back to the display.
"""

from __future__ import annotations

import re
from typing import Any

from .actions import Frame
from .keys import to_x11
from .profiles import Fit, Profile

# (model name pattern, tool type): the first that matches; models not listed get the newest
VERSIONS = (
    (re.compile(r"claude-3-5-sonnet|claude-3\.5-sonnet"), "computer_20241022"),
    (re.compile(r"claude-3-7-sonnet|claude-sonnet-4-5|claude-haiku-4-5|claude-opus-4-1|"
                r"claude-(sonnet|opus)-4(?![-.]\d(?!\d{7}))"), "computer_20250124"),
)
NEWEST = "computer_20251124"
LARGER_IMAGES = re.compile(r"claude-opus-4-7")  # Opus 4.7 sees larger images
DEFAULT_DISPLAY = (1024, 768)  # named when nothing says the display's size yet (Anthropic's recommended XGA)


def version(model: str) -> str:
    """The computer tool type for a Claude model (Anthropic's table: which model takes which version)."""
    for pattern, kind in VERSIONS:
        if pattern.search(model):
            return kind
    return NEWEST


def profile(model: str) -> Profile:
    """Claude's frame: pixels of the screenshot as Anthropic's API scales it for this model."""
    if LARGER_IMAGES.search(model):
        return Profile("pixels", Fit(2576, 3_750_000))
    return Profile("pixels", Fit(1568, 1_150_000))


def declaration(model: str, frame: Frame) -> dict[str, Any]:
    """The tool as Anthropic takes it: its version and the display's size in Claude's frame."""
    width, height = frame.size() or DEFAULT_DISPLAY
    return {"type": version(model), "name": "computer", "display_width_px": width, "display_height_px": height}


CLICKS = {"left": "left_click", "right": "right_click", "wheel": "middle_click"}


def to_claude(action: dict[str, Any], frame: Frame) -> dict[str, Any]:
    """An action as Claude's computer tool takes it, in Claude's frame."""
    kind = action.get("type")
    point = _point(action, frame)
    held = "+".join(to_x11(k) for k in action.get("keys") or ()) if kind != "keypress" else ""
    out: dict[str, Any]
    if kind == "click":
        out = {"action": CLICKS.get(action.get("button") or "left", "left_click"), "coordinate": point}
    elif kind == "double_click":
        out = {"action": "double_click", "coordinate": point}
    elif kind == "move":
        out = {"action": "mouse_move", "coordinate": point}
    elif kind == "drag":
        path = action.get("path") or [{"x": 0, "y": 0}]
        out = {"action": "left_click_drag", "start_coordinate": _point(path[0], frame),
               "coordinate": _point(path[-1], frame)}
    elif kind == "keypress":
        out = {"action": "key", "text": "+".join(to_x11(k) for k in action.get("keys") or ())}
    elif kind == "type":
        out = {"action": "type", "text": action.get("text", "")}
    elif kind == "scroll":
        sx, sy = int(action.get("scroll_x") or 0), int(action.get("scroll_y") or 0)
        direction = ("down" if sy > 0 else "up") if abs(sy) >= abs(sx) else ("right" if sx > 0 else "left")
        amount = max(1, round(max(abs(sx), abs(sy)) / 100))
        out = {"action": "scroll", "coordinate": point, "scroll_direction": direction, "scroll_amount": amount}
    elif kind == "wait":
        out = {"action": "wait", "duration": 1}
    else:
        out = {"action": "screenshot"}
    if held and kind in ("click", "double_click", "scroll"):
        out["text"] = held
    return out


def _point(action: dict[str, Any], frame: Frame) -> list[int]:
    return list(frame.to_model(int(action.get("x") or 0), int(action.get("y") or 0)))
