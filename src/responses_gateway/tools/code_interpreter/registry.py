"""The containers of this process: a live interpreter worker each, their files, their expiry and caps.

What a container is lives in the shared store (this package's store.py): its row and its files. What lives here
is the process part — the worker (and so the variables) and the container's /mnt/data on this host. A call:

1. takes the container's lock (calls of one container run one after another);
2. finds its live worker, or starts one: claims the container in the store (a new generation), lays its
   stored files into a fresh /mnt/data and starts the sandbox. A live worker whose generation is older
   than the store's is stale — another replica ran the container since — and is replaced the same way;
3. brings /mnt/data up to date with the store (files uploaded through another replica);
4. runs the code;
5. stores the files the code made, changed or removed (`source: "assistant"`), and marks the container used.

So a request naming a container on another replica restarts it there with its files: its variables are
those of the replica it last ran on (docs/code-interpreter.md; sticky routing keeps them).

Caps: `key_containers` running containers per key (across replicas: counted in the store), `max_live`
workers in this process (the least recently used idle one is stopped to make room; its files stay in the
store). A container idle for its minutes (20 by default, as OpenAI's) expires: its worker stops and its
files go. The sweep runs every `SWEEP` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...errors import APIError
from ...ids import new_id
from . import disk, files
from .cgroups import Cgroups
from .channel import Interpreter, Result
from .sandbox import MEMORY_LIMITS, Limits, Sandbox, SandboxError, Spec
from .store import Containers

log = logging.getLogger("responses_gateway.code_interpreter")

SWEEP = 30.0  # seconds between expiry sweeps
FORGET = 7 * 86400  # seconds an expired container stays listed


class ContainerError(APIError):
    """A container that cannot be used, as the API answers it (and the model reads it)."""


def not_found(container_id: str) -> ContainerError:
    return ContainerError(404, f"Container with id '{container_id}' not found.", code=None)


@dataclass(frozen=True)
class Options:
    base: Path  # containers' /mnt/data live under it, one directory each
    limits: Limits = Limits()  # per call; `memory` is each container's own
    max_memory: str = "4g"
    idle_minutes: int = 20
    key_containers: int = 100
    max_live: int = 16
    stored_file_bytes: int = 32 << 20  # larger files stay in the live container only
    cgroups: Cgroups | None = None  # where containers' memory cgroups are made (None: the watcher holds it)
    disk: str = disk.POLLED  # disk.FILESYSTEM: each live container's /mnt/data is a filesystem of its own


@dataclass
class Live:
    """A container running in this process."""

    id: str
    owner: str
    generation: int
    interpreter: Interpreter
    data: Path
    minutes: int
    seen: dict[str, files.Seen] = field(default_factory=dict)  # /mnt/data as last synced
    stored: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (file id, etag) in the store
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False


@dataclass
class Outcome:
    """A call's result, with the container files it made or changed (as stored), figures first."""

    container_id: str
    result: Result
    files: list[dict[str, Any]]
    images: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)  # what the model should also know (files not kept...)


