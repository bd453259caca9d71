"""bench/code_interpreter.py runs (a smoke run: the figures themselves are for docs/benchmarks.md, not tests)."""

import subprocess
import sys
from pathlib import Path

from tests.support import needs

needs.bubblewrap()  # skipped with what to install where it is missing; a failure in CI

ROOT = Path(__file__).resolve().parents[2]


def test_the_code_interpreter_benchmark_runs():
    done = subprocess.run([sys.executable, "-m", "bench.code_interpreter", "--quick"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for case in ("sandbox cold start", "sandbox warm print(1)", "container cold start", "container warm print(1)"):
        assert f"| {case}" in done.stdout
    assert "RSS of an idle container" in done.stdout
