"""The benchmark: one command, one machine, one invocation — the upstream alone ("limit") and the gateway in front.

    python -m bench.run                      # the full run (about 7–8 minutes on 2 cores)
    python -m bench.run --quick              # a smoke run of a few seconds
    python -m bench.run --profile 10         # and a py-spy profile of the gateway under paced load

Starts `python -m bench.fake_upstream` and `python -m responses_gateway serve` (SQLite store in a temp dir) as
separate processes on loopback, waits for them, then, in each layout (pinned: the gateway alone on one CPU,
the load generator and the upstream on the other; unpinned: all on all CPUs), measures:

  * direct   — the load generator straight at the fake upstream, C = 1, 16, 64;
  * gateway  — the same load through the gateway, `store: false` and `store: true`, C = 1, 16, 64;
  * ttft     — C = 1 with a 5 ms/token upstream, direct and through the gateway (added time to first token);
  * paced    — 100 tokens at 20 ms/token, C = 64 and 256, closed loop: CPU per token, inter-token gaps;
  * open     — the same pace, Poisson arrivals at 80% of the gateway's capacity: added TTFT under queueing;
  * burst    — 256 requests at once on new connections: added TTFT p99;

then, in the first layout, the growth cases (bench/growth.py): a 200-turn chain, a 1 MiB input, 500 tools,
a 100-item MCP tool list. Writes bench/results/<timestamp>.md and .json, prints the table and PASS/MISS for
each target. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from . import layout, load
from .growth import run_growth
from .loadpool import LoadPool

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

CLEAN_OTHER_PCT = 30.0  # a run is "clean" when less than this (% of a core) went outside our processes
QUICK = dict(requests=16, concurrency="1,4", tokens=64, ttft_requests=8, ttft_tokens=4, duration=10.0, repeat=1,
             wait_quiet=0.0, paced_concurrency="4,8", paced_tokens=8, paced_delay_ms=5.0, paced_rounds=2,
             open_duration=1.0, burst=8, burst_repeat=1, growth_requests=4, chain_depth=5, big_input_kib=16,
             tools=20, mcp_tools=10, big_body_mb=2)
FULL = dict(requests=1000, concurrency="1,16,64", tokens=256, ttft_requests=200, ttft_tokens=16, duration=30.0,
            repeat=3, wait_quiet=30.0, paced_concurrency="64,256", paced_tokens=100, paced_delay_ms=20.0,
            paced_rounds=3, open_duration=10.0, burst=256, burst_repeat=3, growth_requests=20, chain_depth=200,
            big_input_kib=1024, tools=500, mcp_tools=100, big_body_mb=30)


# -- processes ---------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra_path: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RG_")}
    paths = [p for p in (extra_path, str(ROOT), env.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class Proc:
    """A child process in its own process group, with its output in a log file; stopped by its own pid."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict, capture_stdout: bool = False):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if capture_stdout else self.log,
                                      stderr=self.log, start_new_session=True)
        self.pid = self.popen.pid

    def first_line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        out = self.popen.stdout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([out], [], [], 0.1)
            if ready:
                line = out.readline().decode(errors="replace")
                if line:
                    return line.strip()
            if self.popen.poll() is not None:
                break
        raise RuntimeError(f"{self.name} did not start:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        self.log.flush()
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)  # its own group only: uvicorn's workers go with it
            try:
                self.popen.wait(timeout=8)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait(timeout=5)
        if self.popen.stdout:
            self.popen.stdout.close()
        self.log.close()


def wait_http(url: str, proc: Proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{proc.name} did not answer {url} within {timeout} s:\n{proc.tail()}")


@contextlib.contextmanager
def upstream_and_gateway(tmpdir: Path, upstream_args: list[str], gateway_args: list[str], src: str | None = None):
    """The fake upstream and the gateway (SQLite store in `tmpdir`; from the `src` directory when given) as
    processes, both answering; yields (upstream, upstream URL, gateway, gateway URL) and stops both at the end."""
    up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0", *upstream_args], tmpdir,
              clean_env(), capture_stdout=True)
    gw = None
    try:
        up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
        wait_http(f"{up_url}/health", up)
        port = free_port()
        gw = Proc("gateway", [sys.executable, "-m", "responses_gateway", "serve", "--upstream", f"{up_url}/v1",
                              "--host", "127.0.0.1", "--port", str(port), "--db", str(tmpdir / "responses.db"),
                              "--log-level", "warning", *gateway_args], tmpdir, clean_env(src))
        gw_url = f"http://127.0.0.1:{port}"
        wait_http(f"{gw_url}/health", gw, timeout=60)
        yield up, up_url, gw, gw_url
    finally:
        if gw is not None:
            gw.stop()
        up.stop()


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return orjson.loads(resp.read())


