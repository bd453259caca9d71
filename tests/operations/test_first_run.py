"""A first run that explains itself (issue 26), tried as a new user would: an upstream URL without `/v1`, an
upstream that cannot be reached, a database that cannot be used, a port already taken, and the access log.
Each error names what was called and what to change, in one line, without a traceback; the client never
sees Python's `None` or the gateway's internal addresses."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys

import httpx
import pytest

from responses_gateway.config import Settings
from tests.operations.test_cli import free_port, serve, stop
from tests.support.server import GatewayServer

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")


def closed_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "responses_gateway", *args], capture_output=True, text=True,
                          timeout=timeout)


# --------------------------------------------------------------------------- the upstream URL


def test_upstream_url_without_v1_says_what_to_change(upstream, caplog):
    """`--upstream http://host:port` (no /v1): a 502 that says the URL is wrong, not `404 model_not_found`,
    and the log names the URL called and the one to use instead."""
    root = upstream.base_url.removesuffix("/v1")
    caplog.set_level(logging.WARNING, logger="responses_gateway.upstream")
    with GatewayServer(Settings(upstream_url=root, db="none")) as gw, httpx.Client(base_url=gw.url) as http:
        resp = http.post("/v1/responses", json={"model": "m", "input": "hi"})
        models = http.get("/v1/models")
    error = resp.json()["error"]
    assert resp.status_code == 502 and error["code"] == "upstream_error"
    assert "/v1" in error["message"] and "404" in error["message"]
    assert "does not exist" not in error["message"] and "127.0.0.1" not in error["message"]
    assert models.status_code == 502 and "None" not in models.text and "/v1" in models.json()["error"]["message"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"POST {root}/chat/completions answered HTTP 404" in logged
    assert f"GET {root}/models answered HTTP 404" in logged
    assert f"try {root}/v1" in logged


def test_a_missing_model_is_still_model_not_found(upstream):
    """A 404 that names the model (vLLM's) stays the client's `404 model_not_found`."""
    from tests.support.fake_chat import Json

    upstream.enqueue(Json({"error": {"message": "The model `nope` does not exist.", "type": "NotFoundError",
                                     "param": None, "code": 404}}, status=404))
    with GatewayServer(Settings(upstream_url=upstream.base_url, db="none")) as gw:
        resp = httpx.post(f"{gw.url}/v1/responses", json={"model": "nope", "input": "hi"})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "model_not_found"


def test_serve_checks_the_upstream_at_startup(upstream):
    root = upstream.base_url.removesuffix("/v1")
    proc, _ = serve("--upstream", root, "--db", "none")
    logs = stop(proc)
    assert f"GET {root}/models answered HTTP 404" in logs and f"try {root}/v1" in logs
    proc, _ = serve("--upstream", upstream.base_url, "--db", "none")
    logs = stop(proc)
    assert f"upstream {upstream.base_url} (chat completions) answers: " in logs


# --------------------------------------------------------------------------- an upstream out of reach


def test_unreachable_upstream_is_logged_with_its_url_and_cause(caplog):
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    caplog.set_level(logging.WARNING, logger="responses_gateway.upstream")
    with GatewayServer(Settings(upstream_url=url, db="none")) as gw:
        resp = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "hi"})
    error = resp.json()["error"]
    assert resp.status_code == 502 and error["code"] == "upstream_unreachable"
    assert "connection refused" in error["message"] and str(port) not in error["message"]
    logged = [r.getMessage() for r in caplog.records]
    assert f"upstream {url}/chat/completions unreachable: connection refused" in logged


def test_tls_to_a_plain_http_upstream_is_named(upstream, caplog):
    """https:// to a server speaking plain HTTP: the log says TLS failed (and why); the client, only that."""
    url = upstream.base_url.replace("http://", "https://")
    caplog.set_level(logging.WARNING, logger="responses_gateway.upstream")
    with GatewayServer(Settings(upstream_url=url, db="none")) as gw:
        resp = httpx.post(f"{gw.url}/v1/responses", json={"model": "m", "input": "hi"})
    assert resp.status_code == 502 and resp.json()["error"]["message"].endswith("(TLS failed).")
    assert any(r.getMessage().startswith(f"upstream {url}/chat/completions unreachable: TLS failed (")
               for r in caplog.records)


def test_causes_in_words():
    from responses_gateway import causes

    assert causes.cause(socket.gaierror(-2, "Name or service not known")) == \
        "host name not found (Name or service not known)"
    assert causes.kind(socket.gaierror(-2, "Name or service not known")) == "host name not found"
    refused = OSError("Cannot connect")
    refused.__cause__ = ConnectionRefusedError(111, "Connect call failed ('10.0.0.5', 8000)")
    assert causes.cause(refused) == causes.kind(refused) == "connection refused"
    assert causes.cause(TimeoutError()) == "timed out"


# --------------------------------------------------------------------------- the database


@pytest.mark.parametrize("command", ["serve", "db upgrade"])
@pytest.mark.parametrize(("path", "why"), [("/proc/x.db", "unable to open database file"),
                                           ("/proc/x/gateway.db", "No such file or directory: /proc/x")])
def test_an_unusable_database_is_one_line(command, path, why):
    done = run(*command.split(), "--db", path)
    assert done.returncode != 0 and "Traceback" not in done.stderr + done.stdout
    assert done.stderr.strip().splitlines()[-1:] == [f"responses-gateway: cannot use the database sqlite:{path}: {why}"]
    assert "listening on" not in done.stderr + done.stdout


def test_a_database_that_is_down_is_one_line():
    port = closed_port()
    done = run("db", "upgrade", "--db", f"postgresql://gateway@127.0.0.1:{port}/gateway")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"responses-gateway: cannot use the database postgresql://127.0.0.1:{port}/gateway: connection refused"]


