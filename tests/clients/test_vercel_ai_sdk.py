"""The Vercel AI SDK's Responses API provider (`@ai-sdk/openai`, `openai.responses(model)`) against the gateway.

Each test scripts the fake upstream, runs one of the Node scripts in tests/e2e/vercel with the gateway's
base URL, and checks both the JSON summary the script prints (what the SDK made of our stream) and what
the upstream received. The SDK is installed by `npm ci --prefix tests/e2e/vercel`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.fake_chat import (
    make_usage,
    reasoning_then_text,
    sse_chunks,
    text_stream,
    tool_calls_stream,
)
from tests.support.node import require_node_packages, run_node_script

TIMEOUT = 60


@pytest.fixture
def run_sdk(gateway):
    node = require_node_packages("vercel", "ai", "@ai-sdk/openai")

    def run(script: str, *args: str) -> dict[str, Any]:
        summary, detail = run_node_script(node, "vercel", script,
                                          ["--base-url", f"{gateway.url}/v1", "--model", "fake-model", *args], TIMEOUT)
        assert summary.get("streamErrors", []) == [], detail
        return summary

    return run


def _usage(summary: dict[str, Any]) -> tuple[int, int, int]:
    usage = summary["usage"]
    return usage["inputTokens"], usage["outputTokens"], usage["totalTokens"]


# --------------------------------------------------------------------------- (a) plain text


def test_stream_text(run_sdk, upstream):
    upstream.enqueue(text_stream(["Hel", "lo", ", wor", "ld!"], usage=make_usage(11, 4, cached_tokens=3)))
    out = run_sdk("text.mjs", "--prompt", "Say hello")
    assert out["text"] == "Hello, world!"
    assert out["finishReason"] == "stop"
    assert _usage(out) == (11, 4, 15)
    assert out["usage"]["inputTokenDetails"]["cacheReadTokens"] == 3
    assert out["partTypes"][:2] == ["start", "start-step"]
    assert out["partTypes"][-2:] == ["finish-step", "finish"]
    assert out["partTypes"].count("text-delta") == 4
    assert "text-start" in out["partTypes"] and "text-end" in out["partTypes"]
    assert out["responseId"].startswith("resp_")
    assert out["warnings"] == []
    (sent,) = upstream.requests
    assert sent.body["messages"] == [{"role": "user", "content": "Say hello"}]
    assert sent.body["model"] == "fake-model"


def test_generate_text(run_sdk, upstream):
    upstream.enqueue(text_stream(["Bonjour", " !"], usage=make_usage(7, 2)))
    out = run_sdk("text.mjs", "--mode", "generate", "--prompt", "Say hello in French")
    assert out["text"] == "Bonjour !"
    assert out["finishReason"] == "stop"
    assert _usage(out) == (7, 2, 9)
    assert out["requests"][0]["body"].get("stream") is not True
    assert upstream.requests[0].body["messages"] == [{"role": "user", "content": "Say hello in French"}]


def test_length_cut_finish_reason(run_sdk, upstream):
    upstream.enqueue(text_stream(["Partial"], finish_reason="length", usage=make_usage(5, 16)))
    out = run_sdk("text.mjs")
    assert out["text"] == "Partial"
    assert out["finishReason"] == "length"


# --------------------------------------------------------------------------- (b) a tool the SDK runs


WEATHER = {"city": "Paris", "forecast": "sunny", "temperatureC": 21}


def _enqueue_tool_then_text(upstream, first_text: str | None = None) -> None:
    if first_text is None:
        first = tool_calls_stream([("call_w1", "get_weather", ['{"ci', 'ty": "Pa', 'ris"}'])], usage=make_usage(20, 7))
    else:
        call = {"index": 0, "id": "call_w1", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        first = sse_chunks([{"content": first_text}, {"tool_calls": [call]}], finish_reason="tool_calls",
                           usage=make_usage(20, 7))
    upstream.enqueue(first, text_stream(["It is sunny ", "in Paris."], usage=make_usage(40, 5)))


def _check_tool_round_trip(out: dict[str, Any], upstream, first_text: str | None = None) -> None:
    assert out["executed"] == [{"city": "Paris"}]
    assert out["text"] == "It is sunny in Paris."
    assert out["finishReason"] == "stop"
    first, second = out["steps"]
    assert first["finishReason"] == "tool-calls"
    assert first["toolCalls"] == [{"toolCallId": "call_w1", "toolName": "get_weather", "input": {"city": "Paris"}}]
    assert first["toolResults"] == [{"toolCallId": "call_w1", "toolName": "get_weather", "output": WEATHER}]
    assert second["finishReason"] == "stop" and second["text"] == "It is sunny in Paris."
    assert out["totalUsage"]["inputTokens"] == 60 and out["totalUsage"]["outputTokens"] == 12

    # What the SDK sent us on the second call: the whole history, with the call and its output.
    sdk_input = out["requests"][1]["body"]["input"]
    call_item = next(i for i in sdk_input if i.get("type") == "function_call")
    output_item = next(i for i in sdk_input if i.get("type") == "function_call_output")
    assert call_item["call_id"] == output_item["call_id"] == "call_w1"
    assert json.loads(output_item["output"]) == WEATHER

    # What the gateway made of it for the upstream.
    assert len(upstream.requests) == 2
    first_req, second_req = (r.body for r in upstream.requests)
    assert [t["function"]["name"] for t in first_req["tools"]] == ["get_weather"]
    assert first_req["tools"][0]["function"]["parameters"]["properties"] == {
        "city": {"type": "string", "description": "City name"}}
    messages = second_req["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assistant, tool_msg = messages[1], messages[2]
    assert (assistant.get("content") or None) == first_text
    assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]] == [("call_w1", "function", "get_weather", {"city": "Paris"})]
    assert tool_msg["tool_call_id"] == "call_w1"
    assert json.loads(tool_msg["content"]) == WEATHER
    assert second_req["tools"] == first_req["tools"]


def test_stream_text_tool_round_trip(run_sdk, upstream):
    """Default settings (store left to the SDK, i.e. true): a tool-only first step has nothing to reference."""
    _enqueue_tool_then_text(upstream)
    out = run_sdk("tools.mjs", "--prompt", "Weather in Paris?")
    _check_tool_round_trip(out, upstream)
    types = out["partTypes"]
    for part in ("tool-input-start", "tool-input-delta", "tool-input-end", "tool-call", "tool-result"):
        assert part in types
    assert types.index("tool-call") < types.index("tool-result") < types.index("text-delta")
    assert types.count("start-step") == 2 and types.count("finish-step") == 2


def test_generate_text_tool_round_trip(run_sdk, upstream):
    _enqueue_tool_then_text(upstream)
    out = run_sdk("tools.mjs", "--mode", "generate", "--prompt", "Weather in Paris?")
    _check_tool_round_trip(out, upstream)


def test_tool_round_trip_with_text_before_call_store_false(run_sdk, upstream):
    """With `store: false` the SDK sends the earlier assistant text as a full message, not an item_reference."""
    _enqueue_tool_then_text(upstream, first_text="Let me check.")
    out = run_sdk("tools.mjs", "--store", "false", "--prompt", "Weather in Paris?")
    _check_tool_round_trip(out, upstream, first_text="Let me check.")
    body = out["requests"][1]["body"]
    assert body["store"] is False
    assert {"role": "assistant", "content": "Let me check."} in body["input"]
    assert not any(i.get("type") == "item_reference" for i in body["input"])


def test_tool_round_trip_with_text_before_call_default_store(run_sdk, upstream):
    _enqueue_tool_then_text(upstream, first_text="Let me check.")
    out = run_sdk("tools.mjs", "--prompt", "Weather in Paris?")
    _check_tool_round_trip(out, upstream, first_text="Let me check.")


# --------------------------------------------------------------------------- (c) reasoning


def _enqueue_reasoning(upstream) -> None:
    upstream.enqueue(reasoning_then_text(["Let me ", "think."], ["Paris", "."],
                                         field=("reasoning", "reasoning_content"),
                                         usage=make_usage(5, 9, reasoning_tokens=4)))


@pytest.mark.parametrize("mode", ["stream", "generate"])
def test_reasoning_then_text(run_sdk, upstream, mode):
    """The reasoning item reaches the SDK as a reasoning part, before the text, with its token count.

    The SDK reads only reasoning *summaries*; without `reasoning.summary` in the request OpenAI sends none,
    so an empty reasoning part is the expected result here (the raw text is in `content`, which it ignores).
    """
    _enqueue_reasoning(upstream)
    out = run_sdk("text.mjs", "--mode", mode, "--prompt", "Capital of France?")
    assert out["text"] == "Paris."
    assert out["finishReason"] == "stop"
    assert len(out["reasoning"]) == 1
    assert out["usage"]["outputTokenDetails"] == {"textTokens": 5, "reasoningTokens": 4}
    if mode == "stream":
        types = out["partTypes"]
        assert types.index("reasoning-start") < types.index("reasoning-end") < types.index("text-start")


@pytest.mark.parametrize("mode", ["stream", "generate"])
def test_reasoning_summary_surfaces_reasoning_text(run_sdk, upstream, mode):
    _enqueue_reasoning(upstream)
    out = run_sdk("text.mjs", "--mode", mode, "--reasoning-summary", "auto", "--prompt", "Capital of France?")
    assert out["requests"][0]["body"]["reasoning"] == {"summary": "auto"}
    assert out["text"] == "Paris."
    assert out["reasoningText"] == "Let me think."
    if mode == "stream":
        assert "".join(out["reasoningDeltas"]) == "Let me think."
        assert out["partTypes"].count("reasoning-delta") >= 1
