"""Every recorded real upstream exchange, replayed byte for byte through the gateway.

The expected result is computed here from the recording with a deliberately naive reducer, independent of
the adapter's parser, and compared with what the gateway's final Response says.
"""

import json

import pytest

from tests.helpers import create, stream
from tests.support.fake_chat import replay
from tests.support.recordings import chat_recordings, load_recording

RECORDINGS = [load_recording(p) for p in chat_recordings()]
STREAMS = [r for r in RECORDINGS if r.is_stream and r.status == 200]


def reduce(recording) -> dict:
    text, reasoning, calls, finish, usage = "", "", {}, None, None
    for block in recording.sse_text.split("\n\n"):
        block = block.strip()
        if not block.startswith("data: ") or block == "data: [DONE]":
            continue
        chunk = json.loads(block[6:])
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                call["id"] = call["id"] or tc.get("id")
                fn = tc.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
        usage = chunk.get("usage") or usage
    return {"text": text, "reasoning": reasoning, "calls": [calls[i] for i in sorted(calls)],
            "finish": finish, "usage": usage}


def request_for(recording) -> dict:
    """A Responses request equivalent to the recorded one (its tools and messages)."""
    body = recording.request_body
    tools = [{"type": "function", "name": t["function"]["name"], "parameters": t["function"].get("parameters"),
              "description": t["function"].get("description")} for t in body.get("tools") or []]
    last_user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    req = {"model": body["model"], "input": last_user}
    if tools:
        req["tools"] = tools
    return req


@pytest.mark.parametrize("recording", STREAMS, ids=lambda r: r.name)
def test_replayed_stream(http, upstream, recording):
    expected = reduce(recording)
    upstream.enqueue(replay(recording))
    result = stream(http, request_for(recording))
    response = result.response
    by_type = {}
    for item in response["output"]:
        by_type.setdefault(item["type"], []).append(item)

    assert result.text == expected["text"]
    if expected["text"]:
        assert by_type["message"][0]["content"][0]["text"] == expected["text"]
    if expected["reasoning"]:
        assert by_type["reasoning"][0]["content"][0]["text"] == expected["reasoning"]
    else:
        assert "reasoning" not in by_type
    calls = by_type.get("function_call", [])
    assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == [
        (c["id"], c["name"], c["arguments"]) for c in expected["calls"]
    ]
    if expected["finish"] == "length":
        assert response["status"] == "incomplete"
        assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    else:
        assert response["status"] == "completed"
    if expected["usage"]:
        assert response["usage"]["input_tokens"] == expected["usage"]["prompt_tokens"]
        assert response["usage"]["output_tokens"] == expected["usage"]["completion_tokens"]
        assert response["usage"]["total_tokens"] == expected["usage"]["total_tokens"]
        details = expected["usage"].get("completion_tokens_details") or {}
        assert response["usage"]["output_tokens_details"]["reasoning_tokens"] == \
            (details.get("reasoning_tokens") or 0)
    else:  # the upstream sent none: the gateway's estimate (tokens.py)
        usage = response["usage"]
        assert usage["input_tokens"] > 0 and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_replayed_model_not_found(http, upstream):
    (recording,) = [r for r in RECORDINGS if r.status == 404]
    upstream.enqueue(replay(recording))
    resp = http.post("/v1/responses", json={"model": "MiniMaxAI/MiniMax-M2.1", "input": "x", "stream": True})
    assert resp.status_code == 404
    assert resp.json() == {"error": {
        "message": "The model `MiniMaxAI/MiniMax-M2.1` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": None, "code": "model_not_found"}}


def test_replayed_non_streaming_completion(http, upstream):
    """A server that answers with one JSON completion (here: OpenAI, non-streamed) is read just the same."""
    (recording,) = [r for r in RECORDINGS if r.body and r.status == 200]
    upstream.enqueue(replay(recording))
    obj = create(http, {"model": "gpt-5-nano", "input": "What is the capital of France?"})
    assert obj["output"][0]["content"][0]["text"] == recording.body["choices"][0]["message"]["content"]
    assert obj["usage"]["input_tokens"] == recording.body["usage"]["prompt_tokens"]
    assert obj["usage"]["output_tokens_details"]["reasoning_tokens"] == 64
