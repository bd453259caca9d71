"""The Files API through the openai SDK (and raw HTTP for what the SDK will not send), on SQLite and PostgreSQL:
objects shaped as openai-python's types, bytes back byte for byte, per-key isolation, the size limit and the
per-key quota (413, nothing stored), expiry, and two replicas on one PostgreSQL serving each other's files."""

from __future__ import annotations

import asyncio
import io
import os
import time

import httpx
import openai
import pytest
from openai.types import FileDeleted, FileObject

from responses_gateway.store import open_store
from responses_gateway.tools.file_search.service import FileSearchStore
from tests.support import backends

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

FILE_TABLES = ("rg_files", "rg_file_parts")


@pytest.fixture(autouse=True)
def _empty_file_tables(request):
    """The PostgreSQL database is shared by the run: this module's tests start without files in it."""
    if "backend" in request.fixturenames:
        clear_tables(request.getfixturevalue("backend"), FILE_TABLES)


def clear_tables(backend: backends.Backend, tables: tuple[str, ...]) -> None:
    if backend.tables_exist():
        for table in tables:
            backend.query(f"DELETE FROM {table}")


def sdk(gw, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=60)


def sweep(db: str, role: str) -> int:
    """Run one of the sweeps (the store's `purge_files`, file_search's `purge_vector_stores`) as the server's
    timers do."""
    async def run() -> int:
        store = open_store(db)
        await store.open()
        try:
            holder = store.role(FileSearchStore) if role == "purge_vector_stores" else store
            swept: int = await getattr(holder, role)()
            return swept
        finally:
            await store.close()

    return asyncio.run(run())


def test_upload_retrieve_list_content_delete(start_gateway, backend):
    client = sdk(start_gateway())
    data = os.urandom(3 * 1024 * 1024 + 17)  # several parts of a PostgreSQL-kept file, not a whole one
    made = client.files.create(file=("report.bin", data), purpose="assistants")
    assert isinstance(made, FileObject)
    assert made.id.startswith("file_") and made.object == "file" and made.bytes == len(data)
    assert made.filename == "report.bin" and made.purpose == "assistants" and made.status == "processed"
    assert made.expires_at is None and abs(made.created_at - time.time()) < 60
    assert client.files.retrieve(made.id).model_dump() == made.model_dump()
    assert client.files.content(made.id).content == data

    other = client.files.create(file=("notes.txt", b"hello"), purpose="user_data")
    listed = client.files.list()
    assert [f.id for f in listed.data] == [other.id, made.id] or {f.id for f in listed.data} == {other.id, made.id}
    assert [f.id for f in client.files.list(purpose="user_data").data] == [other.id]
    page = client.files.list(limit=1, order="asc")
    assert len(page.data) == 1 and page.has_more
    rest = client.files.list(limit=1, order="asc", after=page.data[0].id)
    assert len(rest.data) == 1 and rest.data[0].id != page.data[0].id and not rest.has_more

    deleted = client.files.delete(made.id)
    assert isinstance(deleted, FileDeleted) and deleted.model_dump() == {"id": made.id, "object": "file",
                                                                          "deleted": True}
    with pytest.raises(openai.NotFoundError) as err:
        client.files.retrieve(made.id)
    assert err.value.body["message"] == f"No such File object: {made.id}"
    with pytest.raises(openai.NotFoundError):
        client.files.content(made.id)
    with pytest.raises(openai.NotFoundError):
        client.files.delete(made.id)
    assert client.files.content(other.id).content == b"hello"  # the other file is untouched


