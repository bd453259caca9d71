"""A tolerant reader for OpenAI Responses API event streams: typed events and the accumulated final Response.

    from responses_gateway.client import read_stream

    reader = read_stream(resp.iter_bytes())          # bytes, str, or any (async) iterable of chunks
    for event in reader:                             # `async for` works too
        if event.type == "response.output_text.delta":
            print(event.delta, end="")
    reader.response                                  # the final Response object (a dict)

It follows the consuming rules for Responses streams, and repairs what real servers get wrong:

- SSE bytes split anywhere, CRLF line ends, comments, `event:` lines or not, `data: [DONE]` or not;
- events out of order: replayed in `sequence_number` order (a number that never comes is waited for at most
  `window` events), and correlated by `output_index` / `item_id` — a delta before its `output_item.added`
  creates the item;
- duplicate events (an already seen `sequence_number` with the same type) are dropped;
- unknown event types are passed on with `known=False` and change nothing;
- `.done` events an upstream forgot are synthesized (`synthesized=True`): parts and items are closed when the
  item ends, at the terminal event at the latest;
- text that a `.done` event, an `output_item.done` or the terminal `response.output` has but the deltas lacked
  is delivered as one synthesized delta, so the deltas always add up to the final text when they can;
- argument deltas are kept as strings (partial JSON is never parsed);
- a stream without a terminal event ends with a synthesized `response.failed` whose error says it ended early.

The events yielded form a well-formed stream (scaffold before delta, every `.added` closed by one `.done`,
exactly one terminal event), which is what the gateway's Responses upstream adapter builds on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from .sse import SSEDecoder

__all__ = ["Accumulator", "Event", "ResponseStream", "read_stream"]

log = logging.getLogger("responses_gateway.client")

TERMINAL = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}
LIFECYCLE = ("response.created", "response.in_progress", "response.queued")

# Text streams: event prefix -> (item type, list of the item the part is in, part type, text field of .done).
TEXT = {
    "response.output_text": ("message", "content", "output_text", "text"),
    "response.refusal": ("message", "content", "refusal", "refusal"),
    "response.reasoning_text": ("reasoning", "content", "reasoning_text", "text"),
    "response.reasoning": ("reasoning", "content", "reasoning_text", "text"),  # Open Responses' name
    "response.reasoning_summary_text": ("reasoning", "summary", "summary_text", "text"),
}
# The prefix used when a text event of a part type has to be synthesized.
TEXT_PREFIX = {"output_text": "response.output_text", "refusal": "response.refusal",
               "reasoning_text": "response.reasoning_text", "summary_text": "response.reasoning_summary_text"}
# Streamed tool input: event prefix -> (item type, field of the item and of the .done event).
ARGS = {
    "response.function_call_arguments": ("function_call", "arguments"),
    "response.custom_tool_call_input": ("custom_tool_call", "input"),
}
ARG_FIELD = {kind: name for kind, name in ARGS.values()}
ARGS_PREFIX = {kind: prefix for prefix, (kind, _) in ARGS.items()}
# Part events: type -> (list of the item, added|done). vLLM has used `reasoning_part` for reasoning_text parts.
PART_EVENTS = {
    "response.content_part.added": ("content", "added"),
    "response.content_part.done": ("content", "done"),
    "response.reasoning_part.added": ("content", "added"),
    "response.reasoning_part.done": ("content", "done"),
    "response.reasoning_summary_part.added": ("summary", "added"),
    "response.reasoning_summary_part.done": ("summary", "done"),
}
INDEX_FIELD = {"content": "content_index", "summary": "summary_index"}
PART_ADDED = {"content": "response.content_part.added", "summary": "response.reasoning_summary_part.added"}
PART_DONE = {"content": "response.content_part.done", "summary": "response.reasoning_summary_part.done"}
STATUS_TYPES = ("message", "function_call", "custom_tool_call")

ENDED_EARLY = "stream_ended"
SEEN_LIMIT = 8192  # sequence numbers remembered for spotting duplicates


@dataclass(frozen=True, slots=True)
class Event:
    """One event of the stream. `data` is the event's JSON object; its fields read as attributes too.

    `known` is False for event types the reader does not understand (they change nothing);
    `synthesized` is True for events the reader made up because the stream lacked them.
    """

    type: str
    data: dict = field(default_factory=dict)
    synthesized: bool = False
    known: bool = True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "data":
            raise AttributeError(name)
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


class _Part:
    __slots__ = ("kind", "payload", "chunks", "final", "logprobs", "annotations", "opened", "text_done", "done")

    def __init__(self, kind: str | None):
        self.kind = kind
        self.payload: dict = {}
        self.chunks: list[str] = []
        self.final: str | None = None  # the text a .done event, item or terminal gave
        self.logprobs: list = []
        self.annotations: list = []
        self.opened = False
        self.text_done = False
        self.done = False

    @property
    def streamed(self) -> str:
        return "".join(self.chunks)

    @property
    def text(self) -> str:
        streamed = self.streamed
        if self.final and (self.final != streamed):
            return self.final  # a non-empty final text wins
        return streamed

    def value(self) -> dict:
        kind = self.kind or self.payload.get("type") or "output_text"
        out = dict(self.payload)
        out["type"] = kind
        if kind == "refusal":
            out["refusal"] = self.text
        else:
            out["text"] = self.text
        if kind == "output_text":
            if self.annotations and not out.get("annotations"):
                out["annotations"] = list(self.annotations)
            out.setdefault("annotations", [])
            if self.logprobs and not out.get("logprobs"):
                out["logprobs"] = list(self.logprobs)
            out.setdefault("logprobs", [])
        return out


class _Item:
    __slots__ = ("index", "id", "payload", "content", "summary", "args", "args_final", "opened", "args_done",
                 "done")

    def __init__(self, index: int, kind: str | None):
        self.index = index
        self.id: str | None = None
        self.payload: dict = {"type": kind} if kind else {}
        self.content: dict[int, _Part] = {}
        self.summary: dict[int, _Part] = {}
        self.args: list[str] = []
        self.args_final: str | None = None
        self.opened = False
        self.args_done = False
        self.done = False

    @property
    def type(self) -> str | None:
        return self.payload.get("type")

    def parts(self, where: str) -> dict[int, _Part]:
        return self.content if where == "content" else self.summary

    @property
    def args_text(self) -> str:
        streamed = "".join(self.args)
        if self.args_final and self.args_final != streamed:
            return self.args_final
        if not streamed:
            value = self.payload.get(ARG_FIELD.get(self.type or "", ""))
            if isinstance(value, str):
                return value
        return streamed

    def value(self, status: str) -> dict:
        """The item as it stands; `status` for an item that is still open."""
        out = dict(self.payload)
        kind = out.get("type")
        if self.content:
            out["content"] = [self.content[i].value() for i in sorted(self.content)]
        elif kind == "message":
            out.setdefault("content", [])
        if self.summary:
            out["summary"] = [self.summary[i].value() for i in sorted(self.summary)]
        elif kind == "reasoning":
            out.setdefault("summary", [])
        if kind in ARG_FIELD:
            out[ARG_FIELD[kind]] = self.args_text
        if kind == "message":
            out.setdefault("role", "assistant")
        if not self.done and (kind in STATUS_TYPES or "status" in out):
            out["status"] = status
        return out


class _Reorder:
    """Releases events in `sequence_number` order, drops duplicates, waits at most `window` events for a gap."""

    def __init__(self, window: int):
        self.window = window
        self.next: int | None = None
        self.held: dict[int, dict] = {}
        self.seen: dict[int, Any] = {}
        self.trusted = True
        self.duplicates = 0

    def push(self, ev: dict) -> list[dict]:
        seq = ev.get("sequence_number")
        if not self.trusted or type(seq) is not int:
            return [*self.drain(), ev] if self.held and not self.trusted else [ev]
        known = self.seen.get(seq)
        if known is not None:
            if known == ev.get("type"):
                self.duplicates += 1
                return []
            # Two different events with one number: the numbering means nothing; arrival order from here on.
            log.info("sequence_number %s used twice; reading in arrival order", seq)
            self.trusted = False
            return [*self.drain(), ev]
        self.seen[seq] = ev.get("type")
        if len(self.seen) > SEEN_LIMIT and self.next is not None:
            # Numbers far behind the stream are forgotten: a duplicate that late is not worth the memory.
            floor = self.next - SEEN_LIMIT // 2
            self.seen = {k: v for k, v in self.seen.items() if k >= floor}
        if self.next is None:
            self.next = seq
        if seq < self.next:
            return [ev]  # late, after its gap was given up on: applied where it lands
        self.held[seq] = ev
        if ev.get("type") in TERMINAL:
            return self.drain()
        out: list[dict] = []
        while True:
            while self.next in self.held:
                out.append(self.held.pop(self.next))
                self.next += 1
            if len(self.held) <= self.window:
                return out
            self.next = min(self.held)  # stop waiting for a number that never came

    def drain(self) -> list[dict]:
        if not self.held:
            return []
        out = [self.held[k] for k in sorted(self.held)]
        self.next = max(self.held) + 1
        self.held.clear()
        return out


class Accumulator:
    """The incremental core: feed it bytes (or event objects), get normalized events; read `response` any time.

        acc = Accumulator()
        for chunk in chunks:
            for event in acc.feed(chunk): ...
        for event in acc.close(): ...     # end of input: flush, close what is open, end the stream
        acc.response
    """

    def __init__(self, *, window: int = 256):
        self._decoder = SSEDecoder()
        self._reorder = _Reorder(window)
        self._items: dict[int, _Item] = {}
        self._ids: dict[str, _Item] = {}
        self._snapshot: dict | None = None
        self._terminal: Event | None = None
        self.error: dict | None = None  # the `error` event's error, if one came
        self.unknown: list[Event] = []  # events not understood (unknown types, data that is not JSON)
        self.ignored = 0  # events that came too late to matter (after their .done, or after the terminal)
        self.saw_done_marker = False
        self.closed = False

    # -- input -------------------------------------------------------------------------------------------

    def feed(self, chunk: bytes | str) -> list[Event]:
        """SSE bytes, in any chunking."""
        if isinstance(chunk, str):
            chunk = chunk.encode()
        out: list[Event] = []
        for name, data in self._decoder.feed(bytes(chunk)):
            self._frame(name, data, out)
        return out

    def feed_event(self, event: dict) -> list[Event]:
        """One already-decoded event object (e.g. from a WebSocket, or a whole Response as a terminal event)."""
        out: list[Event] = []
        self._push(event, out)
        return out

    def close(self, reason: str | None = None) -> list[Event]:
        """The input ended. Without a terminal event so far the stream ends with a synthesized response.failed."""
        out: list[Event] = []
        for name, data in self._decoder.flush():
            self._frame(name, data, out)
        for ev in self._reorder.drain():
            self._apply(ev, out)
        if self._terminal is None and not self.closed:
            for item in self._open_items():
                self._close_item(item, "incomplete", out)
            error = self.error or {}
            code = error.get("code") if isinstance(error.get("code"), str) else None
            message = error.get("message") if isinstance(error.get("message"), str) else None
            if not message:
                message = "The stream ended before its terminal event (response.completed, response.incomplete " \
                          "or response.failed)" + (f": {reason}" if reason else ".")
            response = self._base()
            response["status"] = "failed"
            response["error"] = {"code": code or ENDED_EARLY, "message": message}
            response["output"] = [self._items[i].value("incomplete") for i in sorted(self._items)]
            ev = Event("response.failed", {"type": "response.failed", "response": response}, synthesized=True)
            self._terminal = ev
            out.append(ev)
        self.closed = True
        return out

    # -- state -------------------------------------------------------------------------------------------

    @property
    def terminal(self) -> Event | None:
        return self._terminal

    @property
    def ended_early(self) -> bool:
        return self._terminal is not None and self._terminal.synthesized

    @property
    def response(self) -> dict:
        """The Response so far; once the stream ended, the final one (the terminal's `output` wins if non-empty)."""
        if self._terminal is not None:
            response = dict(self._terminal.data.get("response") or {})
            response.setdefault("object", "response")
            output = response.get("output")
            if not (isinstance(output, list) and output):
                status = "completed" if response.get("status") == "completed" else "incomplete"
                response["output"] = [self._items[i].value(status) for i in sorted(self._items)]
            return response
        response = self._base()
        response["status"] = response.get("status") or "in_progress"
        response["output"] = [self._items[i].value("in_progress") for i in sorted(self._items)]
        return response

    def item(self, output_index: int) -> dict | None:
        """What is known so far of one output item (its added/done payload, without the streamed text)."""
        item = self._items.get(output_index)
        return dict(item.payload) if item is not None else None

    def _base(self) -> dict:
        response = dict(self._snapshot or {})
        response.setdefault("object", "response")
        return response

    # -- frames and ordering -----------------------------------------------------------------------------

    def _frame(self, name: str | None, data: bytes, out: list[Event]) -> None:
        if data.strip() == b"[DONE]":
            self.saw_done_marker = True
            for ev in self._reorder.drain():
                self._apply(ev, out)
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):  # exposed with an empty type: it could be anything
            ev = Event("", {"event": name, "data": data.decode(errors="replace")}, known=False)
            self.unknown.append(ev)
            out.append(ev)
            return
        if not isinstance(obj.get("type"), str) and name:
            obj["type"] = name
        self._push(obj, out)

    def _push(self, obj: dict, out: list[Event]) -> None:
        for ev in self._reorder.push(obj):
            self._apply(ev, out)

    # -- applying one event --------------------------------------------------------------------------------

    def _apply(self, ev: dict, out: list[Event]) -> None:
        if self._terminal is not None:
            self.ignored += 1
            return
        kind = ev.get("type")
        if not isinstance(kind, str):
            self._unknown(ev, out)
        elif kind in LIFECYCLE:
            if isinstance(ev.get("response"), dict):
                self._snapshot = ev["response"]
            out.append(Event(kind, ev))
        elif kind in TERMINAL:
            self._finish(ev, out)
        elif kind == "error":
            nested = ev.get("error") if isinstance(ev.get("error"), dict) else None
            source = nested or ev  # OpenAI nests the error; the SDKs read top-level copies; either may be missing
            self.error = {k: source.get(k, ev.get(k)) for k in ("code", "message", "param")}
            self.error["type"] = nested.get("type") if nested else None
            out.append(Event(kind, ev))
        elif kind == "response.output_item.added":
            self._item_added(ev, out)
        elif kind == "response.output_item.done":
            self._item_done(ev, out)
        elif kind in PART_EVENTS:
            where, what = PART_EVENTS[kind]
            if what == "added":
                self._part_added(ev, where, out)
            else:
                self._part_done(ev, where, out)
        elif kind == "response.output_text.annotation.added":
            self._annotation(ev, out)
        else:
            prefix, _, suffix = kind.rpartition(".")
            if prefix in TEXT and suffix in ("delta", "done"):
                if suffix == "delta":
                    self._text_delta(ev, prefix, out)
                else:
                    self._text_done(ev, prefix, out)
            elif prefix in ARGS and suffix in ("delta", "done"):
                if suffix == "delta":
                    self._args_delta(ev, prefix, out)
                else:
                    self._args_done(ev, prefix, out)
            else:
                self._unknown(ev, out)

    def _unknown(self, ev: dict, out: list[Event]) -> None:
        event = Event(str(ev.get("type") or ""), ev, known=False)
        self.unknown.append(event)
        out.append(event)

    def _emit(self, ev: dict, item: _Item, out: list[Event]) -> None:
        """Pass an upstream event on, with the output_index / item_id of the item it was correlated with."""
        if ev.get("output_index") != item.index or (item.id and "item_id" in ev and ev["item_id"] != item.id):
            ev = {**ev, "output_index": item.index}
            if "item_id" in ev and item.id:
                ev["item_id"] = item.id
        out.append(Event(ev["type"], ev))

    # -- items -------------------------------------------------------------------------------------------

    def _item(self, ev: dict, kind: str | None, payload: dict | None = None,
              index: Any = None) -> _Item:
        if index is None:
            index = ev.get("output_index")
        item_id = ev.get("item_id") or (payload or {}).get("id")
        if not isinstance(item_id, str):
            item_id = None
        item = self._ids.get(item_id) if item_id else None
        if item is None and type(index) is int:
            found = self._items.get(index)
            if found is not None and (item_id is None or found.id is None or found.id == item_id):
                item = found
        if item is None:
            if type(index) is not int or index < 0 or index in self._items:
                index = max(self._items, default=-1) + 1
            item = self._items[index] = _Item(index, kind)
        if item_id and item.id is None:
            item.id = item_id
            self._ids[item_id] = item
            item.payload.setdefault("id", item_id)
        if kind and not item.type:
            item.payload["type"] = kind
        return item

    def _open_item(self, item: _Item, out: list[Event]) -> None:
        if item.opened:
            return
        item.opened = True
        added = dict(item.payload)
        kind = added.get("type")
        if kind == "message":
            added.setdefault("role", "assistant")
            added["content"] = []
        elif kind == "reasoning":
            added["summary"] = []
        elif kind in ARG_FIELD:
            added[ARG_FIELD[kind]] = ""
        if kind in STATUS_TYPES or "status" in added:
            added["status"] = "in_progress"
        out.append(Event("response.output_item.added", {"type": "response.output_item.added",
                                                        "output_index": item.index, "item": added},
                         synthesized=True))

    def _item_added(self, ev: dict, out: list[Event]) -> None:
        payload = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        item = self._item(ev, payload.get("type"), payload)
        for key, value in payload.items():
            if key not in item.payload or (item.payload[key] in (None, "") and value not in (None, "")):
                item.payload[key] = value
        if item.opened or item.done:
            self.ignored += 1  # announced late: its scaffold was synthesized already
            return
        item.opened = True
        self._emit(ev, item, out)

    def _item_done(self, ev: dict, out: list[Event], synthesized: bool = False, index: Any = None) -> None:
        payload = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        item = self._item(ev, payload.get("type"), payload, index)
        if item.done:
            self.ignored += 0 if synthesized else 1
            return
        self._open_item(item, out)
        kind = payload.get("type") or item.type
        for key, value in payload.items():
            if key in ("content", "summary") and isinstance(value, list):
                self._sync_parts(item, key, value)
            elif key == ARG_FIELD.get(kind or ""):
                if isinstance(value, str) and value:
                    item.args_final = value
            elif value is not None or key not in item.payload:
                item.payload[key] = value
        status = payload.get("status") if isinstance(payload.get("status"), str) else "completed"
        self._close_contents(item, out)
        value = item.value(status)
        item.payload.update({k: v for k, v in value.items() if k not in ("content", "summary")})
        item.done = True
        if synthesized:
            out.append(Event("response.output_item.done", {"type": "response.output_item.done",
                                                           "output_index": item.index, "item": value},
                             synthesized=True))
        else:
            ev = {**ev, "item": value} if value != payload else ev
            self._emit(ev, item, out)

    def _sync_parts(self, item: _Item, where: str, parts: list) -> None:
        for i, payload in enumerate(parts):
            if not isinstance(payload, dict):
                continue
            part = self._part(item, where, i, payload.get("type"))
            self._part_payload(part, payload)

    def _close_contents(self, item: _Item, out: list[Event]) -> None:
        for where in ("summary", "content"):
            parts = item.parts(where)
            for i in sorted(parts):
                self._open_part(item, where, i, parts[i], out)
                self._close_part(item, where, i, parts[i], out)
        kind = item.type
        if kind in ARG_FIELD and not item.args_done:
            self._remainder_args(item, out)
            item.args_done = True
            name = ARG_FIELD[kind]
            data = {"type": f"{ARGS_PREFIX[kind]}.done", "item_id": item.id, "output_index": item.index,
                    name: item.args_text}
            if kind == "function_call" and item.payload.get("name"):
                data["name"] = item.payload["name"]
            out.append(Event(data["type"], data, synthesized=True))

    def _close_item(self, item: _Item, status: str, out: list[Event]) -> None:
        self._open_item(item, out)
        self._close_contents(item, out)
        value = item.value(status)
        item.payload.update({k: v for k, v in value.items() if k not in ("content", "summary")})
        item.done = True
        out.append(Event("response.output_item.done", {"type": "response.output_item.done",
                                                       "output_index": item.index, "item": value},
                         synthesized=True))

    def _open_items(self) -> list[_Item]:
        return [self._items[i] for i in sorted(self._items) if not self._items[i].done]

    # -- parts -------------------------------------------------------------------------------------------

    def _part(self, item: _Item, where: str, index: Any, kind: str | None) -> _Part:
        parts = item.parts(where)
        if type(index) is not int or index < 0:
            index = max(parts, default=0)
        part = parts.get(index)
        if part is None:
            part = parts[index] = _Part(kind)
        elif kind and not part.kind:
            part.kind = kind
        return part

    @staticmethod
    def _part_payload(part: _Part, payload: dict) -> None:
        for key, value in payload.items():
            if key in ("text", "refusal"):
                if isinstance(value, str) and value:
                    part.final = value
            elif key == "logprobs":
                if isinstance(value, list) and value and not part.logprobs:
                    part.logprobs = list(value)
            elif key == "annotations":
                if isinstance(value, list) and value:
                    part.annotations = list(value)
            else:
                part.payload[key] = value
        if part.kind is None and isinstance(payload.get("type"), str):
            part.kind = payload["type"]

    def _part_index(self, item: _Item, where: str, ev: dict) -> int:
        index = ev.get(INDEX_FIELD[where])
        if type(index) is int and index >= 0:
            return index
        parts = item.parts(where)
        return max(parts, default=0)

    def _open_part(self, item: _Item, where: str, index: int, part: _Part, out: list[Event],
                   ev: dict | None = None) -> None:
        self._open_item(item, out)
        if part.opened:
            return
        part.opened = True
        if ev is not None:
            self._emit(ev, item, out)
            return
        kind = part.kind or ("summary_text" if where == "summary" else "output_text")
        shape = dict(part.payload)
        shape["type"] = kind
        if kind == "refusal":
            shape["refusal"] = ""
        else:
            shape["text"] = ""
        if kind == "output_text":
            shape.setdefault("annotations", [])
            shape.setdefault("logprobs", [])
        added = PART_ADDED[where]
        out.append(Event(added, {"type": added, "item_id": item.id, "output_index": item.index,
                                 INDEX_FIELD[where]: index, "part": shape}, synthesized=True))

    def _part_added(self, ev: dict, where: str, out: list[Event]) -> None:
        payload = ev.get("part") if isinstance(ev.get("part"), dict) else {}
        kind = payload.get("type")
        item_type = "reasoning" if where == "summary" or kind in ("reasoning_text", "summary_text") else "message"
        item = self._item(ev, item_type)
        index = self._part_index(item, where, ev)
        part = self._part(item, where, index, kind)
        for key, value in payload.items():
            if key not in ("text", "refusal") and key not in part.payload:
                part.payload[key] = value
        if part.opened or part.done or item.done:
            self.ignored += 1
            return
        self._open_part(item, where, index, part, out, ev)

    def _part_done(self, ev: dict, where: str, out: list[Event]) -> None:
        payload = ev.get("part") if isinstance(ev.get("part"), dict) else {}
        kind = payload.get("type")
        item_type = "reasoning" if where == "summary" or kind in ("reasoning_text", "summary_text") else "message"
        item = self._item(ev, item_type)
        index = self._part_index(item, where, ev)
        part = self._part(item, where, index, kind)
        if part.done or item.done:
            self.ignored += 1
            return
        self._open_part(item, where, index, part, out)
        self._part_payload(part, payload)
        self._close_text(item, where, index, part, out)
        part.done = True
        self._emit({**ev, "part": part.value()}, item, out)

    def _close_part(self, item: _Item, where: str, index: int, part: _Part, out: list[Event]) -> None:
        if part.done:
            return
        self._close_text(item, where, index, part, out)
        part.done = True
        done = PART_DONE[where]
        out.append(Event(done, {"type": done, "item_id": item.id, "output_index": item.index,
                                INDEX_FIELD[where]: index, "part": part.value()}, synthesized=True))

    # -- text --------------------------------------------------------------------------------------------

    def _text_delta(self, ev: dict, prefix: str, out: list[Event]) -> None:
        item_type, where, kind, _ = TEXT[prefix]
        item = self._item(ev, item_type)
        index = self._part_index(item, where, ev)
        part = self._part(item, where, index, kind)
        if part.text_done or part.done or item.done:
            self.ignored += 1  # after its .done, which carried the whole text
            return
        self._open_part(item, where, index, part, out)
        delta = ev.get("delta")
        if isinstance(delta, dict):  # some servers have sent {"content": "..."} / {"text": "..."}
            delta = delta.get("text") or delta.get("content") or ""
            ev = {**ev, "delta": delta}
        if not isinstance(delta, str):
            delta = ""
            ev = {**ev, "delta": delta}
        part.chunks.append(delta)
        logprobs = ev.get("logprobs")
        if isinstance(logprobs, list) and logprobs:
            part.logprobs.extend(logprobs)
        self._emit(ev, item, out)

    def _text_done(self, ev: dict, prefix: str, out: list[Event]) -> None:
        item_type, where, kind, name = TEXT[prefix]
        item = self._item(ev, item_type)
        index = self._part_index(item, where, ev)
        part = self._part(item, where, index, kind)
        if part.text_done or part.done or item.done:
            self.ignored += 1
            return
        self._open_part(item, where, index, part, out)
        final = ev.get(name)
        if isinstance(final, str) and final:
            part.final = final
        logprobs = ev.get("logprobs")
        if isinstance(logprobs, list) and logprobs and not part.logprobs:
            part.logprobs = list(logprobs)
        self._remainder(item, where, index, part, out)
        part.text_done = True
        self._emit({**ev, name: part.text}, item, out)

    def _remainder(self, item: _Item, where: str, index: int, part: _Part, out: list[Event]) -> None:
        """Text the final version has beyond the streamed deltas goes out as one synthesized delta."""
        final, streamed = part.final, part.streamed
        if not final or final == streamed:
            return
        if not final.startswith(streamed):
            log.info("output %s: the final text differs from its deltas; the final text wins", item.index)
            return
        rest = final[len(streamed):]
        part.chunks.append(rest)
        kind = part.kind or ("summary_text" if where == "summary" else "output_text")
        data = {"type": f"{TEXT_PREFIX[kind]}.delta", "item_id": item.id, "output_index": item.index,
                INDEX_FIELD[where]: index, "delta": rest}
        if kind == "output_text":
            data["logprobs"] = []
        out.append(Event(data["type"], data, synthesized=True))

    def _close_text(self, item: _Item, where: str, index: int, part: _Part, out: list[Event]) -> None:
        if part.text_done:
            return
        self._remainder(item, where, index, part, out)
        part.text_done = True
        kind = part.kind or ("summary_text" if where == "summary" else "output_text")
        name = "refusal" if kind == "refusal" else "text"
        data = {"type": f"{TEXT_PREFIX[kind]}.done", "item_id": item.id, "output_index": item.index,
                INDEX_FIELD[where]: index, name: part.text}
        if kind == "output_text":
            data["logprobs"] = list(part.logprobs)
        out.append(Event(data["type"], data, synthesized=True))

    def _annotation(self, ev: dict, out: list[Event]) -> None:
        item = self._item(ev, "message")
        index = self._part_index(item, "content", ev)
        part = self._part(item, "content", index, "output_text")
        if part.done or item.done:
            self.ignored += 1
            return
        self._open_part(item, "content", index, part, out)
        if isinstance(ev.get("annotation"), dict):
            part.annotations.append(ev["annotation"])
        self._emit(ev, item, out)

    # -- tool input --------------------------------------------------------------------------------------

    def _args_delta(self, ev: dict, prefix: str, out: list[Event]) -> None:
        item = self._item(ev, ARGS[prefix][0])
        if item.args_done or item.done:
            self.ignored += 1
            return
        self._open_item(item, out)
        delta = ev.get("delta")
        if not isinstance(delta, str):
            delta = "" if delta is None else orjson.dumps(delta).decode()
            ev = {**ev, "delta": delta}
        item.args.append(delta)
        self._emit(ev, item, out)

    def _args_done(self, ev: dict, prefix: str, out: list[Event]) -> None:
        kind, name = ARGS[prefix]
        item = self._item(ev, kind)
        if item.args_done or item.done:
            self.ignored += 1
            return
        self._open_item(item, out)
        final = ev.get(name)
        if isinstance(final, str) and final:
            item.args_final = final
        if isinstance(ev.get("name"), str) and not item.payload.get("name"):
            item.payload["name"] = ev["name"]
        self._remainder_args(item, out)
        item.args_done = True
        self._emit({**ev, name: item.args_text}, item, out)

    def _remainder_args(self, item: _Item, out: list[Event]) -> None:
        final, streamed = item.args_final, "".join(item.args)
        if not final or final == streamed or not final.startswith(streamed):
            return
        rest = final[len(streamed):]
        item.args.append(rest)
        kind = item.type or "function_call"
        data = {"type": f"{ARGS_PREFIX[kind]}.delta", "item_id": item.id, "output_index": item.index,
                "delta": rest}
        out.append(Event(data["type"], data, synthesized=True))

    # -- the end -----------------------------------------------------------------------------------------

    def _finish(self, ev: dict, out: list[Event]) -> None:
        response = ev.get("response") if isinstance(ev.get("response"), dict) else {}
        status = TERMINAL[ev["type"]]
        output = response.get("output")
        if isinstance(output, list):
            # The terminal's items are the final word on items whose .done never came.
            for position, payload in enumerate(output):
                if isinstance(payload, dict):
                    self._item_done({"type": "response.output_item.done", "output_index": position,
                                     "item": payload}, out, synthesized=True)
        closing = "completed" if status == "completed" else "incomplete"
        for item in self._open_items():
            self._close_item(item, closing, out)
        if status == "failed" and self.error is None and isinstance(response.get("error"), dict):
            self.error = dict(response["error"])
        self._terminal = Event(ev["type"], ev)
        if not (isinstance(output, list) and output) and self._items:
            # The terminal event passed on carries the items the stream built (its own output was empty).
            self._terminal = Event(ev["type"], {**ev, "response": self.response})
        out.append(self._terminal)


