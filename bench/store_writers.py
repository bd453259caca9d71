"""The store alone under W writer processes: saves per second, CPU per save, and what each write waited for.

    python -m bench.store_writers                       # SQLite and PostgreSQL, W = 1, 2, 4; about a minute
    python -m bench.store_writers --processes 2 --backends sqlite
    python -m bench.store_writers --quick               # a smoke run of a few seconds

Each of W processes (what `--workers W`, or W replicas, would be) opens the store on one database and saves
finished responses (a 256-token answer and its input, as the gateway stores them) from `--concurrency`
coroutines for `--seconds`, nothing else: the store is the bottleneck, so the database's write lock is
contended as hard as it can be — saturation at W = 2 on a 2-core machine, which end-to-end runs there
cannot reach (the gateway's own CPU comes first). Each process reports its saves, its CPU (user + system,
every thread), and, from its metrics, how long each write waited before its transaction began
(`responses_gateway_store_lock_wait_seconds`) and how many waited at all, by how
(`responses_gateway_store_lock_waits_total{how}`: `busy` = slept in SQLite's busy handler, `host` = queued
on the host's writer lock, `pool` = no pooled PostgreSQL connection free).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from .databases import PG_ADMIN, database

TEXT = " ".join(["token"] * 256)


def finished(rid: str) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": "bench-model", "previous_response_id": None, "store": True, "error": None,
            "output": [{"id": f"msg_{rid}", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": TEXT}]}],
            "usage": {"input_tokens": 12, "output_tokens": 256, "total_tokens": 268}}


INPUT = [{"id": "msg_in", "type": "message", "role": "user", "status": "completed",
          "content": [{"type": "input_text", "text": "Write a long story about a fox."}]}]


def _samples() -> dict[tuple[str, str], float]:
    """This process's store-lock series: (sample name, its `le` or `how` label) → value."""
    from prometheus_client import REGISTRY

    out = {}
    for metric in REGISTRY.collect():
        if metric.name.startswith("responses_gateway_store_lock"):
            for s in metric.samples:
                out[(s.name, s.labels.get("le") or s.labels.get("how") or "")] = s.value
    return out


