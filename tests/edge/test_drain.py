"""SIGTERM with long streams: streams that finish within the drain timeout complete; the rest end with a
terminal `response.failed` (server_shutting_down) that is stored, never with a cut connection."""

from __future__ import annotations

import signal
import sqlite3
import threading

import httpx
import orjson

from tests.support.backends import GatewayProcess
from tests.support.fake_chat import Sleep, Stream, text_stream
from tests.support.stream_check import check_stream


def test_sigterm_drains_then_ends_what_is_left(upstream, tmp_path):
    db = tmp_path / "drain.db"
    short = text_stream(["quick ", "one"])
    upstream.enqueue(Stream(short[:2] + [Sleep(1.0)] + short[2:]),  # finishes inside the drain window
                     Stream(text_stream(["slow"])[:2] + [Sleep(60)]))  # does not
    gw = GatewayProcess(upstream.base_url, str(db), "--drain-timeout", "3").wait_ready()
    results: dict[str, bytes] = {}

    def post(name: str) -> None:
        with httpx.Client(base_url=gw.url, timeout=60) as http:
            results[name] = http.post("/v1/responses", json={"model": "m", "input": name, "stream": True}).content

    try:
        threads = [threading.Thread(target=post, args=(name,)) for name in ("short", "long")]
        for t in threads:  # one at a time, in order: each has reached the upstream before the next starts
            upstream_seen = len(upstream.requests)
            t.start()
            upstream.wait_requests(upstream_seen + 1)
        gw.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=30)
        assert gw.proc.wait(timeout=30) is not None
    finally:
        gw.kill()
    quick = check_stream(results["short"])
    assert quick.terminal["type"] == "response.completed" and quick.text == "quick one"
    cut = check_stream(results["long"])
    assert cut.terminal["type"] == "response.failed" and cut.events[-2]["code"] == "server_shutting_down"
    with sqlite3.connect(db) as conn:
        stored = {row[0]: orjson.loads(row[1])["status"] for row in conn.execute("SELECT id, body FROM responses")}
    assert stored[cut.response["id"]] == "failed" and stored[quick.response["id"]] == "completed"
