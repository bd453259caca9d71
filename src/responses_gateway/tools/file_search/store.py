"""Vector stores: the stores, their files (each also an ingestion job), file batches, and the chunks.

A vector store file's row is its ingestion job: `in_progress` until a worker (tools/file_search/ingest.py)
finishes it as `completed` (once its chunks are all written, in bounded batches: `finish_job`) or `failed`
(`last_error`), or a cancel makes it `cancelled`. A worker claims a row by writing its name and a lease with a conditional update,
so two workers never hold one file; a worker that dies leaves a lease that runs out, and another (after a
restart, or on another replica) takes the file up again. A worker writes its result only while it still
holds the row.

Chunks keep their offsets in the file's text and their embedding (float32 bytes, or NULL when the store has
no embedding model). Keyword search is the engine's own: an FTS5 table on SQLite (BM25), a GIN index over
`to_tsvector('english', text)` on PostgreSQL (`ts_rank`); both are made by SEARCH_INDEX after the
migrations. `version` counts the changes of a store's chunks: what caches its vectors checks it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ...store.base import Engine, Page, Queries, Statements
from ...store.retention import resize
from ...store.sqlite import SQLite

LIVE = "(expires_at IS NULL OR expires_at > ?)"
STATUSES = ("in_progress", "completed", "failed", "cancelled")
TOUCH_EVERY = 60  # seconds: how stale last_active_at may get (expiry is counted in days)
CHUNK_BATCH = 100  # chunks in a file's first write; later ones sized to the engine's batch_seconds (resize)
DROP_BATCH = 1000  # positions of a file's chunks deleted per transaction
# no row keeps the file's chunks: it is not being ingested nor completed (arguments: vector store, file)
UNUSED = ("NOT EXISTS (SELECT 1 FROM rg_vector_store_files WHERE vector_store_id = ? AND file_id = ? "
          "AND status IN ('in_progress', 'completed'))")
# the file's row is this worker's, being written (arguments: vector store, file, worker)
WRITING = ("EXISTS (SELECT 1 FROM rg_vector_store_files WHERE vector_store_id = ? AND file_id = ? AND worker = ? "
           "AND status = 'in_progress')")

# The keyword index, made after the migrations (idempotent): each engine's own.
SEARCH_INDEX = {
    "sqlite": ["CREATE VIRTUAL TABLE IF NOT EXISTS rg_chunks_fts USING fts5(text, vector_store_id UNINDEXED, "
               "file_id UNINDEXED, position UNINDEXED, tokenize = 'porter unicode61')"],
    "postgresql": ["SELECT pg_advisory_xact_lock(727275)",  # one process makes it
                   # kept with the row, so ranking reads it instead of parsing every matching chunk again
                   "ALTER TABLE rg_chunks ADD COLUMN IF NOT EXISTS tsv tsvector "
                   "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
                   "CREATE INDEX IF NOT EXISTS rg_chunks_tsv ON rg_chunks USING GIN (tsv)"],
}


@dataclass(frozen=True)
class StoreInfo:
    """What a search needs of a vector store."""

    id: str
    embedding_model: str | None
    dimension: int | None
    version: int
    expired: bool


@dataclass(frozen=True)
class Job:
    """A vector store file claimed for ingestion."""

    vector_store_id: str
    file_id: str
    owner: str
    chunking: dict[str, Any]
    attempts: int


@dataclass(frozen=True)
class ChunkRow:
    position: int
    start: int
    end: int
    tokens: int
    text: str
    embedding: bytes | None


@dataclass(frozen=True)
class Hit:
    vector_store_id: str
    file_id: str
    position: int


class VectorStores(Protocol):
    async def ensure_search_index(self) -> None: ...

    async def create_vector_store(self, vector_store: dict[str, Any], owner: str, embedding_model: str | None) -> None:
        ...

    async def get_vector_store(self, vector_store_id: str, owner: str) -> dict[str, Any] | None: ...

    async def list_vector_stores(self, owner: str, *, after: str | None, before: str | None, limit: int,
                                 order: str) -> Page: ...

    async def update_vector_store(self, vector_store_id: str, owner: str, body: dict[str, Any],
                                  expires_at: int | None) -> None: ...

    async def delete_vector_store(self, vector_store_id: str, owner: str) -> bool: ...

    async def touch_vector_stores(self, ids: list[str]) -> None:
        """A search used them: `last_active_at` (and an expiry anchored on it) moves."""
        ...

    async def store_infos(self, ids: list[str], owner: str) -> dict[str, StoreInfo]: ...

    async def add_vector_store_files(self, vector_store_id: str, owner: str,
                                     files: list[tuple[str, dict[str, Any] | None, dict[str, Any]]],
                                     batch_id: str | None) -> None:
        """(file id, attributes, chunking) each, `in_progress`; a file already there starts over."""
        ...

    async def get_vector_store_file(self, vector_store_id: str, file_id: str, owner: str) -> dict[str, Any] | None:
        ...

    async def list_vector_store_files(self, vector_store_id: str, owner: str, *, status: str | None,
                                      batch_id: str | None, after: str | None, before: str | None, limit: int,
                                      order: str) -> Page: ...

    async def update_file_attributes(self, vector_store_id: str, file_id: str, owner: str,
                                     attributes: dict[str, Any] | None) -> bool: ...

    async def delete_vector_store_file(self, vector_store_id: str, file_id: str, owner: str) -> bool: ...

    async def detach_file(self, file_id: str, owner: str) -> None:
        """A deleted file leaves every vector store."""
        ...

    async def file_chunks(self, vector_store_id: str, file_id: str) -> list[ChunkRow]: ...

    async def create_batch(self, batch_id: str, vector_store_id: str, owner: str, created_at: int) -> None: ...

    async def get_batch(self, batch_id: str, vector_store_id: str, owner: str) -> dict[str, Any] | None: ...

    async def cancel_batch(self, batch_id: str, vector_store_id: str, owner: str) -> bool: ...

    async def claim_job(self, worker: str, lease: float) -> Job | None: ...

    async def renew_job(self, job: Job, worker: str, lease: float) -> bool: ...

    async def finish_job(self, job: Job, worker: str, chunks: list[ChunkRow], usage_bytes: int,
                         dimension: int | None) -> bool: ...

    async def fail_job(self, job: Job, worker: str, code: str, message: str) -> bool: ...

    async def drop_abandoned(self, job: Job) -> None:
        """The chunks of a file that is no longer being ingested nor completed (a failure mid-way)."""
        ...

    async def release_jobs(self, worker: str) -> None:
        """Shutting down: this worker's files are left for the next one, at once."""
        ...

    async def keyword_search(self, query: str, stores: Sequence[str], files: Sequence[str] | None,
                             limit: int, alone: bool = False) -> list[Hit]:
        """`alone`: no vector ranking beside it (it must find something even for common words)."""
        ...

    async def store_vectors(self, vector_store_id: str) -> list[tuple[str, int, bytes]]: ...

    async def chunk_texts(self, hits: Sequence[Hit]) -> dict[Hit, str]: ...

    async def searchable_files(self, stores: Sequence[str]) -> list[tuple[str, str, str, dict[str, Any] | None]]:
        """(store, file id, filename, attributes) of the completed files."""
        ...

    async def purge_vector_stores(self) -> int: ...


