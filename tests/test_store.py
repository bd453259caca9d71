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
