"""The benchmark harness runs end to end, so it cannot rot. Nothing here is timed: speed lives in bench/results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.support import needs

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RG_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def test_bench_runs_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--requests", "8", "--concurrency", "1,2",
         "--ttft-requests", "3", "--paced-concurrency", "2,3", "--paced-tokens", "4", "--paced-rounds", "1",
         "--open-duration", "0.5", "--burst", "4", "--growth-requests", "2", "--chain-depth", "3",
         "--big-input-kib", "8", "--tools", "5", "--mcp-tools", "3", "--big-body-mb", "1", "--results-dir", str(tmp_path)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    mds = list(tmp_path.glob("*.md"))
    jsons = [p for p in tmp_path.glob("*.json")]
    assert len(mds) == 1 and len(jsons) == 1, list(tmp_path.iterdir())
    report = json.loads(jsons[0].read_text())
    cases = report["cases"]
    layouts = ["pinned", "unpinned"] if len(os.sched_getaffinity(0)) >= 2 else ["unpinned"]
    assert [c["layout"] for c in cases[::len(cases) // len(layouts)]] == layouts
    per_layout = [c for c in cases if c["layout"] == layouts[0]]
    # direct and gateway (store false/true) at each C, the two TTFT cases, paced direct/gateway at each paced C,
    # the short paced case (the per-response / per-token split), open-loop direct/gateway, burst direct/gateway
    assert len(per_layout) == 2 + 4 + 2 + 4 + 1 + 2 + 2
    assert [c["kind"] for c in per_layout].count("paced") == 4
    for case in cases:
        expected = {"ttft": 3, "paced": case["concurrency"], "paced-short": 3, "burst": 4}.get(case["kind"], 8)
        if case["kind"] == "open":
            assert case["requests"] >= 1 and case["ok"] == case["requests"], case
            assert case["arrival_rate"] > 0 and case["capacity_per_core"] > 0
        else:
            assert case["requests"] == expected and case["ok"] == expected, case
        assert case["events"] > 0 and case["events_per_request"] > case["tokens"], case
        assert case["bytes"] > 0 and case["requests_per_s"] > 0, case
        assert case["ttft_p50_ms"] is not None and case["ttft_p50_ms"] > 0, case
        if case["kind"] in ("paced", "open"):
            assert case["gap_p99_ms"] > 0, case
        if case["mode"] == "gateway":
            assert case["gateway_cpu_s"] > 0 and case["gateway_peak_rss_mib"] > 0, case
            assert case["gateway_cpu_us_per_token"] > 0, case
    assert {c["store"] for c in cases if c["mode"] == "gateway"} == {False, True}
    top = [c for c in per_layout if c["kind"] == "paced" and c["mode"] == "gateway"][-1]
    assert "split_per_token_us" in top and "split_per_response_ms" in top, top
    growth = report["growth"]
    assert [r["case"] for r in growth["rows"]] == ["baseline", "chain depth 1", "chain depth 3", "input 8 KiB",
                                                  "5 tools", "MCP list of 3"]
    assert all(r["ok"] == r["requests"] == 2 for r in growth["rows"]), growth
    # the chain resolves in one SQL statement, visibility check included, whatever its depth
    assert growth["chain"]["items"] == 2 * 3 and growth["chain"]["statements"] == 1, growth["chain"]
    big = growth["big_body"]
    assert big["status"] == 200 and big["mb"] > 1 and big["probes"] > 0 and big["max_ms"] > 0, big
    assert [t["result"] for t in report["targets"]] and all(
        t["result"] in ("PASS", "MISS") for t in report["targets"]), report["targets"]
    md = mds[0].read_text()
    assert f"| {layouts[0]} | gateway store=true | 2 | 8/8 |" in md and "## Targets" in md and "## Growth" in md
    assert "PASS" in out.stdout or "MISS" in out.stdout


def _sse_frames(body: bytes) -> list[bytes]:
    return [f[len(b"data: "):] for f in body.split(b"\n\n") if f.startswith(b"data: ")]


@pytest.fixture
def fake_upstream():
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens", "6", "--tokens-per-chunk", "2",
         "--reasoning-tokens", "2", "--tool-calls", "1", "--tool-arg-chunks", "3"],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        assert "listening on" in line, line + proc.stderr.read().decode()
        yield line.split()[-2]  # http://127.0.0.1:PORT/v1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def test_fake_upstream_speaks_chat_completions(fake_upstream):
    import httpx

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "stream_options": {"include_usage": True}}
    resp = httpx.post(f"{fake_upstream}/chat/completions", json=body, timeout=10)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    frames = _sse_frames(resp.content)
    assert frames[-1] == b"[DONE]"
    chunks = [orjson.loads(f) for f in frames[:-1]]
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("reasoning_content", "") for d in deltas)
    assert len([d for d in deltas if d.get("content")]) == 3  # 6 tokens, 2 per chunk
    args = "".join(tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls", ()))
    assert json.loads(args)["city"] == "Paris"
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0

    # max_tokens cuts the answer with finish_reason "length"; without stream, one chat.completion
    short = httpx.post(f"{fake_upstream}/chat/completions", json={**body, "stream": False, "max_tokens": 2},
                       timeout=10).json()
    assert short["object"] == "chat.completion" and short["choices"][0]["finish_reason"] == "length"


def test_instruction_counts_run_end_to_end():
    needs.valgrind()
    out = subprocess.run([sys.executable, "-m", "bench.instructions", "--cases", "one_token", "--scale", "0.05",
                          "--gateway-src", str(ROOT / "src")],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("one_token") and float(line.split()[1]) > 0.1, out.stdout  # M instructions/response
