"""What the end-to-end tests need, installed on first use, so `python -m pytest` works on a fresh machine.

The first test that needs tests/e2e/<dir>/node_modules runs `npm ci` there (once a session, when npm is on
PATH); the first that needs LlamaIndex's own environment makes tests/e2e/llamaindex/.venv from its
requirements.txt. Each step is printed on the terminal as it runs. Set RG_TEST_NO_INSTALL=1 to skip the
installs (the tests then skip, or fail under CI, as before). `.ci/run` runs the same command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

E2E = Path(__file__).parents[1] / "e2e"
_tried: set[str] = set()
pytest_config: Any = None  # set by tests/conftest.py, to print past pytest's output capture


def _say(message: str) -> None:
    capture = pytest_config.pluginmanager.getplugin("capturemanager") if pytest_config is not None else None
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        print(f"\n[e2e setup] {message}", file=sys.stderr, flush=True)


def _run(what: str, command: list[str]) -> bool:
    if os.environ.get("RG_TEST_NO_INSTALL"):
        return False
    _say(f"{what}: {' '.join(command)}")
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        _say(f"failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}")
        return False
    _say(f"done in {time.monotonic() - started:.0f}s")
    return True


def ensure_node_modules(folder: str) -> None:
    """`npm ci` in tests/e2e/<folder> when its node_modules is missing."""
    where = E2E / folder
    if (where / "node_modules").exists() or folder in _tried or not (where / "package-lock.json").exists():
        return
    _tried.add(folder)
    npm = shutil.which("npm")
    if npm is None:
        _say(f"tests/e2e/{folder}/node_modules is missing and npm is not on PATH")
        return
    _run(f"tests/e2e/{folder}/node_modules is missing",
         [npm, "ci", "--prefix", str(where), "--no-audit", "--no-fund", "--loglevel=error"])


def ensure_venv(folder: str) -> Path:
    """tests/e2e/<folder>/.venv with its requirements.txt installed; the path of its python."""
    where = E2E / folder
    python = where / ".venv" / "bin" / "python"
    if python.exists() or folder in _tried:
        return python
    _tried.add(folder)
    venv = where / ".venv"
    made = _run(f"tests/e2e/{folder}/.venv is missing", [sys.executable, "-m", "venv", str(venv)]) and _run(
        "installing its requirements",
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(where / "requirements.txt")])
    if not made and venv.exists():
        shutil.rmtree(venv, ignore_errors=True)  # half made: the next session tries again
    return python
