"""store/responses.py: saving, retrieving, deleting and chaining responses; input items by page; owners."""

from __future__ import annotations

import asyncio
import time

import pytest

from .conftest import ids, message, response

pytestmark = pytest.mark.anyio


async def test_a_saved_response_comes_back_as_saved(store):
    saved = response("resp_a")
    await store.save(saved, [message("in_a", "hi", "user")], "alice")
    assert await store.get("resp_a", "alice") == saved
    assert await store.get("resp_missing", "alice") is None


async def test_every_read_and_delete_is_the_owners_alone(store):
    await store.save(response("resp_a"), [message("in_a", "hi", "user")], "alice")
    assert await store.get("resp_a", "bob") is None
    assert await store.history("resp_a", "bob") is None
    assert await store.items_by_id(["in_a", "msg_resp_a"], "bob") == {}
    assert await store.input_items("resp_a", "bob", after=None, before=None, limit=10, order="asc") is None
    assert await store.delete("resp_a", "bob") is False
    assert await store.get("resp_a", "alice") is not None  # bob's delete touched nothing


async def test_history_walks_the_chain_oldest_first_input_before_output(store):
    await store.save(response("resp_1"), [message("in_1", "one", "user")], "")
    await store.save(response("resp_2", previous="resp_1"), [message("in_2", "two", "user")], "")
    await store.save(response("resp_3", previous="resp_2", output=[]), [message("in_3", "three", "user")], "")
    assert ids(await store.history("resp_3", "")) == ["in_1", "msg_resp_1", "in_2", "msg_resp_2", "in_3"]
    assert ids(await store.history("resp_1", "")) == ["in_1", "msg_resp_1"]
    await store.save(response("resp_empty", output=[]), [], "")
    assert await store.history("resp_empty", "") == []  # found, with nothing in it: not None


async def test_a_deleted_turn_is_gone_but_later_turns_keep_its_items(store):
    await store.save(response("resp_1"), [message("in_1", "one", "user")], "")
    await store.save(response("resp_2", previous="resp_1"), [message("in_2", "two", "user")], "")
    assert await store.delete("resp_1", "") is True
    assert await store.delete("resp_1", "") is False  # once
    assert await store.get("resp_1", "") is None
    assert await store.history("resp_1", "") is None
    assert await store.input_items("resp_1", "", after=None, before=None, limit=10, order="asc") is None
    assert await store.items_by_id(["in_1"], "") == {}
    assert ids(await store.history("resp_2", "")) == ["in_1", "msg_resp_1", "in_2", "msg_resp_2"]


async def test_an_expired_response_is_invisible(store):
    old = int(time.time()) - store.retention - 5
    await store.save(response("resp_old", created_at=old), [message("in_old", "x", "user")], "")
    assert await store.get("resp_old", "") is None
    assert await store.history("resp_old", "") is None
    assert await store.items_by_id(["in_old"], "") == {}
    assert await store.delete("resp_old", "") is False


async def test_items_by_id_finds_input_and_output_items_and_the_latest_copy_wins(store):
    now = int(time.time())
    await store.save(response("resp_1", created_at=now - 10), [message("in_x", "first copy", "user")], "")
    await store.save(response("resp_2", created_at=now), [message("in_x", "second copy", "user")], "")
    found = await store.items_by_id(["in_x", "msg_resp_1", "nope"], "")
    assert set(found) == {"in_x", "msg_resp_1"}
    assert found["in_x"]["content"][0]["text"] == "second copy"
    assert await store.items_by_id([], "") == {}


async def test_input_items_page_both_ways_with_cursors(store):
    inputs = [message(f"in_{i}", str(i), "user") for i in range(7)]
    await store.save(response("resp_p"), inputs, "")

    async def page(**kw):
        args = {"after": None, "before": None, "limit": 3, "order": "asc"} | kw
        got = await store.input_items("resp_p", "", **args)
        return ids(got.items), got.has_more

    assert await page() == (["in_0", "in_1", "in_2"], True)
    assert await page(after="in_2") == (["in_3", "in_4", "in_5"], True)
    assert await page(after="in_5") == (["in_6"], False)
    assert await page(order="desc") == (["in_6", "in_5", "in_4"], True)
    assert await page(order="desc", after="in_4") == (["in_3", "in_2", "in_1"], True)
    assert await page(before="in_5") == (["in_2", "in_3", "in_4"], True)  # the page just before the cursor
    assert await page(order="desc", before="in_1") == (["in_4", "in_3", "in_2"], True)
    assert await page(after="in_1", before="in_5") == (["in_2", "in_3", "in_4"], False)
    assert await page(after="in_nope") == ([], False)
    assert await page(limit=100) == ([f"in_{i}" for i in range(7)], False)


async def test_a_duplicate_save_fails_and_leaves_the_first_whole(store):
    await store.save(response("resp_d", output=[message("msg_first", "first")]), [], "")
    with pytest.raises(Exception):  # noqa: B017 - each engine raises its own integrity error
        await store.save(response("resp_d", output=[message("msg_second", "second")]), [message("in_d", "x")], "")
    assert ids((await store.get("resp_d", ""))["output"]) == ["msg_first"]
    assert await store.items_by_id(["in_d", "msg_second"], "") == {}


async def test_saves_arriving_together_all_land_and_one_failing_fails_alone(store):
    await store.save(response("resp_dup"), [], "")
    results = await asyncio.gather(
        *[store.save(response(f"resp_{i}"), [message(f"in_{i}", str(i), "user")], "") for i in range(40)],
        store.save(response("resp_dup"), [message("in_dup", "x", "user")], ""), return_exceptions=True)
    assert results[:40] == [None] * 40 and isinstance(results[40], Exception)
    assert all([await store.get(f"resp_{i}", "") for i in range(40)])
    assert ids(await store.history("resp_7", "")) == ["in_7", "msg_resp_7"]
    assert await store.items_by_id(["in_dup"], "") == {}


async def test_a_tiny_retention_never_expires_a_response_on_arrival(db_url):
    from responses_gateway.store import open_store

    store = open_store(db_url, retention_days=0.00001)  # under a second: kept at least to the next one
    await store.open()
    await store.upgrade()
    try:
        await store.save(response("resp_tiny"), [], "")
        assert await store.get("resp_tiny", "") is not None
    finally:
        await store.close()


async def test_a_save_in_a_conversation_appends_its_items_in_the_same_transaction(store):
    await store.create_conversation({"id": "conv_a", "created_at": 1, "metadata": {}}, [message("c0", "x")], "")
    await store.save(response("resp_1"), [message("in_1", "one", "user")], "", conversation="conv_a")
    assert ids(await store.conversation_history("conv_a", "")) == ["c0", "in_1", "msg_resp_1"]
    with pytest.raises(Exception):  # noqa: B017 - a duplicate id: the whole save fails ...
        await store.save(response("resp_1"), [message("in_2", "two", "user")], "", conversation="conv_a")
    assert ids(await store.conversation_history("conv_a", "")) == ["c0", "in_1", "msg_resp_1"]  # ... append too
    await store.save(response("resp_other"), [], "bob", conversation="conv_a")  # not bob's: nothing appended
    assert ids(await store.conversation_history("conv_a", "")) == ["c0", "in_1", "msg_resp_1"]
