"""`container_file_citation`: the answer links a file of the response's container.

Models link a file they made as `[name](sandbox:/mnt/data/name)` (the tool's description asks for that) or
name its path. While the answer streams, a path of a file the container holds becomes an annotation over
its text (`sandbox:` included), sent right after that text. Text is held back only while it could still be
the start of a path (a few characters, or a path not yet ended), and is never changed: the deltas add up to
the final text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

PREFIXES = ("sandbox:/mnt/data/", "/mnt/data/")
PATH = re.compile(r"(?:sandbox:)?/mnt/data/[^\s()\[\]<>\"'`]*")
TRAILING = ".,;:!?*_"


class Citations:
    """`known(path)`: the container file at that /mnt/data path, as (container id, file id), or None."""

    def __init__(self, known: Callable[[str], tuple[str, str] | None]):
        self.known = known
        self.held = ""

    def feed(self, text: str, at: int) -> tuple[str, list[dict[str, Any]]]:
        text = self.held + text
        cut = _hold_from(text)
        self.held = text[cut:]
        return self._annotated(text[:cut], at)

    def flush(self, at: int) -> tuple[str, list[dict[str, Any]]]:
        text, self.held = self.held, ""
        return self._annotated(text, at)

    def _annotated(self, text: str, at: int) -> tuple[str, list[dict[str, Any]]]:
        notes: list[dict[str, Any]] = []
        for match in PATH.finditer(text):
            found = match.group(0)
            while True:
                path = found.removeprefix("sandbox:")
                hit = self.known(path)
                if hit is not None or not found or found[-1] not in TRAILING:
                    break
                found = found[:-1]
            if hit is None:
                continue
            start = at + match.start()
            notes.append({"type": "container_file_citation", "container_id": hit[0], "file_id": hit[1],
                          "filename": path.rsplit("/", 1)[-1], "start_index": start, "end_index": start + len(found)})
        return text, notes


def _hold_from(text: str) -> int:
    """Where the text may still be growing into a path: from there on it is held back."""
    start = max(text.rfind("sandbox:/mnt/data/"), text.rfind("/mnt/data/"))
    if start >= 0:
        if text.startswith("sandbox:", start - 8) and start >= 8:
            start -= 8
        match = PATH.match(text, start)
        if match is not None and match.end() == len(text):
            return start  # a path still being written: hold it until something ends it
    for prefix in PREFIXES:
        for size in range(min(len(prefix) - 1, len(text)), 0, -1):
            if text.endswith(prefix[:size]):
                return len(text) - size
    return len(text)
