"""Processes that outlive the test session: every process the suite starts inherits the session's mark in its
environment (conftest.py); at the end, any still running is a leak."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

KEY = pytest.StashKey[list[tuple[int, str]]]()
GRACE = 5.0  # seconds a process ended by a test's teardown may take to go


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes, this one aside, whose environment carries the mark."""
    needle = f"RG_TEST_SESSION={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue  # a zombie: gone, waiting for its parent to read its status
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(entry), command[:200]))
    return found


def outliving(mark: str) -> list[tuple[int, str]]:
    """The marked processes still running after a short grace (a teardown's SIGTERM takes a moment)."""
    if not os.path.isdir("/proc"):
        return []
    deadline = time.monotonic() + GRACE
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def kill(processes: list[tuple[int, str]]) -> None:
    for pid, _ in processes:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def readers_running() -> list[int]:
    """Child processes of this process reading hostile input (responses_gateway/isolated.py): their
    environment is stripped (no session mark), so they are found by their parent and command line."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as cmd:
                line = cmd.read()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"responses_gateway.isolated" in line:
            found.append(int(pid))
    return found
