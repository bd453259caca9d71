"""The `responses-gateway` command: serve starts, logs where it listens and what it serves, answers."""

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.helpers import stream


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(*args: str, env: dict | None = None):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "responses_gateway", "serve", "--port", str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(proc.stdout.read())


def stop(proc) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    return out


def test_serve_demo_streams_and_says_it_is_a_demo():
    proc, url = serve("--upstream", "demo")
    try:
        with httpx.Client(base_url=url) as http:
            result = stream(http, {"model": "demo", "input": "Hello gateway"})
            assert "Hello gateway" in result.text and "demo" in result.text
            assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["demo"]
    finally:
        logs = stop(proc)
    assert f"listening on {url}" in logs
    assert "DEMO" in logs and "not a real model" in logs


def test_serve_reads_the_environment(upstream):
    upstream.models = ["env-model"]
    proc, url = serve(env={"RG_UPSTREAM_URL": upstream.base_url})
    try:
        assert httpx.get(f"{url}/v1/models").json()["data"][0]["id"] == "env-model"
    finally:
        logs = stop(proc)
    assert f"upstream: {upstream.base_url} (chat completions)" in logs


def test_bad_setting_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "responses_gateway", "serve", "--upstream", "ftp://x"],
                          capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0 and "upstream must be an http(s) URL" in proc.stderr


def test_metrics_add_up_across_workers(tmp_path):
    """With --workers 2, /metrics counts every worker's responses, whichever worker answers the scrape
    (before, each worker reported only its own)."""
    import asyncio
    import re

    proc, url = serve("--workers", "2", "--db", "none", "--log-level", "warning")
    try:
        time.sleep(1.0)  # the second worker up too

        async def many(n: int) -> list[int]:
            async def one(i: int) -> int:
                # a new connection each: the kernel spreads them over the workers listening on the socket
                async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                    r = await client.post("/v1/responses", json={"model": "demo", "input": f"hi {i}"})
                    return r.status_code
            return await asyncio.gather(*[one(i) for i in range(n)])

        assert asyncio.run(many(40)) == [200] * 40
        totals = set()
        for _ in range(8):
            text = httpx.get(f"{url}/metrics", headers={"connection": "close"}).text
            found = re.search(r'^responses_gateway_responses_total\{status="completed"\} (\S+)$', text, re.M)
            assert found, text
            totals.add(float(found.group(1)))
        assert totals == {40.0}
    finally:
        stop(proc)


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.add(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as fh:
            return fh.read()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_end_with_a_supervisor_killed_outright():
    """SIGKILL to `serve --workers 2` (an OOM kill, a crash): its workers end too, instead of running on
    orphaned and holding the port (they did before: test failed)."""
    proc, url = serve("--workers", "2", "--db", "none", "--log-level", "warning")
    deadline = time.monotonic() + 20
    while len(workers := {p for p in children(proc.pid) if "spawn_main" in command(p)}) < 2:
        assert time.monotonic() < deadline, "the two workers did not start"
        time.sleep(0.1)
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in workers):
        assert time.monotonic() < deadline, f"workers {workers} outlived their supervisor"
        time.sleep(0.1)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/health", timeout=2)
