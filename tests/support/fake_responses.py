"""A fake Responses API upstream (vLLM's /v1/responses, OpenAI, another gateway) on loopback.

Same API as the fake Chat Completions server (it is one, serving `POST /v1/responses` instead): enqueue
scripts, read `requests`, cut a stream with `DROP`. It replays OpenAI's recorded streams byte for byte, and
deliberately damaged variants of them that a tolerant reader must survive:

    with FakeResponsesUpstream() as up:
        up.enqueue(replay(recording))                     # the recorded bytes, unchanged
        up.enqueue(Stream(damaged(recording, "shuffled")))
        ...  # point the gateway at up.base_url
        assert up.requests[0].body["store"] is False

Damages (combine them with "+", applied left to right): see `DAMAGES`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from .fake_chat import (
    DROP,
    JSON_CONTENT_TYPE,
    SSE_CONTENT_TYPE,
    FakeChatUpstream,
    Json,
    RecordedRequest,
    Script,
    Sleep,
    Stream,
    dumps,
    error_json,
    replay,
)
from .recordings import Recording, load_recording, responses_recordings

__all__ = [
    "DAMAGES", "DROP", "ENDS_EARLY", "JSON_CONTENT_TYPE", "SSE_CONTENT_TYPE", "FakeResponsesUpstream", "Json", "RecordedRequest",
    "Script", "Sleep", "Stream", "damaged", "error_json", "events_of", "frames", "replay", "stream_recordings",
    "terminal_response", "text_response_stream", "to_chunks", "variants",
]

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def stream_recordings() -> list[Recording]:
    """Every recorded streamed exchange (all answered 200 with an SSE body)."""
    recordings = [load_recording(p) for p in responses_recordings()]
    return [r for r in recordings if r.is_stream]


# --------------------------------------------------------------------------- events <-> bytes


def events_of(recording: Recording) -> list[dict]:
    """The JSON events of a recorded stream, in the order they arrived."""
    out = []
    for block in recording.sse_text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data and data[0] != "[DONE]":
            out.append(json.loads("\n".join(data)))
    return out


def terminal_response(recording: Recording) -> dict | None:
    for ev in events_of(recording):
        if ev["type"] in TERMINAL:
            return ev["response"]
    return None


def frames(events: Sequence[dict], *, event_lines: bool = True) -> str:
    """Events as OpenAI frames them: `event: <type>` and one compact `data:` line."""
    out = []
    for ev in events:
        head = f"event: {ev['type']}\n" if event_lines else ""
        out.append(f"{head}data: {dumps(ev)}\n\n")
    return "".join(out)


def to_chunks(events: Sequence[dict], *, done: bool = False, event_lines: bool = True) -> list[str]:
    """One chunk per event (and `data: [DONE]` when asked)."""
    chunks = [frames([ev], event_lines=event_lines) for ev in events]
    if done:
        chunks.append("data: [DONE]\n\n")
    return chunks


# --------------------------------------------------------------------------- damage


def _renumber(events: list[dict]) -> list[dict]:
    """Contiguous sequence numbers again, as a server that really sent this sequence would number it."""
    return [{**ev, "sequence_number": i} if "sequence_number" in ev else ev for i, ev in enumerate(events)]


def _item_of(ev: dict) -> Any:
    return ev.get("output_index", ev.get("item_id"))


def _shuffled(events: list[dict], rng: random.Random) -> list[dict]:
    """Each item's events (added, parts, deltas, dones) in a random order, in the slots the item had.

    Sequence numbers travel with their events: a reader can put them back in order.
    """
    out = list(events)
    slots: dict[Any, list[int]] = {}
    for i, ev in enumerate(events):
        if ev["type"] not in TERMINAL and _item_of(ev) is not None:
            slots.setdefault(_item_of(ev), []).append(i)
    for positions in slots.values():
        picked = [events[i] for i in positions]
        rng.shuffle(picked)
        for i, ev in zip(positions, picked, strict=True):
            out[i] = ev
    return out


def _missing_done(events: list[dict], rng: random.Random) -> list[dict]:
    """No `.done` event except the terminal one (some vLLM versions never close the message item)."""
    return _renumber([ev for ev in events if not ev["type"].endswith(".done")])


def _unknown_events(events: list[dict], rng: random.Random) -> list[dict]:
    """Event types from a future API version, between the lifecycle events and among every item's events."""
    out: list[dict] = []
    for i, ev in enumerate(events):
        if i and ev["type"] not in TERMINAL and i % 3 == 0:
            out.append({"type": "response.future_feature.delta", "sequence_number": 0, "delta": {"x": i},
                        **({"output_index": ev["output_index"]} if "output_index" in ev else {})})
        out.append(ev)
        if ev["type"] == "response.in_progress":
            out.append({"type": "response.keepalive", "sequence_number": 0})
    return _renumber(out)


