"""The request surface: what is refused (with OpenAI's error shape) and what the upstream is sent."""

import pytest

from tests.helpers import create
from tests.support.fake_chat import text_stream

FN = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
FN2 = {"type": "function", "name": "other", "parameters": {"type": "object", "properties": {}}}


def error_of(http, body, status=400):
    resp = http.post("/v1/responses", json=body)
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert "Traceback" not in resp.text
    return err


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"input": "x"}, "model", "missing_required_parameter"),
    ({"model": "m", "input": "x", "top_k": 5}, "top_k", "unknown_parameter"),
    ({"model": "m", "input": "x", "temperature": 2.5}, "temperature", "decimal_above_max_value"),
    ({"model": "m", "input": "x", "temperature": -1}, "temperature", "decimal_below_min_value"),
    ({"model": "m", "input": "x", "top_p": "high"}, "top_p", "invalid_type"),
    ({"model": "m", "input": "x", "max_output_tokens": 3}, "max_output_tokens", "integer_below_min_value"),
    ({"model": "m", "input": "x", "top_logprobs": 21}, "top_logprobs", "integer_above_max_value"),
    ({"model": "m", "input": "x", "include": ["nope"]}, "include[0]", "invalid_value"),
    ({"model": "m", "input": "x", "reasoning": {"effort": "max"}}, "reasoning.effort", "invalid_value"),
    ({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}},
     "text.format.name", "missing_required_parameter"),
    ({"model": "m", "input": "x", "background": True, "store": False}, "background", "invalid_value"),
    ({"model": "m", "input": [{"type": "message", "content": "x"}]}, "input[0].role", "missing_required_parameter"),
    ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role", "invalid_value"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0].type", "unsupported_parameter"),
    ({"model": "m", "input": [{"type": "additional_tools", "tools": []}]}, "input[0].type", "unsupported_parameter"),
    ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id",
     "missing_required_parameter"),
    ({"model": "m", "input": [{"type": "warp_drive"}]}, "input[0].type", "invalid_value"),
    ({"model": "m", "input": "x", "tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name",
     "invalid_value"),
    ({"model": "m", "input": "x", "tools": [{"type": "mcp", "server_label": "s"}]}, "tools[0]",
     "invalid_value"),  # no server_url
    ({"model": "m", "input": "x", "tools": [FN], "tool_choice": "sometimes"}, "tool_choice", "invalid_value"),
    ({"model": "m", "input": "x", "metadata": {"k": 1}}, "metadata.k", "invalid_type"),
])
def test_invalid_requests(http, upstream, body, param, code):
    err = error_of(http, body)
    assert err["param"] == param and err["code"] == code and err["type"] == "invalid_request_error"
    assert upstream.requests == []  # refused before anything reached the model


def test_tool_choice_naming_a_missing_function(http, upstream):
    err = error_of(http, {"model": "m", "input": "x", "tools": [FN],
                          "tool_choice": {"type": "function", "name": "absent"}})
    assert err == {"message": "Tool choice 'function' not found in 'tools' parameter.",
                   "type": "invalid_request_error", "param": "tool_choice", "code": None}


def test_not_json_and_not_an_object(http):
    resp = http.post("/v1/responses", content=b"{nope", headers={"content-type": "application/json"})
    assert resp.status_code == 400 and "parse the JSON body" in resp.json()["error"]["message"]
    assert error_of(http, [1, 2])["code"] == "invalid_type"


def test_oversized_body_is_413(gateway):
    import httpx

    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    with GatewayServer(Settings(upstream_url="http://127.0.0.1:9/v1", max_body_bytes=1000)) as gw, \
            httpx.Client(base_url=gw.url) as c:
        resp = c.post("/v1/responses", json={"model": "m", "input": "x" * 2000})
        assert resp.status_code == 413
        assert resp.json()["error"]["code"] == "request_too_large"


def test_unknown_route_and_method(http):
    resp = http.get("/v1/nothing")
    assert resp.status_code == 404 and resp.json()["error"]["message"] == "Invalid URL (GET /v1/nothing)"
    assert http.get("/v1/responses").status_code == 405


