"""Self-tests for the fake upstream: gateway tests are only as good as its fidelity."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.support.fake_chat import (
    DROP,
    FakeChatUpstream,
    Json,
    Sleep,
    Stream,
    error_in_stream,
    make_usage,
    malformed,
    reasoning_then_text,
    replay,
    sse_chunks,
    text_stream,
    tool_calls_stream,
)
from tests.support.recordings import (
    chat_recordings,
    load_recording,
    responses_recordings,
)


@pytest.fixture(scope="module")
def server():
    with FakeChatUpstream() as up:
        yield up


@pytest.fixture
def up(server):
    server.reset()
    server.default = None
    yield server
    server.reset()


def post(up, body=None, **kw):
    return httpx.post(f"{up.base_url}/chat/completions", json=body or {"model": "m"}, timeout=5, **kw)


def test_recordings_found():
    assert len(chat_recordings()) >= 5
    assert len(responses_recordings()) >= 5
    rec = load_recording(chat_recordings()[0])
    assert rec.request_body["messages"]


@pytest.mark.parametrize("path", chat_recordings(), ids=lambda p: p.stem)
def test_replay_is_byte_identical(up, path):
    rec = load_recording(path)
    up.enqueue(replay(rec))
    r = post(up, rec.request_body)
    assert r.status_code == rec.status
    assert r.headers["content-type"] == rec.headers["content-type"]
    if rec.is_stream:
        assert r.content == rec.sse_text.encode()
        assert r.headers["transfer-encoding"] == "chunked"
    else:
        assert r.json() == rec.body


def test_requests_are_recorded(up):
    up.enqueue(Json({"ok": True}))
    r = post(up, {"model": "m", "stream": False}, headers={"Authorization": "Bearer k"})
    assert r.json() == {"ok": True}
    [req] = up.requests
    assert req.path == "/v1/chat/completions"
    assert req.body == {"model": "m", "stream": False}
    assert req.headers["authorization"] == "Bearer k"


def test_empty_queue_gives_openai_500_then_default(up):
    r = post(up)
    assert r.status_code == 500
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    up.default = lambda req: Json({"echo": req.body["model"]})
    assert post(up).json() == {"echo": "m"}


def test_models_route(up):
    up.models = ["a", "b"]
    try:
        body = httpx.get(f"{up.base_url}/models", timeout=5).json()
    finally:
        up.models = ["fake-model"]
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["a", "b"]
    assert body["data"][0]["object"] == "model"


def test_drop_breaks_the_response(up):
    up.enqueue(Stream(text_stream(["a", "b"])[:2] + [DROP]))
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post(up)
    assert up.disconnects == 0


def test_client_disconnect_is_detected(up):
    up.enqueue(Stream(text_stream(["x"] * 200), delay=0.01))
    with httpx.stream("POST", f"{up.base_url}/chat/completions", json={}, timeout=5) as r:
        first = next(r.iter_raw())
        assert first.startswith(b"data: ")
    assert up.wait_disconnect(timeout=3)
    assert up.disconnects == 1


def test_disconnect_noticed_during_sleep(up):
    up.enqueue(Stream(["data: {}\n\n", Sleep(30), "data: [DONE]\n\n"]))
    start = time.monotonic()
    with httpx.stream("POST", f"{up.base_url}/chat/completions", json={}, timeout=5) as r:
        next(r.iter_raw())
    assert up.wait_disconnect(timeout=3)
    assert time.monotonic() - start < 5


def _frames(chunks):
    text = "".join(chunks)
    assert text.endswith("data: [DONE]\n\n")
    frames = text.split("\n\n")[:-1]
    assert all(f.startswith("data: ") for f in frames)
    return [json.loads(f[6:]) for f in frames[:-1]]


def test_builders_shapes():
    usage = make_usage(3, 2, cached_tokens=1)
    frames = _frames(text_stream(["Hel", "lo"], usage=usage))
    deltas = [f["choices"][0]["delta"] if f["choices"] else None for f in frames]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}, {}, None]
    assert frames[3]["choices"][0]["finish_reason"] == "stop"
    assert frames[3]["choices"][0]["logprobs"] is None
    assert frames[4]["usage"] == usage and usage["total_tokens"] == 5
    assert {f["id"] for f in frames} == {frames[0]["id"]}
    assert frames[0]["id"].startswith("chatcmpl-")
    assert all(f["object"] == "chat.completion.chunk" for f in frames)

    frames = _frames(reasoning_then_text(["hm"], ["ok"], field=("reasoning", "reasoning_content")))
    assert frames[1]["choices"][0]["delta"] == {"reasoning": "hm", "reasoning_content": "hm"}

    calls = [("call_a", "f", ['{"x"', ":1}"]), ("call_b", "g", ["{}"])]
    frames = _frames(tool_calls_stream(calls))
    pieces = [f["choices"][0]["delta"]["tool_calls"][0] for f in frames[1:-1]]
    assert [p["index"] for p in pieces] == [0, 1, 0]
    assert pieces[0]["id"] == "call_a" and pieces[1]["function"]["name"] == "g"
    assert pieces[2] == {"index": 0, "function": {"arguments": ":1}"}}
    assert frames[-1]["choices"][0]["finish_reason"] == "tool_calls"
    serial = _frames(tool_calls_stream(calls, interleave=False))
    assert [f["choices"][0]["delta"]["tool_calls"][0]["index"] for f in serial[1:-1]] == [0, 0, 1]

    assert json.loads(error_in_stream("boom")[6:])["error"]["message"] == "boom"
    with pytest.raises(ValueError):
        json.loads(malformed()[6:])
    assert len(sse_chunks([], finish_reason=None, done=False)) == 1  # role chunk only
