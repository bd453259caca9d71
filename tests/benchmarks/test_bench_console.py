"""bench.console runs end to end (nothing timed here: the figures live in docs/console.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_console_bench_runs(tmp_path):
    out_json = tmp_path / "console.json"
    done = subprocess.run([sys.executable, "-m", "bench.console", "--quick", "--rows", "3000", "--backends", "sqlite",
                           "--json", str(out_json)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = json.loads(out_json.read_text())["results"]
    assert result["rows"] == 3000 and len(result["cases"]) == 7
    assert all(case["rows_shown"] > 0 for case in result["cases"])
    assert "| sqlite | 3,000 |" in done.stdout
