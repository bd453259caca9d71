"""tools/computer/uitars.py: UI-TARS's action language — its answers read, its actions checked, written back."""

from __future__ import annotations

import json

import pytest

from responses_gateway.tools.computer.actions import BadAction, Frame, from_model
from responses_gateway.tools.computer.profiles import PROFILES, Profile
from responses_gateway.tools.computer.uitars import UiTars, actions, write

SCREEN = Frame(Profile(), (1280, 800))


def test_an_answer_read_into_its_thought_its_call_and_its_text():
    read = UiTars().read
    thought, arguments, rest = read("Thought: The search box is at the top.\nAction: click(start_box='(10,20)')")
    assert (thought, json.loads(arguments), rest) == (
        "The search box is at the top.", {"ui_tars": "click(start_box='(10,20)')"}, "")
    assert read("Thought: All done.\nAction: finished(content='The price is \\'42\\'.')") == (
        "All done.", None, "The price is '42'.")
    assert read("Thought: I cannot log in.\nAction: call_user()") == ("", None, "I cannot log in.")
    assert read("Just some text.") == ("", None, "Just some text.")
    assert "## Action Space" in UiTars().prompt() and "finished(content=" in UiTars().prompt()


@pytest.mark.parametrize("written, action", [
    ("click(start_box='(10,20)')", {"type": "click", "x": 10, "y": 20, "button": "left"}),
    ("click(start_box='<|box_start|>(10,20)<|box_end|>')", {"type": "click", "x": 10, "y": 20, "button": "left"}),
    ("click(point='<point>10 20</point>')", {"type": "click", "x": 10, "y": 20, "button": "left"}),
    ("click(start_box='(10,20,30,40)')", {"type": "click", "x": 20, "y": 30, "button": "left"}),  # a box: its centre
    ("left_double(start_box='(5,6)')", {"type": "double_click", "x": 5, "y": 6}),
    ("right_single(start_box='(5,6)')", {"type": "click", "x": 5, "y": 6, "button": "right"}),
    ("hover(start_box='(5,6)')", {"type": "move", "x": 5, "y": 6}),
    ("drag(start_box='(1,2)', end_box='(30,40)')", {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 30, "y": 40}]}),
    ("hotkey(key='ctrl c')", {"type": "keypress", "keys": ["ctrl", "c"]}),
    ("hotkey(key='enter')", {"type": "keypress", "keys": ["enter"]}),
    ("type(content='hello\\n')", {"type": "type", "text": "hello\n"}),
    ("scroll(start_box='(7,8)', direction='down')", {"type": "scroll", "x": 7, "y": 8, "scroll_x": 0,
                                                      "scroll_y": 500}),
    ("scroll(direction='up')", {"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": -500}),
    ("wait()", {"type": "wait"}),
    ("click(start_box='(10,20)')\n\nAction: type(content='x')", {"type": "click", "x": 10, "y": 20,
                                                                   "button": "left"}),  # the first action
])
def test_each_action_as_openai_types_it(written, action):
    assert from_model(actions({"ui_tars": written}), SCREEN) == [action]


@pytest.mark.parametrize("written, says", [
    ("fly(start_box='(1,2)')", "unknown action 'fly'"),
    ("click(", "cannot be read"),
    ("__import__('os').system('id')", "not one of the action space's"),
    ("click(start_box=open('/etc/passwd'))", "quoted strings"),
    ("click(start_box='here')", "start_box needs a point"),
    ("click(start_box='(5000,20)')", "outside the screen"),
    ("type(content='" + "a" * 30_000 + "')", "at most 20000 characters"),
    ("click(start_box=" + "(" * 5000 + ")" * 5000 + ")", "cannot be read|quoted strings"),
])
def test_a_mistake_says_what_to_correct(written, says):
    with pytest.raises(BadAction, match=says):
        from_model(actions({"ui_tars": written}), SCREEN)


def test_an_action_written_back_reads_as_the_same_action():
    frame = Frame(PROFILES["ui-tars-1.5"], (1280, 800))
    for action in ({"type": "click", "x": 640, "y": 400, "button": "left"},
                   {"type": "click", "x": 3, "y": 4, "button": "right"},
                   {"type": "double_click", "x": 100, "y": 100}, {"type": "move", "x": 9, "y": 9},
                   {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 300, "y": 400}]},
                   {"type": "keypress", "keys": ["ctrl", "c"]}, {"type": "type", "text": "it's \"quoted\"\n"},
                   {"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": 500}, {"type": "wait"}):
        text = write(action, frame)
        (back,) = from_model(actions({"ui_tars": text}), frame)
        assert back == action or all(abs(back[k] - action[k]) <= 1 for k in ("x", "y")), (text, back)
    assert write({"type": "click", "x": 640, "y": 400, "button": "left"}, frame) == \
        "click(start_box='<|box_start|>(644,406)<|box_end|>')"  # in its frame: the smart-resized screenshot
