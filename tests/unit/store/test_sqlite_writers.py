"""store/sqlite.py and hostlock.py: writers in several processes take turns on the host's writer lock — woken
when it is released, never sleeping in SQLite's busy handler unless a process outside the gateway holds
SQLite's own lock — and a wait past --db-timeout fails cleanly."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from prometheus_client import REGISTRY

from responses_gateway.errors import StoreUnavailable
from responses_gateway.store import open_store
from responses_gateway.store.hostlock import HostLock

from .conftest import response

pytestmark = pytest.mark.anyio


def waits(how: str) -> float:
    return REGISTRY.get_sample_value("responses_gateway_store_lock_waits_total", {"how": how}) or 0.0


def observed() -> float:
    return REGISTRY.get_sample_value("responses_gateway_store_lock_wait_seconds_count") or 0.0


@pytest.fixture
async def sqlite_store(tmp_path):
    store = open_store(str(tmp_path / "responses.db"), timeout=5.0)
    await store.open()
    await store.upgrade()
    try:
        yield store
    finally:
        await store.close()


async def until(condition, limit: float = 10.0) -> None:
    """Poll `condition` (a deadline, not a timing assertion)."""
    for _ in range(int(limit / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_a_write_waits_on_the_host_lock_and_goes_the_moment_it_is_released(sqlite_store, tmp_path):
    other = HostLock(tmp_path / "responses.db-writer")  # another process's writer, mid-transaction
    try:
        other.acquire()
        host, busy, seen = waits("host"), waits("busy"), observed()
        save = asyncio.create_task(sqlite_store.save(response("resp_w"), [], ""))
        await until(lambda: waits("host") > host or save.done())  # counted as it starts waiting
        assert not save.done()  # it waits for the lock, not past it
        other.release()
        await asyncio.wait_for(save, 10)
    finally:
        other.close()
    assert await sqlite_store.get("resp_w", "") is not None
    assert (waits("host") - host, waits("busy") - busy, observed() - seen) == (1, 0, 1)


async def test_a_lock_held_past_the_deadline_fails_the_write_cleanly_and_the_next_one_works(tmp_path):
    store = open_store(str(tmp_path / "responses.db"), timeout=0.2)
    await store.open()
    await store.upgrade()
    other = HostLock(tmp_path / "responses.db-writer")
    try:
        other.acquire()
        with pytest.raises(StoreUnavailable):
            await store.save(response("resp_late"), [], "")
        other.release()
        await store.save(response("resp_next"), [], "")
        assert await store.get("resp_late", "") is None and await store.get("resp_next", "") is not None
        other.acquire()  # the abandoned wait left nothing held
        other.release()
    finally:
        other.close()
        await store.close()


async def test_a_process_outside_the_gateway_holding_sqlites_lock_is_waited_for_in_the_busy_handler(
        sqlite_store, tmp_path):
    outside = sqlite3.connect(tmp_path / "responses.db", isolation_level=None)
    try:
        outside.execute("BEGIN IMMEDIATE")
        busy = waits("busy")
        save = asyncio.create_task(sqlite_store.save(response("resp_b"), [], ""))
        await until(lambda: waits("busy") > busy or save.done())
        assert not save.done()
        outside.execute("COMMIT")
        await asyncio.wait_for(save, 10)
    finally:
        outside.close()
    assert waits("busy") - busy == 1 and await sqlite_store.get("resp_b", "") is not None


async def test_writers_of_two_stores_on_one_file_never_sleep_and_lose_nothing(sqlite_store, tmp_path):
    other = open_store(str(tmp_path / "responses.db"))
    await other.open()
    busy = waits("busy")
    try:
        await asyncio.gather(*[store.save(response(f"resp_{i}"), [], "")
                               for i in range(200) for store in ((sqlite_store, other)[i % 2],)])
        found = [await sqlite_store.get(f"resp_{i}", "") for i in range(200)]
    finally:
        await other.close()
    assert all(found) and waits("busy") == busy


async def test_the_wal_is_checkpointed_outside_the_writers_while_large_writes_go_on(tmp_path, monkeypatch):
    """The writer does not checkpoint inside its commits (that would hold every other process's writes);
    the checkpointer thread does, on time as well as on count, so a few large writes cannot grow the WAL
    without bound."""
    from responses_gateway.store import sqlite

    monkeypatch.setattr(sqlite, "CHECKPOINT_EVERY", 10**9)  # only the time trigger: every trip here
    monkeypatch.setattr(sqlite, "CHECKPOINT_SECONDS", 0.0)
    store = open_store(str(tmp_path / "responses.db"))
    await store.open()
    await store.upgrade()
    try:
        big = "x" * 250_000
        for i in range(40):  # 10 MB in all, one write after the other
            await store.engine.write([("INSERT INTO rg_secrets (name, value) VALUES (?, ?)", [(f"s{i}", big)])])
            await until(lambda: not store.engine.checkpointing.is_set())  # the checkpoint it started is done
        wal = (tmp_path / "responses.db-wal").stat().st_size  # the last connection to close removes it
    finally:
        await store.close()
    assert wal < 5_000_000, wal


def test_connections_opening_a_new_file_together_all_switch_it_to_wal(tmp_path):
    """`PRAGMA journal_mode = WAL` on a new file answers SQLITE_BUSY at once, without the busy handler, when
    another connection is switching it too: 6 connections at once failed in about 6 % of tries (workers and
    replicas starting together). Opening retries it within the store's timeout."""
    import threading

    from responses_gateway.store.sqlite import open_connection

    for trial in range(120):
        path = str(tmp_path / f"t{trial}.db")
        barrier = threading.Barrier(6)
        errors: list[BaseException] = []

        def one(path: str = path, barrier: threading.Barrier = barrier, errors: list = errors) -> None:
            barrier.wait()
            try:
                conn = open_connection(path, timeout=5.0, busy_timeout=0.0)
                assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
                conn.close()
            except BaseException as exc:  # collected for the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, (trial, errors)
