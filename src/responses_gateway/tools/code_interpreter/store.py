"""Code interpreter containers and their files, shared by every replica (docs/code-interpreter.md).

A container is one `containers` row: its name, memory limit, idle expiry, status (`running` until it has
been idle for its minutes, then `expired`), and which replica started its interpreter last
(`generation` counts the starts: a replica whose worker is of an older generation than the row's knows
another replica has run the container since, and restarts its own from the files). A container's files are
`container_files` rows with their bytes (`etag` changes with each write, so a replica can tell a file it
holds was replaced elsewhere), so a replica that never saw the container can start it with its
files. The interpreter's variables live in one process only.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from ...store.base import Page, Queries

CONTAINER = "id, name, created_at, last_active_at, minutes, memory_limit, status, generation, worker"
FILE = "id, container_id, path, bytes, created_at, source, etag"


class Containers(Protocol):
    """What the Containers API and the code interpreter need."""

    async def create_container(self, container: dict[str, Any], owner: str) -> None:
        """`container`: id, name, created_at, minutes, memory_limit (status `running`, generation 0)."""
        ...

    async def get_container(self, container_id: str, owner: str) -> dict[str, Any] | None: ...

    async def list_containers(self, owner: str, *, after: str | None, limit: int, order: str,
                              name: str | None) -> Page: ...

    async def delete_container(self, container_id: str, owner: str) -> bool:
        """The container and its files."""
        ...

    async def live_containers(self, owner: str) -> int:
        """How many of the owner's containers are `running` (the per-key cap counts them)."""
        ...

    async def touch_container(self, container_id: str, at: int) -> None:
        """It was used at `at`: its idle expiry starts again."""
        ...

    async def claim_container(self, container_id: str, worker: str) -> int:
        """This replica starts the container's interpreter: the new generation."""
        ...

    async def container_generation(self, container_id: str) -> int | None: ...

    async def expire_containers(self, now: int, forget_after: int) -> list[str]:
        """Containers idle past their minutes become `expired` and lose their files; expired ones older than
        `forget_after` seconds go. Returns the ids that expired now."""
        ...

    async def put_container_file(self, file: dict[str, Any], content: bytes) -> dict[str, Any]:
        """Add a file, or replace the one at the same path (it keeps its id). Returns the stored file."""
        ...

    async def container_files(self, container_id: str, owner: str, *, after: str | None, limit: int,
                              order: str) -> Page | None: ...

    async def all_container_files(self, container_id: str) -> list[dict[str, Any]]: ...

    async def container_file(self, container_id: str, file_id: str, owner: str) -> dict[str, Any] | None: ...

    async def container_file_content(self, container_id: str, file_id: str, owner: str) -> bytes | None: ...

    async def read_container_file(self, container_id: str, file_id: str) -> bytes | None:
        """A file's bytes, for a container whose owner was checked already (restoring it on a replica)."""
        ...

    async def delete_container_file(self, container_id: str, file_id: str, owner: str) -> bool: ...

    async def delete_container_path(self, container_id: str, path: str) -> None: ...


def container_row(row: Any) -> dict[str, Any]:
    return {"id": row[0], "name": row[1], "created_at": int(row[2]), "last_active_at": int(row[3]),
            "minutes": int(row[4]), "memory_limit": row[5], "status": row[6], "generation": int(row[7]),
            "worker": row[8]}


def file_row(row: Any) -> dict[str, Any]:
    return {"id": row[0], "object": "container.file", "container_id": row[1], "path": row[2],
            "bytes": int(row[3]), "created_at": int(row[4]), "source": row[5], "etag": row[6]}


