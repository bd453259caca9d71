"""tools/file_search/store.py (the vector stores' role, bound to the store's engine) and store/files.py on both engines: ingestion leases (one worker per file, only the
holder writes, a lapsed lease is taken over), keyword search (stop words, common words, filters by file)."""

from __future__ import annotations

import time

import pytest

from responses_gateway.tools.file_search.service import FileSearchStore
from responses_gateway.tools.file_search.store import COMMON, ChunkRow, query_terms

pytestmark = pytest.mark.anyio

CHUNKING = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}


@pytest.fixture
async def store(store):
    """file_search's roles (files and vector stores) over the test store's engine, emptied."""
    store = store.role(FileSearchStore)
    await store.ensure_search_index()
    tables = ["rg_chunks", "rg_vector_store_files", "rg_file_batches", "rg_vector_stores", "rg_files",
              "rg_file_parts"]
    if store.engine.label.startswith("sqlite"):
        tables.append("rg_chunks_fts")
    await store.engine.write([(f"DELETE FROM {t}", [()]) for t in tables])
    return store


async def vector_store(store, vs_id: str = "vs_1", owner: str = "alice") -> str:
    now = int(time.time())
    await store.create_vector_store({"id": vs_id, "object": "vector_store", "created_at": now, "name": "x",
                                     "metadata": {}, "expires_after": None, "expires_at": None}, owner, None)
    return vs_id


async def test_one_worker_per_file_and_only_the_holder_writes(store):
    vs = await vector_store(store)
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING)], None)
    job = await store.claim_job("w1", lease=30)
    assert job is not None and (job.vector_store_id, job.file_id, job.attempts) == (vs, "file_1", 1)
    assert await store.claim_job("w2", lease=30) is None  # held
    rows = [ChunkRow(0, 0, 5, 1, "alpha", None)]
    assert not await store.finish_job(job, "w2", rows, 5, None)  # not w2's: nothing written
    assert (await store.file_chunks(vs, "file_1")) == []
    assert await store.finish_job(job, "w1", rows, 5, None)
    got = await store.get_vector_store_file(vs, "file_1", "alice")
    assert got["status"] == "completed" and got["usage_bytes"] == 5
    assert [c.text for c in await store.file_chunks(vs, "file_1")] == ["alpha"]
    assert await store.keyword_search("alpha", [vs], None, 10, alone=True) != []


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_writes_nothing(store):
    vs = await vector_store(store)
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING)], None)
    first = await store.claim_job("w1", lease=-1)  # already lapsed: its process is presumed dead
    second = await store.claim_job("w2", lease=30)
    assert first is not None and second is not None and second.attempts == 2
    assert not await store.renew_job(first, "w1", 30)
    assert not await store.fail_job(first, "w1", "server_error", "late")
    assert not await store.finish_job(first, "w1", [ChunkRow(0, 0, 1, 1, "x", None)], 1, None)
    assert await store.finish_job(second, "w2", [ChunkRow(0, 0, 1, 1, "y", None)], 1, None)
    assert [c.text for c in await store.file_chunks(vs, "file_1")] == ["y"]


async def test_released_jobs_are_taken_up_at_once_and_cancelled_ones_never(store):
    vs = await vector_store(store)
    await store.create_batch("vsfb_1", vs, "alice", int(time.time()))
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING), ("file_2", None, CHUNKING)],
                                       "vsfb_1")
    job = await store.claim_job("w1", lease=30)
    await store.release_jobs("w1")
    again = await store.claim_job("w2", lease=30)
    assert again is not None and again.file_id == job.file_id
    assert await store.cancel_batch("vsfb_1", vs, "alice")
    assert await store.claim_job("w3", lease=30) is None
    assert not await store.finish_job(again, "w2", [ChunkRow(0, 0, 1, 1, "x", None)], 1, None)
    batch = await store.get_batch("vsfb_1", vs, "alice")
    assert batch["status"] == "cancelled" and batch["file_counts"]["cancelled"] == 2


async def test_keyword_search_leaves_out_stop_words_and_common_words(store):
    vs = await vector_store(store)
    files = [(f"file_{i}", None, CHUNKING) for i in range(2)]
    await store.add_vector_store_files(vs, "alice", files, None)
    # file_0: COMMON + 1 chunks that all say "common"; file_1: one chunk with "rare" (and "common")
    texts = {"file_0": [f"common the chunk{i}" for i in range(COMMON + 1)], "file_1": ["rare common words"]}
    for _ in files:
        job = await store.claim_job("w", lease=30)
        rows = [ChunkRow(i, 0, len(t), 3, t, None) for i, t in enumerate(texts[job.file_id])]
        assert await store.finish_job(job, "w", rows, 1, None)
    assert query_terms("The RARE, the rare!") == ["rare"] and query_terms("the") == ["the"]  # stop words kept alone
    assert [h.file_id for h in await store.keyword_search("rare common", [vs], None, 5)] == ["file_1"]
    assert await store.keyword_search("common", [vs], None, 5) == []  # vectors rank beside it: none
    assert len(await store.keyword_search("common", [vs], None, 5, alone=True)) == 5
    assert await store.keyword_search("rare", [vs], ["file_0"], 5) == []  # limited to these files
    assert await store.keyword_search("rare", ["vs_other"], None, 5) == []  # and to these stores


def counting_writes(store, after=None):
    """The chunks each transaction of the engine inserts (the real engine does the work); `after(n)` runs
    before the n-th write."""
    inserted: list[int] = []
    real = store.engine.write

    async def write(statements, count_last=False):
        if after is not None:
            await after(len(inserted))
        inserted.append(sum(len(rows) for sql, rows in statements if sql.startswith("INSERT INTO rg_chunks ")))
        return await real(statements, count_last)

    store.engine.write = write
    return inserted


