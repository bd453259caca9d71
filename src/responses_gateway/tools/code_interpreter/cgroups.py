"""A container's memory as one total: a cgroup of its own, where the gateway may make one.

The worker's RLIMIT_AS bounds each process, not their sum: the probe's 1 GiB container reached 2,847 MiB with
4 processes and 4,923 MiB with 8. A memory cgroup holds the total: every process the container starts is in
it (children inherit it), and the kernel reclaims, then OOM-kills inside it, at the limit — the host never
pays for it. Found at start-up, in order:

- cgroup v2 (`/sys/fs/cgroup`, `memory` in the controllers of this process's cgroup's subtree): a child
  cgroup per container with `memory.max` and `memory.swap.max` 0. The gateway needs a delegated cgroup:
  under systemd, `Delegate=yes` in its unit (or `systemd-run --user -p Delegate=yes`); in a container, a
  writable cgroup namespace (`docker run --cgroupns=private`, with the container's cgroup writable);
- cgroup v1 (`/sys/fs/cgroup/memory`): a child of this process's memory cgroup with
  `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` where swap is accounted);
- neither: the total resident memory of the container's processes is read from /proc while a cell runs
  (channel.py), and the container killed when over — a watcher, so it can overshoot between two looks.

`Cgroups.kind` names what is in force; the start-up block says it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("responses_gateway.code_interpreter")

V2_ROOT = Path("/sys/fs/cgroup")
V1_MEMORY = Path("/sys/fs/cgroup/memory")
WATCHER = "watcher"


class Cgroup:
    """One container's cgroup."""

    def __init__(self, path: Path, v2: bool):
        self.path = path
        self.v2 = v2

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """OOM kills inside this cgroup so far (v1: times the limit was hit and memory could not be
        reclaimed, `under_oom` events are not counted there, so failcnt of a full cgroup stands for them)."""
        try:
            if self.v2:
                for line in (self.path / "memory.events").read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
                return 0
            for line in (self.path / "memory.oom_control").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Remove the cgroup (its processes are gone; a straggler is killed first)."""
        with contextlib.suppress(OSError):
            if self.v2 and (self.path / "cgroup.kill").exists():
                (self.path / "cgroup.kill").write_text("1")
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                with contextlib.suppress(OSError, ValueError):
                    for pid in (self.path / "cgroup.procs").read_text().split():
                        with contextlib.suppress(OSError):
                            os.kill(int(pid), 9)
                time.sleep(0.02)


class Cgroups:
    """Where this process makes its containers' cgroups, and how (v2, v1, or none: the watcher)."""

    def __init__(self) -> None:
        self.parent: Path | None = None
        self.v2 = False
        self.kind = WATCHER
        self.count = 0

    @classmethod
    def find(cls) -> Cgroups:
        """Detect, and prove by making (and removing) one (blocking: call it in a thread)."""
        found = cls()
        for parent, v2 in _candidates():
            probe = parent / f"responses-gateway-{os.getpid()}-probe"
            try:
                probe.mkdir()
                limit = probe / ("memory.max" if v2 else "memory.limit_in_bytes")
                limit.write_text(str(64 << 20))
                probe.rmdir()
            except OSError:
                with contextlib.suppress(OSError):
                    probe.rmdir()
                continue
            found.parent, found.v2 = parent, v2
            found.kind = f"cgroup {'v2 memory.max' if v2 else 'v1 memory.limit_in_bytes'} ({parent})"
            forget_dead(parent)
            break
        return found

    def make(self, memory: int) -> Cgroup | None:
        """A cgroup holding at most `memory` bytes; None where there are none (the watcher holds it)."""
        if self.parent is None:
            return None
        self.count += 1
        path = self.parent / f"responses-gateway-{os.getpid()}-{self.count}"
        try:
            path.mkdir()
            if self.v2:
                (path / "memory.max").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(str(memory))
        except OSError as exc:
            log.warning("could not make a memory cgroup for a container (%s): the watcher holds its memory", exc)
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return Cgroup(path, self.v2)


def forget_dead(parent: Path) -> None:
    """Remove the containers' cgroups of gateway processes that died without removing them (a SIGKILL): their
    processes died with the sandboxes, an empty cgroup is all that is left."""
    for child in parent.glob("responses-gateway-*-*"):
        try:
            pid = int(child.name.split("-")[2])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # alive: its own
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(OSError):
            child.rmdir()


def _candidates() -> list[tuple[Path, bool]]:
    """This process's own cgroups where a child could hold memory: v2 first, then v1's memory hierarchy."""
    out: list[tuple[Path, bool]] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "" and (V2_ROOT / "cgroup.controllers").exists():
            own = V2_ROOT / path.lstrip("/")
            with contextlib.suppress(OSError):
                if "memory" in (own / "cgroup.subtree_control").read_text().split() or _enable(own):
                    out.insert(0, (own, True))
        elif "memory" in controllers.split(",") and V1_MEMORY.is_dir():
            out.append((V1_MEMORY / path.lstrip("/"), False))
    return out


def _enable(own: Path) -> bool:
    """Turn the memory controller on for `own`'s children, where it is offered and allowed."""
    try:
        if "memory" not in (own / "cgroup.controllers").read_text().split():
            return False
        (own / "cgroup.subtree_control").write_text("+memory")
        return True
    except OSError:
        return False
