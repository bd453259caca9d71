"""UI-TARS's own action language, for a model served without tool calling (profile `ui-tars-1.5`, or a route's
`computer_function = "ui-tars"`): the prompt it was trained with, its answers read, its earlier calls written
back as it writes them.

UI-TARS answers `Thought: <its plan>` then `Action: click(start_box='(235,512)')` (the point may come as
`<|box_start|>(x,y)<|box_end|>`, `<point>x y</point>` or a box `(x1,y1,x2,y2)`, whose centre counts), in pixels of
the screenshot as its processor resized it. The call's arguments carry the action as written (`{"ui_tars":
"click(...)"}`); `actions()` reads it into this gateway's action shapes — parsed as a Python call expression
(never evaluated), so anything else is a `BadAction` the model reads on its next step. `finished(content=...)`
ends the task: its content is the answer.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import orjson

from .actions import BadAction, Frame

PROMPT = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='')
type(content='') #If you want to submit your input, use "\\n" at the end of `content`.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \\\\', \\\\", and \\\\n in content part to ensure we can parse the content in normal python string format.

## Note
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
The user's task is in the conversation that follows."""  # noqa: E501

ACTION = re.compile(r"^\s*Action:\s*", re.M)
THOUGHT = re.compile(r"^\s*(?:Thought|Reflection):\s*", re.M)
NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
SCROLL_STEPS = 5  # what UI-TARS's own executor scrolls for one `scroll` (pyautogui clicks)
MAX_ACTION = 20_000  # characters of an action parsed (a `type` of MAX_TEXT characters, quoted, fits)


class UiTars:
    """The `TextCalls` of UI-TARS (protocol/tools.py)."""

    def prompt(self) -> str:
        return PROMPT

    def read(self, text: str) -> tuple[str, str | None, str]:
        """(its thought, the call's arguments, the answer's text)."""
        found = ACTION.search(text)
        if found is None:
            return "", None, text.strip()
        thought = THOUGHT.sub("", text[:found.start()], count=1).strip()
        action = text[found.end():].strip()
        finished = re.match(r"finished\((?:content=)?(.*)\)\s*$", action, re.S)
        if finished is not None:
            return thought, None, _string(finished.group(1)) or thought
        if re.match(r"call_user\(\s*\)\s*$", action):
            return "", None, thought or "I need your help to go on."
        return thought, orjson.dumps({"ui_tars": action}).decode(), ""


def actions(arguments: dict[str, Any]) -> dict[str, Any]:
    """A UI-TARS call's action, written as UI-TARS writes it, in this gateway's action shapes (its points in
    the model's frame, for actions.from_model to check and map)."""
    written = arguments.get("ui_tars")
    if not isinstance(written, str):
        raise BadAction("write one action as the action space shows, e.g. Action: click(start_box='(100,200)')")
    if len(written) > MAX_ACTION:
        raise BadAction(f"an action is at most {MAX_ACTION} characters: type long text in several actions")
    expression = _expression(written.strip())
    if expression is None:  # several lines: the first action
        expression = _expression(written.strip().split("\n", 1)[0])
    if expression is None:
        raise BadAction(f"the action {written[:200]!r} cannot be read: write one action as the action space "
                        "shows, e.g. click(start_box='(100,200)')")
    if not isinstance(expression, ast.Call) or not isinstance(expression.func, ast.Name):
        raise BadAction(f"the action {written!r} is not one of the action space's")
    name = expression.func.id
    given = {k.arg: _constant(k.value) for k in expression.keywords if k.arg is not None}
    if expression.args:
        given.setdefault("start_box" if name not in ("type", "hotkey", "press") else "content",
                         _constant(expression.args[0]))
    if name in ("click", "left_single", "left_double", "right_single", "hover", "mouse_move"):
        kind = {"click": "left_click", "left_single": "left_click", "left_double": "double_click",
                "right_single": "right_click", "hover": "mouse_move", "mouse_move": "mouse_move"}[name]
        return {"action": kind, "coordinate": _point(given, "start_box", "point")}
    if name in ("drag", "select"):
        return {"action": "left_click_drag", "start_coordinate": _point(given, "start_box", "start_point"),
                "coordinate": _point(given, "end_box", "end_point")}
    if name in ("hotkey", "press", "keydown"):
        return {"action": "hotkey", "keys": str(given.get("key", given.get("hotkey", given.get("content", ""))))}
    if name == "type":
        return {"action": "type", "text": str(given.get("content", ""))}
    if name == "scroll":
        direction = str(given.get("direction", "down")).strip().lower()
        out: dict[str, Any] = {"action": "scroll", "scroll_direction": direction, "scroll_amount": SCROLL_STEPS}
        if given.get("start_box") is not None or given.get("point") is not None:
            out["coordinate"] = _point(given, "start_box", "point")
        return out
    if name == "wait":
        return {"action": "wait"}
    raise BadAction(f"unknown action {name!r}: use one of the action space (click, left_double, right_single, "
                    "drag, hotkey, type, scroll, wait, finished)")


def write(action: dict[str, Any], frame: Frame) -> str:
    """An action, as UI-TARS writes it, in its frame."""
    kind = action.get("type")

    def box(x: Any, y: Any) -> str:
        mx, my = frame.to_model(int(x), int(y))
        return f"'<|box_start|>({mx},{my})<|box_end|>'"

    if kind in ("click", "double_click", "move"):
        name = {"double_click": "left_double", "move": "hover"}.get(str(kind), "click")
        if kind == "click" and action.get("button") == "right":
            name = "right_single"
        return f"{name}(start_box={box(action['x'], action['y'])})"
    if kind == "drag":
        path = action.get("path") or [{"x": 0, "y": 0}]
        return (f"drag(start_box={box(path[0]['x'], path[0]['y'])}, "
                f"end_box={box(path[-1]['x'], path[-1]['y'])})")
    if kind == "keypress":
        return f"hotkey(key={' '.join(action.get('keys') or ())!r})"
    if kind == "type":
        return f"type(content={action.get('text', '')!r})"
    if kind == "scroll":
        sx, sy = int(action.get("scroll_x") or 0), int(action.get("scroll_y") or 0)
        direction = ("down" if sy > 0 else "up") if abs(sy) >= abs(sx) else ("right" if sx > 0 else "left")
        return f"scroll(start_box={box(action['x'], action['y'])}, direction='{direction}')"
    return "wait()"


def _expression(source: str) -> ast.expr | None:
    """The action as a Python expression, parsed and never evaluated (None: not one)."""
    try:
        return ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _constant(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple | ast.List):
        return [_constant(e) for e in node.elts]
    raise BadAction("an action's arguments are quoted strings, e.g. click(start_box='(100,200)')")


def _point(given: dict[str, Any], *names: str) -> list[float]:
    """A point the way UI-TARS writes one: '(x,y)', '<|box_start|>(x,y)<|box_end|>', '<point>x y</point>', or a
    box '(x1,y1,x2,y2)' — its centre."""
    value = next((given[n] for n in names if given.get(n) is not None), None)
    numbers = [float(n) for n in NUMBERS.findall(str(value))] if value is not None else []
    if len(numbers) == 2:
        return numbers
    if len(numbers) == 4:
        return [(numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2]
    raise BadAction(f"{names[0]} needs a point, e.g. {names[0]}='(100,200)'")


def _string(value: str) -> str:
    """finished()'s content: a quoted string as Python reads it, else the text as written."""
    try:
        found = ast.literal_eval(value.strip())
    except (SyntaxError, ValueError):
        return value.strip().strip("'\"")
    return found if isinstance(found, str) else str(found)
