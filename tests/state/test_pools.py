"""Pools of replicas (issue 33; upstreams/pool.py): several fake model servers on loopback behind one route.

A 20-turn `previous_response_id` session stays on one replica, and moves once when that replica is killed;
new sessions spread; a replica that answers 503 is ejected and the request served by another, and an active
probe brings it back; with none left the gateway answers 503 with Retry-After; a stream cut mid-way ends with
one terminal event (never retried after the first event); two gateways on one database route a session the
same way; bad pool config stops `serve` with one line naming the route and the key."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import openai
import pytest

from responses_gateway.config import Settings
from responses_gateway.routing import load_rules
from tests.support.backends import pg_database  # noqa: F401 (fixture)
from tests.support.fake_chat import DROP, FakeChatUpstream, Sleep, Stream, error_json, text_stream
from tests.support.server import GatewayServer


@pytest.fixture
def replicas():
    ups = [FakeChatUpstream().start() for _ in range(3)]
    for up in ups:
        up.default = Stream(text_stream(["from ", "a replica"]))
    yield ups
    for up in ups:
        up.stop()


def _served(replicas) -> list[int]:
    return [len([r for r in up.requests if r.path.endswith("/chat/completions")]) for up in replicas]


def _client(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0, timeout=30)


def _pool(replicas) -> str:
    return ",".join(up.base_url for up in replicas)


def test_a_session_stays_on_one_replica_and_moves_once_when_it_dies(replicas, tmp_path):
    with GatewayServer(Settings(upstream_url=_pool(replicas), db=str(tmp_path / "r.db"))) as gw:
        client = _client(gw)
        previous = None
        for turn in range(20):
            answer = client.responses.create(model="m", input=f"turn {turn}", previous_response_id=previous)
            previous = answer.id
        served = _served(replicas)
        assert sorted(served) == [0, 0, 20], served  # every turn on one replica: its prefix cache holds it
        home = served.index(20)
        replicas[home].stop()
        for turn in range(5):
            answer = client.responses.create(model="m", input=f"after {turn}", previous_response_id=previous)
            assert answer.status == "completed"
            previous = answer.id
        after = [n - b for n, b in zip(_served(replicas), served, strict=True)]
        assert after[home] == 0 and sorted(after) == [0, 0, 5], after  # moved once, and lives there now
        health = httpx.get(f"{gw.url}/health", timeout=10).json()
        assert [r["healthy"] for r in health["pools"]["*"]].count(False) == 1
        assert health["status"] == "ok"


def test_new_sessions_spread_over_the_replicas(replicas):
    with GatewayServer(Settings(upstream_url=_pool(replicas), db="none")) as gw:
        client = _client(gw)
        for n in range(45):
            client.responses.create(model="m", input=f"a new session {n}", store=False)
        served = _served(replicas)
        assert sum(served) == 45 and min(served) >= 5, served


def test_a_failing_replica_is_ejected_and_a_probe_brings_it_back(replicas, tmp_path):
    bad, *good = replicas
    bad.default = error_json(503, "overloaded", type="server_error")
    config = tmp_path / "routes.toml"
    config.write_text(f'[[routes]]\nmatch = "*"\nbalance = "round_robin"\nprobe_interval = 0.3\n'
                      f'base_url = [{", ".join(repr(up.base_url) for up in replicas)}]\n'.replace("'", '"'))
    with GatewayServer(Settings(config=str(config), db="none")) as gw:
        client = _client(gw)
        for n in range(6):
            assert client.responses.create(model="m", input=f"q{n}", store=False).status == "completed"
        assert 1 <= _served(replicas)[0] <= 3  # tried, ejected, the others served everything
        metrics = httpx.get(f"{gw.url}/metrics", timeout=10).text
        assert 'responses_gateway_pool_ejections_total{replica="' in metrics
        assert 'responses_gateway_pool_failures_total{replica="' in metrics
        bad.default = Stream(text_stream(["back"]))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if httpx.get(f"{gw.url}/health", timeout=10).json()["pools"]["*"][0]["healthy"]:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the probe did not bring the replica back")
        for n in range(6):
            client.responses.create(model="m", input=f"r{n}", store=False)
        assert _served(replicas)[0] >= 2  # serving again


def test_no_replica_left_is_a_503_with_retry_after(replicas):
    with GatewayServer(Settings(upstream_url=_pool(replicas), db="none")) as gw:
        for up in replicas:
            up.stop()
        answer = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "hi", "store": False},
                            timeout=30)
        assert answer.status_code == 503, answer.text
        assert int(answer.headers["retry-after"]) >= 1
        error = answer.json()["error"]
        assert error["code"] == "upstream_unavailable" and "No replica" in error["message"]
        assert httpx.get(f"{gw.url}/health", timeout=10).status_code == 503


def test_a_stream_cut_mid_way_is_not_retried(replicas):
    for up in replicas:  # the replica dies after its first token
        up.default = Stream([*text_stream(["one "])[:2], Sleep(0.2), DROP])
    with GatewayServer(Settings(upstream_url=_pool(replicas), db="none")) as gw:
        with httpx.stream("POST", f"{gw.url}/v1/responses", timeout=30,
                          json={"model": "m", "input": "go", "stream": True, "store": False}) as answer:
            events = [line[7:] for line in answer.iter_lines() if line.startswith("event: ")]
        terminal = [e for e in events if e in ("response.completed", "response.failed", "response.incomplete")]
        assert terminal == ["response.failed"], events
        assert sum(_served(replicas)) == 1  # never sent again after the first event


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_two_gateways_on_one_database_route_a_session_the_same_way(replicas, tmp_path, request, database):
    db = str(tmp_path / "shared.db") if database == "sqlite" else request.getfixturevalue("pg_database")
    with GatewayServer(Settings(upstream_url=_pool(replicas), db=db)) as a, \
            GatewayServer(Settings(upstream_url=_pool(replicas), db=db)) as b:
        previous = None
        for turn in range(10):
            gw = (a, b)[turn % 2]
            previous = _client(gw).responses.create(model="m", input=f"turn {turn}", previous_response_id=previous).id
        assert sorted(_served(replicas)) == [0, 0, 10]


@pytest.mark.parametrize(("body", "said"), [
    ('base_url = []', "routes[0]: base_url is an empty list"),
    ('base_url = ["http://a:1/v1", "http://a:1/v1"]', "routes[0]: replica http://a:1/v1 is listed twice"),
    ('[[routes.replicas]]\nbase_url = "http://a:1/v1"\nweight = 0', "routes[0].replicas[0]: weight must be a "
                                                                    "positive number; got 0"),
    ('balance = "random"\nbase_url = ["http://a:1/v1", "http://b:1/v1"]', "routes[0]: balance must be one of"),
])
def test_bad_pool_config_stops_serve_with_one_line(tmp_path, body, said):
    config = tmp_path / "routes.toml"
    config.write_text(f'[[routes]]\nmatch = "m"\n{body}\n')
    with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        load_rules(str(config))
    done = subprocess.run([sys.executable, "-m", "responses_gateway", "serve", "--config", str(config),
                           "--db", "none", "--port", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_weights_share_the_load(tmp_path):
    ups = [FakeChatUpstream().start() for _ in range(2)]
    try:
        for up in ups:
            up.default = Stream(text_stream(["ok"]))
        config = tmp_path / "routes.toml"
        config.write_text(f'[[routes]]\nmatch = "*"\n[[routes.replicas]]\nbase_url = "{ups[0].base_url}"\nweight = 3\n'
                          f'[[routes.replicas]]\nbase_url = "{ups[1].base_url}"\nweight = 1\n')
        with GatewayServer(Settings(config=str(config), db="none")) as gw:
            for n in range(80):
                _client(gw).responses.create(model="m", input=f"session {n}", store=False)
        served = _served(ups)
        assert sum(served) == 80 and served[0] > 2 * served[1], served  # rendezvous weighted 3:1
    finally:
        for up in ups:
            up.stop()


def test_the_replica_is_in_the_access_log_line(replicas, caplog):
    caplog.set_level("INFO")
    with GatewayServer(Settings(upstream_url=_pool(replicas), db="none", access_log=True)) as gw:
        _client(gw).responses.create(model="m", input="which replica?", store=False)
        time.sleep(0.2)
    served = _served(replicas).index(1)
    lines = [r.getMessage() for r in caplog.records if '"POST /v1/responses' in r.getMessage()]
    assert lines and lines[-1].endswith(f"replica={replicas[served].base_url}"), lines


def _fake_replica(tokens: int, delay_ms: float) -> tuple[subprocess.Popen, str]:
    """bench.fake_upstream as a real process (it can be SIGKILLed mid-stream); its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens", str(tokens),
                             "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, next(word for word in line.split() if word.startswith("http://"))