def test_websocket_upgrade_is_refused_with_a_4xx_when_websocket_mode_is_off(upstream):
    import socket

    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    with GatewayServer(Settings(upstream_url=upstream.base_url, db="none", websocket="off")) as gateway, \
            socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as sock:
        sock.sendall(b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert int(status_line.split()[1]) == 426


def test_health_and_models(http, upstream):
    assert http.get("/health").json() == {"status": "ok", "database": "ok"}
    upstream.models = ["m-1", "m-2"]
    models = http.get("/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["m-1", "m-2"]


def sent(http, upstream, body) -> dict:
    upstream.enqueue(text_stream(["ok"]))
    create(http, {"model": "m", "input": "x", **body})
    return upstream.requests[-1].body


def test_sampling_and_limits_are_passed(http, upstream):
    body = sent(http, upstream, {"temperature": 0.2, "top_p": 0.9, "presence_penalty": 0.5,
                                 "frequency_penalty": -0.5, "max_output_tokens": 64,
                                 "reasoning": {"effort": "low", "summary": "auto"}})
    assert (body["temperature"], body["top_p"], body["presence_penalty"], body["frequency_penalty"]) == \
        (0.2, 0.9, 0.5, -0.5)
    assert body["max_tokens"] == 64 and body["reasoning_effort"] == "low"


def test_echoed_configuration(http, upstream):
    upstream.enqueue(text_stream(["ok"]))
    obj = create(http, {"model": "m", "input": "x", "instructions": "Be nice.", "temperature": 0.3,
                        "metadata": {"a": "b"}, "user": "u1", "safety_identifier": "s1",
                        "prompt_cache_key": "k", "store": False, "tools": [FN], "tool_choice": "required",
                        "text": {"verbosity": "low"}, "reasoning": {"effort": "high"}, "max_output_tokens": 99,
                        "parallel_tool_calls": False, "top_logprobs": 2})
    expected = {"instructions": "Be nice.", "temperature": 0.3, "metadata": {"a": "b"}, "user": "u1",
                "safety_identifier": "s1", "prompt_cache_key": "k", "store": False, "tool_choice": "required",
                "max_output_tokens": 99, "parallel_tool_calls": False, "top_logprobs": 2,
                "reasoning": {"effort": "high", "summary": None},
                "text": {"format": {"type": "text"}, "verbosity": "low"}}
    assert {k: obj[k] for k in expected} == expected
    assert obj["tools"] == [{"type": "function", "name": "lookup", "description": None,
                             "parameters": {"type": "object", "properties": {}}, "strict": None}]


@pytest.mark.parametrize(("choice", "tool_choice", "names"), [
    ("auto", "auto", ["lookup", "other"]),
    ("required", "required", ["lookup", "other"]),
    ("none", "none", ["lookup", "other"]),
    ({"type": "function", "name": "other"}, {"type": "function", "function": {"name": "other"}},
     ["lookup", "other"]),
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "other"}]},
     "required", ["other"]),
])
def test_tool_choice_is_a_real_constraint(http, upstream, choice, tool_choice, names):
    body = sent(http, upstream, {"tools": [FN, FN2], "tool_choice": choice, "parallel_tool_calls": False})
    assert body["tool_choice"] == tool_choice
    assert [t["function"]["name"] for t in body["tools"]] == names
    assert body["parallel_tool_calls"] is False


def test_text_formats_become_response_format(http, upstream):
    assert sent(http, upstream, {"text": {"format": {"type": "json_object"}}})["response_format"] == \
        {"type": "json_object"}
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = sent(http, upstream, {"text": {"format": {"type": "json_schema", "name": "thing", "schema": schema,
                                                     "strict": True}}})
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "thing", "schema": schema, "strict": True}}
    assert "response_format" not in sent(http, upstream, {"text": {"format": {"type": "text"}}})


def test_hosted_tools_are_dropped_not_offered(http, upstream):
    body = sent(http, upstream, {"tools": [FN, {"type": "web_search"}, {"type": "image_generation"}]})
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]


def test_hosted_tools_rejected_when_configured(gateway):
    import httpx

    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    with GatewayServer(Settings(upstream_url="http://127.0.0.1:9/v1", hosted_tools="reject")) as gw, \
            httpx.Client(base_url=gw.url) as c:
        resp = c.post("/v1/responses", json={"model": "m", "input": "x", "tools": [{"type": "web_search"}]})
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "tools[0].type"


def test_history_translation(http, upstream):
    image = "data:image/png;base64,iVBORw0KGgo="
    body = sent(http, upstream, {"instructions": "Sys.", "input": [
        {"role": "developer", "content": "Dev."},
        {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                     {"type": "input_image", "image_url": image, "detail": "low"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Calling."}]},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "raw text"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "result "}, {"type": "input_image", "image_url": image}]},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "patched"},
        {"role": "system", "content": "Late system note."},
        {"role": "assistant", "content": "Done."},
    ]})
    assert body["messages"] == [
        {"role": "system", "content": "Sys.\n\nDev."},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": image, "detail": "low"}}]},
        {"role": "assistant", "content": "Calling.", "reasoning_content": "hmm", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "patch", "arguments": '{"input":"raw text"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "result "},
        {"role": "tool", "tool_call_id": "c2", "content": "patched"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": image, "detail": "auto"}}]},
        {"role": "system", "content": "Late system note."},
        {"role": "assistant", "content": "Done."},
    ]


def test_sealed_reasoning_round_trips(http, upstream):
    """Reasoning given out as encrypted_content comes back to the upstream as text when echoed."""
    from tests.support.fake_chat import reasoning_then_text

    upstream.enqueue(reasoning_then_text(["secret ", "plan"], ["Hi"]))
    first = create(http, {"model": "m", "input": "x", "store": False, "include": ["reasoning.encrypted_content"]})
    reasoning = first["output"][0]
    assert reasoning["encrypted_content"]
    echoed = {"type": "reasoning", "id": reasoning["id"], "summary": [], "content": None,
              "encrypted_content": reasoning["encrypted_content"]}
    body = sent(http, upstream, {"input": [{"role": "user", "content": "x"}, echoed, first["output"][1],
                                           {"role": "user", "content": "again"}]})
    assert body["messages"][1] == {"role": "assistant", "content": "Hi", "reasoning_content": "secret plan"}


def test_dropped_hosted_tool_is_logged_once_per_process(caplog):
    """Agents send the same hosted tools every turn: one warning, not one per request."""
    import logging

    from responses_gateway.protocol import tools as tools_module

    tools_module._warned.discard("file_search")
    with caplog.at_level(logging.WARNING, logger="responses_gateway.tools"):
        for _ in range(3):
            tools_module.normalize_tools([FN, {"type": "file_search"}], None)
    said = [r.getMessage() for r in caplog.records if "'file_search'" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("hosted tool 'file_search' is dropped from requests")