def child(url: str, concurrency: int, seconds: float, start_at: float, rate: float = 0.0) -> dict[str, Any]:
    """One writer process: saves for `seconds` from `start_at` (wall clock, shared by all) — from
    `concurrency` closed loops, or with `rate`, one save started every 1/rate s whatever is still running."""
    from responses_gateway.store import open_store

    async def run() -> dict[str, Any]:
        store = open_store(url)
        await store.open()
        await store.upgrade()
        await asyncio.sleep(max(0.0, start_at - time.time()))
        before, r0, t0 = _samples(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        saves = 0
        stop = t0 + seconds

        async def loop() -> None:
            nonlocal saves
            while time.perf_counter() < stop:
                rid = f"resp_{uuid.uuid4().hex}"
                await store.save(finished(rid), INPUT, "bench")
                saves += 1

        async def one() -> None:
            nonlocal saves
            await store.save(finished(f"resp_{uuid.uuid4().hex}"), INPUT, "bench")
            saves += 1

        if rate:  # open loop: a save every 1/rate s, as independent requests end
            running = set()
            due = t0
            while due < stop:
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                task = asyncio.create_task(one())
                running.add(task)
                task.add_done_callback(running.discard)
                due += 1 / rate
            await asyncio.gather(*running)
        else:
            await asyncio.gather(*[loop() for _ in range(concurrency)])
        wall = time.perf_counter() - t0
        r1, after = resource.getrusage(resource.RUSAGE_SELF), _samples()
        await store.close()
        return {"saves": saves, "wall": wall, "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                "metrics": {k: v - before.get(k, 0.0) for k, v in after.items()}}

    return asyncio.run(run())


def combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    metrics: dict[tuple[str, str], float] = {}
    for r in results:
        for k, v in r["metrics"].items():
            metrics[k] = metrics.get(k, 0.0) + v
    saves = sum(r["saves"] for r in results)
    wall = max(r["wall"] for r in results)
    lock = "responses_gateway_store_lock_wait_seconds"
    count, total = metrics.get((f"{lock}_count", ""), 0.0), metrics.get((f"{lock}_sum", ""), 0.0)
    waits = {how: metrics.get(("responses_gateway_store_lock_waits_total", how), 0.0) for how in ("host", "busy", "pool")}
    buckets = sorted((float(le), v) for (name, le), v in metrics.items() if name == f"{lock}_bucket")

    def quantile(q: float) -> float | None:
        for bound, cumulative in buckets:
            if count and cumulative >= q * count:
                return bound * 1000
        return None

    return {"saves": saves, "saves_per_s": saves / wall, "cpu_us_per_save": 1e6 * sum(r["cpu"] for r in results) / saves,
            "writes": count, "waited": sum(waits.values()), "waits": waits,
            "waited_share": sum(waits.values()) / count if count else None,
            "wait_mean_ms": 1000 * total / count if count else None, "wait_p50_ms": quantile(0.5),
            "wait_p90_ms": quantile(0.9), "wait_p99_ms": quantile(0.99), "wait_total_s": total}


def case(backend: str, processes: int, opts: argparse.Namespace, tmpdir: Path) -> dict[str, Any]:
    async def run() -> list[dict[str, Any]]:
        async with database(backend, tmpdir, opts.pg) as url:
            await asyncio.to_thread(child, url, 1, 0.0, 0.0)  # the schema, once, before the processes race for it
            start_at = time.time() + 2.0
            loop = asyncio.get_running_loop()
            with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
                return list(await asyncio.gather(*[
                    loop.run_in_executor(pool, child, url, opts.concurrency, opts.seconds, start_at, opts.rate)
                    for _ in range(processes)]))

    results = asyncio.run(run())
    return {"backend": backend, "processes": processes, "concurrency": opts.concurrency, "rate": opts.rate,
            **combine(results)}


HEADER = ("| backend | processes | saves/s | CPU µs per save | writes | waited (share) | by how: host / busy / pool | "
          "wait mean / p50 / p99 ms | time waited, s |\n|---|---|---|---|---|---|---|---|---|")


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "—" if v is None else format(v, fmt)


def line(r: dict[str, Any]) -> str:
    share = "—" if r["waited_share"] is None else f"{100 * r['waited_share']:.1f} %"
    w = r["waits"]
    return (f"| {r['backend']} | {r['processes']} | {r['saves_per_s']:,.0f} | {r['cpu_us_per_save']:.0f} | "
            f"{r['writes']:,.0f} | {r['waited']:,.0f} ({share}) | {w['host']:,.0f} / {w['busy']:,.0f} / {w['pool']:,.0f} | "
            f"{_f(r['wait_mean_ms'], '.3f')} / {_f(r['wait_p50_ms'], '.3f')} / {_f(r['wait_p99_ms'], '.3f')} | "
            f"{r['wait_total_s']:.2f} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.store_writers", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 2 s per case, SQLite, W = 1, 2")
    p.add_argument("--backends", default="sqlite,postgresql", help="comma-separated [sqlite,postgresql]")
    p.add_argument("--processes", default="1,2,4", help="writer processes, comma-separated [1,2,4]")
    p.add_argument("--concurrency", type=int, default=32, help="saving coroutines per process [32]")
    p.add_argument("--seconds", type=float, default=8.0, help="seconds of saving per case [8]")
    p.add_argument("--rate", type=float, default=0.0,
                   help="saves/s per process, open loop (0: saturate from --concurrency closed loops) [0]")
    p.add_argument("--pg", default=PG_ADMIN, help=f"PostgreSQL to create each case's database on [{PG_ADMIN}]")
    p.add_argument("--json", type=Path, help="also write the results here")
    opts = p.parse_args(argv)
    backends, processes = opts.backends.split(","), [int(w) for w in opts.processes.split(",")]
    if opts.quick:
        opts.seconds, backends, processes = 2.0, ["sqlite"], [1, 2]
    import responses_gateway

    print(f"{os.cpu_count()} CPUs; store code {Path(responses_gateway.__file__).parent}; "
          + (f"{opts.rate:g} saves/s per process (open loop)" if opts.rate else
             f"{opts.concurrency} saving coroutines per process (saturated)") + f", {opts.seconds:g} s per case",
          flush=True)
    print(HEADER, flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rg-bench-writers-") as tmp:
        for backend in backends:
            for n in processes:
                rows.append(case(backend, n, opts, Path(tmp)))
                print(line(rows[-1]), flush=True)
    if opts.json:
        opts.json.write_bytes(orjson.dumps({"options": {k: str(v) for k, v in vars(opts).items()}, "results": rows},
                                           option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
