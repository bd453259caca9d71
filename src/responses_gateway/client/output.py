"""The output items a stream builds, and the scaffold events that open and close them when the stream did not.

An `Item` is one entry of `response.output`; its `Part`s are the entries of its `content` or `summary`.
Everything here depends on one item's state only: which events it still owes (an `.added` before anything
that refers to it, exactly one `.done` for each `.added`) and the text its final version has beyond what
its deltas delivered.
"""

from __future__ import annotations

import logging
from typing import Any

from .events import (
    ARG_FIELD,
    ARGS_PREFIX,
    INDEX_FIELD,
    PART_ADDED,
    PART_DONE,
    STATUS_TYPES,
    TEXT_PREFIX,
    Event,
    obj,
)

log = logging.getLogger("responses_gateway.client")


class Part:
    __slots__ = ("kind", "payload", "chunks", "final", "logprobs", "annotations", "opened", "text_done", "done")

    def __init__(self, kind: str | None):
        self.kind = kind
        self.payload: dict[str, Any] = {}
        self.chunks: list[str] = []
        self.final: str | None = None  # the text a .done event, item or terminal gave
        self.logprobs: list[Any] = []
        self.annotations: list[Any] = []
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

    def kind_in(self, where: str) -> str:
        """The part type, guessed from where it is when no event said."""
        return self.kind or ("summary_text" if where == "summary" else "output_text")

    def merge(self, payload: dict[str, Any]) -> None:
        """Take what a `.done` part or a finished item says about this part."""
        for key, value in payload.items():
            if key in ("text", "refusal"):
                if isinstance(value, str) and value:
                    self.final = value
            elif key == "logprobs":
                if isinstance(value, list) and value and not self.logprobs:
                    self.logprobs = list(value)
            elif key == "annotations":
                if isinstance(value, list) and value:
                    self.annotations = list(value)
            else:
                self.payload[key] = value
        if self.kind is None and isinstance(payload.get("type"), str):
            self.kind = payload["type"]

    def value(self) -> dict[str, Any]:
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


