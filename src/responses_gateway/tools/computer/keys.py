"""Key names: OpenAI's (what clients written for its computer use map to their keyboard), from the names other
models write — X11 keysyms (Claude's `key` action, xdotool), pyautogui's (GUI-agent models) — and back into
X11 keysyms for Claude reading an earlier call.

OpenAI's computer-use model names keys as its sample app's keyboard map reads them (case aside): `enter`,
`esc`, `backspace`, `tab`, `space`, `delete`, `arrowup`.., `pageup`, `pagedown`, `home`, `end`, `insert`,
`capslock`, `ctrl`, `alt`, `shift`, `cmd`, `super`, and single characters. A name outside the table passes
as it is (`F5`, a letter).
"""

from __future__ import annotations

# other names -> OpenAI's (keys lowercased first)
TO_OPENAI = {
    "return": "enter", "kp_enter": "enter", "escape": "esc", "back_space": "backspace", "del": "delete",
    "up": "arrowup", "down": "arrowdown", "left": "arrowleft", "right": "arrowright",
    "page_up": "pageup", "prior": "pageup", "pgup": "pageup", "page_down": "pagedown", "next": "pagedown",
    "pgdn": "pagedown", "caps_lock": "capslock", "control": "ctrl", "control_l": "ctrl", "control_r": "ctrl",
    "ctrl_l": "ctrl", "ctrl_r": "ctrl", "alt_l": "alt", "alt_r": "alt", "option": "alt", "shift_l": "shift",
    "shift_r": "shift", "command": "cmd", "meta": "super", "meta_l": "super", "super_l": "super",
    "super_r": "super", "win": "super", "windows": "super", " ": "space",
}
OPENAI = ("enter", "esc", "backspace", "tab", "space", "delete", "arrowup", "arrowdown", "arrowleft",
          "arrowright", "pageup", "pagedown", "home", "end", "insert", "capslock", "ctrl", "alt", "shift", "cmd",
          "super")
# OpenAI's -> X11 keysyms (Claude's `key` text, e.g. "ctrl+Return")
TO_X11 = {
    "enter": "Return", "esc": "Escape", "backspace": "BackSpace", "tab": "Tab", "delete": "Delete",
    "arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right", "pageup": "Page_Up",
    "pagedown": "Page_Down", "home": "Home", "end": "End", "insert": "Insert", "capslock": "Caps_Lock",
    "cmd": "super", "win": "super", "space": "space",
}


def to_openai(key: str) -> str:
    if len(key) == 1:
        return key if key != " " else "space"
    lowered = key.lower()
    if lowered in OPENAI:
        return lowered
    return TO_OPENAI.get(lowered, key)


def to_x11(key: str) -> str:
    if len(key) == 1:
        return key
    lowered = key.lower()
    if lowered.startswith("f") and lowered[1:].isdigit():
        return "F" + lowered[1:]
    return TO_X11.get(lowered, lowered if lowered in OPENAI else key)
