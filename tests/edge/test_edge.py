"""The edge against real sockets and a real gateway process: slow and idle clients are closed within their
bounds (counted and logged) while normal requests still succeed; connections beyond the cap are closed at
once; requests beyond the in-flight and per-key limits get OpenAI's 429."""

from __future__ import annotations

import select
import socket
import threading
import time

import httpx
import openai
import orjson
import pytest

from responses_gateway.config import Settings
from tests.support.backends import GatewayProcess, closed_counts
from tests.support.fake_chat import Stream, text_stream
from tests.support.server import GatewayServer

SLACK = 5.0  # on top of each bound: a loaded machine is slow, but never this slow


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _closed_counts(gw: GatewayProcess) -> dict[str, float]:
    return closed_counts(gw.url)


def _closed_after(socks: dict[str, list[socket.socket]], started: float, limit: float,
                  trickle: list[socket.socket]) -> dict[str, list[float]]:
    """Wait until every socket is closed by the server (EOF or reset); seconds each took, by kind. Sockets in
    `trickle` get one more header byte every 100 ms meanwhile, like slowloris."""
    when: dict[socket.socket, float] = {}
    kind_of = {s: kind for kind, group in socks.items() for s in group}
    last_trickle = 0.0
    while len(when) < len(kind_of) and time.monotonic() - started < limit:
        open_ = [s for s in kind_of if s not in when]
        if time.monotonic() - last_trickle > 0.1:
            last_trickle = time.monotonic()
            for s in trickle:
                if s not in when:
                    try:
                        s.send(b"a")
                    except OSError:
                        when[s] = time.monotonic() - started
        readable, _, _ = select.select([s for s in open_ if s not in when], [], [], 0.05)
        for s in readable:
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                when[s] = time.monotonic() - started
    out: dict[str, list[float]] = {kind: [] for kind in socks}
    for s, kind in kind_of.items():
        out[kind].append(when.get(s, float("inf")))
    return out


def test_slow_and_idle_clients_are_closed(upstream, tmp_path):
    gw = GatewayProcess(upstream.base_url, "none", "--header-timeout", "1", "--body-timeout", "1",
                        "--keep-alive-timeout", "1", log_path=tmp_path / "gw.log", log_level="info")
    try:
        gw.wait_ready()
        socks: dict[str, list[socket.socket]] = {"silent": [], "headers": [], "body": [], "keep_alive": []}
        for _ in range(20):
            socks["silent"].append(_connect(gw.port))  # connects, never sends
        for _ in range(20):
            s = _connect(gw.port)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and then a byte every 100 ms
            socks["headers"].append(s)
        for _ in range(20):
            s = _connect(gw.port)
            s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"model\": ")  # a body that never ends
            socks["body"].append(s)
        for _ in range(20):
            s = _connect(gw.port)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"200 OK" in s.recv(65536)
            socks["keep_alive"].append(s)  # answered, then idle
        started = time.monotonic()

        result: dict[str, object] = {}

        def normal_requests() -> None:  # meanwhile, ordinary clients are served
            upstream.enqueue(text_stream(["still ", "serving"]))
            with httpx.Client(base_url=gw.url, timeout=30) as c:
                result["health"] = c.get("/health").status_code
                result["answer"] = c.post("/v1/responses", json={"model": "m", "input": "hi"}).json()

        worker = threading.Thread(target=normal_requests)
        worker.start()
        took = _closed_after(socks, started, 1 + SLACK + 10, trickle=socks["headers"])
        worker.join(30)
        for kind, times in took.items():
            assert max(times) < 1 + SLACK, (kind, times)  # every one closed, within its 1 s bound (+ slack)
        assert result["health"] == 200
        assert result["answer"]["output"][0]["content"][0]["text"] == "still serving"

        closed = _closed_counts(gw)
        for reason, at_least in (("header_timeout", 40), ("body_timeout", 20), ("idle", 20)):
            assert closed[reason] >= at_least, closed
        log = (tmp_path / "gw.log").read_text()
        assert "header timeout (not done within 1s)" in log and "body timeout (not done within 1s)" in log
        assert "Traceback" not in log
        for group in socks.values():
            for s in group:
                s.close()
    finally:
        gw.kill()


