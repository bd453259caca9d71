"""Where the gateway's time goes: its fixed cost per response and its cost per token, by stage of the path.

    python -m bench.where                    # about 2 minutes on 2 cores
    python -m bench.where --quick            # a smoke run of a few seconds
    python -m bench.where --concurrency 64 --rounds 3

The paced split of bench.run, taken apart. The gateway (SQLite store, `store: true`) is pinned alone on one
CPU where the machine has two, and serves two paced loads: 100 tokens at 20 ms/token and 10 tokens at 200 ms
(the same response time, so the same arrivals); from the CPU per response of the two, a fixed part per
response *a* and a part per token *b* (CPU = a + b × tokens), as in bench.run. The same two loads run three
times:

  1. plain — the gateway's CPU time from /proc (all threads): *a* and *b* in ms and µs;
  2. py-spy — sampling every thread at 250 Hz: each sample goes to one stage (below), and each stage's
     share of the samples, split into *a* and *b* the same way, is scaled to the plain CPU figures;
  3. cProfile — the event loop's thread only (bench/cprofile_serve.py): each stage's inclusive time and the
     top functions by own time, per response and per token, with call counts, scaled the same way.

A fourth load (`store: false`, 10 tokens) gives the store's whole cost (both threads) as a difference of
plain CPU, and the lean translator (bench/lean_translator.py) serves the same two loads for its own split. Stages: the request (reading the body, the size check, parsing and validation), routing and
history (`prepare`), building the upstream request, sending it and waiting for its headers (aiohttp),
setting the response up (skeleton, composer), the composer's start, per-token feed and finish, the store,
reading the upstream (aiohttp's read path), SSE decoding, chunk parsing, SSE encoding, the ASGI send to the
client, uvicorn's HTTP parsing, starlette and our middleware, ids and metrics, and the event loop itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import layout, load
from .run import Proc, clean_env, find_py_spy, fmt_num, free_port, post_json, stage_of, wait_http, wait_quiet

# A stage for a stack: the first CONTEXT rule whose marker is anywhere on the stack (the phase of a request
# the sample belongs to), else the innermost frame that matches a FRAME rule.
CONTEXT = [
    ("store", ("store_final (responses_gateway/pipeline.py", "responses_gateway/store/", "aiosqlite/", "sqlite3")),
    ("request: read, size check, parse, validate", ("read_request (responses_gateway/api/responses.py",)),
    ("routing, history, tools (prepare)", ("prepare (responses_gateway/respond.py",)),
    ("upstream request: build the body", ("build_body (responses_gateway/upstreams/chat_completions.py",)),
    ("upstream request: send, await headers", ("_open (responses_gateway/respond.py",)),
    ("response set-up (skeleton, composer)", ("skeleton (responses_gateway/protocol/response.py",
                                              "__init__ (responses_gateway/composer.py")),
    ("composer: start", ("start (responses_gateway/composer.py",)),
    ("composer: finish", ("finish (responses_gateway/composer.py",)),
]
FRAME = [
    ("SSE encode", ("encode_all (responses_gateway/sse.py", "encode (responses_gateway/sse.py")),
    ("composer: feed (per token)", ("responses_gateway/composer.py",)),
    ("SSE decode", ("responses_gateway/sse.py",)),
    ("chunk parse", ("responses_gateway/upstreams/chat_completions.py",)),
    ("upstream read (net/http1 or aiohttp)", ("aiohttp/", "responses_gateway/net/http1.py",
                                              "responses_gateway/upstreams/http.py")),
    ("send to the client (edge write, or uvicorn's ASGI send)", ("write (responses_gateway/edge.py",
                                                                "finish (responses_gateway/edge.py",
                                                                "send (uvicorn/protocols/http/httptools_impl.py")),
    ("stream glue (pipeline, SSE sink)", ("responses_gateway/pipeline.py", "responses_gateway/api/streaming.py")),
    ("ids, metrics, logs", ("responses_gateway/ids.py", "responses_gateway/observe.py", "prometheus_client/",
                            "responses_gateway/metrics.py", "responses_gateway/logs.py", "logging/")),
    ("HTTP server: parsing, connection (uvicorn, edge)", ("uvicorn/", "responses_gateway/edge.py")),
    ("starlette, middleware, handler", ("starlette/", "responses_gateway/app.py", "responses_gateway/api/")),
    ("event loop and I/O (uvloop, in C)", ("asyncio/", "uvloop", "run (uvloop")),
]

# cProfile: a stage's inclusive time is the cumulative time of its root functions (file suffix, name); the
# roots of different stages do not call each other, except `_open` (which calls build_body: subtracted).
ROOTS = {
    "request: read, size check, parse, validate": [("api/responses.py", "read_request")],
    "routing, history, tools (prepare)": [("responses_gateway/respond.py", "prepare")],
    "upstream request: build the body": [("upstreams/chat_completions.py", "build_body")],
    "upstream request: send, await headers": [("responses_gateway/respond.py", "_open")],
    "response set-up (skeleton, composer)": [("protocol/response.py", "skeleton"),
                                             ("responses_gateway/composer.py", "__init__")],
    "composer: start": [("responses_gateway/composer.py", "start")],
    "composer: feed (per token)": [("responses_gateway/composer.py", "feed")],
    "composer: finish": [("responses_gateway/composer.py", "finish")],
    "store (event-loop side)": [("responses_gateway/pipeline.py", "store_final")],
    "SSE encode": [("responses_gateway/sse.py", "encode_all")],
    "SSE decode": [("responses_gateway/sse.py", "feed")],
    "chunk parse": [("upstreams/chat_completions.py", "frames")],
    # the tree since issue 24's round three (edge writes, net/http1), and before it (uvicorn's send, aiohttp)
    "send to the client (edge write, or uvicorn's ASGI send)": [("responses_gateway/edge.py", "write"),
                                                              ("responses_gateway/edge.py", "finish"),
                                                              ("uvicorn/protocols/http/httptools_impl.py", "send")],
    "upstream read (net/http1 protocol, or aiohttp's)": [("responses_gateway/net/http1.py", "data_received"),
                                                        ("aiohttp/client_proto.py", "data_received")],
    # (serve runs edge.EdgeProtocol, whose data_received calls uvicorn's: that one is inside it)
    "HTTP server: request parsing (edge + uvicorn)": [("responses_gateway/edge.py", "data_received")],
}


def collapsed_stages(text: str) -> tuple[int, dict[str, int]]:
    total, out = 0, {}
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        n = int(count)
        total += n
        stage = stage_of(frames, CONTEXT, FRAME)
        out[stage] = out.get(stage, 0) + n
    return total, out


def profile_stages(path: Path) -> tuple[float, dict[str, float], list[tuple]]:
    """(total own time, {stage: inclusive s}, [(file, line, name, calls, own s, cumulative s)])."""
    st = pstats.Stats(str(path)).stats  # {(file, line, name): (primitive calls, calls, own, cumulative, callers)}
    total = sum(v[2] for v in st.values())
    stages = {}
    for stage, roots in ROOTS.items():
        stages[stage] = sum(v[3] for (f, _l, name), v in st.items() for suffix, root in roots
                            if name == root and f.endswith(suffix))
    build = stages.get("upstream request: build the body", 0.0)
    stages["upstream request: send, await headers"] -= build
    funcs = [(f, line, name, v[1], v[2], v[3]) for (f, line, name), v in st.items()]
    return total, stages, funcs


def _short_file(f: str) -> str:
    for mark in ("site-packages/", "/src/", "/lib/python3."):
        if mark in f:
            f = f.split(mark, 1)[1]
            return f.split("/", 1)[1] if mark == "/lib/python3." else f
    return f


# -- the loads -------------------------------------------------------------------------------------------------

class Gateway:
    def __init__(self, tmpdir: Path, up_url: str, mode: str, cpus: frozenset[int] | None, src: str | None):
        self.port = free_port()
        self.prof = tmpdir / f"{mode}.prof"
        serve = ["serve", "--upstream", f"{up_url}/v1", "--host", "127.0.0.1", "--port", str(self.port),
                 "--db", str(tmpdir / f"{mode}.db"), "--log-level", "warning"]
        if mode == "cprofile":
            argv = [sys.executable, "-m", "bench.cprofile_serve", str(self.prof), *serve]
        elif mode == "translator":
            argv = [sys.executable, "-m", "bench.lean_translator", "--upstream", f"{up_url}/v1", "--port", str(self.port)]
        else:
            argv = [sys.executable, "-m", "responses_gateway", *serve]
        self.proc = Proc(f"gateway-{mode}", argv, tmpdir, clean_env(src))
        self.url = f"http://127.0.0.1:{self.port}"
        wait_http(f"{self.url}/health", self.proc, timeout=60)
        if cpus:
            layout.pin(load.tree(self.proc.pid), cpus)

    def stop(self) -> None:
        self.proc.stop()


async def paced(opts, gw: Gateway, up_url: str, tokens: int, store: bool = True, during=None) -> dict:
    """One closed-loop paced run at `tokens` tokens per response, same response time whatever the count."""
    delay = opts.span_ms / tokens
    post_json(f"{up_url}/_bench/config", {"tokens": tokens, "delay_ms": delay, "tokens_per_chunk": 1})
    body = load.request_body("gateway", store=store)
    c = opts.concurrency
    span = opts.span_ms / 1000.0
    async with load.new_session(c, 120 + opts.rounds * span) as session:
        await load.run_load(gw.url, "gateway", c, c, body, duration=60, session=session, stagger=span)

        times = {}

        async def recorded():
            started = during() if during else None
            times["before"] = user_system(gw.proc.pid)
            try:
                return await load.run_load(gw.url, "gateway", c * opts.rounds, c, body, duration=120,
                                           session=session, stagger=span)
            finally:
                times["after"] = user_system(gw.proc.pid)
                if started is not None:
                    await asyncio.to_thread(started)
        row = await load.measure_around(recorded, gw.proc.pid, None, keep_samples=False)
    row["tokens"] = tokens
    row["cpu_ms"] = row["gateway_cpu_ms_per_request"]
    if row["ok"]:
        row["user_ms"] = 1000 * (times["after"][0] - times["before"][0]) / row["ok"]
        row["system_ms"] = 1000 * (times["after"][1] - times["before"][1]) / row["ok"]
    if row["errors"]:
        raise RuntimeError(f"paced {tokens}: {row['errors']} errors, first: {row['first_error']}")
    return row


def user_system(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds (all threads; 10 ms ticks, so over seconds of load)."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[11]) / load.CLK_TCK, int(fields[12]) / load.CLK_TCK


def split(hi: float, lo: float, t_hi: int, t_lo: int) -> tuple[float, float]:
    """(per response, per token) from the cost per response at two token counts."""
    per_token = (hi - lo) / (t_hi - t_lo)
    return lo - t_lo * per_token, per_token


# -- main --------------------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.where", description=__doc__.split("\n")[0])
    p.add_argument("--concurrency", type=int, default=64, help="paced streams [64]")
    p.add_argument("--rounds", type=int, default=3, help="requests per stream per run [3]")
    p.add_argument("--tokens", default="100,10", help="the two token counts [100,10]")
    p.add_argument("--span-ms", type=float, default=2000.0, help="one response's duration [2000: 20 ms/token at 100]")
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second [250]")
    p.add_argument("--top", type=int, default=25, help="functions listed [25]")
    p.add_argument("--skip", default="", help="comma-separated of plain, nostore, translator, pyspy, cprofile")
    p.add_argument("--wait-quiet", type=float, default=20.0)
    p.add_argument("--gateway-src", metavar="DIR")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path, help="also write the report here")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.concurrency, opts.rounds, opts.span_ms, opts.wait_quiet, opts.rate = 4, 1, 200.0, 0.0, 100
    opts.token_counts = sorted({int(x) for x in opts.tokens.split(",")}, reverse=True)
    if len(opts.token_counts) != 2:
        p.error("--tokens needs two different counts")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    say = print
    skip = set(filter(None, opts.skip.split(",")))
    busy = wait_quiet(opts.wait_quiet, say) if opts.wait_quiet > 0 else None
    cpus = layout.available()
    gw_cpus = frozenset(cpus[:1]) if len(cpus) >= 2 else None
    t_hi, t_lo = opts.token_counts
    report: dict = {"busy_before_pct": busy, "loadavg": Path("/proc/loadavg").read_text().split()[:3]}
    with tempfile.TemporaryDirectory(prefix="rg-where-") as tmp:
        tmpdir = Path(tmp)
        up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0"], tmpdir, clean_env(),
                  capture_stdout=True)
        try:
            up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
            wait_http(f"{up_url}/health", up)
            if gw_cpus:
                layout.pin([up.pid, os.getpid()], frozenset(cpus[1:]))

            async def everything():
                if "plain" not in skip:
                    gw = Gateway(tmpdir, up_url, "plain", gw_cpus, opts.gateway_src)
                    try:
                        hi = await paced(opts, gw, up_url, t_hi)
                        lo = await paced(opts, gw, up_url, t_lo)
                        report["plain"] = {"hi": hi, "lo": lo}
                        if "nostore" not in skip:
                            report["plain"]["lo_nostore"] = await paced(opts, gw, up_url, t_lo, store=False)
                        say(f"plain: {hi['cpu_ms']:.2f} ms/response at {t_hi} tokens, {lo['cpu_ms']:.2f} at {t_lo}"
                            + (f", {report['plain']['lo_nostore']['cpu_ms']:.2f} at {t_lo} with store: false"
                               if "lo_nostore" in report["plain"] else ""))
                    finally:
                        gw.stop()
                if "translator" not in skip:
                    tr = Gateway(tmpdir, up_url, "translator", gw_cpus, None)
                    try:
                        hi = await paced(opts, tr, up_url, t_hi)
                        lo = await paced(opts, tr, up_url, t_lo)
                        report["translator"] = {"hi": hi, "lo": lo}
                        say(f"translator: {hi['cpu_ms']:.2f} ms/response at {t_hi} tokens, {lo['cpu_ms']:.2f} at {t_lo}")
                    finally:
                        tr.stop()
                if "pyspy" not in skip and find_py_spy():
                    gw = Gateway(tmpdir, up_url, "pyspy", gw_cpus, opts.gateway_src)
                    try:
                        report["pyspy"] = {}
                        for key, t in (("hi", t_hi), ("lo", t_lo)):
                            out = tmpdir / f"spy-{t}.txt"
                            spy = {}

                            def start(out=out, spy=spy):
                                seconds = opts.rounds * opts.span_ms / 1000.0 + 1
                                spy["p"] = subprocess.Popen(
                                    [find_py_spy(), "record", "--pid", str(gw.proc.pid), "--duration",
                                     str(max(1, int(seconds))), "--rate", str(opts.rate), "--format", "raw",
                                     "--nolineno", "--nonblocking", "-o", str(out)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                                time.sleep(0.5)
                                return lambda: spy["p"].wait(timeout=60)

                            row = await paced(opts, gw, up_url, t, during=start)
                            total, stages = collapsed_stages(out.read_text() if out.exists() else "")
                            report["pyspy"][key] = {"row": row, "samples": total, "stages": stages}
                        say(f"py-spy: {report['pyspy']['hi']['samples']} and {report['pyspy']['lo']['samples']} samples")
                    finally:
                        gw.stop()
                if "cprofile" not in skip:
                    gw = Gateway(tmpdir, up_url, "cprofile", gw_cpus, opts.gateway_src)
                    try:
                        report["cprofile"] = {}
                        for key, t in (("hi", t_hi), ("lo", t_lo)):
                            def start(gw=gw):
                                os.kill(gw.proc.pid, signal.SIGUSR1)
                                time.sleep(0.05)
                                return lambda: (os.kill(gw.proc.pid, signal.SIGUSR2), _wait_file(gw.prof))
                            if gw.prof.exists():
                                gw.prof.unlink()
                            row = await paced(opts, gw, up_url, t, during=start)
                            total, stages, funcs = profile_stages(gw.prof)
                            report["cprofile"][key] = {"row": row, "total_s": total, "stages": stages,
                                                       "funcs": funcs}
                        say(f"cProfile: {report['cprofile']['hi']['total_s']:.2f} s and "
                            f"{report['cprofile']['lo']['total_s']:.2f} s profiled")
                    finally:
                        gw.stop()

            try:
                import uvloop
                uvloop.run(everything())
            except ImportError:
                asyncio.run(everything())
        finally:
            layout.pin([os.getpid()], frozenset(cpus))
            up.stop()
    md = markdown(opts, report)
    print()
    print(md)
    if opts.out:
        opts.out.write_text(md)
    return 0


def _wait_file(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    size = -1
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size == size and size > 0:
            return
        size = path.stat().st_size if path.exists() else -1
        time.sleep(0.2)
    raise RuntimeError(f"the profile {path} was not written")


# -- report --------------------------------------------------------------------------------------------------------

def markdown(opts, report: dict) -> str:
    t_hi, t_lo = opts.token_counts
    lines = [f"Paced, C = {opts.concurrency}, {opts.rounds} requests per stream, {t_hi} tokens at "
             f"{opts.span_ms / t_hi:g} ms and {t_lo} at {opts.span_ms / t_lo:g} ms, store on (SQLite); gateway "
             f"pinned alone on one CPU{' (2+ CPUs)' if len(layout.available()) >= 2 else ''}; load average "
             f"{' '.join(report['loadavg'])} at the start.", ""]
    plain = report.get("plain")
    a = b = None
    if plain:
        a, b = split(plain["hi"]["cpu_ms"], plain["lo"]["cpu_ms"], t_hi, t_lo)
        lines.append(f"**Plain CPU** (all threads, /proc): {plain['hi']['cpu_ms']:.2f} ms per {t_hi}-token response, "
                     f"{plain['lo']['cpu_ms']:.2f} ms per {t_lo}-token response → **{a:.2f} ms per response + "
                     f"{1000 * b:.1f} µs per token**; other CPU % during the runs "
                     f"{fmt_num(plain['hi'].get('unattributed_cpu_pct'), '.0f')} / "
                     f"{fmt_num(plain['lo'].get('unattributed_cpu_pct'), '.0f')}.")
        ua, ub = split(plain["hi"]["user_ms"], plain["lo"]["user_ms"], t_hi, t_lo)
        sa, sb = split(plain["hi"]["system_ms"], plain["lo"]["system_ms"], t_hi, t_lo)
        lines.append(f"In user and system (kernel) time (/proc/<pid>/stat, 10 ms ticks): per response {ua:.2f} + "
                     f"{sa:.2f} ms, per token {1000 * ub:.1f} + {1000 * sb:.1f} µs.")
        if "lo_nostore" in plain:
            lines.append(f"The store's whole cost (both threads): {plain['lo']['cpu_ms']:.2f} − "
                         f"{plain['lo_nostore']['cpu_ms']:.2f} = **{plain['lo']['cpu_ms'] - plain['lo_nostore']['cpu_ms']:.2f}"
                         f" ms per response** (`store: true` against `store: false`, {t_lo} tokens).")
        lines.append("")
    tr = report.get("translator")
    if tr:
        ta, tb = split(tr["hi"]["cpu_ms"], tr["lo"]["cpu_ms"], t_hi, t_lo)
        lines.append(f"**The lean translator** (bench/lean_translator.py) under the same loads: {tr['hi']['cpu_ms']:.2f} and "
                     f"{tr['lo']['cpu_ms']:.2f} ms → **{ta:.2f} ms per response + {1000 * tb:.1f} µs per token**"
                     + (f" (the gateway: {a / ta:.1f}× per response, {b / tb:.2f}× per token)." if a and tb else "."))
        lines.append("")
    spy = report.get("pyspy")
    if spy and spy["hi"]["samples"] and spy["lo"]["samples"]:
        lines += ["**py-spy** (every thread; each sample to one stage; shares of each run's samples scaled to its "
                  "plain CPU per response, then split like the CPU):", "",
                  f"| stage | µs per response (fixed part) | µs per token | share at {t_hi} tokens |", "|---|---|---|---|"]
        rows = []
        for stage in set(spy["hi"]["stages"]) | set(spy["lo"]["stages"]):
            hi_ms = (plain or spy)["hi"]["cpu_ms"] if plain else spy["hi"]["row"]["cpu_ms"]
            lo_ms = (plain or spy)["lo"]["cpu_ms"] if plain else spy["lo"]["row"]["cpu_ms"]
            sh = spy["hi"]["stages"].get(stage, 0) / spy["hi"]["samples"]
            sl = spy["lo"]["stages"].get(stage, 0) / spy["lo"]["samples"]
            fa, fb = split(sh * hi_ms, sl * lo_ms, t_hi, t_lo)
            rows.append((stage, 1000 * fa, 1000 * fb, 100 * sh))
        rows.sort(key=lambda r: -(r[1] + 50 * r[2]))
        lines += [f"| {s} | {fa:.0f} | {fb:.1f} | {sh:.1f} % |" for s, fa, fb, sh in rows]
        lines.append(f"| **all** | **{sum(r[1] for r in rows):.0f}** | **{sum(r[2] for r in rows):.1f}** | 100 % |")
        lines.append("")
    prof = report.get("cprofile")
    if prof:
        hi, lo = prof["hi"], prof["lo"]
        n_hi, n_lo = hi["row"]["ok"], lo["row"]["ok"]
        scale_hi = (plain["hi"]["cpu_ms"] / 1000 * n_hi / hi["total_s"]) if plain else 1.0
        scale_lo = (plain["lo"]["cpu_ms"] / 1000 * n_lo / lo["total_s"]) if plain else 1.0
        lines += [f"**cProfile** (the event loop's thread only; {hi['total_s']:.2f} s and {lo['total_s']:.2f} s "
                  f"profiled over {n_hi} and {n_lo} responses; times scaled by {scale_hi:.2f} and {scale_lo:.2f} to "
                  "the plain CPU, which includes the store's thread and the kernel). Inclusive time of each stage's "
                  "root functions:", "",
                  "| stage (root functions) | µs per response (fixed part) | µs per token |", "|---|---|---|"]
        rows = []
        for stage in ROOTS:
            fa, fb = split(1e6 * scale_hi * hi["stages"].get(stage, 0) / n_hi,
                           1e6 * scale_lo * lo["stages"].get(stage, 0) / n_lo, t_hi, t_lo)
            rows.append((stage, fa, fb))
        rows.sort(key=lambda r: -(r[1] + 50 * r[2]))
        lines += [f"| {s} | {fa:.0f} | {fb:.2f} |" for s, fa, fb in rows]
        lines += ["", f"Top functions by own time (cProfile, scaled): per response at {t_lo} tokens, and calls per response:",
                  "", "| function | own µs / response | cumulative µs / response | calls / response |", "|---|---|---|---|"]
        for f, line, name, calls, own, cum in sorted(lo["funcs"], key=lambda x: -x[4])[:opts.top]:
            lines.append(f"| `{_short_file(f)}:{line} {name}` | {1e6 * scale_lo * own / n_lo:.1f} | "
                         f"{1e6 * scale_lo * cum / n_lo:.1f} | {calls / n_lo:.1f} |")
        lines += ["", "Per token (the difference between the two runs, per extra token), top functions by own time:", "",
                  "| function | own µs / token | calls / token |", "|---|---|---|"]
        lo_by = {(f, line, name): (calls, own) for f, line, name, calls, own, _ in lo["funcs"]}
        per_tok = []
        for f, line, name, calls, own, _cum in hi["funcs"]:
            c_lo, o_lo = lo_by.get((f, line, name), (0, 0.0))
            d_own = (scale_hi * own / n_hi - scale_lo * o_lo / n_lo) / (t_hi - t_lo)
            d_calls = (calls / n_hi - c_lo / n_lo) / (t_hi - t_lo)
            per_tok.append((f, line, name, 1e6 * d_own, d_calls))
        for f, line, name, own, calls in sorted(per_tok, key=lambda x: -x[3])[:opts.top]:
            lines.append(f"| `{_short_file(f)}:{line} {name}` | {own:.2f} | {calls:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
