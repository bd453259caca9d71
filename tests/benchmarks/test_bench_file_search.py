"""bench.file_search runs end to end (nothing timed here: the figures live in docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.benchmarks.test_bench import ROOT, _env


def test_file_search_bench_runs(tmp_path):
    out_json = tmp_path / "file_search.json"
    done = subprocess.run([sys.executable, "-m", "bench.file_search", "--quick", "--ingest-mb", "1", "--chunks",
                           "1000", "--searches", "5", "--repeat", "2", "--json", str(out_json)], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out_json.read_text())
    (ingest,) = report["ingest"]
    assert ingest["chunks"] > 0 and ingest["chunks_per_cpu_s"] > 0 and ingest["other_writes"] > 0
    assert [s["backend"] for s in report["search"]] == ["sqlite"] and report["search"][0]["p50_ms"] > 0
    assert set(report["turn"]) >= {"plain_ms", "with_file_search_ms", "search_ms", "added_beyond_search_ms"}
    assert "| search | chunks |" in done.stdout
