"""One SQL store, two engines: SQLite (embedded default, WAL) and PostgreSQL (shared by several replicas).

Rows: `responses` (the final object as JSON) and `items` (each response's input items and output items,
in order). A chain is resolved with one recursive query over `previous_response_id`. Deleting a response
hides it (not retrievable, not chainable, no input_items); its items stay readable to responses chained
after it until retention removes them, so deleting one turn never breaks a later turn's history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlparse

import orjson

from .. import offload
from ..errors import APIError
from .base import Page

log = logging.getLogger("responses_gateway.store")

T = TypeVar("T")
Row = Sequence[Any]
Statements = list[tuple[str, list[Any]]]  # (SQL with `?` placeholders, the rows of arguments to run it with)


class _Engine(Protocol):
    """What SQLStore needs of a database: SQLite and PostgreSQL each provide it."""

    label: str

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def migrate(self, migrations: list[list[str]]) -> int: ...

    async def write(self, statements: Statements, count_last: bool = False) -> int:
        """One transaction; with `count_last`, the rows the last statement touched."""
        ...

    async def execute_count(self, sql: str, args: tuple[Any, ...]) -> int: ...

    async def fetchone(self, sql: str, args: tuple[Any, ...]) -> Row | None: ...

    async def fetchall(self, sql: str, args: tuple[Any, ...]) -> list[Row]: ...

MIGRATIONS: list[list[str]] = [
    [  # 1: responses and their items
        """CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            previous_response_id TEXT,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX responses_expires_at ON responses (expires_at)",
        """CREATE TABLE items (
            response_id TEXT NOT NULL,
            part INTEGER NOT NULL,
            position INTEGER NOT NULL,
            id TEXT NOT NULL,
            owner TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (response_id, part, position)
        )""",
        "CREATE INDEX items_id ON items (id)",
    ],
    [  # 2: conversations and their items, in append order
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            metadata TEXT NOT NULL
        )""",
        """CREATE TABLE conversation_items (
            conversation_id TEXT NOT NULL,
            position BIGINT NOT NULL,
            id TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (conversation_id, position)
        )""",
        "CREATE INDEX conversation_items_id ON conversation_items (conversation_id, id)",
    ],
    [  # 3: secrets the replicas must share (the compaction key when none is configured)
        "CREATE TABLE rg_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    [  # 4: background responses: status, the lease of the replica running it, cancel flag, event log (a row
        # holds a run of frames, seq .. last_seq: one row per flush, not one per event)
        "ALTER TABLE responses ADD COLUMN status TEXT",
        "ALTER TABLE responses ADD COLUMN worker TEXT",
        "ALTER TABLE responses ADD COLUMN lease_until BIGINT",
        "ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX responses_lease ON responses (lease_until)",
        """CREATE TABLE response_events (
            response_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            created_at BIGINT NOT NULL,
            frames TEXT NOT NULL,
            PRIMARY KEY (response_id, seq)
        )""",
        "CREATE INDEX response_events_created_at ON response_events (created_at)",
    ],
]

ACTIVE = "('queued', 'in_progress')"

INPUT, OUTPUT = 0, 1

# The whole chain in one statement, visibility of the response asked for included: a row per item, oldest
# response first; a visible response without items still gives one row (body NULL), none means not found.
_CHAIN = """
WITH RECURSIVE chain(id, prev, depth) AS (
    SELECT id, previous_response_id, 0 FROM responses
     WHERE id = ? AND owner = ? AND deleted = 0 AND expires_at > ?
       AND (status IS NULL OR status NOT IN ('queued', 'in_progress'))  -- a background response: once ended
    UNION ALL
    SELECT r.id, r.previous_response_id, c.depth + 1 FROM responses r JOIN chain c ON r.id = c.prev
)
SELECT i.body FROM chain c LEFT JOIN items i ON i.response_id = c.id
ORDER BY c.depth DESC, i.part, i.position
"""


def default_sqlite_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "responses-gateway" / "responses.db"


class StoreUnavailable(APIError):
    """The database did not answer in time or lost its connection: the request fails, nothing is lost."""

    def __init__(self) -> None:
        super().__init__(503, "The gateway's database is not answering; please retry.", type="server_error",
                         code="store_unavailable")


DB_TIMEOUT = 10.0  # seconds: a stalled database fails a request cleanly instead of holding it forever


def open_store(url: str | None, retention_days: float = 30.0, timeout: float = DB_TIMEOUT) -> SQLStore:
    """`url`: None (SQLite in the user's data directory), a path, `sqlite:///path`, or `postgresql://...`."""
    if url and url.startswith(("postgres://", "postgresql://")):
        engine = _Postgres(url)
        engine.timeout = timeout
        return SQLStore(engine, retention_days)
    if url and url.startswith("sqlite:"):
        parsed = urlparse(url)
        path = Path(parsed.path if parsed.netloc == "" else parsed.netloc + parsed.path)
    else:
        path = Path(url) if url else default_sqlite_path()
    return SQLStore(_SQLite(path), retention_days)


def _item_rows(rid: str, owner: str, inputs: list[dict[str, Any]],
               outputs: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = [(rid, INPUT, i, item.get("id", ""), owner, orjson.dumps(item).decode()) for i, item in enumerate(inputs)]
    rows += [(rid, OUTPUT, i, item.get("id", ""), owner, orjson.dumps(item).decode())
             for i, item in enumerate(outputs)]
    return rows


class SQLStore:
    def __init__(self, engine: _Engine, retention_days: float):
        self.engine = engine
        # whole seconds, rounded up: even a tiny retention keeps a response past the second it was made in
        self.retention = max(2, math.ceil(retention_days * 86400))
        self.label = engine.label

    async def open(self) -> None:
        await self.engine.connect()

    async def upgrade(self) -> int:
        """Apply pending migrations (safe when several processes start at once); returns the version."""
        return await self.engine.migrate(MIGRATIONS)

    async def close(self) -> None:
        await self.engine.close()

    async def save(self, response: dict[str, Any], input_items: list[dict[str, Any]], owner: str) -> None:
        created = int(response.get("created_at") or time.time())
        rid = response["id"]
        rows = await offload.run(_item_rows, rid, owner, input_items, response.get("output") or ())
        await self.engine.write([
            # A background response's row exists since it was queued: the final state replaces it, unless
            # another replica already declared it failed (its lease had expired).
            ("INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, deleted, body, status) "
             "VALUES (?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body, "
             f"status = excluded.status, worker = NULL, lease_until = NULL WHERE responses.status IN {ACTIVE}",
             [(rid, owner, response.get("previous_response_id"), created, created + self.retention,
               orjson.dumps(response).decode(), response.get("status"))]),
            ("INSERT INTO items (response_id, part, position, id, owner, body) VALUES (?, ?, ?, ?, ?, ?)", rows),
        ])

    async def _head(self, response_id: str, owner: str) -> Row | None:
        return await self.engine.fetchone(
            "SELECT body FROM responses WHERE id = ? AND owner = ? AND deleted = 0 AND expires_at > ?",
            (response_id, owner, int(time.time())))

    async def get(self, response_id: str, owner: str) -> dict[str, Any] | None:
        row = await self._head(response_id, owner)
        return orjson.loads(row[0]) if row else None

    async def delete(self, response_id: str, owner: str) -> bool:
        return await self.engine.execute_count(
            "UPDATE responses SET deleted = 1 WHERE id = ? AND owner = ? AND deleted = 0 AND expires_at > ?",
            (response_id, owner, int(time.time()))) > 0

    async def history(self, response_id: str, owner: str) -> list[dict[str, Any]] | None:
        """One statement whatever the depth of the chain (a recursive query over previous_response_id)."""
        rows = await self.engine.fetchall(_CHAIN, (response_id, owner, int(time.time())))
        if not rows:
            return None
        return [orjson.loads(r[0]) for r in rows if r[0] is not None]

    async def items_by_id(self, ids: list[str], owner: str) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = await self.engine.fetchall(
            f"SELECT i.id, i.body FROM items i JOIN responses r ON r.id = i.response_id "
            f"WHERE i.id IN ({marks}) AND i.owner = ? AND r.deleted = 0 AND r.expires_at > ? ORDER BY r.created_at",
            (*ids, owner, int(time.time())))
        return {row[0]: orjson.loads(row[1]) for row in rows}  # the latest copy wins

    async def input_items(self, response_id: str, owner: str, *, after: str | None, before: str | None,
                          limit: int, order: str) -> Page | None:
        if await self._head(response_id, owner) is None:
            return None
        clauses, args = ["response_id = ?", "part = 0"], [response_id]
        for cursor, op in ((after, ">" if order == "asc" else "<"), (before, "<" if order == "asc" else ">")):
            if cursor is None:
                continue
            row = await self.engine.fetchone(
                "SELECT position FROM items WHERE response_id = ? AND part = 0 AND id = ? ORDER BY position",
                (response_id, cursor))
            if row is None:
                return Page([], False)
            clauses.append(f"position {op} ?")
            args.append(row[0])
        # With only a `before` cursor the page is the one just before it: walk toward the cursor, then flip.
        backwards = before is not None and after is None
        ascending = (order == "asc") != backwards
        rows = await self.engine.fetchall(
            f"SELECT body FROM items WHERE {' AND '.join(clauses)} ORDER BY position "
            f"{'ASC' if ascending else 'DESC'} LIMIT ?",
            (*args, limit + 1))
        items = [orjson.loads(r[0]) for r in rows[:limit]]
        if backwards:
            items.reverse()
        return Page(items, len(rows) > limit)

    # ------------------------------------------------------------------ conversations

    async def create_conversation(self, conversation: dict[str, Any], items: list[dict[str, Any]], owner: str) -> None:
        cid = conversation["id"]
        await self.engine.write([
            ("INSERT INTO conversations (id, owner, created_at, metadata) VALUES (?, ?, ?, ?)",
             [(cid, owner, conversation["created_at"], orjson.dumps(conversation["metadata"]).decode())]),
            ("INSERT INTO conversation_items (conversation_id, position, id, body) VALUES (?, ?, ?, ?)",
             [(cid, i, item["id"], orjson.dumps(item).decode()) for i, item in enumerate(items)]),
        ])

    async def get_conversation(self, conversation_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            "SELECT id, created_at, metadata FROM conversations WHERE id = ? AND owner = ?",
            (conversation_id, owner))
        if row is None:
            return None
        return {"id": row[0], "object": "conversation", "created_at": int(row[1]),
                "metadata": orjson.loads(row[2])}

    async def update_conversation(self, conversation_id: str, owner: str, metadata: dict[str, Any]) -> bool:
        return await self.engine.execute_count(
            "UPDATE conversations SET metadata = ? WHERE id = ? AND owner = ?",
            (orjson.dumps(metadata).decode(), conversation_id, owner)) > 0

    async def delete_conversation(self, conversation_id: str, owner: str) -> bool:
        return await self.engine.write([
            ("DELETE FROM conversation_items WHERE conversation_id IN "
             "(SELECT id FROM conversations WHERE id = ? AND owner = ?)", [(conversation_id, owner)]),
            ("DELETE FROM conversations WHERE id = ? AND owner = ?", [(conversation_id, owner)]),
        ], count_last=True) > 0

    async def append_conversation(self, conversation_id: str, owner: str, items: list[dict[str, Any]]) -> None:
        """Append after the conversation's last item, all in one transaction. The first statement takes the
        conversation's row lock (PostgreSQL; SQLite has one writer), so concurrent appends queue up and each
        one's items stay together, in the order the appends commit."""
        if not items:
            return
        await self.engine.write([
            ("UPDATE conversations SET created_at = created_at WHERE id = ? AND owner = ?",
             [(conversation_id, owner)]),
            ("INSERT INTO conversation_items (conversation_id, position, id, body) "
             "SELECT ?, COALESCE((SELECT max(position) FROM conversation_items WHERE conversation_id = ?), -1) + 1,"
             " ?, ? WHERE EXISTS (SELECT 1 FROM conversations WHERE id = ? AND owner = ?)",
             [(conversation_id, conversation_id, item["id"], orjson.dumps(item).decode(), conversation_id, owner)
              for item in items]),
        ])

    async def conversation_history(self, conversation_id: str, owner: str) -> list[dict[str, Any]] | None:
        if await self.get_conversation(conversation_id, owner) is None:
            return None
        rows = await self.engine.fetchall(
            "SELECT body FROM conversation_items WHERE conversation_id = ? ORDER BY position", (conversation_id,))
        return [orjson.loads(r[0]) for r in rows]

    async def conversation_items(self, conversation_id: str, owner: str, *, after: str | None, limit: int,
                                 order: str) -> Page | None:
        if await self.get_conversation(conversation_id, owner) is None:
            return None
        clauses, args = ["conversation_id = ?"], [conversation_id]
        if after is not None:
            row = await self.engine.fetchone(
                "SELECT position FROM conversation_items WHERE conversation_id = ? AND id = ?",
                (conversation_id, after))
            if row is None:
                return Page([], False)
            clauses.append("position > ?" if order == "asc" else "position < ?")
            args.append(row[0])
        rows = await self.engine.fetchall(
            f"SELECT body FROM conversation_items WHERE {' AND '.join(clauses)} ORDER BY position "
            f"{'ASC' if order == 'asc' else 'DESC'} LIMIT ?", (*args, limit + 1))
        return Page([orjson.loads(r[0]) for r in rows[:limit]], len(rows) > limit)

    async def conversation_item(self, conversation_id: str, item_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            "SELECT i.body FROM conversation_items i JOIN conversations c ON c.id = i.conversation_id "
            "WHERE i.conversation_id = ? AND i.id = ? AND c.owner = ?", (conversation_id, item_id, owner))
        return orjson.loads(row[0]) if row else None

    async def delete_conversation_item(self, conversation_id: str, item_id: str, owner: str) -> bool:
        return await self.engine.write([
            ("DELETE FROM conversation_items WHERE conversation_id = ? AND id = ? AND conversation_id IN "
             "(SELECT id FROM conversations WHERE id = ? AND owner = ?)",
             [(conversation_id, item_id, conversation_id, owner)]),
        ], count_last=True) > 0

    async def secret(self, name: str, new: str) -> str:
        await self.engine.write([("INSERT INTO rg_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                                  [(name, new)])])
        row = await self.engine.fetchone("SELECT value FROM rg_secrets WHERE name = ?", (name,))
        if row is None:  # the insert above made sure there is one
            raise RuntimeError(f"secret {name!r} missing after it was stored")
        value: str = row[0]
        return value

    async def reown(self, owners: dict[str, str]) -> None:
        """Rows owned by each old owner id pass to its new one (the owner hash changed), in one transaction."""
        pairs = [(new, old) for old, new in owners.items() if old != new]
        await self.engine.write([(f"UPDATE {table} SET owner = ? WHERE owner = ?", pairs)
                                 for table in ("responses", "items", "conversations")])

    async def ping(self) -> None:
        await self.engine.fetchone("SELECT 1", ())

    # -- background responses ------------------------------------------------------------------------------

    async def queue(self, response: dict[str, Any], owner: str, worker: str, lease_until: int) -> None:
        """A background response accepted by `worker`: its row exists (status queued) before it runs."""
        created = int(response.get("created_at") or time.time())
        await self.engine.write([(
            "INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, deleted, body, status, "
            "worker, lease_until) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            [(response["id"], owner, response.get("previous_response_id"), created, created + self.retention,
              orjson.dumps(response).decode(), response["status"], worker, lease_until)])])

    async def progress(self, response: dict[str, Any]) -> None:
        """The running state (status in_progress) of a background response, as GET shows it."""
        await self.engine.execute_count(
            f"UPDATE responses SET body = ?, status = ? WHERE id = ? AND status IN {ACTIVE}",
            (orjson.dumps(response).decode(), response["status"], response["id"]))

    async def renew(self, worker: str, lease_until: int) -> dict[str, bool]:
        """Extend the leases `worker` holds; returns its still-active responses → cancel requested."""
        await self.engine.execute_count(
            f"UPDATE responses SET lease_until = ? WHERE worker = ? AND status IN {ACTIVE}", (lease_until, worker))
        rows = await self.engine.fetchall(
            f"SELECT id, cancel_requested FROM responses WHERE worker = ? AND status IN {ACTIVE}", (worker,))
        return {row[0]: bool(row[1]) for row in rows}

    async def request_cancel(self, response_id: str, owner: str) -> bool:
        return await self.engine.execute_count(
            f"UPDATE responses SET cancel_requested = 1 WHERE id = ? AND owner = ? AND status IN {ACTIVE}",
            (response_id, owner)) > 0

    async def expired(self, now: int, response_id: str | None = None) -> list[tuple[str, dict[str, Any], bool]]:
        """Active background responses whose lease ran out: (id, body, cancel requested)."""
        sql = f"SELECT id, body, cancel_requested FROM responses WHERE status IN {ACTIVE} AND lease_until < ?"
        args: tuple[Any, ...] = (now,)
        if response_id is not None:
            sql += " AND id = ?"
            args = (now, response_id)
        return [(row[0], orjson.loads(row[1]), bool(row[2])) for row in await self.engine.fetchall(sql, args)]

    async def abandon(self, response: dict[str, Any], now: int) -> bool:
        """Store the final state of a response whose replica died; False if another replica was first."""
        return await self.engine.execute_count(
            "UPDATE responses SET body = ?, status = ?, worker = NULL, lease_until = NULL "
            f"WHERE id = ? AND status IN {ACTIVE} AND lease_until < ?",
            (orjson.dumps(response).decode(), response["status"], response["id"], now)) > 0

    async def append_events(self, rows: list[tuple[str, int, int, str]]) -> None:
        """(response id, first sequence number, last sequence number, their SSE frames) rows of event logs."""
        now = int(time.time())
        await self.engine.write([(
            "INSERT INTO response_events (response_id, seq, last_seq, created_at, frames) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING", [(rid, first, last, now, frames) for rid, first, last, frames in rows])])

    async def events_after(self, response_id: str, after: int, limit: int = 100) -> list[tuple[int, int, str]]:
        rows = await self.engine.fetchall(
            "SELECT seq, last_seq, frames FROM response_events WHERE response_id = ? AND last_seq > ? "
            "ORDER BY seq LIMIT ?", (response_id, after, limit))
        return [(row[0], row[1], row[2]) for row in rows]

    async def last_event(self, response_id: str) -> int:
        row = await self.engine.fetchone("SELECT max(last_seq) FROM response_events WHERE response_id = ?",
                                         (response_id,))
        return -1 if row is None or row[0] is None else row[0]

    async def purge(self, event_retention: float | None = None) -> int:
        """Expired responses go with their items and events; event logs also go after `event_retention` s."""
        now = int(time.time())
        if event_retention is not None:
            await self.engine.write([("DELETE FROM response_events WHERE created_at <= ?",
                                      [(now - int(event_retention),)])])
        return await self.engine.write([
            ("DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)",
             [(now,)]),
            ("DELETE FROM items WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)", [(now,)]),
            ("DELETE FROM responses WHERE expires_at <= ?", [(now,)]),
        ], count_last=True)


class _SQLite:
    """sqlite3 on its own threads, off the event loop: one writer thread (SQLite has one writer anyway) and
    one reader thread (WAL lets it read beside the writer). The busy timeout lets several worker processes
    on one host share the file.

    Writes are group-committed: the writes that arrive while the writer thread is busy wait for it together
    and go in its next trip as one transaction, each in a savepoint of its own (a failing write is rolled
    back alone and fails alone). Under load that is one thread hop and one commit for many responses
    instead of one each; a lone write goes at once, as before."""

    def __init__(self, path: Path):
        self.path = path
        self.label = f"sqlite:{path}"
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="rg-sqlite-write")
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="rg-sqlite-read")
        self.wconn: sqlite3.Connection | None = None
        self.rconn: sqlite3.Connection | None = None
        self.queue: list[tuple[Statements, asyncio.Future[int]]] = []  # writes awaiting the writer
        self.lock = threading.Lock()  # the queue is filled on the loop and taken on the writer thread

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    async def _on(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def _writer(self) -> sqlite3.Connection:
        if self.wconn is None:
            raise RuntimeError("the store is not open")
        return self.wconn

    def _reader(self) -> sqlite3.Connection:
        if self.rconn is None:
            raise RuntimeError("the store is not open")
        return self.rconn

    async def connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.wconn = await self._on(self.writer, self._open)
        self.rconn = await self._on(self.reader, self._open)

    async def close(self) -> None:
        for pool, conn in ((self.writer, self.wconn), (self.reader, self.rconn)):
            if conn is not None:
                await self._on(pool, conn.close)
            pool.shutdown(wait=False)
        self.wconn = self.rconn = None

    def _commit_group(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the writer thread: every queued write in one transaction, a savepoint each."""
        with self.lock:
            group, self.queue = self.queue, []
        conn = self._writer()
        results: list[int | Exception] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statements, _ in group:
                    conn.execute("SAVEPOINT w")
                    try:
                        count = 0
                        for sql, rows in statements:
                            if rows:
                                count = conn.executemany(sql, rows).rowcount
                    except Exception as exc:
                        conn.execute("ROLLBACK TO w")
                        results.append(exc)
                    else:
                        results.append(count)
                    conn.execute("RELEASE w")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except Exception as exc:  # the transaction itself failed (busy, disk): every write in it failed
            results = [exc] * len(group)
        loop.call_soon_threadsafe(_settle, [fut for _, fut in group], results)

    def _migrate(self, migrations: list[list[str]]) -> int:
        conn = self._writer()
        conn.execute("BEGIN IMMEDIATE")  # one migrator at a time, across processes too
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS rg_schema (version INTEGER NOT NULL)")
            current = conn.execute("SELECT max(version) FROM rg_schema").fetchone()[0] or 0
            for version, statements in enumerate(migrations, start=1):
                if version > current:
                    for sql in statements:
                        conn.execute(sql)
                    conn.execute("INSERT INTO rg_schema (version) VALUES (?)", (version,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(migrations)

    async def migrate(self, migrations: list[list[str]]) -> int:
        return await self._on(self.writer, self._migrate, migrations)

    async def write(self, statements: Statements, count_last: bool = False) -> int:
        """One transaction's statements; returns the row count of the last one that had rows."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        with self.lock:
            self.queue.append((statements, done))
            first = len(self.queue) == 1
        if first:  # the others join this trip while the writer thread is busy with an earlier one
            self.writer.submit(self._commit_group, loop)
        return await done

    async def execute_count(self, sql: str, args: tuple[Any, ...]) -> int:
        return await self._on(self.writer, lambda: self._writer().execute(sql, args).rowcount)

    async def fetchone(self, sql: str, args: tuple[Any, ...]) -> Row | None:
        row: Row | None = await self._on(self.reader, lambda: self._reader().execute(sql, args).fetchone())
        return row

    async def fetchall(self, sql: str, args: tuple[Any, ...]) -> list[Row]:
        return await self._on(self.reader, lambda: self._reader().execute(sql, args).fetchall())


def _settle(futures: list[asyncio.Future[int]], results: list[int | Exception]) -> None:
    for fut, result in zip(futures, results, strict=True):
        if fut.cancelled():
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)


def _pg(sql: str) -> str:
    """`?` placeholders → `$1, $2, ...`."""
    pieces = sql.split("?")
    return pieces[0] + "".join(f"${n}{piece}" for n, piece in enumerate(pieces[1:], start=1))


class _Postgres:
    def __init__(self, url: str):
        self.url = url
        parsed = urlparse(url)
        self.label = f"postgresql://{parsed.hostname or ''}:{parsed.port or 5432}{parsed.path}"  # no password
        self.pool: Any = None  # an asyncpg.Pool (asyncpg publishes no types)
        self.timeout = DB_TIMEOUT  # seconds for a connection from the pool, and for each statement

    async def connect(self) -> None:
        import asyncpg

        self.pool = await asyncpg.create_pool(self.url, min_size=1, max_size=10, timeout=self.timeout,
                                              command_timeout=self.timeout)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def migrate(self, migrations: list[list[str]]) -> int:
        async with self.pool.acquire(timeout=self.timeout) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(727274)")  # one migrator at a time
            await conn.execute("CREATE TABLE IF NOT EXISTS rg_schema (version INTEGER NOT NULL)")
            current = await conn.fetchval("SELECT max(version) FROM rg_schema") or 0
            for version, statements in enumerate(migrations, start=1):
                if version > current:
                    for sql in statements:
                        await conn.execute(sql)
                    await conn.execute("INSERT INTO rg_schema (version) VALUES ($1)", version)
        return len(migrations)

    async def write(self, statements: Statements, count_last: bool = False) -> int:
        with self._unavailable():
            return await self._write(statements, count_last)

    async def _write(self, statements: Statements, count_last: bool) -> int:
        count = 0
        async with self.pool.acquire(timeout=self.timeout) as conn, conn.transaction():
            for sql, rows in statements:
                if not rows:
                    continue
                if count_last and len(rows) == 1:
                    status = await conn.execute(_pg(sql), *rows[0])
                    count = int(status.rsplit(" ", 1)[-1])
                else:
                    await conn.executemany(_pg(sql), rows)
        return count

    async def execute_count(self, sql: str, args: tuple[Any, ...]) -> int:
        with self._unavailable():
            async with self.pool.acquire(timeout=self.timeout) as conn:
                status = await conn.execute(_pg(sql), *args)
        return int(status.rsplit(" ", 1)[-1])

    async def fetchone(self, sql: str, args: tuple[Any, ...]) -> Row | None:
        with self._unavailable():
            async with self.pool.acquire(timeout=self.timeout) as conn:
                row: Row | None = await conn.fetchrow(_pg(sql), *args)
        return row

    async def fetchall(self, sql: str, args: tuple[Any, ...]) -> list[Row]:
        with self._unavailable():
            async with self.pool.acquire(timeout=self.timeout) as conn:
                rows: list[Row] = await conn.fetch(_pg(sql), *args)
        return rows

    @contextlib.contextmanager
    def _unavailable(self) -> Iterator[None]:
        """A database that does not answer within the deadline, or whose connection broke, is a 503."""
        import asyncpg

        try:
            yield
        except (TimeoutError, OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError) as exc:
            log.warning("database %s unavailable: %s", self.label, exc.__class__.__name__)
            raise StoreUnavailable() from exc
