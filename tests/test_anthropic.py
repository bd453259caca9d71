"""The Anthropic Messages upstream: the real gateway in front of a fake Anthropic server on loopback.

Streams go through tests.helpers.stream (stream checker + spec schemas on every event); what the fake
server received is checked against the documented Messages request shapes.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from responses_gateway.config import Settings
from responses_gateway.errors import UpstreamError
from responses_gateway.protocol.items import normalize_input
from responses_gateway.protocol.reasoning import seal, unseal
from responses_gateway.protocol.request import parse_request
from responses_gateway.protocol.tools import EMPTY, found_tools, normalize_tools
from responses_gateway.route import Route
from responses_gateway.upstreams.anthropic import AnthropicUpstream
from responses_gateway.upstreams.anthropic_messages import build_body, thinking_blocks
from responses_gateway.upstreams.base import Call
from tests.helpers import create, stream
from tests.support.fake_anthropic import (
    DROP,
    FakeAnthropic,
    Json,
    Stream,
    content_delta,
    error_event,
    error_json,
    message_stream,
    redacted_block,
    split,
    text_block,
    thinking_block,
    tool_use_block,
)
from tests.support.server import GatewayServer

SIG1 = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/Vw=="
SIG2 = "ErUBCkYIBRgCIkDm4b9Qx0pl+2T3kwQ7JvXGmJd3YcR8n1uR0="
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def _fake():
    with FakeAnthropic() as up:
        yield up


@pytest.fixture
def fake(_fake):
    _fake.reset()
    _fake.default = None
    yield _fake
    _fake.reset()


@pytest.fixture(scope="module")
def gateway(_fake, tmp_path_factory):
    db = tmp_path_factory.mktemp("anthropic") / "responses.db"
    upstream = AnthropicUpstream(Route(kind="anthropic", base_url=_fake.url, api_key="k", max_tokens=1024))
    with GatewayServer(Settings(db=str(db)), upstream=upstream) as server:
        yield server


@pytest.fixture
def http(gateway):
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client


def body_for(request: dict, route: Route | None = None) -> dict:
    """What the adapter would send upstream for a Responses request body (no network)."""
    req = parse_request(orjson.dumps({"model": "claude-x", **request}))
    items = normalize_input(req.input, EMPTY)
    tools = normalize_tools(req.tools, req.tool_choice, found=found_tools(items))
    call = Call(req, items, tools, req.instructions)
    return build_body(call, route or Route(kind="anthropic", base_url="http://x"))


def failed(result) -> dict:
    assert result.terminal["type"] == "response.failed"
    assert "error" in result.types
    return result.response["error"]


# --------------------------------------------------------------------------- streams


def test_text(http, fake):
    fake.enqueue(message_stream(text_block(0, ["Hel", "lo", " wörld"]), input_tokens=12, output_tokens=4,
                                cache_read=30, cache_creation=8))
    result = stream(http, {"model": "claude-sonnet-4-5", "input": "hi"})
    assert result.text == "Hello wörld"
    assert result.terminal["type"] == "response.completed"
    out = result.response["output"]
    assert [i["type"] for i in out] == ["message"]
    assert out[0]["status"] == "completed"
    assert result.response["usage"] == {
        "input_tokens": 50, "input_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 8},
        "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 54,
    }
    sent = fake.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "k"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    assert sent.body == {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True,
                         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}


def test_text_split_anywhere_and_padded(http, fake):
    """Frames cut at every few bytes (UTF-8 characters included) and JSON padded as the real API does."""
    frames = message_stream(text_block(0, ["Grüß ", "dich ✓"], pad=7), pad=3)
    fake.enqueue(Stream(split(frames, 5)))
    result = stream(http, {"model": "m", "input": "hi"})
    assert result.text == "Grüß dich ✓"
    assert result.terminal["type"] == "response.completed"


def test_crlf_split_across_reads(http, fake):
    """CRLF line ends whose `\\r` and `\\n` arrive in different reads: every `event:` line stays one line."""
    data = "".join(message_stream(text_block(0, ["Hel", "lo"]))).replace("\n", "\r\n").encode()
    pieces = data.split(b"\r")
    # (the pause between writes makes each piece its own network read)
    fake.enqueue(Stream([p + b"\r" for p in pieces[:-1]] + [pieces[-1]], delay=0.02))
    result = stream(http, {"model": "m", "input": "hi"})
    assert result.text == "Hello"
    assert result.terminal["type"] == "response.completed"


def test_non_streaming_request(http, fake):
    fake.enqueue(message_stream(text_block(0, ["Just ", "this."])))
    obj = create(http, {"model": "m", "input": "hi"})
    assert obj["status"] == "completed"
    assert obj["output"][0]["content"][0]["text"] == "Just this."


@pytest.mark.parametrize("include", [True, False])
def test_thinking_with_signature_then_text(http, fake, include):
    fake.enqueue(message_stream(thinking_block(0, ["Let me ", "think."], SIG1), text_block(1, ["Paris", "."])))
    body = {"model": "m", "input": "capital of France?", "reasoning": {"effort": "low"}}
    if include:
        body["include"] = ["reasoning.encrypted_content"]
    result = stream(http, body)
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "message"]
    assert out[0]["content"] == [{"type": "reasoning_text", "text": "Let me think."}]
    assert out[1]["content"][0]["text"] == "Paris."
    # the signature is always stored (a later turn needs it) but shown only to clients that ask, as OpenAI does
    if include:
        assert unseal(out[0]["encrypted_content"]) == ("Let me think.", SIG1)
    else:
        assert "encrypted_content" not in out[0]
    stored = http.get(f"/v1/responses/{result.response['id']}", params={"include": "reasoning.encrypted_content"})
    assert unseal(stored.json()["output"][0]["encrypted_content"]) == ("Let me think.", SIG1)
    plain = http.get(f"/v1/responses/{result.response['id']}").json()
    assert "encrypted_content" not in plain["output"][0]
    assert "response.reasoning_text.delta" in result.types
    assert fake.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert fake.requests[0].body["max_tokens"] == 2048  # the route's 1024 for the answer, on top of the budget


def test_redacted_thinking(http, fake):
    fake.enqueue(message_stream(redacted_block(0, "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"),
                                text_block(1, ["Done."])))
    result = stream(http, {"model": "m", "input": "x", "reasoning": {"effort": "medium"},
                           "include": ["reasoning.encrypted_content"]})
    reasoning = result.response["output"][0]
    assert reasoning["type"] == "reasoning" and reasoning["content"] == [{"type": "reasoning_text", "text": ""}]
    text, signature = unseal(reasoning["encrypted_content"])
    assert thinking_blocks(text, signature) == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}]


def test_consecutive_thinking_blocks_round_trip(http, fake):
    """thinking, redacted_thinking, thinking in a row merge into one reasoning item; each block comes back."""
    fake.enqueue(message_stream(thinking_block(0, ["First ", "idea."], SIG1), redacted_block(1, "UkVEQUNURUQ="),
                                thinking_block(2, ["Second."], SIG2), text_block(3, ["Ok."])))
    result = stream(http, {"model": "m", "input": "x", "reasoning": {"effort": "medium"}})
    first = result.response["output"]
    assert [i["type"] for i in first] == ["reasoning", "message"]
    assert first[0]["content"][0]["text"] == "First idea.Second."
    fake.enqueue(message_stream(text_block(0, ["Fine."])))
    stream(http, {"model": "m", "previous_response_id": result.response["id"], "input": "next",
                  "reasoning": {"effort": "medium"}})
    assistant = fake.requests[1].body["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "First idea.", "signature": SIG1},
        {"type": "redacted_thinking", "data": "UkVEQUNURUQ="},
        {"type": "thinking", "thinking": "Second.", "signature": SIG2},
        {"type": "text", "text": "Ok."},
    ]}


def test_parallel_tool_use_fragmented(http, fake):
    fake.enqueue(message_stream(
        text_block(0, ["Checking both."]),
        tool_use_block(1, "toolu_01A", "get_weather", ['{"ci', 'ty": "Pa', 'ris"}']),
        tool_use_block(2, "toolu_01B", "get_time", []),
        stop_reason="tool_use"))
    result = stream(http, {"model": "m", "input": "weather and time", "tools": [WEATHER, TIME]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["message", "function_call", "function_call"]
    assert [(i["call_id"], i["name"], i["arguments"], i["status"]) for i in out[1:]] == [
        ("toolu_01A", "get_weather", '{"city": "Paris"}', "completed"),
        ("toolu_01B", "get_time", "{}", "completed"),
    ]
    assert result.terminal["type"] == "response.completed"
    deltas = [e["delta"] for e in result.events if e["type"] == "response.function_call_arguments.delta"]
    assert deltas[:3] == ['{"ci', 'ty": "Pa', 'ris"}']
    sent = fake.requests[0].body
    assert sent["tools"] == [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER["parameters"]},
        {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert sent["tool_choice"] == {"type": "auto"}


def test_custom_and_namespaced_tools(http, fake):
    tools = [{"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
             {"type": "namespace", "name": "fs", "description": "files",
              "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}]}]
    fake.enqueue(message_stream(
        tool_use_block(0, "toolu_c", "apply_patch", ['{"inp', 'ut": "*** Begin\\n+x \\u00e9', '"}']),
        tool_use_block(1, "toolu_n", "fs__read", ['{"path": "a"}']),
        stop_reason="tool_use"))
    result = stream(http, {"model": "m", "input": "patch", "tools": tools})
    custom, namespaced = result.response["output"]
    assert custom["type"] == "custom_tool_call" and custom["input"] == "*** Begin\n+x é"
    assert custom["call_id"] == "toolu_c" and custom["name"] == "apply_patch"
    assert namespaced["type"] == "function_call" and namespaced["name"] == "read"
    assert namespaced["namespace"] == "fs" and namespaced["arguments"] == '{"path": "a"}'
    sent = fake.requests[0].body["tools"]
    assert sent[0]["name"] == "apply_patch"
    assert sent[0]["input_schema"]["required"] == ["input"]
    assert sent[1]["name"] == "fs__read"


def test_max_tokens_stop_is_incomplete(http, fake):
    fake.enqueue(message_stream(text_block(0, ["Once upon a"]), stop_reason="max_tokens"))
    result = stream(http, {"model": "m", "input": "story", "max_output_tokens": 16})
    assert result.terminal["type"] == "response.incomplete"
    assert result.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert result.response["output"][0]["status"] == "incomplete"
    assert fake.requests[0].body["max_tokens"] == 16


def test_refusal_stop_is_content_filter(http, fake):
    fake.enqueue(message_stream(text_block(0, ["I can"]), stop_reason="refusal"))
    result = stream(http, {"model": "m", "input": "x"})
    assert result.terminal["type"] == "response.incomplete"
    assert result.response["incomplete_details"] == {"reason": "content_filter"}


def test_pause_turn_completes(http, fake):
    fake.enqueue(message_stream(text_block(0, ["Working"]), stop_reason="pause_turn"))
    assert stream(http, {"model": "m", "input": "x"}).terminal["type"] == "response.completed"


def test_error_event_mid_stream(http, fake):
    frames = message_stream(text_block(0, ["Partial"]), stop_reason=None, stop=False)
    frames.insert(-1, error_event("overloaded_error", "Overloaded"))  # before the text block's stop
    fake.enqueue(frames)
    result = stream(http, {"model": "m", "input": "x"})
    error = failed(result)
    # the precise code on the error event; OpenAI's closed set on response.error
    assert result.events[-2]["code"] == "overloaded_error"
    assert error["code"] == "server_error" and "Overloaded" in error["message"]
    assert result.response["output"][0]["status"] == "incomplete"
    assert result.text == "Partial"


@pytest.mark.parametrize("damage", ["drop", "not_json", "no_message_stop"])
def test_broken_streams_fail(http, fake, damage):
    frames = message_stream(text_block(0, ["Hi"]))
    if damage == "drop":
        frames = [*frames[:4], DROP]
    elif damage == "not_json":
        frames = [*frames[:4], "event: content_block_delta\ndata: {not json\n\n", *frames[4:]]
    else:
        frames = frames[:-1]
    fake.enqueue(frames)
    result = stream(http, {"model": "m", "input": "x"})
    error = failed(result)
    assert result.events[-2]["code"] == "upstream_error" and error["code"] == "server_error"


def test_overloaded_before_stream(http, fake):
    fake.enqueue(error_json(529, "overloaded_error", "Overloaded"))
    resp = http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True})
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] == "upstream_unavailable"


@pytest.mark.parametrize("status,kind,message,expect_status,expect_code", [
    (404, "not_found_error", "model: claude-nope", 404, "model_not_found"),
    (400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", 400,
     "context_length_exceeded"),
    (400, "invalid_request_error", "messages.0: bad", 400, None),
    (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", 429, "rate_limit_exceeded"),
    (401, "authentication_error", "invalid x-api-key", 502, "upstream_auth_failed"),
    (403, "permission_error", "no", 502, "upstream_auth_failed"),
    (503, "api_error", "unavailable", 503, "upstream_unavailable"),
    (500, "api_error", "Internal server error", 502, "upstream_error"),
])
def test_http_errors(http, fake, status, kind, message, expect_status, expect_code):
    fake.enqueue(error_json(status, kind, message))
    resp = http.post("/v1/responses", json={"model": "claude-nope", "input": "x"})
    assert resp.status_code == expect_status, resp.text
    error = resp.json()["error"]
    assert error["code"] == expect_code
    if expect_status == 404:
        assert "claude-nope" in error["message"]
    if expect_status == 400:
        assert message in error["message"]


def test_json_answer_instead_of_stream(http, fake):
    """A server that ignores `stream: true` and answers with one whole Message."""
    fake.enqueue(Json({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                       "content": [{"type": "thinking", "thinking": "hm", "signature": SIG1},
                                   {"type": "text", "text": "Hi"},
                                   {"type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {"tz": "UTC"}}],
                       "stop_reason": "tool_use", "stop_sequence": None,
                       "usage": {"input_tokens": 3, "output_tokens": 2}}))
    result = stream(http, {"model": "m", "input": "x", "tools": [TIME], "include": ["reasoning.encrypted_content"]})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "message", "function_call"]
    assert unseal(out[0]["encrypted_content"]) == ("hm", SIG1)
    assert out[2]["arguments"] == '{"tz":"UTC"}'
    assert result.response["usage"]["input_tokens"] == 3


def test_models(http, fake):
    fake.models = [f"claude-{i}" for i in range(25)]
    try:
        resp = http.get("/v1/models")
    finally:
        fake.models = ["claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"]
    assert resp.status_code == 200
    data = resp.json()["data"]
    assert [m["id"] for m in data] == [f"claude-{i}" for i in range(25)]
    assert data[0] == {"id": "claude-0", "object": "model", "created": 1759104000, "owned_by": "anthropic"}
    assert fake.model_requests[0].headers["x-api-key"] == "k"


# --------------------------------------------------------------------------- multi-turn round trips


def _turn1(fake):
    fake.enqueue(message_stream(
        thinking_block(0, ["I need ", "the weather."], SIG1),
        tool_use_block(1, "toolu_01W", "get_weather", ['{"city"', ': "Paris"}']),
        stop_reason="tool_use"))


EXPECTED_ASSISTANT = {"role": "assistant", "content": [
    {"type": "thinking", "thinking": "I need the weather.", "signature": SIG1},
    {"type": "tool_use", "id": "toolu_01W", "name": "get_weather", "input": {"city": "Paris"}},
]}


def test_multi_turn_stateless_round_trip(http, fake):
    _turn1(fake)
    first = stream(http, {"model": "m", "input": "Weather in Paris?", "tools": [WEATHER], "store": False,
                          "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "medium"}})
    out = first.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "function_call"]
    fake.enqueue(message_stream(thinking_block(0, ["It is sunny."], SIG2), text_block(1, ["Sunny, 22°C."])))
    second = stream(http, {
        "model": "m", "tools": [WEATHER], "store": False, "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "medium"},
        "input": [{"role": "user", "content": "Weather in Paris?"},
                  *[{**item, "content": None} if item["type"] == "reasoning" else item for item in out],
                  {"type": "function_call_output", "call_id": "toolu_01W", "output": "sunny, 22C"}],
    })
    assert second.text == "Sunny, 22°C."
    sent = fake.requests[1].body
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        EXPECTED_ASSISTANT,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01W", "content": "sunny, 22C"}]},
    ]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}


def test_multi_turn_previous_response_id(http, fake):
    _turn1(fake)
    first = stream(http, {"model": "m", "input": "Weather in Paris?", "tools": [WEATHER],
                          "reasoning": {"effort": "medium"}})
    assert "encrypted_content" not in first.response["output"][0]  # stored, not shown: not asked for
    fake.enqueue(message_stream(text_block(0, ["Sunny."])))
    second = stream(http, {"model": "m", "previous_response_id": first.response["id"], "tools": [WEATHER],
                           "reasoning": {"effort": "medium"},
                           "input": [{"type": "function_call_output", "call_id": "toolu_01W",
                                      "output": [{"type": "input_text", "text": "sunny"},
                                                 {"type": "input_image",
                                                  "image_url": "data:image/png;base64,iVBORw0KGgo="}]}]})
    assert second.terminal["type"] == "response.completed"
    assert fake.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        EXPECTED_ASSISTANT,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01W", "content": [
            {"type": "text", "text": "sunny"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        ]}]},
    ]


def test_chained_without_tools_declares_history_tools(http, fake):
    _turn1(fake)
    first = stream(http, {"model": "m", "input": "Weather?", "tools": [WEATHER]})
    fake.enqueue(message_stream(text_block(0, ["Sunny."])))
    stream(http, {"model": "m", "previous_response_id": first.response["id"],
                  "input": [{"type": "function_call_output", "call_id": "toolu_01W", "output": "sunny"}]})
    sent = fake.requests[1].body
    assert sent["tools"] == [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]
    assert sent["tool_choice"] == {"type": "none"}


# --------------------------------------------------------------------------- request translation


def test_system_from_instructions_and_every_system_message():
    body = body_for({"instructions": "Be brief.", "input": [
        {"role": "developer", "content": "Use metric units."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": [{"type": "input_text", "text": "Late rule."}]},
        {"role": "user", "content": "bye"},
    ]})
    assert body["system"] == "Be brief.\n\nUse metric units.\n\nLate rule."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {"role": "user", "content": [{"type": "text", "text": "bye"}]},
    ]
    assert "system" not in body_for({"input": "x"})


def test_consecutive_turns_merge_and_tool_results_lead():
    body = body_for({"input": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Calling."}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": "c2", "name": "read", "namespace": "fs", "arguments": "not json"},
        {"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch", "input": "*** Begin"},
        {"type": "function_call_output", "call_id": "c1", "output": "cold"},
        {"role": "user", "content": "and?"},
        {"type": "function_call_output", "call_id": "c2", "output": ""},
        {"type": "custom_tool_call_output", "call_id": "c3", "output": "applied"},
    ]})
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "c2", "name": "fs__read", "input": {}},
            {"type": "tool_use", "id": "c3", "name": "apply_patch", "input": {"input": "*** Begin"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "cold"},
            {"type": "tool_result", "tool_use_id": "c2"},
            {"type": "tool_result", "tool_use_id": "c3", "content": "applied"},
            {"type": "text", "text": "and?"},
        ]},
    ]


def test_images():
    body = body_for({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ", "detail": "high"},
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        {"type": "input_image", "image_url": "data:image/svg+xml,%3Csvg%3E"},
    ]}]})
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/svg+xml", "data": "PHN2Zz4="}},
    ]


@pytest.mark.parametrize("choice,parallel,expected", [
    (None, None, {"type": "auto"}),
    ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
    ("required", None, {"type": "any"}),
    ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
    ({"type": "function", "name": "get_time"}, None, {"type": "tool", "name": "get_time"}),
    ("none", False, {"type": "none"}),
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_time"}]}, None,
     {"type": "any"}),
])
def test_tool_choice(choice, parallel, expected):
    request = {"input": "x", "tools": [WEATHER, TIME]}
    if choice is not None:
        request["tool_choice"] = choice
    if parallel is not None:
        request["parallel_tool_calls"] = parallel
    body = body_for(request)
    assert body["tool_choice"] == expected
    if isinstance(choice, dict) and choice["type"] == "allowed_tools":
        assert [t["name"] for t in body["tools"]] == ["get_time"]


def test_tool_shapes():
    body = body_for({"input": "x", "tools": [
        {"type": "custom", "name": "sql", "description": "Run SQL",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: SELECT"}},
        {"type": "tool_search", "execution": "client", "description": "Find tools",
         "parameters": {"type": "object", "properties": {"goal": {"type": "string"}}}},
    ]})
    custom, search = body["tools"]
    assert custom["name"] == "sql"
    assert custom["description"].startswith("Run SQL\n\n") and "lark grammar:\nstart: SELECT" in custom["description"]
    assert custom["input_schema"] == {"type": "object", "properties": {"input": {
        "type": "string", "description": "The raw input for the tool."}}, "required": ["input"]}
    assert search == {"name": "tool_search", "description": "Find tools",
                      "input_schema": {"type": "object", "properties": {"goal": {"type": "string"}}}}


def test_tool_search_history():
    body = body_for({"tools": [{"type": "tool_search", "execution": "client"}], "input": [
        {"role": "user", "content": "find"},
        {"type": "tool_search_call", "call_id": "ts1", "arguments": {"goal": "weather"}},
        {"type": "tool_search_output", "call_id": "ts1", "tools": [WEATHER]},
    ]})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "ts1", "name": "tool_search", "input": {"goal": "weather"}}]}
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "ts1"
    assert orjson.loads(result["content"]) == {"tools": [{"name": "get_weather", "description": "Weather for a city"}]}
    assert [t["name"] for t in body["tools"]] == ["tool_search", "get_weather"]


def test_max_tokens_and_sampling():
    assert body_for({"input": "x"})["max_tokens"] == 4096
    assert body_for({"input": "x"}, Route(kind="anthropic", max_tokens=2000))["max_tokens"] == 2000
    body = body_for({"input": "x", "max_output_tokens": 300, "temperature": 0.2, "top_p": 0.9},
                    Route(kind="anthropic", max_tokens=2000))
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (300, 0.2, 0.9)
    assert "thinking" not in body


@pytest.mark.parametrize("effort,budget", [
    ("minimal", 1024), ("low", 1024), ("medium", 4096), ("high", 16384), ("xhigh", 32000), ("none", None)])
def test_thinking_budget(effort, budget):
    body = body_for({"input": "x", "reasoning": {"effort": effort}})
    if budget is None:
        assert "thinking" not in body and body["max_tokens"] == 4096
        return
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] > budget
    assert body["max_tokens"] == (4096 if budget < 4096 else budget + 4096)


def test_thinking_budget_within_client_cap():
    body = body_for({"input": "x", "max_output_tokens": 10000, "reasoning": {"effort": "high"}})
    assert body["max_tokens"] == 10000 and body["thinking"]["budget_tokens"] == 5000
    body = body_for({"input": "x", "max_output_tokens": 1500, "reasoning": {"effort": "high"}})
    assert body["max_tokens"] == 1500 and body["thinking"]["budget_tokens"] == 1024
    body = body_for({"input": "x", "max_output_tokens": 1000, "reasoning": {"effort": "high"}})
    assert body["max_tokens"] == 1000 and "thinking" not in body  # no room for the minimum budget


def test_reasoning_history():
    signed = seal("plan", SIG1)
    body = body_for({"input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "unsigned"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": seal("no signature")},
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAopenai-opaque"},
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": signed},
        {"role": "assistant", "content": "answer "},
    ]})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "plan", "signature": SIG1},
        {"type": "text", "text": "answer"},  # a final assistant text loses its trailing whitespace
    ]}


def test_thinking_blocks_decoding():
    assert thinking_blocks("abc", None) == []
    assert thinking_blocks("abc", SIG1) == [{"type": "thinking", "thinking": "abc", "signature": SIG1}]
    assert thinking_blocks("", "redacted:xyz") == [{"type": "redacted_thinking", "data": "xyz"}]
    assert thinking_blocks("abcdef", "\n3:" + SIG2) == [{"type": "thinking", "thinking": "def", "signature": SIG2}]


@pytest.mark.parametrize("request_body,param", [
    ({"text": {"format": {"type": "json_object"}}}, "text.format"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"include": ["message.output_text.logprobs"]}, "include"),
])
def test_unsupported_fields_refused(request_body, param):
    with pytest.raises(UpstreamError) as info:
        body_for({"input": "x", **request_body})
    assert info.value.status == 400 and info.value.param == param


def test_unsupported_field_is_a_400_before_any_request(http, fake):
    resp = http.post("/v1/responses", json={"model": "m", "input": "x", "frequency_penalty": 1})
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "frequency_penalty"
    assert fake.requests == []


def test_base_url_with_v1(fake):
    upstream = AnthropicUpstream(Route(kind="anthropic", base_url=fake.base_url + "/"))
    assert upstream.api == fake.base_url
    assert AnthropicUpstream(Route(kind="anthropic", base_url=fake.url)).api == fake.base_url


def test_signature_split_over_deltas(http, fake):
    frames = message_stream(thinking_block(0, ["x"], None), text_block(1, ["y"]))
    assert frames[4].startswith("event: content_block_stop")
    frames[4:4] = [content_delta(0, {"type": "signature_delta", "signature": SIG1[:10]}),
                   content_delta(0, {"type": "signature_delta", "signature": SIG1[10:]})]
    fake.enqueue(frames)
    result = stream(http, {"model": "m", "input": "x", "include": ["reasoning.encrypted_content"]})
    assert unseal(result.response["output"][0]["encrypted_content"]) == ("x", SIG1)


def test_input_tokens_counted_by_anthropic(http, fake):
    """`/v1/responses/input_tokens` on an Anthropic route asks `count_tokens` (which refuses extra fields)."""
    body = {"model": "claude-x", "input": "How many tokens is this?", "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]}
    r = http.post("/v1/responses/input_tokens", json=body)
    assert r.status_code == 200, r.text
    [sent] = fake.counted
    assert r.json() == {"object": "response.input_tokens", "input_tokens": fake.fake_token_count(sent.body)}
    assert sent.body["system"] and sent.body["tools"][0]["name"] == "f" and "max_tokens" not in sent.body


# --------------------------------------------------------------------------- what Anthropic refuses, kept out
# (FakeAnthropic answers 400 to each of these, as Anthropic does: these requests went through before only by
# failing there)


@pytest.mark.parametrize("choice,expected", [
    ("required", {"type": "any"}), ({"type": "function", "name": "get_weather"}, {"type": "tool", "name": "get_weather"}),
])
def test_forced_tool_choice_goes_without_thinking(http, fake, choice, expected):
    fake.enqueue(message_stream(tool_use_block(0, "toolu_01W", "get_weather", ['{"city": "Paris"}']),
                                stop_reason="tool_use"))
    result = stream(http, {"model": "m", "input": "Weather?", "tools": [WEATHER], "tool_choice": choice,
                           "reasoning": {"effort": "high"}})
    assert result.terminal["type"] == "response.completed"
    sent = fake.requests[0].body
    assert sent["tool_choice"] == expected and "thinking" not in sent


def test_continuing_without_the_signed_thinking_goes_without_thinking(http, fake):
    """The client left the reasoning out, or sent an id the store does not know: no thinking for that call."""
    for reasoning in ([], [{"id": "rs_unknown", "type": "reasoning", "summary": []}]):
        fake.reset()
        fake.enqueue(message_stream(text_block(0, ["Sunny."])))
        result = stream(http, {"model": "m", "tools": [WEATHER], "reasoning": {"effort": "medium"}, "input": [
            {"role": "user", "content": "Weather in Paris?"}, *reasoning,
            {"type": "function_call", "call_id": "toolu_01W", "name": "get_weather", "arguments": '{"city":"Paris"}'},
            {"type": "function_call_output", "call_id": "toolu_01W", "output": "sunny"}]})
        assert result.terminal["type"] == "response.completed"
        assert "thinking" not in fake.requests[0].body


def test_reasoning_sent_back_by_id_alone_is_resolved_from_the_store(http, fake):
    _turn1(fake)
    first = stream(http, {"model": "m", "input": "Weather in Paris?", "tools": [WEATHER],
                          "reasoning": {"effort": "medium"}})
    reasoning, call = first.response["output"]
    fake.enqueue(message_stream(thinking_block(0, ["Sunny."], SIG2), text_block(1, ["Sunny, 22°C."])))
    second = stream(http, {"model": "m", "tools": [WEATHER], "store": False, "reasoning": {"effort": "medium"},
                           "input": [{"role": "user", "content": "Weather in Paris?"},
                                     {"id": reasoning["id"], "type": "reasoning", "summary": []}, call,
                                     {"type": "function_call_output", "call_id": "toolu_01W", "output": "sunny"}]})
    assert second.text == "Sunny, 22°C."
    sent = fake.requests[1].body
    assert sent["messages"][1] == EXPECTED_ASSISTANT
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}


def test_temperature_above_one(http, fake):
    fake.enqueue(message_stream(text_block(0, ["Hi."])), message_stream(text_block(0, ["Hi."])))
    assert stream(http, {"model": "m", "input": "hi", "temperature": 1.7}).terminal["type"] == "response.completed"
    assert fake.requests[0].body["temperature"] == 1
    thinking = stream(http, {"model": "m", "input": "hi", "temperature": 1.7, "reasoning": {"effort": "low"}})
    assert thinking.terminal["type"] == "response.completed"
    assert "temperature" not in fake.requests[1].body and fake.requests[1].body["thinking"]["type"] == "enabled"


def test_top_p_with_thinking(http, fake):
    """Anthropic takes `top_p` from 0.95 to 1 when thinking is on (and refuses the request otherwise): a lower
    one is sent as 0.95; without thinking it goes as the client set it."""
    fake.enqueue(*(message_stream(text_block(0, ["Hi."])) for _ in range(3)))
    for top_p, sent in ((0.5, 0.95), (0.97, 0.97)):
        thinking = stream(http, {"model": "m", "input": "hi", "top_p": top_p, "reasoning": {"effort": "low"}})
        assert thinking.terminal["type"] == "response.completed"
        assert fake.requests[-1].body["top_p"] == sent and fake.requests[-1].body["thinking"]["type"] == "enabled"
    assert stream(http, {"model": "m", "input": "hi", "top_p": 0.5}).terminal["type"] == "response.completed"
    assert fake.requests[-1].body["top_p"] == 0.5 and "thinking" not in fake.requests[-1].body


def test_whitespace_only_text_is_left_out(http, fake):
    fake.enqueue(message_stream(text_block(0, ["Hi."])))
    result = stream(http, {"model": "m", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hello"}, {"type": "input_text", "text": " \n"}]},
        {"role": "assistant", "content": "  "},
        {"role": "user", "content": "again"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "\n"}]})
    assert result.terminal["type"] == "response.completed"
    assert fake.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "again"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]},
    ]


def test_only_whitespace_is_refused_clearly(http, fake):
    resp = http.post("/v1/responses", json={"model": "m", "input": "   "})
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "input" and "whitespace" in resp.json()["error"]["message"]
    assert fake.requests == []


def test_unsafe_call_ids_map_consistently(http, fake):
    """Kimi-style ids (from a chat route earlier in the chain) become safe ids, the same in call and result,
    distinct even when the escaped form is already taken."""
    fake.enqueue(message_stream(text_block(0, ["Both sunny."])))
    calls = [("functions.get_weather:0", "sunny"), ("functions_2eget_weather_3a0", "rainy")]
    items = [{"role": "user", "content": "Weather?"}]
    items += [{"type": "function_call", "call_id": c, "name": "get_weather", "arguments": "{}"} for c, _ in calls]
    items += [{"type": "function_call_output", "call_id": c, "output": out} for c, out in calls]
    assert stream(http, {"model": "m", "tools": [WEATHER], "input": items}).text == "Both sunny."
    assistant, results = fake.requests[0].body["messages"][1:]
    ids = [b["id"] for b in assistant["content"]]
    assert ids == ["functions_2eget_weather_3a0-1", "functions_2eget_weather_3a0"]
    assert [(b["tool_use_id"], b["content"]) for b in results["content"]] == [(ids[0], "sunny"), (ids[1], "rainy")]
