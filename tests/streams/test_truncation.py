"""`truncation: "auto"` against a fake upstream that enforces a small context window as vLLM does, and
`POST /v1/responses/input_tokens`."""

from __future__ import annotations

import httpx
import openai
import pytest

from responses_gateway.truncation import drop_oldest_turn
from tests.support import backends
from tests.support.fake_chat import RecordedRequest, Stream, error_json, text_stream

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

MODEL = "fake-model"
WINDOW = 120  # tokens, counted by the fake as characters / 4


def small_context(request: RecordedRequest):
    """vLLM's answer when the prompt does not fit: HTTP 400 before any stream."""
    chars = sum(len(m.get("content") or "") for m in request.body["messages"])
    if chars // 4 > WINDOW:
        return error_json(400, f"This model's maximum context length is {WINDOW} tokens. However, you requested "
                          f"{chars // 4} tokens in the messages. Please reduce the length of the messages.",
                          type="BadRequestError", code=400)
    return Stream(text_stream([f"ok {len(request.body['messages'])}"]))


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


def test_drop_oldest_turn_keeps_instructions_last_turn_and_call_pairs():
    items = [
        {"type": "message", "role": "system", "content": "rules"},
        user("q1"),
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        user("q2"),
        {"type": "message", "role": "developer", "content": "more rules"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "r2"},
        user("q3"),
    ]
    once = drop_oldest_turn(items)
    assert once == [items[0], *items[4:]]
    twice = drop_oldest_turn(once)
    assert twice == [items[0], items[5], items[8]]  # system and developer stay; the last turn stays
    assert drop_oldest_turn(twice) is None
    # an output whose call went with an older turn goes too
    orphan = [user("q1"), {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"}, user("q2"),
              {"type": "function_call_output", "call_id": "c9", "output": "late"}]
    assert drop_oldest_turn(orphan) == [orphan[2]]


def test_a_long_session_keeps_going_with_truncation_auto(start_gateway, upstream):
    client = openai.OpenAI(base_url=f"{start_gateway().url}/v1", api_key="x", max_retries=0, timeout=30)
    upstream.default = small_context
    previous = None
    for turn in range(8):
        response = client.responses.create(model=MODEL, input=f"turn {turn}: " + "x" * 120,
                                           previous_response_id=previous, truncation="auto",
                                           instructions="You are terse.")
        assert response.status == "completed" and response.truncation == "auto"
        previous = response.id
    last = upstream.requests[-1].body["messages"]
    assert last[0] == {"role": "system", "content": "You are terse."}
    assert last[-1]["content"].startswith("turn 7: ")
    assert len(last) < 2 * 8  # older turns were dropped
    # the stored chain is untouched: truncation only shapes what the upstream is sent
    items = client.responses.input_items.list(previous)
    assert items.data[0].content[0].text.startswith("turn 7")

    # the same history with truncation disabled fails as the upstream says
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="one more " + "x" * 120, previous_response_id=previous)
    assert err.value.body["code"] == "context_length_exceeded"


def test_a_single_turn_too_long_still_fails(start_gateway, upstream):
    gw = start_gateway()
    upstream.default = small_context
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        r = http.post("/v1/responses", json={"model": MODEL, "input": "y" * 2000, "truncation": "auto"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_route_context_window_truncates_before_calling(backend, upstream, tmp_path):
    config = tmp_path / "routes.toml"
    config.write_text(f'[[routes]]\nmatch = "*"\nkind = "chat_completions"\nbase_url = "{upstream.base_url}"\n'
                      f"context_window = {WINDOW}\n")
    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    upstream.default = small_context
    with GatewayServer(Settings(config=str(config), db=backend.db)) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30)
        previous = None
        for turn in range(6):
            previous = client.responses.create(model=MODEL, input=f"turn {turn}: " + "x" * 120,
                                               previous_response_id=previous, truncation="auto").id
    assert len(upstream.requests) == 6  # fitted before calling: no refused call


def test_input_tokens(start_gateway, upstream):
    gw = start_gateway()
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30)
    small = client.responses.input_tokens.count(model=MODEL, input="hi")
    assert small.object == "response.input_tokens" and small.input_tokens > 0
    big = client.responses.input_tokens.count(model=MODEL, input="word " * 400, instructions="Be brief.")
    assert big.input_tokens >= 500
    upstream.enqueue(Stream(text_stream(["an answer of some length"])))
    first = client.responses.create(model=MODEL, input="word " * 400)
    chained = client.responses.input_tokens.count(model=MODEL, input="more", previous_response_id=first.id)
    assert chained.input_tokens > big.input_tokens - 10
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        r = http.post("/v1/responses/input_tokens", json={"model": MODEL, "input": "x", "stream": True})
        assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_parameter"
        r = http.post("/v1/responses/input_tokens", json={"model": MODEL, "previous_response_id": "resp_nope"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "previous_response_not_found"


def test_input_tokens_counted_by_vllm_tokenize(start_gateway, upstream):
    """On a Chat Completions route the count comes from vLLM's `/tokenize` (the fake counts chars / 4 + 3 per
    message), with the chat messages the generation would send."""
    gw = start_gateway()
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30)
    counted = client.responses.input_tokens.count(model=MODEL, input="count me", instructions="Be brief.")
    [sent] = upstream.counted
    assert sent.path == "/tokenize"
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
    assert counted.input_tokens == upstream.fake_token_count(sent.body)


def test_input_tokens_estimated_without_a_counter(backend):
    """The demo upstream cannot count: the documented estimate answers."""
    from responses_gateway import tokens
    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    with GatewayServer(Settings(upstream_url="demo", db=backend.db)) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30)
        counted = client.responses.input_tokens.count(model="demo", input="hello there", instructions="Be brief.")
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}
    assert counted.input_tokens == tokens.estimate([message], "Be brief.")
