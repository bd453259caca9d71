"""The gateway in front of a Responses upstream (kind "responses"), driven over HTTP like a client would.

The fake upstream replays OpenAI's recorded streams byte for byte and deliberately damaged variants of them;
whatever comes in, the gateway's own stream must pass the stream checker and the spec schemas
(`tests.helpers.stream`) and carry the recording's content. What the upstream received is checked too:
`store: false`, the full history on a previous_response_id chain, encrypted reasoning sent back.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import orjson
import pytest

from responses_gateway.config import Settings
from responses_gateway.protocol.reasoning import seal, unseal
from responses_gateway.route import Route
from responses_gateway.tokens import char_tokens, estimate
from responses_gateway.upstreams.responses import ResponsesUpstream, signature_tag, to_input
from tests.helpers import create, stream
from tests.support.fake_responses import (
    ENDS_EARLY,
    FakeResponsesUpstream,
    Json,
    Stream,
    damaged,
    error_json,
    events_of,
    replay,
    stream_recordings,
    terminal_response,
    text_response_stream,
    to_chunks,
    variants,
)
from tests.support.recordings import load_recording, responses_recordings

RECORDINGS = stream_recordings()
CASES = [(r, v) for r in RECORDINGS for v in variants(r)]
STEP1 = next(r for r in RECORDINGS if r.name == "tool-function-tool_loop-step1-stream")
STEP2 = next(r for r in RECORDINGS if r.name == "tool-function-tool_loop-step2-omit-tools-stream")
WEATHER = "The weather in Boston, MA is sunny, 72°F. Would you like an hourly forecast or a 7-day outlook?"


@pytest.fixture(scope="module")
def fake():
    with FakeResponsesUpstream(models=("gpt-5-nano", "gpt-5-mini")) as up:
        yield up


@pytest.fixture(scope="module")
def gateway(fake, tmp_path_factory):
    from tests.support.server import GatewayServer

    db = tmp_path_factory.mktemp("responses-upstream") / "responses.db"
    upstream = ResponsesUpstream(Route(kind="responses", base_url=fake.base_url, api_key="upstream-key"))
    with GatewayServer(Settings(db=str(db)), upstream=upstream) as server:
        yield server


@pytest.fixture
def http(gateway, fake):
    fake.reset()
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client
    fake.reset()


# --------------------------------------------------------------------------- what to expect


def ours(usage: dict | None) -> dict | None:
    """The upstream's usage as we report it: `cache_write_tokens` (which the openai SDK 3.x requires) is
    always there, 0 when the upstream did not say."""
    if usage is None:
        return None
    details = {"cached_tokens": 0, **(usage.get("input_tokens_details") or {})}
    details.setdefault("cache_write_tokens", 0)
    return {**usage, "input_tokens_details": details}


def content(output: list[dict]) -> list[tuple]:
    """What a response says, ids aside; reasoning items that carry nothing (OpenAI's, unencrypted) left out."""
    out: list[tuple] = []
    for item in output:
        kind = item["type"]
        if kind == "message":
            out.append(("message", [(p["type"], p.get("text", p.get("refusal"))) for p in item["content"]]))
        elif kind == "function_call":
            out.append((kind, item["call_id"], item["name"], item["arguments"], item.get("namespace")))
        elif kind == "custom_tool_call":
            out.append((kind, item["call_id"], item["name"], item["input"], item.get("namespace")))
        elif kind == "reasoning":
            text = "\n\n".join(p["text"] for p in item.get("summary") or ()) + \
                "".join(p["text"] for p in item.get("content") or ())
            if text or item.get("encrypted_content"):
                out.append(("reasoning", text))
    return out


def inline_history(recording) -> list:
    """A chained recording's input with the earlier turn spelled out (the recorded previous_response_id is
    OpenAI's, not ours)."""
    body = recording.request_body
    if not body.get("previous_response_id"):
        return body["input"]
    calls = [{k: item[k] for k in ("type", "call_id", "name", "arguments")}
             for item in terminal_response(STEP1)["output"] if item["type"] == "function_call"]
    return [*STEP1.request_body["input"], *calls, *body["input"]]


def request_for(recording) -> dict:
    body = {k: v for k, v in recording.request_body.items() if k not in ("stream", "store", "previous_response_id")}
    body["input"] = inline_history(recording)
    return body


def upstream_input(items) -> list[dict]:
    """The input items as the upstream must receive them."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    out = []
    for item in items:
        if "role" in item:
            role = item["role"]
            text = item["content"]
            out.append({"type": "message", "role": role, "content": [
                {"type": "output_text" if role == "assistant" else "input_text", "text": text}]})
        else:
            out.append(item)
    return out


def check_sent(fake, body: dict) -> dict:
    sent = fake.requests[-1]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer upstream-key"
    got = sent.body
    assert got["stream"] is True
    assert got["store"] is False
    assert "previous_response_id" not in got
    assert got["model"] == body["model"]
    assert "reasoning.encrypted_content" in got["include"]
    assert got["input"] == upstream_input(body["input"])
    return got


# --------------------------------------------------------------------------- every recording, every damage


@pytest.mark.parametrize(("recording", "variant"), CASES, ids=[f"{r.name}:{v}" for r, v in CASES])
def test_recording_through_gateway(http, fake, recording, variant):
    expected = terminal_response(recording)
    fake.enqueue(Stream(damaged(recording, variant)))
    body = request_for(recording)
    result = stream(http, body)  # the stream checker and the spec schemas, on every event
    response = result.response
    sent = check_sent(fake, body)

    if variant in ENDS_EARLY and not (variant == "no-terminal" and expected["status"] == "failed"):
        assert response["status"] == "failed"
        assert result.events[-2]["code"] == "upstream_error" and response["error"]["code"] == "server_error"
        assert "upstream model server" in response["error"]["message"]
        assert result.types[-2:] == ["error", "response.failed"]
        return
    if expected["status"] == "failed":
        assert response["status"] == "failed"
        assert response["error"] == {"code": "context_length_exceeded", "message": expected["error"]["message"]}
        error = result.events[-2]
        assert error["type"] == "error" and error["code"] == "context_length_exceeded"
        assert error["param"] == "input"
        return
    assert content(response["output"]) == content(expected["output"])
    assert response["status"] == expected["status"]
    assert response["incomplete_details"] == expected["incomplete_details"]
    assert response["usage"] == ours(expected["usage"])
    messages = [c[1] for c in content(expected["output"]) if c[0] == "message"]
    assert result.text == "".join(text for parts in messages for kind, text in parts if kind == "output_text")
    if recording is STEP1:
        assert sent["tools"] == [{"type": "function", **{k: v for k, v in body["tools"][0].items()
                                                         if k != "type"}}]
        assert sent["tool_choice"] == {"type": "function", "name": "get_weather"}
    if "max_output_tokens" in body:
        assert sent["max_output_tokens"] == body["max_output_tokens"]


# --------------------------------------------------------------------------- the tool loop, chained here


def test_function_call_tool_loop_chained(http, fake):
    """step1 → function_call; step2 with previous_response_id: the upstream gets the whole history, stateless."""
    fake.enqueue(replay(STEP1), replay(STEP2))
    body1 = request_for(STEP1)
    first = stream(http, body1).response
    assert first["status"] == "completed"
    (call,) = [i for i in first["output"] if i["type"] == "function_call"]
    assert (call["name"], call["arguments"]) == ("get_weather", '{"location":"Boston, MA"}')
    assert call["call_id"] == "call_RYBUL1i3RTzZk5fDdDPRbevp"
    assert call["id"].startswith("fc_") and not call["id"].startswith("fc_0ea821c0")  # our id, not OpenAI's

    body2 = {"model": "gpt-5-nano", "previous_response_id": first["id"],
             "input": [{"type": "function_call_output", "call_id": call["call_id"],
                        "output": "The weather in Boston, MA is sunny, 72F."}]}
    second = stream(http, body2).response
    assert second["previous_response_id"] == first["id"]
    assert content(second["output"]) == [("message", [("output_text", WEATHER)])]

    sent = fake.requests[-1].body
    assert sent["store"] is False and "previous_response_id" not in sent
    assert "tools" not in sent and "tool_choice" not in sent  # tools are not inherited
    assert sent["input"] == [
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Call get_weather for location=Boston, MA."}]},
        {"type": "function_call", "call_id": "call_RYBUL1i3RTzZk5fDdDPRbevp", "name": "get_weather",
         "arguments": '{"location":"Boston, MA"}'},
        {"type": "function_call_output", "call_id": "call_RYBUL1i3RTzZk5fDdDPRbevp",
         "output": "The weather in Boston, MA is sunny, 72F."},
    ]


def _with_encrypted_reasoning(recording, token: str) -> list[str]:
    """The recording as an upstream asked for `reasoning.encrypted_content` would send it."""
    events = copy.deepcopy(events_of(recording))
    for ev in events:
        items = [ev["item"]] if ev["type"] == "response.output_item.done" else \
            ev["response"]["output"] if ev["type"] == "response.completed" else []
        for item in items:
            if item["type"] == "reasoning":
                item["encrypted_content"] = token
    return to_chunks(events)


def test_encrypted_reasoning_round_trips(http, fake, gateway):
    token = "gAAAAABfakeEncryptedReasoning=="
    fake.enqueue(Stream(_with_encrypted_reasoning(STEP1, token)), replay(STEP2))
    first = stream(http, {**request_for(STEP1), "include": ["reasoning.encrypted_content"]}).response
    reasoning = first["output"][0]
    assert reasoning["type"] == "reasoning"
    assert reasoning["encrypted_content"].startswith("rg1.")  # ours: opaque, and it carries the upstream's
    text, signature = unseal(reasoning["encrypted_content"])
    tag = signature_tag(Route(kind="responses", base_url=fake.base_url))
    assert (text, signature) == ("", tag + token)

    # stored chain: previous_response_id
    output = {"type": "function_call_output", "call_id": first["output"][1]["call_id"], "output": "sunny"}
    stream(http, {"model": "gpt-5-nano", "previous_response_id": first["id"], "input": [output]})
    sent = fake.requests[-1].body["input"]
    assert sent[1] == {"type": "reasoning", "summary": [], "encrypted_content": token}
    assert [i["type"] for i in sent] == ["message", "reasoning", "function_call", "function_call_output"]

    # stateless client (Codex with store: false): sends our items back itself, ids and all
    fake.enqueue(replay(STEP2))
    history = [{"role": "user", "content": "Call get_weather for location=Boston, MA."}, *first["output"], output]
    stream(http, {"model": "gpt-5-nano", "store": False, "input": history})
    sent = fake.requests[-1].body["input"]
    assert sent[1] == {"type": "reasoning", "summary": [], "encrypted_content": token}
    assert all("id" not in item for item in sent)


def test_reasoning_history_for_other_upstreams():
    tag = "rsp.abc."
    ours = {"type": "reasoning", "summary": [], "content": [], "encrypted_content": seal("", tag + "ENC")}
    other = {"type": "reasoning", "summary": [], "content": [],
             "encrypted_content": seal("thinking it over", "anthropic-signature")}
    text_only = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}],
                 "encrypted_content": None}
    empty = {"type": "reasoning", "summary": [], "content": [], "encrypted_content": None}
    foreign = {"type": "reasoning", "summary": [], "content": [], "encrypted_content": "gAAAAnotours"}
    assert to_input([ours, other, text_only, empty, foreign], tag) == [
        {"type": "reasoning", "summary": [], "encrypted_content": "ENC"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "thinking it over"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
    ]
    assert to_input([ours, other, text_only], tag, "drop") == [
        {"type": "reasoning", "summary": [], "encrypted_content": "ENC"}]


# --------------------------------------------------------------------------- synthetic streams


def test_namespace_custom_tool_and_parallel_calls(http, fake):
    output = [
        {"id": "fc_u1", "type": "function_call", "status": "completed", "call_id": "call_a", "name": "fs__read",
         "arguments": '{"path": "README.md"}'},
        {"id": "ctc_u2", "type": "custom_tool_call", "status": "completed", "call_id": "call_b",
         "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
    ]
    fake.enqueue(Stream(text_response_stream(output, usage={"input_tokens": 5, "output_tokens": 7})))
    body = {"model": "gpt-5-nano", "input": "go", "parallel_tool_calls": True, "tool_choice": "required", "tools": [
        {"type": "namespace", "name": "fs", "description": "files", "tools": [
            {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {
                "path": {"type": "string"}}}}]},
        {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    ]}
    result = stream(http, body)
    assert content(result.response["output"]) == [
        ("function_call", "call_a", "read", '{"path": "README.md"}', "fs"),
        ("custom_tool_call", "call_b", "apply_patch", "*** Begin Patch\n*** End Patch", None),
    ]
    assert "response.custom_tool_call_input.delta" in result.types
    sent = fake.requests[-1].body
    assert sent["tools"] == [
        {"type": "function", "name": "fs__read",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
        {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    ]
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is True

    # the calls go back under their wire names
    fake.enqueue(Stream(text_response_stream([])))
    history = [*result.response["output"],
               {"type": "function_call_output", "call_id": "call_a", "output": "# readme"},
               {"type": "custom_tool_call_output", "call_id": "call_b", "output": "done"}]
    stream(http, {**body, "input": history, "tool_choice": {"type": "function", "name": "read",
                                                            "namespace": "fs"}})
    sent = fake.requests[-1].body
    assert sent["input"] == [
        {"type": "function_call", "call_id": "call_a", "name": "fs__read", "arguments": '{"path": "README.md"}'},
        {"type": "custom_tool_call", "call_id": "call_b", "name": "apply_patch",
         "input": "*** Begin Patch\n*** End Patch"},
        {"type": "function_call_output", "call_id": "call_a", "output": "# readme"},
        {"type": "custom_tool_call_output", "call_id": "call_b", "output": "done"},
    ]
    assert sent["tool_choice"] == {"type": "function", "name": "fs__read"}


def test_interleaved_calls(http, fake):
    """Two calls whose argument deltas alternate upstream: each lands in its own item."""
    head = [{"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
            {"type": "response.in_progress", "response": {"id": "r", "status": "in_progress", "output": []}}]
    calls = [{"id": f"fc_{i}", "type": "function_call", "status": "in_progress", "call_id": f"call_{i}",
              "name": "get_weather", "arguments": ""} for i in range(2)]
    events = [*head, *({"type": "response.output_item.added", "output_index": i, "item": c}
                       for i, c in enumerate(calls))]
    for piece in ('{"location":', '"Paris"}'):
        for i in range(2):
            events.append({"type": "response.function_call_arguments.delta", "output_index": i,
                           "item_id": f"fc_{i}", "delta": piece.replace("Paris", ["Paris", "Rome"][i])})
    events.append({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}})
    fake.enqueue(Stream(to_chunks([{**e, "sequence_number": n} for n, e in enumerate(events)])))
    result = stream(http, {"model": "m", "input": "x", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]})
    assert [(c[1], c[3]) for c in content(result.response["output"])] == [
        ("call_0", '{"location":"Paris"}'), ("call_1", '{"location":"Rome"}')]


def test_reasoning_summary_refusal_and_usage(http, fake):
    output = [
        {"id": "rs_u", "type": "reasoning", "encrypted_content": "gAAAAsummary",
         "summary": [{"type": "summary_text", "text": "**Plan**"}, {"type": "summary_text", "text": "Refuse."}]},
        {"id": "msg_u", "type": "message", "role": "assistant", "status": "completed", "content": [
            {"type": "output_text", "text": "Sorry, ", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "I can't help with that."}]},
    ]
    usage = {"input_tokens": 11, "input_tokens_details": {"cached_tokens": 3}, "output_tokens": 40,
             "output_tokens_details": {"reasoning_tokens": 32}, "total_tokens": 51}
    fake.enqueue(Stream(text_response_stream(output, usage=usage)))
    body = {"model": "gpt-5-mini", "input": "do something bad", "instructions": "Be safe.",
            "reasoning": {"effort": "low", "summary": "auto"}, "temperature": 0.5, "max_output_tokens": 100,
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": True},
                     "verbosity": "low"}, "include": ["reasoning.encrypted_content"]}
    result = stream(http, body)
    response = result.response
    assert content(response["output"]) == [
        ("reasoning", "**Plan**\n\nRefuse."),
        ("message", [("output_text", "Sorry, "), ("refusal", "I can't help with that.")]),
    ]
    assert unseal(response["output"][0]["encrypted_content"])[1].endswith(".gAAAAsummary")
    assert "response.reasoning_summary_text.delta" in result.types
    assert response["usage"] == ours(usage)
    sent = fake.requests[-1].body
    assert sent["instructions"] == "Be safe."
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert sent["temperature"] == 0.5 and sent["max_output_tokens"] == 100
    assert sent["text"] == {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"},
                                       "strict": True}, "verbosity": "low"}
    assert "tools" not in sent


def test_raw_reasoning_text_and_logprobs(http, fake):
    """vLLM streams raw reasoning as reasoning_text; logprobs pass through when asked for."""
    lp = [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]
    ref = {"item_id": "m", "output_index": 1, "content_index": 0}
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.in_progress", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "rs", "type": "reasoning", "summary": [], "content": []}},
        {"type": "response.reasoning_text.delta", "item_id": "rs", "output_index": 0, "content_index": 0,
         "delta": "think"},
        {"type": "response.output_text.delta", **ref, "delta": "Hi", "logprobs": lp},  # no .added, no .done
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}},
    ]
    fake.enqueue(Stream(to_chunks(events)))
    result = stream(http, {"model": "m", "input": "x", "include": ["message.output_text.logprobs"],
                           "top_logprobs": 2})
    out = result.response["output"]
    assert content(out) == [("reasoning", "think"), ("message", [("output_text", "Hi")])]
    assert out[1]["content"][0]["logprobs"] == lp
    sent = fake.requests[-1].body
    assert sent["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert sent["top_logprobs"] == 2


def test_failed_without_error_event(http, fake):
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
         "delta": "par"},
        {"type": "response.failed", "response": {"id": "r", "status": "failed", "output": [],
                                                 "error": {"code": "server_error", "message": "overloaded"}}},
    ]
    fake.enqueue(Stream(to_chunks(events)))
    result = stream(http, {"model": "m", "input": "x"})
    assert result.response["status"] == "failed"
    assert result.response["error"] == {"code": "server_error", "message": "overloaded"}
    assert result.response["output"][0]["status"] == "incomplete"


def test_error_event_mid_stream(http, fake):
    """An `error` event in the SDKs' flat shape, then the body ends: our stream fails with its code."""
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
         "delta": "par"},
        {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": None},
    ]
    fake.enqueue(Stream(to_chunks(events)))
    result = stream(http, {"model": "m", "input": "x"})
    assert result.response["error"] == {"code": "rate_limit_exceeded", "message": "Slow down."}
    assert result.events[-2]["error"]["type"] == "server_error"
    assert result.text == "par"


