"""The sandbox protocol: what a backend does (start one container's interpreter worker, isolated), and the
limits every backend applies.

A backend (`bubblewrap.Bubblewrap`, the default on Linux; `unsandboxed.Unsandboxed`, for development only)
gets a `Spec` — the host directory mounted at /mnt/data, the limits — and starts worker.py with its two
protocol pipes and its output pipe. Everything after that (the protocol, interrupts, the process tree's
memory) is the same for every backend (channel.py). Other backends (Docker/Podman, a remote kernel) fit the
same protocol: `probe` says whether the backend can run on this machine, and why not, before any request
needs it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

WORKER = Path(__file__).with_name("worker.py")

GiB = 1 << 30
MiB = 1 << 20

# OpenAI's memory_limit values: the address space of each process, and the resident memory of a whole
# container (channel.Interpreter watches it).
MEMORY_LIMITS = {"1g": 1 * GiB, "4g": 4 * GiB, "16g": 16 * GiB, "64g": 64 * GiB}


class SandboxError(Exception):
    """The sandbox could not start (the message says why, for the operator and the model)."""


@dataclass(frozen=True)
class Limits:
    """What one container may use. Defaults are the gateway's (config.py), `memory` the container's."""

    memory: int = 1 * GiB  # bytes: address space per process; resident memory of all its processes
    cpu: float = 120.0  # CPU seconds per call
    timeout: float = 120.0  # wall seconds per call; then the cell is interrupted
    processes: int = 64  # processes and threads of the container at once
    file_bytes: int = 512 * MiB  # largest file it may write
    disk_bytes: int = 1 * GiB  # all of /mnt/data
    tmp_bytes: int = 256 * MiB  # its private /tmp (memory-backed)
    output_bytes: int = 64 * 1024  # output shown per call (then a truncation marker)
    stop_output_bytes: int = 16 * MiB  # output at which a call is stopped
    start_timeout: float = 30.0  # seconds for a worker to start

    def worker(self) -> dict[str, int]:
        """The resource limits worker.py sets on itself (hard, before any code runs)."""
        return {"memory": self.memory, "processes": self.processes, "file_bytes": self.file_bytes,
                "cpu_total": 24 * 3600, "files": 1024}


@dataclass(frozen=True)
class Spec:
    """One container's sandbox: its /mnt/data on the host, its limits, and the worker's settings."""

    data: Path
    limits: Limits
    marker: str  # ends each cell's output on the output pipe (random per worker)


@dataclass
class Spawned:
    """A started sandbox: the process the gateway waits on, and the gateway's ends of the pipes."""

    process: object  # asyncio.subprocess.Process (typed loosely: backends may wrap it)
    pid: int  # the process to signal with its group (the sandbox's init, or the worker itself)
    requests: int  # fd: requests to the worker
    replies: int  # fd: the worker's replies
    output: int  # fd: everything the container writes on stdout/stderr


class Sandbox(Protocol):
    name: str

    def probe(self) -> str | None:
        """None when this backend can run here; else why not, and how to fix it (blocking: run it in a
        thread, once)."""
        ...

    def data_owner(self) -> tuple[int, int] | None:
        """The host uid/gid that must own a container's /mnt/data (None: the gateway's own)."""
        ...

    async def spawn(self, spec: Spec) -> Spawned: ...


@dataclass(frozen=True)
class Python:
    """The interpreter the sandbox runs (the gateway's own) and the directories it needs, read-only."""

    executable: str
    prefix: str
    site: tuple[str, ...]

    @classmethod
    def current(cls) -> Python:
        executable = os.path.realpath(sys.executable)
        prefix = os.path.realpath(sys.base_prefix)
        site: list[str] = []
        for key in ("purelib", "platlib"):
            path = os.path.realpath(sysconfig.get_paths()[key])
            if os.path.isdir(path) and path not in site and not _under(path, prefix):
                site.append(path)
        base_site = [os.path.realpath(p) for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
        return cls(executable, prefix, tuple(dict.fromkeys([*site, *base_site])))

    def paths(self) -> list[str]:
        """sys.path entries the worker adds (the data stack of the `interpreter` extra lives there)."""
        return list(self.site)

    def mounts(self) -> list[str]:
        """Host directories to mount read-only at the same place (the site directories are mounted at
        neutral paths instead: where the host keeps them is not the code's business)."""
        out = [self.prefix]
        if not _under(self.executable, self.prefix):
            out.append(os.path.dirname(self.executable))
        return out


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def worker_environment() -> dict[str, str]:
    """The worker's whole environment (nothing of the gateway's: no RG_*, no keys)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLBACKEND": "Agg",  # headless: figures are saved, never shown
        "MPLCONFIGDIR": "/tmp/.config/matplotlib",
        "XDG_CACHE_HOME": "/tmp/.cache",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",  # one thread each: threads count against the process limit
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # machine quirks numpy's OpenBLAS needs
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env
