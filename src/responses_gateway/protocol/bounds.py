"""What one JSON request body may cost: nesting depth, number of objects and arrays, integer width.

Checked on the raw bytes before anything is parsed, so an allowed-size body of a million tiny items is
refused with a 400 instead of being turned into a million Python dicts. The scan is a Python loop over the
structural tokens (strings are skipped whole by the regex), so when it runs in a worker thread it gives
the GIL back every few milliseconds and the event loop keeps serving other requests meanwhile.

Integers wider than 64 bits are refused here too: Python and pydantic accept them, but they cannot be
sent on (orjson encodes at most 64 bits) and no upstream takes them, so they used to end as a 500.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import invalid

# A whole string (escapes included), or a bracket, or an integer literal of 19 digits or more
# (the shortest that can leave the 64-bit range). Unrolled-loop string pattern: linear, no backtracking.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|-?\d{19,}(?![.eE\d])')
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # what orjson can encode: i64 and u64


@dataclass(frozen=True)
class Bounds:
    max_depth: int = 64
    max_containers: int = 200_000


def check_body(raw: bytes, bounds: Bounds) -> None:
    """Raise a 400 `APIError` if the body nests too deep, holds too many objects/arrays, or a too-wide integer."""
    depth = containers = 0
    wide = False
    for match in _TOKEN.finditer(raw):
        first = raw[match.start()]
        if first in b"[{":
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
        elif first != 0x22:  # '"'
            value = int(match.group())
            wide = wide or not INT_MIN <= value <= INT_MAX
    if wide:
        _refuse_wide(raw)


def _refuse_wide(raw: bytes) -> None:
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
