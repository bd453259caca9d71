"""The shared engine: PostgreSQL through an asyncpg pool, for several replicas on one database.

Every statement and every wait for a pooled connection has the store's deadline (`--db-timeout`); a database
that does not answer within it, or whose connection broke, fails the request with `StoreUnavailable` (503).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

from .. import metrics
from ..errors import StoreUnavailable
from .base import DB_TIMEOUT, Row, Statements, merged

log = logging.getLogger("responses_gateway.store")


def numbered(sql: str) -> str:
    """`?` placeholders → `$1, $2, ...`."""
    pieces = sql.split("?")
    return pieces[0] + "".join(f"${n}{piece}" for n, piece in enumerate(pieces[1:], start=1))


FLUSHERS = 4  # groups being committed at once, per process (the pool holds 10 connections)
Queued = tuple[Statements, "asyncio.Future[int]", float]  # a write, its result, when it was submitted


class Postgres:
    """asyncpg's pool; statements written with `?` are numbered for PostgreSQL.

    Writes are group-committed like SQLite's: the writes that arrive while the groups in flight are being
    committed wait together and go as the next group, in one transaction (at most FLUSHERS groups at once,
    each on a connection of its own, so that one group's round trips and commit overlap the next's). The
    writes of a group that share a shape (the same statements, as every response's save does) are merged —
    each statement once, with all their rows, one pipelined `executemany` — so that under load a hundred
    saves cost a handful of round trips and one commit instead of a hundred. If the group fails on a data
    error (one write's duplicate id), each write is run again alone, so that only the bad one fails; a
    connection that fails fails the group (StoreUnavailable), at once. A write that needs its row count
    goes alone."""

    def __init__(self, url: str):
        self.url = url
        parsed = urlparse(url)
        self.label = f"postgresql://{parsed.hostname or ''}:{parsed.port or 5432}{parsed.path}"  # no password
        self.pool: Any = None  # an asyncpg.Pool (asyncpg publishes no types)
        self.timeout = DB_TIMEOUT  # seconds for a connection from the pool, and for each statement
        self.queue: list[Queued] = []  # writes awaiting the next group
        self.flushers: set[asyncio.Task[None]] = set()  # the tasks committing groups, while there are any

    @property
    def batch_seconds(self) -> float:
        """Row locks hold only the rows a batch deletes (nobody else's): long enough to amortize the commit,
        a twentieth of the statement deadline at most."""
        return min(0.5, self.timeout / 20)

    async def connect(self) -> None:
        import asyncpg

        # JIT off: every statement here is a short lookup or write, and a misestimate (a table not analyzed
        # yet) would otherwise spend a JIT compilation on each one.
        self.pool = await asyncpg.create_pool(self.url, min_size=1, max_size=10, timeout=self.timeout,
                                              command_timeout=self.timeout, server_settings={"jit": "off"})

    async def close(self) -> None:
        if self.flushers:  # the writes already queued go in first
            await asyncio.gather(*self.flushers, return_exceptions=True)
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
        if count_last:
            with self._unavailable():
                return await self._write(statements, count_last)
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.queue.append((statements, done, time.perf_counter()))
        if len(self.flushers) < FLUSHERS:
            flusher = asyncio.create_task(self._flush())
            self.flushers.add(flusher)
            flusher.add_done_callback(self.flushers.discard)
        return await done

    async def _flush(self) -> None:
        """Commit groups while writes keep arriving; each group is what queued during the one before."""
        group: list[Queued] = []
        try:
            while self.queue:
                group, self.queue = self.queue, []
                await self._commit_group(group)
        except BaseException as exc:  # cancelled with the loop, or a bug: no writer may wait for ever
            for _, done, _ in group + self.queue:
                _settle(done, exc if isinstance(exc, Exception) else StoreUnavailable())
            self.queue = []
            raise

    async def _commit_group(self, group: list[Queued]) -> None:
        import asyncpg

        try:
            with self._unavailable():
                async with self._writing([since for _, _, since in group]) as conn, conn.transaction():
                    for sql, rows in merged([statements for statements, _, _ in group]):
                        await conn.executemany(numbered(sql), rows)
        except StoreUnavailable as exc:
            for _, done, _ in group:
                _settle(done, exc)
            return
        except asyncpg.PostgresError as exc:
            if len(group) == 1:
                _settle(group[0][1], exc)
                return
            down: StoreUnavailable | None = None
            for statements, done, _ in group:  # which one was it? each alone, so that only it fails
                if down is not None:  # the database stopped answering meanwhile: the rest fail at once
                    _settle(done, down)
                    continue
                try:
                    with self._unavailable():
                        _settle(done, await self._write(statements, False))
                except StoreUnavailable as unavailable:
                    down = unavailable
                    _settle(done, unavailable)
                except Exception as alone:
                    _settle(done, alone)
            return
        for _, done, _ in group:
            _settle(done, 0)

    @contextlib.asynccontextmanager
    async def _writing(self, submitted: list[float] | None = None) -> AsyncIterator[Any]:
        """A pooled connection for writes submitted at `submitted` (perf_counter; default: now). Each one's
        wait until its transaction starts is observed like SQLite's wait for the write lock; none idle in
        the pool counts as a `pool` wait."""
        since = submitted or [time.perf_counter()]
        if self.pool.get_idle_size() == 0:
            metrics.store_lock_waits.labels("pool").inc(len(since))
        async with self.pool.acquire(timeout=self.timeout) as conn:
            now = time.perf_counter()
            for started in since:
                metrics.store_lock_wait.observe(now - started)
            yield conn

    async def _write(self, statements: Statements, count_last: bool) -> int:
        count = 0
        async with self._writing() as conn, conn.transaction():
            for sql, rows in statements:
                if not rows:
                    continue
                if count_last and len(rows) == 1:
                    status = await conn.execute(numbered(sql), *rows[0])
                    count = int(status.rsplit(" ", 1)[-1])
                else:
                    await conn.executemany(numbered(sql), rows)
        return count

    async def execute_count(self, sql: str, args: tuple[Any, ...]) -> int:
        with self._unavailable():
            async with self._writing() as conn:
                status = await conn.execute(numbered(sql), *args)
        return int(status.rsplit(" ", 1)[-1])

    async def fetchone(self, sql: str, args: tuple[Any, ...]) -> Row | None:
        with self._unavailable():
            async with self.pool.acquire(timeout=self.timeout) as conn:
                row: Row | None = await conn.fetchrow(numbered(sql), *args)
        return row

    async def fetchall(self, sql: str, args: tuple[Any, ...]) -> list[Row]:
        with self._unavailable():
            async with self.pool.acquire(timeout=self.timeout) as conn:
                rows: list[Row] = await conn.fetch(numbered(sql), *args)
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


def _settle(done: asyncio.Future[int], result: int | BaseException) -> None:
    if done.done():  # its writer stopped waiting (cancelled): the write went in all the same
        return
    if isinstance(result, BaseException):
        done.set_exception(result)
    else:
        done.set_result(result)