class Registry:
    def __init__(self, sandbox: Sandbox, store: Containers, options: Options):
        self.sandbox = sandbox
        self.store = store
        self.options = options
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        self.live: dict[str, Live] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.sweeper: asyncio.Task[None] | None = None
        self.owner_ids = sandbox.data_owner()

    async def open(self) -> None:
        base = self.options.base
        base.mkdir(parents=True, exist_ok=True)
        os.chmod(base, 0o711 if self.owner_ids else 0o700)
        self.sweeper = asyncio.create_task(self._sweep_forever())

    async def close(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.sweeper
        await asyncio.gather(*(self._stop(live) for live in list(self.live.values())), return_exceptions=True)

    # -- containers -------------------------------------------------------------------------------------------

    def memory_limit(self, asked: str | None, param: str) -> str:
        limit = asked or "1g"
        if limit not in MEMORY_LIMITS:
            raise APIError(400, f"Invalid value: '{limit}'. Supported values are: '1g', '4g', '16g' and '64g'.",
                           param=param, code="invalid_value")
        if MEMORY_LIMITS[limit] > MEMORY_LIMITS[self.options.max_memory]:
            raise APIError(400, f"memory_limit '{limit}' is more than this gateway allows "
                           f"('{self.options.max_memory}').", param=param, code="invalid_value")
        return limit

    async def create(self, owner: str, *, name: str, memory_limit: str = "1g", minutes: int | None = None,
                     uploads: Iterable[tuple[str, bytes]] = (), container_id: str | None = None) -> dict[str, Any]:
        """A new container (`uploads`: files to put in it first, by name; `container_id`: an id already
        shown to the client, for an `auto` container made when the model first runs code)."""
        cap = self.options.key_containers
        if await self.store.live_containers(owner) >= cap:
            raise ContainerError(429, f"This key already has {cap} running containers (the gateway's limit); "
                                 "delete one or let it expire.", type="rate_limit_exceeded",
                                 code="container_limit_exceeded")
        cid = container_id or new_id("cntr")
        await self.store.create_container({"id": cid, "name": name, "created_at": int(time.time()),
                                           "minutes": minutes or self.options.idle_minutes,
                                           "memory_limit": memory_limit}, owner)
        for filename, content in uploads:
            await self.add_file(owner, cid, filename, content, "user")
        found = await self.store.get_container(cid, owner)
        if found is None:
            raise not_found(cid)
        return found

    async def get(self, owner: str, container_id: str) -> dict[str, Any] | None:
        return await self.store.get_container(container_id, owner)

    async def usable(self, owner: str, container_id: str) -> dict[str, Any]:
        row = await self.store.get_container(container_id, owner)
        if row is None:
            raise not_found(container_id)
        if row["status"] != "running":
            raise ContainerError(400, f"Container '{container_id}' has expired (it was idle for "
                                 f"{row['minutes']} minutes); its files are gone.", code="container_expired")
        return row

    async def delete(self, owner: str, container_id: str) -> bool:
        async with self._lock(container_id):
            if not await self.store.delete_container(container_id, owner):
                return False
            live = self.live.get(container_id)
            if live is not None:
                await self._stop(live)
            return True

    # -- files ------------------------------------------------------------------------------------------------

    async def add_file(self, owner: str, container_id: str, filename: str, content: bytes,
                       source: str = "user") -> dict[str, Any]:
        """Put a file in /mnt/data (by its name): stored, and written into the live container if it runs here."""
        await self.usable(owner, container_id)
        path = f"{files.ROOT}/{files.safe_name(filename)}"
        async with self._lock(container_id):
            stored = await self.store.put_container_file(
                {"id": new_id("cfile"), "container_id": container_id, "path": path, "created_at": int(time.time()),
                 "source": source}, content)
            live = self.live.get(container_id)
            if live is not None:
                await asyncio.to_thread(files.write, str(live.data), path, content, self.owner_ids)
                await self._rescan(live, [path])
                live.stored[path] = (stored["id"], stored["etag"])
            return stored

    async def remove_file(self, owner: str, container_id: str, file_id: str) -> bool:
        async with self._lock(container_id):
            found = await self.store.container_file(container_id, file_id, owner)
            if found is None or not await self.store.delete_container_file(container_id, file_id, owner):
                return False
            live = self.live.get(container_id)
            if live is not None:
                await asyncio.to_thread(files.remove, str(live.data), found["path"])
                live.seen.pop(found["path"], None)
                live.stored.pop(found["path"], None)
            return True

    # -- running code -----------------------------------------------------------------------------------------

    async def run(self, owner: str, container_id: str, code: str) -> Outcome:
        async with self._lock(container_id):
            row = await self.usable(owner, container_id)
            live = await self._live(row, owner)
            live.busy = True
            try:
                await self._pull(live)
                result = await live.interpreter.run(code)
                changed, notes = await self._push(live)
            finally:
                live.busy = False
                live.last_used = time.monotonic()
            if result.restarted:
                await self._stop(live)
            await self.store.touch_container(container_id, int(time.time()))
        by_path = {f["path"]: f for f in changed}
        images = [by_path[p] for p in result.figures if p in by_path]
        return Outcome(container_id, result, changed, images, notes)

    async def _live(self, row: dict[str, Any], owner: str) -> Live:
        cid = row["id"]
        live = self.live.get(cid)
        if live is not None:
            if live.interpreter.alive and await self.store.container_generation(cid) == live.generation:
                return live
            await self._stop(live)  # dead, or another replica ran the container since: start afresh
        await self._make_room()
        generation = await self.store.claim_container(cid, self.replica)
        data = self.options.base / cid / "data"
        await asyncio.to_thread(_remove_data, data)
        limits = replace(self.options.limits, memory=MEMORY_LIMITS.get(row["memory_limit"], MEMORY_LIMITS["1g"]))
        size = limits.disk_bytes if self.options.disk == disk.FILESYSTEM else 0
        try:
            await asyncio.to_thread(_make_data, data, self.owner_ids, size)
        except OSError as exc:
            await asyncio.to_thread(_remove_data, data)
            raise ContainerError(503, f"The code interpreter could not make the container's disk: {exc}",
                                 type="server_error", code="sandbox_unavailable") from None
        interpreter = Interpreter(self.sandbox, Spec(data, limits, os.urandom(12).hex()), self.options.cgroups)
        live = Live(cid, owner, generation, interpreter, data, row["minutes"])
        for stored in await self.store.all_container_files(cid):
            content = await self.store.read_container_file(cid, stored["id"])
            if content is not None:
                await asyncio.to_thread(files.write, str(data), stored["path"], content, self.owner_ids)
                live.stored[stored["path"]] = (stored["id"], stored["etag"])
        live.seen = await asyncio.to_thread(files.scan, str(data))
        try:
            await interpreter.start()
        except BaseException as exc:  # failed, or cancelled (the caller left): nothing is left running
            await asyncio.shield(interpreter.stop())
            await asyncio.to_thread(_remove_data, data)
            if isinstance(exc, SandboxError):
                raise ContainerError(503, f"The code interpreter could not start: {exc}", type="server_error",
                                     code="sandbox_unavailable") from None
            raise
        self.live[cid] = live
        log.info("container %s started (generation %d, %d files)", cid, generation, len(live.stored))
        return live

    async def _pull(self, live: Live) -> None:
        """Files uploaded or deleted through another replica since this worker last looked."""
        stored = {f["path"]: f for f in await self.store.all_container_files(live.id)}
        for path, meta in stored.items():
            if live.stored.get(path) == (meta["id"], meta["etag"]):
                continue
            content = await self.store.read_container_file(live.id, meta["id"])
            if content is None:
                continue
            await asyncio.to_thread(files.write, str(live.data), path, content, self.owner_ids)
            live.stored[path] = (meta["id"], meta["etag"])
            await self._rescan(live, [path])
        for path in [p for p in live.stored if p not in stored]:
            await asyncio.to_thread(files.remove, str(live.data), path)
            live.stored.pop(path, None)
            live.seen.pop(path, None)

    async def _push(self, live: Live) -> tuple[list[dict[str, Any]], list[str]]:
        """Store what the code wrote, changed or removed in /mnt/data."""
        now = await asyncio.to_thread(files.scan, str(live.data))
        changed: list[dict[str, Any]] = []
        notes: list[str] = []
        limit = self.options.stored_file_bytes
        room = self.options.limits.disk_bytes  # what one call may add to the store, at most
        for path, seen in sorted(now.items()):
            if live.seen.get(path) == seen and path in live.stored:
                continue
            if seen.size > room:
                notes.append(f"{path} was not kept as a container file: this call's files are over the "
                             f"{self.options.limits.disk_bytes:,} bytes a container may hold.")
                continue
            if seen.size > limit:
                notes.append(f"{path} ({seen.size:,} bytes) is larger than the {limit:,} bytes a container file may "
                             "have: it stays in this container but is not kept as a container file.")
                continue
            content = await asyncio.to_thread(files.read, str(live.data), path, limit)
            if content is None:
                continue
            room -= len(content)
            known = live.stored.get(path)
            stored = await self.store.put_container_file(
                {"id": known[0] if known else new_id("cfile"), "container_id": live.id, "path": path,
                 "created_at": int(time.time()), "source": "assistant"}, content)
            live.stored[path] = (stored["id"], stored["etag"])
            changed.append(stored)
        for path in [p for p in live.stored if p not in now]:
            await self.store.delete_container_path(live.id, path)
            live.stored.pop(path, None)
        live.seen = now
        return changed, notes

    async def _rescan(self, live: Live, paths: list[str]) -> None:
        """The gateway wrote these paths: they are known as they are now (not the code's files)."""
        now = await asyncio.to_thread(files.scan, str(live.data))
        for path in paths:
            if path in now:
                live.seen[path] = now[path]

    # -- lifetime -------------------------------------------------------------------------------------------

    def _lock(self, container_id: str) -> asyncio.Lock:
        lock = self.locks.get(container_id)
        if lock is None:
            lock = self.locks[container_id] = asyncio.Lock()
        return lock

    async def _make_room(self) -> None:
        if len(self.live) < self.options.max_live:
            return
        idle = sorted((live for live in self.live.values() if not live.busy), key=lambda live: live.last_used)
        if not idle:
            raise ContainerError(503, f"The code interpreter is at capacity ({self.options.max_live} containers "
                                 "running); try again shortly.", type="server_error", code="sandbox_busy")
        await self._stop(idle[0])

    async def _stop(self, live: Live) -> None:
        if self.live.get(live.id) is live:
            del self.live[live.id]
        try:
            await live.interpreter.stop()
        finally:
            await asyncio.to_thread(_remove_data, live.data)

    async def sweep(self, now: float | None = None) -> list[str]:
        """Stop workers idle past their container's minutes; expire idle containers in the store."""
        wall = int(time.time() if now is None else now)
        mono = time.monotonic() + (wall - time.time() if now is not None else 0)
        for live in list(self.live.values()):
            if not live.busy and mono - live.last_used >= live.minutes * 60:
                async with self._lock(live.id):
                    if not live.busy and self.live.get(live.id) is live:
                        await self._stop(live)
        expired = await self.store.expire_containers(wall, FORGET)
        for cid in expired:
            gone = self.live.get(cid)
            if gone is not None:
                async with self._lock(cid):
                    await self._stop(gone)
            self.locks.pop(cid, None)
        if expired:
            log.info("%d containers expired", len(expired))
        return expired

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP)
            try:
                await self.sweep()
            except Exception:
                log.exception("the container expiry sweep failed")


