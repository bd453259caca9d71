"""`responses_gateway.client.read_stream` on OpenAI's recorded streams, intact and deliberately damaged.

Every variant must give the same final Response as the recording's own terminal event (for a stream cut
short: a failed Response saying so), and the events it yields must form a well-formed stream (run through
the same stream checker as the gateway's output, renumbered).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from responses_gateway.client import Accumulator, Event, read_stream
from tests.support.fake_responses import (
    DROP,
    ENDS_EARLY,
    FakeResponsesUpstream,
    Stream,
    damaged,
    events_of,
    frames,
    stream_recordings,
    terminal_response,
    text_response_stream,
    to_chunks,
    variants,
)
from tests.support.stream_check import check_stream

RECORDINGS = stream_recordings()
CASES = [(r, v) for r in RECORDINGS for v in variants(r)]


def _bytes(chunks) -> list[bytes]:
    return [c if isinstance(c, bytes) else c.encode() for c in chunks if c is not DROP]


def _normalized(events: list[Event]) -> str:
    """The reader's events (unknown ones left out) as a stream with fresh sequence numbers."""
    out = []
    for ev in events:
        if ev.known:
            out.append({**ev.data, "sequence_number": len(out)})
    return frames(out)


@pytest.fixture(scope="module")
def fake():
    with FakeResponsesUpstream() as up:
        yield up


def test_recordings_present():
    names = {r.name for r in RECORDINGS}
    assert {"text-single-stream", "tool-function-tool_loop-step1-stream",
            "tool-function-tool_loop-step2-omit-tools-stream", "text-max_output_tokens-incomplete-stream",
            "error-context_length_exceeded-stream"} <= names


@pytest.mark.parametrize(("recording", "variant"), CASES, ids=[f"{r.name}:{v}" for r, v in CASES])
def test_same_final_response(recording, variant):
    expected = terminal_response(recording)
    reader = read_stream(_bytes(damaged(recording, variant)))
    events = list(reader)
    response = reader.response
    if variant in ENDS_EARLY:
        assert response["status"] == "failed"
        if expected["status"] == "failed" and variant == "no-terminal":  # its error event came
            assert response["error"] == expected["error"]
        else:
            assert response["error"]["code"] == "stream_ended"
            assert "ended before its terminal event" in response["error"]["message"]
        assert reader.ended_early
        assert events[-1].type == "response.failed" and events[-1].synthesized
        assert response["id"] == expected["id"]
        finished = {item["id"]: item for item in expected["output"]}
        for item in response["output"]:  # what had finished is there as it was; the rest closed as incomplete
            assert item == finished.get(item["id"]) or item.get("status") == "incomplete"
    else:
        assert response == expected
        assert not reader.ended_early
    terminals = [e for e in events if e.type in ("response.completed", "response.incomplete", "response.failed")]
    assert len(terminals) == 1 and terminals[0] is events[-1]
    if any(e.type == "response.in_progress" for e in events):
        result = check_stream(_normalized(events), require_done=False)
        assert result.response["output"] == response["output"]


@pytest.mark.parametrize("variant", ["original", "shuffled+bare-terminal", "late-scaffold", "missing-done"])
def test_deltas_add_up(variant):
    """Whatever the damage, the text deltas a reader yields spell the final text, in order."""
    recording = next(r for r in RECORDINGS if r.name.startswith("tool-function-tool_loop-step2"))
    reader = read_stream(_bytes(damaged(recording, variant)))
    text = "".join(e.delta for e in reader if e.type == "response.output_text.delta")
    assert text == reader.output_text == \
        "The weather in Boston, MA is sunny, 72°F. Would you like an hourly forecast or a 7-day outlook?"


def test_arguments_stay_strings_until_the_end():
    recording = next(r for r in RECORDINGS if r.name.startswith("tool-function-tool_loop-step1"))
    acc = Accumulator()
    seen = []
    for chunk in _bytes(damaged(recording, "rechunked")):
        for ev in acc.feed(chunk):
            if ev.type == "response.function_call_arguments.delta":
                seen.append(acc.response["output"][1]["arguments"])
    acc.close()
    assert seen[0] == '{"' and seen[-1] == '{"location":"Boston, MA"}'
    assert acc.response["output"][1]["arguments"] == '{"location":"Boston, MA"}'


def test_unknown_events_are_exposed_and_ignored():
    recording = next(r for r in RECORDINGS if r.name == "text-single-stream")
    reader = read_stream(_bytes(damaged(recording, "unknown-events")))
    events = list(reader)
    unknown = [e for e in events if not e.known]
    assert unknown and unknown == reader.unknown
    assert {e.type for e in unknown} == {"response.future_feature.delta", "response.keepalive"}
    assert reader.response == terminal_response(recording)


