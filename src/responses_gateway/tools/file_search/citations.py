"""Citations of file_search results: how results are shown to the model, and the annotator that turns the
markers it writes into `file_citation` annotations.

The model sees each result under a marker `【n】` (numbers go on across the calls of a conversation, so a
marker is never ambiguous) and is asked to write the marker after what it draws from that passage. The
annotator removes every marker from the streamed text — also a marker that cites nothing it knows — and
reports a `file_citation` ({file_id, filename, index}) at the place the marker stood, in the text as sent.
A marker being written is held back until it closes (at most MAX_MARKER characters), so no delta ever
carries part of one and the deltas always add up to the final text. `【n†anything】` (OpenAI's own style)
and `[n]`-free text are left alone except for markers of exactly this shape.
"""

from __future__ import annotations

import re
from typing import Any

OPEN, CLOSE = "【", "】"
MAX_MARKER = 48
MARKER = re.compile(r"【(\d{1,6})(?:†[^【】]{0,40})?】")


def render(results: list[dict[str, Any]], first: int) -> str:
    """A call's results as the model reads them: numbered from `first`, with how to cite them."""
    if not results:
        return "No results were found in the files."
    lines = [f"Results from the files ({len(results)}). Cite a result by writing its marker, e.g. 【{first}】, "
             "right after the sentence it supports."]
    for n, result in enumerate(results, start=first):
        lines.append(f"\n【{n}】 {result.get('filename')} (score {float(result.get('score') or 0):.3f})\n"
                     f"{result.get('text') or ''}")
    return "\n".join(lines)


class Citations:
    """The Annotator (tools/frame.py) of one response: `sources` maps a marker's number to its result."""

    def __init__(self, sources: dict[int, dict[str, Any]]):
        self.sources = sources
        self.held = ""

    def feed(self, text: str, at: int) -> tuple[str, list[dict[str, Any]]]:
        text = self.held + text
        self.held = ""
        if OPEN not in text:
            return text, []
        out: list[str] = []
        notes: list[dict[str, Any]] = []
        sent = at
        pos = 0
        while True:
            start = text.find(OPEN, pos)
            if start < 0:
                out.append(text[pos:])
                sent += len(text) - pos
                break
            out.append(text[pos:start])
            sent += start - pos
            match = MARKER.match(text, start)
            if match is not None:
                source = self.sources.get(int(match.group(1)))
                if source is not None:
                    notes.append({"type": "file_citation", "file_id": source["file_id"],
                                  "filename": source["filename"], "index": sent})
                pos = match.end()
                continue
            tail = text[start:]
            if CLOSE not in tail and len(tail) < MAX_MARKER and _could_be_marker(tail):
                self.held = tail  # a marker being written: wait for the rest
                break
            out.append(OPEN)  # not a marker: the bracket is ordinary text
            sent += 1
            pos = start + 1
        return "".join(out), notes

    def flush(self, at: int) -> tuple[str, list[dict[str, Any]]]:
        held, self.held = self.held, ""
        return held, []


def _could_be_marker(tail: str) -> bool:
    """Whether an unclosed `【...` may still become a marker."""
    body = tail[1:]
    digits = len(body) - len(body.lstrip("0123456789"))
    rest = body[digits:]
    if not rest:
        return digits <= 6
    return digits > 0 and rest.startswith("†") and OPEN not in rest