# --------------------------------------------------------------------------- the port


def test_a_port_already_taken_is_said_before_anything_else():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--db", "none", "--port", str(port))
    out = done.stderr + done.stdout
    assert done.returncode != 0 and "Traceback" not in out
    assert "listening on" not in out and "startup complete" not in out.lower()
    assert f"cannot listen on 127.0.0.1:{port}: the port is already in use" in out


def test_listening_is_logged_once():
    """Ours, once bound; uvicorn's own "Uvicorn running on" (logged before it bound) is not repeated."""
    proc, url = serve("--db", "none")
    logs = stop(proc)
    assert logs.count(f"listening on {url}") == 1 and "Uvicorn running on" not in logs


# --------------------------------------------------------------------------- the access log


def test_access_log_in_text_with_the_server_lines_in_one_format():
    import websockets.sync.client

    proc, url = serve("--db", "none", "--access-log")
    try:
        rid = httpx.post(f"{url}/v1/responses", json={"model": "demo", "input": "hi"}).json()["id"]
        httpx.get(f"{url}/health")
        httpx.get(f"{url}/v1/responses/nope")
        with websockets.sync.client.connect(url.replace("http", "ws") + "/v1/responses"):
            pass
    finally:
        logs = stop(proc)
    lines = [line for line in logs.splitlines() if line.strip()]
    assert all(TEXT_LINE.match(line) for line in lines), [line for line in lines if not TEXT_LINE.match(line)]
    access = [line for line in lines if " responses_gateway.access: " in line]
    assert any(re.search(rf'"POST /v1/responses HTTP/1.1" 200 \d+ \d+\.\dms {rid}$', line) for line in access)
    assert any('"GET /health HTTP/1.1" 200' in line for line in access)
    assert any('"GET /v1/responses/nope HTTP/1.1" 404' in line for line in access)
    assert any("WebSocket /v1/responses open" in line for line in access)
    assert any(re.search(r"WebSocket /v1/responses closed after \d+\.\d+s", line) for line in access)


def test_access_log_in_json():
    proc, url = serve("--db", "none", "--access-log", "--log-format", "json")
    try:
        body = httpx.post(f"{url}/v1/responses", json={"model": "demo", "input": "hi", "stream": True}).text
        rid = json.loads(body.split("data: ", 1)[1].split("\n", 1)[0])["response"]["id"]
    finally:
        logs = stop(proc)
    entries = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    (line,) = [e for e in entries if e["logger"] == "responses_gateway.access" and e.get("path") == "/v1/responses"]
    assert line["method"] == "POST" and line["status"] == 200 and line["response_id"] == rid
    assert isinstance(line["duration_ms"], float) and line["bytes"] == len(body.encode())  # every byte of the stream


def test_no_access_log_by_default_and_one_text_format():
    """The server's own lines ("Started server process", "Application startup complete") in our format too
    (they came in uvicorn's `INFO:     ...`)."""
    proc, url = serve("--db", "none")
    httpx.get(f"{url}/health")
    logs = stop(proc)
    assert "responses_gateway.access" not in logs
    lines = [line for line in logs.splitlines() if line.strip()]
    assert any("uvicorn" in line for line in lines)
    assert all(TEXT_LINE.match(line) for line in lines), [line for line in lines if not TEXT_LINE.match(line)]