def test_content_filter(http, fake):
    chunks = text_response_stream([], status="incomplete", incomplete_reason="content_filter")
    fake.enqueue(Stream(chunks))
    response = stream(http, {"model": "m", "input": "x"}).response
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "content_filter"}


# --------------------------------------------------------------------------- before the stream


NON_STREAM = [load_recording(p) for p in responses_recordings()]


@pytest.mark.parametrize("recording", [r for r in NON_STREAM if r.body and r.status == 200], ids=lambda r: r.name)
def test_upstream_answering_json(http, fake, recording):
    """A server that ignores `stream: true` and sends the whole Response is read just the same."""
    fake.enqueue(replay(recording))
    body = {k: v for k, v in recording.request_body.items() if k not in ("stream", "store")}
    response = stream(http, body).response
    assert content(response["output"]) == content(recording.body["output"])
    assert response["status"] == recording.body["status"]
    assert response["usage"] == ours(recording.body["usage"])


@pytest.mark.parametrize("recording", [r for r in NON_STREAM if r.status == 400], ids=lambda r: r.name)
def test_upstream_400(http, fake, recording):
    fake.enqueue(replay(recording))
    resp = http.post("/v1/responses", json={"model": "gpt-5-nano", "input": "x", "stream": True})
    assert resp.status_code == 400
    error = recording.body["error"]
    assert resp.json()["error"]["message"] == error["message"]
    assert resp.json()["error"]["code"] == error["code"]


