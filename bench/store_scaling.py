"""Does the store scale with the workers? Saturated stored streams through `--workers W` (and, on PostgreSQL,
two gateway replicas on one database), and what each store write waited for before its transaction began.

    python -m bench.store_scaling                          # SQLite and PostgreSQL, W = 1, 2; about 3 minutes
    python -m bench.store_scaling --workers 1,2,4 --replicas 1,2
    python -m bench.store_scaling --quick                  # a smoke run of a few seconds

A 2-core machine cannot show the many-core plateau (issue 24): with every worker on one core, that core is
busy whatever the workers do, so throughput hardly moves with W. What it can show is the waiting itself.
The gateway exports, per store write, the time it waited for the database's write lock (SQLite) or for a
pooled connection (PostgreSQL) — `responses_gateway_store_lock_wait_seconds` — and counts the writes that
waited at all by how (`responses_gateway_store_lock_waits_total{how}`: `busy` = slept in SQLite's busy
handler, `host` = queued on the host's writer lock and woken at its release, `pool`). This harness reads
both from /metrics around each case and reports the share of writes that waited and the wait's quantiles
(bucket bounds), beside responses/s and the gateway's CPU per response.

Layout: pinned where the machine has a CPU to spare — every gateway process (all workers, all replicas) on
the first CPU, the fake upstream and this load generator on the others (bench/layout.py) — else unpinned.
Each case: a fresh database (a SQLite file; a PostgreSQL database created on `--pg` and dropped after), the
fake upstream (`bench.fake_upstream`, `--tokens` per answer, no delay), the gateway(s), one warm-up round,
then `--requests` stored streams, `--concurrency` at a time (split evenly over the replicas).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from . import layout as layouts
from . import load
from .databases import PG_ADMIN, database
from .run import Proc, clean_env, free_port, machine, wait_http

LINE = re.compile(r'^(responses_gateway_store_[a-z_]+)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN|\+Inf)$')


def scrape(url: str) -> dict[str, float]:
    """The store's series from /metrics, keyed by name{labels}."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out[f"{m[1]}{{{m[2] or ''}}}"] = float(m[3])
    return out


def delta(before: list[dict[str, float]], after: list[dict[str, float]]) -> dict[str, float]:
    """after − before, summed over the replicas."""
    out: dict[str, float] = {}
    for b, a in zip(before, after, strict=True):
        for key, value in a.items():
            out[key] = out.get(key, 0.0) + value - b.get(key, 0.0)
    return out


def bucket_quantile(d: dict[str, float], name: str, q: float) -> float | None:
    """The upper bound of the histogram bucket holding quantile `q` (seconds); None without observations."""
    buckets = sorted((float(m[1]), v) for k, v in d.items()
                     if k.startswith(f"{name}_bucket") and (m := re.search(r'le="([^"]+)"', k)))
    total = d.get(f"{name}_count{{}}", 0.0)
    if not total:
        return None
    for bound, cumulative in buckets:
        if cumulative >= q * total:
            return bound
    return float("inf")


