"""bench.purge runs end to end (nothing timed here: the figures live in docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_purge_bench_runs(tmp_path):
    out_json = tmp_path / "purge.json"
    done = subprocess.run([sys.executable, "-m", "bench.purge", "--quick", "--backends", "sqlite",
                           "--json", str(out_json)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out_json.read_text())["results"]
    assert [(r["backend"], r["mode"], r["purged"]) for r in results] == [("sqlite", "batched", 3000),
                                                                         ("sqlite", "single", 3000)]
    assert all(r["same_saves"] > 0 and r["other_saves"] > 0 for r in results)
    assert "| sqlite | batched | 3,000 |" in done.stdout
