"""bench/pools.py runs end to end (a quick run: 8 sessions of 4 turns, each policy), so it cannot rot. Nothing
here is timed: the figures it prints are read by people, docs/routing.md has a full run."""

from __future__ import annotations

import subprocess
import sys


def test_bench_pools_quick_run():
    out = subprocess.run([sys.executable, "-m", "bench.pools", "--quick"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {line.split("|")[1].strip(): line for line in out.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| policy")}
    assert set(rows) == {"round_robin", "least_loaded", "affinity", "single"}, out.stdout
    assert all(" 32 |" in row for row in rows.values())  # every response of every policy answered