def test_expires_after_and_the_sweep(start_gateway, backend):
    gw = start_gateway()
    client = sdk(gw)
    made = client.files.create(file=("a.txt", b"a"), purpose="user_data",
                               expires_after={"anchor": "created_at", "seconds": 3600})
    assert made.expires_at == made.created_at + 3600
    batch = client.files.create(file=("b.jsonl", b"{}"), purpose="batch")
    assert batch.expires_at == batch.created_at + 30 * 24 * 3600  # batch files expire after 30 days by default
    for seconds in (10, 3600 * 24 * 31):
        with pytest.raises(openai.BadRequestError) as err:
            client.files.create(file=("a.txt", b"a"), purpose="user_data",
                                expires_after={"anchor": "created_at", "seconds": seconds})
        assert err.value.body["param"] == "expires_after.seconds"

    backend.query("UPDATE rg_files SET expires_at = ? WHERE id = ?", int(time.time()) - 1, made.id)
    with pytest.raises(openai.NotFoundError):  # expired: gone at once, before any sweep
        client.files.retrieve(made.id)
    assert made.id not in {f.id for f in client.files.list().data}

    assert sweep(backend.db, "purge_files") == 1
    assert backend.query("SELECT id FROM rg_files") == [(batch.id,)]
    if backend.name == "postgresql":
        assert backend.query("SELECT DISTINCT file_id FROM rg_file_parts") == [(batch.id,)]
    else:
        kept = os.listdir(backend.db + ".files/" + batch.id[-2:])
        assert batch.id in kept
        assert not os.path.exists(backend.db + ".files/" + made.id[-2:] + "/" + made.id)


