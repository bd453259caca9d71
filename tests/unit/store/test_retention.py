"""store/retention.py: what a purge removes and what it keeps."""

from __future__ import annotations

import asyncio
import time

import pytest

from responses_gateway.store import open_store

from .conftest import TABLES, expired_backlog, ids, message, response

pytestmark = pytest.mark.anyio


async def count(store, table: str, where: str = "1 = 1", *args) -> int:
    row = await store.engine.fetchone(f"SELECT count(*) FROM {table} WHERE {where}", args)
    return int(row[0])


async def test_purge_removes_expired_responses_with_their_items_and_events_and_nothing_else(store):
    old = int(time.time()) - store.retention - 5
    await store.save(response("resp_old", created_at=old), [message("in_old", "x", "user")], "")
    await store.save(response("resp_new"), [message("in_new", "y", "user")], "")
    await store.create_conversation({"id": "conv_a", "created_at": old, "metadata": {}}, [message("c0", "z")], "")
    await store.secret("owner", "s")
    await store.append_events([("resp_old", 0, 3, "frames"), ("resp_new", 0, 3, "frames")])
    assert await store.purge() == 1
    assert await count(store, "responses", "id = ?", "resp_old") == 0
    assert await count(store, "items", "response_id = ?", "resp_old") == 0
    assert await count(store, "response_events", "response_id = ?", "resp_old") == 0
    assert ids(await store.history("resp_new", "")) == ["in_new", "msg_resp_new"]
    assert await store.last_event("resp_new") == 3
    assert ids(await store.conversation_history("conv_a", "")) == ["c0"]  # conversations never expire
    assert await store.secret("owner", "other") == "s"
    assert await store.purge() == 0


async def test_event_logs_go_after_their_own_retention(store):
    await store.save(response("resp_a"), [], "")
    await store.append_events([("resp_a", 0, 1, "frames")])
    assert await store.purge(event_retention=3600) == 0
    assert await store.last_event("resp_a") == 1
    await store.purge(event_retention=-1)  # everything logged is older than that
    assert await store.last_event("resp_a") == -1
    assert await store.get("resp_a", "") is not None  # the response itself stays


async def rows(store, table: str) -> int:
    return await count(store, table)


async def test_a_large_backlog_goes_in_batches_and_writes_pass_between_them(store):
    """A purge deletes its backlog a batch at a time: a save made while it runs waits for one batch, not for
    the whole backlog (on SQLite one purge statement held every write for as long as it ran)."""
    await expired_backlog(store, 3000)
    purge = asyncio.create_task(store.purge(event_retention=None, batch=200))
    while await rows(store, "responses") == 3000 and not purge.done():
        await asyncio.sleep(0.001)  # until the first batch is committed
    await store.save(response("resp_new"), [], "")
    left_when_saved = await count(store, "responses", "id <> ?", "resp_new")
    assert await purge == 3000
    assert 0 < left_when_saved < 3000, left_when_saved
    assert await rows(store, "response_events") == 0
    assert ids(await store.history("resp_new", "")) == ["msg_resp_new"] and await rows(store, "items") == 1


async def test_a_backlog_longer_than_the_statement_deadline_still_shrinks(db_url):
    """PostgreSQL: every statement has --db-timeout. A backlog whose deletion takes longer than that (made
    slow here by a trigger that sleeps 0.2 ms per deleted item) used to roll back on every purge, so it never
    shrank; in batches each transaction fits in the deadline and the whole backlog goes."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no statement deadline (its purge is bounded by batches: the test above)")
    import asyncpg

    store = open_store(db_url, timeout=2.0)
    await store.open()
    await store.upgrade()
    admin = await asyncpg.connect(db_url, timeout=5)
    try:
        await store.engine.write([(f"DELETE FROM {table}", [()]) for table in TABLES])
        await expired_backlog(store, 12_000)  # 24,000 items: 4.8 s of trigger in one statement
        await admin.execute("""
            CREATE FUNCTION rg_test_slow_delete() RETURNS trigger AS $$
            BEGIN PERFORM pg_sleep((SELECT count(*) FROM gone) * 0.0002); RETURN NULL; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER rg_test_slow AFTER DELETE ON items REFERENCING OLD TABLE AS gone
                FOR EACH STATEMENT EXECUTE FUNCTION rg_test_slow_delete();""")
        assert await store.purge() == 12_000  # batches of 1,000: 0.4 s each
        assert await rows(store, "responses") == 0 and await rows(store, "items") == 0
    finally:
        await admin.execute("DROP TRIGGER IF EXISTS rg_test_slow ON items; "
                            "DROP FUNCTION IF EXISTS rg_test_slow_delete()")
        await admin.close()
        await store.close()
