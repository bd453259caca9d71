"""The stream checker and the schema validator must accept OpenAI's real streams and catch every broken one.

If a rule here stops firing, gateway tests relying on it silently pass; if a real stream stops passing, the
checkers demand something OpenAI itself does not do.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml
from jsonschema import ValidationError

from tests.support.recordings import RECORDINGS_DIR
from tests.support.schema import (
    DIFFERENCES,
    SPEC_PATH,
    event_types,
    validate_event,
    validate_request,
    validate_response,
)
from tests.support.stream_check import KNOWN_EVENT_TYPES, RULES, check_stream, inspect_stream, parse_sse

RECORDINGS = RECORDINGS_DIR / "openai_responses"
RECORDED = {path.name: yaml.safe_load(path.read_text()) for path in sorted(RECORDINGS.glob("*.yaml"))}
STREAMS = [name for name, rec in RECORDED.items() if "sse" in rec["response"]]
OK_BODIES = [name for name, rec in RECORDED.items() if rec["response"].get("status_code") == 200]


def recorded_sse(name: str) -> str:
    return "".join(RECORDED[name]["response"]["sse"])


# --- OpenAI's real traffic passes -------------------------------------------------------------------------


def test_recordings_are_there():
    assert len(STREAMS) >= 5, STREAMS


@pytest.mark.parametrize("name", STREAMS)
def test_recorded_stream_passes(name):
    result = check_stream(recorded_sse(name), require_done=False)
    for event in result.events:
        validate_event(event, upstream=True)
    assert result.types[:2] == ["response.created", "response.in_progress"]


@pytest.mark.parametrize("name", [n for n in OK_BODIES if n not in STREAMS])
def test_recorded_response_body_validates(name):
    validate_response(RECORDED[name]["response"]["body"], upstream=True)


@pytest.mark.parametrize("name", OK_BODIES)
def test_recorded_request_validates(name):
    validate_request(RECORDED[name]["request"]["body"])


def test_recorded_text():
    assert check_stream(recorded_sse("text-single-stream.yaml"), require_done=False).text == "Paris."


def test_checker_and_schemas_know_the_same_events():
    assert event_types() == KNOWN_EVENT_TYPES


# --- a synthetic gateway stream using every kind of item ---------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": None,
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        "strict": True,
    },
    {"type": "custom", "name": "run_sql", "description": "Run one SQL query"},
    {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/sse"},
]
USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 5},
    "total_tokens": 30,
}
STATUS = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}


def response(status: str = "in_progress", output: list | None = None) -> dict:
    done = status != "in_progress"
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767368377,
        "completed_at": 1767368378 if status == "completed" else None,
        "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "model": "test-model",
        "previous_response_id": None,
        "instructions": None,
        "output": output or [],
        "error": {"code": "server_error", "message": "upstream went away"} if status == "failed" else None,
        "tools": TOOLS,
        "tool_choice": "auto",
        "truncation": "disabled",
        "parallel_tool_calls": True,
        "text": {"format": {"type": "text"}},
        "top_p": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "temperature": 1.0,
        "reasoning": {"effort": None, "summary": None},
        "usage": USAGE if done else None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "store": True,
        "background": False,
        "service_tier": "default",
        "metadata": {},
        "safety_identifier": None,
        "prompt_cache_key": None,
    }


def ref(index: int, item_id: str, **fields) -> dict:
    return {"item_id": item_id, "output_index": index, **fields}


def message(index: int, chunks: list[str], item_id: str = "msg_1") -> list[dict]:
    text = "".join(chunks)
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
    at = ref(index, item_id, content_index=0)
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        *({"type": "response.output_text.delta", **at, "delta": c, "logprobs": []} for c in chunks),
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "status": "completed", "content": [part]},
        },
    ]


def refusal(index: int) -> list[dict]:
    item = {"type": "message", "id": "msg_r", "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "refusal", "refusal": "I can't."}
    at = ref(index, "msg_r", content_index=0)
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.content_part.added", **at, "part": {**part, "refusal": ""}},
        {"type": "response.refusal.delta", **at, "delta": "I can"},
        {"type": "response.refusal.delta", **at, "delta": "'t."},
        {"type": "response.refusal.done", **at, "refusal": "I can't."},
        {"type": "response.content_part.done", **at, "part": part},
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "status": "completed", "content": [part]},
        },
    ]


def reasoning(index: int, raw_events: str) -> list[dict]:
    item_id = f"rs_{index}"
    item = {"type": "reasoning", "id": item_id, "summary": []}
    summary = {"type": "summary_text", "text": "Thinking about it."}
    content = {"type": "reasoning_text", "text": "Let me think."}
    in_summary, in_content = ref(index, item_id, summary_index=0), ref(index, item_id, content_index=0)
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.reasoning_summary_part.added", **in_summary, "part": {**summary, "text": ""}},
        {"type": "response.reasoning_summary_text.delta", **in_summary, "delta": "Thinking"},
        {"type": "response.reasoning_summary_text.delta", **in_summary, "delta": " about it."},
        {"type": "response.reasoning_summary_text.done", **in_summary, "text": summary["text"]},
        {"type": "response.reasoning_summary_part.done", **in_summary, "part": summary},
        {"type": "response.content_part.added", **in_content, "part": {**content, "text": ""}},
        {"type": f"{raw_events}.delta", **in_content, "delta": "Let me "},
        {"type": f"{raw_events}.delta", **in_content, "delta": "think."},
        {"type": f"{raw_events}.done", **in_content, "text": content["text"]},
        {"type": "response.content_part.done", **in_content, "part": content},
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "summary": [summary], "content": [content]},
        },
    ]


#: (event prefix, streamed field, the item as announced) of the items whose one text field streams in deltas
FUNCTION_CALL = (
    "response.function_call_arguments",
    "arguments",
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "status": "in_progress",
    },
)
CUSTOM_TOOL_CALL = (
    "response.custom_tool_call_input",
    "input",
    {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "run_sql"},
)
MCP_CALL = (
    "response.mcp_call_arguments",
    "arguments",
    {"type": "mcp_call", "id": "mcp_1", "name": "search", "server_label": "docs", "status": "in_progress"},
)


def tool_call(index: int, kind: tuple, chunks: list[str]) -> list[dict]:
    prefix, field, item = kind
    item = {**item, field: ""}
    whole = "".join(chunks)
    done = {**item, field: whole} | ({"status": "completed"} if "status" in item else {})
    at = ref(index, item["id"])
    body = [
        *({"type": f"{prefix}.delta", **at, "delta": c} for c in chunks),
        {"type": f"{prefix}.done", **at, field: whole},
    ]
    if kind is MCP_CALL:
        done["output"] = '{"results": []}'
        body = [
            {"type": "response.mcp_call.in_progress", **at},
            *body,
            {"type": "response.mcp_call.completed", **at},
        ]
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        *body,
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]


def mcp_list_tools(index: int) -> list[dict]:
    item = {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "docs", "tools": []}
    done = {**item, "tools": [{"name": "search", "input_schema": {"type": "object"}, "description": None}]}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.mcp_list_tools.in_progress", **ref(index, "mcpl_1")},
        {"type": "response.mcp_list_tools.completed", **ref(index, "mcpl_1")},
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]


def image_call(index: int, partials: int = 2, status: str = "completed") -> list[dict]:
    """An image_generation_call as OpenAI streams it: in_progress, generating, the partials, completed."""
    item = {"type": "image_generation_call", "id": "ig_1", "status": "in_progress"}
    at = ref(index, "ig_1")
    done = {**item, "status": status, "result": "iVBORw0KGgo=" if status == "completed" else None,
            "revised_prompt": "a cat", "size": "1024x1024", "quality": "medium", "output_format": "png",
            "background": "opaque", "action": "generate"}
    if status == "failed":
        done["error"] = {"type": "invalid_request_error", "code": "invalid_value", "param": "size",
                         "message": "Invalid value: '9x9'."}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.image_generation_call.in_progress", **at},
        {"type": "response.image_generation_call.generating", **at},
        *({"type": "response.image_generation_call.partial_image", **at, "partial_image_b64": "iVBORw0KGgo=",
           "partial_image_index": i, "size": "1024x1024", "quality": "medium", "output_format": "png",
           "background": "opaque"} for i in range(partials)),
        *([{"type": "response.image_generation_call.completed", **at}] if status == "completed" else []),
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]


def stream(*items: list[dict], terminal: str = "response.completed") -> list[dict]:
    body = [event for events in items for event in events]
    done = sorted(
        (e for e in body if e["type"] == "response.output_item.done"), key=lambda e: e["output_index"]
    )
    return [
        {"type": "response.created", "response": response()},
        {"type": "response.in_progress", "response": response()},
        *body,
        {"type": terminal, "response": response(STATUS[terminal], copy.deepcopy([e["item"] for e in done]))},
    ]


def encode(events: list[dict], *, done: bool = True) -> str:
    """Serialize as the gateway does; events without a sequence_number get their position."""
    frames = []
    for i, event in enumerate(events):
        event = {**event, "sequence_number": event.get("sequence_number", i)}
        frames.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(frames) + ("data: [DONE]\n\n" if done else "")


def rich() -> list[dict]:
    return stream(
        reasoning(0, "response.reasoning_text"),
        reasoning(1, "response.reasoning"),
        message(2, ["Hel", "lo"]),
        refusal(3),
        tool_call(4, FUNCTION_CALL, ['{"location":', '"Boston"}']),
        tool_call(5, CUSTOM_TOOL_CALL, ["SELECT ", "1"]),
        mcp_list_tools(6),
        tool_call(7, MCP_CALL, ['{"q":', '"x"}']),
        image_call(8),
        image_call(9, 0, "failed"),
    )


def failed() -> list[dict]:
    """A failure mid-stream: the gateway closes what it opened, then sends error and response.failed."""
    events = stream(message(0, ["Hi"]), terminal="response.failed")
    error = {"type": "server_error", "code": "server_error", "message": "upstream went away", "param": None}
    top_level = {"code": error["code"], "message": error["message"], "param": None}  # for the openai SDK
    return [*events[:-1], {"type": "error", "error": error, **top_level}, events[-1]]


def incomplete() -> list[dict]:
    return stream(message(0, ["a"]), terminal="response.incomplete")


@pytest.mark.parametrize("make", [rich, failed, incomplete])
def test_synthetic_stream_passes_strictly(make):
    result = check_stream(encode(make()).encode())
    for event in result.events:
        validate_event(event)
    validate_response(result.response)
    assert result.response["status"] == result.terminal["type"].removeprefix("response.")


def test_result_accessors():
    result = check_stream(encode(rich()))
    assert result.text == "Hello"
    assert result.types[0] == "response.created" and result.types[-1] == "response.completed"
    assert result.response is result.terminal["response"]
    assert [item["type"] for item in result.response["output"]][:3] == ["reasoning", "reasoning", "message"]


def test_queued_may_open_the_stream():
    events = stream(message(0, ["a"]))
    queued = {"type": "response.queued", "response": response("queued")}
    check_stream(encode([queued, *events]))


# --- every rule fires ----------------------------------------------------------------------------------------


def simple() -> list[dict]:
    return stream(message(0, ["Hel", "lo"]), tool_call(1, FUNCTION_CALL, ["{}"]))


def index_of(events: list[dict], type_: str) -> int:
    return next(i for i, e in enumerate(events) if e["type"] == type_)


def move_before(events: list[dict], type_: str, before: str) -> list[dict]:
    event = events.pop(index_of(events, type_))
    events.insert(index_of(events, before), event)
    return events


def drop(events: list[dict], type_: str) -> list[dict]:
    del events[index_of(events, type_)]
    return events


def edit(events: list[dict], type_: str, **fields) -> list[dict]:
    events[index_of(events, type_)].update(fields)
    return events


def edit_done_item(events: list[dict], output_index: int, **fields) -> list[dict]:
    for e in events:
        if e["type"] == "response.output_item.done" and e["output_index"] == output_index:
            e["item"] = {**e["item"], **fields}
    return events


def numbered_with_gap(events: list[dict]) -> list[dict]:
    return [{**e, "sequence_number": i + (i >= 5)} for i, e in enumerate(events)]


def output_text_changed(events: list[dict]) -> list[dict]:
    events[-1]["response"]["output"][0]["content"][0]["text"] = "Hello!"
    return events


def terminal_twice(events: list[dict]) -> list[dict]:
    return [*events, copy.deepcopy(events[-1])]


def second_item_skips_index(events: list[dict]) -> list[dict]:
    for e in events:
        if e.get("output_index") == 1:
            e["output_index"] = 2
    return events


BROKEN = {
    "sequence gap": (numbered_with_gap, r"^#6 .*sequence_number 6, expected 5"),
    "delta before its content_part.added": (
        lambda e: move_before(e, "response.output_text.delta", "response.content_part.added"),
        r"#3 response.output_text.delta: content part 0 used before its response.content_part.added",
    ),
    "delta before its output_item.added": (
        lambda e: move_before(e, "response.output_text.delta", "response.output_item.added"),
        r"#2 response.output_text.delta: output_index 0 used before its output_item.added",
    ),
    "unclosed content part": (
        lambda e: drop(e, "response.content_part.done"),
        r"response.output_item.done: content part 0 still open",
    ),
    "unclosed output item": (
        lambda e: stream([x for x in message(0, ["Hi"]) if x["type"] != "response.output_item.done"]),
        r"response.completed: output item 0 \(msg_1\) is still open",
    ),
    "done text differs from deltas": (
        lambda e: edit(e, "response.output_text.done", text="Hello!"),
        r"text of the .done event is 'Hello!' but its response.output_text.delta events add up to 'Hello'",
    ),
    "text .done missing": (
        lambda e: drop(e, "response.output_text.done"),
        r"response.content_part.done: response.output_text.done missing",
    ),
    "part text differs from deltas": (
        lambda e: edit(e, "response.content_part.done", part={"type": "output_text", "text": "Hell"}),
        r"text of the part is 'Hell'",
    ),
    "item content differs from its part": (
        lambda e: edit_done_item(e, 0, content=[]),
        r"item.content\[0\] differs from the part in response.content_part.done",
    ),
    "arguments .done differs from deltas": (
        lambda e: edit(e, "response.function_call_arguments.done", arguments="{ }"),
        r"arguments of the .done event is '\{ \}' but its response.function_call_arguments.delta",
    ),
    "item arguments differ from deltas": (
        lambda e: edit_done_item(e, 1, arguments="{ }"),
        r"response.output_item.done: arguments of the item is '\{ \}'",
    ),
    "delta after its .done": (
        lambda e: [*e[:7], e[4], *e[7:]],
        r"#7 response.output_text.delta: response.output_text event after its response.output_text.done",
    ),
    "part event after content_part.done": (
        lambda e: [*e[:8], e[4], *e[8:]],
        r"#8 response.output_text.delta: refers to content part 0 after its response.content_part.done",
    ),
    "event after output_item.done": (
        lambda e: [*e[:9], e[4], *e[9:]],
        r"#9 response.output_text.delta: refers to output item 0 after its output_item.done",
    ),
    "item_id does not match output_index": (
        lambda e: edit(e, "response.output_text.delta", item_id="msg_x"),
        r"item_id 'msg_x' but output_index 0 is 'msg_1'",
    ),
    "output_index skipped": (second_item_skips_index, r"output_index 2 announced, expected 1"),
    "two terminal events": (terminal_twice, r"event after the terminal #\d+ response.completed"),
    "output mismatch": (output_text_changed, r"response.output differs from the items"),
    "output order": (
        lambda e: edit(
            e, "response.completed", response=response("completed", e[-1]["response"]["output"][::-1])
        ),
        r"response.output differs",
    ),
    "terminal status": (
        lambda e: edit(e, "response.completed", response={**e[-1]["response"], "status": "incomplete"}),
        r"response.status is 'incomplete', not completed",
    ),
    "response id changes": (
        lambda e: edit(e, "response.completed", response={**e[-1]["response"], "id": "resp_2"}),
        r"response id 'resp_2'",
    ),
    "in_progress missing": (lambda e: drop(e, "response.in_progress"), r"stream starts with"),
    "created with output": (
        lambda e: edit(e, "response.created", response=response("in_progress", [{"type": "message"}])),
        r"#0 response.created: .*expected in_progress",
    ),
    "lifecycle event in the middle": (
        lambda e: [*e[:4], e[1], *e[4:]],
        r"lifecycle event after the stream's opening",
    ),
    "error not followed by response.failed": (
        lambda e: [*e[:-1], {"type": "error", "error": {"message": "x"}}, e[-1]],
        r"response.completed: follows an error event",
    ),
    "no terminal event": (lambda e: e[:-1], r"no terminal event"),
    "unknown event type": (
        lambda e: [*e[:2], {"type": "response.something_new"}, *e[2:]],
        r"#2 response.something_new: unknown event type",
    ),
    "summary text before its part": (
        lambda e: stream(drop(reasoning(0, "response.reasoning"), "response.reasoning_summary_part.added")),
        r"summary part 0 used before its response.reasoning_summary_part.added",
    ),
}


IMAGE_BROKEN = {
    "generating before in_progress": (lambda e: [*e[:3], e[4], e[3], *e[5:]], r"generating after nothing"),
    "partial before generating": (lambda e: [*e[:4], e[5], e[4], *e[6:]], r"partial_image after in_progress"),
    "partial index skipped": (lambda e: edit(e, "response.image_generation_call.partial_image", partial_image_index=1),
                              r"partial_image_index 1, expected 0"),
    "completed without its event": (lambda e: drop(e, "response.image_generation_call.completed"),
                                    r"done `completed` without its .completed event"),
    "completed without a result": (lambda e: edit_done_item(e, 0, result=None), r"without its .completed event or its result"),
    "in_progress twice": (lambda e: [*e[:4], e[3], *e[4:]], r"in_progress after in_progress"),
}


@pytest.mark.parametrize("case", IMAGE_BROKEN)
def test_broken_image_stream_is_caught(case):
    mutate, message_re = IMAGE_BROKEN[case]
    with pytest.raises(AssertionError, match=message_re):
        check_stream(encode(mutate(stream(image_call(0, partials=2)))))


def test_a_failed_image_call_after_completed_is_caught():
    events = stream(image_call(0, partials=1))
    events = edit_done_item(events, 0, status="failed")
    with pytest.raises(AssertionError, match=r"done `failed` after a .completed event"):
        check_stream(encode(events))


def computer_call(index: int, **action) -> list[dict]:
    """A computer_call as OpenAI streams it: added with its action, then done; no events of its own."""
    item = {"type": "computer_call", "id": "cu_1", "call_id": "call_1", "status": "in_progress",
            "pending_safety_checks": [], "action": action or {"type": "click", "x": 1, "y": 2, "button": "left"}}
    return [{"type": "response.output_item.added", "output_index": index, "item": item},
            {"type": "response.output_item.done", "output_index": index, "item": {**item, "status": "completed"}}]


def test_a_whole_computer_call_passes():
    check_stream(encode(stream(computer_call(0))))


COMPUTER_BROKEN = {
    "announced without its action": (
        lambda e: [*e[:2], {**e[2], "item": {k: v for k, v in e[2]["item"].items() if k != "action"}}, *e[3:]],
        r"a computer_call announced without its action"),
    "an argument event about it": (
        lambda e: [*e[:3], {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "cu_1",
                            "delta": "{"}, *e[3:]],
        r"an event about a computer_call before its output_item.done"),
    "done with another action": (lambda e: edit_done_item(e, 0, action={"type": "wait"}),
                                 r"the done computer_call's action differs from its .added"),
    "id without cu_": (lambda e: [e[0], e[1], {**e[2], "item": {**e[2]["item"], "id": "fc_1"}},
                                  {**e[3], "item": {**e[3]["item"], "id": "fc_1"}}, e[4]],
                       r"computer_call item with id 'fc_1', expected the prefix cu_"),
}


@pytest.mark.parametrize("case", COMPUTER_BROKEN)
def test_a_broken_computer_call_is_caught(case):
    mutate, message_re = COMPUTER_BROKEN[case]
    events = mutate(stream(computer_call(0)))
    if case == "id without cu_":
        events[-1]["response"]["output"][0]["id"] = "fc_1"
    with pytest.raises(AssertionError, match=message_re):
        check_stream(encode(events))


@pytest.mark.parametrize("case", BROKEN)
def test_broken_stream_is_caught(case):
    mutate, message_re = BROKEN[case]
    events = mutate(simple())
    with pytest.raises(AssertionError, match=message_re):
        check_stream(encode(events))


@pytest.mark.parametrize(
    ("raw", "message_re"),
    [
        (encode(simple(), done=False), r"does not end with `data: \[DONE\]`"),
        (encode(simple()) + "data: [DONE]\n\n", r"`data: \[DONE\]` before the end"),
        (encode(simple()).replace("event: response.output_text.delta", "event: delta", 1), r"line differs"),
        (encode(simple())[:-1], r"does not end with a blank line"),
        (encode(simple()).replace('"delta": "Hel"', '"delta": Hel', 1), r"data is not JSON"),
        (encode(simple()).replace("data: [DONE]", "event: done\ndata: [DONE]"), r"bare `data: \[DONE\]`"),
    ],
)
def test_broken_framing_is_caught(raw, message_re):
    with pytest.raises(AssertionError, match=message_re):
        check_stream(raw)


def test_done_optional_and_unknown_allowed_on_request():
    check_stream(encode(simple(), done=False), require_done=False)
    events = simple()
    events.insert(4, {"type": "response.something_new", "output_index": 0, "item_id": "msg_1"})
    check_stream(encode(events), allow_unknown=True)


def test_parse_sse():
    raw = b': keep-alive\r\nevent: a\r\ndata: {"x":\r\ndata:  1}\r\n\r\ndata:[DONE]\n\nevent: lost\ndata: 1'
    frames = parse_sse(raw)
    assert [(f.event, f.data) for f in frames] == [("a", '{"x":\n 1}'), (None, "[DONE]")]


# --- schema validation -----------------------------------------------------------------------------------


def test_differences_are_documented():
    assert all(diff["why"] for diff in DIFFERENCES.values())


def test_spec_forbids_no_extra_property():
    """The gateway adds fields the document lacks (top-level error fields, OpenAI's extras): still valid?"""

    def closed(node) -> bool:
        if isinstance(node, dict):
            return node.get("additionalProperties") is False or any(map(closed, node.values()))
        return isinstance(node, list) and any(map(closed, node))

    assert not closed(json.loads(SPEC_PATH.read_text()))


def test_error_event_carries_nested_and_top_level_fields():
    nested = {"type": "server_error", "code": None, "message": "boom", "param": None}
    validate_event({"type": "error", "sequence_number": 3, "error": nested})
    validate_event({"type": "error", "sequence_number": 3, "error": nested, "code": None, "message": "boom"})
    with pytest.raises(ValidationError, match=r"at \$\.message: 5 is not of type 'string'"):
        validate_event({"type": "error", "sequence_number": 3, "error": nested, "message": 5})
    with pytest.raises(ValidationError, match="'error' is a required property"):
        validate_event({"type": "error", "sequence_number": 3, "message": "boom"})


def test_reasoning_events_validate_under_both_names():
    for type_ in ("response.reasoning_text.delta", "response.reasoning.delta"):
        event = {"type": type_, "sequence_number": 1, "item_id": "rs", "output_index": 0, "content_index": 0}
        validate_event({**event, "delta": "x"})
        with pytest.raises(ValidationError, match="'delta' is a required property"):
            validate_event(event)


@pytest.mark.parametrize(
    ("item", "message_re"),
    [
        ({"type": "mcp_call", "id": "m", "name": "n", "arguments": ""}, "'server_label' is a required"),
        ({"type": "custom_tool_call", "id": "c", "name": "n", "input": ""}, "'call_id' is a required"),
        ({"type": "message", "id": "m", "role": "assistant", "content": []}, "'status' is a required"),
        ({"type": "no_such_item", "id": "x"}, "not valid under any of the given schemas"),
    ],
)
def test_bad_items_are_rejected_with_the_reason(item, message_re):
    with pytest.raises(ValidationError, match=message_re):
        validate_event(
            {"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": item}
        )


def test_unknown_event_type_has_no_schema():
    with pytest.raises(ValidationError, match="no schema for event type 'response.nope'"):
        validate_event({"type": "response.nope", "sequence_number": 0})


def test_penalties_are_required_from_the_gateway_only():
    body = response("completed")
    del body["presence_penalty"], body["frequency_penalty"]
    validate_response(body, upstream=True)
    with pytest.raises(ValidationError, match="'presence_penalty' is a required property"):
        validate_response(body)


def test_request_shapes_real_clients_send():
    validate_request(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "custom_tool_call_output", "call_id": "c", "output": "1"},
                {"type": "mcp_approval_response", "approval_request_id": "a", "approve": True},
            ],
            "tools": TOOLS,
        }
    )
    with pytest.raises(ValidationError):
        validate_request({"model": "m", "input": [{"role": "robot", "content": "hi"}]})


