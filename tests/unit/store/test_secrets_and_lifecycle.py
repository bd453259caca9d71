"""store/secrets.py (first writer wins, owners re-keyed) and sqlstore.py (migrations, ping, reopening)."""

from __future__ import annotations

import asyncio

import pytest

from responses_gateway.store import open_store
from responses_gateway.store.schema import MIGRATIONS

from .conftest import ids, message, response

pytestmark = pytest.mark.anyio


async def test_the_first_secret_written_is_the_one_everyone_reads(store, db_url):
    other = open_store(db_url)  # another replica on the same database
    await other.open()
    try:
        values = await asyncio.gather(*[s.secret("owner", f"v{i}") for i, s in enumerate([store, other] * 5)])
        assert len(set(values)) == 1
        assert await store.secret("owner", "later") == values[0]
        assert await other.secret("compaction", "c1") == "c1"  # another name, its own value
    finally:
        await other.close()


async def test_reown_moves_every_owned_row_to_the_new_owner(store):
    await store.save(response("resp_a"), [message("in_a", "hi", "user")], "old")
    await store.create_conversation({"id": "conv_a", "created_at": 1, "metadata": {}}, [], "old")
    await store.save(response("resp_keep"), [], "someone-else")
    await store.reown({"old": "new", "same": "same"})
    assert await store.get("resp_a", "old") is None
    assert ids(await store.history("resp_a", "new")) == ["in_a", "msg_resp_a"]
    assert set(await store.items_by_id(["in_a"], "new")) == {"in_a"}
    assert await store.get_conversation("conv_a", "new") is not None
    assert await store.get("resp_keep", "someone-else") is not None


async def test_upgrade_is_idempotent_and_safe_when_replicas_start_together(db_url):
    stores = [open_store(db_url) for _ in range(3)]
    await asyncio.gather(*[s.open() for s in stores])  # a new file: each switches it to WAL at once
    try:
        versions = await asyncio.gather(*[s.upgrade() for s in stores])
        assert versions == [len(MIGRATIONS)] * 3
        assert await stores[0].upgrade() == len(MIGRATIONS)
        await stores[0].ping()
        await stores[1].save(response("resp_seen"), [], "")
        assert await stores[2].get("resp_seen", "") is not None  # one database, seen by all
    finally:
        for s in stores:
            await s.close()
