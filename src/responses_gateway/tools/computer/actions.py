"""Computer actions as OpenAI types them (openai-python's `ResponseComputerToolCall` actions), read from the
shapes models write them in, checked, in the display's pixels.

A model may write: the gateway's `computer` function (`{"action": "click", "x": .., "y": ..}` or
`{"actions": [...]}`), an action object (`{"action": {"type": "click", ...}}`), Qwen's `computer_use` function
(`{"action": "left_click", "coordinate": [x, y]}`, `scroll` by `pixels`, `left_click_drag` from the pointer),
Claude's computer tool (`left_click` with modifier keys in `text`, `key` with "ctrl+s", `scroll` with a
direction and an amount), or the aliases GUI agents use (`mouse_move`, `hotkey`). An action without a point
where one is allowed acts where the pointer is (the last point acted on). Anything else, or a point outside
the screen, is a `BadAction` whose message the model reads on its next step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import keys as keynames
from .profiles import Profile, Size

TYPES = ("click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type", "wait")
BUTTONS = ("left", "right", "wheel", "back", "forward")
POINTED = ("click", "double_click", "move", "scroll")
SCROLL_STEP = 100  # pixels per scroll "click" (Claude's scroll_amount)
MAX_ACTIONS = 16  # actions in one call
MAX_TEXT = 10_000  # characters one `type` action may type
# GUI-agent, Qwen and Claude action names -> OpenAI's type (and the click's button)
ALIASES: dict[str, tuple[str, str | None]] = {
    "left_click": ("click", "left"), "right_click": ("click", "right"), "middle_click": ("click", "wheel"),
    "left_double": ("double_click", None), "left_click_drag": ("drag", None), "mouse_move": ("move", None),
    "key": ("keypress", None), "hotkey": ("keypress", None), "press": ("keypress", None),
    "type_text": ("type", None), "sleep": ("wait", None), "take_screenshot": ("screenshot", None),
    "hscroll": ("scroll", None),
}
# actions models know that this computer does not have, and what to do instead
REFUSED = {
    "triple_click": "triple_click is not available: use double_click (a word), or click and then keypress "
                    "ctrl+a (everything)",
    "left_mouse_down": "pressing and releasing the mouse apart is not available: drag along a path instead",
    "left_mouse_up": "pressing and releasing the mouse apart is not available: drag along a path instead",
    "hold_key": "holding a key is not available: use keypress, or give the keys held with a click",
    "cursor_position": "the pointer's position is not reported: take a screenshot",
    "zoom": "zoom is not available: take a screenshot",
    "terminate": "there is no action that ends the task: reply in text (your answer, or what you did) instead "
                 "of calling the tool",
    "answer": "there is no answer action: reply in text with your answer instead of calling the tool",
}

Point = tuple[int, int]


class BadAction(ValueError):
    """An action the model wrote that cannot be done: the message says why, for the model to correct."""


@dataclass(frozen=True)
class Frame:
    """Where the model's points live: its profile, the size of the screenshot it is looking at (None: none
    yet, or an image URL the gateway does not read), and the display the declaration names (None: the
    `computer` tool, whose display is the screenshot)."""

    profile: Profile
    image: Size | None = None
    declared: Size | None = None

    @property
    def display(self) -> Size | None:
        """What the client acts on, in pixels."""
        return self.declared or self.image

    @property
    def seen(self) -> Size | None:
        """The screenshot the model's frame is measured on (the display's size until one is known)."""
        return self.image or self.declared

    def size(self) -> Size | None:
        """The model's frame, for its instructions: the width and height its points range over."""
        seen = self.seen
        return self.profile.frame(seen) if seen is not None else None

    def to_display(self, x: Any, y: Any) -> Point:
        """A point the model wrote, in the display's pixels; BadAction when it is not a point on the screen."""
        if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, (int, float)) \
                or not isinstance(y, (int, float)):
            raise BadAction(f"x and y must be numbers; got {x!r}, {y!r}")
        seen, display = self.seen, self.display
        if seen is None or display is None:
            if not self.profile.identity:
                raise BadAction("the screen's size is not known yet: take a screenshot first")
            if x < 0 or y < 0:
                raise BadAction(f"({x}, {y}) is outside the screen")
            return round(x), round(y)
        if not self.profile.inside(x, y, seen):
            fw, fh = self.profile.frame(seen)
            last = "" if self.profile.coordinates != "pixels" else " (exclusive)"
            raise BadAction(f"({x}, {y}) is outside the screen: x must be within 0..{fw}, y within 0..{fh}{last}")
        return self.profile.to_display(x, y, seen, display)

    def to_model(self, x: int, y: int) -> Point:
        """A display point in the model's frame."""
        seen, display = self.seen, self.display
        if seen is None or display is None:
            return x, y
        return self.profile.to_model(x, y, seen, display)


