"""bench.websocket runs end to end, so it cannot rot. Nothing here is timed: the figures live in its report."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_websocket_bench_runs_end_to_end(tmp_path):
    out = tmp_path / "rows.json"
    run = subprocess.run([sys.executable, "-m", "bench.websocket", "--quick", "--requests", "4", "--concurrency",
                          "1,2", "--tokens", "8", "--out", str(out)],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(r["transport"], r["concurrency"]) for r in rows] == [
        ("sse", 1), ("websocket", 1), ("sse", 2), ("websocket", 2)]
    for row in rows:
        assert row["ok"] == row["requests"] == 4, row
        assert row["events_per_s"] > 0 and row["gateway_cpu_us_per_event"] > 0
    # SSE counts [DONE] as an event: otherwise the two transports carry the same events
    sse, ws = rows[0], rows[1]
    assert sse["events_per_request"] == ws["events_per_request"] + 1
    assert "| websocket | 2 |" in run.stdout
