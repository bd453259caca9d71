"""What a newcomer meets first (issue 35): a copy of the repository with nothing beside it collects and runs
the suite (the recordings and the spec are inside it), and an optional part of the machine that is missing
skips its tests with one line saying what to install — and fails them when CI is set."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_in(where: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=where,
                          env={**env, "PYTHONPATH": str(where / "src")}, capture_output=True, text=True,
                          timeout=600)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "RG_SHARED_DIR", "PYTHONPATH")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> Path:
    """The working tree's files (what git tracks or would, as a clone would have them) in an empty folder."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    where = tmp_path_factory.mktemp("empty") / "responses-gateway"
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    assert not (where.parent / "shared").exists()
    return where


def test_a_copy_with_nothing_beside_it_collects_everything_and_replays_the_recordings(alone):
    collected = pytest_in(alone, "--collect-only", "tests", env=clean_env())
    assert collected.returncode == 0, collected.stdout[-3000:]
    ran = pytest_in(alone, "tests/streams/test_recordings.py", "tests/unit/test_composer.py", env=clean_env())
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert " passed" in ran.stdout and "skipped" not in ran.stdout


@pytest.fixture(scope="module")
def without_bwrap(tmp_path_factory) -> str:
    """A PATH with every program of this machine's PATH but bubblewrap."""
    shim = tmp_path_factory.mktemp("path")
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            target = Path(folder) / name
            if name != "bwrap" and not (shim / name).exists() and os.access(target, os.X_OK):
                (shim / name).symlink_to(target)
    return str(shim)


def test_without_bubblewrap_its_tests_skip_saying_what_to_install(without_bwrap):
    ran = pytest_in(ROOT, "tests/tools/test_code_interpreter_containers.py", "tests/unit/test_ids.py",
                    env=clean_env(PATH=without_bwrap))
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "skipped for missing parts" in ran.stdout
    assert "skipped: needs bubblewrap: apt-get install bubblewrap" in ran.stdout


def test_without_bubblewrap_ci_fails_saying_so(without_bwrap):
    ran = pytest_in(ROOT, "tests/tools/test_code_interpreter_containers.py", env=clean_env(PATH=without_bwrap,
                                                                                           CI="true"))
    assert ran.returncode != 0
    assert "needs bubblewrap: apt-get install bubblewrap" in ran.stdout and "CI is set" in ran.stdout


def test_serve_says_in_one_block_what_is_on_and_off_and_a_missing_sandbox_is_no_error(without_bwrap, tmp_path):
    """The start-up block: each part with why it is off; bubblewrap missing under `--code-interpreter auto`
    (the default) makes the tool refused, said at INFO — it printed an ERROR on every start before."""
    from tests.operations.test_cli import free_port
    from tests.support.server import wait_healthy

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "responses_gateway", "serve", "--port", str(port), "--db",
                             str(tmp_path / "r.db")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean_env(PATH=without_bwrap, PYTHONPATH=str(ROOT / "src")))
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert " ERROR " not in out, out
    block = out[out.index("what this gateway serves:"):]
    for line in ("upstream         DEMO MODE", "store            ", "keys             none", "limits           ",
                 "file_search      on: keyword-only search", "web_search       off: no web search provider",
                 "code_interpreter refused: ", "mcp              on"):
        assert line in block, block
