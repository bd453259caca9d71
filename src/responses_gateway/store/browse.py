"""Browsing the store across owners, for the web console (console/): lists of responses, conversations, files,
vector stores and containers, one response whole, and usage over time.

These queries read every owner's rows: only the console, behind its own admin key, calls them. The listing of
responses filters by model, status, key owner, conversation and time and pages newest first by
(created_at, id); each filter has an index that gives its rows already in that order, so a page reads about
as many rows as it shows whatever the table's size (docs/console.md: 1M rows, p50 well under 100 ms on
SQLite and PostgreSQL). The indexes are made by `prepare`, at start-up and only with `--console` (a gateway
without the console pays no index upkeep on its writes); model and conversation are read from the stored
body, so theirs are expression indexes, in each engine's JSON dialect.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from .base import Queries, Row
from .postgres import Postgres
from .schema import INPUT

log = logging.getLogger("responses_gateway.store")

PAGE = 50
INDEX_SECONDS = 3600.0  # a PostgreSQL index build over a large table may take minutes: not the statement deadline


@dataclass(frozen=True)
class Filters:
    """What the responses list is narrowed to; None: any."""

    model: str | None = None
    status: str | None = None
    owner: str | None = None
    conversation: str | None = None
    since: int | None = None  # created_at >= since (unix seconds)
    until: int | None = None  # created_at < until


@dataclass(frozen=True)
class Cursor:
    """Where a page of the newest-first list starts: strictly older than (created_at, id)."""

    created_at: int
    id: str

    def text(self) -> str:
        return f"{self.created_at}.{self.id}"

    @staticmethod
    def parse(text: str | None) -> Cursor | None:
        if not text or "." not in text:
            return None
        at, _, rid = text.partition(".")
        try:
            return Cursor(int(at), rid)
        except ValueError:
            return None


@dataclass
class Listed:
    """A page of rows (each the stored body, with the columns the console shows beside it) and the next cursor."""

    rows: list[dict[str, Any]]
    next: Cursor | None = None


@dataclass
class Usage:
    """Per (bucket start, model, owner): responses, failed ones, and tokens."""

    bucket: int
    rows: list[tuple[int, str, str, int, int, int]] = field(default_factory=list)


class Dialect:
    """How each engine reads a field of a stored JSON body (the expression indexes must use the same text)."""

    def __init__(self, postgres: bool):
        self.postgres = postgres

    def field(self, path: str) -> str:
        """`path` like "model" or "conversation.id": the SQL expression over `body` that reads it as text."""
        parts = path.split(".")
        if self.postgres:
            head = "(body::json" + "".join(f"->'{p}'" for p in parts[:-1]) + f"->>'{parts[-1]}')"
            return head
        return f"json_extract(body, '$.{path}')"

    def integer(self, path: str) -> str:
        text = self.field(path)
        return f"CAST({text} AS BIGINT)"


def index_statements(dialect: Dialect) -> list[str]:
    """The console's indexes (all `IF NOT EXISTS`): one per filter, each ending in the list's order."""
    now = "CONCURRENTLY " if dialect.postgres else ""
    return [
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_created ON responses (created_at, id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_owner ON responses (owner, created_at, id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_status ON responses (status, created_at, id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_model ON responses (({dialect.field('model')}), created_at, id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_conversation ON responses "
        f"(({dialect.field('conversation.id')}), created_at, id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_previous ON responses (previous_response_id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_conversations ON conversations (created_at, id)",
        f"CREATE INDEX {now}IF NOT EXISTS rg_console_files ON rg_files (created_at, id)",
    ]


def loads(text: Any) -> Any:
    return orjson.loads(text) if text is not None else None


class BrowseQueries(Queries):
    """The console's reads over the store's engine (bound with `Store.role(BrowseQueries)`)."""

    @property
    def dialect(self) -> Dialect:
        return Dialect(isinstance(self.engine, Postgres))

    async def prepare(self) -> float:
        """Make the console's indexes (a no-op once they exist); returns the seconds it took."""
        started = time.monotonic()
        for sql in index_statements(self.dialect):
            if isinstance(self.engine, Postgres):  # CONCURRENTLY: not in a transaction, and writes go on
                async with self.engine.pool.acquire(timeout=self.engine.timeout) as conn:
                    await conn.execute(sql, timeout=INDEX_SECONDS)
            else:  # DDL is no write's statement (those run with executemany): one statement, auto-committed
                await self.engine.fetchall(sql, ())
        return time.monotonic() - started

    # -- responses ----------------------------------------------------------------------------------------

    async def responses(self, filters: Filters, before: Cursor | None = None, limit: int = PAGE) -> Listed:
        d = self.dialect
        clauses: list[str] = ["deleted = 0", "expires_at > ?"]
        args: list[Any] = [int(time.time())]
        for column, value in ((d.field("model"), filters.model), ("status", filters.status),
                              ("owner", filters.owner), (d.field("conversation.id"), filters.conversation)):
            if value:
                clauses.append(f"{column} = ?")
                args.append(value)
        if filters.since is not None:
            clauses.append("created_at >= ?")
            args.append(filters.since)
        if filters.until is not None:
            clauses.append("created_at < ?")
            args.append(filters.until)
        rows, after = await self._newest_first("id, owner, created_at, status, body FROM responses", clauses, args,
                                               before, limit)
        return Listed([self._response_row(row) for row in rows], after)

    async def _newest_first(self, what: str, clauses: list[str], args: list[Any], before: Cursor | None,
                            limit: int) -> tuple[list[Row], Cursor | None]:
        """A page of `SELECT what` (its first columns id, owner, created_at) newest first, from `before`; and
        the cursor of the next page, if there is one."""
        if before is not None:
            clauses = [*clauses, "(created_at < ? OR (created_at = ? AND id < ?))"]
            args = [*args, before.created_at, before.created_at, before.id]
        rows = await self.engine.fetchall(
            f"SELECT {what} WHERE {' AND '.join(clauses)} ORDER BY created_at DESC, id DESC LIMIT ?",
            (*args, limit + 1))
        last = rows[limit - 1] if len(rows) > limit else None
        return rows[:limit], Cursor(int(last[2]), str(last[0])) if last is not None else None

    @staticmethod
    def _response_row(row: Row) -> dict[str, Any]:
        body = loads(row[4]) or {}
        return {"id": row[0], "owner": row[1], "created_at": int(row[2]), "status": row[3] or body.get("status"),
                "body": body}

    async def response(self, response_id: str) -> dict[str, Any] | None:
        """One response, whoever owns it, with its row's columns (a deleted one too: the console says so)."""
        row = await self.engine.fetchone(
            "SELECT id, owner, created_at, status, body, deleted, expires_at, previous_response_id "
            "FROM responses WHERE id = ?", (response_id,))
        if row is None:
            return None
        out = self._response_row(row)
        out.update(deleted=bool(row[5]), expires_at=int(row[6]), previous_response_id=row[7])
        return out

    async def items(self, response_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Its stored input items and output items, in order."""
        rows = await self.engine.fetchall(
            "SELECT part, body FROM items WHERE response_id = ? ORDER BY part, position", (response_id,))
        inputs = [loads(r[1]) for r in rows if r[0] == INPUT]
        outputs = [loads(r[1]) for r in rows if r[0] != INPUT]
        return inputs, outputs

    async def chain(self, response_id: str, depth: int = 100) -> list[str]:
        """The ids of the `previous_response_id` chain before it, nearest first (at most `depth`)."""
        rows = await self.engine.fetchall(
            """WITH RECURSIVE chain(id, prev, depth) AS (
                   SELECT id, previous_response_id, 0 FROM responses WHERE id = ?
                   UNION ALL
                   SELECT r.id, r.previous_response_id, c.depth + 1 FROM responses r JOIN chain c ON r.id = c.prev
                    WHERE c.depth < ?)
               SELECT id FROM chain WHERE depth > 0 ORDER BY depth""", (response_id, depth))
        return [str(r[0]) for r in rows]

    async def followers(self, response_id: str, limit: int = 20) -> list[str]:
        """The responses that continue it (their `previous_response_id` is it)."""
        rows = await self.engine.fetchall(
            "SELECT id FROM responses WHERE previous_response_id = ? ORDER BY created_at, id LIMIT ?",
            (response_id, limit))
        return [str(r[0]) for r in rows]

    async def events(self, response_id: str, limit: int = 2000) -> list[tuple[int, str]]:
        """A background response's stored event log: (first sequence number of the run, its SSE frames)."""
        rows = await self.engine.fetchall(
            "SELECT seq, frames FROM response_events WHERE response_id = ? ORDER BY seq LIMIT ?",
            (response_id, limit))
        return [(int(r[0]), str(r[1])) for r in rows]

    # -- conversations ------------------------------------------------------------------------------------

    async def conversations(self, before: Cursor | None = None, limit: int = PAGE) -> Listed:
        rows, after = await self._newest_first("id, owner, created_at, metadata FROM conversations", ["1 = 1"], [],
                                               before, limit)
        return Listed([{"id": r[0], "owner": r[1], "created_at": int(r[2]), "metadata": loads(r[3])} for r in rows],
                      after)

    async def conversation(self, conversation_id: str, limit: int = 1000) -> tuple[dict[str, Any], list[Any]] | None:
        """A conversation's row and its items, in append order (at most `limit`)."""
        row = await self.engine.fetchone(
            "SELECT id, owner, created_at, metadata FROM conversations WHERE id = ?", (conversation_id,))
        if row is None:
            return None
        items = await self.engine.fetchall(
            "SELECT body FROM conversation_items WHERE conversation_id = ? ORDER BY position LIMIT ?",
            (conversation_id, limit))
        head = {"id": row[0], "owner": row[1], "created_at": int(row[2]), "metadata": loads(row[3])}
        return head, [loads(r[0]) for r in items]

    # -- files, vector stores, containers ----------------------------------------------------------------

    async def files(self, limit: int = 200) -> list[dict[str, Any]]:
        rows = await self.engine.fetchall(
            "SELECT owner, body, expires_at FROM rg_files ORDER BY created_at DESC, id DESC LIMIT ?", (limit,))
        return [{**(loads(r[1]) or {}), "owner": r[0], "expires_at": r[2]} for r in rows]

    async def vector_stores(self, limit: int = 200) -> list[dict[str, Any]]:
        """Each store with its files' counts by status."""
        rows = await self.engine.fetchall(
            "SELECT id, owner, created_at, expires_at, embedding_model, body FROM rg_vector_stores "
            "ORDER BY created_at DESC, id DESC LIMIT ?", (limit,))
        counts = await self.engine.fetchall(
            "SELECT vector_store_id, status, COUNT(*) FROM rg_vector_store_files GROUP BY vector_store_id, status",
            ())
        by_store: dict[str, dict[str, int]] = {}
        for store_id, status, count in counts:
            by_store.setdefault(str(store_id), {})[str(status)] = int(count)
        return [{"id": r[0], "owner": r[1], "created_at": int(r[2]), "expires_at": r[3], "embedding_model": r[4],
                 "name": (loads(r[5]) or {}).get("name"), "counts": by_store.get(str(r[0]), {})} for r in rows]

    async def vector_store_files(self, vector_store_id: str, limit: int = 500) -> list[dict[str, Any]]:
        """A store's files, each with its status and, for a failed one, its error."""
        rows = await self.engine.fetchall(
            "SELECT file_id, status, last_error, usage_bytes, attempts, created_at FROM rg_vector_store_files "
            "WHERE vector_store_id = ? ORDER BY seq LIMIT ?", (vector_store_id, limit))
        return [{"file_id": r[0], "status": r[1], "last_error": loads(r[2]) if r[2] else None,
                 "usage_bytes": int(r[3] or 0), "attempts": int(r[4] or 0), "created_at": int(r[5])} for r in rows]

    async def containers(self, limit: int = 200) -> list[dict[str, Any]]:
        """Each container with its files and when it expires (`minutes` after its last activity)."""
        rows = await self.engine.fetchall(
            "SELECT id, owner, name, created_at, last_active_at, minutes, memory_limit, status FROM containers "
            "ORDER BY created_at DESC, id DESC LIMIT ?", (limit,))
        files = await self.engine.fetchall(
            "SELECT container_id, path, bytes, source FROM container_files ORDER BY container_id, path", ())
        by_container: dict[str, list[dict[str, Any]]] = {}
        for cid, path, size, source in files:
            by_container.setdefault(str(cid), []).append({"path": path, "bytes": int(size), "source": source})
        return [{"id": r[0], "owner": r[1], "name": r[2], "created_at": int(r[3]), "last_active_at": int(r[4]),
                 "expires_at": int(r[4]) + int(r[5]) * 60, "memory_limit": r[6], "status": r[7],
                 "files": by_container.get(str(r[0]), [])} for r in rows]

    # -- usage ------------------------------------------------------------------------------------------

    async def usage(self, since: int, bucket: int) -> Usage:
        """Responses, failures and tokens per time bucket, model and owner, since `since`."""
        d = self.dialect
        start = f"(created_at - created_at % {int(bucket)})"
        rows = await self.engine.fetchall(
            f"SELECT {start}, COALESCE({d.field('model')}, ''), owner, COUNT(*), "
            "SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), "
            f"SUM(COALESCE({d.integer('usage.total_tokens')}, 0)) "
            f"FROM responses WHERE created_at >= ? AND deleted = 0 GROUP BY {start}, 2, owner ORDER BY 1",
            (since,))
        return Usage(bucket, [(int(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4] or 0), int(r[5] or 0))
                              for r in rows])
