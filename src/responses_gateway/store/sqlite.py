"""The embedded engine: SQLite in WAL mode, one file, off the event loop.

The default store (a file in the user's data directory, `default_sqlite_path`); every worker process on the
host shares the file, and `responses-gateway db` commands may open it beside a running server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from .. import metrics
from ..errors import StoreUnavailable
from .base import DB_TIMEOUT, Row, Statements
from .hostlock import HostLock

log = logging.getLogger("responses_gateway.store")

T = TypeVar("T")


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """The database's write lock is held by another connection (SQLITE_BUSY)."""
    return getattr(exc, "sqlite_errorname", "") == "SQLITE_BUSY" or "locked" in str(exc)


def default_sqlite_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "responses-gateway" / "responses.db"


class SQLite:
    """sqlite3 on its own threads, off the event loop: one writer thread (SQLite has one writer anyway) and
    one reader thread (WAL lets it read beside the writer).

    Writes are group-committed: the writes that arrive while the writer thread is busy — or while another
    process holds the write lock — wait for it together and go in its next trip as one transaction, each in a
    savepoint of its own (a failing write is rolled back alone and fails alone). Under load that is one
    thread hop and one commit for many responses instead of one each; a lone write goes at once.

    Across processes, a trip first takes the host's writer lock (hostlock.py): a worker waiting for another
    one's transaction is woken the moment it commits, where SQLite's busy handler would sleep. The wait has
    the store's deadline (--db-timeout); past it the trip's writes fail with StoreUnavailable."""

    def __init__(self, path: Path, timeout: float = DB_TIMEOUT):
        self.path = path
        self.label = f"sqlite:{path}"
        self.timeout = timeout  # seconds a write may wait for the write lock
        self.batch_seconds = 0.05  # a write holds every other one: a purge's batch must be short
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="rg-sqlite-write")
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="rg-sqlite-read")
        self.wconn: sqlite3.Connection | None = None
        self.rconn: sqlite3.Connection | None = None
        self.hostlock: HostLock | None = None
        self.queue: list[tuple[Statements, asyncio.Future[int]]] = []  # writes awaiting the writer
        self.lock = threading.Lock()  # the queue is filled on the loop and taken on the writer thread

    def _open(self, busy_timeout: float) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
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
        self.hostlock = HostLock(self.path.with_name(self.path.name + "-writer"))
        # The writer never leaves a wait to the busy handler unless it must (see `_locked`): timeout 0.
        self.wconn = await self._on(self.writer, self._open, 0)
        self.rconn = await self._on(self.reader, self._open, self.timeout)

    async def close(self) -> None:
        for pool, conn in ((self.writer, self.wconn), (self.reader, self.rconn)):
            if conn is not None:
                await self._on(pool, conn.close)
            pool.shutdown(wait=False)
        self.wconn = self.rconn = None
        if self.hostlock is not None:
            self.hostlock.close()
            self.hostlock = None

    @contextlib.contextmanager
    def _locked(self, conn: sqlite3.Connection, writes: int) -> Iterator[None]:
        """On the writer thread: the host's writer lock, then SQLite's (BEGIN IMMEDIATE), for the block — a
        transaction the block commits or rolls back. How long that took is observed once per write it
        carries (`responses_gateway_store_lock_wait_seconds`), and a write that had to wait is counted by
        how: `host` (queued on the host's lock) or `busy` (SQLite's busy handler, which sleeps: only when a
        process outside the gateway holds SQLite's lock)."""
        hostlock = self.hostlock
        if hostlock is None:
            raise RuntimeError("the store is not open")
        started = time.perf_counter()
        try:
            hostlock.acquire(self.timeout, lambda: metrics.store_lock_waits.labels("host").inc(writes))
        except TimeoutError as exc:
            log.warning("database %s unavailable: %s", self.label, exc)
            raise StoreUnavailable() from exc
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                metrics.store_lock_waits.labels("busy").inc(writes)
                conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                finally:
                    conn.execute("PRAGMA busy_timeout = 0")
            waited = time.perf_counter() - started
            for _ in range(writes):
                metrics.store_lock_wait.observe(waited)
            yield
        finally:
            hostlock.release()

    def _commit_group(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the writer thread: every queued write in one transaction, a savepoint each."""
        with self.lock:
            group, self.queue = self.queue, []
        conn = self._writer()
        results: list[int | Exception] = []
        try:
            with self._locked(conn, len(group)):
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
        except Exception as exc:  # the transaction itself failed (lock wait, disk): every write in it failed
            results = [exc] * len(group)
        loop.call_soon_threadsafe(_settle, [fut for _, fut in group], results)

    def _migrate(self, migrations: list[list[str]]) -> int:
        conn = self._writer()
        with self._locked(conn, 1):  # one migrator at a time, across processes too
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
        """One statement as a write of its own (group-committed, under the writer lock like every write)."""
        return await self.write([(sql, [args])], count_last=True)

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
