"""The incremental core of the reader: SSE bytes or event objects in, a well-formed stream of events out.

Each event is put in order (`Reorder`), then routed to the output item and part it is about (`Item`,
`Part`), which synthesize whatever the stream owed before or after it; what the stream got wrong is repaired
here, as `responses_gateway.client` describes.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..sse import SSEDecoder
from .events import ARG_FIELD, ARGS, LIFECYCLE, PART_EVENTS, TERMINAL, TEXT, Event, obj
from .output import Item, Part
from .reorder import Reorder

ENDED_EARLY = "stream_ended"
IDENTITY = ("id", "call_id")  # what names an item to the client: kept as first streamed


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
        self._reorder = Reorder(window)
        self._items: dict[int, Item] = {}
        self._ids: dict[str, Item] = {}
        self._snapshot: dict[str, Any] | None = None
        self._terminal: Event | None = None
        self.error: dict[str, Any] | None = None  # the `error` event's error, if one came
        self.unknown: list[Event] = []  # events not understood (unknown types, data that is not JSON)
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

    def feed_event(self, event: dict[str, Any]) -> list[Event]:
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
                item.close("incomplete", out)
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
            failed = Event("response.failed", {"type": "response.failed", "response": response}, synthesized=True)
            self._terminal = failed
            out.append(failed)
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
    def response(self) -> dict[str, Any]:
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

    def item(self, output_index: int) -> dict[str, Any] | None:
        """What is known so far of one output item (its added/done payload, without the streamed text)."""
        item = self._items.get(output_index)
        return dict(item.payload) if item is not None else None

    def _base(self) -> dict[str, Any]:
        response = dict(self._snapshot or {})
        response.setdefault("object", "response")
        return response

    # -- frames and ordering -----------------------------------------------------------------------------

    def _frame(self, name: str | None, data: bytes, out: list[Event]) -> None:
        if data.strip() == b"[DONE]":
            for ev in self._reorder.drain():
                self._apply(ev, out)
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):  # exposed with an empty type: it could be anything
            unknown = Event("", {"event": name, "data": data.decode(errors="replace")}, known=False)
            self.unknown.append(unknown)
            out.append(unknown)
            return
        if not isinstance(obj.get("type"), str) and name:
            obj["type"] = name
        self._push(obj, out)

    def _push(self, obj: dict[str, Any], out: list[Event]) -> None:
        for ev in self._reorder.push(obj):
            self._apply(ev, out)

    # -- applying one event --------------------------------------------------------------------------------

    def _apply(self, ev: dict[str, Any], out: list[Event]) -> None:
        if self._terminal is not None:
            return  # after the end: nothing changes the response any more
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

    def _unknown(self, ev: dict[str, Any], out: list[Event]) -> None:
        event = Event(str(ev.get("type") or ""), ev, known=False)
        self.unknown.append(event)
        out.append(event)

    # -- finding what an event is about ------------------------------------------------------------------

    def _item(self, ev: dict[str, Any], kind: str | None, payload: dict[str, Any] | None = None, *,
              positional: bool = False) -> Item:
        """The item an event refers to, created if new: by `item_id`, else by `output_index`. An id never seen
        before at the index of an item of the same type is that item under another name — servers rename
        items (vLLM's `response.completed` lists every item under a new id), or send a wrong `item_id` —
        while that item is open, or always for the terminal's own list (`positional`)."""
        index = ev.get("output_index")
        item_id = ev.get("item_id") or (payload or {}).get("id")
        if not isinstance(item_id, str):
            item_id = None
        item = self._ids.get(item_id) if item_id else None
        if item is None and type(index) is int:
            found = self._items.get(index)
            if found is not None and (item_id is None or found.id is None or found.id == item_id
                                      or (kind in (None, found.type) and (positional or not found.done))):
                item = found
                if item_id and item.id is not None:
                    self._ids[item_id] = item  # the other name, for the events still to come
        if item is None:
            if type(index) is not int or index < 0 or index in self._items:
                index = max(self._items, default=-1) + 1
            item = self._items[index] = Item(index, kind)
        if item_id and item.id is None:
            item.id = item_id
            self._ids[item_id] = item
            item.payload.setdefault("id", item_id)
        if kind and not item.type:
            item.payload["type"] = kind
        return item

    def _locate(self, ev: dict[str, Any], item_type: str, where: str, kind: str | None) -> tuple[Item, int, Part]:
        item = self._item(ev, item_type)
        index = item.part_index(where, ev)
        return item, index, item.part(where, index, kind)

    def _live_part(self, ev: dict[str, Any], item_type: str, where: str, kind: str | None, out: list[Event], *,
                   text: bool = False) -> tuple[Item, int, Part] | None:
        """The part an event is about, opened (its scaffold synthesized when the stream lacked it); None when
        the event comes too late to matter: after its part or item ended, or with `text` after its text ended
        (whose `.done` carried the whole text)."""
        item, index, part = self._locate(ev, item_type, where, kind)
        if part.done or item.done or (text and part.text_done):
            return None
        item.open_part(where, index, part, out)
        return item, index, part

    def _live_args(self, ev: dict[str, Any], prefix: str, out: list[Event]) -> Item | None:
        """The tool call an input event is about, opened; None after its input or the item ended."""
        item = self._item(ev, ARGS[prefix][0])
        if item.args_done or item.done:
            return None
        item.open(out)
        return item

    def _open_items(self) -> list[Item]:
        return [self._items[i] for i in sorted(self._items) if not self._items[i].done]

    # -- items -------------------------------------------------------------------------------------------

    def _item_added(self, ev: dict[str, Any], out: list[Event]) -> None:
        payload = obj(ev.get("item"))
        item = self._item(ev, payload.get("type"), payload)
        for key, value in payload.items():
            if key not in item.payload or (item.payload[key] in (None, "") and value not in (None, "")):
                item.payload[key] = value
        if item.opened or item.done:
            return  # announced late: its scaffold was synthesized already
        item.opened = True
        item.emit(ev, out)

    def _item_done(self, ev: dict[str, Any], out: list[Event], synthesized: bool = False) -> None:
        """An `output_item.done`, or (`synthesized`) an item of the terminal event's `output`."""
        payload = obj(ev.get("item"))
        item = self._item(ev, payload.get("type"), payload, positional=synthesized)
        if item.done:
            return
        item.open(out)
        kind = payload.get("type") or item.type
        for key, value in payload.items():
            if synthesized and key in IDENTITY and item.payload.get(key):
                continue  # the terminal's own names for a streamed item: the streamed ones were seen
            if key in ("content", "summary") and isinstance(value, list):
                item.sync_parts(key, value)
            elif key == ARG_FIELD.get(kind or ""):
                if isinstance(value, str) and value:
                    item.args_final = value
            elif value is not None or key not in item.payload:
                item.payload[key] = value
        status = payload.get("status")
        item.close(status if isinstance(status, str) else "completed", out, None if synthesized else ev)

    # -- parts -------------------------------------------------------------------------------------------

    @staticmethod
    def _part_of(ev: dict[str, Any], where: str) -> tuple[dict[str, Any], str | None, str]:
        """A part event's `part` payload, its type, and the type of item it belongs in."""
        payload = obj(ev.get("part"))
        kind = payload.get("type")
        item_type = "reasoning" if where == "summary" or kind in ("reasoning_text", "summary_text") else "message"
        return payload, kind, item_type

    def _part_added(self, ev: dict[str, Any], where: str, out: list[Event]) -> None:
        payload, kind, item_type = self._part_of(ev, where)
        item, index, part = self._locate(ev, item_type, where, kind)
        for key, value in payload.items():
            if key not in ("text", "refusal") and key not in part.payload:
                part.payload[key] = value
        if part.opened or part.done or item.done:
            return  # announced late: its scaffold was synthesized already
        item.open_part(where, index, part, out, ev)

    def _part_done(self, ev: dict[str, Any], where: str, out: list[Event]) -> None:
        payload, kind, item_type = self._part_of(ev, where)
        if (found := self._live_part(ev, item_type, where, kind, out)) is None:
            return
        item, index, part = found
        part.merge(payload)
        item.close_part(where, index, part, out, ev)

    # -- text --------------------------------------------------------------------------------------------

    def _live_text(self, ev: dict[str, Any], prefix: str, out: list[Event]) -> tuple[Item, int, Part] | None:
        item_type, where, kind, _ = TEXT[prefix]
        return self._live_part(ev, item_type, where, kind, out, text=True)

    def _text_delta(self, ev: dict[str, Any], prefix: str, out: list[Event]) -> None:
        if (found := self._live_text(ev, prefix, out)) is None:
            return
        item, _, part = found
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
        item.emit(ev, out)

    def _text_done(self, ev: dict[str, Any], prefix: str, out: list[Event]) -> None:
        if (found := self._live_text(ev, prefix, out)) is None:
            return
        item, index, part = found
        _, where, _, name = TEXT[prefix]
        final = ev.get(name)
        if isinstance(final, str) and final:
            part.final = final
        logprobs = ev.get("logprobs")
        if isinstance(logprobs, list) and logprobs and not part.logprobs:
            part.logprobs = list(logprobs)
        item.remainder(where, index, part, out)
        part.text_done = True
        item.emit({**ev, name: part.text}, out)

    def _annotation(self, ev: dict[str, Any], out: list[Event]) -> None:
        if (found := self._live_part(ev, "message", "content", "output_text", out)) is None:
            return
        item, _, part = found
        if isinstance(ev.get("annotation"), dict):
            part.annotations.append(ev["annotation"])
        item.emit(ev, out)

    # -- tool input --------------------------------------------------------------------------------------

    def _args_delta(self, ev: dict[str, Any], prefix: str, out: list[Event]) -> None:
        if (item := self._live_args(ev, prefix, out)) is None:
            return
        delta = ev.get("delta")
        if not isinstance(delta, str):
            delta = "" if delta is None else orjson.dumps(delta).decode()
            ev = {**ev, "delta": delta}
        item.args.append(delta)
        item.emit(ev, out)

    def _args_done(self, ev: dict[str, Any], prefix: str, out: list[Event]) -> None:
        if (item := self._live_args(ev, prefix, out)) is None:
            return
        name = ARGS[prefix][1]
        final = ev.get(name)
        if isinstance(final, str) and final:
            item.args_final = final
        if isinstance(ev.get("name"), str) and not item.payload.get("name"):
            item.payload["name"] = ev["name"]
        item.remainder_args(out)
        item.args_done = True
        item.emit({**ev, name: item.args_text}, out)

    # -- the end -----------------------------------------------------------------------------------------

    def _streamed_as(self, payload: dict[str, Any], after: int) -> int | None:
        """The streamed item a terminal `output` entry is, or None for one never streamed. By id when the
        id was streamed; else the first item after `after` (the last one matched) of the same type and, for
        a tool call, the same name. Not by position or id alone: servers list items under new ids and call
        ids, and leave out items they streamed (vLLM, a Qwen model's empty message before its tool call)."""
        item_id = payload.get("id")
        if isinstance(item_id, str) and item_id in self._ids:
            return self._ids[item_id].index
        kind = payload.get("type")
        name = payload.get("name")
        for index in sorted(self._items):
            if index <= after:
                continue
            item = self._items[index]
            known = item.payload.get("name")
            if item.type in (None, kind) and not (isinstance(name, str) and isinstance(known, str) and name
                                                  and known and name != known):
                return index
        return None

    def _finish(self, ev: dict[str, Any], out: list[Event]) -> None:
        response = obj(ev.get("response"))
        status = TERMINAL[ev["type"]]
        output = response.get("output")
        if isinstance(output, list):
            # The terminal's items are the final word on items whose .done never came.
            after = -1
            for payload in output:
                if not isinstance(payload, dict):
                    continue
                index = self._streamed_as(payload, after)
                if index is None:
                    index = max(self._items, default=-1) + 1
                else:
                    after = max(after, index)
                self._item_done({"type": "response.output_item.done", "output_index": index, "item": payload},
                                out, synthesized=True)
        closing = "completed" if status == "completed" else "incomplete"
        for item in self._open_items():
            item.close(closing, out)
        if status == "failed" and self.error is None and isinstance(response.get("error"), dict):
            self.error = dict(response["error"])
        self._terminal = Event(ev["type"], ev)
        if not (isinstance(output, list) and output) and self._items:
            # The terminal event passed on carries the items the stream built (its own output was empty).
            self._terminal = Event(ev["type"], {**ev, "response": self.response})
        out.append(self._terminal)
