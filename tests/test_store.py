"""The store on its own: retention arithmetic."""

import asyncio
import time

from responses_gateway.store import open_store


def test_short_retention_never_expires_a_response_on_arrival(tmp_path):
    async def go():
        store = open_store(str(tmp_path / "db.sqlite"), retention_days=0.00001)  # under a second
        await store.open()
        await store.upgrade()
        try:
            response = {"id": "resp_x", "created_at": int(time.time()), "output": [], "status": "completed"}
            await store.save(response, [], "")
            return await store.get("resp_x", "")
        finally:
            await store.close()

    assert asyncio.run(go()) is not None


def test_writes_arriving_together_commit_together_and_fail_alone(tmp_path):
    """SQLite group commit: many saves at once all land; one that fails (a duplicate id) fails alone and
    leaves nothing of itself behind."""
    async def go():
        store = open_store(str(tmp_path / "db.sqlite"))
        await store.open()
        await store.upgrade()
        try:
            now = int(time.time())

            def response(rid: str, text: str) -> dict:
                return {"id": rid, "created_at": now, "status": "completed",
                        "output": [{"id": f"msg_{text}", "type": "message", "content": []}]}

            await store.save(response("resp_dup", "first"), [], "")
            results = await asyncio.gather(
                *[store.save(response(f"resp_{i}", str(i)), [{"id": f"in_{i}", "type": "message"}], "")
                  for i in range(50)],
                store.save(response("resp_dup", "second"), [{"id": "in_dup", "type": "message"}], ""),
                return_exceptions=True)
            stored = [await store.get(f"resp_{i}", "") for i in range(50)]
            history = await store.history("resp_7", "")
            dup = await store.get("resp_dup", "")
            leftovers = await store.items_by_id(["in_dup", "msg_second"], "")
            return results, stored, history, dup, leftovers
        finally:
            await store.close()

    results, stored, history, dup, leftovers = asyncio.run(go())
    assert results[:50] == [None] * 50 and isinstance(results[50], Exception)
    assert all(r is not None for r in stored)
    assert [i["id"] for i in history] == ["in_7", "msg_7"]
    assert dup["output"][0]["id"] == "msg_first" and leftovers == {}