def from_model(arguments: Any, frame: Frame, cursor: Point | None = None) -> list[dict[str, Any]]:
    """The actions a call's arguments ask for, as OpenAI types them, in the display's pixels. `cursor`: where
    the pointer is before them (display pixels), for actions written without a point."""
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
    out = []
    for action in raw:
        made = one(action, frame, cursor)
        cursor = pointer_after(made, cursor)
        out.append(made)
    return out


def pointer_after(action: dict[str, Any], cursor: Point | None) -> Point | None:
    """Where an action leaves the pointer (display pixels)."""
    path = action.get("path")
    end = path[-1] if isinstance(path, list) and path and isinstance(path[-1], dict) else action
    x, y = end.get("x"), end.get("y")
    return (x, y) if isinstance(x, int) and isinstance(y, int) else cursor


# -- an action a client sends back (a computer_call of its input), as openai-python types it -----------------

INTEGER, STRING, KEYS, PATH = "an integer", "a string", "an array of strings", "an array of {x, y} points"
FIELDS: dict[str, dict[str, str]] = {  # each type's fields: required ones, and `keys` where it is optional
    "click": {"x": INTEGER, "y": INTEGER, "button": STRING}, "double_click": {"x": INTEGER, "y": INTEGER},
    "drag": {"path": PATH}, "keypress": {"keys": KEYS}, "move": {"x": INTEGER, "y": INTEGER}, "screenshot": {},
    "scroll": {"x": INTEGER, "y": INTEGER, "scroll_x": INTEGER, "scroll_y": INTEGER}, "type": {"text": STRING},
    "wait": {},
}
HOLDS_KEYS = ("click", "double_click", "drag", "move", "scroll")


def problem(action: dict[str, Any]) -> str | None:
    """What is wrong with an action as OpenAI types it ("'x' must be an integer"), or None."""
    kind = action.get("type")
    fields = FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return f"'type' must be one of {', '.join(TYPES)}"
    for name, what in fields.items():
        if not _is(action.get(name), what):
            return f"'{name}' must be {what}"
    if kind == "click" and action["button"] not in BUTTONS:
        return f"'button' must be one of {', '.join(BUTTONS)}"
    if "keys" in action and kind in HOLDS_KEYS and action["keys"] is not None and not _is(action["keys"], KEYS):
        return f"'keys' must be {KEYS}"
    return None


def _is(value: Any, what: str) -> bool:
    if what == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if what == STRING:
        return isinstance(value, str)
    if what == KEYS:
        return isinstance(value, list) and all(isinstance(k, str) for k in value)
    return isinstance(value, list) and all(isinstance(p, dict) and _is(p.get("x"), INTEGER)
                                           and _is(p.get("y"), INTEGER) for p in value)


def one(raw: Any, frame: Frame, cursor: Point | None = None) -> dict[str, Any]:
    """One action the model wrote, checked and in the display's pixels."""
    if not isinstance(raw, dict):
        raise BadAction("an action must be an object")
    name = raw.get("type", raw.get("action"))
    if not isinstance(name, str):
        raise BadAction("an action needs a 'type' (or 'action'): one of " + ", ".join(TYPES))
    if name in REFUSED:
        raise BadAction(REFUSED[name])
    kind, button = ALIASES.get(name, (name, None))
    if kind not in TYPES:
        raise BadAction(f"unknown action {name!r}: use one of " + ", ".join(TYPES))
    if kind in POINTED:
        dx, dy = _point(raw, frame, cursor, kind)
        out: dict[str, Any] = {"type": kind, "x": dx, "y": dy}
        if kind == "click":
            chosen = button or raw.get("button") or "left"
            if chosen not in BUTTONS:
                raise BadAction(f"unknown button {chosen!r}: one of " + ", ".join(BUTTONS))
            out["button"] = chosen
        if kind == "scroll":
            out["scroll_x"], out["scroll_y"] = _scroll(raw, horizontal=name == "hscroll")
        held = _held(raw)
        if held:
            out["keys"] = held
        return out
    if kind == "drag":
        points = _path(raw, frame, cursor)
        out = {"type": "drag", "path": [{"x": x, "y": y} for x, y in points]}
        held = _held(raw)
        if held:
            out["keys"] = held
        return out
    if kind == "keypress":
        pressed = _keys(raw.get("keys", raw.get("text", raw.get("key"))))
        if not pressed:
            raise BadAction("keypress needs 'keys', e.g. [\"ctrl\", \"s\"]")
        return {"type": "keypress", "keys": pressed}
    if kind == "type":
        text = raw.get("text", raw.get("content"))
        if not isinstance(text, str) or not text:
            raise BadAction("type needs the 'text' to type")
        if len(text) > MAX_TEXT:
            raise BadAction(f"type types at most {MAX_TEXT} characters at once")
        return {"type": "type", "text": text}
    return {"type": kind}  # screenshot, wait