def test_recorded_stream_with_renamed_reasoning_events_still_matches():
    """Renaming must not leak into the event itself: the checker sees OpenAI's names."""
    events = stream(reasoning(0, "response.reasoning_text"))
    result = check_stream(encode(events))
    for event in result.events:
        validate_event(event)
    assert "response.reasoning_text.delta" in result.types
    assert not any(re.fullmatch(r"response\.reasoning\.(delta|done)", t) for t in result.types)


# --- collecting every violation, for reports ------------------------------------------------------------------


def test_inspect_reports_each_defect_once_with_its_rule():
    """A wrong index is reported where it happens, not again at every later event of the item."""
    events = simple()
    for e in events:
        if e.get("content_index") == 0:
            e["content_index"] = 1
    edit_done_item(events, 1, id="fc_other")
    result = inspect_stream(encode(events))
    assert [(v.rule, v.event["type"]) for v in result.violations] == [
        ("part.index", "response.content_part.added"),
        ("part.closed", "response.output_item.done"),
        ("item.id", "response.output_item.done"),
        ("terminal.output", "response.completed"),
    ]
    assert "output[1] id 'fc_1' vs streamed 'fc_other'" in result.violations[-1].message
    assert str(result.violations[0]).startswith("#3 response.content_part.added: content part 1 announced")
    assert all(v.rule in RULES for v in result.violations)


def test_inspect_clean_stream_has_no_violations():
    result = inspect_stream(encode(rich()))
    assert result.ok and result.terminal["type"] == "response.completed"
