"""Streams the raw input of a custom (freeform) tool out of `{"input": "..."}` function arguments.

Chat Completions servers know only JSON-argument functions, so a custom tool is offered as a function
with one string parameter. Clients must still see the raw text (`custom_tool_call_input.delta`) as it
streams, so the string is decoded incrementally, escapes split across chunks included.
"""

from __future__ import annotations

import re

import orjson

_OPEN = re.compile(r'\s*\{\s*"input"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class CustomInputDecoder:
    __slots__ = ("_head", "_state", "_pending", "_raw", "_emitted")

    def __init__(self) -> None:
        self._head = ""  # text before the string value starts
        self._state = 0  # 0: before the value, 1: inside it, 2: after it, 3: unrecognized shape
        self._pending = ""  # an escape sequence split across chunks
        self._raw: list[str] = []  # everything, for the fallback parse
        self._emitted = False

    def feed(self, text: str) -> str:
        self._raw.append(text)
        if self._state == 0:
            self._head += text
            m = _OPEN.match(self._head)
            if m is None:
                if not _could_open(self._head):
                    self._state = 3
                return ""
            self._state = 1
            text = self._head[m.end():]
            self._head = ""
        if self._state != 1:
            return ""
        out = self._decode(self._pending + text)
        if out:
            self._emitted = True
        return out

    def finish(self) -> str:
        """What is left to emit once the arguments are complete (the whole input if it never streamed)."""
        if self._emitted or self._state == 2:
            return ""
        raw = "".join(self._raw)
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw  # a model that wrote the raw input without the JSON wrapper
        if isinstance(value, dict) and isinstance(value.get("input"), str):
            text: str = value["input"]
            return text
        if isinstance(value, str):
            return value
        return raw

    def _decode(self, s: str) -> str:
        out: list[str] = []
        i, n = 0, len(s)
        self._pending = ""
        while i < n:
            j = _next_special(s, i)
            if j > i:
                out.append(s[i:j])
                i = j
                if i >= n:
                    break
            c = s[i]
            if c == '"':
                self._state = 2
                break
            # a backslash escape
            if i + 1 >= n:
                self._pending = s[i:]
                break
            e = s[i + 1]
            if e == "u":
                if i + 6 > n and _could_be_escape(s[i:]):
                    self._pending = s[i:]
                    break
                code = _code_unit(s, i + 2)
                if code < 0:  # not four hex digits: invalid JSON, shown as a replacement character
                    out.append("\ufffd")
                    i += 2
                    continue
                if 0xD800 <= code < 0xDC00:  # a surrogate pair needs the next \uXXXX too
                    low_escape = s[i + 6:i + 12]
                    if len(low_escape) < 6 and _could_be_escape(low_escape):
                        self._pending = s[i:]
                        break
                    low = _code_unit(s, i + 8) if low_escape.startswith("\\u") else -1
                    if 0xDC00 <= low < 0xE000:
                        out.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                        i += 12
                        continue
                # a lone surrogate is not text (it cannot be encoded): a replacement character
                out.append("\ufffd" if 0xD800 <= code < 0xE000 else chr(code))
                i += 6
                continue
            out.append(_ESCAPES.get(e, e))
            i += 2
        return "".join(out)


_HEX = frozenset("0123456789abcdefABCDEF")


def _code_unit(s: str, i: int) -> int:
    """The four hex digits at `i`, or -1 (int() alone would also take signs, spaces and underscores)."""
    digits = s[i:i + 4]
    return int(digits, 16) if len(digits) == 4 and _HEX.issuperset(digits) else -1


def _could_be_escape(s: str) -> bool:
    """Whether `s` is the start of a `\\uXXXX` escape (more text may complete it)."""
    return "\\u".startswith(s[:2]) and _HEX.issuperset(s[2:])


def _next_special(s: str, i: int) -> int:
    q = s.find('"', i)
    b = s.find("\\", i)
    if q < 0:
        return len(s) if b < 0 else b
    return q if b < 0 else min(q, b)


def _could_open(head: str) -> bool:
    """Whether more text could still make `head` the start of `{"input": "`."""
    stripped = re.sub(r"\s+", "", head)
    target = '{"input":"'
    return target.startswith(stripped) or stripped.startswith(target)
