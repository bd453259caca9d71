"""bench.web_search runs end to end (nothing timed here: the figures live in docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_web_search_bench_runs():
    done = subprocess.run([sys.executable, "-m", "bench.web_search", "--responses", "3", "--extract-timeout", "1"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    page = report["page"]
    assert page["text_chars"] > 0 and page["isolated_ms"] > 0
    assert "could not be made readable" in page["hostile_error"] and "--web-extract-timeout" in page["hostile_error"]
    assert "hostile page" in done.stdout
