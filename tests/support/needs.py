"""Optional parts of the machine a test needs: present, the test runs; absent, it is skipped with one line
saying what to install — unless the environment variable CI is set, where it fails instead, so CI can never
go green by skipping what it was meant to run (.ci/run installs all of them).

    from tests.support import needs
    needs.bubblewrap()          # at a module's top: the whole module; in a test or fixture: that test

The summary at the end of a run groups the skips by what was missing (conftest.py's terminal summary).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest

SKIP_PREFIX = "needs "  # every skip reason from here starts so: the summary groups them


def need(what: str, present: bool, install: str) -> None:
    if present:
        return
    message = f"{SKIP_PREFIX}{what}: {install}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: .ci/run must install it)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def bubblewrap() -> None:
    """The code interpreter's sandbox: the `bwrap` binary, and user namespaces it can use here."""
    found = shutil.which("bwrap")
    works = found is not None and subprocess.run(
        [found, "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--", "true"],
        capture_output=True, timeout=30).returncode == 0
    need("bubblewrap", works, "apt-get install bubblewrap (and user namespaces allowed)"
         if found is None else "bubblewrap is installed but cannot create namespaces here")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    need("chromium", found is not None, "apt-get install chromium")
    assert found is not None
    return found


def playwright() -> None:
    """Playwright's Python package (the test extra) driving the system's Chromium."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        need("playwright", False, "pip install -e '.[test]' (the playwright package)")


def valgrind() -> None:
    need("valgrind", shutil.which("callgrind_control") is not None, "apt-get install valgrind")


def python_package(module: str, install: str = "pip install -e '.[test]'") -> None:
    """A Python package the suite uses (the `test` extra has them all)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        found = False
    need(f"the Python package {module}", found, install)
