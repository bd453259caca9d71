"""Scaling across cores: the gateway with `--workers W` for several W, against the upstream alone and a lean translator.

    python -m bench.run --workers 1,2,4,8               # the scaling cases at each W (this module)
    python -m bench.run --workers 1,2 --docs            # and write the table and the plot into docs/
    python -m bench.scaling --workers 1,2 --quick       # the same entry point, a smoke run

For each W it starts, in turn, the lean translator (`bench/lean_translator.py`, W processes on one port),
the gateway with `--db none` and the gateway with its SQLite store, each with W workers pinned to W CPUs of
their own, and measures them against one fake upstream of several processes sharing a port (SO_REUSEPORT)
and a load generator of several processes (`bench/loadpool.py`), both pinned to CPUs the gateway does not
use. The cases per W, as in issue 24's table:

  * upstream alone — the load generator straight at the fake upstream at C = 64 W: the ceiling of what the
    upstream and the load generator can stream on the CPUs they have;
  * translator — the lean translator, unpaced, C = 64 W;
  * `--db none` — the gateway, unpaced (256 tokens, no delay), C = 64 W, `store: false`;
  * store on — the gateway with SQLite, unpaced, C = 64 W, `store: true`;
  * paced — store on, 100 tokens at 20 ms/token, 384 W streams, closed loop (and the same load straight at
    the upstream, for the time to first token the gateway adds).

On a machine without the cores it says so: the gateway's W workers need W CPUs of their own, and the
upstream and the load generator need CPUs beside them (the more, the higher the ceiling); where a W cannot
be pinned it runs unpinned and the report marks it as measuring the machine, not the gateway's scaling.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from . import layout, load
from .loadpool import LoadPool
from .run import (
    CLEAN_OTHER_PCT,
    RESULTS,
    ROOT,
    Proc,
    clean_env,
    fmt_num,
    free_port,
    machine,
    post_json,
    wait_http,
    wait_quiet,
)

DOCS = ROOT / "docs" / "benchmarks.md"
SVG = ROOT / "docs" / "benchmarks-scaling.svg"
BEGIN, END = "<!-- scaling:begin (written by python -m bench.run --workers ... --docs) -->", "<!-- scaling:end -->"
SERVERS = ("translator", "gateway-none", "gateway-sqlite")


@dataclass
class Plan:
    """Where one W runs."""

    workers: int
    layout: layout.Layout
    note: str  # what this placement can show


def plans(workers: list[int]) -> tuple[list[Plan], str]:
    """Each W's placement, and a statement of what this machine can and cannot measure."""
    cpus = layout.available()
    n, top = len(cpus), max(workers)
    out = []
    if n >= top + 2:
        for w in workers:
            lay = layout.make("pinned", w, reserve=top)
            out.append(Plan(w, lay, "pinned; the upstream and the load generator keep the same CPUs at every W"))
        up, ld = out[0].layout.split()
        said = (f"This machine gives the harness {n} CPUs: each W runs pinned, the gateway's workers on CPUs "
                f"0..W-1 of their own, the fake upstream on {len(up)} and the load generator on {len(ld)} CPUs "
                f"beside them (the same at every W), so the table shows how the gateway scales up to W = {top} — "
                "as long as the ceiling (*upstream alone*) stays well above what the gateway streams; a row near "
                "the ceiling is bounded by it, not by the gateway.")
        return out, said
    lines = [f"This machine gives the harness {n} CPU(s): too few to show scaling to W = {top}, which needs "
             f"at least {top + 2} (W for the gateway, one or more each for the fake upstream and the load "
             "generator)."]
    for w in workers:
        if n > w:
            lay = layout.make("pinned", w)
            spare = n - w
            note = (f"pinned: gateway on {w} CPU(s), upstream and load generator on the other {spare}"
                    + (" (sharing it)" if spare == 1 else ""))
        else:
            lay = layout.make("unpinned", w)
            note = ("unpinned: the gateway's workers, the upstream and the load generator share every CPU, so "
                    "this W measures the machine, not the gateway's scaling")
        out.append(Plan(w, lay, note))
        lines.append(f"W = {w}: {note}.")
    lines.append("What it can measure here: the cost per response and per token at each W (CPU per response "
                 "is independent of placement as long as nothing else runs), and whether a second worker "
                 "costs CPU per response; what it cannot: throughput growing with W, which needs the "
                 "cores above.")
    return out, " ".join(lines)


