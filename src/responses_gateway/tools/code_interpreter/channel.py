"""The gateway's side of one interpreter worker: start it in its sandbox, run cells, interrupt, stop.

Every wait has a deadline and every resource a limit, enforced here whatever the backend:

- the cell's wall time (`Limits.timeout`): the cell is interrupted (SIGINT to the worker's process group,
  which a notebook user would call Ctrl-C) and given a few seconds to stop; a worker that does not is
  killed (its variables are lost, its files are not);
- output: the first `output_bytes` are kept and a visible marker says how much was left out; past
  `stop_output_bytes` the cell is interrupted (a 1 GB print costs the gateway a bounded read, no memory);
- memory: each process's address space is capped by the worker's rlimit, and the container's processes
  together by its memory cgroup where the gateway may make one (cgroups.py: the kernel holds the total);
  elsewhere their resident memory is read from /proc twenty times a second while a cell runs (every two
  seconds between cells), and over the container's limit it is killed;
- disk: a file larger than `file_bytes` cannot be written (EFBIG); /mnt/data is a filesystem of `disk_bytes`
  where the gateway may mount one (disk.py: a write past it fails with ENOSPC, and the call says the disk is
  full); elsewhere all of /mnt/data over `disk_bytes` (measured four times a second) stops the cell;
- processes: the worker's RLIMIT_NPROC (counted in the sandbox's own user namespace); at the end of every
  cell every other process of the container is ended (the worker is its PID namespace's init,
  `worker.end_strays`), and the cell's CPU seconds are those of all its processes together (read from /proc
  with the memory), so a process the cell left behind cannot run on, nor escape the per-cell CPU limit.

Reads of the pipes happen on the event loop (they are non-blocking), the /proc and directory walks in a
thread, so a container that misbehaves slows nobody else's request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from .cgroups import Cgroup, Cgroups
from .sandbox import Limits, Sandbox, SandboxError, Spawned, Spec

log = logging.getLogger("responses_gateway.code_interpreter")

GRACE = 3.0  # seconds an interrupted cell gets to stop before its worker is killed
MAX_REPLY = 64 << 20  # bytes of one reply frame (a value's repr is capped by the worker)
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    """One cell's outcome. `kind`: ok, error (the code raised), interrupted, cpu, memory, timeout, output
    (too much of it), disk, or crashed (the worker died: its variables are gone)."""

    kind: str
    logs: str = ""  # stdout and stderr in order, then the traceback; capped, with a marker when cut
    value: str | None = None  # the last expression's value as a notebook shows it
    figures: list[str] = field(default_factory=list)  # PNG files the cell's figures were saved to
    seconds: float = 0.0
    restarted: bool = False  # the worker was killed: its state is lost
    strays: int = 0  # processes the cell left running, ended at its end

    @property
    def ok(self) -> bool:
        return self.kind in ("ok", "error")


class Output(asyncio.Protocol):
    """The container's output pipe: bytes go to the current cell, up to the cap; each cell's end marker
    closes its share."""

    def __init__(self, marker: bytes, limits: Limits, on_flood: Any):
        self.marker = marker
        self.keep = limits.output_bytes
        self.stop = limits.stop_output_bytes
        self.on_flood = on_flood
        self.buf = bytearray()
        self.total = 0
        self.flooded = False
        self.pending = b""  # bytes that may hold the start of a marker
        self.ended: dict[int, asyncio.Future[None]] = {}
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        pending = self.pending + data
        while True:
            at = pending.find(self.marker)
            if at < 0:
                break
            end = pending.find(b"\0", at + len(self.marker))
            if end < 0:
                break
            self._take(pending[:at])
            with contextlib.suppress(ValueError):
                cell = int(pending[at + len(self.marker):end])
                self.ended.setdefault(cell, asyncio.get_running_loop().create_future())
                if not self.ended[cell].done():
                    self.ended[cell].set_result(None)
            pending = pending[end + 1:]
        hold = len(self.marker) + 24
        if len(pending) > hold:
            self._take(pending[:-hold])
            pending = pending[-hold:]
        self.pending = pending

    def _take(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        room = self.keep - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        if self.total > self.stop and not self.flooded:
            self.flooded = True
            self.on_flood()

    def connection_lost(self, exc: Exception | None) -> None:
        self._take(self.pending)
        self.pending = b""
        if not self.closed.done():
            self.closed.set_result(None)

    def cell_end(self, cell: int) -> asyncio.Future[None]:
        return self.ended.setdefault(cell, asyncio.get_running_loop().create_future())

    def take(self) -> tuple[str, int]:
        """The current cell's output so far (decoded) and how many bytes were left out; then a fresh count."""
        text = bytes(self.buf).decode("utf-8", "replace")
        dropped = self.total - len(self.buf)
        self.buf = bytearray()
        self.total = 0
        self.flooded = False
        return text, dropped


