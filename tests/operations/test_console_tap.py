"""The event tap (tap.py) that the console's live view reads: nothing when no watcher is installed, and a
watcher that fails never fails the response it watches. Real gateway, real fake upstream."""

from __future__ import annotations

import httpx

from responses_gateway import tap
from responses_gateway.configure import make
from tests.support.fake_chat import text_stream
from tests.support.server import GatewayServer


async def _nothing():
    yield []


def test_without_a_watcher_the_batches_are_the_pipelines_own():
    tap.install(None)
    batches = _nothing()
    assert tap.watched({"id": "resp_x"}, "owner", batches) is batches


class Failing:
    def __init__(self):
        self.seen: list[str] = []

    def opened(self, response, owner):
        self.seen.append("opened")

    def batch(self, response_id, events):
        self.seen.append("batch")
        raise RuntimeError("a watcher's bug")

    def closed(self, response_id):
        self.seen.append("closed")


def test_a_failing_watcher_does_not_fail_the_response(upstream, tmp_path):
    watcher = Failing()
    upstream.enqueue(text_stream(["still ", "fine"]))
    with GatewayServer(make(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"))) as server:
        tap.install(watcher)
        try:
            with httpx.Client(base_url=server.url, timeout=30) as http, http.stream(
                    "POST", "/v1/responses", json={"model": "fake-model", "input": "hi", "stream": True}) as r:
                lines = list(r.iter_lines())
        finally:
            tap.install(None)
    assert any("response.completed" in line for line in lines)
    assert any('"delta":"fine"' in line for line in lines)
    assert watcher.seen == ["opened", "batch", "closed"]  # dropped from the response after it raised
