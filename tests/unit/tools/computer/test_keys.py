"""tools/computer/keys.py: key names to OpenAI's, and to the X11 keysyms Claude writes."""

from __future__ import annotations

import pytest

from responses_gateway.tools.computer.keys import to_openai, to_x11


@pytest.mark.parametrize("given, openai", [
    ("Return", "enter"), ("KP_Enter", "enter"), ("ENTER", "enter"), ("Escape", "esc"), ("BackSpace", "backspace"),
    ("Page_Down", "pagedown"), ("Up", "arrowup"), ("control", "ctrl"), ("Control_L", "ctrl"), ("CTRL", "ctrl"),
    ("super_l", "super"), ("command", "cmd"), (" ", "space"), ("a", "a"), ("A", "A"), ("F5", "F5"),
    ("Tab", "tab"), ("Delete", "delete"), ("pgdn", "pagedown"),
])
def test_to_openai(given, openai):
    assert to_openai(given) == openai


@pytest.mark.parametrize("openai, x11", [
    ("enter", "Return"), ("esc", "Escape"), ("backspace", "BackSpace"), ("arrowleft", "Left"),
    ("pagedown", "Page_Down"), ("ctrl", "ctrl"), ("shift", "shift"), ("cmd", "super"), ("a", "a"), ("f5", "F5"),
    ("Tab", "Tab"), ("space", "space"),
])
def test_to_x11(openai, x11):
    assert to_x11(openai) == x11


def test_a_round_trip_keeps_what_claude_wrote():
    for key in ("Return", "Escape", "BackSpace", "Page_Up", "Left", "Tab", "Delete", "Home", "F11", "ctrl", "x"):
        assert to_x11(to_openai(key)) == key
