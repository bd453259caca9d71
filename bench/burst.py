"""A burst of streams starting together: the time to first token the gateway adds, and where it is spent.

    python -m bench.burst                        # 256 streams at once, 5 bursts each way: about a minute
    python -m bench.burst --streams 64 --bursts 3
    python -m bench.burst --quick                # a smoke run

Issue 24, item 4: when many streams start together, each first token waits behind the fixed cost of the
responses ahead of it. The gateway (SQLite store, `store: true`) runs pinned alone on its CPU(s) where the
machine has a spare one, behind the fake upstream (100 tokens at 20 ms/token); its upstream connection pool
is warmed first by a closed-loop round of as many streams, as after a while in service. Then `--bursts`
times each way, interleaved: `--streams` requests sent at once on new client connections, straight to the
upstream (*direct*) and through the gateway. Per burst:

  * TTFT p50/p90/p99/max at the client; *added* = gateway − direct (the median burst by p99 each way);
  * *before the upstream*: when each request reached the upstream, from the burst's first send (the fake
    upstream's own timestamps, same clock) — the gateway's request handling queued behind the others;
    *after*: the rest of the added time (first token written upstream → first delta at the client);
  * the gateway's CPU over the burst, per response (all of it, first token to last) and its busy %;
  * a probe request (a GET that answers 404: no store, no upstream) every `--probe-ms` from a process of its
    own during the gateway's bursts: how long the event loop leaves any other request waiting while the
    burst starts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from . import layout, load
from .loadpool import LoadPool
from .run import ROOT, Proc, clean_env, fmt_num, get_json, post_json, upstream_and_gateway, wait_quiet


def probe_main(url: str, seconds: float, every: float) -> None:
    """The probe process: a GET of a path no route has (a 404: the HTTP server, the middleware and the router,
    nothing that waits on the store or the upstream) every `every` s for `seconds` s, on one kept-alive
    connection; prints the latencies (s) as one JSON list."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        conn.request("GET", "/_bench_probe")
        conn.getresponse().read()
        out.append(time.perf_counter() - t0)
        time.sleep(max(0.0, every - (time.perf_counter() - t0)))
    print(orjson.dumps(out).decode(), flush=True)


def start_probe(url: str, seconds: float, every: float, cpus: frozenset[int] | None) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "bench.burst", "--probe", url, "--probe-seconds", str(seconds),
                             "--probe-ms", str(every * 1000)], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    if cpus:
        layout.pin([proc.pid], cpus)
    return proc


def q(values: list[float], p: float) -> float:
    return load.percentile(values, p) * 1000.0


def before_upstream(samples: list[load.Sample], timeline: list) -> list[float]:
    """Seconds from the burst's first send to each request's arrival at the upstream (its last len(samples)
    streams)."""
    t0 = min(s.start for s in samples)
    entries = [e for e in timeline[-len(samples):] if e[0] >= t0 - 0.001]
    return [arrived - t0 for arrived, _first in entries]


async def one_burst(opts, pool, url: str, mode: str, pid: int | None, up: Proc, up_url: str, probe_cpus) -> dict:
    body = load.request_body(mode, store=opts.store)
    measured = pool.measured if pool is not None else load.measured
    probe = None
    if mode == "gateway" and opts.probe_ms > 0:
        probe = start_probe(url, opts.probe_seconds, opts.probe_ms / 1000.0, probe_cpus)
        await asyncio.sleep(0.3)  # its connection open, before the burst
    row = await measured(url, mode, opts.streams, opts.streams, body, duration=60.0, pid=pid, upstream_pid=up.pid,
                         fresh=True, keep_samples=True)
    samples = [s for s in row.pop("samples") if s.ok]
    timeline = get_json(f"{up_url}/_bench/stats")["timeline"]
    before = before_upstream(samples, timeline) if samples else []
    row["before_upstream_p50_ms"], row["before_upstream_p99_ms"] = q(before, 50), q(before, 99)
    row["before_upstream_max_ms"] = max(before, default=float("nan")) * 1000.0
    row["ttft_max_ms"] = max((s.ttft for s in samples), default=float("nan")) * 1000.0
    if probe is not None:
        out, _ = await asyncio.to_thread(probe.communicate, timeout=opts.probe_seconds + 30)
        lat = orjson.loads(out) if out.strip() else []
        row["probe_n"] = len(lat)
        row["probe_p50_ms"], row["probe_p99_ms"] = q(lat, 50), q(lat, 99)
        row["probe_max_ms"] = max(lat, default=float("nan")) * 1000.0
    await asyncio.sleep(opts.pause)
    return row


