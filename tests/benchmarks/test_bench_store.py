"""bench.store_writers and bench.store_scaling run end to end (nothing timed here: the figures live in
docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def run(tmp_path, module: str) -> tuple[list[dict], str]:
    out_json = tmp_path / f"{module}.json"
    done = subprocess.run([sys.executable, "-m", f"bench.{module}", "--quick", "--json", str(out_json)], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out_json.read_text())["results"], done.stdout


def test_store_writers_bench_runs(tmp_path):
    results, out = run(tmp_path, "store_writers")
    assert [(r["backend"], r["processes"]) for r in results] == [("sqlite", 1), ("sqlite", 2)]
    assert all(r["saves"] > 0 and r["writes"] >= r["saves"] for r in results)
    assert all(r["waits"]["busy"] == 0 for r in results)  # the gateway's own writers never sleep
    assert "| sqlite | 2 |" in out


def test_store_scaling_bench_runs(tmp_path):
    results, out = run(tmp_path, "store_scaling")
    assert [(r["backend"], r["workers"]) for r in results] == [("sqlite", 1), ("sqlite", 2)]
    assert all(r["ok"] == 200 and r["errors"] == 0 and r["writes"] >= 200 for r in results)
    assert "| sqlite | 2 × 1 |" in out
