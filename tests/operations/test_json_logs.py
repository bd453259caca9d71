"""`serve --log-format json` as a real process: every line it writes is one JSON object (the gateway's and
uvicorn's), and the lines logged while a response is served carry its id."""

import json

import httpx

from tests.operations.test_cli import serve, stop
from tests.support.fake_chat import DROP, Stream, text_stream


def test_json_log_lines_carry_the_response_id(upstream):
    upstream.enqueue(Stream(text_stream(["Hel", "lo"])[:3] + [DROP]))  # cut mid-stream: a warning is logged
    proc, url = serve("--db", "none", env={"RG_UPSTREAM_URL": upstream.base_url, "RG_LOG_FORMAT": "json"})
    try:
        r = httpx.post(f"{url}/v1/responses", json={"model": "fake-model", "input": "hi"}, timeout=30)
        assert r.status_code == 502, r.text
    finally:
        out = stop(proc)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]  # each line parses, or this fails
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines), lines
    assert any(line["logger"] == "responses_gateway" and "listening on" in line["message"] for line in lines)
    assert any(line["logger"].startswith("uvicorn") for line in lines), lines
    failed = [line for line in lines if line["level"] == "warning" and "failed" in line["message"]]
    assert failed, lines
    assert failed[0]["response_id"].startswith("resp_")
    assert failed[0]["response_id"] in failed[0]["message"]
    assert all("response_id" not in line for line in lines if "listening on" in line["message"])
