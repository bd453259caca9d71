"""SIGKILL the gateway process with streams in flight; restart it on the same store; nothing delivered is lost
and the rows are consistent."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import threading
import time

import httpx
import orjson

from tests.support import backends
from tests.support.fake_chat import RecordedRequest, Stream, text_stream

pg_database = backends.pg_database
backend = backends.backend

MODEL = "fake-model"
STREAMS = 10
ASK = re.compile(r"^request (\d+)$")


def slow(request: RecordedRequest) -> Stream:
    """Request i streams 4 + 4i words, 50 ms apart: the first finish in ~0.3 s, the last take ~2 s."""
    found = ASK.match(request.body["messages"][-1]["content"])
    i = int(found[1]) if found else 0
    return Stream(text_stream([f"r{i}w{k} " for k in range(4 + 4 * i)]), delay=0.05)


class Client(threading.Thread):
    """One streaming request; remembers the response id, the terminal event and whether [DONE] came."""

    def __init__(self, url: str, i: int):
        super().__init__(daemon=True)
        self.url, self.i = url, i
        self.response_id = None
        self.terminal = None
        self.done = False
        self.error = None

    def run(self) -> None:
        body = {"model": MODEL, "input": f"request {self.i}", "stream": True}
        try:
            with httpx.Client(timeout=httpx.Timeout(10, read=5)) as http, \
                    http.stream("POST", f"{self.url}/v1/responses", json=body) as resp:
                for line in resp.iter_lines():
                    if line == "data: [DONE]":
                        self.done = True
                    elif line.startswith("data: "):
                        event = orjson.loads(line[6:])
                        if event["type"] == "response.created":
                            self.response_id = event["response"]["id"]
                        elif event["type"] in ("response.completed", "response.incomplete", "response.failed"):
                            self.terminal = event
        except (httpx.HTTPError, OSError) as exc:  # the server was killed under us
            self.error = exc


def test_sigkill_mid_stream_loses_nothing_delivered(backend, upstream, tmp_path):
    upstream.default = slow
    first = backends.GatewayProcess(upstream.base_url, backend.db, log_path=tmp_path / "first.log")
    clients: list[Client] = []
    try:
        first.wait_ready()
        clients = [Client(first.url, i) for i in range(STREAMS)]
        for c in clients:
            c.start()
        deadline = time.monotonic() + 10
        while sum(c.terminal is not None for c in clients) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)
        for c in clients:
            c.join(timeout=10)
        assert not any(c.is_alive() for c in clients), "a client never noticed the server was gone"
    finally:
        first.kill()

    delivered = [c for c in clients if c.terminal is not None]
    cut = [c for c in clients if c.terminal is None]
    assert 4 <= len(delivered) < STREAMS, [(c.i, c.terminal is not None) for c in clients]
    assert all(c.terminal["type"] == "response.completed" for c in delivered)

    if backend.name == "sqlite":
        with sqlite3.connect(backend.db) as conn:  # recovers the WAL the dead process left
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert backend.consistency_problems() == []

    upstream.default = None
    upstream.enqueue(text_stream(["after the crash"]))
    second = backends.GatewayProcess(upstream.base_url, backend.db, log_path=tmp_path / "second.log")
    try:
        second.wait_ready()
        with httpx.Client(base_url=second.url, timeout=10) as http:
            for c in delivered:
                got = http.get(f"/v1/responses/{c.terminal['response']['id']}")
                assert got.status_code == 200, (c.i, got.text)
                assert got.json() == c.terminal["response"], c.i
                expected = "".join(f"r{c.i}w{k} " for k in range(4 + 4 * c.i))
                assert got.json()["output"][0]["content"][0]["text"] == expected
            for c in cut:  # never finished: either not kept, or kept whole
                if c.response_id is None:
                    continue
                got = http.get(f"/v1/responses/{c.response_id}")
                assert got.status_code in (200, 404), got.text
                if got.status_code == 200:
                    assert got.json()["status"] in ("completed", "incomplete", "failed")
            # the restarted gateway chains from a response the first one streamed
            last = delivered[-1]
            chained = http.post("/v1/responses", json={"model": MODEL, "input": "and now?",
                                                       "previous_response_id": last.terminal["response"]["id"]})
            assert chained.status_code == 200, chained.text
            assert upstream.requests[-1].body["messages"][-3:] == [
                {"role": "user", "content": f"request {last.i}"},
                {"role": "assistant", "content": "".join(f"r{last.i}w{k} " for k in range(4 + 4 * last.i))},
                {"role": "user", "content": "and now?"},
            ]
    finally:
        second.kill()

    if backend.name == "sqlite":
        with sqlite3.connect(backend.db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert backend.consistency_problems() == []
    stored = {row[0] for row in backend.query("SELECT id FROM responses")}
    assert {c.terminal["response"]["id"] for c in delivered} <= stored
