"""WebSocket mode at the edge, over real sockets: the queue of waiting requests is bounded (in requests and
in bytes) with an error frame past the bound, and SIGTERM drains running turns like HTTP streams — a turn
that finishes within the drain timeout completes, the rest end with a stored `response.failed`
(`server_shutting_down`) sent as frames, and then the connection closes (1012)."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time

import orjson
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from responses_gateway.api.websocket import QUEUE_FRAMES
from responses_gateway.config import Settings
from responses_gateway.conformance.rules import TERMINAL
from tests.support.backends import GatewayProcess
from tests.support.fake_chat import Sleep, Stream, text_stream
from tests.support.server import GatewayServer


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://", 1) + "/v1/responses"


def answers(ws, count: int) -> list[list[dict]]:
    """The next `count` answers: each a response's frames up to its terminal event, or one error frame."""
    out: list[list[dict]] = []
    while len(out) < count:
        frames = []
        while True:
            frame = json.loads(ws.recv(timeout=60))
            frames.append(frame)
            if frame["type"] in TERMINAL or (frame["type"] == "error" and "status" in frame):
                break
        out.append(frames)
    return out


def _slow_then(upstream, quick: int) -> None:
    upstream.enqueue(Stream(text_stream(["slow"]), delay=0.5), *[text_stream([f"q{i}"]) for i in range(quick)])


def test_the_queue_of_waiting_requests_is_bounded_in_bytes(upstream):
    settings = Settings(upstream_url=upstream.base_url, db="none", max_body_bytes=1_000_000)
    _slow_then(upstream, 2)
    with GatewayServer(settings) as gw, connect(ws_url(gw.url), max_size=None) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "first"}))
        big = json.dumps({"type": "response.create", "model": "m", "input": "x" * 400_000})
        for _ in range(5):  # while the first runs: 2 fit in 1 MB, 3 do not
            ws.send(big)
        got = answers(ws, 6)
    assert got[0][-1]["type"] == "response.completed"
    assert [a[-1]["type"] for a in got[1:3]] == ["response.completed"] * 2
    for refused in got[3:]:
        (frame,) = refused
        assert frame["status"] == 429 and frame["error"]["code"] == "websocket_queue_full", frame
        assert "1000000 bytes" in frame["error"]["message"]


def test_the_queue_of_waiting_requests_is_bounded_in_requests(upstream):
    settings = Settings(upstream_url=upstream.base_url, db="none")
    _slow_then(upstream, QUEUE_FRAMES)
    extra = 4
    with GatewayServer(settings) as gw, connect(ws_url(gw.url)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "first"}))
        for i in range(QUEUE_FRAMES + extra):
            ws.send(json.dumps({"type": "response.create", "model": "m", "input": f"n{i}"}))
        got = answers(ws, 1 + QUEUE_FRAMES + extra)
    kinds = [a[-1]["type"] if a[-1]["type"] != "error" else a[-1]["error"]["code"] for a in got]
    assert kinds == ["response.completed"] * (1 + QUEUE_FRAMES) + ["websocket_queue_full"] * extra, kinds


def test_sigterm_drains_websocket_turns(upstream, tmp_path):
    db = tmp_path / "ws-drain.db"
    gw = GatewayProcess(upstream.base_url, str(db), "--drain-timeout", "3", log_path=tmp_path / "gw.log")
    gw.wait_ready()
    results: dict[str, list] = {}
    connected = threading.Semaphore(0)

    def client(name: str, script) -> None:
        frames: list = []
        results[name] = frames
        with connect(ws_url(gw.url)) as ws:
            connected.release()
            if script is not None:
                ws.send(json.dumps({"type": "response.create", "model": "m", "input": name}))
            try:
                while True:
                    frames.append(json.loads(ws.recv(timeout=30)))
            except ConnectionClosed as closed:
                frames.append({"close": closed.rcvd.code if closed.rcvd else None})

    short = text_stream(["quick ", "one"])
    scripts = {"short": Stream(short[:2] + [Sleep(1.0)] + short[2:]),  # finishes inside the drain window
               "long1": Stream(text_stream(["slow"])[:2] + [Sleep(60)]),  # these do not
               "long2": Stream(text_stream(["slow"])[:2] + [Sleep(60)]),
               "idle": None}
    threads = []
    try:
        for name, script in scripts.items():  # one at a time: each turn has reached the upstream
            seen = len(upstream.requests)
            if script is not None:
                upstream.enqueue(script)
            t = threading.Thread(target=client, args=(name, script))
            t.start()
            threads.append(t)
            assert connected.acquire(timeout=15)
            upstream.wait_requests(seen + (script is not None))
        time.sleep(0.3)  # each turn has sent its first frames
        gw.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=30)
        assert gw.proc.wait(timeout=30) is not None
    finally:
        gw.kill()
    assert results["idle"] == [{"close": 1012}]
    short_frames = results["short"]
    assert short_frames[-1] == {"close": 1012}
    assert short_frames[-2]["type"] == "response.completed"
    with sqlite3.connect(db) as conn:
        stored = {row[0]: orjson.loads(row[1]) for row in conn.execute("SELECT id, body FROM responses")}
    assert stored[short_frames[0]["response"]["id"]]["status"] == "completed"
    for name in ("long1", "long2"):
        frames = results[name]
        assert frames[-1] == {"close": 1012}, frames[-3:]
        assert frames[-2]["type"] == "response.failed" and frames[-3]["code"] == "server_shutting_down"
        assert stored[frames[0]["response"]["id"]]["status"] == "failed"
    log = (tmp_path / "gw.log").read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]
