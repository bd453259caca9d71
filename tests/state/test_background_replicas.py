"""Background responses across real gateway processes: two replicas (A, B) sharing PostgreSQL, with Redis
and without it; and one process on the SQLite default that is killed and restarted.

Start on A, resume from B mid-stream with `starting_after` (no gap, no duplicate), cancel from B (the
upstream request on A is closed), SIGKILL A mid-job (B declares the response failed once A's lease has
expired and every follower gets a terminal event), SIGTERM drains running jobs."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import orjson
import pytest

from tests.support import backends, redis_cluster
from tests.support.fake_chat import Stream, text_stream

pg_database = backends.pg_database
redis_url = backends.redis_url
redis_cluster_url = redis_cluster.redis_cluster_url

MODEL = "fake-model"
WORDS = [f"w{k} " for k in range(40)]
FAST = ("--lease-timeout", "1", "--background-poll", "0.05")
BOUND = 15  # seconds: far above the 1 s lease plus one reaper round, far below "forever"


def slow(request) -> Stream:
    return Stream(text_stream(WORDS), delay=0.05)


@pytest.fixture(params=["redis", "redis-cluster", "database"])
def replicas(request, pg_database, upstream, tmp_path):
    """Two gateway processes on one PostgreSQL database, with Redis (one server, or a three-node Cluster) or
    with the database alone."""
    backends.Backend("postgresql", pg_database).clear()
    extra = {"redis": lambda: ["--redis", request.getfixturevalue("redis_url")],
             "redis-cluster": lambda: ["--redis", request.getfixturevalue("redis_cluster_url"), "--redis-cluster"],
             "database": list}[request.param]()
    upstream.default = slow
    procs = [backends.GatewayProcess(upstream.base_url, pg_database, *FAST, *extra,
                                     log_path=tmp_path / f"{name}.log") for name in "ab"]
    try:
        for proc in procs:
            proc.wait_ready(timeout=60)  # a loaded machine starts Python slowly
        yield procs
    finally:
        for proc in procs:
            proc.kill()
    if request.param != "database":  # the bus worked: no append fell back, no lost subscription
        for name in "ab":
            log = (tmp_path / f"{name}.log").read_text()
            assert "Redis append failed" not in log and "cancel channel lost" not in log, log[-2000:]


class Follower(threading.Thread):
    """GET ?stream=true on one replica, collecting events until the stream ends."""

    def __init__(self, url: str, rid: str, after: int | None = None):
        super().__init__(daemon=True)
        self.url, self.rid, self.after = url, rid, after
        self.events: list[dict] = []
        self.error: Exception | None = None

    def run(self) -> None:
        params = {"stream": "true"}
        if self.after is not None:
            params["starting_after"] = str(self.after)
        try:
            with httpx.Client(timeout=httpx.Timeout(10, read=BOUND)) as http, \
                    http.stream("GET", f"{self.url}/v1/responses/{self.rid}", params=params) as resp:
                for line in resp.iter_lines():
                    if line.startswith("data: {"):
                        self.events.append(orjson.loads(line[6:]))
        except (httpx.HTTPError, OSError) as exc:
            self.error = exc

    def wait_for(self, seq: int, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not (self.events and self.events[-1]["sequence_number"] >= seq):
            assert time.monotonic() < deadline, f"no event {seq} yet: {self.events[-1:]}"
            time.sleep(0.01)


def begin(url: str) -> str:
    resp = httpx.post(f"{url}/v1/responses", json={"model": MODEL, "input": "go", "background": True}, timeout=10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "queued"
    return resp.json()["id"]


def follow(url: str, rid: str, after: int | None = None) -> Follower:
    f = Follower(url, rid, after)
    f.start()
    return f


def test_resume_on_another_replica_mid_stream(replicas):
    a, b = replicas
    rid = begin(a.url)
    on_a = follow(a.url, rid)
    on_a.wait_for(8)
    on_b = follow(b.url, rid, after=5)
    on_b.join(BOUND)
    on_a.join(BOUND)
    assert not on_b.is_alive() and on_b.error is None
    seqs = [e["sequence_number"] for e in on_b.events]
    assert seqs == list(range(6, 6 + len(seqs))), seqs  # no gap, no duplicate
    assert on_b.events[-1]["type"] == "response.completed"
    assert on_b.events == on_a.events[6:]
    final = httpx.get(f"{b.url}/v1/responses/{rid}").json()
    assert final["status"] == "completed" and final["output"][0]["content"][0]["text"] == "".join(WORDS)
    replay = follow(b.url, rid)  # from event 0 after the end, on the replica that did not run it
    replay.join(BOUND)
    assert replay.events == on_a.events
    end = on_a.events[-1]["sequence_number"]
    for url in (a.url, b.url):  # resuming after the terminal event: nothing, on either replica
        at_end = follow(url, rid, after=end)
        at_end.join(BOUND)
        assert not at_end.is_alive() and at_end.error is None and at_end.events == []


def test_cancel_from_another_replica_stops_generation(replicas, upstream):
    a, b = replicas
    rid = begin(a.url)
    on_a, on_b = follow(a.url, rid), follow(b.url, rid)
    on_a.wait_for(5)
    resp = httpx.post(f"{b.url}/v1/responses/{rid}/cancel", timeout=BOUND)
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "cancelled"
    assert upstream.wait_disconnect(timeout=BOUND), "A kept generating after the cancel"
    for f in (on_a, on_b):
        f.join(BOUND)
        assert not f.is_alive() and f.error is None
        assert f.events[-1]["type"] == "response.incomplete"
        assert f.events[-1]["response"]["status"] == "cancelled"
    assert on_b.events == on_a.events
    assert httpx.get(f"{a.url}/v1/responses/{rid}").json()["status"] == "cancelled"
    again = httpx.post(f"{a.url}/v1/responses/{rid}/cancel", timeout=BOUND).json()
    assert again == resp.json()


def signal_mid_job(a, b, sig: int, at: int) -> tuple[str, Follower]:
    """Start a job on A, follow it on B, send A `sig` once B has seen event `at`; B's follower has ended."""
    rid = begin(a.url)
    on_b = follow(b.url, rid)
    on_b.wait_for(at)
    os.kill(a.proc.pid, sig)
    a.proc.wait(timeout=BOUND)  # after SIGTERM, uvicorn exits by re-raising it once shut down
    on_b.join(BOUND)
    return rid, on_b


