"""file_search: ingestion rate and memory, search latency over 100k chunks, and what a file_search turn adds.

    python -m bench.file_search                     # about 10 minutes on 2 cores (100 MB, 100k chunks)
    python -m bench.file_search --quick             # a smoke run of well under a minute
    python -m bench.file_search --pg postgresql://postgres@127.0.0.1:5432/test   # PostgreSQL too
    python -m bench.file_search --only-ingest --ingest-mb 48 --file-mb 48     # one big file's ingestion

The gateway runs as its own process (`python -m responses_gateway serve`) in front of the tests' fake model
server (tests/support/fake_chat.py, which also serves /v1/embeddings as vLLM does), everything on 127.0.0.1.

  * ingest — `--ingest-mb` of text (deterministic pseudo-words, in `--file-mb` files, 5 MB by default) uploaded,
    put in a vector store with no embedding model (so no embedding time is counted; `--embeddings` counts the
    fake server's), and waited for: chunks per CPU-second of the gateway process (user + system, from /proc),
    wall time, the process's peak RSS (VmHWM) above what it had before, and what another key's stored requests
    (POST /v1/conversations every 20 ms) waited meanwhile. SQLite, and PostgreSQL with `--pg`.
  * search — a store of `--chunks` chunks with 384-dimension vectors written straight into the database,
    then `--searches` POST /v1/vector_stores/{id}/search one after another (hybrid: keyword + vector): the
    first (which loads the vectors) apart, then p50/p99. SQLite, and PostgreSQL with `--pg`.
  * turn — POST /v1/responses with file_search (two model steps and a search) next to the same answer without
    tools (one step); what the tool adds beyond the second model step, next to the search's own time.

Prints a Markdown table; `--json PATH` also writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from responses_gateway.store import open_store  # noqa: E402
from responses_gateway.tools.file_search.store import VectorStoreQueries  # noqa: E402
from tests.support.fake_chat import (  # noqa: E402
    EMBEDDING_MODEL,
    FakeChatUpstream,
    RecordedRequest,
    Stream,
    text_stream,
    tool_calls_stream,
)

SYLLABLES = [f"{a}{b}" for a in "bcdfghklmnprstvz" for b in "aeiou"]
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES[:25] for c in ("", "n", "s", "r")][:20_000]
ZIPF = np.cumsum(1 / np.arange(1, len(WORDS) + 1))
ZIPF /= ZIPF[-1]  # word i is chosen with probability ∝ 1/(i+1), as words in real text


def zipf_words(rng: Any, k: int) -> list[str]:
    return [WORDS[i] for i in np.searchsorted(ZIPF, rng.random(k))]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Gateway:
    def __init__(self, upstream: str, db: str, *args: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen([sys.executable, "-m", "responses_gateway", "serve", "--upstream", upstream,
                                      "--port", str(self.port), "--db", db, "--log-level", "warning", *args], env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the gateway did not start")
            time.sleep(0.1)

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss(self, key: str = "VmRSS") -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def text_of(size: int, seed: int) -> bytes:
    words = zipf_words(np.random.default_rng(seed), size // 5)
    lines = [" ".join(words[i:i + 14]) + "." for i in range(0, len(words), 14)]
    return "\n".join(lines).encode()[:size]


class Prober:
    """Another key's stored requests while ingestion runs: POST /v1/conversations (a write of the store) every
    20 ms, one at a time, each one's latency kept — what a big ingestion makes everyone else wait."""

    def __init__(self, url: str):
        import threading

        self.url = url
        self.latencies: list[float] = []
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60, headers={"authorization": "Bearer key-other"}) as client:
            while not self.stopping.is_set():
                t = time.perf_counter()
                try:
                    ok = client.post("/v1/conversations", json={"metadata": {"k": "v"}}).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies.append(time.perf_counter() - t)
                self.failures += not ok
                time.sleep(0.02)

    def __enter__(self) -> Prober:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def figures(self) -> dict[str, Any]:
        ms = [x * 1000 for x in self.latencies] or [0.0]
        return {"other_writes": len(self.latencies), "other_failed": self.failures,
                "other_p50_ms": round(percentile(ms, 50), 1), "other_p99_ms": round(percentile(ms, 99), 1),
                "other_max_ms": round(max(ms), 1)}