class ContainerQueries(Queries):
    async def create_container(self, container: dict[str, Any], owner: str) -> None:
        await self.engine.write([(
            f"INSERT INTO containers ({CONTAINER}, owner) VALUES (?, ?, ?, ?, ?, ?, 'running', 0, NULL, ?)",
            [(container["id"], container["name"], container["created_at"], container["created_at"],
              container["minutes"], container["memory_limit"], owner)])])

    async def get_container(self, container_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(f"SELECT {CONTAINER} FROM containers WHERE id = ? AND owner = ?",
                                         (container_id, owner))
        return container_row(row) if row else None

    async def list_containers(self, owner: str, *, after: str | None, limit: int, order: str,
                              name: str | None) -> Page:
        clauses, args = ["owner = ?"], [owner]
        if name is not None:
            clauses.append("name = ?")
            args.append(name)
        rows = await self._page("containers", CONTAINER, clauses, args, after, limit, order)
        return Page([container_row(r) for r in rows[:limit]], len(rows) > limit)

    async def _page(self, table: str, columns: str, clauses: list[str], args: list[Any], after: str | None,
                    limit: int, order: str) -> list[Any]:
        """Rows of `table` in `created_at, id` order after the row `after` (one more than `limit`: has_more)."""
        if after is not None:
            row = await self.engine.fetchone(f"SELECT created_at FROM {table} WHERE {' AND '.join(clauses)} AND id = ?",
                                             (*args, after))
            if row is None:
                return []
            sign = ">" if order == "asc" else "<"
            clauses = [*clauses, f"(created_at {sign} ? OR (created_at = ? AND id {sign} ?))"]
            args = [*args, row[0], row[0], after]
        way = "ASC" if order == "asc" else "DESC"
        return await self.engine.fetchall(
            f"SELECT {columns} FROM {table} WHERE {' AND '.join(clauses)} ORDER BY created_at {way}, id {way} "
            "LIMIT ?", (*args, limit + 1))

    async def delete_container(self, container_id: str, owner: str) -> bool:
        return await self.engine.write([
            ("DELETE FROM container_files WHERE container_id IN (SELECT id FROM containers WHERE id = ? AND owner = ?)",
             [(container_id, owner)]),
            ("DELETE FROM containers WHERE id = ? AND owner = ?", [(container_id, owner)]),
        ], count_last=True) > 0

    async def live_containers(self, owner: str) -> int:
        row = await self.engine.fetchone("SELECT count(*) FROM containers WHERE owner = ? AND status = 'running'",
                                         (owner,))
        return int(row[0]) if row else 0

    async def touch_container(self, container_id: str, at: int) -> None:
        await self.engine.write([("UPDATE containers SET last_active_at = ? WHERE id = ? AND last_active_at < ?",
                                  [(at, container_id, at)])])

    async def claim_container(self, container_id: str, worker: str) -> int:
        await self.engine.write([("UPDATE containers SET generation = generation + 1, worker = ? WHERE id = ?",
                                  [(worker, container_id)])])
        generation = await self.container_generation(container_id)
        return generation or 0

    async def container_generation(self, container_id: str) -> int | None:
        row = await self.engine.fetchone("SELECT generation FROM containers WHERE id = ?", (container_id,))
        return int(row[0]) if row else None

    async def expire_containers(self, now: int, forget_after: int) -> list[str]:
        rows = await self.engine.fetchall(
            "SELECT id FROM containers WHERE status = 'running' AND last_active_at + minutes * 60 <= ?", (now,))
        expired = [r[0] for r in rows]
        statements: list[tuple[str, list[Any]]] = []
        if expired:
            statements += [
                ("UPDATE containers SET status = 'expired' WHERE id = ? AND status = 'running' "
                 "AND last_active_at + minutes * 60 <= ?", [(cid, now) for cid in expired]),
                ("DELETE FROM container_files WHERE container_id = ? AND container_id IN "
                 "(SELECT id FROM containers WHERE id = ? AND status = 'expired')", [(cid, cid) for cid in expired]),
            ]
        statements.append(("DELETE FROM containers WHERE status = 'expired' AND last_active_at + minutes * 60 <= ?",
                           [(now - forget_after,)]))
        await self.engine.write(statements)
        return expired

    async def put_container_file(self, file: dict[str, Any], content: bytes) -> dict[str, Any]:
        await self.engine.write([(
            "INSERT INTO container_files (id, container_id, path, bytes, created_at, source, etag, content) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (container_id, path) DO UPDATE SET bytes = excluded.bytes, "
            "source = excluded.source, etag = excluded.etag, content = excluded.content",
            [(file["id"], file["container_id"], file["path"], len(content), file["created_at"], file["source"],
              os.urandom(8).hex(), content)])])
        row = await self.engine.fetchone(f"SELECT {FILE} FROM container_files WHERE container_id = ? AND path = ?",
                                         (file["container_id"], file["path"]))
        if row is None:  # written just above
            raise RuntimeError(f"container file {file['path']!r} missing after it was stored")
        return file_row(row)

    async def container_files(self, container_id: str, owner: str, *, after: str | None, limit: int,
                              order: str) -> Page | None:
        if await self.get_container(container_id, owner) is None:
            return None
        rows = await self._page("container_files", FILE, ["container_id = ?"], [container_id], after, limit, order)
        return Page([file_row(r) for r in rows[:limit]], len(rows) > limit)

    async def all_container_files(self, container_id: str) -> list[dict[str, Any]]:
        rows = await self.engine.fetchall(
            f"SELECT {FILE} FROM container_files WHERE container_id = ? ORDER BY created_at, id", (container_id,))
        return [file_row(r) for r in rows]

    async def container_file(self, container_id: str, file_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            f"SELECT {', '.join('f.' + c for c in FILE.split(', '))} FROM container_files f "
            "JOIN containers c ON c.id = f.container_id WHERE f.container_id = ? AND f.id = ? AND c.owner = ?",
            (container_id, file_id, owner))
        return file_row(row) if row else None

    async def container_file_content(self, container_id: str, file_id: str, owner: str) -> bytes | None:
        row = await self.engine.fetchone(
            "SELECT f.content FROM container_files f JOIN containers c ON c.id = f.container_id "
            "WHERE f.container_id = ? AND f.id = ? AND c.owner = ?", (container_id, file_id, owner))
        return bytes(row[0]) if row else None

    async def read_container_file(self, container_id: str, file_id: str) -> bytes | None:
        row = await self.engine.fetchone("SELECT content FROM container_files WHERE container_id = ? AND id = ?",
                                         (container_id, file_id))
        return bytes(row[0]) if row else None

    async def delete_container_file(self, container_id: str, file_id: str, owner: str) -> bool:
        return await self.engine.write([(
            "DELETE FROM container_files WHERE container_id = ? AND id = ? AND container_id IN "
            "(SELECT id FROM containers WHERE id = ? AND owner = ?)",
            [(container_id, file_id, container_id, owner)])], count_last=True) > 0

    async def delete_container_path(self, container_id: str, path: str) -> None:
        await self.engine.write([("DELETE FROM container_files WHERE container_id = ? AND path = ?",
                                  [(container_id, path)])])

