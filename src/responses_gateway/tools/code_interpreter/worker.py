"""The interpreter worker: the one long-lived Python process of a container, run INSIDE the sandbox.

This file is not imported by the gateway: the sandbox mounts it read-only and runs it with the sandbox's own
interpreter (`python -I -S worker.py RFD WFD`, its settings the first message on the request pipe). It uses the standard library only, and it trusts nothing it
runs: the code it executes is the model's, in the same process, so anything this process can do, that code
can do too. The boundary is the sandbox around it (namespaces, the unprivileged uid, the seccomp filter, the
limits set here before any code runs), never this file.

Startup, in order: drop to the sandbox's uid when started as root of its user namespace (and clear every
capability set), set the resource limits (address space, processes, file size, CPU, open files, no core
dumps), close every inherited descriptor but its own two pipes, point stdout and stderr at the output pipe
(fd 1 and 2 — the gateway reads it, so output from child processes is captured in order too), then say
`ready`.

Protocol (the gateway's side is channel.py): frames of a 4-byte big-endian length and a JSON object, on the
request pipe (`rfd`) and the reply pipe (`wfd`). A request `{"cell": n, "code": "...", "cpu": seconds}` runs
the code as a notebook cell: the statements, then the last one's value if it is an expression. After the
cell the worker saves the open matplotlib figures as PNG files in /mnt/data, writes the end marker of cell
`n` on the output pipe (so the gateway knows which output belongs to it) and replies
`{"cell": n, "kind": "ok"|"error"|"interrupted"|"cpu"|"memory", "value": repr or null, "error":
traceback or null, "figures": [paths], "strays": n}` — `strays`: the processes the cell left running, ended
before the reply (`end_strays`).
"""

import ast
import contextlib
import ctypes
import io
import json
import linecache
import os
import resource
import signal
import struct
import sys
import time
import traceback
import warnings
from types import FrameType
from typing import Any, BinaryIO

MAIN = os.getpid()
VALUE_LIMIT = 1 << 20  # characters of a value's repr sent back (the gateway caps what is shown)
MAX_FIGURES = 20  # figures saved after one cell (the rest are closed unsaved)


class CPUTimeExceeded(BaseException):
    """SIGXCPU: the cell used up its CPU seconds."""


class State:
    running = False  # a cell is executing: SIGINT / SIGXCPU interrupt it; between cells they are ignored


def main() -> None:
    config = receive(os.fdopen(int(sys.argv[1]), "rb", buffering=0, closefd=False))
    if not isinstance(config, dict):
        sys.exit("the worker got no settings")
    drop_privileges(config)
    set_limits(config["limits"])
    rfd, wfd = config["rfd"], config["wfd"]
    keep = {0, 1, 2, rfd, wfd}
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(fd))
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)  # the code's child processes never see the protocol
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (for the life of the process)
    sys.stdout = stream(1)
    sys.stderr = stream(2)
    sys.path[:0] = config["path"]
    marker = config["marker"].encode()
    signal.signal(signal.SIGINT, on_interrupt)
    signal.signal(signal.SIGXCPU, on_cpu)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the file size limit fails with EFBIG
    warnings.filterwarnings("ignore", message=".*non-interactive.*")  # plt.show() with the Agg backend
    os.nice(config.get("nice", 10))  # the gateway beside it stays responsive when code burns CPU
    reader = os.fdopen(rfd, "rb", buffering=0)
    writer = os.fdopen(wfd, "wb", buffering=0)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    figures = Figures()
    send(writer, {"ready": True, "python": sys.version.split()[0]})
    while True:
        request = receive(reader)
        if request is None:
            return  # the gateway closed the pipe: the container is stopping
        reply = run_cell(namespace, request, figures)
        reply["strays"] = end_strays()
        for stream_ in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):  # the code may have replaced or closed them
                stream_.flush()
        with contextlib.suppress(OSError):  # or closed fd 1: the gateway then waits a moment for nothing
            os.write(1, marker + str(request["cell"]).encode() + b"\0")
        send(writer, reply)


def end_strays() -> int:
    """End every other process of the container, after each cell: the worker is the init of the sandbox's
    PID namespace (bubblewrap's --as-pid-1), so `kill(-1)` reaches every process the cell started — detached,
    in a session of its own, a fork bomb's children — and nothing else. They are reaped until none is left
    (the namespace's orphans are this process's children). How many there were."""
    if os.getpid() != 1:
        return 0  # not a PID namespace's init (another backend): the gateway kills the group instead
    ended = 0
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended  # no process left but this one
        if pid:
            ended += 1
        else:
            time.sleep(0.002)
    return ended


def stream(fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.FileIO(fd, "wb", closefd=False), encoding="utf-8", errors="backslashreplace",
                            write_through=True)


def on_interrupt(signum: int, frame: FrameType | None) -> None:
    if State.running:
        raise KeyboardInterrupt


def on_cpu(signum: int, frame: FrameType | None) -> None:
    if State.running:
        raise CPUTimeExceeded


# -- privileges and limits ------------------------------------------------------------------------------------

PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_LAST = 63