def ingest(upstream: FakeChatUpstream, db: str, megabytes: int, file_mb: int = 5, label: str = "sqlite",
           embeddings: bool = False) -> dict[str, Any]:
    extra = ["--embeddings-model", EMBEDDING_MODEL] if embeddings else []
    gw = Gateway(upstream.base_url, db, "--max-extracted-chars", str(200 * 1024 * 1024), "--api-keys",
                 "key-bench,key-other", *extra)
    try:
        client = httpx.Client(base_url=f"{gw.url}/v1", timeout=600, headers={"authorization": "Bearer key-bench"})
        per_file = file_mb * 1024 * 1024
        ids = []
        for i in range(max(1, megabytes * 1024 * 1024 // per_file)):
            data = text_of(min(per_file, megabytes * 1024 * 1024), i)
            ids.append(client.post("/files", files={"file": (f"doc{i}.txt", data)},
                                   data={"purpose": "assistants"}).json()["id"])
        base_rss, cpu0, t0 = gw.rss(), gw.cpu(), time.monotonic()
        with Prober(gw.url) as prober:
            vs = client.post("/vector_stores", json={"name": "bench", "file_ids": ids}).json()
            while True:
                got = client.get(f"/vector_stores/{vs['id']}").json()
                if got["status"] != "in_progress":
                    break
                time.sleep(0.2)
        wall, cpu = time.monotonic() - t0, gw.cpu() - cpu0
        peak = gw.rss("VmHWM")
        chunks = _count_chunks(db, vs["id"])
        assert got["file_counts"]["completed"] == len(ids), got
        return {"backend": label, "megabytes": megabytes, "file_mb": file_mb, "files": len(ids), "chunks": chunks,
                "embeddings": embeddings, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                "chunks_per_cpu_s": round(chunks / cpu), "chunks_per_s": round(chunks / wall),
                "peak_rss_mb": round(peak / 2**20), "rss_growth_mb": round((peak - base_rss) / 2**20),
                **prober.figures()}
    finally:
        gw.stop()


def _count_chunks(db: str, vs_id: str) -> int:
    async def count() -> int:
        store = open_store(db)
        await store.open()
        try:
            row = await store.engine.fetchone("SELECT count(*) FROM rg_chunks WHERE vector_store_id = ?", (vs_id,))
            return int(row[0]) if row else 0
        finally:
            await store.close()

    return asyncio.run(count())


def build_store(db: str, chunks: int, dimension: int = 384) -> str:
    """A vector store of `chunks` chunks (100 files) written straight into the database."""
    async def build() -> str:
        store = open_store(db)
        await store.open()
        await store.upgrade()
        try:
            vs_id, now, owner = f"vs_bench{uuid.uuid4().hex[:8]}", int(time.time()), ""
            vectors = store.role(VectorStoreQueries)  # file_search's own role of the store
            await vectors.ensure_search_index()
            await vectors.create_vector_store({"id": vs_id, "object": "vector_store", "created_at": now, "name": "b",
                                               "metadata": {}, "expires_after": None, "expires_at": None}, owner,
                                              EMBEDDING_MODEL)
            rng = np.random.default_rng(7)
            files = 100
            per_file = chunks // files
            sqlite = store.engine.label.startswith("sqlite")
            chunking = orjson.dumps({"type": "static", "static": {"max_chunk_size_tokens": 800,
                                                                  "chunk_overlap_tokens": 400}}).decode()
            for f in range(files):
                file_id = f"file_bench{f:04d}{vs_id[-4:]}"
                body = {"id": file_id, "object": "file", "bytes": 1, "created_at": now, "filename": f"f{f}.txt",
                        "purpose": "assistants", "status": "processed", "expires_at": None}
                await store.engine.write([
                    ("INSERT INTO rg_files (id, owner, created_at, expires_at, bytes, purpose, body) VALUES "
                     "(?, ?, ?, NULL, 1, 'assistants', ?)", [(file_id, owner, now, orjson.dumps(body).decode())]),
                    ("INSERT INTO rg_vector_store_files (vector_store_id, file_id, owner, created_at, seq, status, "
                     "chunking, usage_bytes) VALUES (?, ?, ?, ?, ?, 'completed', ?, 1)",
                     [(vs_id, file_id, owner, now, f, chunking)])])
                vectors = rng.standard_normal((per_file, dimension)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                texts = [" ".join(zipf_words(rng, 120)) for _ in range(per_file)]
                rows = [(vs_id, file_id, i, 0, len(t), 120, t, vectors[i].tobytes()) for i, t in enumerate(texts)]
                statements = [("INSERT INTO rg_chunks (vector_store_id, file_id, position, start_index, end_index, "
                               "tokens, text, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)]
                if sqlite:
                    statements.append(("INSERT INTO rg_chunks_fts (text, vector_store_id, file_id, position) "
                                       "VALUES (?, ?, ?, ?)", [(t, vs_id, file_id, i) for i, t in enumerate(texts)]))
                await store.engine.write(statements)
            await store.engine.write([("UPDATE rg_vector_stores SET dimension = ?, version = 1 WHERE id = ?",
                                       [(dimension, vs_id)])])
            return vs_id
        finally:
            await store.close()

    return asyncio.run(build())


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def search(upstream: FakeChatUpstream, db: str, chunks: int, searches: int, label: str) -> dict[str, Any]:
    t0 = time.monotonic()
    vs_id = build_store(db, chunks)
    built = time.monotonic() - t0
    gw = Gateway(upstream.base_url, db, "--embeddings-model", EMBEDDING_MODEL)
    try:
        client = httpx.Client(base_url=f"{gw.url}/v1", timeout=120)
        rng = np.random.default_rng(3)

        def one() -> float:
            query = " ".join(zipf_words(rng, 4))
            start = time.perf_counter()
            got = client.post(f"/vector_stores/{vs_id}/search", json={"query": query, "max_num_results": 10})
            elapsed = time.perf_counter() - start
            assert got.status_code == 200 and got.json()["data"], got.text
            return elapsed * 1000

        cold = one()
        cpu0 = gw.cpu()
        times = [one() for _ in range(searches)]
        cpu = (gw.cpu() - cpu0) * 1000 / searches  # the gateway's CPU per search: what load does not change
        return {"backend": label, "chunks": chunks, "dimension": 384, "build_s": round(built, 1),
                "first_ms": round(cold, 1), "cpu_ms": round(cpu, 2), "p50_ms": round(percentile(times, 50), 2),
                "p99_ms": round(percentile(times, 99), 2), "rss_mb": round(gw.rss() / 2**20)}
    finally:
        gw.stop()


def turn(upstream: FakeChatUpstream, db: str, repeat: int) -> dict[str, Any]:
    gw = Gateway(upstream.base_url, db, "--embeddings-model", EMBEDDING_MODEL)
    try:
        client = httpx.Client(base_url=f"{gw.url}/v1", timeout=120)
        files = [client.post("/files", files={"file": (f"d{i}.txt", text_of(20_000, 100 + i))},
                             data={"purpose": "assistants"}).json()["id"] for i in range(20)]
        vs = client.post("/vector_stores", json={"name": "t", "file_ids": files}).json()
        while client.get(f"/vector_stores/{vs['id']}").json()["status"] == "in_progress":
            time.sleep(0.2)
        query = " ".join(WORDS[:3])

        def script(request: RecordedRequest) -> Stream:
            if request.body["messages"][-1]["role"] == "tool":
                return Stream(text_stream(["The answer【1】."]))
            if request.body.get("tools"):
                return Stream(tool_calls_stream([("c1", "file_search", [json.dumps({"queries": [query]})])]))
            return Stream(text_stream(["The answer."]))

        upstream.default = script

        def timed(body: dict[str, Any]) -> float:
            start = time.perf_counter()
            got = client.post("/responses", json=body)
            assert got.status_code == 200, got.text
            return (time.perf_counter() - start) * 1000

        plain, tool, searches = [], [], []
        for _ in range(repeat):
            plain.append(timed({"model": "fake-model", "input": "q"}))
            tool.append(timed({"model": "fake-model", "input": "q", "tools": [
                {"type": "file_search", "vector_store_ids": [vs["id"]]}]}))
            start = time.perf_counter()
            client.post(f"/vector_stores/{vs['id']}/search", json={"query": query})
            searches.append((time.perf_counter() - start) * 1000)
        med = statistics.median
        # a turn without tools is one model step and the gateway's own work; with file_search, two steps, the
        # search and the tool's work: what is left after two plain turns is the tool's (and the search's)
        added = med(tool) - 2 * med(plain)
        return {"plain_ms": round(med(plain), 2), "with_file_search_ms": round(med(tool), 2),
                "search_ms": round(med(searches), 2),
                "added_ms": round(added, 2), "added_beyond_search_ms": round(added - med(searches), 2)}
    finally:
        upstream.default = None
        gw.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ingest-mb", type=int, default=100, help="0 leaves the ingest case out")
    parser.add_argument("--file-mb", type=int, default=5, help="the size of each ingested file")
    parser.add_argument("--embeddings", action="store_true", help="ingest with the fake server's embeddings")
    parser.add_argument("--only-ingest", action="store_true", help="leave the search and turn cases out")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--pg", metavar="URL", help="also measure search on this PostgreSQL (a database is made)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.ingest_mb, args.chunks, args.searches, args.repeat = 5, 5_000, 30, 5
    out: dict[str, Any] = {}
    with FakeChatUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        if args.ingest_mb:
            out["ingest"] = [ingest(upstream, str(Path(tmp) / "ingest.db"), args.ingest_mb, args.file_mb,
                                    embeddings=args.embeddings)]
            print("ingest", out["ingest"][-1], flush=True)
            if args.pg:
                url = _pg_database(args.pg)
                try:
                    out["ingest"].append(ingest(upstream, url, args.ingest_mb, args.file_mb, "postgresql",
                                                args.embeddings))
                    print("ingest", out["ingest"][-1], flush=True)
                finally:
                    _pg_drop(args.pg, url)
        if args.only_ingest:
            print(report(out))
            if args.json:
                Path(args.json).write_text(json.dumps(out, indent=2))
            return 0
        out["search"] = [search(upstream, str(Path(tmp) / "search.db"), args.chunks, args.searches, "sqlite")]
        print("search", out["search"][-1], flush=True)
        if args.pg:
            url = _pg_database(args.pg)
            try:
                out["search"].append(search(upstream, url, args.chunks, args.searches, "postgresql"))
                print("search", out["search"][-1], flush=True)
            finally:
                _pg_drop(args.pg, url)
        out["turn"] = turn(upstream, str(Path(tmp) / "turn.db"), args.repeat)
        print("turn", out["turn"], flush=True)
    print(report(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


def _pg_admin(admin: str, sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _pg_database(admin: str) -> str:
    name = f"rg_bench_{uuid.uuid4().hex[:8]}"
    _pg_admin(admin, f'CREATE DATABASE "{name}"')
    return admin.rsplit("/", 1)[0] + "/" + name


def _pg_drop(admin: str, url: str) -> None:
    _pg_admin(admin, f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def report(out: dict[str, Any]) -> str:
    lines = []
    if "ingest" in out:
        lines += ["| ingest (auto chunking) | MB (files of) | chunks | wall s | CPU s | chunks / CPU-s | chunks / s | "
                  "peak RSS MB | RSS growth MB | another key's writes meanwhile: p50 / p99 / max ms |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for i in out["ingest"]:
            lines.append(
                f"| {i['backend']}, {'embeddings' if i['embeddings'] else 'no embeddings'} | {i['megabytes']} "
                f"({i['file_mb']}) | {i['chunks']} | {i['wall_s']} | {i['cpu_s']} | {i['chunks_per_cpu_s']} | "
                f"{i['chunks_per_s']} | {i['peak_rss_mb']} | {i['rss_growth_mb']} | {i['other_p50_ms']} / "
                f"{i['other_p99_ms']} / {i['other_max_ms']} ({i['other_failed']} failed) |")
        lines.append("")
    if "search" not in out:
        return "\n".join(lines)
    lines += ["| search | chunks | first (loads vectors) ms | gateway CPU ms / search | p50 ms | p99 ms | "
              "gateway RSS MB |", "|---|---|---|---|---|---|---|"]
    for s in out["search"]:
        lines.append(f"| {s['backend']} | {s['chunks']} × {s['dimension']} | {s['first_ms']} | {s['cpu_ms']} | "
                     f"{s['p50_ms']} | {s['p99_ms']} | {s['rss_mb']} |")
    t = out["turn"]
    lines += [f"\nload average during the run (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", "",
              "| turn (median ms) | without tools (1 step) | with file_search (2 steps) | search alone | "
              "added (with − 2 × without) | added beyond the search |", "|---|---|---|---|---|---|",
              f"| | {t['plain_ms']} | {t['with_file_search_ms']} | {t['search_ms']} | "
              f"{t['added_ms']} | {t['added_beyond_search_ms']} |"]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
