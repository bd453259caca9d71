"""What one JSON request body may cost: nesting depth, number of objects and arrays, integer width.

Checked on the raw bytes before anything is parsed, so an allowed-size body of a million tiny items is
refused with a 400 instead of being turned into a million Python dicts. The scan is a Python loop over the
structural tokens (strings are skipped whole), so when it runs in a worker thread it gives
the GIL back every few milliseconds and the event loop keeps serving other requests meanwhile.

Integers wider than 64 bits are refused here too: Python and pydantic accept them, but they cannot be
sent on (orjson encodes at most 64 bits) and no upstream takes them, so they used to end as a 500.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import invalid

# A short string without escapes (whole), the start of any other string, a bracket, or an integer literal of
# 19 digits or more (the shortest that can leave the 64-bit range). Other strings are skipped with
# `bytes.find` (memchr, gigabytes a second): a regex walking a string's characters managed about 150 MB/s,
# 7 ms for a 1 MiB input.
_TOKEN = re.compile(rb'"[^"\\]{0,64}"|["\[\]{}]|-?\d{19,}(?![.eE\d])')
_TOKEN_WIDE = re.compile(rb"\d{19}")  # a run of 19 digits: an integer that may be too wide (or text)
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # what orjson can encode: i64 and u64
_NOT_DIGITS = bytes(b for b in range(256) if not 0x30 <= b <= 0x39)  # `translate` deletes them: the digits are left


@dataclass(frozen=True)
class Bounds:
    max_depth: int = 64
    max_containers: int = 200_000


@dataclass
class InputLayout:
    """Where the body's top-level `input` array and each of its elements lie in the raw bytes: a large body
    is then parsed piece by piece (`protocol.request.parse_request`), never in one long call that would hold
    the GIL (and so the event loop) for the whole body."""

    start: int = -1  # the array's `[`
    end: int = -1  # just after its `]`
    items: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each object, array or string


def check_body(raw: bytes | bytearray, bounds: Bounds) -> InputLayout | None:
    """Raise a 400 `APIError` if the body nests too deep, holds too many objects/arrays, or a too-wide integer.
    Returns where the `input` array's elements are (None when there is no such array or it is ambiguous)."""
    depth = containers = 0
    wide = False
    key: bytes | bytearray = b""  # the last string at depth 1: the key of the value that follows it (in valid JSON)
    layout = InputLayout()
    inside = ambiguous = False  # in the input array; seen twice (or an element that is not delimited)
    element = -1
    search, position = _TOKEN.search, 0
    while (match := search(raw, position)) is not None:
        start, position = match.span()
        first = raw[start]
        if first == 0x22:  # '"'
            if position == start + 1:  # a long string, or one with escapes
                position = _string_end(raw, start)
            if depth == 1:
                key = raw[start:position]
            elif depth == 2 and inside:
                layout.items.append((start, position))
        elif first in b"[{":
            if depth == 1 and key == b'"input"' and first == 0x5B:  # '['
                ambiguous = ambiguous or layout.start >= 0
                layout.start, inside = start, True
            elif depth == 2 and inside:
                element = start
            depth += 1
            containers += 1
            if depth > bounds.max_depth:
                raise invalid(f"The request body is nested too deeply: at most {bounds.max_depth} levels of "
                              "objects and arrays are accepted.", None, "nesting_too_deep")
            if containers > bounds.max_containers:
                raise invalid(f"The request body has too many objects and arrays: at most "
                              f"{bounds.max_containers} are accepted.", None, "request_too_complex")
        elif first in b"]}":
            depth -= 1
            if inside and depth <= 2:
                if depth == 2:
                    layout.items.append((element, match.end()))
                else:
                    layout.end, inside = match.end(), False
        else:
            value = int(match.group())
            wide = wide or not INT_MIN <= value <= INT_MAX
    if wide:
        _refuse_wide(raw)
    return layout if layout.end > 0 and not ambiguous else None


def plainly_within(raw: bytes | bytearray, bounds: Bounds) -> bool:
    """True when the body cannot break the bounds whatever its structure: no more brackets in all (those inside
    strings counted too) than the depth or the number of containers allowed, and no run of 19 digits (a
    possibly too wide integer; fewer than 19 digits in all need no search). A few scans in C instead of
    `check_body`'s Python loop over its tokens; False only means that `check_body` must look."""
    brackets = raw.count(b"{") + raw.count(b"[")
    if brackets > bounds.max_depth or brackets > bounds.max_containers:
        return False
    return len(raw.translate(None, _NOT_DIGITS)) < 19 or _TOKEN_WIDE.search(raw) is None


def _string_end(raw: bytes | bytearray, start: int) -> int:
    """Just past the string whose opening quote is at `start` (the end of the body when it never closes)."""
    end = raw.find(b'"', start + 1)
    while end > 0 and raw[end - 1] == 0x5C:  # a backslash before it: escaped unless that one is escaped too
        before = end - 1
        while raw[before - 1] == 0x5C:
            before -= 1
        if (end - before) % 2 == 0:
            break
        end = raw.find(b'"', end + 1)
    return end + 1 if end >= 0 else len(raw)


def input_items(raw: bytes | bytearray, layout: InputLayout) -> list[Any] | None:
    """The input array's elements, each parsed on its own; None when they are not plainly comma-separated
    (a bare number or literal, a missing or extra comma, an element orjson refuses): parse the whole body then,
    and let that parse say what is wrong."""
    previous = layout.start + 1
    for i, (first, last) in enumerate(layout.items):
        if raw[previous:first].strip() != (b"," if i else b""):
            return None
        previous = last
    if raw[previous:layout.end - 1].strip():
        return None
    view = memoryview(raw)
    try:
        return [orjson.loads(view[first:last]) for first, last in layout.items]
    except orjson.JSONDecodeError:
        return None


def loads(raw: bytes | bytearray, layout: InputLayout | None) -> Any:
    """`orjson.loads(raw)`, the input array's elements parsed one by one when `layout` says where they are."""
    items = input_items(raw, layout) if layout is not None else None
    if items is None:
        return orjson.loads(raw)
    body = orjson.loads(raw[:layout.start] + b"[]" + raw[layout.end:])  # type: ignore[union-attr]
    body["input"] = items
    return body


def _refuse_wide(raw: bytes | bytearray) -> None:
    try:
        body = json.loads(raw)
    except ValueError:
        return  # not JSON: the parser says so with OpenAI's message
    found = _find_wide(body, "")
    if found is not None:
        path, value = found
        where = f"'{path}'" if path else "the request body"
        raise invalid(f"Invalid {where}: integer {value} does not fit in 64 bits.", path or None,
                      "integer_out_of_range")


def _find_wide(value: Any, path: str) -> tuple[str, int] | None:
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_wide(item, f"{path}.{key}" if path else str(key))
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _find_wide(item, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return path, value
    return None
