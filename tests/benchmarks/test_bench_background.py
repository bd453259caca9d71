"""bench.background runs end to end (nothing timed here: the figures live in docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_background_bench_runs(tmp_path):
    out_json = tmp_path / "background.json"
    done = subprocess.run([sys.executable, "-m", "bench.background", "--quick", "--followers", "3",
                           "--json", str(out_json)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out_json.read_text())
    assert set(report["cpu_s_per_response"]) == {"stream", "background", "1 follower", "3 followers"}
    assert all(v > 0 for v in report["cpu_s_per_response"].values())
    assert set(report["ratios"]) == {"background / stream", "3 followers / 1 follower"}
    assert "| background / stream |" in done.stdout