# -- servers -------------------------------------------------------------------------------------------------

def start_server(kind: str, w: int, up_url: str, tmpdir: Path, src: str | None) -> tuple[Proc, str]:
    port = free_port()
    if kind == "translator":
        argv = [sys.executable, "-m", "bench.lean_translator", "--upstream", f"{up_url}/v1", "--port", str(port),
                "--workers", str(w)]
        env = clean_env()
    else:
        db = "none" if kind == "gateway-none" else str(tmpdir / f"responses-w{w}.db")
        argv = [sys.executable, "-m", "responses_gateway", "serve", "--upstream", f"{up_url}/v1", "--host",
                "127.0.0.1", "--port", str(port), "--db", db, "--log-level", "warning", "--workers", str(w)]
        env = clean_env(src)
    proc = Proc(f"{kind}-w{w}", argv, tmpdir, env)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health", proc, timeout=90)
    deadline = time.monotonic() + 20  # every worker up (uvicorn forks them after the first answers)
    while w > 1 and len(load.tree(proc.pid)) < w + (kind != "translator") and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5 if w > 1 else 0.0)
    return proc, url


# -- the run -------------------------------------------------------------------------------------------------

async def measure(opts, pool: LoadPool | None, url: str, mode: str, pid: int | None, up_pid: int, c: int, n: int,
                  store: bool, **kw) -> dict:
    body = load.request_body(mode, store=store)
    fn = pool.measured if pool is not None else load.measured
    row = await fn(url, mode, n, c, body, duration=opts.duration, pid=pid, upstream_pid=up_pid, **kw)
    row.pop("samples", None)
    return row


def median_row(rows: list[dict], key: str = "requests_per_s") -> dict:
    clean = [r for r in rows if (r.get("unattributed_cpu_pct") or 0.0) <= CLEAN_OTHER_PCT]
    ordered = sorted(clean or rows, key=lambda r: r[key])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["runs"] = [r[key] for r in rows]
    row["clean_runs"] = len(clean)
    return row


