"""The web console's responses list over a large store: how long a page takes, through the real gateway.

    python -m bench.console                     # SQLite and PostgreSQL, 1,000,000 stored responses each
    python -m bench.console --rows 20000 --quick  # a smoke run (what tests/benchmarks runs)

For each backend (a fresh SQLite file; a PostgreSQL database created on `--pg` and dropped after) the
responses are written straight into the table in bulk (executemany in large transactions on SQLite, COPY on
PostgreSQL): `--rows` responses over 30 days, 8 models, 50 key owners, 2 % failed, 1 % in one of 100
conversations, ~700 bytes of JSON each. Then a gateway with `--console` starts on that database (its
indexes are made at start-up: the time is reported), logs in, and asks each page of the list `--repeat`
times over HTTP: the newest page, the next page (a cursor), and one filter each of model, status, key owner,
conversation and a time window. Reported per case: p50 / p99 in ms and rows shown; the target is p50
<= 100 ms for each. Everything runs in this process, on loopback; nothing is timed in tests.

Whether the console costs the request path anything when it is off is `bench.instructions` run on the tree
before and after it (docs/console.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn

from responses_gateway.app import create_app
from responses_gateway.configure import make

from .databases import PG_ADMIN, database
from .load import percentile

KEY = "bench-console-key-0123456789"
MODELS = [f"model-{i}" for i in range(8)]
OWNERS = [f"{i:032x}" for i in range(50)]
DAY = 86400
TARGET_MS = 100.0


CHUNK = 100_000


def rows_of(start: int, n: int, now: int) -> list[tuple[Any, ...]]:
    """(id, owner, created_at, expires_at, body, status) for responses start .. start + n over the last 30
    days (made a chunk at a time: a million at once would take gigabytes)."""
    rnd = random.Random(start)
    out = []
    for i in range(start, start + n):
        created = now - rnd.randrange(30 * DAY)
        status = "failed" if rnd.random() < 0.02 else "completed"
        model = MODELS[i % len(MODELS)]
        body: dict[str, Any] = {
            "id": f"resp_{i:012d}", "object": "response", "created_at": created, "status": status, "model": model,
            "output": [{"id": f"msg_{i:012d}", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "annotations": [],
                                     "text": "a stored answer of a few dozen words " * 8}]}],
            "usage": {"input_tokens": 100 + i % 50, "output_tokens": 60, "total_tokens": 160 + i % 50}}
        if i % 100 == 0:
            body["conversation"] = {"id": f"conv_{(i // 100) % 100:04d}"}
        out.append((body["id"], OWNERS[i % len(OWNERS)], created, now + 60 * DAY, orjson.dumps(body).decode(),
                    status))
    return out


def fill_sqlite(path: str, total: int, now: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    for start in range(0, total, CHUNK):
        with conn:
            conn.executemany("INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, "
                             "deleted, body, status) VALUES (?, ?, NULL, ?, ?, 0, ?, ?)",
                             rows_of(start, min(CHUNK, total - start), now))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def fill_postgres(url: str, total: int, now: int) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for start in range(0, total, CHUNK):
            rows = rows_of(start, min(CHUNK, total - start), now)
            await conn.copy_records_to_table(
                "responses", records=[(r[0], r[1], None, r[2], r[3], 0, r[4], r[5]) for r in rows],
                columns=["id", "owner", "previous_response_id", "created_at", "expires_at", "deleted", "body",
                         "status"])
        await conn.execute("ANALYZE responses")
    finally:
        await conn.close()


async def migrate(url: str) -> None:
    from responses_gateway.store import open_store

    store = open_store(url)
    await store.open()
    try:
        await store.upgrade()
    finally:
        await store.close()


class Server:
    """The gateway with --console on `url`, under uvicorn in a thread of this process."""

    def __init__(self, url: str):
        settings = make(db=url, console=True, console_key=KEY, db_timeout=600.0)
        self.app = create_app(settings)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def indexed(self, timeout: float = 3600.0) -> float:
        """Seconds until the console's indexes were made (they are made in the background at start-up)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            task = getattr(self.app.state, "console", None)
            if task is not None and task.indexing is not None and task.indexing.done():
                return time.monotonic() - t0
            time.sleep(0.05)
        raise TimeoutError("the console's indexes were not made")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def login(http: httpx.Client) -> None:
    page = http.get("/console/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    answer = http.post("/console/login", data={"csrf": token.group(1), "key": KEY})
    assert answer.status_code == 303, answer.status_code


def cases(http: httpx.Client, now: int) -> dict[str, str]:
    first = http.get("/console/responses").text
    after = re.search(r'rel="next" href="([^"]+)"', first)
    assert after is not None, "no next page"
    return {
        "newest page": "/console/responses",
        "next page (cursor)": after.group(1).replace("&amp;", "&"),
        "model": f"/console/responses?model={MODELS[3]}",
        "status failed": "/console/responses?status=failed",
        "key owner": f"/console/responses?owner={OWNERS[17]}",
        "conversation": "/console/responses?conversation=conv_0007",
        "time window (a day, 10 days ago)": f"/console/responses?since={now - 11 * DAY}&until={now - 10 * DAY}",
    }


def measure(base: str, repeat: int, now: int) -> list[dict[str, Any]]:
    out = []
    with httpx.Client(base_url=base, timeout=600) as http:
        login(http)
        for name, path in cases(http, now).items():
            http.get(path)  # warm: the first read of a page's index and rows
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                page = http.get(path)
                times.append(time.perf_counter() - t0)
                assert page.status_code == 200, (path, page.status_code)
            shown = page.text.count("<tr>") - 1
            out.append({"case": name, "p50_ms": percentile(times, 50) * 1000, "p99_ms": percentile(times, 99) * 1000,
                        "rows_shown": max(shown, 0)})
    return out


async def one(backend: str, tmp: Path, opts: argparse.Namespace) -> dict[str, Any]:
    now = int(time.time())
    async with database(backend, tmp, opts.pg) as url:
        await migrate(url)
        t0 = time.perf_counter()
        if backend == "sqlite":
            await asyncio.to_thread(fill_sqlite, url, opts.rows, now)
        else:
            await fill_postgres(url, opts.rows, now)
        filled = time.perf_counter() - t0
        server = Server(url)

        def run() -> tuple[float, list[dict[str, Any]]]:
            with server as base:
                return server.indexed(), measure(base, opts.repeat, now)

        indexed, results = await asyncio.to_thread(run)
    return {"backend": backend, "rows": opts.rows, "fill_seconds": filled, "index_seconds": indexed,
            "cases": results}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| backend | rows | bulk insert | indexes at start-up | page | p50 ms | p99 ms | rows shown |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for c in r["cases"]:
            lines.append(f"| {r['backend']} | {r['rows']:,} | {r['fill_seconds']:.1f} s | {r['index_seconds']:.1f} s "
                         f"| {c['case']} | {c['p50_ms']:.1f} | {c['p99_ms']:.1f} | {c['rows_shown']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=30, help="requests per page")
    p.add_argument("--backends", default="sqlite,postgresql")
    p.add_argument("--pg", default=PG_ADMIN, help="PostgreSQL admin URL (a database is created and dropped)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 20,000 rows, 5 requests per page")
    p.add_argument("--json", type=Path, help="also write the results here")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.rows, opts.repeat = min(opts.rows, 20_000), min(opts.repeat, 5)

    async def run() -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="rg-bench-console-") as tmp:
            return [await one(b, Path(tmp), opts) for b in opts.backends.split(",")]

    results = asyncio.run(run())
    print(table(results))
    misses = [(r["backend"], c["case"]) for r in results for c in r["cases"] if c["p50_ms"] > TARGET_MS]
    print("PASS: every page p50 <= 100 ms" if not misses else f"MISS: {misses}")
    if opts.json:
        opts.json.write_text(json.dumps({"results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
