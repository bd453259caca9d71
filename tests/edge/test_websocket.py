"""WebSocket mode on GET /v1/responses, over loopback with a real WebSocket client (`websockets`).

Every event that arrives in a frame goes through the same checks as an SSE stream (ordering, schema, the
openai SDK's own models for SSE and for WebSocket events); error frames are checked against the Open
Responses `WebSocketErrorEvent` schema and the SDK's `ResponseWsError`.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl

import httpx
import pytest
from openai.types.responses.responses_server_event import ResponsesServerEvent
from pydantic import TypeAdapter
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from responses_gateway.config import Settings
from responses_gateway.conformance.rules import TERMINAL
from tests.helpers import sdk_validate
from tests.support.certs import self_signed
from tests.support.fake_chat import Sleep, Stream, error_in_stream, text_stream, tool_calls_stream
from tests.support.schema import validate_event, validate_response, validate_ws_error
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream

WS_EVENT = TypeAdapter(ResponsesServerEvent)


def ws_url(server) -> str:
    return server.url.replace("http://", "ws://", 1) + "/v1/responses"


def send(ws: ClientConnection, **body) -> None:
    ws.send(json.dumps({"type": "response.create", **body}))


def read_turn(ws: ClientConnection) -> list[dict]:
    """Frames up to the terminal event or an error frame (an error *event* inside a stream has no status)."""
    events = []
    while True:
        event = json.loads(ws.recv(timeout=30))
        events.append(event)
        if event["type"] in TERMINAL or (event["type"] == "error" and "status" in event):
            return events


def checked(events: list[dict]):
    """The frames of one response, through every check an SSE stream gets (framed as SSE, so that the
    sequence numbers are checked too); returns the StreamResult."""
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    result = check_stream(sse)
    for event in events:
        validate_event(event)
        sdk_validate(event)
        WS_EVENT.validate_python(event)
    validate_response(result.response)
    return result


def error_of(events: list[dict]) -> dict:
    assert len(events) == 1, events
    frame = events[0]
    validate_ws_error(frame)
    WS_EVENT.validate_python(frame)
    return frame


def turn(ws: ClientConnection, **body) -> list[dict]:
    send(ws, **body)
    return read_turn(ws)


def metric(server, sample: str) -> float:
    """One sample of the server's /metrics, e.g. `name_total{type="x"}`; 0 when it has not been counted yet."""
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def user(text: str) -> list[dict]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def test_events_are_the_sse_events_one_per_frame(gateway, upstream):
    upstream.enqueue(text_stream(["Hel", "lo"]),
                     tool_calls_stream([("call_1", "get_weather", ['{"ci', 'ty":"Oslo"}'])]))
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}]
    with connect(ws_url(gateway)) as ws:
        # Codex sends stream: true and the openai SDK may send stream_options: both are accepted and ignored
        text = checked(turn(ws, model="m", input="hi", stream=True, stream_options={"include_obfuscation": False}))
        assert text.text == "Hello"
        call = checked(turn(ws, model="m", input="weather?", tools=tools))
    assert call.response["output"][0]["type"] == "function_call"
    assert call.response["output"][0]["arguments"] == '{"city":"Oslo"}'


def test_store_false_chain_after_a_warm_up_lives_on_its_connection(gateway, upstream):
    upstream.enqueue(text_stream(["first"]), text_stream(["second"]))
    with connect(ws_url(gateway)) as ws:
        warm = checked(turn(ws, model="m", input=user("remember 42"), instructions="be brief", generate=False,
                            store=False))
        assert warm.types == ["response.created", "response.in_progress", "response.completed"]
        assert warm.response["output"] == [] and warm.response["usage"]["total_tokens"] == 0
        assert upstream.requests == [], "a warm-up calls no model"

        one = checked(turn(ws, model="m", input=user("what number?"), previous_response_id=warm.response["id"],
                           store=False))
        assert one.text == "first"
        two = checked(turn(ws, model="m", input=[], previous_response_id=one.response["id"], store=False))
        assert two.text == "second"
    first, second = (r.body["messages"] for r in upstream.requests)
    assert [m["role"] for m in first] == ["user", "user"]
    assert "remember 42" in json.dumps(first[0]) and "what number?" in json.dumps(first[1])
    # the second turn sent nothing new: its history is the first turn's input and output
    assert second == [*first, {"role": "assistant", "content": "first"}]

    # store: false responses exist only on the connection that made them
    with connect(ws_url(gateway)) as other:
        frame = error_of(turn(other, model="m", input=[], previous_response_id=two.response["id"]))
    assert frame["status"] == 400
    assert frame["error"]["code"] == "previous_response_not_found"
    assert frame["error"]["param"] == "previous_response_id"


def test_older_ids_fall_back_to_the_store(gateway, upstream):
    upstream.enqueue(text_stream(["a"]), text_stream(["b"]), text_stream(["c"]))
    with connect(ws_url(gateway)) as ws:
        stored = checked(turn(ws, model="m", input="one"))  # store defaults to true
        checked(turn(ws, model="m", input="two", store=False))  # now the connection's latest
        again = checked(turn(ws, model="m", input=user("three"), previous_response_id=stored.response["id"]))
    assert again.text == "c"
    assert [m["content"] for m in upstream.requests[-1].body["messages"]][:2] == ["one", "a"]