class Interpreter:
    """One container's worker."""

    def __init__(self, sandbox: Sandbox, spec: Spec, cgroups: Cgroups | None = None):
        self.sandbox = sandbox
        self.spec = spec
        self.limits = spec.limits
        self.cgroups = cgroups
        self.cgroup: Cgroup | None = None  # the container's memory cgroup, where there is one
        self.cpu_start = 0.0  # the container's CPU seconds when the running cell began
        self.ooms = 0  # OOM kills in its cgroup before the running cell
        self.spawned: Spawned | None = None
        self.output: Output | None = None
        self.replies: asyncio.StreamReader | None = None
        self.requests: asyncio.WriteTransport | None = None
        self.transports: list[asyncio.BaseTransport] = []
        self.cells = 0
        self.killed: str | None = None  # why the gateway killed it (memory, timeout...)
        self.interrupted: str | None = None  # why the current cell was interrupted
        self.lock = asyncio.Lock()  # one cell at a time
        self.watch: asyncio.Task[None] | None = None
        self.running = False
        self.settling: asyncio.Task[None] | None = None  # a cancelled cell being stopped
        self.python = ""

    # -- lifetime -------------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        process = self.spawned.process if self.spawned else None
        return process is not None and getattr(process, "returncode", 0) is None and self.killed is None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        spawned = self.spawned = await self.sandbox.spawn(self.spec)
        if self.cgroups is not None:
            self.cgroup = await asyncio.to_thread(self.cgroups.make, self.limits.memory)
            if self.cgroup is not None:
                try:
                    await asyncio.to_thread(self.cgroup.add, spawned.pid)  # before any cell: its children follow
                except OSError as exc:
                    log.warning("could not put a container in its memory cgroup (%s): the watcher holds it", exc)
                    await asyncio.to_thread(self.cgroup.remove)
                    self.cgroup = None
        marker = self.spec.marker.encode()
        output = self.output = Output(marker, self.limits, self._flooded)
        transport, _ = await loop.connect_read_pipe(lambda: output, os.fdopen(spawned.output, "rb", 0))
        self.transports.append(transport)
        self.replies = asyncio.StreamReader(limit=MAX_REPLY)
        replies = self.replies
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(replies),
                                                    os.fdopen(spawned.replies, "rb", 0))
        self.transports.append(transport)
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(spawned.requests, "wb", 0))
        self.requests = writer
        self.transports.append(writer)
        try:
            async with asyncio.timeout(self.limits.start_timeout):
                ready = await self._reply()
        except (TimeoutError, SandboxError) as exc:
            said = await self._said()
            await self.stop()
            reason = "it did not start in time" if isinstance(exc, TimeoutError) else str(exc)
            raise SandboxError(f"the sandbox could not start: {said or reason}") from None
        if ready is None or not ready.get("ready"):
            said = await self._said()
            await self.stop()
            raise SandboxError(f"the sandbox could not start: {said or 'the worker exited'}")
        self.python = str(ready.get("python", ""))
        self.watch = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        """End the worker and every process of its sandbox."""
        if self.watch is not None:
            self.watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watch
            self.watch = None
        if self.requests is not None and not self.requests.is_closing():
            self.requests.close()  # the worker sees end of input and exits
        spawned = self.spawned
        if spawned is not None:
            process: Any = spawned.process
            if process.returncode is None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await process.wait()
            if process.returncode is None:
                self._kill_tree()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5):
                        await process.wait()
        for transport in self.transports:
            transport.close()
        self.transports = []
        if self.cgroup is not None:
            cgroup, self.cgroup = self.cgroup, None
            await asyncio.to_thread(cgroup.remove)

    def kill(self, why: str) -> None:
        """Kill the whole sandbox now (the running cell ends as `why`)."""
        if self.killed is None:
            self.killed = why
        self._kill_tree()

    def _kill_tree(self) -> None:
        spawned = self.spawned
        if spawned is None:
            return
        process: Any = spawned.process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # bubblewrap and its session (its init dies: all die)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            process.kill()

    # -- cells ----------------------------------------------------------------------------------------------

    async def run(self, code: str, timeout: float | None = None) -> Result:
        async with self.lock:
            if self.settling is not None:  # a cell whose caller left is still being stopped
                await asyncio.shield(self.settling)
            return await self._run(code, self.limits.timeout if timeout is None else timeout)

    async def _run(self, code: str, timeout: float) -> Result:
        if not self.alive or self.requests is None or self.output is None:
            return Result("crashed", "The container's interpreter is not running.", restarted=True)
        self.cells += 1
        cell = self.cells
        started = time.monotonic()
        self.interrupted = None
        self.cpu_start = await asyncio.to_thread(self.cpu)
        self.ooms = self.cgroup.oom_kills() if self.cgroup is not None else 0
        self.running = True
        self.output.take()  # output between cells (background processes) is not this cell's
        self._send({"cell": cell, "code": code, "cpu": self.limits.cpu})
        reply: dict[str, Any] | None = None
        try:
            try:
                async with asyncio.timeout(timeout):
                    reply = await self._reply()
            except asyncio.CancelledError:
                # The caller left (the client went away, the response ended): the cell is stopped as at a
                # timeout, in a task of its own that the next cell waits for, so no reply is ever taken for
                # another cell's and the state survives a cell that stops when asked.
                self.interrupt()
                self.settling = asyncio.create_task(self._settle(cell))
                raise
            except TimeoutError:
                self.interrupted = self.interrupted or "timeout"
                self.interrupt()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(GRACE):
                        reply = await self._reply()
                if reply is None:
                    self.kill("timeout")
            if reply is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2):
                        await self.output.cell_end(cell)
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        await asyncio.shield(self.output.closed)
        finally:
            self.running = False
        logs, dropped = self.output.take()
        return self._result(reply, logs, dropped, time.monotonic() - started)

    async def _settle(self, cell: int) -> None:
        try:
            async with asyncio.timeout(GRACE):
                reply = await self._reply()
            if reply is not None and self.output is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2):
                        await self.output.cell_end(cell)
        except TimeoutError:
            reply = None
        if reply is None:
            self.kill("crashed")
        if self.output is not None:
            self.output.take()
        self.settling = None

    def _result(self, reply: dict[str, Any] | None, logs: str, dropped: int, seconds: float) -> Result:
        if dropped:
            logs += f"\n[... output truncated: {dropped:,} more bytes were not kept ...]\n"
        if self.cgroup is not None and self.cgroup.oom_kills() > self.ooms:
            # the kernel ended a process of the container at its memory limit: the cell ran out of memory
            if reply is None:
                self.killed = "memory"
            elif reply.get("kind") in ("ok", "error"):
                reply = {**reply, "kind": "memory"}
        if reply is not None and reply.get("kind") == "error" and _out_of_space(reply):
            reply = {**reply, "kind": "disk"}  # the cell failed on a full /mnt/data (or /tmp): say so
        if reply is None:
            why = self.killed or "crashed"
            self.killed = self.killed or why
            return Result(why, logs + _explain(why, self.limits, restarted=True), seconds=seconds, restarted=True)
        kind = str(reply.get("kind", "error"))
        error = reply.get("error")
        if kind == "interrupted" and self.interrupted is not None:
            kind = self.interrupted  # stopped by the gateway: say which limit
            error = None
        if error:
            logs += ("" if not logs or logs.endswith("\n") else "\n") + str(error)
        if kind in ("timeout", "output", "disk", "cpu", "memory"):
            logs += ("" if not logs or logs.endswith("\n") else "\n") + _explain(kind, self.limits)
        strays = int(reply.get("strays") or 0)
        if strays:
            logs += ("" if not logs or logs.endswith("\n") else "\n") + (
                f"[{strays} process{'es' if strays > 1 else ''} the code left running "
                f"{'were' if strays > 1 else 'was'} stopped at the end of the call: nothing runs between calls.]")
        value = reply.get("value")
        return Result(kind, logs, value if isinstance(value, str) else None,
                      [str(p) for p in reply.get("figures") or ()], seconds, strays=strays)

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the worker's process group (the cell raises KeyboardInterrupt)."""
        spawned = self.spawned
        if spawned is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(spawned.pid, signal.SIGINT)  # the sandbox's session: its init ignores it

    def _flooded(self) -> None:
        if self.running and self.interrupted is None:
            self.interrupted = "output"
            self.interrupt()

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        assert self.requests is not None
        self.requests.write(struct.pack(">I", len(data)) + data)

    async def _reply(self) -> dict[str, Any] | None:
        assert self.replies is not None
        try:
            head = await self.replies.readexactly(4)
            size = struct.unpack(">I", head)[0]
            if size > MAX_REPLY:
                raise SandboxError("the worker's reply is too large")
            reply: dict[str, Any] = json.loads(await self.replies.readexactly(size))
            return reply
        except asyncio.IncompleteReadError:
            return None

    async def _said(self) -> str:
        """What the sandbox printed before it failed (bubblewrap's own error messages go there)."""
        output = self.output
        if output is None:
            return ""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1):
                await asyncio.shield(output.closed)
        text, _ = output.take()
        return text.strip()[-2000:]

    # -- watching the process tree ----------------------------------------------------------------------------

    def rss(self) -> int:
        """Resident bytes of every process in the container."""
        spawned = self.spawned
        return 0 if spawned is None else tree_rss(spawned.pid)

    def cpu(self) -> float:
        """CPU seconds of every process in the container, the ended ones its init reaped included."""
        spawned = self.spawned
        return 0.0 if spawned is None else tree_cpu(spawned.pid)

    async def _watch(self) -> None:
        limits = self.limits
        data = self.spec.data
        polled_disk = not os.path.ismount(data)
        while self.alive:
            held = self.cgroup is not None  # the kernel holds the memory: only CPU (and disk) to watch
            await asyncio.sleep((0.25 if held else 0.05) if self.running else 2.0)
            if not held:
                rss = await asyncio.to_thread(self.rss)
                if rss > limits.memory:
                    log.warning("container using %d MiB of memory (limit %d MiB): killed", rss >> 20,
                                limits.memory >> 20)
                    self.kill("memory")
                    return
            if not self.running or self.interrupted is not None:
                continue
            if held and self.cgroup is not None and self.cgroup.oom_kills() > self.ooms:
                self.interrupted = "memory"  # the kernel ended one of its processes at the container's limit
                self.interrupt()
            elif await asyncio.to_thread(self.cpu) - self.cpu_start > limits.cpu:
                self.interrupted = "cpu"  # all the cell's processes together (each alone has its rlimit)
                self.interrupt()
            elif polled_disk and await asyncio.to_thread(disk_usage, data, limits.disk_bytes) > limits.disk_bytes:
                self.interrupted = "disk"
                self.interrupt()