def test_connections_beyond_the_cap_are_closed_at_once(upstream, tmp_path):
    """At the cap with every connection busy (a request head in progress), one more is closed at once."""
    gw = GatewayProcess(upstream.base_url, "none", "--max-connections", "5", log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        time.sleep(0.2)  # the readiness probe's connection is gone
        held = [_connect(gw.port) for _ in range(5)]
        for s in held:
            s.sendall(b"GET /health HTTP/1.1\r\n")  # busy: a head in progress is not idle
        time.sleep(0.2)
        extra = _connect(gw.port)
        extra.settimeout(10)
        assert extra.recv(1) == b""  # closed by the server without a byte
        held.pop().close()
        time.sleep(0.2)
        assert httpx.get(f"{gw.url}/health", timeout=10).status_code == 200
        metrics = httpx.get(f"{gw.url}/metrics", timeout=10).text
        assert 'responses_gateway_connections_closed_total{reason="over_capacity"}' in metrics
        for s in held + [extra]:
            s.close()
    finally:
        gw.kill()


def _in_parallel(n: int, call) -> list:
    results: list = [None] * n

    def one(i: int) -> None:
        try:
            results[i] = call(i)
        except Exception as exc:  # noqa: BLE001 (the test inspects what each call raised)
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _slow(upstream, n: int) -> None:
    upstream.enqueue(*[Stream(text_stream(["a", "b", "c", "d"]), delay=0.5) for _ in range(n)])


def test_per_key_concurrency_and_in_flight_caps_answer_429(upstream):
    settings = Settings(upstream_url=upstream.base_url, db="none", api_keys="key-a,key-b", key_max_in_flight=1,
                        max_in_flight=2)
    with GatewayServer(settings) as gw:
        a = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="key-a", max_retries=0)
        b = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="key-b", max_retries=0)
        _slow(upstream, 2)
        first = threading.Thread(target=lambda: a.responses.create(model="m", input="x"))
        first.start()
        time.sleep(0.5)  # A's first request is in flight (the upstream is slow)
        with pytest.raises(openai.RateLimitError) as exc:
            a.responses.create(model="m", input="again")
        err = exc.value
        assert err.body["type"] == "requests" and err.body["code"] == "rate_limit_exceeded"
        assert err.response.headers["retry-after"] == "1"
        assert b.responses.create(model="m", input="b").output_text == "abcd"  # another key is not limited
        first.join(30)

        _slow(upstream, 3)
        keys = ["key-a", "key-b", "key-a"]
        results = _in_parallel(3, lambda i: httpx.post(
            f"{gw.url}/v1/responses", json={"model": "m", "input": "x"},
            headers={"authorization": f"Bearer {keys[i]}"}, timeout=30))
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200, 200, 429], statuses
        upstream.reset()


def test_per_key_request_rate_answers_429(upstream):
    settings = Settings(upstream_url=upstream.base_url, db="none", api_keys="key-a,key-b",
                        key_requests_per_minute=2)
    with GatewayServer(settings) as gw:
        upstream.enqueue(*[text_stream(["ok"]) for _ in range(3)])
        a = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="key-a", max_retries=0)
        b = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="key-b", max_retries=0)
        a.responses.create(model="m", input="1")
        a.responses.create(model="m", input="2")
        with pytest.raises(openai.RateLimitError) as exc:
            a.responses.create(model="m", input="3")
        assert "Rate limit reached for requests per min (RPM): Limit 2" in exc.value.body["message"]
        assert int(exc.value.response.headers["retry-after"]) >= 1
        b.responses.create(model="m", input="b")  # its own bucket
        assert httpx.get(f"{gw.url}/health").status_code == 200  # never limited


def _refusal(sock: socket.socket, limit: float = 15.0) -> bytes:
    """What the server answers before it closes (b"" for a close without an answer)."""
    sock.settimeout(limit)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return got