def test_a_replica_killed_mid_load(tmp_path):
    """Two replica processes; one is SIGKILLed while 16 streams run: each stream ends with exactly one terminal
    event (those on the dead replica `response.failed`, never retried), and every request after the kill
    succeeds on the other replica (refused, retried, ejected: 0 failures)."""
    import concurrent.futures
    import signal

    procs = [_fake_replica(40, 25) for _ in range(2)]
    try:
        pool = ",".join(url for _, url in procs)
        with GatewayServer(Settings(upstream_url=pool, db="none")) as gw:
            def stream(n: int) -> list[str]:
                with httpx.stream("POST", f"{gw.url}/v1/responses", timeout=60,
                                  json={"model": "m", "input": f"stream {n}", "stream": True, "store": False}) as a:
                    return [line[7:] for line in a.iter_lines() if line.startswith("event: ")]

            with concurrent.futures.ThreadPoolExecutor(16) as pool_:
                running = [pool_.submit(stream, n) for n in range(16)]
                time.sleep(0.4)  # every stream has started
                procs[0][0].send_signal(signal.SIGKILL)
                ends = [future.result() for future in running]
            terminals = [[e for e in events if e in ("response.completed", "response.failed",
                                                     "response.incomplete")] for events in ends]
            assert all(len(t) == 1 for t in terminals), terminals
            assert any(t == ["response.failed"] for t in terminals)  # the dead replica's streams
            assert any(t == ["response.completed"] for t in terminals)  # the other's
            with concurrent.futures.ThreadPoolExecutor(8) as pool_:
                after = list(pool_.map(lambda n: httpx.post(f"{gw.url}/v1/responses", timeout=60, json={
                    "model": "m", "input": f"after {n}", "store": False}), range(20)))
            assert [a.status_code for a in after] == [200] * 20
            assert all(a.json()["status"] == "completed" for a in after)
    finally:
        for proc, _ in procs:
            proc.kill()
            proc.wait()