def test_upstream_errors_before_the_stream(http, fake):
    fake.enqueue(error_json(400, "Your input exceeds the context window of this model.", param="input",
                            code="context_length_exceeded"),
                 error_json(429, "Rate limit reached", type="requests", code="rate_limit_exceeded"),
                 error_json(404, "The model `nope` does not exist", code="model_not_found"),
                 Json("upstream exploded", status=500))
    resp = http.post("/v1/responses", json={"model": "gpt-5-nano", "input": "x"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "context_length_exceeded"
    resp = http.post("/v1/responses", json={"model": "gpt-5-nano", "input": "x"})
    assert resp.status_code == 429
    resp = http.post("/v1/responses", json={"model": "nope", "input": "x"})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "model_not_found"
    resp = http.post("/v1/responses", json={"model": "gpt-5-nano", "input": "x"})
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_error"


def test_non_streaming_client(http, fake):
    fake.enqueue(Stream(damaged(STEP2, "missing-done+bare-terminal")))
    obj = create(http, {"model": "gpt-5-nano", "input": inline_history(STEP2)})
    assert content(obj["output"]) == [("message", [("output_text", WEATHER)])]
    assert obj["usage"]["total_tokens"] == 570


def test_models_are_listed(http):
    ids = [m["id"] for m in http.get("/v1/models").json()["data"]]
    assert ids == ["gpt-5-nano", "gpt-5-mini"]


def test_openai_sdk_reads_our_stream(gateway, fake):
    """The official SDK's own stream parser accepts what we re-emit from a damaged upstream stream."""
    import openai

    fake.reset()
    fake.enqueue(Stream(damaged(STEP2, "late-scaffold")))
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0)
    with client.responses.stream(model="gpt-5-nano", input=inline_history(STEP2)) as s:
        for _ in s:
            pass
        final = s.get_final_response()
    assert final.output_text == WEATHER
    assert json.loads(final.model_dump_json())["status"] == "completed"


def test_consecutive_reasoning_items_stay_separate(http, fake):
    """Two upstream reasoning items in a row keep their own encrypted content (no merging)."""
    import orjson

    def ev(seq, data):
        return f"event: {data['type']}\ndata: {orjson.dumps({**data, 'sequence_number': seq}).decode()}\n\n"

    resp = {"id": "resp_u", "object": "response", "created_at": 1, "status": "in_progress", "output": [],
            "model": "m"}
    items = [
        {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "ENC_ONE"},
        {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "ENC_TWO"},
    ]
    frames = [ev(0, {"type": "response.created", "response": resp})]
    seq = 1
    for i, item in enumerate(items):
        frames.append(ev(seq, {"type": "response.output_item.added", "output_index": i, "item": item}))
        frames.append(ev(seq + 1, {"type": "response.output_item.done", "output_index": i, "item": item}))
        seq += 2
    done = {**resp, "status": "completed", "output": items,
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 1}}}
    frames.append(ev(seq, {"type": "response.completed", "response": done}))
    from tests.support.fake_chat import Stream

    fake.enqueue(Stream(frames))
    from tests.helpers import create

    obj = create(http, {"model": "m", "input": "x", "include": ["reasoning.encrypted_content"]})
    reasoning = [i for i in obj["output"] if i["type"] == "reasoning"]
    assert len(reasoning) == 2
    from responses_gateway.protocol.reasoning import unseal

    assert [unseal(r["encrypted_content"])[1].rsplit(".", 1)[-1] for r in reasoning] == ["ENC_ONE", "ENC_TWO"]