async def test_a_big_file_goes_in_batches_and_is_completed_only_with_its_last_chunk(store):
    vs = await vector_store(store)
    await store.add_vector_store_files(vs, "alice", [("file_big", None, CHUNKING)], None)
    job = await store.claim_job("w1", lease=30)
    seen: list[str] = []

    async def look(n: int) -> None:
        if n == 2:  # between two batches: the file is not completed, nor searched
            seen.append((await store.get_vector_store_file(vs, "file_big", "alice"))["status"])
            seen.append(str(await store.searchable_files([vs])))

    inserted = counting_writes(store, look)
    rows = [ChunkRow(i, i * 10, i * 10 + 9, 2, f"needle{i} words", None) for i in range(3000)]
    assert await store.finish_job(job, "w1", rows, 1, None)
    batches = [n for n in inserted if n]
    assert len(batches) > 3 and sum(batches) == 3000 and batches[0] == 100, batches
    assert seen == ["in_progress", "[]"]
    assert (await store.get_vector_store_file(vs, "file_big", "alice"))["status"] == "completed"
    assert len(await store.file_chunks(vs, "file_big")) == 3000
    assert await store.keyword_search("needle2999", [vs], None, 5, alone=True) != []


async def test_a_file_cancelled_while_it_is_written_keeps_no_chunks(store):
    vs = await vector_store(store)
    await store.create_batch("vsfb_1", vs, "alice", int(time.time()))
    await store.add_vector_store_files(vs, "alice", [("file_big", None, CHUNKING)], "vsfb_1")
    job = await store.claim_job("w1", lease=30)

    async def cancel(n: int) -> None:
        if n == 2:  # two batches are in
            assert 0 < len(await store.file_chunks(vs, "file_big")) < 1000
            store.engine.write = real
            assert await store.cancel_batch("vsfb_1", vs, "alice")
            store.engine.write = counted

    real = store.engine.write
    counting_writes(store, cancel)
    counted = store.engine.write
    rows = [ChunkRow(i, 0, 1, 1, f"w{i}", None) for i in range(1000)]
    assert not await store.finish_job(job, "w1", rows, 1, None)
    assert await store.file_chunks(vs, "file_big") == []
    assert await store.keyword_search("w5", [vs], None, 5, alone=True) == []
    assert (await store.get_vector_store_file(vs, "file_big", "alice"))["status"] == "cancelled"


async def test_chunks_left_by_a_dead_attempt_are_replaced(store):
    vs = await vector_store(store)
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING)], None)
    first = await store.claim_job("w1", lease=-1)
    await store.engine.write([("INSERT INTO rg_chunks (vector_store_id, file_id, position, start_index, end_index, "
                               "tokens, text) VALUES (?, ?, ?, 0, 1, 1, ?)",
                               [(vs, "file_1", i, f"stale{i}") for i in range(2500)])])
    second = await store.claim_job("w2", lease=30)
    assert first is not None and second is not None
    assert await store.finish_job(second, "w2", [ChunkRow(0, 0, 1, 1, "fresh", None)], 1, None)
    assert [c.text for c in await store.file_chunks(vs, "file_1")] == ["fresh"]


async def test_deleting_a_big_file_drops_its_chunks_in_batches(store):
    vs = await vector_store(store)
    await store.add_vector_store_files(vs, "alice", [("file_big", None, CHUNKING), ("file_kept", None, CHUNKING)],
                                       None)
    for _ in range(2):
        job = await store.claim_job("w", lease=30)
        size = 2500 if job.file_id == "file_big" else 3
        rows = [ChunkRow(i, 0, 1, 1, f"{job.file_id} word{i}", None) for i in range(size)]
        assert await store.finish_job(job, "w", rows, 1, None)
    writes = counting_writes(store)
    assert await store.delete_vector_store_file(vs, "file_big", "alice")
    assert len(writes) > 3  # the row, three batches of chunks, the version
    assert await store.file_chunks(vs, "file_big") == []
    assert await store.keyword_search("word7", [vs], ["file_big"], 5, alone=True) == []
    assert len(await store.file_chunks(vs, "file_kept")) == 3
    assert len(await store.keyword_search("word2", [vs], None, 5, alone=True)) == 1  # file_kept's only
    if store.engine.label.startswith("sqlite"):
        left = await store.engine.fetchone("SELECT count(*) FROM rg_chunks_fts WHERE file_id = ?", ("file_big",))
        assert left[0] == 0


async def test_a_file_added_again_is_replaced_and_one_cancelled_before_its_worker_keeps_nothing(store):
    vs = await vector_store(store)
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING)], None)
    job = await store.claim_job("w", lease=30)
    assert await store.finish_job(job, "w", [ChunkRow(i, 0, 1, 1, f"old{i}", None) for i in range(1500)], 1, None)
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING)], None)  # again
    assert await store.searchable_files([vs]) == []  # in progress: not searched, old chunks or not
    job = await store.claim_job("w", lease=30)
    assert await store.finish_job(job, "w", [ChunkRow(0, 0, 1, 1, "new", None)], 1, None)
    assert [c.text for c in await store.file_chunks(vs, "file_1")] == ["new"]
    assert await store.keyword_search("old7", [vs], None, 5, alone=True) == []
    await store.create_batch("vsfb_1", vs, "alice", int(time.time()))
    await store.add_vector_store_files(vs, "alice", [("file_1", None, CHUNKING)], "vsfb_1")
    assert await store.cancel_batch("vsfb_1", vs, "alice")
    assert await store.file_chunks(vs, "file_1") == []
    assert await store.keyword_search("new", [vs], None, 5, alone=True) == []