def test_an_error_frame_leaves_the_connection_usable(gateway, upstream):
    upstream.enqueue(text_stream(["fine"]))
    with connect(ws_url(gateway)) as ws:
        frame = error_of(turn(ws, model="m", input="x", temperature=7))
        assert frame["status"] == 400 and frame["error"]["param"] == "temperature"
        frame = error_of(turn(ws, model="m", input="x", background=True))
        assert frame["error"]["code"] == "unsupported_parameter" and frame["error"]["param"] == "background"
        frame = error_of(turn(ws, model="m", input="x", stream_id="lane-1"))  # lanes are not supported
        assert frame["error"]["param"] == "stream_id"
        assert checked(turn(ws, model="m", input="x")).text == "fine"


def test_a_failed_turn_forgets_the_cached_parent(gateway, upstream):
    upstream.enqueue(text_stream(["ok"]), Stream(text_stream(["par"])[:2] + [error_in_stream("boom")]),
                     text_stream(["ok"]))
    with connect(ws_url(gateway)) as ws:
        one = checked(turn(ws, model="m", input="x", store=False))
        failed = checked(turn(ws, model="m", input=[], previous_response_id=one.response["id"], store=False))
        assert failed.response["status"] == "failed"
        for parent in (failed, one):
            frame = error_of(turn(ws, model="m", input=[], previous_response_id=parent.response["id"], store=False))
            assert frame["error"]["code"] == "previous_response_not_found"
        # a request refused before it starts evicts the parent too: the client cannot half-continue a chain
        two = checked(turn(ws, model="m", input="y", store=False))
        error_of(turn(ws, model="m", input=[], previous_response_id=two.response["id"], top_p=9))
        frame = error_of(turn(ws, model="m", input=[], previous_response_id=two.response["id"], store=False))
    assert frame["error"]["code"] == "previous_response_not_found"


def test_malformed_and_unknown_messages_get_error_frames(gateway, upstream):
    upstream.enqueue(text_stream(["still here"]))
    invalid = 'responses_gateway_websocket_messages_total{type="invalid"}'
    before = metric(gateway, invalid)
    with connect(ws_url(gateway)) as ws:
        for message, code in [("not json", "invalid_json"), ("[1, 2]", "invalid_value"),
                              ('{"model": "m"}', "invalid_value"), ('{"type": "response.cancel"}', "invalid_value"),
                              (b'{"type": 7}', "invalid_value")]:
            ws.send(message)
            frame = error_of(read_turn(ws))
            assert (frame["status"], frame["error"]["code"]) == (400, code), (message, frame)
        # Codex acknowledges each response: no reply at all, so the next frame is the next response's
        ws.send(json.dumps({"type": "response.processed", "response_id": "resp_123"}))
        assert checked(turn(ws, model="m", input="x")).text == "still here"
    assert metric(gateway, invalid) == before + 5


def test_requests_queue_in_order(gateway, upstream):
    upstream.enqueue(Stream(text_stream(["slow"])[:2] + [Sleep(0.3)] + text_stream(["slow"])[2:]),
                     text_stream(["second"]))
    with connect(ws_url(gateway)) as ws:
        send(ws, model="m", input="one")
        ws.send("oops")  # answered after the running response, never inside it
        send(ws, model="m", input="two")
        first = checked(read_turn(ws))
        assert error_of(read_turn(ws))["error"]["code"] == "invalid_json"
        second = checked(read_turn(ws))
    assert (first.text, second.text) == ("slow", "second")


def test_client_disconnect_cancels_the_upstream(gateway, upstream):
    frames = text_stream(["one ", "two "])
    upstream.enqueue(Stream(frames[:3] + [Sleep(30)] + frames[3:]), text_stream(["after"]))
    with connect(ws_url(gateway)) as ws:
        send(ws, model="m", input="x")
        while json.loads(ws.recv(timeout=10))["type"] != "response.output_text.delta":
            pass
    assert upstream.wait_disconnect(timeout=5), "the upstream never saw the request end"
    with connect(ws_url(gateway)) as ws:
        assert checked(turn(ws, model="m", input="x")).text == "after"


@pytest.fixture
def special(upstream, tmp_path):
    """A gateway of its own with some settings changed, in front of the shared fake upstream."""
    servers = []

    def make(**changes) -> GatewayServer:
        settings = Settings(**{"upstream_url": upstream.base_url, "db": str(tmp_path / f"{len(servers)}.db"),
                               **changes})
        server = GatewayServer(settings).__enter__()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.__exit__(None, None, None)


def test_connection_lifetime_limit(special, upstream):
    server = special(websocket_max_minutes=0.01)  # 0.6 s
    with connect(ws_url(server)) as ws:
        frame = error_of(read_turn(ws))
        assert frame["error"]["code"] == "websocket_connection_limit_reached"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1000


