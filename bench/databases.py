"""The database a store benchmark runs on: a fresh SQLite file, or a PostgreSQL database created for the case
on the admin URL (`--pg`, default the local test server) and dropped after it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


async def _admin(admin: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def database(backend: str, tmpdir: Path, pg_admin: str = PG_ADMIN) -> AsyncIterator[str]:
    """What `--db` gets for `backend` ("sqlite" or "postgresql"), for the duration of the block."""
    if backend == "sqlite":
        yield str(tmpdir / f"responses-{uuid.uuid4().hex[:6]}.db")
        return
    name = f"rg_bench_{uuid.uuid4().hex[:10]}"
    await _admin(pg_admin, f'CREATE DATABASE "{name}"')
    try:
        yield pg_admin.rpartition("/")[0] + "/" + name
    finally:
        await _admin(pg_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