def post_json(url: str, obj: dict) -> dict:
    req = urllib.request.Request(url, data=orjson.dumps(obj), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return orjson.loads(resp.read())


# -- machine description ---------------------------------------------------------------------------------

def machine() -> dict:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = None
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        mem = round(int(fh.readline().split()[1]) / 1024 / 1024, 1)
    versions = {}
    for pkg in ("responses-gateway", "uvicorn", "starlette", "aiohttp", "orjson", "uvloop", "httptools"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[pkg] = importlib.metadata.version(pkg)
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--", "src"))
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem, "kernel": platform.release(),
            "python": platform.python_version(), "versions": versions,
            "commit": (commit or "?") + ("+dirty-src" if dirty else "")}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# -- the cases ---------------------------------------------------------------------------------------------

@dataclass
class Bench:
    """What every case needs: the two servers, their pids, the options, the current layout."""

    opts: argparse.Namespace
    up_url: str
    up_pid: int
    gw_url: str
    gw_pid: int
    say: Callable[[str], None]
    layout: str = "unpinned"
    pool: LoadPool | None = None  # several load-generator processes (many-core machines), else this one

    def upstream(self, **config) -> None:
        post_json(f"{self.up_url}/_bench/config", config)

    async def case(self, name: str, mode: str, c: int, n: int, store: bool | None, delay: float, tok: int,
                   kind: str, **kw) -> dict:
        """One measured case (see load.measured for `kw`: stagger, gaps, open_rate, fresh, warmup)."""
        body = load.request_body(mode, store=bool(store))
        base = self.gw_url if mode == "gateway" else self.up_url
        kw.setdefault("warmup", c if delay == 0 else 2)
        measured = self.pool.measured if self.pool is not None else load.measured
        summary = await measured(base, mode, n, c, body, duration=kw.pop("duration", self.opts.duration),
                                 pid=self.gw_pid if mode == "gateway" else None, upstream_pid=self.up_pid,
                                 keep_samples=True, **kw)
        samples = summary.pop("samples")
        if c == 1:
            summary.update(split_ttft(samples, get_json(f"{self.up_url}/_bench/stats")["timeline"]))
        if mode == "gateway" and summary["ok"]:
            summary["gateway_cpu_us_per_token"] = 1e6 * summary["gateway_cpu_s"] / (summary["ok"] * tok)
        self.say(f"  [{self.layout[:3]}] {name:<24} C={c:<3} {summary['ok']:>5}/{summary['requests']:<5} ok  "
                 f"{summary['requests_per_s']:8.1f} req/s {summary['events_per_s']:9.0f} ev/s  "
                 f"TTFT p50/p99 {summary['ttft_p50_ms']:6.2f}/{summary['ttft_p99_ms']:6.2f} ms"
                 + (f"  CPU {summary['gateway_cpu_ms_per_request']:.2f} ms/req "
                    f"{summary['gateway_cpu_us_per_token']:.1f} µs/tok" if mode == "gateway" and summary["ok"] else "")
                 + (f"  gap p99 {summary['gap_p99_ms']:.2f} ms" if "gap_p99_ms" in summary else "")
                 + f"  other {summary.get('unattributed_cpu_pct', float('nan')):.0f}%"
                 + (f"  [{summary['first_error']}]" if summary["first_error"] else ""))
        return {"case": name, "mode": mode, "concurrency": c, "store": store, "tokens": tok, "delay_ms": delay,
                "kind": kind, "layout": self.layout, **summary}


async def run_cases(b: Bench) -> list[dict]:
    """Every case of one layout: throughput cases `--repeat` times, interleaved, keeping the run with the
    median req/s; then time to first token at C = 1, the paced scenario, open-loop arrivals and bursts."""
    opts = b.opts
    specs = [("direct (limit)", "upstream", c, None) for c in opts.concurrency_list]
    specs += [(f"gateway store={'true' if store else 'false'}", "gateway", c, store)
              for c in opts.concurrency_list for store in (False, True)]
    runs: dict[int, list[dict]] = {i: [] for i in range(len(specs))}
    b.upstream(tokens=opts.tokens, delay_ms=0.0, tokens_per_chunk=opts.tokens_per_chunk)
    for r in range(opts.repeat):
        if opts.repeat > 1:
            b.say(f" round {r + 1}/{opts.repeat}")
        for i, (name, mode, c, store) in enumerate(specs):
            runs[i].append(await b.case(name, mode, c, opts.requests, store, 0.0, opts.tokens, "throughput"))
    cases = []
    for i in range(len(specs)):
        # The median run (the lower one of an even count) among the runs that had the machine to themselves
        # (little CPU went to anything else); among all runs when none did.
        clean = [x for x in runs[i] if (x.get("unattributed_cpu_pct") or 0.0) <= CLEAN_OTHER_PCT]
        ordered = sorted(clean or runs[i], key=lambda row: row["requests_per_s"])
        row = dict(ordered[(len(ordered) - 1) // 2])
        row["runs_requests_per_s"] = [x["requests_per_s"] for x in runs[i]]
        row["clean_runs"] = len(clean)
        cases.append(row)
    if opts.ttft_requests > 0:
        b.upstream(tokens=opts.ttft_tokens, delay_ms=opts.ttft_delay_ms)
        for name, mode, store in (("ttft direct", "upstream", None), ("ttft gateway", "gateway", False)):
            cases.append(await b.case(f"{name} {opts.ttft_delay_ms:g}ms/tok", mode, 1, opts.ttft_requests, store,
                                      opts.ttft_delay_ms, opts.ttft_tokens, "ttft"))
    if opts.paced_rounds > 0:
        cases += await paced_cases(b)
    b.upstream(tokens=opts.tokens, delay_ms=0.0)
    return cases


async def paced_cases(b: Bench) -> list[dict]:
    """Tokens at a model's pace (`--paced-delay-ms` per token): the cost per token is a wake-up, not a share
    of a batch. Closed loop at each `--paced-concurrency` (first requests spread over one response time, so
    that arrivals are not one synchronised wave), open-loop Poisson arrivals at `--open-load` of the
    gateway's capacity, and bursts of `--burst` requests on new connections. Each gateway case is paired
    with the same load straight at the upstream, in the same run: the *added* figures are the differences."""
    opts = b.opts
    tok, delay = opts.paced_tokens, opts.paced_delay_ms
    span = tok * delay / 1000.0  # one response's duration
    b.upstream(tokens=tok, delay_ms=delay, tokens_per_chunk=1)
    out = []
    for c in opts.paced_concurrency_list:
        for name, mode, store in (("paced direct", "upstream", None), ("paced gateway", "gateway", opts.paced_store)):
            out.append(await b.case(f"{name} {delay:g}ms/tok", mode, c, c * opts.paced_rounds, store, delay, tok,
                                    "paced", stagger=span, gaps=True, warmup=c))
    top = _find(out, "gateway", max(opts.paced_concurrency_list), kind="paced")
    short = max(1, tok // 10)
    if top and top["ok"] and short < tok:
        # The same arrivals with a tenth of the tokens, each ten times slower (same response time): the
        # difference in CPU per response splits it into a fixed part per response and a part per token.
        c = top["concurrency"]
        b.upstream(tokens=short, delay_ms=delay * tok / short, tokens_per_chunk=1)
        row = await b.case(f"paced gateway {short} tok", "gateway", c, c * opts.paced_rounds, opts.paced_store,
                           delay * tok / short, short, "paced-short", stagger=span, gaps=True, warmup=c)
        out.append(row)
        if row["ok"]:
            per_token = (top["gateway_cpu_ms_per_request"] - row["gateway_cpu_ms_per_request"]) / (tok - short)
            top["split_per_token_us"] = 1000.0 * per_token
            top["split_per_response_ms"] = row["gateway_cpu_ms_per_request"] - short * per_token
            b.say(f"  paced split: {top['split_per_response_ms']:.2f} ms per response + "
                  f"{top['split_per_token_us']:.1f} µs per token")
        b.upstream(tokens=tok, delay_ms=delay, tokens_per_chunk=1)
    if opts.open_duration > 0 and top and top["ok"] and top.get("gateway_cpu_s"):
        # Capacity: responses per second one core of the gateway can serve at this pace, from the CPU per
        # response of the closed-loop case just run.
        capacity = top["ok"] / top["gateway_cpu_s"]
        rate = min(opts.open_load * capacity, opts.open_max_rate)
        b.say(f"  open loop: capacity {capacity:.0f} responses/s per gateway core; arrivals at {rate:.0f}/s "
              f"({100 * rate / capacity:.0f}% of it)")
        for name, mode, store in (("open direct", "upstream", None), ("open gateway", "gateway", opts.paced_store)):
            row = await b.case(f"{name} {delay:g}ms/tok", mode, max(1, int(rate * span)), 0, store, delay, tok,
                               "open", open_rate=rate, gaps=True, duration=opts.open_duration,
                               warmup=max(1, int(rate * span)), stagger=span)
            row.update(arrival_rate=rate, capacity_per_core=capacity)
            out.append(row)
    if opts.burst > 0:
        for name, mode, store in (("burst direct", "upstream", None), ("burst gateway", "gateway", opts.paced_store)):
            bursts = []
            for _ in range(opts.burst_repeat):
                bursts.append(await b.case(f"{name} {delay:g}ms/tok", mode, opts.burst, opts.burst, store, delay,
                                           tok, "burst", fresh=True))
            ordered = sorted(bursts, key=lambda row: row["ttft_p99_ms"])
            row = dict(ordered[(len(ordered) - 1) // 2])
            row["runs_ttft_p99_ms"] = [x["ttft_p99_ms"] for x in bursts]
            out.append(row)
    return out


def split_ttft(samples: list, timeline: list) -> dict:
    """At C = 1 the upstream's last streams are these samples, in order. Its timeline (same clock) splits each
    time to first token into: client → upstream (request sent until the upstream has parsed it), the
    upstream's own wait until it writes the first token, and upstream → client (first token written until
    the client has the first text delta)."""
    if len(timeline) < len(samples) or not samples:
        return {}
    inbound, outbound = [], []
    for s, (arrived, first) in zip(samples, timeline[-len(samples):], strict=True):
        if s.ok and first is not None and s.ttft == s.ttft:
            inbound.append(arrived - s.start)
            outbound.append(s.start + s.ttft - first)
    if not inbound or min(inbound) < 0:  # not the same clock, or not the same requests
        return {}
    out = {}
    for name, values in (("to_upstream", inbound), ("from_upstream", outbound)):
        for q in (50, 99):
            out[f"{name}_p{q}_ms"] = load.percentile(values, q) * 1000.0
    return out


def wait_quiet(seconds: float, say, threshold: float = 25.0) -> float:
    """Wait (bounded) until the machine is nearly idle; returns the busy % (of one core) last seen."""
    deadline = time.monotonic() + seconds
    while True:
        t0, b0 = time.perf_counter(), load.machine_busy_seconds()
        time.sleep(1.0)
        busy = 100.0 * ((load.machine_busy_seconds() or 0) - (b0 or 0)) / (time.perf_counter() - t0)
        if busy <= threshold or time.monotonic() >= deadline:
            if busy > threshold:
                say(f"warning: the machine is busy with other work ({busy:.0f}% of a core): figures will be low")
            return busy
        say(f"  waiting for a quiet machine ({busy:.0f}% of a core busy) ...")


# -- targets -------------------------------------------------------------------------------------------------

def _find(cases: list[dict], mode: str, c: int | None = None, store: bool | None = None,
          kind: str = "throughput") -> dict | None:
    for row in cases:
        if row["mode"] == mode and row["kind"] == kind and (c is None or row["concurrency"] == c) \
                and (store is None or row["store"] == store):
            return row
    return None


def targets(all_cases: list[dict], opts, growth: dict | None = None, idle_rss: float | None = None) -> list[dict]:
    """Each target computed within the run, in the first layout run (pinned where the machine allows)."""
    judged = opts.layouts[0]
    cases = [r for r in all_cases if r.get("layout", judged) == judged]
    out = []
    top = max(opts.concurrency_list)
    note_c = "" if top == 64 else f" (C={top}: C=64 not run)"
    note_tok = "" if opts.tokens == 256 else f" ({opts.tokens}-token responses, target is for 256)"

    def add(name: str, value: float | None, limit: float, unit: str, higher_is_better: bool = False,
            detail: str = "") -> None:
        if value is None or value != value:
            out.append({"target": name, "value": None, "limit": limit, "unit": unit, "result": "N/A",
                        "detail": detail, "higher_is_better": higher_is_better, "layout": judged})
            return
        ok = value >= limit if higher_is_better else value <= limit
        out.append({"target": name, "value": value, "limit": limit, "unit": unit, "higher_is_better": higher_is_better,
                    "result": "PASS" if ok else "MISS", "detail": detail, "layout": judged})

    def diff(a: dict | None, b: dict | None, key: str) -> float | None:
        return a[key] - b[key] if a and b and key in a and key in b else None

    direct, gw, st = _find(cases, "upstream", top), _find(cases, "gateway", top, False), _find(cases, "gateway", top, True)
    add(f"gateway events/s at C={top}, store on, vs direct",
        100 * st["events_per_s"] / direct["events_per_s"] if direct and st and direct["events_per_s"] else None,
        40.0, "% of direct", True,
        f"{st['events_per_s']:.0f} vs {direct['events_per_s']:.0f} events/s; store off "
        f"{100 * gw['events_per_s'] / direct['events_per_s']:.0f}%{note_c}" if direct and st and gw else "")
    add(f"gateway CPU per streamed response at C={top}, store on", st["gateway_cpu_ms_per_request"] if st else None,
        2.5, "ms", detail=(f"{st['gateway_cpu_us_per_event']:.1f} µs/event; store off "
                           f"{gw['gateway_cpu_ms_per_request']:.2f} ms" if st and gw else "") + note_tok)
    add(f"store=true throughput cost at C={top}",
        100 * (1 - st["requests_per_s"] / gw["requests_per_s"]) if st and gw and gw["requests_per_s"] else None,
        10.0, "%", detail=f"{st['requests_per_s']:.0f} vs {gw['requests_per_s']:.0f} req/s" if st and gw else "")
    d_ttft, g_ttft = _find(cases, "upstream", 1, None, "ttft"), _find(cases, "gateway", 1, False, "ttft")
    for q, limit in ((50, 1.0), (99, 3.0)):
        value = diff(g_ttft, d_ttft, f"ttft_p{q}_ms")
        detail = f"{g_ttft[f'ttft_p{q}_ms']:.2f} vs {d_ttft[f'ttft_p{q}_ms']:.2f} ms" if value is not None else ""
        before, after = diff(g_ttft, d_ttft, f"to_upstream_p{q}_ms"), diff(g_ttft, d_ttft, f"from_upstream_p{q}_ms")
        if before is not None and after is not None:
            detail += f"; added before the upstream {before:.2f} ms, after it {after:.2f} ms"
        add(f"added TTFT p{q} at C=1, {opts.ttft_delay_ms:g} ms/token", value, limit, "ms", detail=detail)

    ptop = max(opts.paced_concurrency_list)
    pace = f"{opts.paced_delay_ms:g} ms/token"
    pd, pg = _find(cases, "upstream", ptop, kind="paced"), _find(cases, "gateway", ptop, kind="paced")
    note_p = "" if ptop == 256 else f" (C={ptop}: C=256 not run)"
    add(f"paced C={ptop} at {pace}: gateway CPU per token", pg.get("gateway_cpu_us_per_token") if pg else None,
        30.0, "µs", detail=(f"{pg['gateway_cpu_pct']:.0f}% of a core for {pg['ok'] * pg['tokens'] / pg['wall_s']:.0f} "
                            f"tokens/s" if pg and pg["ok"] else "")
        + (f"; = {pg['split_per_response_ms']:.2f} ms per response + {pg['split_per_token_us']:.1f} µs per token"
           if pg and "split_per_token_us" in pg else "") + note_p)
    add(f"paced C={ptop}: added inter-token gap p99", diff(pg, pd, "gap_p99_ms"), 2.0, "ms",
        detail=f"{pg['gap_p99_ms']:.2f} vs {pd['gap_p99_ms']:.2f} ms" if pg and pd else "")
    rss = pg.get("gateway_peak_rss_mib") if pg else None
    add(f"gateway peak RSS with {ptop} streams", rss, 80.0, "MiB",
        detail=(f"{1024 * (rss - idle_rss) / ptop:.0f} KiB per stream above the idle {idle_rss:.0f} MiB"
                if rss and idle_rss else "") + note_p)
    od, og = _find(cases, "upstream", kind="open"), _find(cases, "gateway", kind="open")
    add(f"open-loop arrivals at {100 * opts.open_load:g}% of capacity: added TTFT p99", diff(og, od, "ttft_p99_ms"),
        10.0, "ms", detail=(f"{og['arrival_rate']:.0f} arrivals/s (capacity {og['capacity_per_core']:.0f}/s per core); "
                            f"{og['ttft_p99_ms']:.1f} vs {od['ttft_p99_ms']:.1f} ms; gap p99 added "
                            f"{og['gap_p99_ms'] - od['gap_p99_ms']:.2f} ms" if og and od else ""))
    bd, bg = _find(cases, "upstream", kind="burst"), _find(cases, "gateway", kind="burst")
    add(f"burst of {opts.burst}: added TTFT p99", diff(bg, bd, "ttft_p99_ms"), 100.0, "ms",
        detail=(f"{bg['ttft_p99_ms']:.1f} vs {bd['ttft_p99_ms']:.1f} ms (p50 {bg['ttft_p50_ms']:.1f} vs "
                f"{bd['ttft_p50_ms']:.1f}); median burst of {len(bg['runs_ttft_p99_ms'])}" if bg and bd else ""))
    chain = (growth or {}).get("chain")
    add(f"chain depth {opts.chain_depth} resolves (store history, p50)", chain["p50_ms"] if chain else None, 5.0, "ms",
        detail=f"{chain['items']} items in {chain['statements']} SQL statement(s); p99 {chain['p99_ms']:.2f} ms"
        if chain else "")
    big = (growth or {}).get("big_body")
    add(f"/health while a {big['mb']:.0f} MB body is handled (max)" if big else "/health while a large body is "
        "handled (max)", big["max_ms"] if big else None, 50.0, "ms",
        detail=f"p50 {big['p50_ms']:.1f}, p99 {big['p99_ms']:.1f} ms over {big['probes']} probes; alone max "
        f"{big['alone_max_ms']:.1f} ms" if big else "")
    return out


# -- reporting ------------------------------------------------------------------------------------------------

def fmt_num(v, fmt: str = ".1f") -> str:
    """A figure for the Markdown tables; a dash where there is none (None or NaN)."""
    return "–" if v is None or v != v else format(v, fmt)


def median_of(values: list[float]) -> float:
    """The lower median, ignoring NaN."""
    vals = sorted(v for v in values if v == v)
    return vals[(len(vals) - 1) // 2] if vals else float("nan")


def table(cases: list[dict]) -> str:
    head = ("| layout | case | C | ok/req | req/s | events/s | TTFB p50 / p99 ms | TTFT p50 / p90 / p99 ms | "
            "total p50 / p99 ms | gap p50 / p99 ms | gw CPU ms/req | gw µs/event | gw µs/token | gw CPU % | "
            "gw peak RSS MiB | upstream CPU % | loadgen CPU % | other CPU % | client reads/req | clean runs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in cases:
        gw = r["mode"] == "gateway"

        def g(key: str, fmt: str, r=r, gw=gw) -> str:
            return fmt_num(r.get(key), fmt) if gw else "–"
        lines.append(
            f"| {r.get('layout', '–')} | {r['case']} | {r['concurrency']} | {r['ok']}/{r['requests']} | "
            f"{fmt_num(r['requests_per_s'])} | {fmt_num(r['events_per_s'], '.0f')} | "
            f"{fmt_num(r['ttfb_p50_ms'], '.2f')} / {fmt_num(r['ttfb_p99_ms'], '.2f')} | "
            f"{fmt_num(r['ttft_p50_ms'], '.2f')} / {fmt_num(r['ttft_p90_ms'], '.2f')} / {fmt_num(r['ttft_p99_ms'], '.2f')} | "
            f"{fmt_num(r['total_p50_ms'], '.1f')} / {fmt_num(r['total_p99_ms'], '.1f')} | "
            f"{fmt_num(r.get('gap_p50_ms'), '.2f')} / {fmt_num(r.get('gap_p99_ms'), '.2f')} | "
            f"{g('gateway_cpu_ms_per_request', '.2f')} | {g('gateway_cpu_us_per_event', '.1f')} | "
            f"{g('gateway_cpu_us_per_token', '.1f')} | {g('gateway_cpu_pct', '.0f')} | {g('gateway_peak_rss_mib', '.1f')} | "
            f"{fmt_num(r.get('upstream_cpu_pct'), '.0f')} | {fmt_num(r['client_cpu_pct'], '.0f')} | "
            f"{fmt_num(r.get('unattributed_cpu_pct'), '.0f')} | {fmt_num(r.get('reads_per_request'), '.0f')} | "
            f"{r.get('clean_runs', '–')}/{len(r.get('runs_requests_per_s', ())) or 1} |")
    return "\n".join(lines)


def targets_table(rows: list[dict]) -> str:
    lines = ["| target | measured | limit | result | detail |", "|---|---|---|---|---|"]
    for t in rows:
        op = "≥" if t.get("higher_is_better") else "≤"
        lines.append(f"| {t['target']} | {fmt_num(t['value'], '.2f')} {t['unit']} | {op} {t['limit']:g} {t['unit']} | "
                     f"**{t['result']}** | {t['detail']} |")
    return "\n".join(lines)


def markdown(meta: dict, cases: list[dict], tgts: list[dict], profile: dict | None, growth: dict | None = None) -> str:
    m = meta["machine"]
    o = meta["options"]
    parts = [
        f"# responses-gateway benchmark — {meta['started']}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}, "
        f"Python {m['python']}; gateway commit {m['commit']}, {o['workers']} worker(s), "
        f"{o.get('upstream_processes', 1)} fake-upstream process(es), {o.get('load_processes', 1)} load-generator "
        "process(es); "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".",
        "",
        f"Upstream: fake Chat Completions (`bench/fake_upstream.py`), {o['tokens']} tokens per response, "
        f"{o['tokens_per_chunk']} token(s) per chunk, no delay; TTFT cases {o['ttft_tokens']} tokens at "
        f"{o['ttft_delay_ms']:g} ms/token. {o['requests']} requests per throughput case "
        f"({o['ttft_requests']} per TTFT case). *Paced* cases: {o['paced_tokens']} tokens at "
        f"{o['paced_delay_ms']:g} ms/token, store={str(o['paced_store']).lower()}: closed loop at C = "
        f"{o['paced_concurrency']} ({o['paced_rounds']} requests per stream, first requests spread over one "
        f"response time), *open* = Poisson arrivals at {100 * o['open_load']:g}% of the gateway's capacity "
        f"(at most {o['open_max_rate']:g}/s) for {o['open_duration']:g} s, *burst* = {o['burst']} requests at once on "
        f"new connections (median of {o['burst_repeat']} bursts by TTFT p99); *paced gateway N tok*: a tenth of the "
        "tokens, each ten times slower, at the top C — the difference splits the CPU per response into a part per "
        "response and a part per token. *Gap* = time between consecutive "
        "client reads carrying text. Layouts: " + "; ".join(meta.get("layouts", {}).values()) + ". "
        "Each case after an unrecorded warm-up round. Events are SSE frames "
        "(`[DONE]` included). CPU and peak RSS are the gateway process's, over the recorded run only; CPU % "
        "columns are percent of one core; *other CPU %* is machine-wide busy time not charged to the three "
        f"processes (other work on the machine, kernel softirq). Throughput cases: median of {o['repeat']} "
        f"interleaved run(s), among the *clean* ones (other CPU ≤ {CLEAN_OTHER_PCT:g}%) when there are any.",
        "",
        table(cases),
        "",
        f"## Targets (judged in the {tgts[0]['layout'] if tgts else '?'} layout)",
        "",
        targets_table(tgts),
    ]
    if growth:
        from .growth import markdown as growth_markdown

        parts += ["", "## Growth (pinned as above, C = 1, store false unless chained)", "", growth_markdown(growth)]
    split = [r for r in cases if "to_upstream_p50_ms" in r]
    if split:
        parts += ["", "Time to first token at C = 1, split with the upstream's clock (same CLOCK_MONOTONIC): "
                  "*to upstream* = request sent → upstream has parsed its request; *from upstream* = upstream "
                  "wrote the first token → client has the first text delta.", "",
                  "| case | TTFT p50 / p99 ms | to upstream p50 / p99 ms | from upstream p50 / p99 ms |",
                  "|---|---|---|---|"]
        parts += [f"| {r['case']} | {fmt_num(r['ttft_p50_ms'], '.2f')} / {fmt_num(r['ttft_p99_ms'], '.2f')} | "
                  f"{fmt_num(r['to_upstream_p50_ms'], '.2f')} / {fmt_num(r['to_upstream_p99_ms'], '.2f')} | "
                  f"{fmt_num(r['from_upstream_p50_ms'], '.2f')} / {fmt_num(r['from_upstream_p99_ms'], '.2f')} |"
                  for r in split]
    busy = [r.get("unattributed_cpu_pct") or 0.0 for r in cases]
    if meta.get("load_before_start_pct") and meta["load_before_start_pct"] > 25:
        parts[2:2] = [f"**Warning:** the machine was {meta['load_before_start_pct']:.0f}% busy (of one core) with "
                      "other work when the run started.", ""]
    if busy and max(busy) > 40:
        parts[2:2] = [f"**Warning:** up to {max(busy):.0f}% of a core went to work outside the benchmark's processes "
                      "during a case: other load shared the machine, so some figures are low.", ""]
    if profile:
        parts += ["", profile_markdown(profile)]
    return "\n".join(parts) + "\n"


# -- profiling (optional) -----------------------------------------------------------------------------------

def find_py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def summarize_collapsed(text: str, top: int = 25) -> dict:
    """py-spy `--format raw` (collapsed stacks: `frame;frame;… count`) → self and inclusive % per function."""
    total = 0
    self_: dict[str, int] = {}
    incl: dict[str, int] = {}
    area: dict[str, int] = {}
    stages: dict[str, int] = {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += n
        leaf = frames[-1]
        self_[leaf] = self_.get(leaf, 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
        area[_area(leaf)] = area.get(_area(leaf), 0) + n
        stage = stage_of(frames)
        stages[stage] = stages.get(stage, 0) + n

    def pct(d: dict) -> list[list]:
        return [[k, round(100.0 * v / total, 1)] for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]]

    # The chain every stack starts with (runpy, cli.main, uvicorn, asyncio.run) says nothing: leave it out.
    root = max(incl.values(), default=0)
    inner = {k: v for k, v in incl.items() if v < 0.97 * root}
    return {"samples": total, "self": pct(self_) if total else [], "inclusive": pct(inner) if total else [],
            "by_area_self": pct(area) if total else [], "stages": pct(stages) if total else []}


# Stages of the gateway's path, for the breakdown: a sample goes to the first rule that matches, the
# "anywhere on the stack" rules first, then the innermost frame that matches a "frame" rule.
STACK_RULES = [
    ("store (aiosqlite, sqlite3)", ("aiosqlite", "/store/", "sqlite3")),
    ("per request: read + validate the request, open the upstream", ("create_response (",)),
]
FRAME_RULES = [
    ("per event: SSE encode (sse.encode / encode_all, orjson.dumps)", ("encode_all (", "encode (responses_gateway/sse")),
    ("per event: compose Responses events (Composer)", ("responses_gateway/composer.py",)),
    ("per chunk: parse upstream chunks (ChunkParser, orjson.loads)", ("ChunkParser.", "_loads (responses_gateway")),
    ("per read: SSE decode (SSEDecoder)", ("responses_gateway/sse.py",)),
    ("per read: upstream HTTP client (aiohttp)", ("aiohttp/",)),
    ("per batch: ASGI send (uvicorn send + starlette send wrappers)",
     ("RequestResponseCycle.send", "_send (starlette", "sender (starlette")),
    ("per batch: glue (pipeline.run, ChatStream, EventStreamResponse)",
     ("responses_gateway/pipeline.py", "ChatStream.", "responses_gateway/api/streaming.py")),
    ("HTTP server, routing, middleware (uvicorn, starlette)", ("uvicorn/", "starlette/")),
    ("event loop and socket I/O (uvloop, in C)", ("asyncio/", "uvloop")),
]


def stage_of(frames: list[str], stack_rules=None, frame_rules=None) -> str:
    """The stage of one sampled stack: the first of `stack_rules` with a key anywhere on the stack, else the
    innermost frame that matches one of `frame_rules` (this module's rules by default)."""
    for name, keys in STACK_RULES if stack_rules is None else stack_rules:
        if any(k in f for f in frames for k in keys):
            return name
    for f in reversed(frames):
        for name, keys in FRAME_RULES if frame_rules is None else frame_rules:
            if any(k in f for k in keys):
                return name
    return "other"


def _area(frame: str) -> str:
    for key, name in (("responses_gateway", "gateway (src/)"), ("starlette", "starlette"),
                      ("uvicorn", "uvicorn"), ("aiohttp", "aiohttp"), ("asyncio", "asyncio"),
                      ("aiosqlite", "aiosqlite"), ("sqlite3", "sqlite3"), ("threading", "threading"),
                      ("pydantic", "pydantic")):
        if key in frame:
            return name
    return "other"


def profile_markdown(p: dict) -> str:
    lines = [f"## Profile: py-spy, gateway under load ({p.get('case', 'throughput')}, C={p['concurrency']}, "
             f"store={str(p.get('store', False)).lower()}, {p['seconds']:g} s, "
             f"{p['samples']} non-idle samples, {p['requests_per_s']:.0f} req/s while sampling)", "",
             f"Raw collapsed stacks: `{p['raw']}` (open in speedscope, or `flamegraph.pl`).", "",
             "Self: samples whose innermost Python frame is the function (time in C code it calls — orjson, "
             "uvloop's I/O, aiohttp's parser — counts as its caller's). Inclusive: samples with the function "
             "anywhere on the stack (the start-up chain common to all samples left out).", "",
             "| self % | function | | inclusive % | function |", "|---|---|---|---|---|"]
    for i in range(max(len(p["self"]), len(p["inclusive"]))):
        s = p["self"][i] if i < len(p["self"]) else ["", ""]
        c = p["inclusive"][i] if i < len(p["inclusive"]) else ["", ""]
        lines.append(f"| {s[1]} | `{s[0]}` | | {c[1]} | `{c[0]}` |")
    lines += ["", "Self time by package: " + ", ".join(f"{k} {v}%" for k, v in p["by_area_self"]), "",
              "Where the samples go, by stage of the path (each sample counted once):", "",
              "| % of samples | stage |", "|---|---|"]
    lines += [f"| {v} | {k} |" for k, v in p.get("stages", [])]
    return "\n".join(lines)


async def profile_gateway(b: Bench, out: Path) -> dict | None:
    opts, say = b.opts, b.say
    spy = find_py_spy()
    if spy is None:
        say("  py-spy not found (pip install py-spy): no profile")
        return None
    paced = opts.profile_case == "paced"
    c = max(opts.paced_concurrency_list if paced else opts.concurrency_list)
    argv = [spy, "record", "--pid", str(b.gw_pid), "--duration", str(int(opts.profile)), "--rate", "250",
            "--format", "raw", "--nolineno", "--nonblocking", "-o", str(out)]
    if opts.workers > 1:
        argv.append("--subprocesses")
    store = opts.paced_store if paced else False
    if paced:
        b.upstream(tokens=opts.paced_tokens, delay_ms=opts.paced_delay_ms, tokens_per_chunk=1)
    body = load.request_body("gateway", store=store)
    async with load.new_session(c, opts.profile + 60) as session:  # warm connections, streams in full flow
        if paced:
            await load.run_load(b.gw_url, "gateway", c, c, body, duration=opts.profile, session=session,
                                stagger=opts.paced_tokens * opts.paced_delay_ms / 1000)
        spy_proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        await asyncio.sleep(1.0)  # attach
        result = await load.run_load(b.gw_url, "gateway", 1_000_000, c, body, duration=opts.profile,
                                     session=session)
    b.upstream(tokens=opts.tokens, delay_ms=0.0)
    try:
        _, err = await asyncio.to_thread(spy_proc.communicate, timeout=opts.profile + 30)
    except subprocess.TimeoutExpired:
        spy_proc.kill()
        _, err = spy_proc.communicate()
    if not out.exists():
        say(f"  py-spy wrote no profile: {err.decode(errors='replace')[-500:]}")
        return None
    summary = summarize_collapsed(out.read_text(errors="replace"))
    ok = sum(1 for s in result.samples if s.ok)
    summary.update(concurrency=c, seconds=opts.profile, raw=str(out.relative_to(ROOT)) if out.is_relative_to(ROOT)
                   else str(out), requests_per_s=ok / result.wall if result.wall else 0.0, case=opts.profile_case,
                   store=store)
    return summary


# -- main ----------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a few seconds: " + ", ".join(f"{k}={v}" for k, v in QUICK.items()))
    p.add_argument("--requests", type=int, help=f"requests per throughput case [{FULL['requests']}]")
    p.add_argument("--concurrency", help=f"comma-separated concurrency levels [{FULL['concurrency']}]")
    p.add_argument("--tokens", type=int, help=f"content tokens per response [{FULL['tokens']}]")
    p.add_argument("--tokens-per-chunk", type=int, default=1, help="tokens per upstream chunk [1]")
    p.add_argument("--ttft-delay-ms", type=float, default=5.0, help="per-token delay of the TTFT cases [5]")
    p.add_argument("--ttft-tokens", type=int, help=f"tokens per response in the TTFT cases [{FULL['ttft_tokens']}]")
    p.add_argument("--ttft-requests", type=int, help=f"requests per TTFT case, 0 to skip [{FULL['ttft_requests']}]")
    p.add_argument("--paced-concurrency", help=f"streams of the paced closed-loop cases [{FULL['paced_concurrency']}]")
    p.add_argument("--paced-tokens", type=int, help=f"tokens per paced response [{FULL['paced_tokens']}]")
    p.add_argument("--paced-delay-ms", type=float, help=f"ms per token in the paced cases [{FULL['paced_delay_ms']:g}]")
    p.add_argument("--paced-rounds", type=int,
                   help=f"requests per stream in the paced closed-loop cases, 0 skips every paced case "
                        f"[{FULL['paced_rounds']}]")
    p.add_argument("--paced-store", choices=("true", "false"), default="true",
                   help="`store` of the paced, open-loop and burst requests [true]")
    p.add_argument("--open-duration", type=float, help=f"seconds of open-loop arrivals, 0 to skip [{FULL['open_duration']:g}]")
    p.add_argument("--open-load", type=float, default=0.8, help="open-loop arrival rate, as a share of the "
                                                                  "gateway's capacity at this pace [0.8]")
    p.add_argument("--open-max-rate", type=float, default=400.0, help="cap on the open-loop arrivals per second [400]")
    p.add_argument("--burst", type=int, help=f"requests sent at once in the burst cases, 0 to skip [{FULL['burst']}]")
    p.add_argument("--burst-repeat", type=int, help=f"bursts per case [{FULL['burst_repeat']}]")
    p.add_argument("--layout", help="comma-separated: pinned (gateway alone on its own CPU(s), load generator "
                                    "and upstream on the others), unpinned [pinned,unpinned when the machine has "
                                    "a CPU to spare, else unpinned]")
    p.add_argument("--growth-requests", type=int,
                   help=f"requests per growth case, 0 skips the growth cases [{FULL['growth_requests']}]")
    p.add_argument("--chain-depth", type=int, help=f"turns of the previous_response_id chain [{FULL['chain_depth']}]")
    p.add_argument("--big-input-kib", type=int, help=f"size of the large input [{FULL['big_input_kib']}]")
    p.add_argument("--tools", type=int, help=f"function tools in the many-tools case [{FULL['tools']}]")
    p.add_argument("--mcp-tools", type=int, help=f"tools in the listed MCP tool list [{FULL['mcp_tools']}]")
    p.add_argument("--big-body-mb", type=int, help="size of the body sent while /health is probed, 0 skips it "
                                                   f"[{FULL['big_body_mb']}]")
    p.add_argument("--duration", type=float, help=f"no new request after this many s in a case [{FULL['duration']:g}]")
    p.add_argument("--repeat", type=int, help=f"runs of each throughput case, interleaved; the median run is "
                                              f"reported [{FULL['repeat']}]")
    p.add_argument("--wait-quiet", type=float, metavar="SECONDS",
                   help=f"wait up to this long for other load on the machine to stop [{FULL['wait_quiet']:g}]")
    p.add_argument("--workers", default="1",
                   help="gateway worker processes (serve --workers) [1]; a list (1,2,4,8) runs the scaling cases at "
                        "each count instead, with options of their own (python -m bench.scaling --help)")
    p.add_argument("--upstream-processes", type=int, default=0,
                   help="fake-upstream processes sharing its port [0: as many as half the CPUs the gateway "
                        "does not use, 1 on 2 CPUs]")
    p.add_argument("--load-processes", type=int, default=0,
                   help="load-generator processes [0: the other half of those CPUs, 1 (this process) on 2 CPUs]")
    p.add_argument("--profile", type=float, default=0.0, metavar="SECONDS",
                   help="after the cases, sample the gateway with py-spy for this long under load")
    p.add_argument("--profile-case", choices=("paced", "throughput"), default="paced",
                   help="the load sampled: the top paced C (closed loop) or the top throughput C [paced]")
    p.add_argument("--results-dir", type=Path, default=RESULTS, help="where the .md and .json go [bench/results]")
    p.add_argument("--gateway-src", metavar="DIR",
                   help="run the gateway from this src/ directory (e.g. a git worktree of another commit) "
                        "instead of the installed package")
    opts = p.parse_args(argv)
    try:
        opts.workers_list = [int(x) for x in str(opts.workers).split(",") if x.strip()]
    except ValueError:
        p.error("--workers needs a positive integer or a comma-separated list of them")
    if not opts.workers_list or min(opts.workers_list) < 1:
        p.error("--workers needs a positive integer or a comma-separated list of them")
    if len(opts.workers_list) > 1:
        p.error("a list of worker counts runs the scaling cases: python -m bench.run --workers 1,2,4")
    opts.workers = opts.workers_list[0]
    up, ld = layout.helpers(opts.workers)
    opts.upstream_processes = opts.upstream_processes or up
    opts.load_processes = opts.load_processes or ld
    base = QUICK if opts.quick else FULL
    for key, value in base.items():
        if getattr(opts, key) is None:
            setattr(opts, key, value)
    opts.concurrency_list = [int(x) for x in str(opts.concurrency).split(",") if x.strip()]
    opts.paced_concurrency_list = [int(x) for x in str(opts.paced_concurrency).split(",") if x.strip()]
    opts.paced_store = opts.paced_store == "true"
    if not opts.concurrency_list or min(opts.concurrency_list) < 1 or opts.requests < 1 or opts.repeat < 1:
        p.error("--concurrency needs positive integers, --requests and --repeat at least 1")
    if not opts.paced_concurrency_list or min(opts.paced_concurrency_list) < 1:
        p.error("--paced-concurrency needs positive integers")
    opts.layouts = [x.strip() for x in opts.layout.split(",") if x.strip()] if opts.layout \
        else layout.default_names(opts.workers)
    try:
        for name in opts.layouts:
            layout.make(name, opts.workers)
    except ValueError as exc:
        p.error(str(exc))
    return opts


def wants_scaling(argv: list[str] | None) -> bool:
    """`--workers` given as a list (1,2,4): the scaling cases (bench/scaling.py), with options of their own."""
    args = sys.argv[1:] if argv is None else argv
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--workers=") else (
            args[i + 1] if arg == "--workers" and i + 1 < len(args) else None)
        if value is not None and "," in value.strip(","):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    if wants_scaling(argv):
        from .scaling import main as scaling_main

        return scaling_main(argv)
    opts = parse_args(argv)
    started = dt.datetime.now(dt.UTC)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    opts.results_dir.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        print(msg, flush=True)

    meta = {"started": started.strftime("%Y-%m-%d %H:%M:%S UTC"), "machine": machine(),
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()}}
    if opts.gateway_src:
        meta["machine"]["commit"] = f"src from {opts.gateway_src}"
    meta["load_before_start_pct"] = wait_quiet(opts.wait_quiet, say) if opts.wait_quiet > 0 else None
    say(f"bench: {meta['machine']['cpu']}, {meta['machine']['cores']} cores, gateway {meta['machine']['commit']}")
    with tempfile.TemporaryDirectory(prefix="rg-bench-") as tmp:
        tmpdir = Path(tmp)
        env = clean_env()
        up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0",
                               "--tokens", str(opts.tokens), "--tokens-per-chunk", str(opts.tokens_per_chunk),
                               "--processes", str(opts.upstream_processes)],
                  tmpdir, env, capture_stdout=True)
        gw = None
        try:
            line = up.first_line(timeout=20)
            up_url = line.split()[-2].removesuffix("/v1")  # "... listening on http://127.0.0.1:PORT/v1 pid=N"
            wait_http(f"{up_url}/health", up)
            port = free_port()
            gw_argv = [sys.executable, "-m", "responses_gateway", "serve", "--upstream", f"{up_url}/v1",
                       "--host", "127.0.0.1", "--port", str(port), "--db", str(tmpdir / "responses.db"),
                       "--log-level", "warning", "--workers", str(opts.workers)]
            gw = Proc("gateway", gw_argv, tmpdir, clean_env(opts.gateway_src))
            gw_url = f"http://127.0.0.1:{port}"
            wait_http(f"{gw_url}/health", gw, timeout=60)
            if opts.workers > 1:
                time.sleep(1.0)  # every worker up
            say(f"upstream pid {up.pid} at {up_url} ({opts.upstream_processes} process(es)); gateway pid {gw.pid} "
                f"at {gw_url} ({opts.workers} worker(s)); load generator: {opts.load_processes} process(es)")
            try:
                import uvloop
                runner = uvloop.run
            except ImportError:
                runner = asyncio.run

            idle_rss = load.rss_mib(load.tree(gw.pid))
            meta["gateway_idle_rss_mib"] = idle_rss
            b = Bench(opts, up_url, up.pid, gw_url, gw.pid, say)
            meta["layouts"] = {name: layout.make(name, opts.workers).describe() for name in opts.layouts}

            def place(name: str) -> None:
                b.layout = name
                layout.apply(layout.make(name, opts.workers), load.tree(gw.pid), [up.pid, os.getpid()],
                             upstream_pids=load.tree(up.pid) if opts.upstream_processes > 1 else None,
                             load_pids=[os.getpid(), *b.pool.pids] if b.pool is not None else None)
                say(f"layout: {meta['layouts'][name]}")

            async def everything():
                if opts.load_processes > 1:
                    b.pool = LoadPool(opts.load_processes, clean_env(), str(ROOT))
                    await b.pool.start()
                try:
                    return await cases_and_extras()
                finally:
                    if b.pool is not None:
                        await b.pool.close()

            async def cases_and_extras():
                cases = []
                for name in opts.layouts:
                    place(name)
                    cases += await run_cases(b)
                place(opts.layouts[0])
                grown = None
                if opts.growth_requests > 0:
                    grown = await run_growth(opts, gw_url, gw.pid, up.pid, tmpdir / "responses.db", b.upstream, say)
                prof = None
                if opts.profile > 0:
                    say(f"profiling the gateway for {opts.profile:g} s ({opts.profile_case}) ...")
                    prof = await profile_gateway(b, opts.results_dir / f"{stamp}-profile.txt")
                return cases, grown, prof

            cases, grown, prof = runner(everything())
        finally:
            layout.pin([os.getpid()], frozenset(layout.available()))
            if gw is not None:
                gw.stop()
            up.stop()
    tgts = targets(cases, opts, grown, idle_rss)
    report = {"meta": meta, "cases": cases, "targets": tgts, "growth": grown, "profile": prof}
    md = markdown(meta, cases, tgts, prof, grown)
    md_path = opts.results_dir / f"{stamp}.md"
    json_path = opts.results_dir / f"{stamp}.json"
    md_path.write_text(md)
    json_path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    say("")
    say(md)
    say(f"wrote {md_path} and {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
