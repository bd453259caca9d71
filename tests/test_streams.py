"""Scripted upstream streams through the real gateway: every shape a Chat Completions server sends."""

import asyncio

import orjson

from responses_gateway import generation
from responses_gateway.errors import UpstreamError
from responses_gateway.protocol.items import normalize_input
from responses_gateway.protocol.request import CreateResponse
from responses_gateway.protocol.tools import EMPTY, normalize_tools
from responses_gateway.route import Route
from responses_gateway.upstreams.base import Call
from responses_gateway.upstreams.registry import build_upstream
from tests.helpers import create, stream
from tests.support.fake_chat import (
    DROP,
    Json,
    Stream,
    error_in_stream,
    error_json,
    make_usage,
    malformed,
    reasoning_then_text,
    sse_chunks,
    sse_frame,
    text_stream,
    tool_calls_stream,
)

TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}},
]


def test_text(http, upstream):
    upstream.enqueue(text_stream(["Hel", "lo", " world"], usage=make_usage(11, 3)))
    result = stream(http, {"model": "fake-model", "input": "hi"})
    assert result.text == "Hello world"
    assert result.types[:2] == ["response.created", "response.in_progress"]
    assert result.terminal["type"] == "response.completed"
    out = result.response["output"]
    assert [i["type"] for i in out] == ["message"]
    assert out[0]["content"][0]["text"] == "Hello world"
    assert out[0]["status"] == "completed"
    assert result.response["usage"] == {
        "input_tokens": 11, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 14,
    }
    assert result.response["completed_at"] is not None
    sent = upstream.requests[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == [{"role": "user", "content": "hi"}]


def test_reasoning_then_text(http, upstream):
    upstream.enqueue(reasoning_then_text(["Let me ", "think."], ["Paris", "."],
                                         field=("reasoning", "reasoning_content"),
                                         usage=make_usage(5, 9, reasoning_tokens=4)))
    result = stream(http, {"model": "fake-model", "input": "capital of France?"})
    out = result.response["output"]
    assert [i["type"] for i in out] == ["reasoning", "message"]
    # vLLM sends the same text under both keys: it must be counted once
    assert out[0]["content"] == [{"type": "reasoning_text", "text": "Let me think."}]
    assert out[1]["content"][0]["text"] == "Paris."
    assert "response.reasoning_text.delta" in result.types
    assert result.response["usage"]["output_tokens_details"]["reasoning_tokens"] == 4


def test_reasoning_as_summary_when_requested(http, upstream):
    upstream.enqueue(reasoning_then_text(["Step ", "one."], ["Done."]))
    result = stream(http, {"model": "fake-model", "input": "x", "reasoning": {"summary": "auto"}})
    reasoning = result.response["output"][0]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Step one."}]
    assert reasoning["content"] == []
    assert "response.reasoning_summary_text.delta" in result.types
    assert "response.reasoning_text.delta" not in result.types
    assert result.response["reasoning"]["summary"] == "auto"


def test_parallel_tool_calls_interleaved(http, upstream):
    upstream.enqueue(tool_calls_stream([
        ("call_a", "get_weather", ['{"ci', 'ty": "Pa', 'ris"}']),
        ("call_b", "get_time", ["{", "}"]),
    ], interleave=True))
    result = stream(http, {"model": "fake-model", "input": "weather and time", "tools": TOOLS})
    out = result.response["output"]
    assert [(i["type"], i["name"], i["call_id"], i["arguments"]) for i in out] == [
        ("function_call", "get_weather", "call_a", '{"city": "Paris"}'),
        ("function_call", "get_time", "call_b", "{}"),
    ]
    assert all(i["status"] == "completed" and i["id"].startswith("fc_") for i in out)
    done = [e for e in result.events if e["type"] == "response.function_call_arguments.done"]
    assert [e["name"] for e in done] == ["get_weather", "get_time"]
    sent = upstream.requests[0].body
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", "get_time"]
    assert sent["tool_choice"] == "auto"


def test_text_then_tool_call(http, upstream):
    upstream.enqueue(sse_chunks([
        {"content": "Checking."},
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "get_time", "arguments": "{}"}}]},
    ], finish_reason="tool_calls"))
    result = stream(http, {"model": "fake-model", "input": "time?", "tools": TOOLS})
    assert [i["type"] for i in result.response["output"]] == ["message", "function_call"]