async def one_w(opts, plan: Plan, up: Proc, up_url: str, pool: LoadPool | None, tmpdir: Path, say) -> dict:
    w = plan.workers
    c = opts.concurrency_per_worker * w
    n = opts.requests_per_worker * w
    load_pids = ([*pool.pids] if pool is not None else []) + [os.getpid()]
    layout.apply(plan.layout, [], [], upstream_pids=load.tree(up.pid), load_pids=load_pids)
    servers: dict[str, tuple[Proc, str]] = {}
    result: dict = {"workers": w, "layout": plan.layout.describe(), "note": plan.note, "concurrency": c}
    try:
        for kind in SERVERS:
            if kind == "translator" and not opts.translator:
                continue
            proc, url = start_server(kind, w, up_url, tmpdir, opts.gateway_src)
            servers[kind] = (proc, url)
            layout.pin(load.tree(proc.pid), plan.layout.gateway)
        say(f"W={w}: {plan.layout.describe()}; C={c}, {n} requests per run")
        post_json(f"{up_url}/_bench/config", {"tokens": opts.tokens, "delay_ms": 0.0, "tokens_per_chunk": 1})
        runs: dict[str, list[dict]] = {}
        cases = [("direct", up_url, "upstream", None, False)]
        cases += [(kind, url, "gateway", proc.pid, kind == "gateway-sqlite") for kind, (proc, url) in servers.items()]
        for r in range(opts.repeat):
            for name, url, mode, pid, store in cases:
                row = await measure(opts, pool, url, mode, pid, up.pid, c, n, store, warmup=c)
                runs.setdefault(name, []).append(row)
                say(f"  W={w} round {r + 1}/{opts.repeat} {name:<15} {row['ok']:>5}/{row['requests']:<5} ok "
                    f"{row['requests_per_s']:8.1f} req/s {row['events_per_s']:9.0f} ev/s"
                    + (f"  CPU {row['gateway_cpu_ms_per_request']:.2f} ms/resp ({row['gateway_cpu_pct']:.0f}% of "
                       f"{100 * w}%)" if pid and row["ok"] else "")
                    + f"  upstream {row.get('upstream_cpu_pct', float('nan')):.0f}%  load "
                      f"{row['client_cpu_pct']:.0f}%  other {row.get('unattributed_cpu_pct', float('nan')):.0f}%"
                    + (f"  [{row['first_error']}]" if row["first_error"] else ""))
        for name, rows in runs.items():
            result[name] = median_row(rows)
        if opts.paced_rounds > 0 and "gateway-sqlite" in servers:
            proc, url = servers["gateway-sqlite"]
            pc = opts.paced_per_worker * w
            span = opts.paced_tokens * opts.paced_delay_ms / 1000.0
            post_json(f"{up_url}/_bench/config", {"tokens": opts.paced_tokens, "delay_ms": opts.paced_delay_ms,
                                                  "tokens_per_chunk": 1})
            for name, target, mode, pid in (("paced direct", up_url, "upstream", None),
                                            ("paced", url, "gateway", proc.pid)):
                row = await measure(opts, pool, target, mode, pid, up.pid, pc, pc * opts.paced_rounds, True,
                                    warmup=pc, stagger=span, gaps=True)
                if pid and row["ok"]:
                    row["gateway_cpu_us_per_token"] = 1e6 * row["gateway_cpu_s"] / (row["ok"] * opts.paced_tokens)
                row["tokens_per_s"] = row["ok"] * opts.paced_tokens / row["wall_s"] if row["wall_s"] else 0.0
                row["streams"] = pc
                result[name] = row
                say(f"  W={w} {name:<15} C={pc} {row['ok']}/{row['requests']} ok {row['tokens_per_s']:.0f} tokens/s  "
                    f"TTFT p99 {row['ttft_p99_ms']:.1f} ms"
                    + (f"  CPU {row['gateway_cpu_us_per_token']:.1f} µs/token" if pid and row["ok"] else "")
                    + f"  other {row.get('unattributed_cpu_pct', float('nan')):.0f}%"
                    + (f"  [{row['first_error']}]" if row["first_error"] else ""))
            post_json(f"{up_url}/_bench/config", {"tokens": opts.tokens, "delay_ms": 0.0, "tokens_per_chunk": 1})
    finally:
        for proc, _url in servers.values():
            proc.stop()
    return result


# -- report ----------------------------------------------------------------------------------------------------

def _get(res: dict, case: str, key: str):
    row = res.get(case)
    return None if not row or not row.get("ok") else row.get(key)


