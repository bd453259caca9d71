"""Where the benchmark's processes run: the gateway alone on its own core(s), or everything sharing the machine.

On a small machine the load generator and the fake upstream compete with the gateway for the cores, so the
gateway's figures depend on how the scheduler happens to place them. The *pinned* layout removes that: the
gateway (every thread of every worker) gets its own core(s) and the load generator and the fake upstream
share the rest — what `taskset -a -p` does, applied to each thread through sched_setaffinity, so that one
invocation can switch layouts between cases without restarting anything. The *unpinned* layout lets the
kernel place everything on all cores, as a casual run on a laptop does. Threads started later inherit the
affinity of the thread that starts them, so the placement holds for the SQLite threads and uvicorn's
workers too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    name: str                         # "pinned" | "unpinned"
    gateway: frozenset[int]           # CPUs of the gateway's processes
    others: frozenset[int]            # CPUs of the load generator and the fake upstream

    def describe(self) -> str:
        if self.name == "unpinned":
            return f"unpinned (all on CPUs {_cpus(self.gateway)})"
        up, ld = self.split()
        if up != ld:
            return (f"pinned (gateway on CPU {_cpus(self.gateway)}; upstream on CPU {_cpus(up)}; "
                    f"load generator on CPU {_cpus(ld)})")
        return f"pinned (gateway on CPU {_cpus(self.gateway)}; load generator and upstream on CPU {_cpus(self.others)})"

    def split(self) -> tuple[frozenset[int], frozenset[int]]:
        """(the upstream's CPUs, the load generator's CPUs): the first half of the others and the rest when
        there are two or more (and the layout is pinned), else both share them."""
        others = sorted(self.others)
        if self.name == "unpinned" or len(others) < 2:
            return self.others, self.others
        half = (len(others) + 1) // 2
        return frozenset(others[:half]), frozenset(others[half:])


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


_START = sorted(os.sched_getaffinity(0))  # before this process pins itself


def available() -> list[int]:
    """The CPUs this benchmark may use: those the harness was started with (`taskset` around it narrows them)."""
    return list(_START)


def default_names(workers: int = 1) -> list[str]:
    """Pinned first (the layout the targets are judged in) where the machine has a core to spare beside the
    gateway's, then unpinned for comparison."""
    return ["pinned", "unpinned"] if len(available()) > workers else ["unpinned"]


def make(name: str, workers: int = 1, reserve: int | None = None) -> Layout:
    """`reserve`: CPUs set aside for the gateway (≥ workers; the gateway uses the first `workers` of them), so
    that a scaling run keeps the same CPUs for the upstream and the load generator whatever the worker count."""
    cpus = available()
    if name == "unpinned":
        return Layout("unpinned", frozenset(cpus), frozenset(cpus))
    if name != "pinned":
        raise ValueError(f"unknown layout {name!r} (pinned, unpinned)")
    span = max(workers, reserve or 0)
    if len(cpus) <= span:
        raise ValueError(f"the pinned layout needs more than {span} CPU(s) for {workers} worker(s); "
                         f"this process may use {len(cpus)}")
    return Layout("pinned", frozenset(cpus[:workers]), frozenset(cpus[span:]))


def helpers(workers: int, reserve: int | None = None) -> tuple[int, int]:
    """How many fake-upstream and load-generator processes the CPUs beside the gateway's can hold: one of
    each sharing a CPU when there is one (the 2-core reference layout), else one per CPU of each half."""
    spare = len(available()) - max(workers, reserve or 0)
    if spare < 2:
        return 1, 1
    return (spare + 1) // 2, spare // 2


def pin(pids: list[int], cpus: frozenset[int]) -> int:
    """Every thread of every process in `pids` onto `cpus`; returns how many threads were placed."""
    from .load import threads

    placed = 0
    for pid in pids:
        for tid in threads(pid):
            try:
                os.sched_setaffinity(int(tid), cpus)
                placed += 1
            except OSError:
                continue  # the thread ended meanwhile
    return placed


def apply(layout: Layout, gateway_pids: list[int], other_pids: list[int], upstream_pids: list[int] | None = None,
          load_pids: list[int] | None = None) -> None:
    """Place the gateway's processes and the others (the fake upstream, this load generator); with
    `upstream_pids` and `load_pids`, the upstream and the load generator each on their half of the others."""
    pin(gateway_pids, layout.gateway)
    pin(other_pids, layout.others)
    up, ld = layout.split()
    pin(upstream_pids or [], up)
    pin(load_pids or [], ld)


def affinity(pid: int) -> list[int]:
    """The CPUs the process's main thread may run on (for the report)."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:
        return []
