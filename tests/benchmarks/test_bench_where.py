"""bench.where, bench.burst and the new bench.instructions options run end to end (nothing timed here: the
figures live in docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env
from tests.support import needs


def test_where_splits_the_cost_by_stage():
    out = subprocess.run([sys.executable, "-m", "bench.where", "--quick"], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ms per response +" in out.stdout and "µs per token" in out.stdout
    assert "The store's whole cost" in out.stdout
    # cProfile's stages and its top functions, per response and per token
    assert "| request: read, size check, parse, validate |" in out.stdout
    assert "| composer: feed (per token) |" in out.stdout and "calls / token" in out.stdout


def test_burst_reports_added_ttft_and_its_split(tmp_path):
    out_json = tmp_path / "burst.json"
    out = subprocess.run([sys.executable, "-m", "bench.burst", "--quick", "--bursts", "2", "--json", str(out_json)],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads(out_json.read_text())
    assert [len(report["runs"][k]) for k in ("direct", "gateway")] == [2, 2]
    for name, row in report["rows"].items():
        assert row["ok"] == row["requests"] == 8, (name, row)
        assert row["before_upstream_p99_ms"] >= row["before_upstream_p50_ms"] >= 0, row
    assert report["rows"]["gateway"]["probe_n"] > 0 and report["rows"]["gateway"]["gateway_cpu_s"] > 0
    assert "**Added TTFT p99:" in out.stdout


def test_instruction_counts_of_the_translator_and_the_server_floor():
    needs.valgrind()
    out = subprocess.run([sys.executable, "-m", "bench.instructions", "--server", "translator", "--cases", "one_token",
                          "--scale", "0.05", "--by-object", "3"], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    counted, objects = out.stdout.strip().splitlines()[-2:]
    assert counted.startswith("one_token") and objects.startswith("one_token: by object")
    assert "libpython" in objects or "python3" in objects, objects  # Python code counts as the interpreter's
    out = subprocess.run([sys.executable, "-m", "bench.instructions", "--db", "none", "--cases", "health",
                          "--scale", "0.05", "--gateway-src", str(ROOT / "src")],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("health") and "instructions/request" in line and float(line.split()[1]) > 0.01
