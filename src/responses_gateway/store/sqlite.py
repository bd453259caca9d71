"""The embedded engine: SQLite in WAL mode, one file, off the event loop.

The default store (a file in the user's data directory, `default_sqlite_path`); every worker process on the
host shares the file, and `responses-gateway db` commands may open it beside a running server.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .. import metrics
from ..errors import StoreUnavailable
from .base import DB_TIMEOUT, Row, Statements, merged
from .hostlock import HostLock
from .thread import Worker

log = logging.getLogger("responses_gateway.store")

T = TypeVar("T")
Work = Statements | Callable[[sqlite3.Connection], int]  # a write: statements, or a function of the connection
CHECKPOINT_EVERY = 256  # writes between WAL checkpoints (a save writes a few pages; SQLite's default: 1000 pages)
CHECKPOINT_SECONDS = 1.0  # and at most this long between them while writes go on


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """The database's write lock is held by another connection (SQLITE_BUSY)."""
    return getattr(exc, "sqlite_errorname", "") == "SQLITE_BUSY" or "locked" in str(exc)


def default_sqlite_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "responses-gateway" / "responses.db"



def open_connection(path: str | Path, timeout: float, busy_timeout: float) -> sqlite3.Connection:
    """A WAL connection whose busy timeout is `busy_timeout` once open; opening may wait `timeout` (the
    store's), since the workers and replicas all start at once. Switching a new file to WAL takes its lock,
    and SQLite answers a connection that finds another switching it `database is locked` at once, past the
    busy handler (6 connections at once: about one try in 16); that answer is retried until `timeout`."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    except BaseException:
        conn.close()
        raise
    return conn

class SQLite:
    """sqlite3 on its own threads, off the event loop: one writer thread (SQLite has one writer anyway), one
    reader thread (WAL lets it read beside the writer), and one that checkpoints the WAL.

    Writes are group-committed: the writes that arrive while the writer thread is busy — or while another
    process holds the write lock — wait for it together and go in its next trip as one transaction. The
    writes of a trip that need no row count of their own and share a shape (every response's save) are
    merged, each statement once with all their rows (base.merged), which is what the lock is held for;
    the others each get a savepoint. A failing write is rolled back alone and fails alone (a failing merge
    is undone and its writes go one by one). Under load that is one thread hop and one commit for many
    responses instead of one each; a lone write goes at once.

    Across processes, a trip first takes the host's writer lock (hostlock.py): a worker waiting for another
    one's transaction is woken the moment it commits, where SQLite's busy handler would sleep. The wait has
    the store's deadline (--db-timeout); past it the trip's writes fail with StoreUnavailable. Checkpoints
    run outside that lock (`_maybe_checkpoint`)."""

    def __init__(self, path: Path, timeout: float = DB_TIMEOUT):
        self.path = path
        self.label = f"sqlite:{path}"
        self.timeout = timeout  # seconds a write may wait for the write lock
        self.batch_seconds = 0.05  # a write holds every other one: a purge's batch must be short
        self.writer = Worker("rg-sqlite-write")
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="rg-sqlite-read")
        self.checkpointer = ThreadPoolExecutor(1, thread_name_prefix="rg-sqlite-checkpoint")
        self.wconn: sqlite3.Connection | None = None
        self.rconn: sqlite3.Connection | None = None
        self.cconn: sqlite3.Connection | None = None
        self.unchecked = 0  # writes committed since the last checkpoint began (writer thread)
        self.checked_at = time.monotonic()  # when it began
        self.checkpointing = threading.Event()  # set while a checkpoint runs
        self.hostlock: HostLock | None = None
        self.queue: list[Queued] = []  # writes awaiting the writer
        self.lock = threading.Lock()  # the queue is filled on the loop and taken on the writer thread

    def _open(self, busy_timeout: float) -> sqlite3.Connection:
        return open_connection(self.path, self.timeout, busy_timeout)

    async def _on(self, pool: Executor, fn: Callable[..., T], *args: Any) -> T:
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
        # The writer never leaves a wait to the busy handler unless it must (see `_begin`): timeout 0. Nor
        # does it checkpoint the WAL on commit, holding the host's lock meanwhile: `_checkpoint` does.
        self.wconn = await self._on(self.writer, self._open, 0)
        await self._on(self.writer, self.wconn.execute, "PRAGMA wal_autocheckpoint = 0")
        self.rconn = await self._on(self.reader, self._open, self.timeout)
        self.cconn = await self._on(self.checkpointer, self._open, 0)
        self.hostlock = HostLock(self.path.with_name(self.path.name + "-writer"))  # once the file is usable

    async def close(self) -> None:
        for pool, conn in ((self.writer, self.wconn), (self.reader, self.rconn), (self.checkpointer, self.cconn)):
            if conn is not None:
                await self._on(pool, conn.close)
            pool.shutdown(wait=False)
        self.wconn = self.rconn = self.cconn = None
        if self.hostlock is not None:
            self.hostlock.close()
            self.hostlock = None

    def _commit_group(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the writer thread: the queued writes in one transaction, a savepoint each (or all merged),
        under the host's writer lock."""
        with self.lock:
            group, self.queue = self.queue, []
        if not group:
            return
        trip = Trip(group)
        try:
            if not self._lock(trip, loop):
                return  # it waited past the deadline: its writes failed already, and the lock went unused
        except Exception as exc:
            trip.settle(loop, [exc] * len(group))
            return
        try:
            trip.settle(loop, self._transaction(group))
        finally:
            self._unlock()
        self.unchecked += len(group)
        self._maybe_checkpoint()

    def _maybe_checkpoint(self) -> None:
        """On the writer thread, the host's lock released: every CHECKPOINT_EVERY writes or CHECKPOINT_SECONDS
        of writing (large writes: a purge's batches, big responses), whichever comes first, copy the WAL back
        into the database on the checkpointer thread — a PASSIVE checkpoint, which takes no write lock, so
        writers (here and in the other processes) go on meanwhile. SQLite's own automatic checkpoint would
        run inside a commit, with the host's lock held."""
        due = self.unchecked >= CHECKPOINT_EVERY or time.monotonic() - self.checked_at >= CHECKPOINT_SECONDS
        if not due or self.checkpointing.is_set():
            return
        self.unchecked, self.checked_at = 0, time.monotonic()
        self.checkpointing.set()
        self.checkpointer.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        try:
            if self.cconn is not None:
                self.cconn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # another process checkpoints, or the store is closing: next time
            log.debug("checkpoint of %s skipped: %s", self.label, exc)
        finally:
            self.checkpointing.clear()

    def _transaction(self, group: list[Queued]) -> list[int | Exception]:
        """One group's transaction, the host's lock held: SQLite's lock (BEGIN IMMEDIATE), the writes, COMMIT.
        Each write's result: its row count, or the exception that failed it (and only it)."""
        conn = self._writer()
        try:
            self._begin(conn, group)
        except Exception as exc:
            return [exc] * len(group)
        results: dict[int, int | Exception] = {}
        try:
            try:
                if len(group) == 1:  # alone in its transaction: a failure rolls back the transaction instead
                    results[0] = run(conn, group[0].work)
                    conn.execute("COMMIT")
                    return [results[0]]
                together = [i for i, queued in enumerate(group) if queued.mergeable]
                if len(together) > 1 and self._run_merged(conn, [group[i].work for i in together]):
                    results.update((i, 0) for i in together)
                for i, queued in enumerate(group):
                    if i in results:
                        continue
                    conn.execute("SAVEPOINT w")
                    try:
                        results[i] = run(conn, queued.work)
                    except Exception as exc:
                        conn.execute("ROLLBACK TO w")
                        results[i] = exc
                    conn.execute("RELEASE w")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except Exception as exc:  # the transaction itself failed (disk full, I/O): every write in it failed
            return [exc] * len(group)
        return [results[i] for i in range(len(group))]

    def _run_merged(self, conn: sqlite3.Connection, works: list[Work]) -> bool:
        """The writes that need no row count, merged (base.merged): each statement once with all their rows,
        which is what the write lock is held for. False, with nothing of them left, if one of them fails:
        they then go one by one, each in a savepoint, so that only the bad one fails."""
        conn.execute("SAVEPOINT merged")
        try:
            for sql, rows in merged([work for work in works if not callable(work)]):
                conn.executemany(sql, rows)
        except Exception:
            conn.execute("ROLLBACK TO merged")
            conn.execute("RELEASE merged")
            return False
        conn.execute("RELEASE merged")
        return True

    def _lock(self, trip: Trip, loop: asyncio.AbstractEventLoop) -> bool:
        """On the writer thread: the host's writer lock. False if the trip was given up while it waited (its
        writes failed with StoreUnavailable at the deadline); the writes of a trip that found it held are
        counted as `host` waits (queued in the kernel, woken at its release)."""
        hostlock = self._hostlock()
        if hostlock.try_acquire():
            return True
        metrics.store_lock_waits.labels("host").inc(len(trip.group))
        loop.call_soon_threadsafe(loop.call_later, self.timeout, self._give_up, trip)
        hostlock.acquire()
        if trip.start():
            return True
        hostlock.release()
        return False

    def _begin(self, conn: sqlite3.Connection, group: list[Queued]) -> None:
        """SQLite's write lock (BEGIN IMMEDIATE), free once the host's is held — unless a process outside
        the gateway holds it: then SQLite's busy handler waits (it sleeps), counted as `busy`. Each write's
        wait, from its submission to this transaction's start — behind this process's writer, then for
        the locks — is observed (`responses_gateway_store_lock_wait_seconds`)."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            metrics.store_lock_waits.labels("busy").inc(len(group))
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute("PRAGMA busy_timeout = 0")
        now = time.perf_counter()
        for queued in group:
            metrics.store_lock_wait.observe(now - queued.since)

    def _unlock(self) -> None:
        self._hostlock().release()

    def _give_up(self, trip: Trip) -> None:
        """On the loop, `timeout` seconds after a trip began waiting for the host's lock: if it still waits,
        its writes fail (503) now; the writer thread releases the lock unused when it is granted."""
        if trip.abandon():
            log.warning("database %s unavailable: its writer lock was not released within %g s", self.label,
                        self.timeout)
            for queued in trip.group:
                if not queued.done.done():
                    queued.done.set_exception(StoreUnavailable())

    def _hostlock(self) -> HostLock:
        if self.hostlock is None:
            raise RuntimeError("the store is not open")
        return self.hostlock

    def _migrate(self, migrations: list[list[str]], conn: sqlite3.Connection) -> int:
        conn.execute("CREATE TABLE IF NOT EXISTS rg_schema (version INTEGER NOT NULL)")
        current = conn.execute("SELECT max(version) FROM rg_schema").fetchone()[0] or 0
        for version, statements in enumerate(migrations, start=1):
            if version > current:
                for sql in statements:
                    conn.execute(sql)
                conn.execute("INSERT INTO rg_schema (version) VALUES (?)", (version,))
        return len(migrations)

    async def migrate(self, migrations: list[list[str]]) -> int:
        """A write like any other (one migrator at a time, across processes too)."""
        return await self._submit(functools.partial(self._migrate, migrations))

    async def write(self, statements: Statements, count_last: bool = False) -> int:
        """One transaction's statements; with `count_last`, returns the row count of the last one that had
        rows (a write without one may be merged with others of its shape, and returns 0)."""
        return await self._submit(statements, mergeable=not count_last)

    async def _submit(self, work: Work, mergeable: bool = False) -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        with self.lock:
            self.queue.append(Queued(work, done, time.perf_counter(), mergeable))
            first = len(self.queue) == 1
        if first:  # the others join this trip while the writer thread is busy with an earlier one
            self.writer.hand(self._commit_group, loop)
        return await done

    async def execute_count(self, sql: str, args: tuple[Any, ...]) -> int:
        """One statement as a write of its own (group-committed, under the writer lock like every write)."""
        return await self.write([(sql, [args])], count_last=True)

    async def fetchone(self, sql: str, args: tuple[Any, ...]) -> Row | None:
        row: Row | None = await self._on(self.reader, lambda: self._reader().execute(sql, args).fetchone())
        return row

    async def fetchall(self, sql: str, args: tuple[Any, ...]) -> list[Row]:
        return await self._on(self.reader, lambda: self._reader().execute(sql, args).fetchall())


def run(conn: sqlite3.Connection, work: Work) -> int:
    """One write inside the trip's transaction: its statements (the row count of the last one that had
    rows), or a function of the connection (a migration)."""
    if callable(work):
        return work(conn)
    count = 0
    for sql, rows in work:
        if rows:
            count = conn.executemany(sql, rows).rowcount
    return count


@dataclass
class Queued:
    work: Work
    done: asyncio.Future[int]
    since: float  # time.perf_counter() when it was submitted
    mergeable: bool  # needs no row count of its own


class Trip:
    """A group of writes on its way through the writer thread. Once it waits for the host's lock, either the
    writer starts it (when the lock is granted) or the loop gives it up (at the deadline) — whichever is
    first; the other then leaves it alone."""

    def __init__(self, group: list[Queued]):
        self.group = group
        self.state = "waiting"
        self.guard = threading.Lock()

    def start(self) -> bool:
        with self.guard:
            if self.state == "abandoned":
                return False
            self.state = "started"
            return True

    def abandon(self) -> bool:
        with self.guard:
            if self.state == "started":
                return False
            self.state = "abandoned"
            return True

    def settle(self, loop: asyncio.AbstractEventLoop, results: list[int | Exception]) -> None:
        loop.call_soon_threadsafe(_settle, [queued.done for queued in self.group], results)


def _settle(futures: list[asyncio.Future[int]], results: list[int | Exception]) -> None:
    for fut, result in zip(futures, results, strict=True):
        if fut.done():  # cancelled by its writer, or failed at the deadline
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)
