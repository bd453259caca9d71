"""The code interpreter of one gateway process: made at start-up by the kit's `serve`, given to runners and
the Containers API (containers_api.py) as the tool's service.

At startup the sandbox is tried for real (a worker started and one cell run, once per process): where it
cannot run — bubblewrap missing, user namespaces not allowed — the gateway says so in its log, and a request
declaring `code_interpreter` gets a 400 saying why (`--code-interpreter bubblewrap` refuses to start
instead). `--code-interpreter off` and `--db none` (containers live in the database) leave the tool to
`--hosted-tools`, like any hosted tool this gateway cannot run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import APIError
from ...store import Files
from ..frame import Start, Unavailable
from . import cgroups, disk
from .registry import Options, Registry
from .sandbox import Limits, Sandbox
from .settings import CodeInterpreterSettings
from .store import ContainerQueries

log = logging.getLogger("responses_gateway.code_interpreter")

_probed: dict[tuple[Any, ...], str | None] = {}  # one real probe per process and sandbox configuration


class CodeInterpreter:
    """What runners and the Containers API use: the containers (`registry`) and the URLs of their files."""

    def __init__(self, registry: Registry, public_url: str | None = None, files: Files | None = None):
        """`files`: the store's Files API role (its `get_file` and `blobs`), for `file_ids`."""
        self.registry = registry
        self.public_url = (public_url or "").rstrip("/")
        self.files = files

    def describe(self) -> str:
        options = self.registry.options
        if options.cgroups is not None:
            memory = options.cgroups.kind
        else:
            memory = "a watcher of its processes' resident memory (no memory cgroup may be made here)"
        held = ("a filesystem of its own per container" if options.disk == disk.FILESYSTEM
                else "polled (the gateway cannot mount here)")
        return (f"bubblewrap sandbox, {options.max_live} live containers, {options.limits.timeout:g} s a call, "
                f"memory up to {options.max_memory} held by {memory}; /mnt/data: {held}; no process outlives "
                "its call")

    def file_url(self, container_id: str, file_id: str) -> str:
        """Where a client fetches a container file (an `image` output's URL)."""
        return f"{self.public_url}/v1/containers/{container_id}/files/{file_id}/content"

    async def check_files(self, owner: str, file_ids: Sequence[str], param: str = "file_ids") -> list[dict[str, Any]]:
        """The Files API's files of these ids (the caller's, not expired), or a 404 naming the first missing."""
        if not file_ids:
            return []
        if self.files is None:
            raise APIError(400, "file_ids need the Files API, which this gateway does not have.", param=param,
                           code="unsupported_parameter")
        found = await self.files.get_files(list(file_ids), owner)
        limit = self.registry.options.stored_file_bytes
        for file_id in file_ids:
            meta = found.get(file_id)
            if meta is None:
                raise APIError(404, f"No such File object: {file_id}", param=param, code=None)
            if int(meta.get("bytes") or 0) > limit:
                raise APIError(400, f"File {file_id} is larger than the {limit:,} bytes a container file may have.",
                               param=param, code="file_too_large")
        return [found[file_id] for file_id in file_ids]

    async def uploads(self, owner: str, file_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        """The Files API's files of these ids, as (filename, bytes), to copy into a container."""
        out: list[tuple[str, bytes]] = []
        files = self.files
        for meta in await self.check_files(owner, file_ids):
            assert files is not None  # check_files refuses file ids without it
            parts = [part async for part in files.blobs.read(meta["id"])]
            out.append((str(meta.get("filename") or meta["id"]), b"".join(parts)))
        return out

    async def aclose(self) -> None:
        await self.registry.close()
        shutil.rmtree(self.registry.options.base, ignore_errors=True)


async def serve(start: Start[CodeInterpreterSettings]) -> CodeInterpreter | Unavailable:
    """The process's code interpreter; or why not: off, no store (containers live in the database), or the
    sandbox cannot run on this machine — then requests declaring the tool are refused with a 400 saying why
    (`--code-interpreter bubblewrap` refuses to start instead)."""
    settings, store = start.group, start.store
    if settings.code_interpreter == "off":
        return Unavailable("off (--code-interpreter off)")
    if store is None:
        return Unavailable("needs a store: its containers live in the database (it is off with --db none)")
    root = Path(settings.code_interpreter_dir or Path(tempfile.gettempdir()) / f"responses-gateway-{os.geteuid()}")
    base = root / f"p{os.getpid()}-{os.urandom(3).hex()}"
    root.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(forget_dead, root)
    sandbox = make_sandbox(settings, base)
    key = (settings.code_interpreter_uid, settings.code_interpreter_dir)
    if key not in _probed:
        base.mkdir(parents=True, exist_ok=True)
        _probed[key] = await asyncio.to_thread(sandbox.probe)
    problem = _probed[key]
    if problem is not None:
        shutil.rmtree(base, ignore_errors=True)
        if settings.code_interpreter == "bubblewrap":
            raise RuntimeError(f"code_interpreter: the sandbox cannot run on this machine: {problem}")
        # not an error: `auto` asks for the tool only where it can run (the start-up block says why not, and
        # that --code-interpreter off leaves such requests to --hosted-tools instead)
        return Unavailable(problem, refuse=True)
    found = await asyncio.to_thread(cgroups.Cgroups.find)
    disk_mode = await asyncio.to_thread(disk.mode)
    registry = Registry(sandbox, store.role(ContainerQueries), Options(
        base=base,
        limits=Limits(timeout=settings.code_interpreter_timeout, cpu=settings.code_interpreter_timeout,
                      processes=settings.code_interpreter_processes,
                      output_bytes=settings.code_interpreter_output_bytes,
                      disk_bytes=settings.code_interpreter_disk_bytes,
                      file_bytes=settings.code_interpreter_disk_bytes),
        max_memory=settings.code_interpreter_max_memory,
        idle_minutes=settings.code_interpreter_idle_minutes,
        key_containers=settings.code_interpreter_key_containers,
        max_live=settings.code_interpreter_max_live,
        stored_file_bytes=settings.code_interpreter_file_bytes,
        cgroups=found if found.parent is not None else None,
        disk=disk_mode,
    ))
    await registry.open()
    return CodeInterpreter(registry, start.settings.public_url, store)


def forget_dead(root: Path) -> None:
    """The directories of gateway processes that died without cleaning up (their sandboxes died with them)."""
    for directory in root.glob("p*-*"):
        try:
            pid = int(directory.name[1:].split("-", 1)[0])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            disk.unmake_all(directory)  # its containers' filesystems, before their directories go
            shutil.rmtree(directory, ignore_errors=True)
        except PermissionError:
            continue


def make_sandbox(settings: CodeInterpreterSettings, base: Path) -> Sandbox:
    from .bubblewrap import Bubblewrap

    return Bubblewrap(base, host_uid=settings.code_interpreter_uid)
