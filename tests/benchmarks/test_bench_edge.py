"""bench/edge.py runs end to end, so it cannot rot (its heads part, small). Nothing here is timed."""

from __future__ import annotations

import subprocess
import sys


def test_bench_edge_heads_part_runs():
    out = subprocess.run([sys.executable, "-m", "bench.edge", "--part", "headers", "--header-mib", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "431" in line]
    assert len(rows) == 3, out.stdout  # each shape of endless head is refused