def _duplicates(events: list[dict], rng: random.Random) -> list[dict]:
    """Every event twice: again at once, or again three events later (a retrying proxy)."""
    out: list[dict] = []
    pending: list[tuple[int, dict]] = []
    for i, ev in enumerate(events):
        out.append(ev)
        out.extend(e for due, e in pending if due == i)
        pending = [(due, e) for due, e in pending if due != i]
        if i % 2:
            out.append(ev)
        else:
            pending.append((i + 3, ev))
    return out + [e for _, e in pending]


def _late_scaffold(events: list[dict], rng: random.Random) -> list[dict]:
    """No sequence numbers; each item's deltas start before its `.added` events, and a text's `.done`
    comes before its last delta. Only correlation by output_index / item_id can put this together."""
    bare = [{k: v for k, v in ev.items() if k != "sequence_number"} for ev in events]
    out = list(bare)
    by_item: dict[Any, list[int]] = {}
    for i, ev in enumerate(bare):
        if ev["type"] not in TERMINAL and _item_of(ev) is not None:
            by_item.setdefault(_item_of(ev), []).append(i)
    for positions in by_item.values():
        group = [bare[i] for i in positions]
        added = [ev for ev in group if ev["type"].endswith(".added")]
        deltas = [ev for ev in group if ev["type"].endswith(".delta")]
        rest = [ev for ev in group if ev not in added and ev not in deltas]
        if deltas:
            text_done = [ev for ev in rest if ev["type"].endswith(".done") and "part" not in ev and "item" not in ev]
            others = [ev for ev in rest if ev not in text_done]
            order = deltas[:1] + added + deltas[1:-1] + text_done + deltas[-1:] + others if len(deltas) > 1 \
                else deltas + added + rest
        else:
            order = rest + added  # an item without deltas: done before added
        for i, ev in zip(positions, order, strict=True):
            out[i] = ev
    return out


def _bare_terminal(events: list[dict], rng: random.Random) -> list[dict]:
    """The terminal event's response without `output`: the items must come from the events."""
    return [{**ev, "response": {**ev["response"], "output": []}} if ev["type"] in TERMINAL else ev
            for ev in events]


def _no_terminal(events: list[dict], rng: random.Random) -> list[dict]:
    """The body ends cleanly, but before the terminal event (a server that gave up without saying so)."""
    return [ev for ev in events if ev["type"] not in TERMINAL]


DAMAGES: dict[str, Callable[[list[dict], random.Random], list[dict]]] = {
    "shuffled": _shuffled,
    "missing-done": _missing_done,
    "unknown-events": _unknown_events,
    "duplicates": _duplicates,
    "late-scaffold": _late_scaffold,
    "bare-terminal": _bare_terminal,
    "no-terminal": _no_terminal,
}

# The variants every recording is replayed in (besides itself, "original", and "dropped").
VARIANTS = (
    "rechunked",
    "shuffled",
    "shuffled+bare-terminal",
    "missing-done",
    "missing-done+bare-terminal",
    "unknown-events",
    "duplicates",
    "duplicates+shuffled",
    "late-scaffold",
    "late-scaffold+bare-terminal",
    "unknown-events+missing-done+shuffled",
    "no-terminal",
)

#: Variants whose stream ends without its terminal event.
ENDS_EARLY = ("no-terminal", "dropped")


