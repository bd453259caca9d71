"""The code interpreter of one gateway process: made at startup (app.py's lifespan), reached by runners and
the Containers API through the app's services (`services.code_interpreter`).

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
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...config import Settings
from ...errors import APIError
from ...store.containers import Containers
from ..kits import Toolbox
from .kit import KIT, NAME
from .registry import Options, Registry
from .sandbox import Limits, Sandbox

log = logging.getLogger("responses_gateway.code_interpreter")

_probed: dict[tuple[Any, ...], str | None] = {}  # one real probe per process and sandbox configuration


class CodeInterpreter:
    """What runners and the Containers API use: the containers (`registry`) and the URLs of their files."""

    def __init__(self, registry: Registry, public_url: str | None = None, files: Any = None):
        """`files`: the store's Files API role (its `get_file` and `blobs`), for `file_ids`."""
        self.registry = registry
        self.public_url = (public_url or "").rstrip("/")
        self.files = files

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
        for meta in await self.check_files(owner, file_ids):
            parts = [part async for part in self.files.blobs.read(meta["id"])]
            out.append((str(meta.get("filename") or meta["id"]), b"".join(parts)))
        return out

    async def close(self) -> None:
        await self.registry.close()
        shutil.rmtree(self.registry.options.base, ignore_errors=True)


async def start(settings: Settings, store: Containers | None) -> tuple[CodeInterpreter | None, str | None]:
    """The process's code interpreter, or None; and why the sandbox cannot run here, if it cannot."""
    if settings.code_interpreter == "off" or store is None:
        return None, None
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
        log.error("code_interpreter: the sandbox cannot run on this machine: %s. Requests declaring the "
                  "code_interpreter tool are refused with a 400 saying so (--code-interpreter off leaves them "
                  "to --hosted-tools instead).", problem)
        return None, problem
    registry = Registry(sandbox, store, Options(
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
    ))
    await registry.open()
    return CodeInterpreter(registry, settings.public_url, store if hasattr(store, "blobs") else None), None


def forget_dead(root: Path) -> None:
    """The directories of gateway processes that died without cleaning up (their sandboxes died with them)."""
    for directory in root.glob("p*-*"):
        try:
            pid = int(directory.name[1:].split("-", 1)[0])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except PermissionError:
            continue


def make_sandbox(settings: Settings, base: Path) -> Sandbox:
    from .bubblewrap import Bubblewrap

    return Bubblewrap(base, host_uid=settings.code_interpreter_uid)


def refusing(toolbox: Toolbox, why: str) -> Toolbox:
    """The toolbox with code_interpreter declared as usable, but refused at parse time with a 400 saying why
    (the sandbox cannot run on this machine: the client must learn that, not have the tool dropped)."""

    def parse(spec: dict[str, Any], where: str) -> Any:
        raise APIError(400, f"The hosted tool '{NAME}' cannot run on this gateway: {why}", param=f"{where}.type",
                       code="unsupported_parameter")

    kit = replace(KIT, parse=parse)
    return Toolbox({**toolbox.available, **{kind: kit for kind in KIT.types}},
                   {kind: why for kind, why in toolbox.missing.items() if kind not in KIT.types})
