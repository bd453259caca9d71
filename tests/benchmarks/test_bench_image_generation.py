"""bench.image_generation runs end to end (nothing timed here: the figures live in docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_image_generation_bench_runs():
    done = subprocess.run([sys.executable, "-m", "bench.image_generation", "--quick"], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(report) == {"stored", "db_none", "stored_stdlib", "concurrent"}
    for case in ("stored", "db_none", "stored_stdlib"):
        assert report[case]["image_turn_ms"] > report[case]["plain_ms"] > 0 and report[case]["delivery_ms"] > 0
    assert report["concurrent"]["rss_peak_mb"] >= report["concurrent"]["rss_rest_mb"] > 0
    assert "| SQLite store |" in done.stdout and "RSS with 16 image calls at once" in done.stdout
