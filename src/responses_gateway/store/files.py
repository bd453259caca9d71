"""Uploaded files (the Files API): a row per file, its bytes kept apart (`Blobs`).

The row is the `file` object as JSON plus the columns its queries need (owner, purpose, expiry, size). The
bytes live where every process that may serve or ingest the file can read them: in a directory beside the
SQLite file on the embedded default (`DirectoryBlobs`), or in PostgreSQL itself, in 1 MiB parts
(`TableBlobs`), so that every replica on one database serves every file. Another store (S3-compatible, ...)
is another `Blobs`.

A file becomes visible only once its bytes are whole: the bytes go first, the row last. An upload that dies
between the two leaves bytes without a row, which `purge_files` removes later. An expired file is invisible at
once (every query checks `expires_at`) and removed by the sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from .base import Engine, Page, Queries, Statements
from .sqlite import SQLite

PART_BYTES = 1024 * 1024  # one row of rg_file_parts; also the size of each read of a file's bytes
ORPHAN_SECONDS = 24 * 3600  # bytes without a file row this old are an upload that died: removed

LIVE = "(expires_at IS NULL OR expires_at > ?)"


class Blobs(Protocol):
    """Where the files' bytes are: written once, read whole or in parts, deleted."""

    async def put(self, file_id: str, source: IO[bytes]) -> int:
        """Copy `source` (read from its start, in a worker thread) as the bytes of `file_id`; returns the size."""
        ...

    def read(self, file_id: str) -> AsyncIterator[bytes]:
        """The bytes in parts of at most PART_BYTES."""
        ...

    async def delete(self, file_ids: list[str]) -> None: ...

    async def orphans(self, known: set[str], older_than: float) -> list[str]:
        """Ids with bytes but no file row (`known` are the rows there are), written before `older_than`."""
        ...