def summary(d: dict[str, float]) -> dict[str, Any]:
    writes = d.get("responses_gateway_store_lock_wait_seconds_count{}", 0.0)
    waits = {how: d.get(f'responses_gateway_store_lock_waits_total{{how="{how}"}}', 0.0)
             for how in ("host", "busy", "pool")}
    lock = "responses_gateway_store_lock_wait_seconds"
    saves = d.get("responses_gateway_store_latency_seconds_count{}", 0.0)
    return {
        "writes": writes,
        "waited": sum(waits.values()),
        "waited_share": sum(waits.values()) / writes if writes else None,
        "waits": waits,
        "wait_mean_ms": 1000 * d.get(f"{lock}_sum{{}}", 0.0) / writes if writes else None,
        "wait_p50_ms": _ms(bucket_quantile(d, lock, 0.50)),
        "wait_p90_ms": _ms(bucket_quantile(d, lock, 0.90)),
        "wait_p99_ms": _ms(bucket_quantile(d, lock, 0.99)),
        "saves": saves,
        "save_mean_ms": 1000 * d.get("responses_gateway_store_latency_seconds_sum{}", 0.0) / saves if saves else None,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


class PostgresWatch:
    """What the database's own processes do during a case: the CPU of the backends serving it, and samples of
    their wait events (pg_stat_activity every 10 ms) — PostgreSQL's side of "what did the writes wait for"."""

    QUERY = ("SELECT pid, state, wait_event_type, wait_event FROM pg_stat_activity "
             "WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()")

    def __init__(self, url: str):
        self.url = url
        self.pids: dict[int, float] = {}  # backend pid → its CPU seconds when first seen
        self.samples = 0
        self.active = 0
        self.waits: dict[str, int] = {}

    async def __aenter__(self) -> PostgresWatch:
        import asyncpg

        self.conn = await asyncpg.connect(self.url, timeout=5)
        self.task = asyncio.create_task(self._sample())
        return self

    async def _sample(self) -> None:
        while True:
            rows = await self.conn.fetch(self.QUERY)
            self.samples += 1
            for row in rows:
                if row["pid"] not in self.pids:
                    self.pids[row["pid"]] = load.cpu_seconds([row["pid"]])
                if row["state"] == "active":
                    self.active += 1
                    if row["wait_event_type"]:
                        key = f"{row['wait_event_type']}:{row['wait_event']}"
                        self.waits[key] = self.waits.get(key, 0) + 1
            await asyncio.sleep(0.01)

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.conn.close()

    def result(self) -> dict[str, Any]:
        cpu = sum(load.cpu_seconds([pid]) - start for pid, start in self.pids.items())
        top = sorted(self.waits.items(), key=lambda kv: -kv[1])[:4]
        return {"pg_cpu_s": cpu, "pg_active_mean": self.active / self.samples if self.samples else None,
                "pg_waits": {k: v / self.samples for k, v in top}}


async def case(opts: argparse.Namespace, tmpdir: Path, backend: str, workers: int, replicas: int,
               say) -> dict[str, Any]:
    env = clean_env()
    up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens",
                           str(opts.tokens)], tmpdir, env, capture_stdout=True)
    gateways: list[Proc] = []
    try:
        up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
        wait_http(f"{up_url}/health", up)
        async with database(backend, tmpdir, opts.pg) as db:
            urls = []
            for r in range(replicas):
                port = free_port()
                gw = Proc(f"gateway-{backend}-w{workers}-r{r}",
                          [sys.executable, "-m", "responses_gateway", "serve", "--upstream", f"{up_url}/v1",
                           "--host", "127.0.0.1", "--port", str(port), "--db", db, "--workers", str(workers),
                           "--log-level", "warning", "--max-in-flight", "4096"], tmpdir, env)
                gateways.append(gw)
                urls.append(f"http://127.0.0.1:{port}")
                wait_http(f"{urls[-1]}/health", gw, timeout=60)
            gw_pids = [pid for gw in gateways for pid in load.tree(gw.pid)]
            chosen = layouts.make(opts.layout) if opts.layout else None
            if chosen is not None:
                layouts.apply(chosen, gw_pids, [up.pid, os.getpid()])
            body = load.request_body("gateway", store=True)
            per = max(1, opts.concurrency // replicas)
            async with contextlib.AsyncExitStack() as stack:
                sessions = [await stack.enter_async_context(load.new_session(per, opts.duration + 30)) for _ in urls]
                await asyncio.gather(*[load.run_load(u, "gateway", per * 2, per, body, session=s)
                                       for u, s in zip(urls, sessions, strict=True)])  # warm-up
                before = [scrape(u) for u in urls]
                cpu0 = load.cpu_seconds(gw_pids)
                busy0 = load.machine_busy_seconds()
                async with contextlib.AsyncExitStack() as watching:
                    watch = (await watching.enter_async_context(PostgresWatch(db)) if backend == "postgresql"
                             else None)
                    results = await asyncio.gather(*[load.run_load(u, "gateway", opts.requests // replicas, per,
                                                                   body, duration=opts.duration, session=s)
                                                     for u, s in zip(urls, sessions, strict=True)])
                busy1 = load.machine_busy_seconds()
                cpu = load.cpu_seconds(gw_pids) - cpu0
                after = [scrape(u) for u in urls]
                pg = watch.result() if watch is not None else {}
        merged = load.RunResult(samples=[s for r in results for s in r.samples], wall=max(r.wall for r in results),
                                client_cpu=sum(r.client_cpu for r in results))
        run = load.summarize(merged, gateway_cpu=cpu)
        row = {"backend": backend, "workers": workers, "replicas": replicas, "layout": opts.layout or "unpinned",
               "responses_per_s": run["requests_per_s"], "ok": run["ok"], "errors": run["errors"],
               "first_error": run["first_error"], "gateway_cpu_ms_per_response": run["gateway_cpu_ms_per_request"],
               "gateway_cpu_pct": run["gateway_cpu_pct"],
               "machine_busy_pct": (100 * (busy1 - busy0) / merged.wall) if busy0 is not None and busy1 is not None
               else None, **summary(delta(before, after)), **pg}
        if pg:
            row["pg_cpu_ms_per_response"] = 1000 * pg["pg_cpu_s"] / run["ok"] if run["ok"] else None
        say(line(row))
        return row
    finally:
        for gw in gateways:
            gw.stop()
        up.stop()


HEADER = ("| backend | workers × replicas | responses/s | gateway CPU ms/response | store writes | waited (share) | "
          "by how: host / busy / pool | wait mean / p50 / p99 ms | save mean ms |\n|---|---|---|---|---|---|---|---|---|")


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "—" if v is None else format(v, fmt)


def line(r: dict[str, Any]) -> str:
    w = r["waits"]
    share = "—" if r["waited_share"] is None else f"{100 * r['waited_share']:.1f} %"
    pg = (f" PostgreSQL backends: {_f(r['pg_cpu_ms_per_response'])} ms CPU/response, "
          f"{_f(r['pg_active_mean'], '.2f')} active on average; waiting on "
          + (", ".join(f"{k} {v:.2f}" for k, v in r["pg_waits"].items()) or "nothing sampled")
          if "pg_cpu_s" in r else "")
    return (f"| {r['backend']} | {r['workers']} × {r['replicas']} | {r['responses_per_s']:.0f} | "
            f"{_f(r['gateway_cpu_ms_per_response'])} | {r['writes']:.0f} | {r['waited']:.0f} ({share}) | "
            f"{w['host']:.0f} / {w['busy']:.0f} / {w['pool']:.0f} | {_f(r['wait_mean_ms'], '.3f')} / "
            f"{_f(r['wait_p50_ms'], '.3f')} / {_f(r['wait_p99_ms'], '.3f')} | {_f(r['save_mean_ms'])} |"
            + (f" errors: {r['errors']} ({r['first_error']})" if r["errors"] else "") + pg)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.store_scaling", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 200 requests, W = 1, 2, SQLite only")
    p.add_argument("--backends", default="sqlite,postgresql", help="comma-separated [sqlite,postgresql]")
    p.add_argument("--workers", default="1,2", help="--workers values, comma-separated [1,2]")
    p.add_argument("--replicas", default="1,2", help="PostgreSQL: gateway replicas on one database [1,2]")
    p.add_argument("--concurrency", type=int, default=64, help="streams in flight, over all replicas [64]")
    p.add_argument("--requests", type=int, default=4000, help="stored streams per case [4000]")
    p.add_argument("--duration", type=float, default=30.0, help="no new request after this many seconds [30]")
    p.add_argument("--tokens", type=int, default=256, help="tokens per answer [256]")
    p.add_argument("--pg", default=PG_ADMIN, help=f"PostgreSQL to create each case's database on [{PG_ADMIN}]")
    p.add_argument("--json", type=Path, help="also write the results here")
    opts = p.parse_args(argv)
    opts.backends = opts.backends.split(",")
    opts.workers = [int(w) for w in opts.workers.split(",")]
    opts.replicas = [int(r) for r in opts.replicas.split(",")]
    if opts.quick:
        opts.requests, opts.concurrency, opts.tokens, opts.backends = 200, 16, 32, ["sqlite"]
    opts.layout = "pinned" if len(layouts.available()) > 1 else None
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    say = lambda text: print(text, flush=True)  # noqa: E731
    meta = machine()
    say(f"{meta['cpu']}, {meta['cores']} CPUs, commit {meta['commit']}; layout {opts.layout or 'unpinned'}; "
        f"C={opts.concurrency}, {opts.tokens} tokens, store: true, {opts.requests} requests per case")
    say(HEADER)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rg-bench-store-") as tmp:
        for backend in opts.backends:
            for workers in opts.workers:
                for replicas in (opts.replicas if backend == "postgresql" else [1]):
                    rows.append(asyncio.run(case(opts, Path(tmp), backend, workers, replicas, say)))
    if opts.json:
        opts.json.write_bytes(orjson.dumps({"machine": meta, "options": {k: str(v) for k, v in vars(opts).items()},
                                            "results": rows, "at": time.time()}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