def test_retries_stop_at_the_steps_deadline(replicas, tmp_path):
    """Each replica takes 1.5 s to answer and the route's first-byte deadline is 1 s: the first replica times
    out, and no second attempt starts after the deadline (the request fails in about 1 s, not 3 x 1 s)."""
    for up in replicas:
        up.default = Stream(text_stream(["late"]), before_headers=1.5)
    config = tmp_path / "routes.toml"
    config.write_text(f'[[routes]]\nmatch = "*"\nfirst_byte_timeout = 1\n'
                      f'base_url = [{", ".join(chr(34) + up.base_url + chr(34) for up in replicas)}]\n')
    with GatewayServer(Settings(config=str(config), db="none")) as gw:
        started = time.monotonic()
        answer = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "hi", "store": False}, timeout=30)
        took = time.monotonic() - started
    assert answer.status_code == 504 and answer.json()["error"]["code"] == "upstream_first_byte_timeout"
    assert took < 2.5, took
    assert sum(_served(replicas)) == 1


def test_a_websocket_chain_stays_on_its_replica(replicas):
    """A WebSocket connection's chain (its last response kept in memory, `store: false`) names its session by
    the same first item: every turn goes to one replica."""
    import json

    from websockets.sync.client import connect

    with GatewayServer(Settings(upstream_url=_pool(replicas), db="none")) as gw, \
            connect(gw.url.replace("http://", "ws://", 1) + "/v1/responses") as ws:
        previous = None
        for turn in range(8):
            ws.send(json.dumps({"type": "response.create", "model": "m", "input": f"turn {turn}", "store": False,
                                **({"previous_response_id": previous} if previous else {})}))
            while True:
                event = json.loads(ws.recv(timeout=30))
                if event["type"] == "response.completed":
                    previous = event["response"]["id"]
                    break
                assert event["type"] not in ("response.failed", "error"), event
    assert sorted(_served(replicas)) == [0, 0, 8]