def _make_data(data: Path, owner: tuple[int, int] | None, size: int) -> None:
    """A container's /mnt/data on the host: a filesystem of `size` bytes of its own (disk.py), or, with
    `size` 0, a plain directory whose use is polled."""
    data.parent.mkdir(mode=0o711 if owner else 0o700, parents=True, exist_ok=True)
    data.mkdir(mode=0o700)
    if size:
        disk.make(data, size, owner)
    elif owner is not None:
        os.chown(data, *owner)


def _remove_data(data: Path) -> None:
    """A container's /mnt data gone: its filesystem unmounted first, where it has one."""
    disk.unmake(data)
    shutil.rmtree(data.parent, ignore_errors=True)


def public_container(row: dict[str, Any]) -> dict[str, Any]:
    """A container as the Containers API shows it (openai-python's ContainerRetrieveResponse)."""
    return {"id": row["id"], "object": "container", "created_at": row["created_at"], "status": row["status"],
            "name": row["name"], "expires_after": {"anchor": "last_active_at", "minutes": row["minutes"]},
            "last_active_at": row["last_active_at"], "memory_limit": row["memory_limit"],
            "network_policy": {"type": "disabled"}}


def public_file(row: dict[str, Any]) -> dict[str, Any]:
    """A container file as the API shows it (openai-python's containers.FileRetrieveResponse)."""
    return {k: row[k] for k in ("id", "object", "created_at", "bytes", "container_id", "path", "source")}