@pytest.mark.parametrize("kind", ["text", "function"])
def test_vllm_native_streams_come_out_once(kind):
    """vLLM's own /v1/responses through a responses route: reasoning under `msg_` ids, the message's first part
    at content_index 1, and `response.completed` listing the items under new ids — each item comes out once,
    with its text, call and reasoning intact (they came out two and three times)."""
    from tests.support.replay_servers import VllmLikeServer
    from tests.support.server import GatewayServer
    from tests.support.stream_check import check_stream

    body = {"model": "openai/gpt-oss-20b", "stream": True, "input": "Say hello in one short sentence."}
    if kind == "function":
        body["input"] = "What is the weather in Paris?"
        body["tools"] = [{"type": "function", "name": "get_weather",
                          "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}}]
    with VllmLikeServer() as up:
        upstream = ResponsesUpstream(Route(kind="responses", base_url=up.base_url))
        with GatewayServer(Settings(db="none"), upstream=upstream) as gw:
            raw = httpx.post(f"{gw.url}/v1/responses", json=body, timeout=30).text
    check_stream(raw)
    events = [orjson.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    final = events[-1]["response"]
    assert [i["type"] for i in final["output"]] == added
    reasoning = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_text.delta")
    assert reasoning and final["output"][0]["content"][0]["text"] == reasoning
    if kind == "text":
        assert added == ["reasoning", "message"]
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert text == "Hello!" and final["output"][1]["content"][0]["text"] == "Hello!"
    else:
        assert added == ["reasoning", "function_call"]
        args = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
        assert args == '{"location":"Paris"}' == final["output"][1]["arguments"]


QWEN = load_recording(Path(__file__).parents[1] / "data" / "recordings" / "vllm_responses"
                      / "qwen35-responses-function-stream.yaml")
QWEN_VARIANTS = [v for v in variants(QWEN) if v not in ENDS_EARLY]


@pytest.mark.parametrize("variant", QWEN_VARIANTS)
def test_vllm_qwen_function_call_comes_out_once(http, fake, variant):
    """vLLM's /v1/responses with a Qwen3.5 model (issue 26): the call streams as `aa26…` / `call_a5c5…`,
    after an empty message, and `response.completed` lists it as `fc_aa5f…` / `chatcmpl-tool-8af8…` without
    the message. Final items are matched to streamed ones by kind, order and name: one call, under the
    call_id the client saw streaming, whatever damage the stream also took (it came out twice)."""
    streamed = [e for e in events_of(QWEN) if e["type"] == "response.output_item.added"]
    streamed_call = streamed[-1]["item"]
    fake.enqueue(Stream(damaged(QWEN, variant)))
    body = {k: v for k, v in QWEN.request_body.items() if k != "stream"}
    result = stream(http, body)
    calls = [item for item in result.response["output"] if item["type"] == "function_call"]
    assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == \
        [(streamed_call["call_id"], "get_weather", '{"location": "Paris"}')]
    added = [e["item"]["type"] for e in result.events if e["type"] == "response.output_item.added"]
    assert added == [item["type"] for item in result.response["output"]]
    assert added.count("function_call") == 1
    started = [e["item"]["call_id"] for e in result.events
               if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"]
    assert started == [streamed_call["call_id"]]


# --------------------------------------------------------------------------- damaged streams


def test_damaged_call_input_gives_the_final_arguments_in_a_consistent_stream(http, fake):
    """Argument deltas lost, carrying another call's item_id, or after their item closed, and no usage: the
    upstream's `.done` / `output_item.done` arguments win, our deltas add up to them, usage is estimated."""
    paris, rome = '{"city":"Paris"}', '{"city":"Rome"}'
    calls = [{"id": f"fc_{i}", "type": "function_call", "status": "in_progress", "call_id": f"call_{i}",
              "name": "get_weather", "arguments": ""} for i in range(2)]

    def args(index, item_id, delta):
        return {"type": "response.function_call_arguments.delta", "output_index": index, "item_id": item_id,
                "delta": delta}

    def done(index, arguments):
        return {"type": "response.output_item.done", "output_index": index,
                "item": {**calls[index], "status": "completed", "arguments": arguments}}

    empty = {"id": "r", "object": "response", "status": "in_progress", "output": [], "usage": None}
    events = [
        {"type": "response.created", "response": empty},
        *({"type": "response.output_item.added", "output_index": i, "item": c} for i, c in enumerate(calls)),
        args(0, "fc_0", '{"ci'),
        args(1, "fc_0", '{"city":"Ro'),  # call 1's delta under call 0's id
        args(0, "fc_0", 'ris"}'),  # 'ty":"Pa' was lost
        {"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_0", "arguments": paris},
        done(0, paris),
        args(1, "fc_1", 'me"}'),
        done(1, rome),  # (no .done of its arguments)
        args(1, "fc_1", "garbage"),  # after its item closed
        {"type": "response.completed", "response": {**empty, "status": "completed"}},  # no usage
    ]
    fake.enqueue(Stream(to_chunks([{**e, "sequence_number": n} for n, e in enumerate(events)])))
    result = stream(http, {"model": "m", "input": "Weather in Paris and Rome?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]})
    assert [(c[1], c[3]) for c in content(result.response["output"])] == [("call_0", paris), ("call_1", rome)]
    for index, final in enumerate((paris, rome)):
        deltas = [e["delta"] for e in result.events
                  if e["type"] == "response.function_call_arguments.delta" and e["output_index"] == index]
        (args_done,) = [e for e in result.events
                        if e["type"] == "response.function_call_arguments.done" and e["output_index"] == index]
        assert "".join(deltas) == args_done["arguments"] == final
    usage = result.response["usage"]
    assert usage["output_tokens"] == char_tokens(len(paris) + len(rome))
    assert usage["input_tokens"] > 0 and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


@pytest.mark.parametrize("final", ["output_item.done", "terminal", "none"])
def test_done_arguments_that_are_not_json_lose_to_a_whole_version(http, fake, final):
    """An upstream's `function_call_arguments.done` one character short (not JSON) while its deltas and its
    final item are whole: the client never gets the broken arguments (they were passed on as they came)."""
    whole, broken = '{"city":"Paris"}', '{"city":"Paris"'
    item = {"id": "fc_0", "type": "function_call", "status": "in_progress", "call_id": "call_0",
            "name": "get_weather", "arguments": ""}
    done_item = {**item, "status": "completed", "arguments": whole}
    empty = {"id": "r", "object": "response", "status": "in_progress", "output": [], "usage": None}
    events = [
        {"type": "response.created", "response": empty},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_0", "delta": d}
          for d in ('{"city":', '"Paris"}')),
        {"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_0", "arguments": broken},
    ]
    if final == "output_item.done":
        events.append({"type": "response.output_item.done", "output_index": 0, "item": done_item})
    completed = {**empty, "status": "completed", "output": [done_item] if final == "terminal" else []}
    events.append({"type": "response.completed", "response": completed})
    fake.enqueue(Stream(to_chunks([{**e, "sequence_number": n} for n, e in enumerate(events)])))
    result = stream(http, {"model": "m", "input": "Weather in Paris?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]})
    (call,) = [i for i in result.response["output"] if i["type"] == "function_call"]
    assert call["arguments"] == whole
    deltas = [e["delta"] for e in result.events if e["type"] == "response.function_call_arguments.delta"]
    (done,) = [e for e in result.events if e["type"] == "response.function_call_arguments.done"]
    assert "".join(deltas) == done["arguments"] == whole


def test_missing_usage_is_estimated(http, fake):
    """Input from the request's items (tokens.estimate, as everywhere), output from the text produced."""
    output = [{"id": "rs_1", "type": "reasoning", "summary": [],
               "content": [{"type": "reasoning_text", "text": "Think it over."}]},
              {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "Hello there, friend!", "annotations": []}]}]
    fake.enqueue(Stream(text_response_stream(output, usage=None)))
    result = stream(http, {"model": "m", "input": "Say hello.", "instructions": "Be kind."})
    assert result.response["usage"] == {
        "input_tokens": estimate([{"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": "Say hello."}]}], "Be kind."),
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": char_tokens(len("Hello there, friend!")) + char_tokens(len("Think it over.")),
        "output_tokens_details": {"reasoning_tokens": char_tokens(len("Think it over."))},
        "total_tokens": result.response["usage"]["input_tokens"] + result.response["usage"]["output_tokens"],
    }
