"""The many-core harness runs end to end: the scaling cases, the multi-process upstream and load generator, the
lean translator. Nothing here is timed: the figures live in docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import httpx
import orjson
import pytest

from tests.benchmarks.test_bench import ROOT, _env, _sse_frames


def test_scaling_run_end_to_end(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench.run", "--workers", "1,2", "--quick", "--load-processes", "2",
                          "--upstream-processes", "2", "--results-dir", str(tmp_path)],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads(next(tmp_path.glob("*-scaling.json")).read_text())
    assert report["meta"]["options"]["upstream_processes"] == 2 and report["meta"]["options"]["load_processes"] == 2
    results = report["results"]
    assert [r["workers"] for r in results] == [1, 2]
    for r in results:
        for case in ("direct", "translator", "gateway-none", "gateway-sqlite", "paced direct", "paced"):
            row = r[case]
            assert row["ok"] == row["requests"] > 0 and row["errors"] == 0, (r["workers"], case, row)
            assert row["events_per_request"] > 4, (case, row)
        for case in ("translator", "gateway-none", "gateway-sqlite", "paced"):
            assert r[case]["gateway_cpu_s"] > 0, (case, r[case])
        assert r["paced"]["streams"] == 4 * r["workers"] and r["paced"]["gateway_cpu_us_per_token"] > 0
    # the machine says what it can measure: on fewer than W + 2 CPUs the scaling cannot show
    assert "CPU" in report["said"] and ("too few" in report["said"]) == (len(os.sched_getaffinity(0)) < 4)
    md = next(tmp_path.glob("*-scaling.md")).read_text()
    assert "| case | W=1 | W=2 |" in md and "| store on, responses/s |" in md and "-scaling.svg)" in md
    root = ET.fromstring(next(tmp_path.glob("*-scaling.svg")).read_text())  # well-formed, drawn by the harness
    assert root.tag.endswith("svg") and len(list(root.iter("{http://www.w3.org/2000/svg}circle"))) >= 8


def test_scaling_writes_between_the_docs_markers(tmp_path, monkeypatch):
    from bench import scaling

    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Benchmarks\n\nbefore\n\n{scaling.BEGIN}\nold table\n{scaling.END}\n\nafter\n")
    monkeypatch.setattr(scaling, "DOCS", docs)
    monkeypatch.setattr(scaling, "SVG", tmp_path / "plot.svg")
    scaling.write_docs("new table\n", "<svg/>\n")
    text = docs.read_text()
    assert "new table" in text and "old table" not in text and text.count(scaling.BEGIN) == 1
    assert text.startswith("# Benchmarks\n\nbefore") and text.endswith("after\n")
    assert (tmp_path / "plot.svg").read_text() == "<svg/>\n"


@pytest.fixture
def upstream_processes():
    proc = subprocess.Popen([sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens", "6",
                             "--processes", "3"], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        assert "(3 processes) listening on" in line, line + proc.stderr.read().decode()
        yield line.split()[-2].removesuffix("/v1")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def test_fake_upstream_processes_share_a_port_and_their_options(upstream_processes):
    base = upstream_processes
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}

    def tokens() -> int:  # a new connection each time, so the kernel spreads them over the processes
        with httpx.Client() as client:
            resp = client.post(f"{base}/v1/chat/completions", json=body, timeout=10)
        chunks = [orjson.loads(f) for f in _sse_frames(resp.content)[:-1]]
        return len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")])

    assert {tokens() for _ in range(12)} == {6}
    with httpx.Client() as client:  # changed through one process, taken by every one
        assert client.post(f"{base}/_bench/config", json={"tokens": 2}, timeout=10).json()["tokens"] == 2
    assert {tokens() for _ in range(12)} == {2}
    stats = httpx.get(f"{base}/_bench/stats", timeout=10).json()
    assert stats["processes"] == 3 and stats["requests"] == stats["streams_done"] == 24
    assert len(stats["timeline"]) == 24 and all(first is not None and first >= arrived
                                                for arrived, first in stats["timeline"])
    assert [e[0] for e in stats["timeline"]] == sorted(e[0] for e in stats["timeline"])
    pids = set()
    for _ in range(30):  # the answers come from more than one process
        pids.add(httpx.get(f"{base}/_bench/stats", timeout=10).json()["pid"])
        if len(pids) > 1:
            break
    assert len(pids) > 1


def test_on_sixteen_cpus_every_w_is_pinned_beside_the_same_helper_cpus(monkeypatch):
    """The many-core branch, which a 2-CPU machine cannot run: the gateway gets CPUs 0..W-1, the upstream and
    the load generator the same halves of the CPUs above the largest W, whatever W."""
    from bench import layout, scaling

    monkeypatch.setattr(layout, "_START", list(range(16)))
    found, said = scaling.plans([1, 2, 4, 8])
    assert "too few" not in said and "pinned" in said
    for plan in found:
        assert plan.layout.name == "pinned" and plan.layout.gateway == frozenset(range(plan.workers))
        assert plan.layout.split() == (frozenset(range(8, 12)), frozenset(range(12, 16)))
    assert layout.helpers(8, reserve=8) == (4, 4)
    # and on 2 CPUs: W = 1 pinned with one shared helper CPU, W = 2 unpinned, and the report says so
    monkeypatch.setattr(layout, "_START", [0, 1])
    found, said = scaling.plans([1, 2])
    assert [p.layout.name for p in found] == ["pinned", "unpinned"] and "too few" in said
    assert found[0].layout.split() == (frozenset({1}), frozenset({1}))
    assert layout.helpers(1) == (1, 1)
