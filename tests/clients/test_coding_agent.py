"""Requests exactly as the Codex CLI sends them (captured from @openai/codex 0.169.0 in tests/data/codex/).

store: false with the whole history each turn, no `instructions` but long developer messages, items with
their own ids, reasoning echoed with `content: null`, custom apply_patch with a lark grammar, client-run
tool_search with namespaced tools found later, and a hosted web_search the gateway cannot run.
"""

import json
from pathlib import Path

import orjson

from tests.helpers import stream
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream

DATA = Path(__file__).parents[1] / "data" / "codex"
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+Hello, world!\n*** End Patch\n"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def fragments(text: str, size: int = 9) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_turn_one_streams_a_custom_tool_call_with_the_raw_patch(http, upstream):
    body = load("codex-turn1.json")
    upstream.enqueue(tool_calls_stream([("call_p1", "apply_patch", fragments(orjson.dumps({"input": PATCH}).decode()))],
                                       usage=make_usage(9000, 40)))
    result = stream(http, body)
    (item,) = result.response["output"]
    assert item["type"] == "custom_tool_call" and item["name"] == "apply_patch"
    assert item["input"] == PATCH
    assert "".join(e["delta"] for e in result.events if e["type"] == "response.custom_tool_call_input.delta") == PATCH
    assert result.response["store"] is False
    assert result.response["usage"]["input_tokens"] == 9000

    sent = upstream.requests[0].body
    messages = sent["messages"]
    # both developer messages open the conversation: they become the one leading system message
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    assert body["input"][0]["content"][0]["text"] in messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    offered = {t["function"]["name"] for t in sent["tools"]}
    assert {"exec_command", "apply_patch", "tool_search"} <= offered
    assert "web_search" not in offered  # hosted: nobody here could run it
    assert sent["parallel_tool_calls"] is True
    assert sent["reasoning_effort"] == body["reasoning"]["effort"]


def test_turn_two_replays_everything_and_streams_the_answer(http, upstream):
    body = load("codex-turn2-mixed-parallel.json")
    upstream.enqueue(text_stream(["All ", "done."], usage=make_usage(9500, 3)))
    result = stream(http, body)
    assert result.text == "All done."

    messages = upstream.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool", "tool"]
    assistant = messages[3]
    assert assistant["content"] == "I will add the file now."
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["apply_patch", "exec_command"]
    patch_args = json.loads(assistant["tool_calls"][0]["function"]["arguments"])
    assert patch_args["input"].startswith("*** Begin Patch")
    # reasoning came back with content null and a foreign encrypted blob: its summary is what we can send
    assert assistant["reasoning_content"] == "Thinking about files"
    assert [m["tool_call_id"] for m in messages[4:]] == ["call_mix_patch", "call_mix_exec"]
    assert "Success" in messages[4]["content"]


def test_tool_search_call_is_emitted_for_the_client(http, upstream):
    body = load("codex-turn1.json")
    upstream.enqueue(tool_calls_stream([("call_ts", "tool_search", ['{"query": "sub', ' agents", "limit": 3}'])]))
    result = stream(http, body)
    (item,) = result.response["output"]
    assert item["type"] == "tool_search_call"
    assert item["arguments"] == {"query": "sub agents", "limit": 3}
    assert item["execution"] == "client" and item["call_id"] == "call_ts"


def test_found_namespace_tools_are_offered_and_calls_carry_the_namespace(http, upstream):
    body = load("codex-turn2-tool_search.json")
    upstream.enqueue(tool_calls_stream([("call_ns", "multi_agent_v1__close_agent", ['{"target": "a1"}'])]))
    result = stream(http, body)
    (item,) = result.response["output"]
    assert item["type"] == "function_call"
    assert (item["namespace"], item["name"]) == ("multi_agent_v1", "close_agent")

    sent = upstream.requests[0].body
    offered = {t["function"]["name"] for t in sent["tools"]}
    assert "multi_agent_v1__spawn_agent" in offered
    messages = sent["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "tool_search"
    assert "multi_agent_v1__spawn_agent" in messages[-1]["content"]


def test_namespaced_call_history_round_trips(http, upstream):
    body = load("codex-turn3-namespace-call.json")
    upstream.enqueue(text_stream(["ok"]))
    stream(http, body)
    messages = upstream.requests[0].body["messages"]
    call = next(m for m in reversed(messages) if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"].startswith("multi_agent_v1__")
    assert messages[-1]["role"] == "tool"