def test_duplicates_are_dropped():
    recording = next(r for r in RECORDINGS if r.name == "text-single-stream")
    reader = read_stream(_bytes(damaged(recording, "duplicates")))
    events = list(reader)
    assert [e.delta for e in events if e.type == "response.output_text.delta"] == ["Paris", "."]
    assert reader.accumulator._reorder.duplicates > 0


def test_missing_done_events_are_synthesized():
    recording = next(r for r in RECORDINGS if r.name == "text-single-stream")
    events = list(read_stream(_bytes(damaged(recording, "missing-done"))))
    synthesized = [e.type for e in events if e.synthesized]
    assert synthesized == ["response.output_item.done", "response.output_text.done", "response.content_part.done",
                           "response.output_item.done"]
    done = [e for e in events if e.type == "response.output_text.done"][0]
    assert done.text == "Paris."


def test_delta_before_added_creates_the_item():
    """Without sequence numbers, out-of-order events are correlated by item_id / output_index."""
    base = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_text.delta", **base, "delta": "Hel"},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "lo"},  # no output_index at all
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [],
                                                    "usage": {"input_tokens": 1, "output_tokens": 2}}},
    ]
    reader = read_stream(frames(events, event_lines=False) + "data: [DONE]\n\n")
    types = [(e.type, e.synthesized) for e in reader]
    assert types[:4] == [("response.created", False), ("response.output_item.added", True),
                         ("response.content_part.added", True), ("response.output_text.delta", False)]
    assert reader.response["output"] == [{
        "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}]}]
    assert reader.response["usage"] == {"input_tokens": 1, "output_tokens": 2}


def test_done_text_beyond_the_deltas_is_delivered():
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
         "delta": "Hello"},
        {"type": "response.output_text.done", "item_id": "m", "output_index": 0, "content_index": 0,
         "text": "Hello, world"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}},
    ]
    reader = read_stream(to_chunks(events))
    deltas = [e for e in reader if e.type == "response.output_text.delta"]
    assert [(d.delta, d.synthesized) for d in deltas] == [("Hello", False), (", world", True)]
    assert reader.output_text == "Hello, world"


def test_terminal_output_wins():
    """Items the terminal event carries override what the deltas built (and fill what never streamed)."""
    output = [{"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1",
               "name": "f", "arguments": '{"a": 1}'}]
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"a"'},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": output}},
    ]
    reader = read_stream(to_chunks(events))
    evs = list(reader)
    assert reader.response["output"] == output
    args = "".join(e.delta for e in evs if e.type == "response.function_call_arguments.delta")
    assert args == '{"a": 1}'
    done = [e for e in evs if e.type == "response.output_item.done"][0]
    assert done.item == output[0]


def test_terminal_items_match_streamed_ones_by_kind_order_and_name():
    """A terminal `output` that renames a streamed call (new id and call_id) and leaves out an empty message
    streamed before it (vLLM with a Qwen3.5 model): each item comes out once, under the ids first streamed."""
    call = {"id": "aa26", "type": "function_call", "status": "in_progress", "call_id": "call_a5c5",
            "name": "get_weather", "arguments": ""}
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}},
        {"type": "response.output_item.added", "output_index": 1, "item": call},
        {"type": "response.function_call_arguments.delta", "item_id": "aa26", "output_index": 1, "delta": "{}"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [
            {**call, "id": "fc_aa5f", "call_id": "chatcmpl-tool-8af8", "status": "completed", "arguments": "{}"}]}},
    ]
    evs = list(read_stream(to_chunks(events)))
    done = sorted((e.output_index, e.item) for e in evs if e.type == "response.output_item.done")
    assert [(index, i["type"], i["id"], i.get("call_id")) for index, i in done] == \
        [(0, "message", "msg_1", None), (1, "function_call", "aa26", "call_a5c5")]


def test_sequence_gap_is_not_waited_for_forever():
    chunks = text_response_stream([{"id": "m", "type": "message", "role": "assistant", "status": "completed",
                                    "content": [{"type": "output_text", "text": "abcdef", "annotations": [],
                                                 "logprobs": []}]}])
    events = [e for c in chunks for e in events_of_chunk(c)]
    del events[3]  # a number that never comes (content_part.added)
    acc = Accumulator(window=2)
    released = []
    for ev in events[:-1]:
        released += acc.feed_event(ev)
    assert any(e.type == "response.output_text.delta" for e in released)  # not all held back
    released += acc.feed_event(events[-1])
    assert acc.response["output"][0]["content"][0]["text"] == "abcdef"


def events_of_chunk(chunk: str) -> list[dict]:
    import json

    return [json.loads(line[6:]) for line in chunk.split("\n") if line.startswith("data: ")]