class DirectoryBlobs:
    """Files in a directory (beside the SQLite file): `<dir>/<last two hex digits>/<file id>`."""

    def __init__(self, root: Path):
        self.root = root

    def _path(self, file_id: str) -> Path:
        return self.root / file_id[-2:] / file_id

    def _put(self, file_id: str, source: IO[bytes]) -> int:
        path = self._path(file_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        size = 0
        source.seek(0)
        with open(partial, "wb") as out:
            while block := source.read(PART_BYTES):
                out.write(block)
                size += len(block)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
        return size

    async def put(self, file_id: str, source: IO[bytes]) -> int:
        return await asyncio.to_thread(self._put, file_id, source)

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        handle = await asyncio.to_thread(open, self._path(file_id), "rb")
        try:
            while block := await asyncio.to_thread(handle.read, PART_BYTES):
                yield block
        finally:
            handle.close()

    def _delete(self, file_ids: list[str]) -> None:
        for file_id in file_ids:
            with contextlib.suppress(FileNotFoundError):
                self._path(file_id).unlink()

    async def delete(self, file_ids: list[str]) -> None:
        await asyncio.to_thread(self._delete, file_ids)

    def _orphans(self, known: set[str], older_than: float) -> list[str]:
        if not self.root.is_dir():
            return []
        found = []
        for shard in self.root.iterdir():
            for path in shard.iterdir() if shard.is_dir() else ():
                name = path.name.removesuffix(".partial")
                if name not in known and path.stat().st_mtime < older_than:
                    if path.name.endswith(".partial"):
                        path.unlink(missing_ok=True)
                    else:
                        found.append(name)
        return found

    async def orphans(self, known: set[str], older_than: float) -> list[str]:
        return await asyncio.to_thread(self._orphans, known, older_than)


class TableBlobs:
    """Files in the database, in parts of PART_BYTES (PostgreSQL: every replica reads every file)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    async def put(self, file_id: str, source: IO[bytes]) -> int:
        await asyncio.to_thread(source.seek, 0)
        size, part, now = 0, 0, int(time.time())
        while block := await asyncio.to_thread(source.read, PART_BYTES):
            await self.engine.write([("INSERT INTO rg_file_parts (file_id, part, created_at, data) "
                                      "VALUES (?, ?, ?, ?)", [(file_id, part, now, block)])])
            size += len(block)
            part += 1
        return size

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        part = 0
        while True:
            row = await self.engine.fetchone("SELECT data FROM rg_file_parts WHERE file_id = ? AND part = ?",
                                             (file_id, part))
            if row is None:
                return
            yield bytes(row[0])
            part += 1

    async def delete(self, file_ids: list[str]) -> None:
        if file_ids:
            await self.engine.write([("DELETE FROM rg_file_parts WHERE file_id = ?", [(f,) for f in file_ids])])

    async def orphans(self, known: set[str], older_than: float) -> list[str]:
        rows = await self.engine.fetchall(
            "SELECT DISTINCT file_id FROM rg_file_parts p WHERE created_at < ? "
            "AND NOT EXISTS (SELECT 1 FROM rg_files f WHERE f.id = p.file_id)", (int(older_than),))
        return [row[0] for row in rows]


def blobs_for(engine: Engine) -> Blobs:
    """Beside the SQLite file (`responses.db` → `responses.db.files/`), or in the database."""
    if isinstance(engine, SQLite):
        return DirectoryBlobs(engine.path.with_name(engine.path.name + ".files"))
    return TableBlobs(engine)


class Files(Protocol):
    """What the Files API (and ingestion, which reads the bytes) needs."""

    blobs: Blobs

    async def add_file(self, file: dict[str, Any], owner: str, quota: int) -> bool:
        """Record an uploaded file (its bytes already in `blobs`). False, and nothing recorded, when the
        owner's files would then take more than `quota` bytes (0: no quota)."""
        ...

    async def get_file(self, file_id: str, owner: str) -> dict[str, Any] | None: ...

    async def get_files(self, file_ids: list[str], owner: str) -> dict[str, dict[str, Any]]: ...

    async def list_files(self, owner: str, *, purpose: str | None, after: str | None, limit: int,
                         order: str) -> Page: ...

    async def delete_file(self, file_id: str, owner: str) -> bool:
        """The row and the bytes go; False if there was no such file."""
        ...

    async def file_usage(self, owner: str) -> int:
        """Bytes of the owner's live files."""
        ...

    async def purge_files(self) -> int:
        """Expired files go, with their bytes, and bytes of uploads that died; returns how many files went."""
        ...


class FileQueries(Queries):
    blobs: Blobs

    async def add_file(self, file: dict[str, Any], owner: str, quota: int) -> bool:
        now = int(time.time())
        size = file["bytes"]
        values = (file["id"], owner, file["created_at"], file.get("expires_at"), size, file["purpose"],
                  orjson.dumps(file).decode())
        if quota <= 0:
            await self.engine.write([("INSERT INTO rg_files (id, owner, created_at, expires_at, bytes, purpose, body)"
                                      " VALUES (?, ?, ?, ?, ?, ?, ?)", [values])])
            return True
        # The quota is checked in the insert itself: on SQLite (one writer) no other insert comes between
        # reading the usage and adding to it. On PostgreSQL two transactions would each miss the other's row
        # (READ COMMITTED), so the owner's inserts take turns on a transaction-scoped advisory lock first:
        # the insert's own statement then sees every row committed before it.
        turns: Statements = [] if isinstance(self.engine, SQLite) else [
            ("SELECT pg_advisory_xact_lock(727276, hashtext(?))", [(owner,)])]
        return await self.engine.write(turns + [(
            "INSERT INTO rg_files (id, owner, created_at, expires_at, bytes, purpose, body) "
            "SELECT ?, ?, CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), ?, ? WHERE (SELECT COALESCE(SUM(bytes), 0) FROM rg_files "
            f"WHERE owner = ? AND {LIVE}) + CAST(? AS BIGINT) <= CAST(? AS BIGINT)",
            [(*values, owner, now, size, quota)])], count_last=True) > 0

    async def get_file(self, file_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(f"SELECT body FROM rg_files WHERE id = ? AND owner = ? AND {LIVE}",
                                         (file_id, owner, int(time.time())))
        return orjson.loads(row[0]) if row else None

    async def get_files(self, file_ids: list[str], owner: str) -> dict[str, dict[str, Any]]:
        if not file_ids:
            return {}
        marks = ", ".join("?" for _ in file_ids)
        rows = await self.engine.fetchall(
            f"SELECT id, body FROM rg_files WHERE id IN ({marks}) AND owner = ? AND {LIVE}",
            (*file_ids, owner, int(time.time())))
        return {row[0]: orjson.loads(row[1]) for row in rows}

    async def list_files(self, owner: str, *, purpose: str | None, after: str | None, limit: int,
                         order: str) -> Page:
        now = int(time.time())
        clauses, args = ["owner = ?", LIVE], [owner, now]
        if purpose is not None:
            clauses.append("purpose = ?")
            args.append(purpose)
        if after is not None:
            row = await self.engine.fetchone("SELECT created_at, id FROM rg_files WHERE id = ? AND owner = ?",
                                             (after, owner))
            if row is None:
                return Page([], False)
            op = ">" if order == "asc" else "<"
            clauses.append(f"(created_at {op} ? OR (created_at = ? AND id {op} ?))")
            args += [row[0], row[0], row[1]]
        direction = "ASC" if order == "asc" else "DESC"
        rows = await self.engine.fetchall(
            f"SELECT body FROM rg_files WHERE {' AND '.join(clauses)} "
            f"ORDER BY created_at {direction}, id {direction} LIMIT ?", (*args, limit + 1))
        return Page([orjson.loads(r[0]) for r in rows[:limit]], len(rows) > limit)

    async def delete_file(self, file_id: str, owner: str) -> bool:
        gone = await self.engine.write([("DELETE FROM rg_files WHERE id = ? AND owner = ? AND " + LIVE,
                                         [(file_id, owner, int(time.time()))])], count_last=True) > 0
        if gone:
            await self.blobs.delete([file_id])
        return gone

    async def file_usage(self, owner: str) -> int:
        row = await self.engine.fetchone(f"SELECT COALESCE(SUM(bytes), 0) FROM rg_files WHERE owner = ? AND {LIVE}",
                                         (owner, int(time.time())))
        return int(row[0]) if row else 0

    async def purge_files(self) -> int:
        now = int(time.time())
        rows = await self.engine.fetchall("SELECT id FROM rg_files WHERE expires_at <= ?", (now,))
        expired = [row[0] for row in rows]
        if expired:
            await self.engine.write([("DELETE FROM rg_files WHERE id = ?", [(f,) for f in expired])])
            await self.blobs.delete(expired)
        known = {row[0] for row in await self.engine.fetchall("SELECT id FROM rg_files", ())}
        orphans = await self.blobs.orphans(known, time.time() - ORPHAN_SECONDS)
        if orphans:
            await self.blobs.delete(orphans)
        return len(expired)
