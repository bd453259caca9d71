"""The code interpreter's own costs: a container's cold start, the overhead of a warm call, the memory of an
idle container. Loopback and local processes only; nothing goes to the network.

    python -m bench.code_interpreter              # 20 cold starts, 200 warm calls
    python -m bench.code_interpreter --quick      # a smoke run (what tests/benchmarks/test_bench_code_interpreter.py runs)

Measured at two levels:

- the sandbox (`channel.Interpreter` on `bubblewrap.Bubblewrap`): spawn → worker ready → `print(1)` answered
  (cold); `print(1)` on a started worker (warm: the pipe round trip and the cell itself);
- the container (`registry.Registry` with a SQLite store, what a response's call goes through): a new
  container's first `print(1)` — the row, the claim, a fresh /mnt/data, the sandbox, the cell, the scan of
  /mnt/data and the store writes after it — and a warm call on the same container.

RSS per idle container: the resident memory of the container's whole process tree (the sandbox's init and
the worker), right after it started, and after the code imported numpy, pandas and matplotlib.

Targets (docs/code-interpreter.md): cold start ≤ 500 ms, warm call overhead for print(1) ≤ 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from responses_gateway.store import open_store
from responses_gateway.tools.code_interpreter.bubblewrap import Bubblewrap
from responses_gateway.tools.code_interpreter.channel import Interpreter
from responses_gateway.tools.code_interpreter.registry import Options, Registry
from responses_gateway.tools.code_interpreter.sandbox import Limits, Spec
from responses_gateway.tools.code_interpreter.store import ContainerQueries

COLD_TARGET = 0.500
WARM_TARGET = 0.020


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {pct(ms, 0.9):.1f} | {max(ms):.1f} |")


def hard_limits() -> dict:
    """The hard limits of issue 34 where this tree has them (a memory cgroup, /mnt/data a filesystem of its
    own), as `serve` finds them; nothing on a tree from before them (a before/after pair with --src)."""
    try:
        from responses_gateway.tools.code_interpreter import cgroups, disk
    except ImportError:
        return {}
    found = cgroups.Cgroups.find()
    return {"cgroups": found if found.parent is not None else None, "disk": disk.mode()}


async def sandbox_level(base: Path, cold_n: int, warm_n: int) -> tuple[list[float], list[float], int, int]:
    sandbox = Bubblewrap(base)
    held = hard_limits()
    extra = (held["cgroups"],) if held else ()
    cold: list[float] = []
    for n in range(cold_n):
        data = base / f"cold{n}" / "data"
        sandbox.prepare(data)
        started = time.perf_counter()
        interpreter = Interpreter(sandbox, Spec(data, Limits(), os.urandom(8).hex()), *extra)
        await interpreter.start()
        result = await interpreter.run("print(1)")
        cold.append(time.perf_counter() - started)
        assert result.logs == "1\n", result
        await interpreter.stop()
    data = base / "warm" / "data"
    sandbox.prepare(data)
    interpreter = Interpreter(sandbox, Spec(data, Limits(), os.urandom(8).hex()), *extra)
    await interpreter.start()
    await asyncio.sleep(0.5)
    idle = await asyncio.to_thread(interpreter.rss)
    warm: list[float] = []
    for _ in range(warm_n):
        started = time.perf_counter()
        await interpreter.run("print(1)")
        warm.append(time.perf_counter() - started)
    await interpreter.run("import numpy, pandas, matplotlib.pyplot")
    await asyncio.sleep(0.5)
    loaded = await asyncio.to_thread(interpreter.rss)
    await interpreter.stop()
    return cold, warm, idle, loaded


async def container_level(base: Path, cold_n: int, warm_n: int) -> tuple[list[float], list[float]]:
    store = open_store(str(base / "store.db"))
    await store.open()
    await store.upgrade()
    registry = Registry(Bubblewrap(base / "sandbox"), store.role(ContainerQueries),
                        Options(base=base / "containers", max_live=4, **hard_limits()))
    await registry.open()
    cold: list[float] = []
    try:
        for n in range(cold_n):
            started = time.perf_counter()
            row_ = await registry.create("bench", name=f"cold {n}")
            outcome = await registry.run("bench", row_["id"], "print(1)")
            cold.append(time.perf_counter() - started)
            assert outcome.result.logs == "1\n", outcome
            await registry.delete("bench", row_["id"])
        row_ = await registry.create("bench", name="warm")
        await registry.run("bench", row_["id"], "print(1)")
        warm: list[float] = []
        for _ in range(warm_n):
            started = time.perf_counter()
            await registry.run("bench", row_["id"], "print(1)")
            warm.append(time.perf_counter() - started)
    finally:
        await registry.close()
        await store.close()
    return cold, warm


async def main(quick: bool) -> int:
    cold_n, warm_n = (3, 20) if quick else (20, 200)
    base = Path(tempfile.mkdtemp(prefix="rg-bench-ci-"))
    os.chmod(base, 0o711)
    try:
        problem = await asyncio.to_thread(Bubblewrap(base / "probe").probe)
        if problem:
            print(f"the sandbox cannot run here: {problem}", file=sys.stderr)
            return 2
        s_cold, s_warm, idle, loaded = await sandbox_level(base / "sandbox", cold_n, warm_n)
        c_cold, c_warm = await container_level(base / "registry", cold_n, warm_n)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("| case | n | p50 ms | p90 ms | max ms |")
    print("|---|---|---|---|---|")
    print(row("sandbox cold start (spawn → print(1) answered)", s_cold))
    print(row("sandbox warm print(1)", s_warm))
    print(row("container cold start (create → print(1) answered, files stored)", c_cold))
    print(row("container warm print(1) (store reads and writes included)", c_warm))
    print(f"\nRSS of an idle container: {idle / 2**20:.1f} MiB just started; {loaded / 2**20:.1f} MiB after importing "
          "numpy, pandas and matplotlib")
    misses = 0
    for name, value, target in (("cold start", statistics.median(c_cold), COLD_TARGET),
                                ("warm call overhead", statistics.median(c_warm), WARM_TARGET)):
        ok = value <= target
        misses += not ok
        print(f"{'PASS' if ok else 'MISS'} {name}: p50 {value * 1000:.1f} ms (target ≤ {target * 1000:.0f} ms)")
    return 0 if misses == 0 or quick else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