def _point(raw: dict[str, Any], frame: Frame, cursor: Point | None, kind: str) -> Point:
    """The action's point: the one written, else where the pointer is (a scroll with no pointer yet: the
    middle of the screen)."""
    if "x" in raw or "y" in raw:
        return frame.to_display(raw.get("x"), raw.get("y"))
    coordinate = raw.get("coordinate")
    if coordinate is not None:
        if isinstance(coordinate, (list, tuple)) and len(coordinate) == 2:
            return frame.to_display(coordinate[0], coordinate[1])
        raise BadAction("'coordinate' must be [x, y]")
    if cursor is not None:
        return cursor
    display = frame.display
    if kind == "scroll" and display is not None:
        return display[0] // 2, display[1] // 2
    raise BadAction("this action needs a point: 'x' and 'y' (or 'coordinate': [x, y])")


def _path(raw: dict[str, Any], frame: Frame, cursor: Point | None) -> list[Point]:
    path = raw.get("path")
    if path is None and "start_coordinate" in raw:  # Claude's left_click_drag
        path = [raw["start_coordinate"], raw.get("coordinate")]
    elif path is None and "coordinate" in raw:  # Qwen's left_click_drag: from the pointer
        if cursor is None:
            raise BadAction("left_click_drag drags from the pointer, whose place is not known: move the mouse to "
                            "where the drag starts first (mouse_move)")
        return [cursor, _one_point(raw["coordinate"], frame)]
    if not isinstance(path, list) or len(path) < 2:
        raise BadAction("drag needs a 'path' of at least two points, e.g. [{\"x\": 1, \"y\": 2}, {\"x\": 3, \"y\": 4}]")
    return [_one_point(point, frame) for point in path]


def _one_point(point: Any, frame: Frame) -> Point:
    if isinstance(point, dict):
        return frame.to_display(point.get("x"), point.get("y"))
    if isinstance(point, (list, tuple)) and len(point) == 2:
        return frame.to_display(point[0], point[1])
    raise BadAction("each point of a drag's path is {\"x\": .., \"y\": ..}")


def _held(raw: dict[str, Any]) -> list[str]:
    """The keys held during a pointer action: `keys` (OpenAI), or Claude's `text` ("shift", "ctrl+shift")."""
    value = raw.get("keys", raw.get("text"))
    return _keys(value) if value is not None else []


def _keys(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # "ctrl+s" as Claude and xdotool write it, "ctrl s" as UI-TARS does
        value = [k for k in (value.split("+") if "+" in value.strip("+") else value.split()) if k]
    if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
        raise BadAction("'keys' must be a list of key names, e.g. [\"ctrl\", \"s\"]")
    return [keynames.to_openai(k) for k in value]


def _scroll(raw: dict[str, Any], *, horizontal: bool) -> tuple[int, int]:
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
    if "pixels" in raw:  # Qwen: positive scrolls up (or, hscroll, right)
        pixels = raw["pixels"]
        if isinstance(pixels, bool) or not isinstance(pixels, (int, float)):
            raise BadAction("pixels must be a number")
        return (round(pixels), 0) if horizontal else (0, -round(pixels))
    sx, sy = raw.get("scroll_x", 0), raw.get("scroll_y", 0)
    if isinstance(sx, bool) or isinstance(sy, bool) or not isinstance(sx, (int, float)) \
            or not isinstance(sy, (int, float)):
        raise BadAction("scroll_x and scroll_y must be numbers of pixels")
    return round(sx), round(sy)