def test_reused_sequence_numbers_fall_back_to_arrival_order():
    base = {"item_id": "m", "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "output": []}},
        {"type": "response.output_text.delta", "sequence_number": 1, **base, "delta": "a"},
        {"type": "response.output_text.delta", "sequence_number": 1, **base, "delta": "b"},  # same type: dup
        {"type": "response.output_text.done", "sequence_number": 1, **base, "text": "ab"},  # numbering broken
        {"type": "response.completed", "sequence_number": 1, "response": {"id": "r", "status": "completed"}},
    ]
    reader = read_stream(to_chunks(events))
    list(reader)
    assert reader.output_text == "ab"
    assert reader.status == "completed"


def test_error_event_then_end():
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "error", "code": "server_error", "message": "boom", "param": None},
    ]
    reader = read_stream(to_chunks(events))
    list(reader)
    assert reader.response["status"] == "failed"
    assert reader.response["error"] == {"code": "server_error", "message": "boom"}


def test_not_json_is_skipped():
    reader = read_stream(b"data: {not json\n\n" + frames([
        {"type": "response.created", "response": {"id": "r", "output": []}},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}},
    ]).encode())
    events = list(reader)
    assert events[0].known is False and events[0].type == ""
    assert events[0].data == {"event": None, "data": "{not json"}
    assert reader.status == "completed"


def test_event_attributes():
    ev = Event("response.output_text.delta", {"type": "response.output_text.delta", "delta": "x"})
    assert ev.delta == "x" and ev["delta"] == "x" and ev.get("nope") is None
    with pytest.raises(AttributeError):
        _ = ev.nope


# --------------------------------------------------------------------------- over real HTTP


@pytest.mark.parametrize("variant", ["original", "shuffled", "dropped"])
def test_sync_over_http(fake, variant):
    recording = next(r for r in RECORDINGS if r.name.startswith("tool-function-tool_loop-step2"))
    fake.reset()
    fake.enqueue(Stream(damaged(recording, variant)))
    with httpx.Client() as http, http.stream("POST", f"{fake.base_url}/responses", json={}) as resp:
        reader = read_stream(resp.iter_bytes())
        events = list(reader)
    if variant == "dropped":
        assert reader.status == "failed"
        assert reader.exception is not None  # httpx saw the connection cut mid-body
        assert reader.exception.__class__.__name__ in reader.response["error"]["message"]
    else:
        assert reader.response == terminal_response(recording)
        assert events[-1].type == "response.completed"


def test_async_over_http(fake):
    recording = next(r for r in RECORDINGS if r.name == "text-max_output_tokens-incomplete-stream")
    fake.reset()
    fake.enqueue(Stream(damaged(recording, "missing-done+bare-terminal")))

    async def main():
        async with httpx.AsyncClient() as http, \
                http.stream("POST", f"{fake.base_url}/responses", json={}) as resp:
            reader = read_stream(resp.aiter_bytes())
            types = [e.type async for e in reader]
            return reader, types

    reader, types = asyncio.run(main())
    assert types[-1] == "response.incomplete"
    assert reader.response == terminal_response(recording)
    assert reader.response["incomplete_details"] == {"reason": "max_output_tokens"}


def test_async_iteration_of_plain_bytes():
    recording = next(r for r in RECORDINGS if r.name == "text-single-stream")

    async def main():
        return await read_stream(recording.sse_text.encode()).acollect()

    assert asyncio.run(main()) == terminal_response(recording)


def test_sync_iteration_of_async_source_is_refused():
    async def chunks():
        yield b""

    with pytest.raises(TypeError):
        list(read_stream(chunks()))


def test_events_of_recordings_roundtrip():
    """The damage helpers start from exactly what was recorded."""
    for recording in RECORDINGS:
        assert read_stream(recording.sse_text).collect() == terminal_response(recording)
        assert events_of(recording)[0]["type"] == "response.created"


def test_long_stream_keeps_memory_bounded():
    text = "".join(f"w{i} " for i in range(20000))
    output = [{"id": "m", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}]
    chunks = text_response_stream(output)
    events = [e for c in chunks for e in events_of_chunk(c)]
    head, tail = events[:5], events[5:]
    deltas = [{"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
               "delta": f"w{i} ", "logprobs": []} for i in range(20000)]
    stream = [{**e, "sequence_number": n} for n, e in enumerate(head[:4] + deltas + tail[1:])]
    reader = read_stream(to_chunks(stream))
    assert sum(e.type == "response.output_text.delta" for e in reader) == 20000
    assert reader.output_text == text
    assert len(reader.accumulator._reorder.seen) <= 8192 + 1
