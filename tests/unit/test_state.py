"""state.py alone, on a fresh SQLite file: what a request's `previous_response_id`, `item_reference`s and
items sent back by value resolve to — without a server."""

from __future__ import annotations

import asyncio
import time

import pytest

from responses_gateway.errors import APIError
from responses_gateway.state import resolve
from responses_gateway.store import open_store
from responses_gateway.tools.kits import everything

TOOLBOX = everything()  # every kit of the build: stored tool items normalize as in a running gateway
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}
MCP_CALL = {"id": "mcp_1", "type": "mcp_call", "status": "completed", "server_label": "calc", "name": "add",
            "arguments": "{}", "output": "42", "error": None, "approval_request_id": None}


def run(tmp_path, *steps):
    """Save one response (its output: a message and an MCP call) under owner "a", then run `steps`."""
    async def main():
        store = open_store(str(tmp_path / "r.db"))
        await store.open()
        await store.upgrade()
        first = {"id": "resp_1", "object": "response", "created_at": int(time.time()), "status": "completed",
                 "previous_response_id": None,
                 "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                             "content": [{"type": "output_text", "text": "hi", "annotations": []}]}, MCP_CALL]}
        await store.save(first, [{"id": "msg_0", **USER}], "a")
        try:
            return [await step(store) for step in steps]
        finally:
            await store.close()

    return asyncio.run(main())


def test_previous_response_id_brings_the_chain_first_then_the_new_items(tmp_path):
    ((history, items),) = run(tmp_path, lambda s: resolve(s, "resp_1", [USER], "a", TOOLBOX))
    assert [i.get("id") for i in history] == ["msg_0", "msg_1", "mcp_1", None]
    assert len(items) == 1 and items[0]["id"].startswith("msg_")  # stored with an id of its own


def test_another_owners_or_an_unknown_previous_response_is_a_400(tmp_path):
    async def foreign(store):
        with pytest.raises(APIError) as caught:
            await resolve(store, "resp_1", [USER], "b", TOOLBOX)
        return caught.value

    (error,) = run(tmp_path, foreign)
    assert (error.status, error.param, error.code) == (400, "previous_response_id", "previous_response_not_found")


def test_an_item_reference_resolves_to_the_stored_item_and_an_unknown_one_is_a_404(tmp_path):
    async def missing(store):
        with pytest.raises(APIError) as caught:
            await resolve(store, None, [{"type": "item_reference", "id": "msg_9"}], "a", TOOLBOX)
        return caught.value

    (history, _), error = run(tmp_path, lambda s: resolve(s, None, [{"type": "item_reference", "id": "msg_1"}], "a", TOOLBOX),
                              missing)
    assert history[0]["content"][0]["text"] == "hi"
    assert (error.status, error.param) == (404, "input[0]")


def test_a_tool_item_sent_back_without_what_include_hid_is_replaced_by_its_stored_copy(tmp_path):
    stripped = {k: v for k, v in MCP_CALL.items() if k != "output"}
    ((history, _), (foreign, _)) = run(tmp_path, lambda s: resolve(s, None, [stripped, USER], "a", TOOLBOX),
                                       lambda s: resolve(s, None, [stripped, USER], "b", TOOLBOX))
    assert history[0]["output"] == "42"
    assert "output" not in foreign[0]  # another key's copy is never used


def test_without_a_store_state_is_refused_by_name():
    with pytest.raises(APIError) as caught:
        asyncio.run(resolve(None, "resp_1", [USER], "a", TOOLBOX))
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "previous_response_id",
                                                                            "unsupported_parameter")
