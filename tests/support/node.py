"""Running a Node client script from tests/e2e/<dir> against the gateway, as the end-to-end tests do.

A missing tests/e2e/<dir>/node_modules is installed with `npm ci` on first use (`e2e_setup`); when that is
impossible (no npm, no network) the test is skipped locally and fails under CI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import needs
from tests.support.e2e_setup import ensure_node_modules

E2E = Path(__file__).parents[1] / "e2e"


def require_node_packages(folder: str, *packages: str) -> str:
    """The node binary, once tests/e2e/<folder>/node_modules holds ``packages``."""
    install = f"npm ci --prefix tests/e2e/{folder}"
    ensure_node_modules(folder)
    node = shutil.which("node")
    modules = E2E / folder / "node_modules"
    installed = all((modules / package).is_dir() for package in packages)
    if node and installed:
        return node
    missing = "node is not on PATH" if not node else f"tests/e2e/{folder}/node_modules is missing"
    needs.need("node and npm packages", False, f"{missing}; install with `{install}`")
    raise AssertionError("unreachable")  # need() skipped or failed


def run_node_script(node: str, folder: str, script: str, args: list[str], timeout: float) -> tuple[dict, str]:
    """Run the script; the JSON it printed last, and a description of the run for assertion messages."""
    cwd = E2E / folder
    proc = subprocess.run([node, str(cwd / script), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)
    try:
        summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"{script} printed no JSON (exit {proc.returncode})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    detail = f"{script} {' '.join(args)}\nsummary: {json.dumps(summary, indent=1)}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0 and "error" not in summary, detail
    return summary, detail
