"""Check that a Responses API SSE stream obeys the ordering contract clients rely on.

Shapes of single events are schema.py's job; this module checks what no schema can: the order of events, that
every reference points at something announced and still open ("scaffold before delta"), that ``.done`` payloads
equal their deltas, and that the terminal response agrees with the items streamed before it.

Failures raise AssertionError naming the event (``#<sequence_number> <type>``) so a test log points at the spot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

TERMINAL = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
LIFECYCLE = {"response.queued", "response.created", "response.in_progress"}

#: Streamed text: event prefix -> (field of the .done event, where the final text lives).
#: "content"/"summary": in the part of that list of the item (field named like the .done field);
#: None: directly on the item (item["arguments"], item["input"]).
TEXT_STREAMS: dict[str, tuple[str, str | None]] = {
    "response.output_text": ("text", "content"),
    "response.refusal": ("refusal", "content"),
    "response.reasoning_text": ("text", "content"),  # OpenAI's name
    "response.reasoning": ("text", "content"),  # Open Responses' name for the same events
    "response.reasoning_summary_text": ("text", "summary"),
    "response.function_call_arguments": ("arguments", None),
    "response.custom_tool_call_input": ("input", None),
    "response.mcp_call_arguments": ("arguments", None),
}

#: (added, done) event pairs that open and close a part; the index field says which list of the item it is in.
PARTS = {
    "content_index": ("response.content_part.added", "response.content_part.done", "content"),
    "summary_index": (
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "summary",
    ),
}

PARTS_DONE = {where: done for _, done, where in PARTS.values()}

KNOWN_EVENT_TYPES = frozenset(
    {*TERMINAL, *LIFECYCLE, "error", "response.output_item.added", "response.output_item.done"}
    | {name for added, done, _ in PARTS.values() for name in (added, done)}
    | {f"{prefix}.{kind}" for prefix in TEXT_STREAMS for kind in ("delta", "done")}
    | {"response.output_text.annotation.added"}
    | {
        f"response.{what}.{state}"
        for what in ("mcp_call", "mcp_list_tools")
        for state in ("in_progress", "completed", "failed")
    }
)


@dataclass
class Frame:
    event: str | None
    data: str


def _text(raw: bytes | str) -> str:
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def parse_sse(raw: bytes | str) -> list[Frame]:
    """Split an SSE body into frames the way an EventSource does.

    A frame left unterminated at the end of the body is dropped, as browsers and the openai SDK drop it.
    """
    frames: list[Frame] = []
    event: str | None = None
    # None until the frame has a data line: frames without one are not dispatched.
    data: list[str] | None = None
    for line in _text(raw).split("\n"):
        if not line:
            if data is not None:
                frames.append(Frame(event, "\n".join(data)))
            event, data = None, None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data = (data or []) + [value]
    return frames


@dataclass
class StreamResult:
    events: list[dict]
    terminal: dict

    @property
    def response(self) -> dict:
        return self.terminal["response"]

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def text(self) -> str:
        return "".join(e["delta"] for e in self.events if e["type"] == "response.output_text.delta")


@dataclass
class _Item:
    index: int
    added: dict
    done: dict | None = None
    #: "content"/"summary" -> part index -> None while open, the part of its .done event once closed
    parts: dict[str, dict[int, dict | None]] = field(default_factory=lambda: {"content": {}, "summary": {}})


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


class _Checker:
    """Walks the events once, in order, keeping what has been announced, what is open and the deltas so far."""

    def __init__(self, allow_unknown: bool, opening: list[dict]):
        self.allow_unknown = allow_unknown
        self.opening = opening
        self.items: dict[int, _Item] = {}
        self.deltas: dict[tuple, list[str]] = {}  # (prefix, output_index, "content"|"summary"|None, index)
        self.finished: set[tuple] = set()  # keys whose .done has been seen
        self.terminal: dict | None = None
        self.ev: dict = {}

    def fail(self, message: str) -> None:
        raise AssertionError(f"#{self.ev.get('sequence_number')} {self.ev.get('type')}: {message}")

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.fail(message)

    def event(self, ev: dict, previous: dict | None) -> None:
        self.ev = ev
        type_ = ev["type"]
        self.check(self.allow_unknown or type_ in KNOWN_EVENT_TYPES, "unknown event type")
        if self.terminal is not None:
            self.fail(f"event after the terminal #{self.terminal['sequence_number']} {self.terminal['type']}")
        if previous and previous["type"] == "error":
            self.check(type_ == "response.failed", "follows an error event, expected response.failed")
        if ev["sequence_number"] < len(self.opening):
            return
        self.check(type_ not in LIFECYCLE, "lifecycle event after the stream's opening")
        if type_ in TERMINAL:
            return self.terminal_event()
        if type_ == "response.output_item.added":
            return self.item_added()
        if "output_index" not in ev and "item_id" not in ev:
            return
        item = self.item()
        for index_field, (added, done, where) in PARTS.items():
            if index_field in ev:
                self.part_event(item, where, ev[index_field], added, done)
        prefix, _, kind = type_.rpartition(".")
        if prefix in TEXT_STREAMS and kind in ("delta", "done"):
            self.text_event(item, prefix, kind)
        if type_ == "response.output_item.done":
            self.item_done(item)

    def terminal_event(self) -> None:
        self.terminal = self.ev
        for index, item in self.items.items():
            self.check(item.done is not None, f"output item {index} ({item.added.get('id')}) is still open")
        response = self.ev.get("response") or {}
        ids = {ev["response"].get("id") for ev in self.opening}
        self.check(
            ids == {response.get("id")}, f"response id {response.get('id')!r}, opening events had {ids}"
        )
        status = TERMINAL[self.ev["type"]]
        self.check(
            response.get("status") == status, f"response.status is {response.get('status')!r}, not {status}"
        )
        done_items = [self.items[i].done for i in sorted(self.items)]
        self.check(
            _canon(response.get("output")) == _canon(done_items),
            "response.output differs from the items of the output_item.done events",
        )

    def item_added(self) -> None:
        index, item = self.ev.get("output_index"), self.ev.get("item")
        self.check(index == len(self.items), f"output_index {index} announced, expected {len(self.items)}")
        self.check(isinstance(item, dict) and "type" in item, "item without a type")
        self.items[index] = _Item(index, item)

    def item(self) -> _Item:
        ev = self.ev
        if "output_index" in ev:
            item = self.items.get(ev["output_index"])
            self.check(
                item is not None, f"output_index {ev['output_index']} used before its output_item.added"
            )
        else:
            found = [i for i in self.items.values() if i.added.get("id") == ev["item_id"]]
            self.check(bool(found), f"item_id {ev['item_id']!r} used before its output_item.added")
            item = found[0]
        if "item_id" in ev:
            self.check(
                ev["item_id"] == item.added.get("id"),
                f"item_id {ev['item_id']!r} but output_index {item.index} is {item.added.get('id')!r}",
            )
        self.check(item.done is None, f"refers to output item {item.index} after its output_item.done")
        return item

    def part_event(self, item: _Item, where: str, index: int, added: str, done: str) -> None:
        parts = item.parts[where]
        if self.ev["type"] == added:
            self.check(index == len(parts), f"{where} part {index} announced, expected {len(parts)}")
            parts[index] = None
            return
        self.check(index in parts, f"{where} part {index} used before its {added}")
        self.check(parts[index] is None, f"refers to {where} part {index} after its {done}")
        if self.ev["type"] == done:
            part = self.ev.get("part") or {}
            for key in self.deltas:
                if key[1:] == (item.index, where, index):
                    self.check(key in self.finished, f"{key[0]}.done missing before {done}")
                    self.same_text(key, part, "the part")
            parts[index] = part

    def text_event(self, item: _Item, prefix: str, kind: str) -> None:
        done_field, where = TEXT_STREAMS[prefix]
        index = None
        if where:
            index_field = {"content": "content_index", "summary": "summary_index"}[where]
            self.check(index_field in self.ev, f"no {index_field}")
            index = self.ev[index_field]
        key = (prefix, item.index, where, index)
        self.check(key not in self.finished, f"{prefix} event after its {prefix}.done")
        deltas = self.deltas.setdefault(key, [])
        if kind == "delta":
            deltas.append(self.ev.get("delta"))
        else:
            self.finished.add(key)
            self.same_text(key, self.ev, "the .done event")

    def same_text(self, key: tuple, holder: dict, what: str) -> None:
        """The .done event, its part and its item must all carry exactly the concatenated deltas."""
        done_field = TEXT_STREAMS[key[0]][0]
        expected = "".join(map(str, self.deltas[key]))
        got = holder.get(done_field)
        self.check(
            got == expected,
            f"{done_field} of {what} is {got!r} but its {key[0]}.delta events add up to {expected!r}",
        )

    def item_done(self, item: _Item) -> None:
        done = self.ev.get("item") or {}
        for name in ("id", "type"):
            self.check(
                done.get(name) == item.added.get(name),
                f"item {name} {done.get(name)!r} differs from its .added",
            )
        for where, parts in item.parts.items():
            for index, part in parts.items():
                self.check(part is not None, f"{where} part {index} still open")
                self.check(
                    [_canon(p) for p in (done.get(where) or [])[index : index + 1]] == [_canon(part)],
                    f"item.{where}[{index}] differs from the part in {PARTS_DONE[where]}",
                )
        for key in self.deltas:
            if key[1] == item.index and key[2] is None:
                self.check(key in self.finished, f"{key[0]}.done missing before output_item.done")
                self.same_text(key, done, "the item")
        item.done = done


def _opening(events: list[dict]) -> list[dict]:
    """The events that must open a stream: [response.queued,] response.created, response.in_progress."""
    types = [e["type"] for e in events]
    count = 3 if types[0] == "response.queued" else 2
    expected = ["response.queued"][: count - 2] + ["response.created", "response.in_progress"]
    if types[:count] != expected:
        raise AssertionError(f"stream starts with {types[:count]}, expected {expected}")
    for ev in events[:count]:
        response = ev.get("response") or {}
        if response.get("status") not in ("in_progress", "queued") or response.get("output") != []:
            raise AssertionError(
                f"#{ev['sequence_number']} {ev['type']}: response.status {response.get('status')!r} and output "
                f"{response.get('output')!r}, expected in_progress (or queued) and no output yet"
            )
    return events[:count]


def check_stream(raw: bytes | str, *, require_done: bool = True, allow_unknown: bool = False) -> StreamResult:
    """Assert every rule of a Responses stream; return its events for further checks.

    ``require_done=False`` is for OpenAI's own streams, which end without ``data: [DONE]``.
    """
    if not _text(raw).endswith("\n\n"):
        raise AssertionError("stream does not end with a blank line: SSE clients drop its last frame")
    frames = parse_sse(raw)
    if frames and frames[-1].data == "[DONE]":
        if frames[-1].event is not None:
            raise AssertionError(
                f"[DONE] frame has `event: {frames[-1].event}`, expected a bare `data: [DONE]`"
            )
        frames = frames[:-1]
    elif require_done:
        raise AssertionError("stream does not end with `data: [DONE]`")

    events = []
    for frame in frames:
        where = f"#{len(events)} event: {frame.event}"
        if frame.data == "[DONE]":
            raise AssertionError(f"{where}: `data: [DONE]` before the end of the stream")
        try:
            ev = orjson.loads(frame.data)
        except orjson.JSONDecodeError as exc:
            raise AssertionError(f"{where}: data is not JSON ({exc}): {frame.data[:200]!r}") from None
        if not isinstance(ev, dict) or "type" not in ev:
            raise AssertionError(f"{where}: data is not an object with a type: {frame.data[:200]!r}")
        where = f"#{ev.get('sequence_number')} {ev['type']}"
        if frame.event != ev["type"]:
            raise AssertionError(f"{where}: `event: {frame.event}` line differs from the JSON type")
        if type(ev.get("sequence_number")) is not int or ev["sequence_number"] != len(events):
            raise AssertionError(
                f"{where}: sequence_number {ev.get('sequence_number')!r}, expected {len(events)}"
            )
        events.append(ev)
    if not events:
        raise AssertionError("stream has no events")

    checker = _Checker(allow_unknown, _opening(events))
    for previous, ev in zip([None, *events], events, strict=False):
        checker.event(ev, previous)
    if checker.terminal is None:
        raise AssertionError(
            f"no terminal event: the stream ends with #{len(events) - 1} {events[-1]['type']}"
        )
    return StreamResult(events, checker.terminal)
