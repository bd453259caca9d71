"""A toy gateway-run tool for the frame's tests: `{"type": "toy"}` offers the model `toy(text)`, whose calls
make `toy_call` items that echo the text (and keep a `secret` field shown only with include `toy_call.secret`).
`Toy.script` decides what a run does: finish, hang, raise, leave the call open; `Toy.marker` makes its
annotator cite `[n]` markers (held back, removed, and turned into annotations)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson

from responses_gateway.errors import invalid
from responses_gateway.protocol.tools import Tool
from responses_gateway.tools.frame import Context, Declared, Kit

FUNCTION = Tool("function", "toy", "toy", "Echo a text.", {"type": "object", "properties": {"text": {"type": "string"}}},
                runner="toy")


def parse(spec: dict[str, Any], where: str) -> Declared:
    if set(spec) - {"type", "mode"}:
        raise invalid(f"Invalid '{where}': unknown field.", where)
    return Declared(KIT, where, spec.get("mode", "ok"), (FUNCTION,))


def normalize(item: dict[str, Any], where: str) -> dict[str, Any]:
    return dict(item)


def lower(item: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    call_id = item["id"]
    output = item.get("secret") or f"error: {item.get('error')}"
    return ({"type": "function_call", "call_id": call_id, "name": "toy", "arguments": item.get("arguments", "{}")},
            {"type": "function_call_output", "call_id": call_id, "output": output})


def shown(item: dict[str, Any], include: frozenset[str]) -> dict[str, Any]:
    if "toy_call.secret" in include or "secret" not in item:
        return item
    return {k: v for k, v in item.items() if k != "secret"}


class Marker:
    """Cites `[n]` markers: the marker never reaches the client; an annotation at its place does."""

    def __init__(self) -> None:
        self.held = ""

    def feed(self, text: str, at: int) -> tuple[str, list[dict[str, Any]]]:
        text = self.held + text
        self.held = ""
        out, notes = [], []
        sent = at
        i = 0
        while i < len(text):
            if text[i] == "[":
                end = text.find("]", i)
                if end < 0:
                    self.held = text[i:]
                    break
                notes.append({"type": "file_citation", "file_id": f"file_{text[i + 1:end]}", "filename": "f.txt",
                              "index": sent})
                i = end + 1
                continue
            out.append(text[i])
            sent += 1
            i += 1
        return "".join(out), notes

    def flush(self, at: int) -> tuple[str, list[dict[str, Any]]]:
        held, self.held = self.held, ""
        return held, []


class Toy:
    timeout = 0.5
    runs: list[str] = []  # the texts run, in the order runs started

    def __init__(self, declared: Sequence[Declared], context: Context):
        self.mode = declared[0].config
        self.context = context

    async def prelude(self, composer, tools):
        return
        yield

    def item(self, start):
        return {"id": f"toy_{start.call_id}", "type": "toy_call", "status": "in_progress", "arguments": ""}

    def added(self, call):
        return [("response.toy_call.in_progress", {})]

    def delta(self, call, text):
        return [("response.toy_call.delta", {"delta": text})]

    def complete(self, call):
        call.item["arguments"] = call.arguments
        return [], True

    async def run(self, call, composer):
        text = orjson.loads(call.arguments or "{}").get("text", "")
        Toy.runs.append(text)
        yield composer.call_events(call, [("response.toy_call.running", {})])
        mode = self.mode
        if mode == "hang" or text == "hang":
            await asyncio.sleep(10)
        if mode == "raise" or text == "raise":
            raise RuntimeError("toy bug")
        if mode == "open" or text == "open":
            return
        if text.startswith("slow"):
            await asyncio.sleep(0.05)
        call.item["secret"] = f"echo:{text}"
        yield composer.end_call(call, "completed", [("response.toy_call.completed", {})])

    def failed(self, call, message):
        call.item["error"] = message
        return "failed", [("response.toy_call.failed", {})]

    def annotator(self):
        return Marker() if self.mode == "marker" else None

    async def aclose(self):
        pass


KIT = Kit(name="toy", types=("toy",), item_types=("toy_call",), parse=parse, echo=lambda d: {"type": "toy"},
          normalize=normalize, lower=lower, start=Toy, shown=shown, includes=("toy_call.secret",))
