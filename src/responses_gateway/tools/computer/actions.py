"""Computer actions as OpenAI types them (openai-python's `ResponseComputerToolCall` actions), from the shapes
models write them in, checked; and back into those shapes for a model reading an earlier call.

A model may write: this gateway's `computer` function (`{"action": "click", "x": .., "y": ..}` or
`{"actions": [...]}`), an action object (`{"action": {"type": "click", ...}}`), Claude's computer tool
(`{"action": "left_click", "coordinate": [x, y]}`), or the aliases GUI-agent models use (`left_click`,
`mouse_move`, `hotkey`, `coordinate`). Anything else, or a point outside the screen, is a `BadAction` whose
message the model reads on its next step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .profiles import Profile

TYPES = ("click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type", "wait")
BUTTONS = ("left", "right", "wheel", "back", "forward")
POINTED = ("click", "double_click", "move", "scroll")
SCROLL_STEP = 100  # pixels per scroll "click" (Claude's scroll_amount)
MAX_ACTIONS = 16  # actions in one call
MAX_TEXT = 10_000  # characters one `type` action may type
# GUI-agent and Claude action names -> OpenAI's type (and the click's button)
ALIASES: dict[str, tuple[str, str | None]] = {
    "left_click": ("click", "left"), "right_click": ("click", "right"), "middle_click": ("click", "wheel"),
    "left_double": ("double_click", None), "left_click_drag": ("drag", None), "mouse_move": ("move", None),
    "key": ("keypress", None), "hotkey": ("keypress", None), "press": ("keypress", None),
    "type_text": ("type", None), "sleep": ("wait", None), "take_screenshot": ("screenshot", None),
}

Screen = tuple[int, int]  # the display's width and height, in pixels


class BadAction(ValueError):
    """An action the model wrote that cannot be done: the message says why, for the model to correct."""


@dataclass(frozen=True)
class Frame:
    """Where the model's coordinates live: its profile and the screen (None: not known yet)."""

    profile: Profile
    screen: Screen | None

    def display(self, x: Any, y: Any) -> tuple[int, int]:
        """A point the model wrote, in the display's pixels; BadAction when it is not a point on the screen."""
        if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) \
                or not isinstance(y, (int, float)):
            raise BadAction(f"x and y must be numbers; got {x!r}, {y!r}")
        profile, screen = self.profile, self.screen
        if screen is None:
            if profile.coordinates != "pixels" or profile.max_pixels is not None:
                raise BadAction("the screen's size is not known yet: take a screenshot first")
            if x < 0 or y < 0:
                raise BadAction(f"({x}, {y}) is outside the screen")
            return round(x), round(y)
        width, height = screen
        if not profile.inside(x, y, width, height):
            fw, fh = profile.frame(width, height)
            raise BadAction(f"({x}, {y}) is outside the screen: x and y must be within 0..{fw:g} and 0..{fh:g}")
        return profile.to_display(x, y, width, height)

    def model(self, x: int, y: int) -> tuple[int, int]:
        if self.screen is None:
            return x, y
        return self.profile.to_model(x, y, *self.screen)


def from_model(arguments: Any, frame: Frame) -> list[dict[str, Any]]:
    """The actions a call's arguments ask for, as OpenAI types them, in the display's pixels."""
    if not isinstance(arguments, dict):
        raise BadAction("the arguments must be a JSON object")
    raw = arguments.get("actions")
    if raw is None:
        action = arguments.get("action")
        raw = [action] if isinstance(action, dict) else [arguments]
    if not isinstance(raw, list) or not raw:
        raise BadAction("'actions' must be a non-empty list of actions")
    if len(raw) > MAX_ACTIONS:
        raise BadAction(f"at most {MAX_ACTIONS} actions in one call")
    return [one(action, frame) for action in raw]


def one(raw: Any, frame: Frame) -> dict[str, Any]:
    """One action the model wrote, checked and in the display's pixels."""
    if not isinstance(raw, dict):
        raise BadAction("an action must be an object")
    name = raw.get("type", raw.get("action"))
    if not isinstance(name, str):
        raise BadAction("an action needs a 'type' (or 'action'): one of " + ", ".join(TYPES))
    kind, button = ALIASES.get(name, (name, None))
    if kind not in TYPES:
        raise BadAction(f"unknown action {name!r}: use one of " + ", ".join(TYPES))
    keys = _keys(raw.get("keys", raw.get("text") if kind == "keypress" else None), kind == "keypress")
    if kind in POINTED:
        x, y = _point(raw)
        dx, dy = frame.display(x, y)
        out: dict[str, Any] = {"type": kind, "x": dx, "y": dy}
        if kind == "click":
            chosen = button or raw.get("button") or "left"
            if chosen not in BUTTONS:
                raise BadAction(f"unknown button {chosen!r}: one of " + ", ".join(BUTTONS))
            out["button"] = chosen
        if kind == "scroll":
            out["scroll_x"], out["scroll_y"] = _scroll(raw)
        if keys:
            out["keys"] = keys
        return out
    if kind == "drag":
        path = _path(raw)
        points = [frame.display(x, y) for x, y in path]
        out = {"type": "drag", "path": [{"x": x, "y": y} for x, y in points]}
        if keys:
            out["keys"] = keys
        return out
    if kind == "keypress":
        if not keys:
            raise BadAction("keypress needs 'keys', e.g. [\"ctrl\", \"s\"]")
        return {"type": "keypress", "keys": keys}
    if kind == "type":
        text = raw.get("text")
        if not isinstance(text, str) or not text:
            raise BadAction("type needs the 'text' to type")
        if len(text) > MAX_TEXT:
            raise BadAction(f"type types at most {MAX_TEXT} characters at once")
        return {"type": "type", "text": text}
    return {"type": kind}  # screenshot, wait