def median_by(rows: list[dict], key: str) -> dict:
    ordered = sorted(rows, key=lambda r: r[key])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["runs"] = [r[key] for r in rows]
    return row


def markdown(opts, rows: dict, meta: dict) -> str:
    d, g = rows["direct"], rows["gateway"]
    lines = [f"{opts.streams} streams at once on new connections, {opts.tokens} tokens at {opts.delay_ms:g} ms/token, "
             f"store={str(opts.store).lower()}, gateway {meta['workers']} worker(s), {meta['layout']}; median of "
             f"{opts.bursts} bursts each way by TTFT p99 (interleaved); load average {meta['loadavg']} at the start, "
             f"machine busy before: {fmt_num(meta['busy_before_pct'], '.0f')}% of a core.", "",
             "| | TTFT p50 / p90 / p99 / max ms | reached the upstream after p50 / p99 / max ms | gateway CPU ms/response "
             "| gateway CPU % | other CPU % | p99 of each burst |", "|---|---|---|---|---|---|---|"]
    for name, r in (("direct", d), ("gateway", g)):
        lines.append(f"| {name} | {r['ttft_p50_ms']:.1f} / {r['ttft_p90_ms']:.1f} / {r['ttft_p99_ms']:.1f} / "
                     f"{r['ttft_max_ms']:.1f} | {r['before_upstream_p50_ms']:.1f} / {r['before_upstream_p99_ms']:.1f} / "
                     f"{r['before_upstream_max_ms']:.1f} | {fmt_num(r.get('gateway_cpu_ms_per_request'), '.2f')} | "
                     f"{fmt_num(r.get('gateway_cpu_pct'), '.0f')} | {fmt_num(r.get('unattributed_cpu_pct'), '.0f')} | "
                     + ", ".join(f"{x:.0f}" for x in r["runs"]) + " |")
    added = g["ttft_p99_ms"] - d["ttft_p99_ms"]
    before = g["before_upstream_p99_ms"] - d["before_upstream_p99_ms"]
    lines += ["", f"**Added TTFT p99: {added:.1f} ms** (p50 {g['ttft_p50_ms'] - d['ttft_p50_ms']:.1f} ms); of it, before "
              f"the upstream (p99 of the arrival times, gateway − direct): {before:.1f} ms, after it: "
              f"{added - before:.1f} ms."]
    if "probe_max_ms" in g:
        lines.append(f"Probe requests (a 404, nothing else) during the gateway's bursts (every {opts.probe_ms:g} ms, {g['probe_n']} probes in "
                     f"the median burst): p50 {g['probe_p50_ms']:.1f}, p99 {g['probe_p99_ms']:.1f}, max "
                     f"{g['probe_max_ms']:.1f} ms.")
    return "\n".join(lines) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.burst", description=__doc__.split("\n")[0])
    p.add_argument("--streams", type=int, default=256, help="requests sent at once [256]")
    p.add_argument("--bursts", type=int, default=None, help="bursts each way, interleaved [5; --quick: 1]")
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--store", choices=("true", "false"), default="true")
    p.add_argument("--workers", type=int, default=1, help="gateway workers [1]")
    p.add_argument("--pause", type=float, default=1.0, help="seconds between bursts [1]")
    p.add_argument("--probe-ms", type=float, default=5.0, help="probe interval in ms, 0 not to probe [5]")
    p.add_argument("--probe-seconds", type=float, default=None, help="how long each probe runs [one response + 1 s]")
    p.add_argument("--probe", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--load-processes", type=int, default=0)
    p.add_argument("--upstream-processes", type=int, default=0)
    p.add_argument("--wait-quiet", type=float, default=20.0)
    p.add_argument("--gateway-src", metavar="DIR")
    p.add_argument("--json", type=Path, help="also write the rows here")
    p.add_argument("--quick", action="store_true")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.streams, opts.tokens, opts.delay_ms, opts.pause, opts.wait_quiet = 8, 4, 5.0, 0.1, 0.0
    if opts.bursts is None:
        opts.bursts = 1 if opts.quick else 5
    opts.store = opts.store == "true"
    if opts.probe_seconds is None:
        opts.probe_seconds = opts.tokens * opts.delay_ms / 1000.0 + 1.0
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.probe:
        probe_main(opts.probe, opts.probe_seconds, opts.probe_ms / 1000.0)
        return 0
    busy = wait_quiet(opts.wait_quiet, print) if opts.wait_quiet > 0 else None
    pinned = len(layout.available()) > opts.workers
    lay = layout.make("pinned" if pinned else "unpinned", opts.workers)
    up_n, load_n = layout.helpers(opts.workers)
    opts.upstream_processes = opts.upstream_processes or up_n
    opts.load_processes = opts.load_processes or load_n
    meta = {"workers": opts.workers, "layout": lay.describe(), "busy_before_pct": busy,
            "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3])}
    with tempfile.TemporaryDirectory(prefix="rg-burst-") as tmp:
        tmpdir = Path(tmp)
        upstream_args = ["--tokens", str(opts.tokens), "--delay-ms", str(opts.delay_ms), "--processes",
                         str(opts.upstream_processes)]
        try:
            with upstream_and_gateway(tmpdir, upstream_args, ["--workers", str(opts.workers)],
                                      opts.gateway_src) as (up, up_url, gw, gw_url):
                runs = run_bursts(opts, lay, pinned, up, up_url, gw, gw_url)
        finally:
            layout.pin([os.getpid()], frozenset(layout.available()))
    rows = {name: median_by(rs, "ttft_p99_ms") for name, rs in runs.items()}
    md = markdown(opts, rows, meta)
    print()
    print(md)
    if opts.json:
        opts.json.write_bytes(orjson.dumps({"meta": meta, "rows": rows, "runs": runs}, option=orjson.OPT_INDENT_2))
    return 0 if all(r["errors"] == 0 for rs in runs.values() for r in rs) else 1


def run_bursts(opts, lay: layout.Layout, pinned: bool, up: Proc, up_url: str, gw: Proc, gw_url: str) -> dict:
    post_json(f"{up_url}/_bench/config", {"tokens": opts.tokens, "delay_ms": opts.delay_ms})

    async def everything() -> dict:
        pool = None
        if opts.load_processes > 1:
            pool = LoadPool(opts.load_processes, clean_env(), str(ROOT))
            await pool.start()
        try:
            time.sleep(1.0 if opts.workers > 1 else 0.0)
            _up_cpus, load_cpus = lay.split()
            layout.apply(lay, load.tree(gw.pid), [up.pid, os.getpid()],
                         upstream_pids=load.tree(up.pid), load_pids=[os.getpid(), *(pool.pids if pool else [])])
            # warm the gateway's upstream pool (as after a while in service), then the bursts
            body = load.request_body("gateway", store=opts.store)
            span = opts.tokens * opts.delay_ms / 1000.0
            await load.run_load(gw_url, "gateway", opts.streams, opts.streams, body, duration=60, stagger=span)
            runs: dict[str, list[dict]] = {"direct": [], "gateway": []}
            for i in range(opts.bursts):
                order = (("direct", up_url, "upstream", None), ("gateway", gw_url, "gateway", gw.pid))
                for name, url, mode, pid in (order if i % 2 == 0 else order[::-1]):
                    row = await one_burst(opts, pool, url, mode, pid, up, up_url,
                                          load_cpus if pinned else None)
                    runs[name].append(row)
                    print(f"  burst {i + 1}/{opts.bursts} {name:<8} {row['ok']}/{row['requests']} ok  TTFT p50/p99/max "
                          f"{row['ttft_p50_ms']:.1f}/{row['ttft_p99_ms']:.1f}/{row['ttft_max_ms']:.1f} ms  "
                          f"upstream reached p99 {row['before_upstream_p99_ms']:.1f} ms"
                          + (f"  CPU {row['gateway_cpu_ms_per_request']:.2f} ms/resp" if pid else "")
                          + (f"  probe max {row['probe_max_ms']:.1f} ms" if "probe_max_ms" in row else "")
                          + f"  other {row.get('unattributed_cpu_pct', float('nan')):.0f}%"
                          + (f"  [{row['first_error']}]" if row["first_error"] else ""), flush=True)
            return runs
        finally:
            if pool is not None:
                await pool.close()

    try:
        import uvloop
        return uvloop.run(everything())
    except ImportError:
        return asyncio.run(everything())


if __name__ == "__main__":
    sys.exit(main())