def test_custom_tool_call_streams_raw_input(http, upstream):
    patch = '*** Begin Patch\n*** Add File: a.txt\n+hello "quoted" \\ back\n*** End Patch'
    args = orjson.dumps({"input": patch}).decode()
    fragments = [args[i:i + 7] for i in range(0, len(args), 7)]
    upstream.enqueue(tool_calls_stream([("call_p", "apply_patch", fragments)]))
    tools = [{"type": "custom", "name": "apply_patch", "description": "Apply a patch",
              "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/s"}}]
    result = stream(http, {"model": "fake-model", "input": "add a file", "tools": tools})
    (item,) = result.response["output"]
    assert item["type"] == "custom_tool_call"
    assert item["input"] == patch and item["name"] == "apply_patch" and item["call_id"] == "call_p"
    deltas = [e["delta"] for e in result.events if e["type"] == "response.custom_tool_call_input.delta"]
    assert len(deltas) > 3 and "".join(deltas) == patch
    offered = upstream.requests[0].body["tools"][0]["function"]
    assert offered["name"] == "apply_patch"
    assert offered["parameters"]["required"] == ["input"]
    assert "start: /.+/s" in offered["description"]


def test_length_cut_is_incomplete(http, upstream):
    upstream.enqueue(text_stream(["Partial", " output"], finish_reason="length", usage=make_usage(5, 16)))
    result = stream(http, {"model": "fake-model", "input": "long", "max_output_tokens": 16})
    assert result.terminal["type"] == "response.incomplete"
    assert result.response["status"] == "incomplete"
    assert result.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert result.response["output"][0]["status"] == "incomplete"
    assert upstream.requests[0].body["max_tokens"] == 16


def test_content_filter_is_incomplete(http, upstream):
    upstream.enqueue(text_stream(["Some"], finish_reason="content_filter"))
    result = stream(http, {"model": "fake-model", "input": "x"})
    assert result.terminal["type"] == "response.incomplete"
    assert result.response["incomplete_details"] == {"reason": "content_filter"}


