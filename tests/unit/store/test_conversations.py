"""store/conversations.py: a conversation's row and items, appends in order, pages, owners."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import ids, message

pytestmark = pytest.mark.anyio


def conversation(cid: str, **metadata: str) -> dict:
    return {"id": cid, "created_at": 1_700_000_000, "metadata": metadata}


async def test_create_get_update_delete(store):
    await store.create_conversation(conversation("conv_a", topic="x"), [message("m0", "hi", "user")], "alice")
    assert await store.get_conversation("conv_a", "alice") == {
        "id": "conv_a", "object": "conversation", "created_at": 1_700_000_000, "metadata": {"topic": "x"}}
    assert await store.update_conversation("conv_a", "alice", {"topic": "y"}) is True
    assert (await store.get_conversation("conv_a", "alice"))["metadata"] == {"topic": "y"}
    assert await store.delete_conversation("conv_a", "alice") is True
    assert await store.get_conversation("conv_a", "alice") is None
    assert await store.conversation_history("conv_a", "alice") is None
    assert await store.delete_conversation("conv_a", "alice") is False
    assert await store.update_conversation("conv_a", "alice", {}) is False


async def test_every_read_and_write_is_the_owners_alone(store):
    await store.create_conversation(conversation("conv_a"), [message("m0", "hi", "user")], "alice")
    assert await store.get_conversation("conv_a", "bob") is None
    assert await store.conversation_history("conv_a", "bob") is None
    assert await store.conversation_items("conv_a", "bob", after=None, limit=10, order="asc") is None
    assert await store.conversation_item("conv_a", "m0", "bob") is None
    assert await store.update_conversation("conv_a", "bob", {"x": "y"}) is False
    assert await store.delete_conversation_item("conv_a", "m0", "bob") is False
    assert await store.delete_conversation("conv_a", "bob") is False
    await store.append_conversation("conv_a", "bob", [message("m_bob", "sneaky", "user")])
    assert ids(await store.conversation_history("conv_a", "alice")) == ["m0"]


async def test_appends_go_after_the_last_item_and_concurrent_ones_stay_together(store):
    await store.create_conversation(conversation("conv_a"), [message("m0", "start", "user")], "")
    await asyncio.gather(*[store.append_conversation("conv_a", "", [message(f"a{i}_{j}", "x") for j in range(3)])
                           for i in range(10)])
    history = ids(await store.conversation_history("conv_a", ""))
    assert history[0] == "m0" and len(history) == 31
    runs = [history[k:k + 3] for k in range(1, 31, 3)]
    assert all(len({item.split("_")[0] for item in run}) == 1 for run in runs), runs  # each append whole
    await store.append_conversation("conv_a", "", [])  # nothing to append: nothing happens
    await store.append_conversation("conv_missing", "", [message("lost", "x")])
    assert await store.conversation_history("conv_missing", "") is None


async def test_items_page_both_orders_and_one_item_by_id(store):
    await store.create_conversation(conversation("conv_p"), [message(f"m{i}", str(i), "user") for i in range(5)], "")

    async def page(**kw):
        args = {"after": None, "limit": 2, "order": "asc"} | kw
        got = await store.conversation_items("conv_p", "", **args)
        return ids(got.items), got.has_more

    assert await page() == (["m0", "m1"], True)
    assert await page(after="m1") == (["m2", "m3"], True)
    assert await page(after="m3") == (["m4"], False)
    assert await page(order="desc") == (["m4", "m3"], True)
    assert await page(order="desc", after="m1") == (["m0"], False)
    assert await page(after="nope") == ([], False)
    assert (await store.conversation_item("conv_p", "m3", ""))["content"][0]["text"] == "3"
    assert await store.conversation_item("conv_p", "nope", "") is None
    assert await store.delete_conversation_item("conv_p", "m3", "") is True
    assert await store.delete_conversation_item("conv_p", "m3", "") is False
    assert ids(await store.conversation_history("conv_p", "")) == ["m0", "m1", "m2", "m4"]
