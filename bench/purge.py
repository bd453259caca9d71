"""Retention at scale: how fast a purge deletes an expired backlog, and how long writers wait meanwhile.

    python -m bench.purge                      # SQLite and PostgreSQL, 200,000 expired responses each
    python -m bench.purge --rows 1000000       # the figure in docs/benchmarks.md
    python -m bench.purge --quick              # a smoke run of a few seconds

For each backend (a fresh SQLite file; a PostgreSQL database created for the run on `--pg`, dropped after)
and each way of purging:

  * batched — the store's purge (store/retention.py): a batch of responses, with their items and event
    logs, per transaction;
  * single  — the purge as it was before batching: three DELETE statements over the whole backlog in one
    transaction (for comparison; on PostgreSQL it runs with no deadline here, where --db-timeout would
    cut it);

the backlog (`--rows` expired responses, two items and one event-log run each, ~2 kB of JSON a response) is
written first, then purged while two writers each save a fresh response every `--write-every-ms`: one
through the purging store itself (the server's hourly purge beside its own saves) and one through a second
store on the same database (another worker process, or `db purge` beside a running server). Reported: the
purge's duration and responses per second, and the writers' save latency p50 / p99 / max during it.
Everything runs in this process, on loopback; nothing is timed in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from responses_gateway.store import SQLStore, open_store

from .databases import PG_ADMIN, database
from .load import percentile

SINGLE = [  # the purge before batching: everything expired, in one transaction
    "DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)",
    "DELETE FROM items WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)",
    "DELETE FROM responses WHERE expires_at <= ?",
]


def _message(mid: str, words: int) -> dict[str, Any]:
    return {"id": mid, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "annotations": [], "text": " ".join(["word"] * words)}]}


ITEM = orjson.dumps(_message("msg_x", 80)).decode()
BODY = orjson.dumps({"id": "resp_x", "object": "response", "status": "completed", "model": "bench-model",
                     "output": [_message("msg_x", 200)], "usage": {"input_tokens": 10, "output_tokens": 200}}
                    ).decode()


async def backlog(store: SQLStore, rows: int, chunk: int = 5000) -> None:
    """`rows` expired responses, written straight into the tables in chunks."""
    now = int(time.time())
    for start in range(0, rows, chunk):
        ids = [f"resp_old_{i}" for i in range(start, min(rows, start + chunk))]
        await store.engine.write([
            ("INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, deleted, body, "
             "status) VALUES (?, 'bench', NULL, ?, ?, 0, ?, 'completed')",
             [(rid, now - 100_000, now - 10 * rows + start + i, BODY) for i, rid in enumerate(ids)]),
            ("INSERT INTO items (response_id, part, position, id, owner, body) VALUES (?, ?, 0, ?, 'bench', ?)",
             [(rid, part, f"msg_{rid}_{part}", ITEM) for rid in ids for part in (0, 1)]),
            ("INSERT INTO response_events (response_id, seq, last_seq, created_at, frames) VALUES (?, 0, 9, ?, ?)",
             [(rid, now, "event: x\ndata: {}\n\n" * 10) for rid in ids]),
        ])


async def writer(store: SQLStore, every: float, stop: asyncio.Event, tag: str,
                 failures: list[str]) -> list[tuple[float, float]]:
    """Save a fresh response every `every` seconds until `stop`; each save's (end, latency); the failed
    saves' errors in `failures`."""
    latencies: list[tuple[float, float]] = []
    n = 0
    while not stop.is_set():
        n += 1
        rid = f"resp_{tag}_{n}_{uuid.uuid4().hex[:8]}"
        response = {"id": rid, "created_at": int(time.time()), "status": "completed", "output": [_message(f"msg_{rid}", 20)]}
        t0 = time.perf_counter()
        try:
            await store.save(response, [_message(f"in_{rid}", 20)], "bench")
        except Exception as exc:  # e.g. SQLite's "database is locked" past its busy timeout: counted, not fatal
            failures.append(f"{type(exc).__name__}: {exc}")
        latencies.append((time.perf_counter(), time.perf_counter() - t0))
        await asyncio.sleep(every)
    return latencies


