"""store/retention.py: what a purge removes and what it keeps."""

from __future__ import annotations

import time

import pytest

from .conftest import ids, message, response

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