def table(results: list[dict]) -> str:
    ws = [r["workers"] for r in results]
    base = results[0]

    def rel(case: str, key: str, r: dict, fmt: str) -> str:
        v, b = _get(r, case, key), _get(base, case, key)
        if v is None:
            return "–"
        s = fmt_num(v, fmt)
        return s if r is base or not b else f"{s} ({v / b:.1f}×)"

    def row(label: str, cells: list[str]) -> str:
        return f"| {label} | " + " | ".join(cells) + " |"

    lines = ["| case | " + " | ".join(f"W={w}" for w in ws) + " |", "|---|" + "---|" * len(ws)]
    lines.append(row("upstream alone (ceiling), events/s", [rel("direct", "events_per_s", r, ",.0f") for r in results]))
    lines.append(row("lean translator, events/s (×W=1)", [rel("translator", "events_per_s", r, ",.0f") for r in results]))
    lines.append(row("lean translator, CPU ms/response",
                     [fmt_num(_get(r, "translator", "gateway_cpu_ms_per_request"), ".2f") for r in results]))
    lines.append(row("`--db none`, events/s (×W=1)", [rel("gateway-none", "events_per_s", r, ",.0f") for r in results]))
    lines.append(row("`--db none`, CPU ms/response",
                     [fmt_num(_get(r, "gateway-none", "gateway_cpu_ms_per_request"), ".2f") for r in results]))
    lines.append(row("store on (SQLite), events/s", [rel("gateway-sqlite", "events_per_s", r, ",.0f") for r in results]))
    lines.append(row("store on, responses/s", [rel("gateway-sqlite", "requests_per_s", r, ",.0f") for r in results]))
    lines.append(row("store on, gateway CPU busy",
                     [f"{fmt_num(_get(r, 'gateway-sqlite', 'gateway_cpu_pct'), '.0f')}% of {100 * r['workers']}%"
                      for r in results]))
    lines.append(row("store on, CPU ms/response",
                     [fmt_num(_get(r, "gateway-sqlite", "gateway_cpu_ms_per_request"), ".2f") for r in results]))
    lines.append(row("paced store on, streams / tokens per s",
                     [f"{r['paced']['streams']:,} / {fmt_num(r['paced']['tokens_per_s'], ',.0f')}" if r.get("paced")
                      else "–" for r in results]))
    lines.append(row("paced, CPU µs per token",
                     [fmt_num(_get(r, "paced", "gateway_cpu_us_per_token"), ".1f") for r in results]))
    lines.append(row("paced, TTFT p99 ms (upstream alone)",
                     [f"{fmt_num(_get(r, 'paced', 'ttft_p99_ms'), '.0f')} ({fmt_num(_get(r, 'paced direct', 'ttft_p99_ms'), '.0f')})"
                      for r in results]))
    lines.append(row("upstream / load generator CPU % (store on)",
                     [f"{fmt_num(_get(r, 'gateway-sqlite', 'upstream_cpu_pct'), '.0f')} / "
                      f"{fmt_num(_get(r, 'gateway-sqlite', 'client_cpu_pct'), '.0f')}" for r in results]))
    lines.append(row("other CPU %, most of any case",
                     [fmt_num(max((v.get("unattributed_cpu_pct") or 0.0) for v in r.values() if isinstance(v, dict)),
                              ".0f") for r in results]))
    lines.append(row("placement", [r["note"].split(":")[0] for r in results]))
    return "\n".join(lines)


SERIES = [("direct", "upstream alone", "#888888", "events_per_s"),
          ("translator", "lean translator", "#2ca02c", "events_per_s"),
          ("gateway-none", "gateway --db none", "#1f77b4", "events_per_s"),
          ("gateway-sqlite", "gateway, SQLite store", "#d62728", "events_per_s")]