def _file_object(row: Sequence[Any]) -> dict[str, Any]:
    vs_id, file_id, created_at, status, attributes, chunking, last_error, usage = row
    return {"id": file_id, "object": "vector_store.file", "created_at": created_at, "vector_store_id": vs_id,
            "status": status, "usage_bytes": usage,
            "last_error": orjson.loads(last_error) if last_error else None,
            "attributes": orjson.loads(attributes) if attributes else None,
            "chunking_strategy": orjson.loads(chunking)}


FILE_COLUMNS = "vector_store_id, file_id, created_at, status, attributes, chunking, last_error, usage_bytes"
WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 64
# English stop words (PostgreSQL's `english` configuration drops these too): a query's "the" or "on" would
# otherwise make every chunk a keyword match and push the fused ranking toward noise.
STOP_WORDS_TEXT = """
a about above after again against all am an and any are as at be because been before being below between both
but by can did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when
where which while who whom why will with you your yours yourself yourselves
"""
STOP_WORDS = frozenset(STOP_WORDS_TEXT.split())


COMMON = 1000  # a word in more chunks than this is left out of keyword queries
ALL_COMMON = 250  # chunks ranked for a query of common words only, when keyword search ranks alone


def _fts_query(terms: list[str], joiner: str) -> str:
    """An FTS5 query of quoted words (nothing the user typed is read as FTS5 syntax)."""
    return f" {joiner.upper()} ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _ts_query(terms: list[str], joiner: str) -> str:
    return (" | " if joiner == "or" else " & ").join(terms)  # \w+ words: nothing to escape


def query_terms(query: str) -> list[str]:
    """The words of a query, lower-cased, once each, stop words left out (operators and punctuation never
    reach the index); a query of stop words only keeps them."""
    seen: dict[str, None] = {}
    for word in WORD.findall(query.lower()):
        seen.setdefault(word, None)
    words = [w for w in seen if w not in STOP_WORDS] or list(seen)
    return words[:MAX_TERMS]