def process_tree(root: int) -> list[int]:
    """`root` and its descendants (from /proc/<pid>/task/<tid>/children)."""
    out: list[int] = []
    todo = [root]
    while todo and len(out) < 100_000:
        pid = todo.pop()
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                continue
    return out


def tree_rss(root: int) -> int:
    total = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def tree_cpu(root: int) -> float:
    """CPU seconds (user and system) of `root` and its descendants, and of the children `root` has reaped."""
    ticks = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        try:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
            if pid == root:
                ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: its reaped children's
        except (ValueError, IndexError):
            continue
    return ticks / TICK


def disk_usage(path: os.PathLike[str] | str, stop: int) -> int:
    """Bytes used under `path` (allocated blocks, so sparse files count what they hold), stopping once past
    `stop` or 100,000 entries (then it reports `stop + 1`: too much either way)."""
    total, seen, todo = 0, 0, [os.fspath(path)]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)
            if total > stop or seen > 100_000:
                return max(total, stop + 1)
    return total


def _out_of_space(reply: dict[str, Any]) -> bool:
    """The cell ended on ENOSPC (its traceback's last line): a disk full, not the code's own mistake."""
    error = str(reply.get("error") or "")
    last = error.rstrip().rsplit("\n", 1)[-1]
    return "[Errno 28]" in last or "No space left on device" in last


def _explain(kind: str, limits: Limits, restarted: bool = False) -> str:
    said = {
        "timeout": f"Execution timed out after {limits.timeout:g} seconds: the cell was interrupted.",
        "output": f"Output limit exceeded: the cell was stopped after {limits.stop_output_bytes:,} bytes of output.",
        "disk": f"Disk limit exceeded: /mnt/data may hold {limits.disk_bytes:,} bytes; the cell was stopped (or "
                "failed writing: the disk is full). Delete files in /mnt/data to make room.",
        "cpu": f"CPU time limit exceeded ({limits.cpu:g} seconds, all the call's processes together): the cell "
               "was stopped.",
        "memory": f"Memory limit exceeded ({limits.memory >> 20} MiB).",
        "crashed": "The interpreter stopped unexpectedly.",
    }.get(kind, "")
    if restarted:
        said += (" The interpreter was killed and will be restarted on the next call: its variables were lost; "
                 "files in /mnt/data were kept.")
    return said
