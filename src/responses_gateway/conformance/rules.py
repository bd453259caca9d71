"""The ordering contract of a Responses API SSE stream, checked rule by rule.

Shapes of single events are the schema's job (schema.py); this module checks what no schema can: the framing,
the order of events, that every reference points at something announced and still open ("scaffold before
delta"), that ``.done`` payloads equal their deltas, and that the terminal response agrees with the items
streamed before it.

``inspect_stream`` walks the whole stream and returns every violation, each tagged with a rule id from
``RULES`` and the offending event, for reports (``responses-gateway check``). ``check_stream`` raises
AssertionError at the first one, for tests. Messages name the event as ``#<sequence_number> <type>``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, NoReturn

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
    "response.code_interpreter_call_code": ("code", None),
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

#: The id prefix of each output item type, as OpenAI's endpoint sends them.
ID_PREFIXES = {
    "message": "msg_",
    "reasoning": "rs_",
    "function_call": "fc_",
    "custom_tool_call": "ctc_",
    "mcp_call": "mcp_",
    "mcp_list_tools": "mcpl_",
    "mcp_approval_request": "mcpr_",
    "web_search_call": "ws_",
    "code_interpreter_call": "ci_",
    "file_search_call": "fs_",
    "image_generation_call": "ig_",
    "computer_call": "cu_",
}

#: The image_generation_call's own events, in the order OpenAI sends them (partial_image: any number, 0-3).
IMAGE_EVENTS = ("in_progress", "generating", "partial_image", "completed")
IMAGE_PREFIX = "response.image_generation_call."
#: what each of them may follow (None: it is the item's first)
IMAGE_AFTER: dict[str, tuple[str | None, ...]] = {
    "in_progress": (None,), "generating": ("in_progress",), "partial_image": ("generating", "partial_image"),
    "completed": ("generating", "partial_image"),
}

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
    | {f"response.web_search_call.{state}" for state in ("in_progress", "searching", "completed")}
    | {f"response.code_interpreter_call.{state}" for state in ("in_progress", "interpreting", "completed")}
    | {f"response.file_search_call.{state}" for state in ("in_progress", "searching", "completed")}
    | {IMAGE_PREFIX + state for state in IMAGE_EVENTS}
)

#: Every rule: id -> what it demands. The ids are stable: reports, --only filters and docs/check.md use them.
RULES: dict[str, str] = {
    "sse.blank-line-end": "the body ends with a blank line (SSE clients drop an unterminated last frame)",
    "sse.done-marker": "`data: [DONE]`, when sent, is bare and last (the tests also demand it of the gateway)",
    "sse.json": "every data line is a JSON object with a `type`",
    "sse.event-line": "every frame has an `event:` line naming its JSON `type` (OpenAI sends one)",
    "sse.sequence": "sequence_number counts 0, 1, 2... without gaps",
    "event.known-type": "only event types of the Responses API (clients may drop others silently)",
    "stream.opening": "the stream opens with [queued,] created, in_progress carrying no output yet",
    "stream.lifecycle": "no created/in_progress/queued event after the opening",
    "stream.terminal": "exactly one terminal event (completed/incomplete/failed), and nothing after it",
    "stream.error-then-failed": "an `error` event is followed by response.failed",
    "item.index": "output items are announced with output_index 0, 1, 2... in order",
    "item.added-first": "an event refers to an output item only after its output_item.added, and before its .done",
    "item.id-prefix": "output item ids carry their type's prefix, as OpenAI's do (rs_ reasoning, msg_ message, "
    "fc_ function_call...): clients tell items apart by it",
    "item.id": "item_id matches the id of the item at output_index; output_item.done keeps the .added id and type",
    "part.index": "content/summary parts are announced with index 0, 1, 2... within their item",
    "part.added-first": "an event refers to a part only after its .part.added, and before its .part.done",
    "part.closed": "every part is closed before its item, and the item carries the closed part",
    "text.done": "every streamed text has its .done before its part or item closes, and nothing after it",
    "text.matches-deltas": "the .done text, the closed part and the finished item equal the concatenated deltas",
    "image.order": "an image_generation_call's events go in_progress, generating, partial_image (any number), "
    "completed, each of the others once, all before its output_item.done",
    "image.partial-index": "partial_image_index counts 0, 1, 2... within its item",
    "image.result": "an image_generation_call that sent .completed is done `completed` with its `result`; one done "
    "`failed` sent no .completed",
    "computer.whole": "a computer_call is announced whole, its action (or actions) in output_item.added, and no "
    "event refers to it before its output_item.done, which carries the same action (OpenAI streams no argument "
    "events for it)",
    "terminal.items-closed": "every output item is done before the terminal event",
    "terminal.response-id": "the terminal response has the id of the opening events",
    "terminal.status": "the terminal response's status matches the terminal event",
    "terminal.output": "the terminal response's output equals the output_item.done items, in order",
}


@dataclass
class Frame:
    event: str | None
    data: str


@dataclass
class Violation:
    rule: str
    message: str
    #: position of the offending event in the stream (None: the stream as a whole)
    position: int | None = None
    event: dict[str, Any] | None = None

    def __str__(self) -> str:
        if self.event is None:
            return self.message
        return f"#{self.event.get('sequence_number')} {self.event.get('type')}: {self.message}"


@dataclass
class StreamResult:
    events: list[dict[str, Any]]
    terminal: dict[str, Any] | None
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def response(self) -> dict[str, Any]:
        assert self.terminal is not None, "the stream has no terminal event"
        response: dict[str, Any] = self.terminal["response"]
        return response

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def text(self) -> str:
        return "".join(e["delta"] for e in self.events if e["type"] == "response.output_text.delta")


def _text(raw: bytes | str) -> str:
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
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
class _Item:
    index: int
    added: dict[str, Any]
    done: dict[str, Any] | None = None
    #: "content"/"summary" -> part index -> None while open, the part of its .done event once closed
    parts: dict[str, dict[int, dict[str, Any] | None]] = field(default_factory=lambda: {"content": {}, "summary": {}})
    #: an image_generation_call's own events so far (IMAGE_EVENTS names, in order)
    image: list[str] = field(default_factory=list)


def _canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


class _Stop(Exception):
    """The current event cannot be checked further (what it refers to is missing)."""


class _Checker:
    """Walks the events once, in order, keeping what has been announced, what is open and the deltas so far.

    ``fail`` records a violation and abandons the current event; ``note`` records one and goes on, for
    deviations after which the state can still be kept (so one wrong index is reported once, not at every
    following delta).
    """

    def __init__(self, allow_unknown: bool, opening: list[dict[str, Any]], violations: list[Violation]):
        self.allow_unknown = allow_unknown
        self.opening = opening
        self.violations = violations
        self.items: dict[int, _Item] = {}
        self.deltas: dict[tuple[Any, ...], list[Any]] = {}  # (prefix, output_index, "content"|"summary"|None, index)
        self.finished: set[tuple[Any, ...]] = set()  # keys whose .done has been seen
        self.terminal: dict[str, Any] | None = None
        self.ev: dict[str, Any] = {}
        self.position = 0

    def note(self, ok: bool, rule: str, message: str) -> bool:
        if not ok:
            self.violations.append(Violation(rule, message, self.position, self.ev))
        return ok

    def fail(self, rule: str, message: str) -> NoReturn:
        self.note(False, rule, message)
        raise _Stop

    def check(self, ok: bool, rule: str, message: str) -> None:
        if not ok:
            self.fail(rule, message)

    def event(self, position: int, ev: dict[str, Any], previous: dict[str, Any] | None) -> None:
        self.ev, self.position = ev, position
        with contextlib.suppress(_Stop):
            self._event(ev, previous)

    def _event(self, ev: dict[str, Any], previous: dict[str, Any] | None) -> None:
        type_ = ev["type"]
        self.note(self.allow_unknown or type_ in KNOWN_EVENT_TYPES, "event.known-type", "unknown event type")
        if self.terminal is not None:
            self.fail(
                "stream.terminal",
                f"event after the terminal #{self.terminal.get('sequence_number')} {self.terminal['type']}",
            )
        if previous and previous["type"] == "error":
            self.note(
                type_ == "response.failed", "stream.error-then-failed", "follows an error event, expected response.failed"
            )
        if self.position < len(self.opening):
            return
        self.check(type_ not in LIFECYCLE, "stream.lifecycle", "lifecycle event after the stream's opening")
        if type_ in TERMINAL:
            return self.terminal_event()
        if type_ == "response.output_item.added":
            return self.item_added()
        if "output_index" not in ev and "item_id" not in ev:
            return
        item = self.item()
        if item.added.get("type") == "computer_call" and type_ != "response.output_item.done":
            self.note(False, "computer.whole", "an event about a computer_call before its output_item.done")
        for index_field, (added, done, where) in PARTS.items():
            if index_field in ev:
                self.part_event(item, where, ev[index_field], added, done)
        prefix, _, kind = type_.rpartition(".")
        if prefix in TEXT_STREAMS and kind in ("delta", "done"):
            self.text_event(item, prefix, kind)
        if type_.startswith(IMAGE_PREFIX):
            self.image_event(item, type_.removeprefix(IMAGE_PREFIX))
        if type_ == "response.output_item.done":
            self.item_done(item)

    def terminal_event(self) -> None:
        self.terminal = self.ev
        for index, item in self.items.items():
            self.note(
                item.done is not None,
                "terminal.items-closed",
                f"output item {index} ({item.added.get('id')}) is still open",
            )
        response = self.ev.get("response") or {}
        ids = {(ev.get("response") or {}).get("id") for ev in self.opening}
        self.note(
            ids == {response.get("id")},
            "terminal.response-id",
            f"response id {response.get('id')!r}, opening events had {ids}",
        )
        status = TERMINAL[self.ev["type"]]
        if status == "incomplete" and response.get("status") == "cancelled":
            status = "cancelled"  # a cancelled background response ends with response.incomplete
        self.note(
            response.get("status") == status,
            "terminal.status",
            f"response.status is {response.get('status')!r}, not {status}",
        )
        done_items = [self.items[i].done for i in sorted(self.items)]
        output = response.get("output")
        if _canon(output) != _canon(done_items):
            self.fail("terminal.output", "response.output differs from the items of the output_item.done events"
                      + _first_difference(output, done_items))

    def item_added(self) -> None:
        index, item = self.ev.get("output_index"), self.ev.get("item")
        if not (isinstance(item, dict) and "type" in item):
            self.fail("item.index", "item without a type")
        self.note(index == len(self.items), "item.index", f"output_index {index} announced, expected {len(self.items)}")
        if not isinstance(index, int) or index in self.items:
            self.fail("item.index", f"output_index {index!r} announced twice")
        self.items[index] = _Item(index, item)
        if item["type"] == "computer_call":
            self.note(item.get("action") is not None or item.get("actions") is not None, "computer.whole",
                      "a computer_call announced without its action")
        prefix = ID_PREFIXES.get(item["type"])
        item_id = item.get("id")
        if prefix and isinstance(item_id, str):
            self.note(item_id.startswith(prefix), "item.id-prefix",
                      f"{item['type']} item with id {item_id!r}, expected the prefix {prefix}")

    def item(self) -> _Item:
        ev = self.ev
        if "output_index" in ev:
            item = self.items.get(ev["output_index"])
            if item is None:
                self.fail(
                    "item.added-first", f"output_index {ev['output_index']} used before its output_item.added"
                )
        else:
            found = [i for i in self.items.values() if i.added.get("id") == ev["item_id"]]
            if not found:
                self.fail("item.added-first", f"item_id {ev['item_id']!r} used before its output_item.added")
            item = found[0]
        assert item is not None
        if "item_id" in ev:
            self.note(
                ev["item_id"] == item.added.get("id"),
                "item.id",
                f"item_id {ev['item_id']!r} but output_index {item.index} is {item.added.get('id')!r}",
            )
        self.check(
            item.done is None, "item.added-first", f"refers to output item {item.index} after its output_item.done"
        )
        return item

    def part_event(self, item: _Item, where: str, index: int, added: str, done: str) -> None:
        parts = item.parts[where]
        if self.ev["type"] == added:
            self.note(index == len(parts), "part.index", f"{where} part {index} announced, expected {len(parts)}")
            parts[index] = None
            return
        self.check(index in parts, "part.added-first", f"{where} part {index} used before its {added}")
        self.check(
            parts[index] is None, "part.added-first", f"refers to {where} part {index} after its {done}"
        )
        if self.ev["type"] == done:
            part = self.ev.get("part") or {}
            parts[index] = part
            for key in self.deltas:
                if key[1:] == (item.index, where, index):
                    self.note(key in self.finished, "text.done", f"{key[0]}.done missing before {done}")
                    self.same_text(key, part, "the part")

    def text_event(self, item: _Item, prefix: str, kind: str) -> None:
        where = TEXT_STREAMS[prefix][1]
        index = None
        if where:
            index_field = {"content": "content_index", "summary": "summary_index"}[where]
            self.check(index_field in self.ev, "part.added-first", f"no {index_field}")
            index = self.ev[index_field]
        key = (prefix, item.index, where, index)
        self.check(key not in self.finished, "text.done", f"{prefix} event after its {prefix}.done")
        deltas = self.deltas.setdefault(key, [])
        if kind == "delta":
            deltas.append(self.ev.get("delta"))
        else:
            self.finished.add(key)
            self.same_text(key, self.ev, "the .done event")

    def same_text(self, key: tuple[Any, ...], holder: dict[str, Any], what: str) -> None:
        """The .done event, its part and its item must all carry exactly the concatenated deltas."""
        done_field = TEXT_STREAMS[key[0]][0]
        expected = "".join(map(str, self.deltas[key]))
        got = holder.get(done_field)
        self.note(
            got == expected,
            "text.matches-deltas",
            f"{done_field} of {what} is {got!r} but its {key[0]}.delta events add up to {expected!r}",
        )

    def image_event(self, item: _Item, state: str) -> None:
        """The image_generation_call's own events: OpenAI's order, partial images numbered from 0."""
        seen = item.image
        if state in IMAGE_EVENTS:
            previous = seen[-1] if seen else None
            self.note(previous in IMAGE_AFTER[state], "image.order", f"{state} after {previous or 'nothing'}")
        if state == "partial_image":
            expected = seen.count("partial_image")
            self.note(self.ev.get("partial_image_index") == expected, "image.partial-index",
                      f"partial_image_index {self.ev.get('partial_image_index')!r}, expected {expected}")
        seen.append(state)

    def item_done(self, item: _Item) -> None:
        done = self.ev.get("item") or {}
        item.done = done
        if done.get("type") == "computer_call":
            for name in ("action", "actions"):
                self.note(_canon(done.get(name)) == _canon(item.added.get(name)), "computer.whole",
                          f"the done computer_call's {name} differs from its .added")
        if done.get("type") == "image_generation_call":
            completed = "completed" in item.image
            if done.get("status") == "completed":
                self.note(completed and bool(done.get("result")), "image.result",
                          "done `completed` without its .completed event or its result")
            elif done.get("status") == "failed":
                self.note(not completed, "image.result", "done `failed` after a .completed event")
        for name in ("id", "type"):
            self.note(
                done.get(name) == item.added.get(name),
                "item.id",
                f"item {name} {done.get(name)!r} differs from its .added ({item.added.get(name)!r})",
            )
        for where, parts in item.parts.items():
            for index, part in parts.items():
                if not self.note(part is not None, "part.closed", f"{where} part {index} still open"):
                    continue
                self.note(
                    [_canon(p) for p in (done.get(where) or [])[index : index + 1]] == [_canon(part)],
                    "part.closed",
                    f"item.{where}[{index}] differs from the part in {PARTS_DONE[where]}",
                )
        for key in self.deltas:
            if key[1] == item.index and key[2] is None:
                self.note(key in self.finished, "text.done", f"{key[0]}.done missing before output_item.done")
                self.same_text(key, done, "the item")


def _first_difference(output: Any, done_items: list[Any]) -> str:
    """Where the terminal output first departs from the streamed items, to make the message actionable."""
    if not isinstance(output, list):
        return f": output is {type(output).__name__}"
    if len(output) != len(done_items):
        return f": {len(output)} items, {len(done_items)} streamed"
    for i, (got, streamed) in enumerate(zip(output, done_items, strict=True)):
        if _canon(got) == _canon(streamed):
            continue
        if not isinstance(got, dict) or not isinstance(streamed, dict):
            return f": output[{i}] differs"
        keys = sorted(k for k in {*got, *streamed} if _canon(got.get(k)) != _canon(streamed.get(k)))
        shown = ", ".join(f"{k} {got.get(k)!r:.60} vs streamed {streamed.get(k)!r:.60}" for k in keys[:3])
        return f": output[{i}] {shown}"
    return ""


def _opening(events: list[dict[str, Any]], violations: list[Violation]) -> list[dict[str, Any]]:
    """The events that open the stream: [response.queued,] response.created, response.in_progress."""
    types = [e["type"] for e in events]
    count = 3 if types[0] == "response.queued" else 2
    expected = ["response.queued"][: count - 2] + ["response.created", "response.in_progress"]
    if types[:count] != expected:
        violations.append(Violation("stream.opening", f"stream starts with {types[:count]}, expected {expected}",
                                    0, None))
        count = next((i for i, t in enumerate(types) if t not in LIFECYCLE), len(types))
    for position, ev in enumerate(events[:count]):
        response = ev.get("response") or {}
        if response.get("status") not in ("in_progress", "queued") or response.get("output") != []:
            violations.append(Violation(
                "stream.opening",
                f"response.status {response.get('status')!r} and output {response.get('output')!r}, "
                "expected in_progress (or queued) and no output yet",
                position, ev,
            ))
    return events[:count]


def _decode(raw: bytes | str, require_done: bool, violations: list[Violation]) -> list[dict[str, Any]]:
    """The JSON events of the body, with the framing rules checked."""
    if not _text(raw).endswith("\n\n"):
        violations.append(Violation(
            "sse.blank-line-end", "stream does not end with a blank line: SSE clients drop its last frame"
        ))
    frames = parse_sse(raw)
    if frames and frames[-1].data == "[DONE]":
        if frames[-1].event is not None:
            violations.append(Violation(
                "sse.done-marker", f"[DONE] frame has `event: {frames[-1].event}`, expected a bare `data: [DONE]`"
            ))
        frames = frames[:-1]
    elif require_done:
        violations.append(Violation("sse.done-marker", "stream does not end with `data: [DONE]`"))

    events: list[dict[str, Any]] = []
    expected_seq = 0
    for frame in frames:
        where = f"#{len(events)} event: {frame.event}"
        if frame.data == "[DONE]":
            violations.append(Violation("sse.done-marker", f"{where}: `data: [DONE]` before the end of the stream"))
            continue
        try:
            ev = orjson.loads(frame.data)
        except orjson.JSONDecodeError as exc:
            violations.append(Violation("sse.json", f"{where}: data is not JSON ({exc}): {frame.data[:200]!r}"))
            continue
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
            violations.append(Violation("sse.json", f"{where}: data is not an object with a type: {frame.data[:200]!r}"))
            continue
        position = len(events)
        if frame.event != ev["type"]:
            message = "no `event:` line" if frame.event is None else f"`event: {frame.event}` line differs"
            violations.append(Violation("sse.event-line", f"{message} from the JSON type", position, ev))
        seq = ev.get("sequence_number")
        if type(seq) is not int or seq != expected_seq:
            violations.append(Violation("sse.sequence", f"sequence_number {seq!r}, expected {expected_seq}",
                                        position, ev))
        expected_seq = seq + 1 if type(seq) is int else expected_seq + 1
        events.append(ev)
    return events


def inspect_stream(raw: bytes | str, *, require_done: bool = True, allow_unknown: bool = False) -> StreamResult:
    """Every violation of the stream's rules, in stream order (framing first).

    ``require_done=False`` is for OpenAI's own streams, which end without ``data: [DONE]``.
    """
    violations: list[Violation] = []
    return inspect_events(_decode(raw, require_done, violations), allow_unknown=allow_unknown,
                          violations=violations)


def inspect_events(events: list[dict[str, Any]], *, allow_unknown: bool = False,
                   violations: list[Violation] | None = None) -> StreamResult:
    """The ordering rules alone, for events that came without SSE framing (a WebSocket's messages)."""
    violations = [] if violations is None else violations
    if not events:
        violations.append(Violation("stream.opening", "stream has no events"))
        return StreamResult(events, None, violations)
    checker = _Checker(allow_unknown, _opening(events, violations), violations)
    for position, (previous, ev) in enumerate(zip([None, *events], events, strict=False)):
        checker.event(position, ev, previous)
    if checker.terminal is None:
        violations.append(Violation(
            "stream.terminal", f"no terminal event: the stream ends with #{len(events) - 1} {events[-1]['type']}"
        ))
    return StreamResult(events, checker.terminal, violations)


def check_stream(raw: bytes | str, *, require_done: bool = True, allow_unknown: bool = False) -> StreamResult:
    """Assert every rule of a Responses stream (AssertionError at the first violation); return its events."""
    result = inspect_stream(raw, require_done=require_done, allow_unknown=allow_unknown)
    if result.violations:
        raise AssertionError(str(result.violations[0]))
    return result
