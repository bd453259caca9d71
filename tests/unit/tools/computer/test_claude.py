"""tools/computer/claude.py: Claude's computer tool — the version for each model, its frame, actions back."""

from __future__ import annotations

import pytest

from responses_gateway.tools.computer.actions import Frame
from responses_gateway.tools.computer.claude import declaration, profile, to_claude, version


def frame_for(model, image, declared):
    return Frame(profile(model), image, declared)


@pytest.mark.parametrize("model, kind", [
    ("claude-opus-4-5-20251101", "computer_20251124"), ("claude-opus-4-6", "computer_20251124"),
    ("claude-sonnet-4-6", "computer_20251124"), ("claude-opus-4-7", "computer_20251124"),
    ("claude-sonnet-5", "computer_20251124"),  # a model not in the table: the newest
    ("claude-sonnet-4-5-20250929", "computer_20250124"), ("claude-haiku-4-5", "computer_20250124"),
    ("claude-opus-4-1-20250805", "computer_20250124"), ("claude-sonnet-4-20250514", "computer_20250124"),
    ("claude-opus-4-20250514", "computer_20250124"), ("claude-sonnet-4", "computer_20250124"),
    ("anthropic.claude-sonnet-4-20250514-v1:0", "computer_20250124"), ("claude-3-7-sonnet-latest", "computer_20250124"),
    ("claude-3-5-sonnet-20241022", "computer_20241022"),
])
def test_the_tool_version_for_each_model(model, kind):
    assert version(model) == kind


def test_claude_is_told_the_screenshot_as_anthropic_scales_it_and_its_points_map_back():
    frame = frame_for("claude-sonnet-4-5", (1920, 1080), None)
    assert declaration("claude-sonnet-4-5", frame) == {
        "type": "computer_20250124", "name": "computer", "display_width_px": 1430, "display_height_px": 804}
    assert frame.to_display(715, 402) == (960, 540)  # the middle of the screen
    assert frame_for("claude-opus-4-7", (1920, 1080), None).size() == (1920, 1080)  # within Opus 4.7's limits
    assert declaration("claude-sonnet-4-5", frame_for("claude-sonnet-4-5", None, None))["display_width_px"] == 1024


def test_openais_actions_as_claude_writes_them():
    frame = frame_for("claude-sonnet-4-5", (1280, 800), None)
    assert to_claude({"type": "click", "x": 5, "y": 6, "button": "right", "keys": ["shift"]}, frame) == {
        "action": "right_click", "coordinate": [5, 6], "text": "shift"}
    assert to_claude({"type": "keypress", "keys": ["ctrl", "enter"]}, frame) == {"action": "key",
                                                                                 "text": "ctrl+Return"}
    assert to_claude({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}, frame) == {
        "action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [3, 4]}
    assert to_claude({"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 300}, frame) == {
        "action": "scroll", "coordinate": [1, 1], "scroll_direction": "down", "scroll_amount": 3}
    assert to_claude({"type": "wait"}, frame) == {"action": "wait", "duration": 1}
    big = frame_for("claude-sonnet-4-5", (1920, 1080), None)
    assert to_claude({"type": "move", "x": 960, "y": 540}, big) == {"action": "mouse_move", "coordinate": [715, 402]}