class Item:
    __slots__ = ("index", "id", "payload", "content", "summary", "args", "args_final", "opened", "args_done",
                 "done", "seen")

    def __init__(self, index: int, kind: str | None):
        self.index = index
        self.id: str | None = None
        self.payload: dict[str, Any] = {"type": kind} if kind else {}
        self.content: dict[int, Part] = {}
        self.summary: dict[int, Part] = {}
        self.args: list[str] = []
        self.args_final: str | None = None
        self.opened = False
        self.args_done = False
        self.done = False
        self.seen: dict[str, dict[int, int]] = {}  # upstream part index → ours, per content / summary

    @property
    def type(self) -> str | None:
        return self.payload.get("type")

    def parts(self, where: str) -> dict[int, Part]:
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

    def value(self, status: str) -> dict[str, Any]:
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

    # -- parts -------------------------------------------------------------------------------------------

    def part(self, where: str, index: Any, kind: str | None) -> Part:
        """The part at `index` (the last one for a missing or bad index), created if new."""
        parts = self.parts(where)
        if type(index) is not int or index < 0:
            index = max(parts, default=0)
        part = parts.get(index)
        if part is None:
            part = parts[index] = Part(kind)
        elif kind and not part.kind:
            part.kind = kind
        return part

    def part_index(self, where: str, ev: dict[str, Any]) -> int:
        """Our index of the part an event is about. Parts are numbered densely in the order the stream first
        names them (vLLM opens a message's only part at content_index 1), and the event is corrected to it."""
        field = INDEX_FIELD[where]
        index = ev.get(field)
        if type(index) is not int or index < 0:
            return max(self.parts(where), default=0)
        seen = self.seen.setdefault(where, {})
        local = seen.setdefault(index, len(seen))
        if local != index:
            ev[field] = local
        return local

    def sync_parts(self, where: str, parts: list[Any]) -> None:
        for i, payload in enumerate(parts):
            if isinstance(payload, dict):
                self.part(where, i, payload.get("type")).merge(payload)

    # -- events ------------------------------------------------------------------------------------------

    def emit(self, ev: dict[str, Any], out: list[Event]) -> None:
        """Pass an upstream event on, with the output_index / item_id of this item, which it was correlated with."""
        if ev.get("output_index") != self.index or (self.id and "item_id" in ev and ev["item_id"] != self.id):
            ev = {**ev, "output_index": self.index}
            if "item_id" in ev and self.id:
                ev["item_id"] = self.id
        out.append(Event(ev["type"], ev))

    def open(self, out: list[Event]) -> None:
        if self.opened:
            return
        self.opened = True
        added = dict(self.payload)
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
                                                        "output_index": self.index, "item": added},
                         synthesized=True))

    def open_part(self, where: str, index: int, part: Part, out: list[Event], ev: dict[str, Any] | None = None) -> None:
        """Open the item and the part; `ev` is the upstream's own `.added` for it, else one is synthesized."""
        self.open(out)
        if part.opened:
            return
        part.opened = True
        if ev is not None:
            self.emit(ev, out)
            return
        kind = part.kind_in(where)
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
        out.append(Event(added, {"type": added, "item_id": self.id, "output_index": self.index,
                                 INDEX_FIELD[where]: index, "part": shape}, synthesized=True))

    def remainder(self, where: str, index: int, part: Part, out: list[Event]) -> None:
        """Text the final version has beyond the streamed deltas goes out as one synthesized delta."""
        final, streamed = part.final, part.streamed
        if not final or final == streamed:
            return
        if not final.startswith(streamed):
            log.info("output %s: the final text differs from its deltas; the final text wins", self.index)
            return
        rest = final[len(streamed):]
        part.chunks.append(rest)
        kind = part.kind_in(where)
        data: dict[str, Any] = {"type": f"{TEXT_PREFIX[kind]}.delta", "item_id": self.id, "output_index": self.index,
                INDEX_FIELD[where]: index, "delta": rest}
        if kind == "output_text":
            data["logprobs"] = []
        out.append(Event(data["type"], data, synthesized=True))

    def close_text(self, where: str, index: int, part: Part, out: list[Event]) -> None:
        if part.text_done:
            return
        self.remainder(where, index, part, out)
        part.text_done = True
        kind = part.kind_in(where)
        name = "refusal" if kind == "refusal" else "text"
        data: dict[str, Any] = {"type": f"{TEXT_PREFIX[kind]}.done", "item_id": self.id, "output_index": self.index,
                INDEX_FIELD[where]: index, name: part.text}
        if kind == "output_text":
            data["logprobs"] = list(part.logprobs)
        out.append(Event(data["type"], data, synthesized=True))

    def close_part(self, where: str, index: int, part: Part, out: list[Event], ev: dict[str, Any] | None = None) -> None:
        """Close the part's text, then the part; `ev` is the upstream's own `.done` for it, else one is synthesized."""
        if part.done:
            return
        self.close_text(where, index, part, out)
        part.done = True
        if ev is not None:
            self.emit({**ev, "part": part.value()}, out)
            return
        done = PART_DONE[where]
        out.append(Event(done, {"type": done, "item_id": self.id, "output_index": self.index,
                                INDEX_FIELD[where]: index, "part": part.value()}, synthesized=True))

    def remainder_args(self, out: list[Event]) -> None:
        final, streamed = self.args_final, "".join(self.args)
        if not final or final == streamed or not final.startswith(streamed):
            return
        rest = final[len(streamed):]
        self.args.append(rest)
        kind = self.type or "function_call"
        data: dict[str, Any] = {"type": f"{ARGS_PREFIX[kind]}.delta", "item_id": self.id, "output_index": self.index,
                "delta": rest}
        out.append(Event(data["type"], data, synthesized=True))

    def close(self, status: str, out: list[Event], ev: dict[str, Any] | None = None) -> None:
        """End the item: what is open inside it first, then its `output_item.done` (`ev`, the upstream's own,
        passed on with the item as built; synthesized without one). `status` is for an item without its own."""
        self.open(out)
        for where in ("summary", "content"):
            parts = self.parts(where)
            for i in sorted(parts):
                self.open_part(where, i, parts[i], out)
                self.close_part(where, i, parts[i], out)
        kind = self.type
        if kind in ARG_FIELD and not self.args_done:
            self.remainder_args(out)
            self.args_done = True
            name = ARG_FIELD[kind]
            data: dict[str, Any] = {"type": f"{ARGS_PREFIX[kind]}.done", "item_id": self.id, "output_index": self.index,
                    name: self.args_text}
            if kind == "function_call" and self.payload.get("name"):
                data["name"] = self.payload["name"]
            out.append(Event(data["type"], data, synthesized=True))
        value = self.value(status)
        self.payload.update({k: v for k, v in value.items() if k not in ("content", "summary")})
        self.done = True
        if ev is None:
            out.append(Event("response.output_item.done", {"type": "response.output_item.done",
                                                           "output_index": self.index, "item": value},
                             synthesized=True))
        else:
            payload = obj(ev.get("item"))
            self.emit({**ev, "item": value} if value != payload else ev, out)
