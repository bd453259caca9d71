"""tools/code_interpreter/store.py (the containers' role, bound to the store's engine): containers and their files, pages, owners, generations, expiry — on both engines."""

from __future__ import annotations

import pytest

from responses_gateway.tools.code_interpreter.store import ContainerQueries

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(store):
    store = store.role(ContainerQueries)
    await store.engine.write([("DELETE FROM container_files", [()]), ("DELETE FROM containers", [()])])
    return store


def container(cid: str, *, created_at: int = 1_700_000_000, minutes: int = 20, name: str = "c") -> dict:
    return {"id": cid, "name": name, "created_at": created_at, "minutes": minutes, "memory_limit": "1g"}


def file(fid: str, cid: str, path: str, *, created_at: int = 1_700_000_000, source: str = "user") -> dict:
    return {"id": fid, "container_id": cid, "path": path, "created_at": created_at, "source": source}


async def test_a_container_is_its_owners_alone(store):
    await store.create_container(container("cntr_a"), "alice")
    row = await store.get_container("cntr_a", "alice")
    assert row == {"id": "cntr_a", "name": "c", "created_at": 1_700_000_000, "last_active_at": 1_700_000_000,
                   "minutes": 20, "memory_limit": "1g", "status": "running", "generation": 0, "worker": None}
    await store.put_container_file(file("cfile_1", "cntr_a", "/mnt/data/x.txt"), b"x")
    assert await store.get_container("cntr_a", "bob") is None
    assert await store.container_files("cntr_a", "bob", after=None, limit=10, order="asc") is None
    assert await store.container_file("cntr_a", "cfile_1", "bob") is None
    assert await store.container_file_content("cntr_a", "cfile_1", "bob") is None
    assert await store.delete_container_file("cntr_a", "cfile_1", "bob") is False
    assert await store.delete_container("cntr_a", "bob") is False
    assert await store.live_containers("bob") == 0 and await store.live_containers("alice") == 1
    assert (await store.list_containers("bob", after=None, limit=10, order="desc", name=None)).items == []
    assert await store.container_file_content("cntr_a", "cfile_1", "alice") == b"x"
    assert await store.delete_container("cntr_a", "alice") is True
    assert await store.read_container_file("cntr_a", "cfile_1") is None  # its files went with it


async def test_a_file_at_the_same_path_is_replaced_and_keeps_its_id(store):
    await store.create_container(container("cntr_a"), "alice")
    first = await store.put_container_file(file("cfile_1", "cntr_a", "/mnt/data/x.txt"), b"one")
    second = await store.put_container_file(file("cfile_2", "cntr_a", "/mnt/data/x.txt", source="assistant"),
                                            b"two!")
    assert second["id"] == "cfile_1" and second["bytes"] == 4 and second["source"] == "assistant"
    assert second["etag"] != first["etag"]  # a replica holding the old bytes can tell
    assert await store.read_container_file("cntr_a", "cfile_1") == b"two!"
    binary = bytes(range(256)) * 1000
    await store.put_container_file(file("cfile_3", "cntr_a", "/mnt/data/b.bin"), binary)
    assert await store.read_container_file("cntr_a", "cfile_3") == binary
    await store.delete_container_path("cntr_a", "/mnt/data/x.txt")
    assert [f["path"] for f in await store.all_container_files("cntr_a")] == ["/mnt/data/b.bin"]


async def test_pages_of_containers_and_files(store):
    for n in range(5):
        await store.create_container(container(f"cntr_{n}", created_at=1_700_000_000 + n, name=f"n{n % 2}"),
                                     "alice")
        await store.put_container_file(file(f"cfile_{n}", "cntr_0", f"/mnt/data/{n}", created_at=1_700_000_000 + n),
                                       b"")
    page = await store.list_containers("alice", after=None, limit=2, order="desc", name=None)
    assert [c["id"] for c in page.items] == ["cntr_4", "cntr_3"] and page.has_more
    page = await store.list_containers("alice", after="cntr_3", limit=10, order="desc", name=None)
    assert [c["id"] for c in page.items] == ["cntr_2", "cntr_1", "cntr_0"] and not page.has_more
    page = await store.list_containers("alice", after=None, limit=10, order="asc", name="n1")
    assert [c["id"] for c in page.items] == ["cntr_1", "cntr_3"]
    files = await store.container_files("cntr_0", "alice", after="cfile_1", limit=2, order="asc")
    assert [f["id"] for f in files.items] == ["cfile_2", "cfile_3"] and files.has_more


async def test_generations_count_the_starts_of_a_container(store):
    await store.create_container(container("cntr_a"), "alice")
    assert await store.claim_container("cntr_a", "replica-1") == 1
    assert await store.claim_container("cntr_a", "replica-2") == 2
    assert await store.container_generation("cntr_a") == 2
    assert (await store.get_container("cntr_a", "alice"))["worker"] == "replica-2"
    assert await store.container_generation("cntr_nope") is None


async def test_idle_containers_expire_and_lose_their_files(store):
    await store.create_container(container("cntr_idle", created_at=1_000, minutes=20), "alice")
    await store.create_container(container("cntr_used", created_at=1_000, minutes=20), "alice")
    await store.put_container_file(file("cfile_1", "cntr_idle", "/mnt/data/x"), b"x")
    await store.touch_container("cntr_used", 1_000 + 15 * 60)
    await store.touch_container("cntr_used", 1_000)  # never backwards
    now = 1_000 + 20 * 60
    assert await store.expire_containers(now, forget_after=3600) == ["cntr_idle"]
    assert (await store.get_container("cntr_idle", "alice"))["status"] == "expired"
    assert await store.all_container_files("cntr_idle") == []
    assert (await store.get_container("cntr_used", "alice"))["status"] == "running"
    assert await store.live_containers("alice") == 1
    assert await store.expire_containers(now + 3600, forget_after=3600) == ["cntr_used"]
    assert await store.get_container("cntr_idle", "alice") is None  # forgotten after `forget_after`
    assert (await store.get_container("cntr_used", "alice"))["status"] == "expired"