def read_stream(source: bytes | str | Iterable | AsyncIterable, *, window: int = 256) -> ResponseStream:
    """Read a Responses SSE stream: iterate (`for` or `async for`) for events, then read `.response`.

    `source`: the whole body (bytes or str), or an iterable / async iterable of chunks (bytes or str) split
    anywhere, e.g. `httpx.Response.iter_bytes()` / `aiter_bytes()` or `aiohttp`'s `content.iter_any()`.
    """
    return ResponseStream(source, window=window)


class ResponseStream:
    """The reader `read_stream` returns. Iterate it once; `response` is the final Response afterwards."""

    def __init__(self, source: Any, *, window: int = 256):
        self.accumulator = Accumulator(window=window)
        self.exception: BaseException | None = None  # what the source raised, if it failed mid-stream
        self._source = source

    # -- results -----------------------------------------------------------------------------------------

    @property
    def response(self) -> dict:
        """The accumulated Response: final once iteration ended, the state so far before that."""
        return self.accumulator.response

    @property
    def status(self) -> str | None:
        return self.response.get("status")

    @property
    def output_text(self) -> str:
        """The text of every output_text part of every message, concatenated (like the SDKs' `output_text`)."""
        return "".join(part.get("text") or "" for item in self.response.get("output") or ()
                       if isinstance(item, dict) and item.get("type") == "message"
                       for part in item.get("content") or () if part.get("type") == "output_text")

    @property
    def unknown(self) -> list[Event]:
        """Events that were skipped because the reader does not know their type (or they were not JSON)."""
        return self.accumulator.unknown

    @property
    def ended_early(self) -> bool:
        return self.accumulator.ended_early

    def collect(self) -> dict:
        """Read everything (synchronously) and return the final Response."""
        for _ in self:
            pass
        return self.response

    async def acollect(self) -> dict:
        async for _ in self:
            pass
        return self.response

    # -- iteration ---------------------------------------------------------------------------------------

    def _chunks(self) -> Any:
        source = self._source
        if isinstance(source, (bytes, bytearray, memoryview, str)):
            return [source]
        return source

    def __iter__(self) -> Iterator[Event]:
        source = self._chunks()
        if not isinstance(source, Iterable):
            raise TypeError("this source is asynchronous: use `async for`")
        acc = self.accumulator
        try:
            for chunk in source:
                yield from acc.feed(chunk)
        except Exception as exc:  # a dropped connection: the response ends as failed, and says why
            self.exception = exc
            yield from acc.close(reason=f"the source failed ({exc.__class__.__name__}: {exc})")
            return
        yield from acc.close()

    async def __aiter__(self):
        source = self._chunks()
        acc = self.accumulator
        try:
            if isinstance(source, AsyncIterable):
                async for chunk in source:
                    for event in acc.feed(chunk):
                        yield event
            else:
                for chunk in source:
                    for event in acc.feed(chunk):
                        yield event
        except Exception as exc:
            self.exception = exc
            for event in acc.close(reason=f"the source failed ({exc.__class__.__name__}: {exc})"):
                yield event
            return
        for event in acc.close():
            yield event