def damaged(recording: Recording, name: str, seed: int = 7) -> list[str | Any]:
    """The recording's stream with the named damage(s) applied, as chunks for `Stream`.

    "original": the recorded chunks unchanged. "rechunked": the same bytes cut every 7 bytes (frames and
    multi-byte characters split). "dropped": the first half of the bytes, then the connection is cut.
    """
    if name == "original":
        return list(recording.sse_chunks or ())
    raw = recording.sse_text.encode()
    if name == "rechunked":
        return [raw[i:i + 7] for i in range(0, len(raw), 7)]
    if name == "dropped":
        return [raw[: len(raw) // 2], DROP]
    rng = random.Random(seed)
    events = events_of(recording)
    for part in name.split("+"):
        events = DAMAGES[part](events, rng)
    return to_chunks(events)


def variants(recording: Recording) -> list[str]:
    return ["original", *VARIANTS, "dropped"]


# --------------------------------------------------------------------------- synthetic streams


def text_response_stream(output: list[dict], *, status: str = "completed", usage: dict | None = None,
                         incomplete_reason: str | None = None, response_id: str = "resp_fake",
                         model: str = "fake-model") -> list[str]:
    """A well-formed OpenAI-style stream that produces `output` (message, reasoning, function_call and
    custom_tool_call items in their final form), streaming every text in two deltas."""
    base = {"id": response_id, "object": "response", "created_at": 1700000000, "status": "in_progress",
            "model": model, "output": [], "usage": None, "error": None, "incomplete_details": None}
    events: list[dict] = [{"type": "response.created", "response": base},
                          {"type": "response.in_progress", "response": base}]

    def halves(text: str) -> list[str]:
        cut = len(text) // 2
        return [p for p in (text[:cut], text[cut:]) if p]

    for index, item in enumerate(output):
        kind = item["type"]
        ref = {"item_id": item["id"], "output_index": index}
        added = {**item}
        if kind == "message":
            added.update(content=[], status="in_progress")
        elif kind == "reasoning":
            added.update(summary=[])
            added.pop("content", None)
            added.pop("encrypted_content", None)
        elif kind == "function_call":
            added.update(arguments="", status="in_progress")
        elif kind == "custom_tool_call":
            added.update(input="", status="in_progress")
        events.append({"type": "response.output_item.added", "output_index": index, "item": added})
        if kind == "message":
            for ci, part in enumerate(item["content"]):
                pref = "response.output_text" if part["type"] == "output_text" else "response.refusal"
                field = "text" if part["type"] == "output_text" else "refusal"
                empty = {**part, field: ""}
                events.append({"type": "response.content_part.added", **ref, "content_index": ci, "part": empty})
                for piece in halves(part[field]):
                    delta = {"type": f"{pref}.delta", **ref, "content_index": ci, "delta": piece}
                    if field == "text":
                        delta["logprobs"] = []
                    events.append(delta)
                done = {"type": f"{pref}.done", **ref, "content_index": ci, field: part[field]}
                events.append(done)
                events.append({"type": "response.content_part.done", **ref, "content_index": ci, "part": part})
        elif kind == "reasoning":
            for si, part in enumerate(item.get("summary") or ()):
                events.append({"type": "response.reasoning_summary_part.added", **ref, "summary_index": si,
                               "part": {"type": "summary_text", "text": ""}})
                for piece in halves(part["text"]):
                    events.append({"type": "response.reasoning_summary_text.delta", **ref, "summary_index": si,
                                   "delta": piece})
                events.append({"type": "response.reasoning_summary_text.done", **ref, "summary_index": si,
                               "text": part["text"]})
                events.append({"type": "response.reasoning_summary_part.done", **ref, "summary_index": si,
                               "part": part})
            for ci, part in enumerate(item.get("content") or ()):
                events.append({"type": "response.content_part.added", **ref, "content_index": ci,
                               "part": {"type": "reasoning_text", "text": ""}})
                for piece in halves(part["text"]):
                    events.append({"type": "response.reasoning_text.delta", **ref, "content_index": ci,
                                   "delta": piece})
                events.append({"type": "response.reasoning_text.done", **ref, "content_index": ci,
                               "text": part["text"]})
                events.append({"type": "response.content_part.done", **ref, "content_index": ci, "part": part})
        elif kind in ("function_call", "custom_tool_call"):
            field = "arguments" if kind == "function_call" else "input"
            pref = "response.function_call_arguments" if kind == "function_call" else "response.custom_tool_call_input"
            for piece in halves(item[field]):
                events.append({"type": f"{pref}.delta", **ref, "delta": piece})
            events.append({"type": f"{pref}.done", **ref, field: item[field]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    final = {**base, "status": status, "output": output, "usage": usage}
    if incomplete_reason:
        final["incomplete_details"] = {"reason": incomplete_reason}
    events.append({"type": f"response.{status}", "response": final})
    return to_chunks(_renumber([{**ev, "sequence_number": 0} for ev in events]))


# --------------------------------------------------------------------------- server


class FakeResponsesUpstream(FakeChatUpstream):
    """The fake Chat Completions server's machinery, answering `POST /v1/responses`."""

    POST_PATH = "/v1/responses"