def svg(results: list[dict], title: str, unpaced: str = "unpaced") -> str:
    """Two panels drawn by hand: events/s against W (with the line W × the W=1 figure of `--db none` for
    reference) and CPU ms per response against W (flat is perfect scaling)."""
    ws = [r["workers"] for r in results]
    width, height, pw, ph = 900, 390, 340, 250
    panels = [(70, f"events/s ({unpaced})", "events_per_s", SERIES),
              (520, "gateway CPU ms per response", "gateway_cpu_ms_per_request", SERIES[1:])]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{_esc(title)}</text>']
    for x0, label, key, series in panels:
        y0 = 50
        values = [_get(r, case, key) for r in results for case, *_ in series]
        if key == "events_per_s":
            b = _get(results[0], "gateway-none", key)
            values += [b * w for w in ws] if b else []
        top, steps = _nice(max([v for v in values if v] or [1.0]))

        def px(i: int, x0=x0) -> float:
            return x0 + (pw * (i + 0.5) / len(ws))

        def py(v: float, top=top, y0=y0) -> float:
            return y0 + ph - ph * v / top

        out.append(f'<text x="{x0 + pw / 2}" y="{y0 - 8}" text-anchor="middle">{_esc(label)}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
        for k in range(steps + 1):
            v = top * k / steps
            y = py(v)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{_short(v)}</text>')
        for i, w in enumerate(ws):
            out.append(f'<text x="{px(i):.1f}" y="{y0 + ph + 16}" text-anchor="middle">W={w}</text>')
        if key == "events_per_s":
            b = _get(results[0], "gateway-none", key)
            if b and len(ws) > 1:
                pts = " ".join(f"{px(i):.1f},{py(b * w / ws[0]):.1f}" for i, w in enumerate(ws))
                out.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-dasharray="4 4"/>')
        for case, _name, colour, _k in series:
            pts = [(px(i), py(v)) for i, r in enumerate(results) if (v := _get(r, case, key))]
            if len(pts) > 1:
                out.append('<polyline points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                           + f'" fill="none" stroke="{colour}" stroke-width="2"/>')
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>' for x, y in pts]
    lx = 70
    for _case, name, colour, _k in SERIES:
        out.append(f'<rect x="{lx}" y="{height - 28}" width="14" height="4" fill="{colour}"/>'
                   f'<text x="{lx + 20}" y="{height - 22}">{_esc(name)}</text>')
        lx += 40 + 7 * len(name)
    out.append(f'<line x1="{lx}" y1="{height - 26}" x2="{lx + 14}" y2="{height - 26}" stroke="#1f77b4" '
               f'stroke-dasharray="4 4"/><text x="{lx + 20}" y="{height - 22}">W × (--db none at W={ws[0]})</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _nice(v: float) -> tuple[float, int]:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above v, and how many grid steps divide it evenly."""
    k = 10 ** (len(str(int(v))) - 1) if v >= 1 else 0.1
    for m, steps in ((1, 5), (2, 4), (2.5, 5), (5, 5), (10, 5)):
        if m * k >= v:
            return m * k, steps
    return 10 * k, 5


def _short(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def markdown(meta: dict, results: list[dict], said: str, svg_name: str | None) -> str:
    m, o = meta["machine"], meta["options"]
    lines = [f"Run {meta['started']}: `python -m bench.run --workers {o['workers']}` on {m['cpu']}, {m['cores']} CPUs "
             f"({len(layout.available())} usable), Linux {m['kernel']}, Python {m['python']}, gateway {m['commit']}; "
             f"{o['upstream_processes']} fake-upstream process(es) on one port, {o['load_processes']} load-generator "
             f"process(es); machine busy before the run: {fmt_num(meta.get('load_before_start_pct'), '.0f')}% of a "
             f"core (load average {meta.get('loadavg', '?')}). Unpaced: {o['tokens']} tokens, C = "
             f"{o['concurrency_per_worker']} W, {o['requests_per_worker']} W requests per run, median of "
             f"{o['repeat']} interleaved runs; paced: {o['paced_tokens']} tokens at {o['paced_delay_ms']:g} ms/token, "
             f"{o['paced_per_worker']} W streams, {o['paced_rounds']} requests each.", "", said, "",
             table(results)]
    if svg_name:
        lines += ["", f"![events/s and CPU per response against W]({svg_name})"]
    return "\n".join(lines) + "\n"


def write_docs(md: str, svg_text: str) -> None:
    SVG.write_text(svg_text)
    text = DOCS.read_text()
    block = f"{BEGIN}\n{md}{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Scaling across cores\n\n" + block + "\n"
    DOCS.write_text(text)


# -- main ------------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m bench.run --workers W1,W2,...", description=__doc__.split("\n")[0])
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated [1,2]")
    p.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--concurrency-per-worker", type=int, default=64, help="unpaced streams per worker [64]")
    p.add_argument("--requests-per-worker", type=int, default=1000, help="unpaced requests per run per worker [1000]")
    p.add_argument("--paced-per-worker", type=int, default=384, help="paced streams per worker [384]")
    p.add_argument("--paced-tokens", type=int, default=100)
    p.add_argument("--paced-delay-ms", type=float, default=20.0)
    p.add_argument("--paced-rounds", type=int, default=2, help="requests per paced stream, 0 skips paced [2]")
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs of each unpaced case [3]")
    p.add_argument("--duration", type=float, default=30.0, help="no new request after this many s in a run [30]")
    p.add_argument("--no-translator", dest="translator", action="store_false", help="skip the lean translator")
    p.add_argument("--upstream-processes", type=int, default=0, help="fake-upstream processes [0: from the CPUs]")
    p.add_argument("--load-processes", type=int, default=0, help="load-generator processes [0: from the CPUs]")
    p.add_argument("--wait-quiet", type=float, default=30.0, help="wait up to this long for an idle machine [30]")
    p.add_argument("--gateway-src", metavar="DIR", help="run the gateway from this src/ directory")
    p.add_argument("--results-dir", type=Path, default=RESULTS)
    p.add_argument("--docs", action="store_true",
                   help=f"write the table into {DOCS.relative_to(ROOT)} (between its scaling markers) and the plot "
                        f"into {SVG.relative_to(ROOT)}")
    opts, _unknown = p.parse_known_args(argv)
    if opts.quick:
        opts.tokens, opts.concurrency_per_worker, opts.requests_per_worker = 32, 4, 16
        opts.paced_per_worker, opts.paced_tokens, opts.paced_delay_ms, opts.paced_rounds = 4, 4, 5.0, 1
        opts.repeat, opts.duration, opts.wait_quiet = 1, 10.0, 0.0
    opts.workers_list = [int(x) for x in str(opts.workers).split(",") if x.strip()]
    if not opts.workers_list or min(opts.workers_list) < 1:
        p.error("--workers needs positive integers")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    started = dt.datetime.now(dt.UTC)
    stamp = started.strftime("%Y%m%d-%H%M%S")

    def say(msg: str) -> None:
        print(msg, flush=True)

    the_plans, said = plans(opts.workers_list)
    top = max(opts.workers_list)
    if len(layout.available()) >= top + 2:
        up_n, load_n = layout.helpers(top, reserve=top)
    else:
        up_n, load_n = 1, 1
    opts.upstream_processes = opts.upstream_processes or up_n
    opts.load_processes = opts.load_processes or load_n
    say(said)
    meta = {"started": started.strftime("%Y-%m-%d %H:%M:%S UTC"), "machine": machine(),
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()}}
    with contextlib.suppress(OSError):
        meta["loadavg"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    meta["load_before_start_pct"] = wait_quiet(opts.wait_quiet, say) if opts.wait_quiet > 0 else None
    results = []
    with tempfile.TemporaryDirectory(prefix="rg-scaling-") as tmp:
        tmpdir = Path(tmp)
        up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens",
                               str(opts.tokens), "--processes", str(opts.upstream_processes)], tmpdir, clean_env(),
                  capture_stdout=True)
        try:
            up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
            wait_http(f"{up_url}/health", up)

            async def everything() -> None:
                pool = None
                if opts.load_processes > 1:
                    pool = LoadPool(opts.load_processes, clean_env(), str(ROOT))
                    await pool.start()
                try:
                    for plan in the_plans:
                        results.append(await one_w(opts, plan, up, up_url, pool, tmpdir, say))
                finally:
                    if pool is not None:
                        await pool.close()

            try:
                import uvloop
                uvloop.run(everything())
            except ImportError:
                asyncio.run(everything())
        finally:
            layout.pin([os.getpid()], frozenset(layout.available()))
            up.stop()
    title = (f"responses-gateway --workers W, {meta['machine']['cores']} CPUs ({meta['started'][:10]}): "
             + ("pinned" if len(layout.available()) >= top + 2 else "too few CPUs to show scaling"))
    svg_text = svg(results, title, f"{opts.tokens} tokens, C = {opts.concurrency_per_worker} W")
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    svg_path = opts.results_dir / f"{stamp}-scaling.svg"
    svg_path.write_text(svg_text)
    md = markdown(meta, results, said, svg_path.name)
    (opts.results_dir / f"{stamp}-scaling.md").write_text(md)
    (opts.results_dir / f"{stamp}-scaling.json").write_bytes(
        orjson.dumps({"meta": meta, "said": said, "results": results}, option=orjson.OPT_INDENT_2))
    if opts.docs:
        write_docs(markdown(meta, results, said, SVG.name), svg_text)
        say(f"wrote the table into {DOCS} and the plot into {SVG}")
    say("")
    say(md)
    say(f"wrote {opts.results_dir / (stamp + '-scaling.md')}, .json and .svg")
    failed = [(r["workers"], k) for r in results for k, v in r.items() if isinstance(v, dict) and v.get("errors")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
