"""The console's live view across replicas (`--redis`): a response streaming on one gateway is listed by the
other's console and followed there to its end, through Redis (console/shared.py). Two real gateways — one a
child process, since the event tap is a process's — share one SQLite store and the test Redis; the reads are
plain HTTP (the browser tests are test_console.py)."""

from __future__ import annotations

import re
import threading
import time

import httpx

from responses_gateway.configure import make
from tests.support.backends import GatewayProcess, redis_url  # noqa: F401 (fixture)
from tests.support.fake_chat import Sleep, Stream, text_stream
from tests.support.server import GatewayServer

KEY = "console-admin-key-0123456789"


def login(http: httpx.Client) -> None:
    token = re.search(r'name="csrf" value="([^"]+)"', http.get("/console/login").text)
    assert token is not None
    assert http.post("/console/login", data={"csrf": token.group(1), "key": KEY}).status_code == 303


def test_a_live_response_on_one_replica_is_followed_from_another(upstream, redis_url, tmp_path,  # noqa: F811
                                                                 monkeypatch):
    db = str(tmp_path / "r.db")
    settings = make(upstream_url=upstream.base_url, db=db, console=True, console_key=KEY, redis_url=redis_url)
    pieces = text_stream(["one ", "replica ", "to another"])
    upstream.enqueue(Stream(pieces[:3] + [Sleep(2.0)] + pieces[3:]))
    monkeypatch.setenv("RG_CONSOLE_KEY", KEY)
    a = GatewayProcess(upstream.base_url, db, "--console", "--redis", redis_url, log_path=tmp_path / "a.log")
    try:
        a.wait_ready()
        replicas(a, settings)
    finally:
        a.kill()


def replicas(a: GatewayProcess, settings) -> None:
    with GatewayServer(settings) as b, httpx.Client(base_url=b.url, timeout=30) as http:
        login(http)
        assert "nothing in flight on the other replicas" in http.get("/console/live").text
        done: list[list[str]] = []

        def stream_it() -> None:
            with httpx.Client(base_url=a.url, timeout=30) as client, client.stream(
                    "POST", "/v1/responses", json={"model": "fake-model", "input": "hi", "stream": True}) as r:
                done.append(list(r.iter_lines()))

        runner = threading.Thread(target=stream_it)
        runner.start()
        try:
            rid = None
            for _ in range(100):
                page = http.get("/console/live").text
                section = page[page.index('id="other-replicas"'):page.index('id="just-ended"')]
                found = re.search(r"/console/live/(resp_[0-9a-f]+)", section)
                if found:
                    rid = found.group(1)
                    break
                time.sleep(0.05)
            assert rid is not None, "replica b's console never listed replica a's response"
            followed = http.get(f"/console/live/{rid}").text  # written as the events come, until the end
        finally:
            runner.join(30)
        assert "response.created" in followed and "replica" in followed and "to another" in followed
        assert re.search(r'id="ended">ended: <span class="status s-completed">completed', followed)
        assert done and any("response.completed" in line for line in done[0])