def test_keys_are_isolated(start_gateway, backend):
    gw = start_gateway(api_keys="key-a,key-b")
    a, b = sdk(gw, "key-a"), sdk(gw, "key-b")
    mine = a.files.create(file=("secret.txt", b"a's secret"), purpose="user_data")
    for call in (lambda: b.files.retrieve(mine.id), lambda: b.files.content(mine.id),
                 lambda: b.files.delete(mine.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert b.files.list().data == []
    assert a.files.content(mine.id).content == b"a's secret"  # b's attempts changed nothing
    with pytest.raises(openai.AuthenticationError):
        sdk(gw, "key-c").files.list()


def test_size_limit_and_quota_refuse_and_keep_what_is_stored(start_gateway, backend):
    gw = start_gateway(max_file_bytes=1000, file_quota_bytes=1500)
    client = sdk(gw)
    kept = client.files.create(file=("ok.txt", b"x" * 1000), purpose="user_data")
    with pytest.raises(openai.APIStatusError) as err:
        client.files.create(file=("big.txt", b"x" * 1001), purpose="user_data")
    assert err.value.status_code == 413 and err.value.body["code"] == "file_too_large"
    with pytest.raises(openai.APIStatusError) as err:  # 1000 kept + 600 > the 1500 quota
        client.files.create(file=("more.txt", b"y" * 600), purpose="user_data")
    assert err.value.status_code == 413 and err.value.body["code"] == "quota_exceeded"
    assert [f.id for f in client.files.list().data] == [kept.id]
    assert client.files.content(kept.id).content == b"x" * 1000
    assert backend.query("SELECT count(*) FROM rg_files")[0][0] == 1

    # a body that never says its length is cut off as soon as it passes the limit
    def chunks():
        yield b"--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nuser_data\r\n"
        yield b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
        for _ in range(1000):
            yield b"z" * 1000
        yield b"\r\n--b--\r\n"

    got = httpx.post(f"{gw.url}/v1/files", content=chunks(), headers={"content-type": "multipart/form-data; boundary=b"},
                     timeout=30)
    assert got.status_code == 413 and got.json()["error"]["code"] == "file_too_large"
    client.files.delete(kept.id)  # the quota is freed
    client.files.create(file=("more.txt", b"y" * 600), purpose="user_data")


def test_bad_uploads_are_clear_400s(start_gateway, backend):
    gw = start_gateway()
    client = sdk(gw)
    with pytest.raises(openai.BadRequestError) as err:
        client.files.create(file=("a.txt", b"a"), purpose="nonsense")  # type: ignore[arg-type]
    assert err.value.body["param"] == "purpose"
    url = f"{gw.url}/v1/files"
    missing_file = httpx.post(url, data={"purpose": "user_data"}, files={"other": ("x", b"1")})
    assert missing_file.status_code == 400 and missing_file.json()["error"]["param"] == "file"
    missing_purpose = httpx.post(url, files={"file": ("x", b"1")})
    assert missing_purpose.status_code == 400 and missing_purpose.json()["error"]["param"] == "purpose"
    not_multipart = httpx.post(url, json={"purpose": "user_data"})
    assert not_multipart.status_code == 400 and set(not_multipart.json()["error"]) == {"message", "type", "param",
                                                                                        "code"}
    broken = httpx.post(url, content=b"--b\r\nnonsense", headers={"content-type": "multipart/form-data; boundary=b"})
    assert broken.status_code == 400
    two_files = httpx.post(url, data={"purpose": "user_data"}, files=[("file", ("x", b"1")), ("file", ("y", b"2"))])
    assert two_files.status_code == 400
    for bad in ("0", "-1", "abc", "100000"):
        got = httpx.get(url, params={"limit": bad})
        assert got.status_code == 400 and got.json()["error"]["param"] == "limit"
    # a hostile file name never becomes a path, and is shown without directories or control characters
    made = client.files.create(file=("..\\../../etc/passwd", b"root"), purpose="user_data")
    assert made.filename == "passwd"
    assert client.files.content(made.id).content == b"root"
    assert client.files.list().data[0].id == made.id


def test_two_replicas_on_one_postgresql_serve_each_others_files(pg_database, upstream):
    b = backends.Backend("postgresql", pg_database)
    b.clear()
    clear_tables(b, FILE_TABLES)
    from responses_gateway.config import Settings
    from tests.support.server import GatewayServer

    settings = Settings(upstream_url=upstream.base_url, db=pg_database)
    with GatewayServer(settings) as one, GatewayServer(settings) as two:
        data = io.BytesIO(os.urandom(2 * 1024 * 1024 + 5))
        made = sdk(one).files.create(file=("shared.bin", data), purpose="assistants")
        assert sdk(two).files.retrieve(made.id).bytes == len(data.getvalue())
        assert sdk(two).files.content(made.id).content == data.getvalue()
        sdk(two).files.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            sdk(one).files.retrieve(made.id)


def test_concurrent_uploads_never_overrun_the_quota(start_gateway, backend):
    """10 uploads of 3 MiB at once against a 10 MiB quota: at most three are kept, on both databases (the
    quota's check and the insert are one step; on PostgreSQL two transactions would each miss the other)."""
    from concurrent.futures import ThreadPoolExecutor

    mib = 1 << 20
    gw = start_gateway(max_file_bytes=4 * mib, file_quota_bytes=10 * mib)

    def upload(i: int) -> int:
        resp = httpx.post(f"{gw.url}/v1/files", data={"purpose": "user_data"},
                          files={"file": (f"f{i}.txt", bytes([65 + i]) * (3 * mib))}, timeout=60)
        return resp.status_code

    with ThreadPoolExecutor(10) as pool:
        statuses = list(pool.map(upload, range(10)))
    assert sorted(set(statuses)) == [200, 413], statuses
    stored = backend.query("SELECT COALESCE(SUM(bytes), 0), count(*) FROM rg_files")[0]
    assert int(stored[0]) <= 10 * mib and stored[1] == statuses.count(200) == 3, (stored, statuses)


def test_the_quota_holds_when_inserts_race(backend):
    """The store alone, 10 inserts of 3 MiB at once (each on its own connection on PostgreSQL)."""
    mib = 1 << 20

    async def race() -> list[bool]:
        store = open_store(backend.db)
        await store.open()
        await store.upgrade()
        try:
            files = [{"id": f"file_race{i}", "object": "file", "bytes": 3 * mib, "created_at": 1, "filename": "f",
                      "purpose": "user_data", "expires_at": None} for i in range(10)]
            return list(await asyncio.gather(*(store.add_file(f, "owner-race", 10 * mib) for f in files)))
        finally:
            await store.close()

    added = asyncio.run(race())
    assert added.count(True) == 3, added
    assert int(backend.query("SELECT SUM(bytes) FROM rg_files WHERE owner = ?", "owner-race")[0][0]) == 9 * mib
