"""store/jobs.py: background responses' rows and leases, cancel flags, replicas that die; event logs."""

from __future__ import annotations

import time

import pytest

from .conftest import ids, message, response

pytestmark = pytest.mark.anyio


def ms() -> int:
    return int(time.time() * 1000)


async def test_a_queued_response_is_visible_but_not_chainable_until_it_ends(store):
    queued = response("resp_bg", status="queued", output=[])
    await store.queue(queued, "alice", "worker-1", ms() + 60_000)
    assert (await store.get("resp_bg", "alice"))["status"] == "queued"
    assert await store.history("resp_bg", "alice") is None
    await store.progress({**queued, "status": "in_progress"})
    assert (await store.get("resp_bg", "alice"))["status"] == "in_progress"
    await store.save(response("resp_bg"), [message("in_bg", "go", "user")], "alice")  # the final state
    assert (await store.get("resp_bg", "alice"))["status"] == "completed"
    assert ids(await store.history("resp_bg", "alice")) == ["in_bg", "msg_resp_bg"]
    await store.progress({**queued, "status": "in_progress"})  # too late: an ended response stays ended
    assert (await store.get("resp_bg", "alice"))["status"] == "completed"


async def test_renew_extends_the_workers_leases_and_reports_cancels(store):
    await store.queue(response("resp_1", status="queued"), "alice", "w1", ms() + 1_000)
    await store.queue(response("resp_2", status="queued"), "alice", "w1", ms() + 1_000)
    await store.queue(response("resp_3", status="queued"), "bob", "w2", ms() + 1_000)
    assert await store.request_cancel("resp_2", "bob") is False  # not bob's
    assert await store.request_cancel("resp_2", "alice") is True
    assert await store.renew("w1", ms() + 60_000) == {"resp_1": False, "resp_2": True}
    [(rid, body, cancel)] = await store.expired(ms() + 30_000)  # w1's leases were renewed, w2's was not
    assert (rid, body, cancel) == ("resp_3", await store.get("resp_3", "bob"), False)
    await store.save(response("resp_1"), [], "alice")
    assert await store.renew("w1", ms() + 60_000) == {"resp_2": True}  # an ended response holds no lease
    assert await store.request_cancel("resp_1", "alice") is False  # ended: nothing to cancel


async def test_an_expired_lease_is_abandoned_once_and_its_replica_cannot_overwrite_it(store):
    now = ms()
    queued = response("resp_lost", status="in_progress", output=[])
    await store.queue(queued, "", "dead-worker", now - 1)
    assert await store.expired(now, "resp_other") == []
    [(rid, body, cancel)] = await store.expired(now, "resp_lost")
    assert (rid, body["status"], cancel) == ("resp_lost", "in_progress", False)
    failed = {**queued, "status": "failed", "error": {"code": "server_error", "message": "lost"}}
    assert await store.abandon(failed, now) is True
    assert await store.abandon(failed, now) is False  # another replica was first
    assert await store.expired(now + 60_000) == []
    await store.save(response("resp_lost"), [], "")  # the dead replica comes back: the failure stands
    assert (await store.get("resp_lost", ""))["status"] == "failed"


async def test_a_live_lease_is_not_abandoned(store):
    await store.queue(response("resp_live", status="queued"), "", "w1", ms() + 60_000)
    assert await store.abandon(response("resp_live", status="failed"), ms()) is False
    assert (await store.get("resp_live", ""))["status"] == "queued"


async def test_event_logs_append_in_runs_ignore_duplicates_and_read_past_a_sequence_number(store):
    assert await store.last_event("resp_x") == -1
    assert await store.events_after("resp_x", -1) == []
    await store.append_events([("resp_x", 0, 1, "a0a1"), ("resp_x", 2, 4, "a2a3a4"), ("resp_y", 0, 0, "b0")])
    await store.append_events([("resp_x", 2, 4, "a2a3a4")])  # a duplicate flush is ignored
    await store.append_events([("resp_x", 5, 5, "a5")])
    assert await store.last_event("resp_x") == 5 and await store.last_event("resp_y") == 0
    assert await store.events_after("resp_x", -1) == [(0, 1, "a0a1"), (2, 4, "a2a3a4"), (5, 5, "a5")]
    assert await store.events_after("resp_x", 1) == [(2, 4, "a2a3a4"), (5, 5, "a5")]
    assert await store.events_after("resp_x", 3) == [(2, 4, "a2a3a4"), (5, 5, "a5")]  # a run reaching past 3
    assert await store.events_after("resp_x", -1, limit=1) == [(0, 1, "a0a1")]
    assert await store.events_after("resp_x", 5) == []
