"""What a vision model over Chat Completions is offered for the computer, and its earlier calls written back in
the same terms.

Two functions, as the route's profile says (profiles.py):
- `computer`, the gateway's: OpenAI's actions as parameters (`{"action": "click", "x": .., "y": ..}`, or
  `{"actions": [...]}` for the `computer` tool, which takes several in order);
- `computer_use`, the function Qwen2.5-VL and Qwen3-VL were trained with (Qwen's cookbooks): Claude-style action
  names, `coordinate: [x, y]`, `keys`, scrolling by `pixels`, a drag from the pointer; one action a call.
Either tells the model its frame: the coordinates its profile answers in, the screen's size in that frame.
"""

from __future__ import annotations

from typing import Any

from .actions import BUTTONS, TYPES, Frame
from .keys import to_openai

GENERIC = (
    "Use the computer: click, double_click, drag, keypress, move, screenshot, scroll, type or wait. "
    "After each call you get a screenshot of the screen; act on what it shows. Points are {coordinates}."
)
SEVERAL = " Give several actions in order in 'actions' when you are sure of them."

QWEN = """Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a desktop GUI. You do not have access to a terminal or applications menu. You must click on desktop icons to start applications.
* Some applications may take time to start or process actions, so you may need to wait and take successive screenshots to see the results of your actions.
{resolution}* Whenever you intend to move the cursor to click on an element like an icon, you should consult a screenshot to determine the coordinates of the element before moving the cursor.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on their edges.
* When the task is done, reply in text instead of calling this tool."""  # noqa: E501

QWEN_ACTIONS = """The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `left_click_drag`: Click and drag the cursor from where it is to a specified (x, y) pixel coordinate on the screen.
* `right_click`: Click the right mouse button at a specified (x, y) pixel coordinate on the screen.
* `middle_click`: Click the middle mouse button at a specified (x, y) pixel coordinate on the screen.
* `double_click`: Double-click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `hscroll`: Performs a horizontal scroll.
* `screenshot`: Take a screenshot of the screen.
* `wait`: Wait specified seconds for the change to happen."""  # noqa: E501

QWEN_NAMES = ("key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click",
              "double_click", "scroll", "hscroll", "screenshot", "wait")


def description(frame: Frame, several: bool) -> str:
    """The function's description, for the profile's function and the model's frame."""
    size = frame.size()
    if frame.profile.function == "computer_use":
        resolution = f"* The screen's resolution is {size[0]}x{size[1]}.\n" if size is not None else ""
        return QWEN.format(resolution=resolution)
    return GENERIC.format(coordinates=frame.profile.describe(frame.seen)) + (SEVERAL if several else "")


def parameters(frame: Frame, several: bool) -> dict[str, Any]:
    if frame.profile.function == "computer_use":
        return qwen_parameters()
    return generic_parameters(several)


def generic_parameters(several: bool) -> dict[str, Any]:
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


def qwen_parameters() -> dict[str, Any]:
    """The `computer_use` function's parameters, as Qwen's models were trained with them."""
    return {
        "type": "object",
        "properties": {
            "action": {"description": QWEN_ACTIONS, "enum": list(QWEN_NAMES), "type": "string"},
            "keys": {"description": "Required only by `action=key`.", "type": "array"},
            "text": {"description": "Required only by `action=type`.", "type": "string"},
            "coordinate": {"description": "(x, y): The x (pixels from the left edge) and y (pixels from the top "
                                          "edge) coordinates to move the mouse to.", "type": "array"},
            "pixels": {"description": "The amount of scrolling to perform. Positive values scroll up, negative "
                                      "values scroll down. Required only by `action=scroll` and "
                                      "`action=hscroll`.", "type": "number"},
            "time": {"description": "The seconds to wait. Required only by `action=wait`.", "type": "number"},
        },
        "required": ["action"],
    }


# -- an earlier call, written back as the model wrote it -------------------------------------------------------

def arguments(actions: list[dict[str, Any]], frame: Frame, several: bool) -> dict[str, Any]:
    """A computer call's actions as the arguments of the profile's function, in the model's frame."""
    if frame.profile.function == "computer_use":
        return to_qwen(actions[0], frame) if actions else {"action": "screenshot"}
    if len(actions) == 1 and not several:
        return to_generic(actions[0], frame)
    return {"actions": [to_generic(a, frame) for a in actions]}


def to_generic(action: dict[str, Any], frame: Frame) -> dict[str, Any]:
    """An action as the `computer` function takes it, in the model's frame."""
    out: dict[str, Any] = {"action": action.get("type")}
    out.update((k, v) for k, v in action.items() if k not in ("type", "x", "y", "path"))
    if "x" in action and "y" in action:
        out["x"], out["y"] = frame.to_model(int(action["x"]), int(action["y"]))
    if "path" in action:
        out["path"] = [dict(zip(("x", "y"), frame.to_model(int(p["x"]), int(p["y"])), strict=True))
                       for p in action["path"]]
    return out


QWEN_CLICKS = {"left": "left_click", "right": "right_click", "wheel": "middle_click"}


def to_qwen(action: dict[str, Any], frame: Frame) -> dict[str, Any]:
    """An action as the `computer_use` function takes it, in the model's frame."""
    kind = action.get("type")
    point = list(frame.to_model(int(action["x"]), int(action["y"]))) if "x" in action and "y" in action else None
    if kind == "click":
        return {"action": QWEN_CLICKS.get(action.get("button") or "left", "left_click"), "coordinate": point}
    if kind == "double_click":
        return {"action": "double_click", "coordinate": point}
    if kind == "move":
        return {"action": "mouse_move", "coordinate": point}
    if kind == "drag":
        end = (action.get("path") or [{"x": 0, "y": 0}])[-1]
        return {"action": "left_click_drag", "coordinate": list(frame.to_model(int(end["x"]), int(end["y"])))}
    if kind == "keypress":
        return {"action": "key", "keys": [to_openai(k) for k in action.get("keys") or ()]}
    if kind == "type":
        return {"action": "type", "text": action.get("text", "")}
    if kind == "scroll":
        sx, sy = int(action.get("scroll_x") or 0), int(action.get("scroll_y") or 0)
        if sx and not sy:
            return {"action": "hscroll", "coordinate": point, "pixels": sx}
        return {"action": "scroll", "coordinate": point, "pixels": -sy}
    if kind == "wait":
        return {"action": "wait", "time": 1}
    return {"action": "screenshot"}
