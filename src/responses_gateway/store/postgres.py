"""The shared engine: PostgreSQL through an asyncpg pool, for several replicas on one database.

Every statement and every wait for a pooled connection has the store's deadline (`--db-timeout`); a database
that does not answer within it, or whose connection broke, fails the request with `StoreUnavailable` (503).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

from .. import metrics
from ..errors import StoreUnavailable
from .base import DB_TIMEOUT, Row, Statements

log = logging.getLogger("responses_gateway.store")


def numbered(sql: str) -> str:
    """`?` placeholders → `$1, $2, ...`."""
    pieces = sql.split("?")
    return pieces[0] + "".join(f"${n}{piece}" for n, piece in enumerate(pieces[1:], start=1))


class Postgres:
    def __init__(self, url: str):
        self.url = url
        parsed = urlparse(url)
        self.label = f"postgresql://{parsed.hostname or ''}:{parsed.port or 5432}{parsed.path}"  # no password
        self.pool: Any = None  # an asyncpg.Pool (asyncpg publishes no types)
        self.timeout = DB_TIMEOUT  # seconds for a connection from the pool, and for each statement

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

    @contextlib.asynccontextmanager
    async def _writing(self, writes: int = 1) -> AsyncIterator[Any]:
        """A pooled connection for a write, its wait measured like SQLite's wait for the write lock (no
        connection idle: counted as a `pool` wait)."""
        started = time.perf_counter()
        if self.pool.get_idle_size() == 0:
            metrics.store_lock_waits.labels("pool").inc(writes)
        async with self.pool.acquire(timeout=self.timeout) as conn:
            waited = time.perf_counter() - started
            for _ in range(writes):
                metrics.store_lock_wait.observe(waited)
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
