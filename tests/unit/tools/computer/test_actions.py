"""tools/computer/actions.py: actions in the shapes models write them, checked, as OpenAI types them."""

from __future__ import annotations

import pytest

from responses_gateway.tools.computer.actions import BadAction, Frame, from_model, to_claude, to_function
from responses_gateway.tools.computer.profiles import Profile

SCREEN = Frame(Profile(), (1280, 800))


@pytest.mark.parametrize("arguments, action", [
    ({"action": "click", "x": 1, "y": 2}, {"type": "click", "x": 1, "y": 2, "button": "left"}),
    ({"action": {"type": "click", "x": 1, "y": 2, "button": "right"}},
     {"type": "click", "x": 1, "y": 2, "button": "right"}),
    ({"action": "left_click", "coordinate": [5, 6]}, {"type": "click", "x": 5, "y": 6, "button": "left"}),
    ({"action": "right_click", "coordinate": [5, 6]}, {"type": "click", "x": 5, "y": 6, "button": "right"}),
    ({"action": "key", "text": "ctrl+s"}, {"type": "keypress", "keys": ["ctrl", "s"]}),
    ({"action": "hotkey", "keys": ["alt", "tab"]}, {"type": "keypress", "keys": ["alt", "tab"]}),
    ({"action": "type", "text": "hi"}, {"type": "type", "text": "hi"}),
    ({"action": "scroll", "coordinate": [1, 1], "scroll_direction": "up", "scroll_amount": 2},
     {"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": -200}),
    ({"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [3, 4]},
     {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}),
    ({"action": "mouse_move", "x": 9, "y": 9}, {"type": "move", "x": 9, "y": 9}),
    ({"action": "wait"}, {"type": "wait"}),
    ({"action": "screenshot"}, {"type": "screenshot"}),
])
def test_each_shape_becomes_openais_action(arguments, action):
    assert from_model(arguments, SCREEN) == [action]


@pytest.mark.parametrize("arguments, says", [
    ({"action": "fly"}, "unknown action 'fly'"),
    ({"action": "click", "x": 1280, "y": 0}, "outside the screen"),
    ({"action": "click", "x": "a", "y": 0}, "must be numbers"),
    ({"action": "click"}, "needs a point"),
    ({"action": "keypress"}, "keypress needs 'keys'"),
    ({"action": "type", "text": ""}, "type needs the 'text'"),
    ({"action": "drag", "path": [{"x": 1, "y": 1}]}, "at least two points"),
    ({"action": "click", "x": 1, "y": 1, "button": "thumb"}, "unknown button"),
    ({"actions": []}, "non-empty list"),
    ([1], "must be a JSON object"),
])
def test_a_mistake_says_what_to_correct(arguments, says):
    with pytest.raises(BadAction, match=says):
        from_model(arguments, SCREEN)


def test_without_a_known_screen_only_unresized_pixels_act():
    assert from_model({"action": "click", "x": 3, "y": 4}, Frame(Profile(), None))[0]["x"] == 3
    with pytest.raises(BadAction, match="take a screenshot first"):
        from_model({"action": "click", "x": 3, "y": 4}, Frame(Profile.named("qwen3-vl"), None))


def test_back_into_the_models_shape():
    frame = Frame(Profile.named("qwen3-vl"), (1280, 800))
    click = {"type": "click", "x": 640, "y": 200, "button": "left"}
    assert to_function(click, frame) == {"action": "click", "button": "left", "x": 500, "y": 250}
    assert to_claude(click) == {"action": "left_click", "coordinate": [640, 200]}
    assert to_claude({"type": "keypress", "keys": ["ctrl", "s"]}) == {"action": "key", "text": "ctrl+s"}
    assert to_claude({"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 300})["scroll_direction"] == "down"