def test_frame_size_limit(special, upstream):
    server = special(max_body_bytes=4096)
    upstream.enqueue(text_stream(["small"]))
    with connect(ws_url(server), max_size=None) as ws:
        frame = error_of(turn(ws, model="m", input="x" * 5000))
        assert (frame["status"], frame["error"]["code"]) == (413, "request_too_large")
        assert "4096 bytes" in frame["error"]["message"]
        assert checked(turn(ws, model="m", input="x")).text == "small"
        # far beyond the limit the server does not even read the message: it closes with 1009 (too big)
        send(ws, model="m", input="x" * 200_000)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1009


def test_frames_have_the_bodies_bounds(gateway, upstream):
    """Nesting depth and integer width are checked on a frame as on an HTTP body (an integer wider than 64
    bits used to become a float silently)."""
    deep: dict = {"type": "string"}
    for _ in range(80):
        deep = {"type": "array", "items": deep}
    with connect(ws_url(gateway)) as ws:
        frame = error_of(turn(ws, model="m", input="x", tools=[{"type": "function", "name": "f",
                                                                 "parameters": deep}]))
        assert frame["error"]["code"] == "nesting_too_deep"
        frame = error_of(turn(ws, model="m", input="x", max_output_tokens=2**70))
        assert (frame["error"]["code"], frame["error"]["param"]) == ("integer_out_of_range", "max_output_tokens")
    assert upstream.requests == []


def test_keys_and_isolation(special, upstream):
    server = special(api_keys="key-a,key-b")
    upstream.enqueue(text_stream(["mine"]), text_stream(["again"]))
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(server))
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body)["error"]["message"].startswith("You didn't provide an API key")
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(server), additional_headers={"Authorization": "Bearer wrong"})
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"

    with connect(ws_url(server), additional_headers={"Authorization": "Bearer key-a"}) as ws:
        mine = checked(turn(ws, model="m", input="x"))
    with connect(ws_url(server), additional_headers={"Authorization": "Bearer key-b"}) as ws:
        frame = error_of(turn(ws, model="m", input=[], previous_response_id=mine.response["id"]))
        assert frame["error"]["code"] == "previous_response_not_found"
    with connect(ws_url(server), additional_headers={"Authorization": "Bearer key-a"}) as ws:
        assert checked(turn(ws, model="m", input=[], previous_response_id=mine.response["id"])).text == "again"


def test_websocket_off_answers_426(special):
    server = special(websocket="off")
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(server))
    assert refused.value.response.status_code == 426
    assert json.loads(refused.value.response.body)["error"]["code"] == "websocket_not_supported"


def test_store_none_keeps_the_chain_on_the_connection(special, upstream):
    server = special(db="none")
    upstream.enqueue(text_stream(["a"]), text_stream(["b"]))
    with connect(ws_url(server)) as ws:
        one = checked(turn(ws, model="m", input="x"))
        assert checked(turn(ws, model="m", input=[], previous_response_id=one.response["id"])).text == "b"
        frame = error_of(turn(ws, model="m", input=[], previous_response_id="resp_unknown"))
    assert frame["error"]["code"] == "previous_response_not_found"


def test_the_server_pings_and_answers_pings(special):
    server = special(websocket_ping_interval=0.2)
    with connect(ws_url(server), ping_interval=None) as ws:
        assert ws.ping(b"hello").wait(timeout=10)  # our ping, its pong
    # a raw client sees the server's own pings (the websockets client answers them silently)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        key = base64.b64encode(os.urandom(16)).decode()
        raw.sendall((f"GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade"
                     f"\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += raw.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        opcode = raw.recv(2)[0] & 0x0F
    assert opcode == 0x9, "expected a ping frame"


def test_wss_behind_tls(upstream, tmp_path):
    cert, key = self_signed(tmp_path)
    settings = Settings(upstream_url=upstream.base_url, db="none")
    upstream.enqueue(text_stream(["secure"]))
    with GatewayServer(settings, ssl_certfile=str(cert), ssl_keyfile=str(key)) as server:
        context = ssl.create_default_context(cafile=str(cert))
        url = f"wss://127.0.0.1:{server.port}/v1/responses"
        with connect(url, ssl=context) as ws:
            assert checked(turn(ws, model="m", input="x")).text == "secure"
        with httpx.Client(verify=context) as http:  # the same port serves HTTPS
            assert http.get(f"https://127.0.0.1:{server.port}/health").status_code == 200



def test_openai_sdk_websocket_client(gateway, upstream):
    """openai-python's own Responses WebSocket client: `client.responses.connect()`."""
    import openai

    upstream.enqueue(text_stream(["via ", "sdk"]), text_stream(["chained"]))
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="test-key", max_retries=0)
    with client.responses.connect() as conn:
        conn.response.create(model="m", input="hi", store=False)
        events = []
        for event in conn:
            events.append(event.to_dict())
            if event.type in TERMINAL:
                break
        first = checked(events)
        assert first.text == "via sdk"
        conn.response.create(model="m", input=[], previous_response_id=first.response["id"], store=False)
        for event in conn:
            if event.type in TERMINAL:
                break
    assert event.type == "response.completed"
    assert event.response.output_text == "chained"