def drop_privileges(config: dict[str, Any]) -> None:
    """Started as uid 0 of its own user namespace (the gateway runs as root): leave every capability set
    empty and become the sandbox's uid, or stop. Otherwise the sandbox made this process unprivileged."""
    if os.getuid() != 0 and os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(CAP_LAST + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # needs CAP_SETPCAP, which the sandbox granted for this
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    uid, gid = config["uid"], config["gid"]
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    clear_capabilities(libc)
    with open("/proc/self/status") as fh:
        status = fh.read()
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        value = status.split(field + ":", 1)[1].split()[0]
        if int(value, 16) != 0:
            sys.exit(f"the worker still holds capabilities ({field} {value}); refusing to run code")
    if os.getuid() == 0 or os.geteuid() == 0:
        sys.exit("the worker is still root; refusing to run code")


def clear_capabilities(libc: ctypes.CDLL) -> None:
    """capset(2) with every set empty (the inheritable set survives a uid change otherwise)."""
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = bytes(24)  # two {effective, permitted, inheritable} u32 triples, all zero
    if libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        sys.exit(f"capset failed: errno {ctypes.get_errno()}")


def set_limits(limits: dict[str, int]) -> None:
    """Hard limits: the code can lower them, never raise them. RLIMIT_NPROC counts this uid's processes in
    the sandbox's own user namespace, so it bounds this container alone."""
    pairs = {
        resource.RLIMIT_AS: limits["memory"],
        resource.RLIMIT_NPROC: limits["processes"],
        resource.RLIMIT_FSIZE: limits["file_bytes"],
        resource.RLIMIT_CPU: limits["cpu_total"],
        resource.RLIMIT_NOFILE: limits.get("files", 1024),
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_MEMLOCK: 0,
        resource.RLIMIT_MSGQUEUE: 0,
    }
    for which, value in pairs.items():
        resource.setrlimit(which, (value, value))


def cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the protocol -------------------------------------------------------------------------------------------


def send(writer: BinaryIO, message: dict[str, Any]) -> None:
    data = json.dumps(message, ensure_ascii=False).encode("utf-8", "backslashreplace")
    writer.write(struct.pack(">I", len(data)) + data)


def receive(reader: BinaryIO) -> Any:
    head = read_exactly(reader, 4)
    if head is None:
        return None
    body = read_exactly(reader, struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def read_exactly(reader: BinaryIO, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = reader.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -- one cell -------------------------------------------------------------------------------------------------


def run_cell(namespace: dict[str, Any], request: dict[str, Any], figures: "Figures") -> dict[str, Any]:
    cell = request["cell"]
    code = request["code"]
    reply: dict[str, Any] = {"cell": cell, "kind": "ok", "value": None, "error": None, "figures": []}
    filename = f"<cell {cell}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    budget = min(hard, int(cpu_used() + request.get("cpu", 60)) + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (budget, hard))
    try:
        try:
            tree = ast.parse(code, filename, "exec")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            statements = compile(tree, filename, "exec")
            expression = compile(ast.Expression(last.value), filename, "eval") if last is not None else None
            State.running = True
            exec(statements, namespace)
            if expression is not None:
                value = eval(expression, namespace)
                State.running = False
                if value is not None:
                    namespace["_"] = value
                    reply["value"] = shown(value)
        finally:
            State.running = False
            if os.getpid() != MAIN:
                os._exit(1)  # a child the cell forked must never come back to this loop
    except KeyboardInterrupt as exc:
        reply.update(kind="interrupted", error=formatted(exc, filename))
    except CPUTimeExceeded:
        reply.update(kind="cpu", error="CPU time limit exceeded")
    except MemoryError as exc:
        reply.update(kind="memory", error=formatted(exc, filename))
    except SystemExit as exc:
        reply.update(kind="error", error=f"SystemExit: {exc.code!r}")
    except BaseException as exc:  # the cell's own error: shown as a notebook shows it
        reply.update(kind="error", error=formatted(exc, filename))
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    try:
        reply["figures"] = figures.save()
    except BaseException as exc:  # a figure that cannot be drawn is the cell's error, not the worker's
        reply["error"] = (reply["error"] or "") + formatted(exc, filename)
        if reply["kind"] == "ok":
            reply["kind"] = "error"
    return reply


def shown(value: object) -> str:
    """The value of the cell's last expression as a notebook shows it (its repr)."""
    try:
        text = repr(value)
    except BaseException as exc:
        text = f"<repr() failed: {type(exc).__name__}: {exc}>"
    return text[:VALUE_LIMIT]


def formatted(exc: BaseException, filename: str) -> str:
    """The traceback from the cell's own frames on (the worker's frames are not the code's business)."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell "):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


class Figures:
    """matplotlib's open figures, saved as PNG files in /mnt/data after each cell (and closed)."""

    def __init__(self) -> None:
        self.count = 0

    def save(self) -> list[str]:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return []
        paths = []
        for number in pyplot.get_fignums()[:MAX_FIGURES]:
            path = self.next_path()
            pyplot.figure(number).savefig(path, format="png")
            paths.append(path)
        pyplot.close("all")
        return paths

    def next_path(self) -> str:
        while True:
            self.count += 1
            path = f"/mnt/data/figure_{self.count}.png"
            if not os.path.lexists(path):
                return path


if __name__ == "__main__":
    main()