def _flood(sock: socket.socket, line: bytes, total: int) -> tuple[int, bytes]:
    """Send `line` over and over, up to `total` bytes, reading what the server answers meanwhile. Returns
    the bytes sent before the server answered or closed, and its answer."""
    sock.setblocking(False)
    chunk = line * (65536 // len(line))
    sent, answer = 0, b""
    deadline = time.monotonic() + 20
    while sent < total and time.monotonic() < deadline:
        readable, writable, _ = select.select([sock], [sock], [], 0.05)
        if readable:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            answer += data
            if not data or b"\r\n\r\n" in answer:
                break
        if writable:
            try:
                sent += sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                break
    sock.setblocking(True)
    return sent, answer + _refusal(sock, 5)


def test_header_bytes_are_bounded(upstream, tmp_path):
    """A head over --max-header-bytes (one endless header, or endless small lines), over --max-headers, or a
    request target over 8 KiB is refused with 431 / 414 and OpenAI's error body, and the connection closed
    long before the client is done sending; a head just within the bounds is served; each is counted."""
    gw = GatewayProcess(upstream.base_url, "none", "--max-header-bytes", "32768", "--max-headers", "50",
                        "--header-timeout", "60", log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        floods = [(b"X-Big: ", b"a" * 64, "headers_too_large"),  # one header that never ends
                  (b"", b"X-A: " + b"b" * 1019 + b"\r\n", "headers_too_large"),  # 1 KiB lines without end
                  (b"", b"X-A: b\r\n", "too_many_headers")]  # tiny lines without end
        for start, line, code in floods:
            s = _connect(gw.port)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + start)
            sent, answer = _flood(s, line, 64 * 1024 * 1024)
            assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large"), answer[:200]
            body = answer.split(b"\r\n\r\n", 1)[1]
            assert orjson.loads(body)["error"]["code"] == code, body
            assert sent < 32 * 1024 * 1024, sent  # closed long before the client was done
            s.close()

        s = _connect(gw.port)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(60)) + b"\r\n")
        answer = _refusal(s)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        error = orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
        assert error["code"] == "too_many_headers" and error["type"] == "invalid_request_error", error
        s.close()

        s = _connect(gw.port)
        s.sendall(b"GET /health?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _refusal(s)
        assert answer.startswith(b"HTTP/1.1 414 URI Too Long"), answer[:200]
        s.close()

        # within the bounds: 40 headers, 30 KiB in all
        headers = {f"x-h{i}": "v" * 700 for i in range(40)}
        assert httpx.get(f"{gw.url}/health", headers=headers, timeout=10).status_code == 200

        closed = _closed_counts(gw)
        assert (closed["headers_too_large"], closed["too_many_headers"], closed["request_line_too_long"]) == (2, 2, 1)
        assert "Traceback" not in (tmp_path / "gw.log").read_text()
    finally:
        gw.kill()


def test_refused_connections_are_logged_once_a_second(upstream, tmp_path):
    """A flood of connections over the cap is one WARNING line a second with a count, not one line each."""
    gw = GatewayProcess(upstream.base_url, "none", "--max-connections", "2", log_path=tmp_path / "gw.log")
    try:
        gw.wait_ready()
        time.sleep(0.2)
        held = [_connect(gw.port) for _ in range(2)]
        for s in held:
            s.sendall(b"GET /health HTTP/1.1\r\n")  # busy: a head in progress is not idle
        time.sleep(0.2)
        refused = []
        for _ in range(200):
            s = _connect(gw.port)
            refused.append(s)
        for s in refused:
            s.settimeout(10)
            assert s.recv(1) == b""
        time.sleep(1.5)  # the second's count is written
        log = (tmp_path / "gw.log").read_text()
        lines = [x for x in log.splitlines() if "over capacity" in x]
        assert 1 <= len(lines) <= 5, lines
        counted = sum(int(x.split("closed ")[1].split()[0]) for x in lines if "more connections" in x)
        assert counted + sum(1 for x in lines if "more connections" not in x) == 200, lines
        for s in held + refused:
            s.close()
    finally:
        gw.kill()