def test_refusal(http, upstream):
    upstream.enqueue(sse_chunks([{"refusal": "I can't "}, {"refusal": "help with that."}]))
    result = stream(http, {"model": "fake-model", "input": "x"})
    (msg,) = result.response["output"]
    assert msg["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]
    assert "response.refusal.done" in result.types


def test_logprobs_when_included(http, upstream):
    def chunk(token):
        entry = {"token": token, "logprob": -0.5, "bytes": list(token.encode())}
        return sse_frame({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                          "choices": [{"index": 0, "delta": {"content": token},
                                       "logprobs": {"content": [{**entry, "top_logprobs": [entry]}]},
                                       "finish_reason": None}]})
    frames = sse_chunks([])
    upstream.enqueue(frames[:1] + [chunk("A"), chunk("B")] + frames[1:])
    result = stream(http, {"model": "fake-model", "input": "x", "top_logprobs": 1,
                           "include": ["message.output_text.logprobs"]})
    part = result.response["output"][0]["content"][0]
    assert part["text"] == "AB"
    assert [t["token"] for t in part["logprobs"]] == ["A", "B"]
    assert part["logprobs"][0]["top_logprobs"][0]["logprob"] == -0.5
    deltas = [e for e in result.events if e["type"] == "response.output_text.delta"]
    assert [d["logprobs"][0]["token"] for d in deltas] == ["A", "B"]
    sent = upstream.requests[0].body
    assert sent["logprobs"] is True and sent["top_logprobs"] == 1


def test_http_500_before_stream(http, upstream):
    upstream.enqueue(error_json(500, "boom", type="InternalServerError"))
    resp = http.post("/v1/responses", json={"model": "fake-model", "input": "x", "stream": True})
    assert resp.status_code == 502
    assert resp.json()["error"]["code"] == "upstream_error"
    assert "Traceback" not in resp.text


def test_upstream_503_is_503(http, upstream):
    upstream.enqueue(error_json(503, "overloaded"))
    resp = http.post("/v1/responses", json={"model": "fake-model", "input": "x"})
    assert resp.status_code == 503
    assert resp.json()["error"]["type"] == "server_error"


def test_unknown_model_is_404(http, upstream):
    upstream.enqueue(Json({"error": {"message": "The model `nope` does not exist.", "type": "NotFoundError",
                                     "param": "model", "code": 404}}, status=404))
    resp = http.post("/v1/responses", json={"model": "nope", "input": "x", "stream": True})
    assert resp.status_code == 404
    err = resp.json()["error"]
    assert err["code"] == "model_not_found" and err["type"] == "invalid_request_error"
    assert "nope" in err["message"]


def _failed(http, upstream, frames, expect_text=""):
    upstream.enqueue(Stream(frames))
    result = stream(http, {"model": "fake-model", "input": "x"})
    assert result.terminal["type"] == "response.failed"
    assert result.types[-2] == "error"
    error_event = result.events[-2]
    assert error_event["message"] and error_event["error"]["message"] == error_event["message"]
    assert result.response["status"] == "failed"
    assert result.response["error"]["message"]
    assert result.text == expect_text
    return result


def test_connection_dropped_mid_stream(http, upstream):
    frames = text_stream(["Hel", "lo"])[:3] + [DROP]
    result = _failed(http, upstream, frames, expect_text="Hello")
    assert result.response["output"][0]["status"] == "incomplete"
    assert "lost" in result.response["error"]["message"]


def test_malformed_chunk(http, upstream):
    frames = text_stream(["Hi"])[:2] + [malformed()]
    result = _failed(http, upstream, frames, expect_text="Hi")
    assert "not JSON" in result.response["error"]["message"]


def test_error_object_inside_stream(http, upstream):
    frames = text_stream(["Hi"])[:2] + [error_in_stream("out of memory", code=500)]
    result = _failed(http, upstream, frames, expect_text="Hi")
    assert "out of memory" in result.response["error"]["message"]


def test_stream_ending_without_finish_or_done_fails(http, upstream):
    _failed(http, upstream, text_stream(["Hi"], finish_reason=None, done=False), expect_text="Hi")


def test_non_streaming_returns_terminal_object(http, upstream):
    upstream.enqueue(reasoning_then_text(["hmm"], ["Paris."], usage=make_usage(3, 4)))
    obj = create(http, {"model": "fake-model", "input": "capital?"})
    assert obj["status"] == "completed"
    assert [i["type"] for i in obj["output"]] == ["reasoning", "message"]
    assert obj["output"][1]["content"][0]["text"] == "Paris."
    assert obj["usage"]["total_tokens"] == 7


def test_non_streaming_failure_is_502(http, upstream):
    upstream.enqueue(Stream(text_stream(["Hel"])[:2] + [DROP]))
    resp = http.post("/v1/responses", json={"model": "fake-model", "input": "x"})
    assert resp.status_code == 502
    rid = resp.headers["x-response-id"]
    assert resp.json()["error"]["message"].endswith(f"(response {rid} was stored with status failed)")
    stored = http.get(f"/v1/responses/{rid}").json()  # the id in the error finds the failed response
    assert stored["status"] == "failed" and resp.json()["error"]["message"].startswith(stored["error"]["message"])
    # the 502 carries the failure's own code, as a stream's `error` event does; response.error.code keeps to
    # OpenAI's closed set
    assert (resp.json()["error"]["code"], stored["error"]["code"]) == ("upstream_error", "server_error")


def test_upstream_answering_json_despite_stream(http, upstream):
    upstream.enqueue(Json({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "Paris."}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}))
    result = stream(http, {"model": "fake-model", "input": "x"})
    assert result.text == "Paris."
    assert result.response["usage"]["total_tokens"] == 5


def test_upstream_unreachable(gateway):
    import httpx

    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    with GatewayServer(Settings(upstream_url="http://127.0.0.1:9/v1")) as gw, httpx.Client(base_url=gw.url) as c:
        resp = c.post("/v1/responses", json={"model": "m", "input": "x", "stream": True})
        assert resp.status_code == 502
        assert resp.json()["error"]["code"] == "upstream_unreachable"


def test_tokens_sent_before_a_dropped_connection_reach_a_late_reader(upstream):
    """The upstream sends two tokens and drops the connection before the gateway reads at all: both tokens
    still come out of the stream, then the loss (aiohttp raises the loss and keeps them in its buffer)."""
    async def read_late() -> tuple[str, bool]:
        adapter = build_upstream(Route(kind="chat_completions", base_url=upstream.base_url))
        req = CreateResponse(model="m", input="x")
        stream_ = await adapter.open(Call(req, normalize_input(req.input, EMPTY), normalize_tools(None, None)))
        await asyncio.sleep(0.5)  # the tokens and the connection's loss have both arrived by now
        text, lost = "", False
        try:
            async for batch in stream_:
                text += "".join(e.text for e in batch if isinstance(e, generation.TextDelta))
        except UpstreamError:
            lost = True
        finally:
            await stream_.aclose()
            await adapter.close()
        return text, lost

    upstream.enqueue(Stream(text_stream(["Hel", "lo"])[:3] + [DROP]))
    assert asyncio.run(read_late()) == ("Hello", True)