class VectorStoreQueries(Queries):
    @property
    def _sqlite(self) -> bool:
        return isinstance(self.engine, SQLite)

    async def ensure_search_index(self) -> None:
        statements = SEARCH_INDEX["sqlite" if self._sqlite else "postgresql"]
        await self.engine.write([(sql, [()]) for sql in statements])

    # -- vector stores ------------------------------------------------------------------------------------

    async def create_vector_store(self, vector_store: dict[str, Any], owner: str, embedding_model: str | None) -> None:
        await self.engine.write([(
            "INSERT INTO rg_vector_stores (id, owner, created_at, last_active_at, expires_at, embedding_model, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(vector_store["id"], owner, vector_store["created_at"], vector_store["created_at"],
              vector_store.get("expires_at"), embedding_model, orjson.dumps(vector_store).decode())])])

    async def _counts(self, vector_store_id: str, batch_id: str | None = None) -> tuple[dict[str, int], int]:
        where, args = "vector_store_id = ?", [vector_store_id]
        if batch_id is not None:
            where += " AND batch_id = ?"
            args.append(batch_id)
        rows = await self.engine.fetchall(
            f"SELECT status, count(*), COALESCE(SUM(usage_bytes), 0) FROM rg_vector_store_files WHERE {where} "
            "GROUP BY status", tuple(args))
        counts = dict.fromkeys(STATUSES, 0)
        usage = 0
        for status, count, used in rows:
            counts[status] = int(count)
            if status == "completed":
                usage = int(used)
        counts["total"] = sum(counts.values())
        return counts, usage

    async def _vector_store(self, row: Sequence[Any]) -> dict[str, Any]:
        body = orjson.loads(row[0])
        last_active, expires_at = int(row[1]), row[2]
        counts, usage = await self._counts(body["id"])
        if expires_at is not None and expires_at <= time.time():
            status = "expired"
        else:
            status = "in_progress" if counts["in_progress"] else "completed"
        return {**body, "file_counts": counts, "usage_bytes": usage, "status": status, "last_active_at": last_active,
                "expires_at": expires_at}

    async def get_vector_store(self, vector_store_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            "SELECT body, last_active_at, expires_at FROM rg_vector_stores WHERE id = ? AND owner = ?",
            (vector_store_id, owner))
        return await self._vector_store(row) if row else None

    async def list_vector_stores(self, owner: str, *, after: str | None, before: str | None, limit: int,
                                 order: str) -> Page:
        rows = await _paged(self.engine, "rg_vector_stores", "body, last_active_at, expires_at", "created_at",
                            ["owner = ?"], [owner], after, before, limit, order)
        if rows is None:
            return Page([], False)
        return Page([await self._vector_store(r) for r in rows[:limit]], len(rows) > limit)

    async def update_vector_store(self, vector_store_id: str, owner: str, body: dict[str, Any],
                                  expires_at: int | None) -> None:
        await self.engine.write([("UPDATE rg_vector_stores SET body = ?, expires_at = ? WHERE id = ? AND owner = ?",
                                  [(orjson.dumps(body).decode(), expires_at, vector_store_id, owner)])])

    async def delete_vector_store(self, vector_store_id: str, owner: str) -> bool:
        statements: Statements = [
            ("DELETE FROM rg_vector_stores WHERE id = ? AND owner = ?", [(vector_store_id, owner)])]
        gone = await self.engine.write(statements, count_last=True) > 0
        if gone:
            await self.engine.write(self._drop_chunks("vector_store_id = ?", (vector_store_id,)) + [
                ("DELETE FROM rg_vector_store_files WHERE vector_store_id = ?", [(vector_store_id,)]),
                ("DELETE FROM rg_file_batches WHERE vector_store_id = ?", [(vector_store_id,)])])
        return gone

    async def touch_vector_stores(self, ids: list[str]) -> None:
        """At most once a minute per store: a search is no write."""
        now = int(time.time())
        rows = await self.engine.fetchall(
            f"SELECT id, body FROM rg_vector_stores WHERE id IN ({', '.join('?' for _ in ids)}) "
            "AND last_active_at < ?", (*ids, now - TOUCH_EVERY))
        updates = []
        for vs_id, body in rows:
            expires = orjson.loads(body).get("expires_after")
            updates.append((now, now + int(expires["days"]) * 86400 if expires else None, vs_id))
        if updates:
            await self.engine.write([("UPDATE rg_vector_stores SET last_active_at = ?, expires_at = ? WHERE id = ?",
                                      updates)])

    async def store_infos(self, ids: list[str], owner: str) -> dict[str, StoreInfo]:
        if not ids:
            return {}
        rows = await self.engine.fetchall(
            "SELECT id, embedding_model, dimension, version, expires_at FROM rg_vector_stores "
            f"WHERE id IN ({', '.join('?' for _ in ids)}) AND owner = ?", (*ids, owner))
        now = time.time()
        return {r[0]: StoreInfo(r[0], r[1], r[2], int(r[3]), r[4] is not None and r[4] <= now) for r in rows}

    # -- their files --------------------------------------------------------------------------------------

    async def add_vector_store_files(self, vector_store_id: str, owner: str,
                                     files: list[tuple[str, dict[str, Any] | None, dict[str, Any]]],
                                     batch_id: str | None) -> None:
        now = int(time.time())
        seq = time.time_ns() // 1000
        rows = [(vector_store_id, file_id, owner, now, seq + i, batch_id,
                 orjson.dumps(attributes).decode() if attributes is not None else None, orjson.dumps(chunking).decode())
                for i, (file_id, attributes, chunking) in enumerate(files)]
        keys = [(vector_store_id, file_id) for file_id, _, _ in files]
        # a file already there starts over: its chunks are replaced by its next worker (in batches, `finish_job`),
        # and not searched meanwhile (it is not completed)
        await self.engine.write([
            ("DELETE FROM rg_vector_store_files WHERE vector_store_id = ? AND file_id = ?", keys),
            ("INSERT INTO rg_vector_store_files (vector_store_id, file_id, owner, created_at, seq, status, batch_id, "
             "attributes, chunking) VALUES (?, ?, ?, ?, ?, 'in_progress', ?, ?, ?)", rows),
            ("UPDATE rg_vector_stores SET version = version + 1 WHERE id = ?", [(vector_store_id,)]),
        ])

    async def get_vector_store_file(self, vector_store_id: str, file_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            f"SELECT {FILE_COLUMNS} FROM rg_vector_store_files WHERE vector_store_id = ? AND file_id = ? AND owner = ?",
            (vector_store_id, file_id, owner))
        return _file_object(row) if row else None

    async def list_vector_store_files(self, vector_store_id: str, owner: str, *, status: str | None,
                                      batch_id: str | None, after: str | None, before: str | None, limit: int,
                                      order: str) -> Page:
        clauses, args = ["vector_store_id = ?", "owner = ?"], [vector_store_id, owner]
        if status is not None:
            clauses.append("status = ?")
            args.append(status)
        if batch_id is not None:
            clauses.append("batch_id = ?")
            args.append(batch_id)
        rows = await _paged(self.engine, "rg_vector_store_files", FILE_COLUMNS, "seq", clauses, args, after, before,
                            limit, order, id_column="file_id", scope=("vector_store_id", vector_store_id))
        if rows is None:
            return Page([], False)
        return Page([_file_object(r) for r in rows[:limit]], len(rows) > limit)

    async def update_file_attributes(self, vector_store_id: str, file_id: str, owner: str,
                                     attributes: dict[str, Any] | None) -> bool:
        encoded = orjson.dumps(attributes).decode() if attributes is not None else None
        return await self.engine.write([(
            "UPDATE rg_vector_store_files SET attributes = ? WHERE vector_store_id = ? AND file_id = ? AND owner = ?",
            [(encoded, vector_store_id, file_id, owner)])], count_last=True) > 0

    async def delete_vector_store_file(self, vector_store_id: str, file_id: str, owner: str) -> bool:
        gone = await self.engine.write([(
            "DELETE FROM rg_vector_store_files WHERE vector_store_id = ? AND file_id = ? AND owner = ?",
            [(vector_store_id, file_id, owner)])], count_last=True) > 0
        if gone:  # its chunks in batches (a big file's would hold the write lock), unless it was added again
            key = (vector_store_id, file_id)
            await self._drop_file_chunks(key, UNUSED, key)
            await self.engine.write([("UPDATE rg_vector_stores SET version = version + 1 WHERE id = ?",
                                      [(vector_store_id,)])])
        return gone

    async def detach_file(self, file_id: str, owner: str) -> None:
        rows = await self.engine.fetchall(
            "SELECT vector_store_id FROM rg_vector_store_files WHERE file_id = ? AND owner = ?", (file_id, owner))
        for (vs_id,) in rows:
            await self.delete_vector_store_file(vs_id, file_id, owner)

    async def file_chunks(self, vector_store_id: str, file_id: str) -> list[ChunkRow]:
        rows = await self.engine.fetchall(
            "SELECT position, start_index, end_index, tokens, text FROM rg_chunks WHERE vector_store_id = ? "
            "AND file_id = ? ORDER BY position", (vector_store_id, file_id))
        return [ChunkRow(int(r[0]), int(r[1]), int(r[2]), int(r[3]), r[4], None) for r in rows]

    def _drop_chunks(self, where: str, *args: tuple[Any, ...]) -> Statements:
        statements: Statements = [(f"DELETE FROM rg_chunks WHERE {where}", list(args))]
        if self._sqlite:
            statements.append((f"DELETE FROM rg_chunks_fts WHERE {where}", list(args)))
        return statements

    # -- batches ------------------------------------------------------------------------------------------

    async def create_batch(self, batch_id: str, vector_store_id: str, owner: str, created_at: int) -> None:
        await self.engine.write([("INSERT INTO rg_file_batches (id, vector_store_id, owner, created_at) "
                                  "VALUES (?, ?, ?, ?)", [(batch_id, vector_store_id, owner, created_at)])])

    async def get_batch(self, batch_id: str, vector_store_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            "SELECT created_at, cancelled FROM rg_file_batches WHERE id = ? AND vector_store_id = ? AND owner = ?",
            (batch_id, vector_store_id, owner))
        if row is None:
            return None
        counts, _ = await self._counts(vector_store_id, batch_id)
        if counts["in_progress"]:
            status = "in_progress"
        elif row[1]:
            status = "cancelled"
        elif counts["failed"] and counts["failed"] == counts["total"]:
            status = "failed"
        else:
            status = "completed"
        return {"id": batch_id, "object": "vector_store.files_batch", "created_at": int(row[0]),
                "vector_store_id": vector_store_id, "status": status, "file_counts": counts}

    async def cancel_batch(self, batch_id: str, vector_store_id: str, owner: str) -> bool:
        cancelled = await self.engine.write([
            ("UPDATE rg_file_batches SET cancelled = 1 WHERE id = ? AND vector_store_id = ? AND owner = ?",
             [(batch_id, vector_store_id, owner)]),
        ], count_last=True) > 0
        if cancelled:
            await self.engine.write([(
                "UPDATE rg_vector_store_files SET status = 'cancelled', worker = NULL, lease_until = NULL "
                "WHERE batch_id = ? AND vector_store_id = ? AND status = 'in_progress'", [(batch_id, vector_store_id)])])
            rows = await self.engine.fetchall(  # chunks of files added again, then cancelled before a worker came
                "SELECT f.file_id FROM rg_vector_store_files f WHERE f.batch_id = ? AND f.vector_store_id = ? AND "
                "f.status = 'cancelled' AND EXISTS (SELECT 1 FROM rg_chunks c WHERE c.vector_store_id = "
                "f.vector_store_id AND c.file_id = f.file_id)", (batch_id, vector_store_id))
            for (file_id,) in rows:
                await self._drop_file_chunks((vector_store_id, file_id), UNUSED, (vector_store_id, file_id))
        return cancelled

    # -- ingestion jobs -----------------------------------------------------------------------------------

    async def claim_job(self, worker: str, lease: float) -> Job | None:
        now = time.time()
        rows = await self.engine.fetchall(
            "SELECT vector_store_id, file_id, owner, chunking, attempts FROM rg_vector_store_files "
            "WHERE status = 'in_progress' AND (lease_until IS NULL OR lease_until < ?) ORDER BY seq LIMIT 8",
            (int(now),))
        for vs_id, file_id, owner, chunking, attempts in rows:
            claimed = await self.engine.write([(
                "UPDATE rg_vector_store_files SET worker = ?, lease_until = ?, attempts = attempts + 1 "
                "WHERE vector_store_id = ? AND file_id = ? AND status = 'in_progress' "
                "AND (lease_until IS NULL OR lease_until < ?)",
                [(worker, int(now + lease), vs_id, file_id, int(now))])], count_last=True)
            if claimed:
                return Job(vs_id, file_id, owner, orjson.loads(chunking), int(attempts) + 1)
        return None

    async def renew_job(self, job: Job, worker: str, lease: float) -> bool:
        return await self.engine.write([(
            "UPDATE rg_vector_store_files SET lease_until = ? WHERE vector_store_id = ? AND file_id = ? AND worker = ? "
            "AND status = 'in_progress'", [(int(time.time() + lease), job.vector_store_id, job.file_id, worker)])],
            count_last=True) > 0

    async def finish_job(self, job: Job, worker: str, chunks: list[ChunkRow], usage_bytes: int,
                         dimension: int | None) -> bool:
        """The file's chunks, then its status: `completed` once every chunk is in. False (and the chunks this
        attempt wrote dropped, unless the file is being ingested again) when the file stopped being this
        worker's meanwhile: cancelled, deleted, or taken over after its lease lapsed.

        The chunks go in bounded batches, each its own transaction that writes only while the row is still this
        worker's `in_progress` one: a file of tens of thousands of chunks in one transaction outlived
        --db-timeout on PostgreSQL (a 16 MiB text file never ingested) and, on SQLite, held the one write lock —
        every key's saves — for as long as it ran (a 48 MB file: 10 s). Each batch is sized so that it takes
        about the engine's `batch_seconds`, as the retention purge's are."""
        if not await self._clear_leftovers(job, worker):
            return False
        batch, at = CHUNK_BATCH, 0
        while at < len(chunks):
            part = chunks[at:at + batch]
            began = time.monotonic()
            if not await self._write_chunks(job, worker, part):
                await self.drop_abandoned(job)
                return False
            at += len(part)
            batch = resize(batch, time.monotonic() - began, self.engine.batch_seconds)
        return await self._complete(job, worker, usage_bytes, dimension)

    def _held(self, job: Job, worker: str) -> tuple[str, list[tuple[Any, ...]]]:
        """A statement that touches the job's row only while this worker holds it `in_progress`: first in a
        batch, it locks the row on PostgreSQL (a cancel waits for the batch, not the other way round); last,
        its row count says whether the batch counted."""
        return ("UPDATE rg_vector_store_files SET worker = worker WHERE vector_store_id = ? AND file_id = ? "
                "AND worker = ? AND status = 'in_progress'", [(job.vector_store_id, job.file_id, worker)])

    async def _write_chunks(self, job: Job, worker: str, chunks: list[ChunkRow]) -> bool:
        key = (job.vector_store_id, job.file_id)
        statements: Statements = [self._held(job, worker), (
            "INSERT INTO rg_chunks (vector_store_id, file_id, position, start_index, end_index, tokens, text, embedding) "
            "SELECT ?, ?, CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS INTEGER), ?, "
            f"{'?' if self._sqlite else 'CAST(? AS BYTEA)'} WHERE {WRITING}",
            [(*key, c.position, c.start, c.end, c.tokens, c.text, c.embedding, *key, worker) for c in chunks])]
        if self._sqlite:
            statements.append((
                f"INSERT INTO rg_chunks_fts (text, vector_store_id, file_id, position) SELECT ?, ?, ?, ? WHERE {WRITING}",
                [(c.text, *key, c.position, *key, worker) for c in chunks]))
        statements.append(self._held(job, worker))
        return await self.engine.write(statements, count_last=True) > 0

    async def _clear_leftovers(self, job: Job, worker: str) -> bool:
        """Chunks an earlier attempt at this file left (its process died, or it was re-added meanwhile) go
        first, in batches, while the row is this worker's; False when it no longer is."""
        key = (job.vector_store_id, job.file_id)
        return await self._drop_file_chunks(key, WRITING, (*key, worker), guard=self._held(job, worker))

    async def drop_abandoned(self, job: Job) -> None:
        """Chunks of a file nobody is writing any more (cancelled, failed or deleted while it was written), in
        batches; those of a file being ingested again are its new worker's to replace."""
        key = (job.vector_store_id, job.file_id)
        await self._drop_file_chunks(key, UNUSED, key)

    async def _drop_file_chunks(self, key: tuple[str, str], condition: str, args: tuple[Any, ...],
                                guard: tuple[str, list[tuple[Any, ...]]] | None = None) -> bool:
        """A file's chunks, DROP_BATCH positions a transaction, each only while `condition` holds (and, with a
        `guard`, only while it touches the row: False when it stops). On SQLite the keyword index's rows are
        found first by a read (a scan of the index's rows, which holds no write lock), then deleted by rowid:
        a delete that named the file would scan them all inside every batch's transaction."""
        row = await self.engine.fetchone("SELECT max(position) FROM rg_chunks WHERE vector_store_id = ? "
                                         "AND file_id = ?", key)
        top = row[0] if row and row[0] is not None else -1
        indexed: dict[int, list[int]] = {}
        if self._sqlite:
            for rowid, position in await self.engine.fetchall(
                    "SELECT rowid, position FROM rg_chunks_fts WHERE vector_store_id = ? AND file_id = ?", key):
                indexed.setdefault(int(position) // DROP_BATCH, []).append(int(rowid))
            top = max([top, *(DROP_BATCH * (k + 1) - 1 for k in indexed)])
        for low in range(0, int(top) + 1, DROP_BATCH):
            statements: Statements = [(
                f"DELETE FROM rg_chunks WHERE vector_store_id = ? AND file_id = ? AND position >= ? AND position < ? "
                f"AND {condition}", [(*key, low, low + DROP_BATCH, *args)])]
            rowids = indexed.get(low // DROP_BATCH)
            if rowids:
                statements.append((f"DELETE FROM rg_chunks_fts WHERE rowid = ? AND {condition}",
                                   [(rowid, *args) for rowid in rowids]))
            if guard is not None:
                if not await self.engine.write([guard, *statements, guard], count_last=True):
                    return False
            else:
                await self.engine.write(statements)
        return True

    async def _complete(self, job: Job, worker: str, usage_bytes: int, dimension: int | None) -> bool:
        key = (job.vector_store_id, job.file_id)
        mine = ("EXISTS (SELECT 1 FROM rg_vector_store_files WHERE vector_store_id = ? AND file_id = ? AND worker = ? "
                "AND status = 'completed')")
        # The row first: it is ours only if no other worker took it over (then nothing below applies).
        statements: Statements = [(
            "UPDATE rg_vector_store_files SET status = 'completed', usage_bytes = ?, lease_until = NULL, "
            "last_error = NULL WHERE vector_store_id = ? AND file_id = ? AND worker = ? AND status = 'in_progress'",
            [(usage_bytes, *key, worker)])]
        statements.append((
            f"UPDATE rg_vector_stores SET version = version + 1, dimension = COALESCE(dimension, ?) WHERE id = ? "
            f"AND {mine}", [(dimension, job.vector_store_id, *key, worker)]))
        statements.append(("UPDATE rg_vector_store_files SET worker = NULL WHERE vector_store_id = ? AND file_id = ? "
                           "AND worker = ? AND status = 'completed'", [(*key, worker)]))
        return await self.engine.write(statements, count_last=True) > 0

    async def fail_job(self, job: Job, worker: str, code: str, message: str) -> bool:
        error = orjson.dumps({"code": code, "message": message[:1000]}).decode()
        return await self.engine.write([(
            "UPDATE rg_vector_store_files SET status = 'failed', last_error = ?, worker = NULL, lease_until = NULL "
            "WHERE vector_store_id = ? AND file_id = ? AND worker = ? AND status = 'in_progress'",
            [(error, job.vector_store_id, job.file_id, worker)])], count_last=True) > 0

    async def release_jobs(self, worker: str) -> None:
        await self.engine.write([("UPDATE rg_vector_store_files SET worker = NULL, lease_until = NULL "
                                  "WHERE worker = ? AND status = 'in_progress'", [(worker,)])])

    # -- search -------------------------------------------------------------------------------------------

    async def keyword_search(self, query: str, stores: Sequence[str], files: Sequence[str] | None,
                             limit: int, alone: bool = False) -> list[Hit]:
        """The best `limit` chunks by keyword (BM25 on SQLite, ts_rank on PostgreSQL), best first.

        Ranking every chunk that holds a common word costs as much as the store is large, for a word that
        hardly changes the order (its IDF is near zero). So each word's matches are counted first, up to
        COMMON; words in more chunks are left out, and every chunk holding one of the others is ranked (so at
        most COMMON per word). A query of common words only has no keyword matches when vectors rank beside it
        (ranking the many chunks that hold them costs much and says little); `alone`, ALL_COMMON of the chunks
        that hold them all are ranked. The cost is bounded, whatever the size of the store."""
        terms = query_terms(query)
        if not terms or not stores:
            return []
        if files is not None and not files:
            return []
        counts = await self._matches(terms, COMMON)
        rare = [t for t, n in zip(terms, counts, strict=True) if 0 < n < COMMON]
        if rare:  # every chunk that holds a rarer word is ranked
            chosen, joiner, ranked = rare, "or", sum(n for n in counts if n < COMMON)
        elif alone and all(counts):
            chosen, joiner, ranked = terms, "and", ALL_COMMON
        else:
            return []
        store_marks = ", ".join("?" for _ in stores)
        file_clause, file_args = "", tuple[str, ...]()
        if files is not None:
            file_clause = f" AND file_id IN ({', '.join('?' for _ in files)})"
            file_args = tuple(files)
        if self._sqlite:
            rows = await self.engine.fetchall(
                "SELECT vector_store_id, file_id, position FROM (SELECT vector_store_id, file_id, position, rank AS r "
                f"FROM rg_chunks_fts WHERE rg_chunks_fts MATCH ? AND vector_store_id IN ({store_marks}){file_clause} "
                "LIMIT ?) ORDER BY r LIMIT ?",
                (_fts_query(chosen, joiner), *stores, *file_args, ranked, limit))
        else:
            rows = await self.engine.fetchall(
                "SELECT vector_store_id, file_id, position FROM (SELECT vector_store_id, file_id, position, "
                "ts_rank(tsv, q) AS r FROM rg_chunks, to_tsquery('english', ?) q WHERE tsv @@ q AND "
                f"vector_store_id IN ({store_marks}){file_clause} LIMIT ?) s ORDER BY r DESC LIMIT ?",
                (_ts_query(chosen, joiner), *stores, *file_args, ranked, limit))
        return [Hit(r[0], r[1], int(r[2])) for r in rows]

    async def _matches(self, terms: list[str], cap: int) -> list[int]:
        """Chunks holding each term (in any store), each counted up to `cap`, in one statement."""
        if self._sqlite:
            one = "(SELECT count(*) FROM (SELECT 1 FROM rg_chunks_fts WHERE rg_chunks_fts MATCH ? LIMIT ?))"
            args = [x for t in terms for x in (_fts_query([t], "or"), cap)]
        else:
            one = "(SELECT count(*) FROM (SELECT 1 FROM rg_chunks WHERE tsv @@ to_tsquery('english', ?) LIMIT ?) s)"
            args = [x for t in terms for x in (_ts_query([t], "or"), cap)]
        row = await self.engine.fetchone("SELECT " + ", ".join(one for _ in terms), tuple(args))
        return [int(n) for n in row] if row else [0] * len(terms)

    async def store_vectors(self, vector_store_id: str) -> list[tuple[str, int, bytes]]:
        # the completed files' only: a file being written has chunks already, but it is not searched yet
        rows = await self.engine.fetchall(
            "SELECT c.file_id, c.position, c.embedding FROM rg_chunks c JOIN rg_vector_store_files f ON "
            "f.vector_store_id = c.vector_store_id AND f.file_id = c.file_id WHERE c.vector_store_id = ? "
            "AND f.status = 'completed' AND c.embedding IS NOT NULL", (vector_store_id,))
        return [(r[0], int(r[1]), bytes(r[2])) for r in rows]

    async def chunk_texts(self, hits: Sequence[Hit]) -> dict[Hit, str]:
        if not hits:
            return {}
        # one lookup by primary key per hit (UNION ALL keeps each an index lookup on both engines)
        one = ("SELECT vector_store_id, file_id, position, text FROM rg_chunks WHERE vector_store_id = ? AND "
               "file_id = ? AND position = ?")
        args = tuple(x for h in hits for x in (h.vector_store_id, h.file_id, h.position))
        rows = await self.engine.fetchall(" UNION ALL ".join(one for _ in hits), args)
        return {Hit(r[0], r[1], int(r[2])): r[3] for r in rows}

    async def searchable_files(self, stores: Sequence[str]) -> list[tuple[str, str, str, dict[str, Any] | None]]:
        if not stores:
            return []
        rows = await self.engine.fetchall(
            "SELECT v.vector_store_id, v.file_id, f.body, v.attributes FROM rg_vector_store_files v "
            "JOIN rg_files f ON f.id = v.file_id "
            f"WHERE v.vector_store_id IN ({', '.join('?' for _ in stores)}) AND v.status = 'completed'", tuple(stores))
        return [(r[0], r[1], orjson.loads(r[2])["filename"], orjson.loads(r[3]) if r[3] else None) for r in rows]

    async def purge_vector_stores(self) -> int:
        rows = await self.engine.fetchall("SELECT id, owner FROM rg_vector_stores WHERE expires_at <= ?",
                                          (int(time.time()),))
        for vs_id, owner in rows:
            await self.delete_vector_store(vs_id, owner)
        return len(rows)


async def _paged(engine: Engine, table: str, columns: str, order_column: str, clauses: list[str], args: list[Any],
                 after: str | None, before: str | None, limit: int, order: str, *, id_column: str = "id",
                 scope: tuple[str, str] | None = None) -> list[Sequence[Any]] | None:
    """Rows of a list endpoint, `limit + 1` of them (the extra one says has_more); None: a cursor not found."""
    clauses, args = list(clauses), list(args)
    backwards = before is not None and after is None
    for cursor, op in ((after, ">" if order == "asc" else "<"), (before, "<" if order == "asc" else ">")):
        if cursor is None:
            continue
        where = f"{id_column} = ?" + (f" AND {scope[0]} = ?" if scope else "")
        found = await engine.fetchone(f"SELECT {order_column} FROM {table} WHERE {where}",
                                      (cursor, scope[1]) if scope else (cursor,))
        if found is None:
            return None
        clauses.append(f"({order_column} {op} ? OR ({order_column} = ? AND {id_column} {op} ?))")
        args += [found[0], found[0], cursor]
    ascending = (order == "asc") != backwards
    direction = "ASC" if ascending else "DESC"
    rows = await engine.fetchall(
        f"SELECT {columns} FROM {table} WHERE {' AND '.join(clauses)} "
        f"ORDER BY {order_column} {direction}, {id_column} {direction} LIMIT ?", (*args, limit + 1))
    if backwards:
        extra = rows[limit:]
        rows = list(reversed(rows[:limit])) + list(extra)
    return rows