def _point(raw: dict[str, Any]) -> tuple[Any, Any]:
    if "x" in raw or "y" in raw:
        return raw.get("x"), raw.get("y")
    coordinate = raw.get("coordinate")
    if isinstance(coordinate, (list, tuple)) and len(coordinate) == 2:
        return coordinate[0], coordinate[1]
    raise BadAction("this action needs a point: 'x' and 'y' (or 'coordinate': [x, y])")


def _path(raw: dict[str, Any]) -> list[tuple[Any, Any]]:
    path = raw.get("path")
    if path is None and "start_coordinate" in raw:  # Claude's left_click_drag
        path = [raw["start_coordinate"], raw.get("coordinate")]
    if not isinstance(path, list) or len(path) < 2:
        raise BadAction("drag needs a 'path' of at least two points, e.g. [{\"x\": 1, \"y\": 2}, {\"x\": 3, \"y\": 4}]")
    points = []
    for point in path:
        if isinstance(point, dict):
            points.append((point.get("x"), point.get("y")))
        elif isinstance(point, (list, tuple)) and len(point) == 2:
            points.append((point[0], point[1]))
        else:
            raise BadAction("each point of a drag's path is {\"x\": .., \"y\": ..}")
    return points


def _keys(value: Any, required: bool) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [k.strip() for k in value.split("+") if k.strip()]  # "ctrl+s", as Claude and xdotool write
    if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
        raise BadAction("'keys' must be a list of key names, e.g. [\"ctrl\", \"s\"]")
    return [str(k) for k in value]


def _scroll(raw: dict[str, Any]) -> tuple[int, int]:
    if "scroll_direction" in raw:  # Claude: a direction and an amount of clicks
        amount = raw.get("scroll_amount", 3)
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise BadAction("scroll_amount must be a number of steps")
        step = round(amount * SCROLL_STEP)
        direction = raw["scroll_direction"]
        moves = {"down": (0, step), "up": (0, -step), "right": (step, 0), "left": (-step, 0)}
        if direction not in moves:
            raise BadAction("scroll_direction must be up, down, left or right")
        return moves[direction]
    sx, sy = raw.get("scroll_x", 0), raw.get("scroll_y", 0)
    if isinstance(sx, bool) or isinstance(sy, bool) or not isinstance(sx, (int, float)) \
            or not isinstance(sy, (int, float)):
        raise BadAction("scroll_x and scroll_y must be numbers of pixels")
    return round(sx), round(sy)


# -- back, for a model reading an earlier call ----------------------------------------------------------------

def to_function(action: dict[str, Any], frame: Frame) -> dict[str, Any]:
    """An action as this gateway's `computer` function takes it, in the model's frame."""
    out: dict[str, Any] = {"action": action.get("type")}
    out.update((k, v) for k, v in action.items() if k not in ("type", "x", "y", "path"))
    if "x" in action and "y" in action:
        out["x"], out["y"] = frame.model(int(action["x"]), int(action["y"]))
    if "path" in action:
        out["path"] = [dict(zip(("x", "y"), frame.model(int(p["x"]), int(p["y"])), strict=True))
                       for p in action["path"]]
    return out


CLAUDE_BUTTONS = {"left": "left_click", "right": "right_click", "wheel": "middle_click"}


def to_claude(action: dict[str, Any]) -> dict[str, Any]:
    """An action as Claude's computer tool takes it (its coordinates are the display's)."""
    kind = action.get("type")
    point = [action.get("x"), action.get("y")]
    if kind == "click":
        return {"action": CLAUDE_BUTTONS.get(action.get("button") or "left", "left_click"), "coordinate": point}
    if kind == "double_click":
        return {"action": "double_click", "coordinate": point}
    if kind == "move":
        return {"action": "mouse_move", "coordinate": point}
    if kind == "drag":
        path = action.get("path") or [{}, {}]
        return {"action": "left_click_drag", "start_coordinate": [path[0].get("x"), path[0].get("y")],
                "coordinate": [path[-1].get("x"), path[-1].get("y")]}
    if kind == "keypress":
        return {"action": "key", "text": "+".join(action.get("keys") or ())}
    if kind == "type":
        return {"action": "type", "text": action.get("text", "")}
    if kind == "scroll":
        sx, sy = int(action.get("scroll_x") or 0), int(action.get("scroll_y") or 0)
        direction = ("down" if sy > 0 else "up") if abs(sy) >= abs(sx) else ("right" if sx > 0 else "left")
        amount = max(1, round(max(abs(sx), abs(sy)) / SCROLL_STEP))
        return {"action": "scroll", "coordinate": point, "scroll_direction": direction, "scroll_amount": amount}
    if kind == "wait":
        return {"action": "wait", "duration": 1}
    return {"action": "screenshot"}


def function_parameters(several: bool) -> dict[str, Any]:
    """The `computer` function's parameters: one action, or (the `computer` tool) several in order."""
    action: dict[str, Any] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(TYPES)},
            "x": {"type": "integer"}, "y": {"type": "integer"},
            "button": {"type": "string", "enum": list(BUTTONS)},
            "keys": {"type": "array", "items": {"type": "string"}},
            "text": {"type": "string"},
            "scroll_x": {"type": "integer"}, "scroll_y": {"type": "integer"},
            "path": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "integer"}, "y": {"type": "integer"}}}},
        },
        "required": ["action"],
    }
    if not several:
        return action
    return {"type": "object", "properties": {"actions": {"type": "array", "items": action, "minItems": 1}},
            "required": ["actions"]}