def test_sigkill_mid_job_fails_it_on_the_survivor(replicas):
    a, b = replicas
    rid, on_b = signal_mid_job(a, b, signal.SIGKILL, 6)
    assert not on_b.is_alive(), "a follower still waits for a response whose replica died"
    assert on_b.error is None
    last = on_b.events[-1]
    assert last["type"] == "response.failed" and last["response"]["status"] == "failed"
    assert "lease expired" in last["response"]["error"]["message"]
    seqs = [e["sequence_number"] for e in on_b.events]
    assert seqs == sorted(set(seqs))
    got = httpx.get(f"{b.url}/v1/responses/{rid}").json()
    assert got["status"] == "failed" and "lease expired" in got["error"]["message"]


def test_sigterm_lets_running_jobs_finish(replicas):
    a, b = replicas
    rid, on_b = signal_mid_job(a, b, signal.SIGTERM, 3)
    assert on_b.events[-1]["type"] == "response.completed"
    got = httpx.get(f"{b.url}/v1/responses/{rid}").json()
    assert got["status"] == "completed" and got["output"][0]["content"][0]["text"] == "".join(WORDS)


def test_single_process_sqlite_restart_fails_the_orphan(upstream, tmp_path):
    """The embedded default: one process on SQLite dies mid-job; the next one on the same file fails the
    orphaned response instead of leaving it in_progress forever."""
    upstream.default = slow
    db = str(tmp_path / "responses.db")
    first = backends.GatewayProcess(upstream.base_url, db, *FAST, log_path=tmp_path / "first.log").wait_ready(60)
    try:
        rid = begin(first.url)
        on_first = follow(first.url, rid)
        on_first.wait_for(6)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)
    finally:
        first.kill()
    second = backends.GatewayProcess(upstream.base_url, db, *FAST, log_path=tmp_path / "second.log").wait_ready(60)
    try:
        f = follow(second.url, rid, after=2)
        f.join(BOUND)
        assert not f.is_alive() and f.events[-1]["type"] == "response.failed"
        assert f.events[0]["sequence_number"] == 3
        assert httpx.get(f"{second.url}/v1/responses/{rid}").json()["status"] == "failed"
    finally:
        second.kill()
