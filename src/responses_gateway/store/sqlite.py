"""The embedded engine: SQLite in WAL mode, one file, off the event loop.

The default store (a file in the user's data directory, `default_sqlite_path`); several worker processes on
one host share the file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from .base import Row, Statements

T = TypeVar("T")


def default_sqlite_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "responses-gateway" / "responses.db"


class SQLite:
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
        self.batch_seconds = 0.05  # a write holds every other one: a purge's batch must be short
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
