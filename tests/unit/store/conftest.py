"""The store on its own, against a real database: a fresh SQLite file, or this run's PostgreSQL database
(tests/support/backends.py) with every table emptied. No server: each test calls the store's methods.

    async def test_x(store): await store.save(...)   # runs once per backend (anyio, asyncio)
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from responses_gateway.store import SQLStore, open_store
from tests.support import backends

pg_database = backends.pg_database

TABLES = ("response_events", "items", "responses", "conversation_items", "conversations", "rg_secrets")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=backends.BACKENDS)
def db_url(request, tmp_path) -> str:
    """What --db gets: a fresh SQLite file, or this run's PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "responses.db")
    return request.getfixturevalue("pg_database")


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SQLStore]:
    """An open, migrated, empty store."""
    opened = open_store(db_url)
    await opened.open()
    await opened.upgrade()
    await opened.engine.write([(f"DELETE FROM {table}", [()]) for table in TABLES])
    try:
        yield opened
    finally:
        await opened.close()


def response(rid: str, *, created_at: int | None = None, previous: str | None = None, status: str = "completed",
             output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A finished response as the composer stores it (only what the store reads)."""
    return {"id": rid, "object": "response", "created_at": created_at or int(time.time()), "status": status,
            "previous_response_id": previous,
            "output": output if output is not None else [message(f"msg_{rid}", f"answer of {rid}")]}


def message(mid: str, text: str, role: str = "assistant") -> dict[str, Any]:
    return {"id": mid, "type": "message", "role": role, "status": "completed",
            "content": [{"type": "output_text" if role == "assistant" else "input_text", "text": text}]}


def ids(items: list[dict[str, Any]] | None) -> list[str]:
    assert items is not None
    return [item["id"] for item in items]


async def expired_backlog(store: SQLStore, n: int, prefix: str = "resp_old") -> None:
    """`n` expired responses (two items and an event log run each), written straight into the tables."""
    body = orjson.dumps(response("resp_x")).decode()
    ids = [f"{prefix}_{i}" for i in range(n)]
    await store.engine.write([
        ("INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, deleted, body, status) "
         "VALUES (?, '', NULL, 1, ?, 0, ?, 'completed')", [(rid, 1 + i % 1000, body) for i, rid in enumerate(ids)]),
        ("INSERT INTO items (response_id, part, position, id, owner, body) VALUES (?, ?, 0, ?, '', ?)",
         [(rid, part, f"item_{rid}_{part}", body) for rid in ids for part in (0, 1)]),
        ("INSERT INTO response_events (response_id, seq, last_seq, created_at, frames) VALUES (?, 0, 3, ?, 'f')",
         [(rid, int(time.time())) for rid in ids]),
    ])
