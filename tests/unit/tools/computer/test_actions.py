"""tools/computer/actions.py: actions in the shapes models write them, checked, as OpenAI types them."""

from __future__ import annotations

import pytest

from responses_gateway.tools.computer.actions import BadAction, Frame, from_model, pointer_after, problem
from responses_gateway.tools.computer.profiles import PROFILES, Profile

SCREEN = Frame(Profile(), (1280, 800))


@pytest.mark.parametrize("arguments, action", [
    ({"action": "click", "x": 1, "y": 2}, {"type": "click", "x": 1, "y": 2, "button": "left"}),
    ({"action": {"type": "click", "x": 1, "y": 2, "button": "right"}},
     {"type": "click", "x": 1, "y": 2, "button": "right"}),
    # Claude's computer tool
    ({"action": "left_click", "coordinate": [5, 6]}, {"type": "click", "x": 5, "y": 6, "button": "left"}),
    ({"action": "right_click", "coordinate": [5, 6]}, {"type": "click", "x": 5, "y": 6, "button": "right"}),
    ({"action": "left_click", "coordinate": [5, 6], "text": "shift"},
     {"type": "click", "x": 5, "y": 6, "button": "left", "keys": ["shift"]}),
    ({"action": "key", "text": "ctrl+s"}, {"type": "keypress", "keys": ["ctrl", "s"]}),
    ({"action": "key", "text": "Return"}, {"type": "keypress", "keys": ["enter"]}),
    ({"action": "key", "text": "ctrl+Page_Down"}, {"type": "keypress", "keys": ["ctrl", "pagedown"]}),
    ({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up", "scroll_amount": 2},
     {"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": -200}),
    ({"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [3, 4]},
     {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}),
    # Qwen's computer_use
    ({"action": "key", "keys": ["ctrl", "c"]}, {"type": "keypress", "keys": ["ctrl", "c"]}),
    ({"action": "scroll", "coordinate": [7, 8], "pixels": 300},
     {"type": "scroll", "x": 7, "y": 8, "scroll_x": 0, "scroll_y": -300}),
    ({"action": "hscroll", "coordinate": [7, 8], "pixels": 50},
     {"type": "scroll", "x": 7, "y": 8, "scroll_x": 50, "scroll_y": 0}),
    ({"action": "scroll", "pixels": -100}, {"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": 100}),
    ({"action": "wait", "time": 2}, {"type": "wait"}),
    # GUI-agent aliases
    ({"action": "hotkey", "keys": ["alt", "tab"]}, {"type": "keypress", "keys": ["alt", "tab"]}),
    ({"action": "hotkey", "keys": "ctrl c"}, {"type": "keypress", "keys": ["ctrl", "c"]}),
    ({"action": "type", "text": "hi"}, {"type": "type", "text": "hi"}),
    ({"action": "mouse_move", "x": 9, "y": 9}, {"type": "move", "x": 9, "y": 9}),
    ({"action": "wait"}, {"type": "wait"}),
    ({"action": "screenshot"}, {"type": "screenshot"}),
])
def test_each_shape_becomes_openais_action(arguments, action):
    assert from_model(arguments, SCREEN) == [action]


def test_an_action_without_a_point_acts_where_the_pointer_is():
    """Claude's older tool clicks where the mouse is; Qwen's drag goes from the pointer to its coordinate."""
    assert from_model({"action": "left_click"}, SCREEN, cursor=(10, 20)) == [
        {"type": "click", "x": 10, "y": 20, "button": "left"}]
    moved = from_model({"actions": [{"action": "mouse_move", "coordinate": [3, 4]},
                                    {"action": "left_click_drag", "coordinate": [30, 40]}]}, SCREEN)
    assert moved[1] == {"type": "drag", "path": [{"x": 3, "y": 4}, {"x": 30, "y": 40}]}
    with pytest.raises(BadAction, match="move the mouse to where the drag starts"):
        from_model({"action": "left_click_drag", "coordinate": [30, 40]}, SCREEN)
    with pytest.raises(BadAction, match="needs a point"):
        from_model({"action": "left_click"}, SCREEN)


@pytest.mark.parametrize("arguments, says", [
    ({"action": "fly"}, "unknown action 'fly'"),
    ({"action": "click", "x": 1280, "y": 0}, "outside the screen"),
    ({"action": "click", "x": "a", "y": 0}, "must be numbers"),
    ({"action": "click"}, "needs a point"),
    ({"action": "click", "coordinate": [1]}, r"'coordinate' must be \[x, y\]"),
    ({"action": "keypress"}, "keypress needs 'keys'"),
    ({"action": "type", "text": ""}, "type needs the 'text'"),
    ({"action": "drag", "path": [{"x": 1, "y": 1}]}, "at least two points"),
    ({"action": "click", "x": 1, "y": 1, "button": "thumb"}, "unknown button"),
    ({"action": "triple_click", "coordinate": [1, 1]}, "use double_click"),
    ({"action": "terminate", "status": "success"}, "reply in text"),
    ({"action": "zoom", "region": [0, 0, 5, 5]}, "zoom is not available"),
    ({"actions": []}, "non-empty list"),
    ({"actions": [{"action": "wait"}] * 17}, "at most 16 actions"),
    ([1], "must be a JSON object"),
])
def test_a_mistake_says_what_to_correct(arguments, says):
    with pytest.raises(BadAction, match=says):
        from_model(arguments, SCREEN)


def test_without_a_known_screen_only_unresized_pixels_act():
    assert from_model({"action": "click", "x": 3, "y": 4}, Frame(Profile(), None))[0]["x"] == 3
    with pytest.raises(BadAction, match="take a screenshot first"):
        from_model({"action": "click", "x": 3, "y": 4}, Frame(PROFILES["qwen3-vl"], None))


def test_the_declared_display_frames_the_model_until_a_screenshot_is_seen():
    frame = Frame(PROFILES["qwen3-vl"], None, (1000, 500))
    assert from_model({"action": "click", "x": 500, "y": 500}, frame)[0]["x"] == 500
    hidpi = Frame(Profile(), (2000, 1000), (1000, 500))  # the screenshot is twice the display
    assert from_model({"action": "move", "x": 1000, "y": 400}, hidpi) == [{"type": "move", "x": 500, "y": 200}]


def test_where_an_action_leaves_the_pointer():
    assert pointer_after({"type": "click", "x": 1, "y": 2}, None) == (1, 2)
    assert pointer_after({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 5, "y": 6}]}, None) == (5, 6)
    assert pointer_after({"type": "type", "text": "a"}, (3, 3)) == (3, 3)


@pytest.mark.parametrize("action, says", [
    ({"type": "click", "x": 1, "y": 2, "button": "left"}, None),
    ({"type": "drag", "path": [{"x": 1, "y": 2}], "keys": ["shift"]}, None),
    ({"type": "fly"}, "'type' must be one of"),
    ({"type": "click", "x": 1, "y": 2}, "'button' must be a string"),
    ({"type": "click", "x": 1, "y": 2, "button": "thumb"}, "'button' must be one of"),
    ({"type": "move", "x": 1.5, "y": 2}, "'x' must be an integer"),
    ({"type": "scroll", "x": 1, "y": 2, "scroll_x": 0}, "'scroll_y' must be an integer"),
    ({"type": "keypress", "keys": "ctrl"}, "'keys' must be an array of strings"),
    ({"type": "drag", "path": [{"x": "1", "y": 2}]}, "'path' must be an array of {x, y} points"),
    ({"type": "type"}, "'text' must be a string"),
    ({"type": "move", "x": 1, "y": 2, "keys": [1]}, "'keys' must be an array of strings"),
])
def test_a_clients_action_is_checked_as_openai_types_it(action, says):
    found = problem(action)
    assert found is None if says is None else says in found