async def one(url: str, mode: str, rows: int, every: float) -> dict[str, Any]:
    store, other = open_store(url, timeout=600.0), open_store(url, timeout=600.0)
    for s in (store, other):
        await s.open()
    await store.upgrade()
    try:
        for table in ("response_events", "items", "responses"):
            await store.engine.write([(f"DELETE FROM {table}", [()])])
        await backlog(store, rows)
        stop = asyncio.Event()
        failed: dict[str, list[str]] = {"same": [], "other": []}
        writers = [asyncio.create_task(writer(store, every, stop, "same", failed["same"])),
                   asyncio.create_task(writer(other, every, stop, "other", failed["other"]))]
        await asyncio.sleep(0.2)  # the writers are going
        t0 = time.perf_counter()
        if mode == "batched":
            purged = await store.purge()
        else:
            now = int(time.time())
            purged = await store.engine.write([(sql, [(now,)]) for sql in SINGLE], count_last=True)
        t1 = time.perf_counter()
        seconds = t1 - t0
        await asyncio.sleep(0.2)
        stop.set()
        same, others = await asyncio.gather(*writers)
    finally:
        for s in (store, other):
            await s.close()
    row: dict[str, Any] = {"mode": mode, "rows": rows, "purged": purged, "seconds": seconds,
                           "responses_per_s": purged / seconds if seconds else 0.0}
    for name, saves in (("same", same), ("other", others)):
        lat = [latency for end, latency in saves if end >= t0 and end - latency <= t1] or [0.0]  # during it
        row[f"{name}_saves"] = len(lat)
        row[f"{name}_failed"] = len(failed[name])
        row[f"{name}_errors"] = sorted(set(failed[name]))
        row[f"{name}_p50_ms"] = percentile(lat, 50) * 1000
        row[f"{name}_p99_ms"] = percentile(lat, 99) * 1000
        row[f"{name}_max_ms"] = max(lat) * 1000
    return row


async def run(opts: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="rg-bench-purge-") as tmp:
        for backend in opts.backends:
            async with database(backend, Path(tmp), opts.pg) as url:
                for mode in opts.modes:
                    row = await one(url, mode, opts.rows, opts.write_every_ms / 1000)
                    results.append({"backend": backend, **row})
                    print(_line(results[-1]), flush=True)
    return results


HEADER = ("| backend | purge | expired responses | seconds | responses/s | saves beside it, same store: p50 / p99 / "
          "max ms (failed) | another store (process): p50 / p99 / max ms (failed) |\n|---|---|---|---|---|---|---|")


def _line(r: dict[str, Any]) -> str:
    return (f"| {r['backend']} | {r['mode']} | {r['purged']:,} | {r['seconds']:.1f} | {r['responses_per_s']:,.0f} | "
            f"{r['same_p50_ms']:.1f} / {r['same_p99_ms']:.1f} / {r['same_max_ms']:.0f} ({r['same_failed']}) | "
            f"{r['other_p50_ms']:.1f} / {r['other_p99_ms']:.1f} / {r['other_max_ms']:.0f} ({r['other_failed']}) |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.purge", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 3,000 rows")
    p.add_argument("--rows", type=int, default=200_000, help="expired responses in the backlog [200000]")
    p.add_argument("--backends", default="sqlite,postgresql", help="which, comma-separated [sqlite,postgresql]")
    p.add_argument("--modes", default="batched,single", help="which purges, comma-separated [batched,single]")
    p.add_argument("--write-every-ms", type=float, default=10.0, help="each writer's pause between saves [10]")
    p.add_argument("--pg", default=PG_ADMIN, help=f"PostgreSQL to create the run's database on [{PG_ADMIN}]")
    p.add_argument("--json", type=Path, help="also write the results here")
    opts = p.parse_args(argv)
    opts.backends = opts.backends.split(",")
    opts.modes = opts.modes.split(",")
    if opts.quick:
        opts.rows = 3000
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    print(HEADER, flush=True)
    results = asyncio.run(run(opts))
    if opts.json:
        opts.json.write_bytes(orjson.dumps({"options": {k: str(v) for k, v in vars(opts).items()},
                                            "results": results}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
