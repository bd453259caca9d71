"""`serve --workers 2` on one SQLite file, as real processes: both workers start on a new file together, every
stored response lands, and no write slept in SQLite's busy handler — the workers take turns on the host's
writer lock (store/hostlock.py), as /metrics shows."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.support import backends
from tests.support.fake_chat import Stream, text_stream


def series(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}(?:{{{re.escape(labels)}}})? ([0-9.e+]+)$", text, re.MULTILINE)
    return float(m[1]) if m else 0.0


def test_two_workers_share_one_sqlite_file_without_sleeping(upstream, tmp_path):
    upstream.default = Stream(text_stream(["kept ", "by ", "both"]))
    gw = backends.GatewayProcess(upstream.base_url, str(tmp_path / "responses.db"), "--workers", "2",
                                 log_path=tmp_path / "gateway.log")
    try:
        gw.wait_ready(60)
        with httpx.Client(base_url=gw.url, timeout=30) as http, ThreadPoolExecutor(16) as pool:
            made = list(pool.map(lambda i: http.post("/v1/responses", json={"model": "m", "input": f"n{i}"}),
                                 range(120)))
            assert [r.status_code for r in made] == [200] * 120, gw.output()
            ids = [r.json()["id"] for r in made]
            assert all(http.get(f"/v1/responses/{rid}").json()["status"] == "completed" for rid in ids)
            text = http.get("/metrics").text
    finally:
        gw.kill()
    assert series(text, "responses_gateway_store_lock_wait_seconds_count") >= 120  # every save measured
    assert series(text, "responses_gateway_store_lock_waits_total", 'how="busy"') == 0
