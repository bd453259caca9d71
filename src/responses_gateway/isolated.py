"""Hostile input read in a child process of its own, which the kernel bounds and the caller can kill.

Some readers are not linear in what they are given: a PDF's content stream of a few kilobytes can hold
millions of text operators (an 8.8 KB file took pypdf 10 s of CPU), and 100,000 nested `<div>` (1.1 MB) took
the HTML parser 25 s. In a thread of the gateway such work cannot be stopped — a thread is not cancellable,
so it runs on after its caller gave up — and it holds the GIL the event loop needs. In a child it is bounded:
address space and CPU seconds by `setrlimit` (SIGXCPU at the soft limit, SIGKILL a second later), and wall
time by its parent, which kills it at its deadline, or the moment the caller stops waiting (`run_async`,
cancelled). Starting one costs about 30–40 ms (a Python interpreter and the reader's imports).

    python -m responses_gateway.isolated MODULE:FUNCTION MEMORY_BYTES CPU_SECONDS [ARG...]

reads the input on stdin, calls `FUNCTION(data, [ARG...])` after the limits are set, and writes what it
returns as one JSON value on stdout. Its environment is `child_env()`: none of the gateway's secrets (API
keys, database URLs in RG_* variables) are within its reach, should the input ever take over its reader.
A failure is `ChildFailed`, whose `why` says which bound it hit in words a message can end with.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import math
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import orjson

MODULE = "responses_gateway.isolated"
KEPT_ENV = ("PATH", "PYTHONPATH", "LANG", "LC_ALL")  # what the child needs to start; no keys, no settings
OUT_OF_MEMORY = 3  # the child's exit status when its reader ran out of its address space


@dataclass(frozen=True)
class Bounds:
    seconds: float  # wall clock (the parent kills it), and CPU seconds rounded up (the kernel does)
    memory: int  # bytes of address space
    seconds_flag: str = ""  # the setting that sets them, for messages ("--pdf-timeout")
    memory_flag: str = ""


class ChildFailed(Exception):
    """The child ran past a bound or died; `why` completes a sentence ("it needed more than 5 s of CPU")."""

    def __init__(self, why: str, reason: str):
        super().__init__(why)
        self.why = why
        self.reason = reason  # "time", "memory" or "exit"


def child_env() -> dict[str, str]:
    import os

    return {name: os.environ[name] for name in KEPT_ENV if name in os.environ}


def command(target: str, bounds: Bounds, args: list[str]) -> list[str]:
    return [sys.executable, "-m", MODULE, target, str(bounds.memory), str(max(1, math.ceil(bounds.seconds))),
            *args]


def _flag(flag: str) -> str:
    return f" ({flag})" if flag else ""


def timed_out(bounds: Bounds) -> ChildFailed:
    return ChildFailed(f"it took more than {bounds.seconds:g} s{_flag(bounds.seconds_flag)}", "time")


def outcome(returncode: int, stdout: bytes, stderr: bytes, bounds: Bounds) -> Any:
    """What the child returned, or ChildFailed saying why there is nothing."""
    if returncode == 0 and stdout:
        return orjson.loads(stdout)
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise ChildFailed(f"it needed more than {bounds.seconds:g} s of CPU{_flag(bounds.seconds_flag)}", "time")
    if returncode == OUT_OF_MEMORY or b"MemoryError" in stderr:
        raise ChildFailed(f"it needed more than {bounds.memory >> 20} MiB of memory{_flag(bounds.memory_flag)}",
                          "memory")
    raise ChildFailed(f"its reader exited with status {returncode}", "exit")


def run(target: str, data: bytes, args: list[str], bounds: Bounds) -> Any:
    """From a worker thread: the thread sleeps in `waitpid`, holding neither the GIL nor the event loop."""
    try:
        done = subprocess.run(command(target, bounds, args), input=data, capture_output=True,
                              timeout=bounds.seconds, check=False, env=child_env())
    except subprocess.TimeoutExpired:  # run() killed the child
        raise timed_out(bounds) from None
    return outcome(done.returncode, done.stdout, done.stderr, bounds)


async def run_async(target: str, data: bytes, args: list[str], bounds: Bounds) -> Any:
    """From the event loop: no thread waits; the child is killed at the deadline, or as soon as the caller
    is cancelled (a tool call that gave up leaves no work behind)."""
    proc = await asyncio.create_subprocess_exec(
        *command(target, bounds, args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_env())
    try:
        async with asyncio.timeout(bounds.seconds):
            stdout, stderr = await proc.communicate(data)
    except TimeoutError:
        raise timed_out(bounds) from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())  # reaped, even when the caller is being cancelled
    assert proc.returncode is not None
    return outcome(proc.returncode, stdout, stderr, bounds)


def main(argv: list[str]) -> int:
    target, memory, cpu, *args = argv
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 1))  # SIGXCPU at the soft limit, SIGKILL next
    module, _, name = target.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
        result = function(sys.stdin.buffer.read(), args)
        out = orjson.dumps(result)
    except MemoryError:
        return OUT_OF_MEMORY
    sys.stdout.buffer.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
