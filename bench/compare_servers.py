"""uvicorn (uvloop + httptools) against granian (ASGI) and uvicorn with h11, serving the same gateway app, same load.

    python -m bench.compare_servers                  # C = 1, 16, 64, 3 interleaved rounds (about 2 minutes)
    python -m bench.compare_servers --requests 200   # shorter

Starts `python -m bench.fake_upstream` (256 tokens, one token per chunk, no delay) and two gateways in front
of it, both with no store (`--db none` / `RG_DB=none`), one worker each:

  * uvicorn — `python -m responses_gateway serve --db none ...`, exactly what users run (uvicorn.run with its
    defaults: uvloop and httptools when installed, which they are);
  * granian — `python -m granian --interface asgi --factory --workers 1 responses_gateway.app:app_from_env`,
    configured through RG_UPSTREAM_URL and RG_DB, every runtime option at granian's default (runtime threads,
    runtime mode, event loop, task implementation, backpressure); `granian-st` (in `--servers`) the same
    with its single-threaded runtime (`--runtime-mode st`);
  * uvicorn-h11 — `python -m uvicorn --factory --http h11 --loop uvloop responses_gateway.app:app_from_env`:
    the same app under uvicorn's pure-Python HTTP parser (and without the gateway's connection limits,
    `edge.py`, which subclass the httptools protocol).

Both stay up for the whole run (the idle one costs nothing) and are driven in turn by bench/load.py's load
generator (`load.measured`: an unrecorded warm-up round, then the recorded run) at each C, `store: false`.
CPU is the server's whole process tree (granian: its supervisor process and its worker, all threads) from
/proc schedstat; peak RSS is the serving process's VmHWM (reset before each run), with granian's supervisor
shown apart. Each (server, C) runs `--repeat` times, interleaved (the servers' order alternates between
rounds), each run after a short wait (`--quiet-per-run`, bounded) for the machine to be idle; the run with the
median req/s is reported, among the runs with little other load when there are any, and the ratios are also
given paired by round (the median of the per-round granian/uvicorn ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import sys
import tempfile
import time
from pathlib import Path

from . import load
from .run import (
    CLEAN_OTHER_PCT,
    Proc,
    clean_env,
    fmt_num,
    free_port,
    median_of,
    post_json,
    wait_http,
    wait_quiet,
)

SERVERS = ("uvicorn", "granian", "uvicorn-h11")
KNOWN = ("uvicorn", "granian", "granian-st", "uvicorn-h11")


def start_server(name: str, up_url: str, tmpdir: Path, src: str | None = None) -> tuple[Proc, str]:
    port = free_port()
    env = clean_env(src)
    if name == "uvicorn":
        argv = [sys.executable, "-m", "responses_gateway", "serve", "--upstream", f"{up_url}/v1",
                "--host", "127.0.0.1", "--port", str(port), "--db", "none", "--log-level", "warning"]
    elif name == "uvicorn-h11":
        env.update(RG_UPSTREAM_URL=f"{up_url}/v1", RG_DB="none", RG_LOG_LEVEL="warning")
        argv = [sys.executable, "-m", "uvicorn", "--factory", "--http", "h11", "--loop", "uvloop", "--host",
                "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
                "responses_gateway.app:app_from_env"]
    else:
        env.update(RG_UPSTREAM_URL=f"{up_url}/v1", RG_DB="none", RG_LOG_LEVEL="warning")
        argv = [sys.executable, "-m", "granian", "--interface", "asgi", "--factory", "--workers", "1",
                "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
                *(["--runtime-mode", "st"] if name == "granian-st" else []),
                "responses_gateway.app:app_from_env"]
    proc = Proc(name, argv, tmpdir, env)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health", proc, timeout=60)
    return proc, url


def serving_pid(proc: Proc, timeout: float = 10.0) -> int:
    """The process that runs the app: uvicorn's own (one worker), granian's worker (a child of its supervisor)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = [p for p in load.tree(proc.pid) if p != proc.pid]
        if proc.name.startswith("uvicorn") or children:
            return children[-1] if children else proc.pid
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name}: no worker process found")


def loaded_modules(pid: int) -> list[str]:
    """Which event loop and HTTP parser the serving process actually loaded (from its memory map)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    marks = {"uvloop": "/uvloop/loop.", "httptools": "/httptools/parser/", "rloop": "/rloop/",
             "granian (Rust)": "/granian/_granian."}
    return [name for name, mark in marks.items() if mark in maps]


async def one_case(name: str, url: str, pids: dict, c: int, opts, up_pid: int) -> dict:
    body = load.request_body("gateway", store=False)
    top = pids["main"]
    summary = await load.measured(url, "gateway", opts.requests, c, body, duration=opts.duration, pid=top,
                                  upstream_pid=up_pid, warmup=c)
    # CPU and the reset of VmHWM covered the whole tree; RSS: the serving process, and the rest apart.
    worker_rss = load.peak_rss_mib([pids["worker"]])
    summary["server_cpu_ms_per_response"] = summary.pop("gateway_cpu_ms_per_request")
    summary["serving_peak_rss_mib"] = worker_rss
    summary["supervisor_rss_mib"] = (load.rss_mib([p for p in load.tree(top) if p != pids["worker"]])
                                     if top != pids["worker"] else 0.0)
    return {"server": name, "concurrency": c, **summary}


def table(rows: list[dict]) -> str:
    head = ("| server | C | ok/req | req/s (runs) | events/s | TTFT p50 / p99 ms | server CPU ms/response | "
            "server µs/event | server CPU % | peak RSS MiB (+ supervisor) | upstream CPU % | loadgen CPU % | "
            "other CPU % | clean runs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        runs = ", ".join(fmt_num(x, ".0f") for x in r["runs_requests_per_s"])
        sup = f" (+ {r['supervisor_rss_mib']:.0f})" if r["supervisor_rss_mib"] else ""
        lines.append(
            f"| {r['server']} | {r['concurrency']} | {r['ok']}/{r['requests']} | "
            f"**{fmt_num(r['requests_per_s'], '.0f')}** ({runs}) | {fmt_num(r['events_per_s'], ',.0f')} | "
            f"{fmt_num(r['ttft_p50_ms'], '.2f')} / {fmt_num(r['ttft_p99_ms'], '.2f')} | "
            f"{fmt_num(r['server_cpu_ms_per_response'], '.2f')} | {fmt_num(r.get('gateway_cpu_us_per_event'), '.1f')} | "
            f"{fmt_num(r.get('gateway_cpu_pct'), '.0f')} | {fmt_num(r['serving_peak_rss_mib'], '.1f')}{sup} | "
            f"{fmt_num(r.get('upstream_cpu_pct'), '.0f')} | {fmt_num(r['client_cpu_pct'], '.0f')} | "
            f"{fmt_num(r.get('unattributed_cpu_pct'), '.0f')} | {r['clean_runs']}/{len(r['runs_requests_per_s'])} |")
    return "\n".join(lines)


def comparison(rows: list[dict], runs: dict) -> str:
    """Per C: each server against uvicorn from the medians in the table, and paired by round (the servers ran
    back to back in each round, so a round's ratio is less exposed to load that came and went)."""
    lines = []
    others = sorted({r["server"] for r in rows} - {"uvicorn"})
    for c, other in ((c, o) for c in sorted({r["concurrency"] for r in rows}) for o in others):
        u = next((r for r in rows if r["server"] == "uvicorn" and r["concurrency"] == c), None)
        g = next((r for r in rows if r["server"] == other and r["concurrency"] == c), None)
        if not u or not g or not u["requests_per_s"] or not u["server_cpu_ms_per_response"]:
            continue
        pairs = list(zip(runs[("uvicorn", c)], runs[(other, c)], strict=True))
        rps = median_of([b["requests_per_s"] / a["requests_per_s"] for a, b in pairs if a["requests_per_s"]])
        cpu = median_of([b["server_cpu_ms_per_response"] / a["server_cpu_ms_per_response"] for a, b in pairs
                       if a["server_cpu_ms_per_response"]])
        lines.append(f"- C={c}: {other} {100 * (g['requests_per_s'] / u['requests_per_s'] - 1):+.0f}% req/s, "
                     f"{100 * (g['server_cpu_ms_per_response'] / u['server_cpu_ms_per_response'] - 1):+.0f}% CPU per "
                     f"response ({g['server_cpu_ms_per_response']:.2f} vs {u['server_cpu_ms_per_response']:.2f} ms), "
                     f"TTFT p50 {g['ttft_p50_ms'] - u['ttft_p50_ms']:+.2f} ms, serving RSS "
                     f"{g['serving_peak_rss_mib'] - u['serving_peak_rss_mib']:+.1f} MiB vs uvicorn; paired by round "
                     f"(median of {len(pairs)}): req/s {100 * (rps - 1):+.0f}%, CPU per response {100 * (cpu - 1):+.0f}%")
    return "\n".join(lines)


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m bench.compare_servers", description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=1000, help="recorded requests per run [1000]")
    p.add_argument("--concurrency", default="1,16,64", help="comma-separated concurrency levels [1,16,64]")
    p.add_argument("--tokens", type=int, default=256, help="content tokens per response [256]")
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs of each case; median reported [3]")
    p.add_argument("--duration", type=float, default=20.0, help="no new request after this many s in a run [20]")
    p.add_argument("--wait-quiet", type=float, default=10.0, metavar="SECONDS",
                   help="wait up to this long for other load on the machine to stop first [10]")
    p.add_argument("--quiet-per-run", type=float, default=4.0, metavar="SECONDS",
                   help="and up to this long before each run, 0 not to [4]")
    p.add_argument("--servers", default=",".join(SERVERS),
                   help=f"comma-separated, uvicorn first, of {', '.join(KNOWN)} [{','.join(SERVERS)}]")
    p.add_argument("--gateway-src", metavar="DIR",
                   help="run the gateway from this src/ directory (as bench.run --gateway-src) instead of the "
                        "installed package")
    opts = p.parse_args(argv)
    opts.concurrency_list = [int(x) for x in opts.concurrency.split(",") if x.strip()]
    opts.servers_list = tuple(x.strip() for x in opts.servers.split(",") if x.strip())
    if not opts.servers_list or opts.servers_list[0] != "uvicorn" or set(opts.servers_list) - set(KNOWN):
        p.error(f"--servers: uvicorn first, then any of {', '.join(KNOWN[1:])}")
    if not opts.concurrency_list or min(opts.concurrency_list) < 1 or opts.requests < 1 or opts.repeat < 1:
        p.error("--concurrency needs positive integers, --requests and --repeat at least 1")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(msg: str) -> None:
        print(msg, flush=True)

    if opts.wait_quiet > 0:
        wait_quiet(opts.wait_quiet, say)
    versions = {}
    for pkg in ("uvicorn", "uvloop", "httptools", "granian", "starlette", "aiohttp"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    if versions["granian"] == "not installed" and any(x.startswith("granian") for x in opts.servers_list):
        say("granian is not installed: pip install granian")
        return 2
    with tempfile.TemporaryDirectory(prefix="rg-servers-") as tmp:
        tmpdir = Path(tmp)
        up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens",
                               str(opts.tokens), "--tokens-per-chunk", "1"], tmpdir, clean_env(), capture_stdout=True)
        servers: dict[str, tuple[Proc, str, dict]] = {}
        try:
            up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
            wait_http(f"{up_url}/health", up)
            post_json(f"{up_url}/_bench/config", {"tokens": opts.tokens, "delay_ms": 0.0, "tokens_per_chunk": 1})
            for name in opts.servers_list:
                proc, url = start_server(name, up_url, tmpdir, opts.gateway_src)
                pids = {"main": proc.pid, "worker": serving_pid(proc)}
                servers[name] = (proc, url, pids)
                say(f"{name}: pid {proc.pid} (serving pid {pids['worker']}) at {url}; loaded: "
                    + (", ".join(loaded_modules(pids["worker"])) or "?"))

            async def everything() -> dict:
                runs: dict[tuple[str, int], list[dict]] = {}
                for r in range(opts.repeat):
                    order = opts.servers_list if r % 2 == 0 else opts.servers_list[::-1]
                    for c in opts.concurrency_list:
                        for name in order:
                            _proc, url, pids = servers[name]
                            busy = wait_quiet(opts.quiet_per_run, lambda _msg: None) if opts.quiet_per_run else None
                            row = await one_case(name, url, pids, c, opts, up.pid)
                            row["busy_before_pct"] = busy
                            runs.setdefault((name, c), []).append(row)
                            say(f"  round {r + 1}/{opts.repeat}  {name:<8} C={c:<3} "
                                f"{row['ok']:>4}/{row['requests']} ok "
                                f"{row['requests_per_s']:7.1f} req/s  TTFT p50 {row['ttft_p50_ms']:6.2f} ms  "
                                f"CPU {row['server_cpu_ms_per_response']:.2f} ms/resp  "
                                f"RSS {row['serving_peak_rss_mib']:.1f} MiB  "
                                f"other {row.get('unattributed_cpu_pct', float('nan')):.0f}%"
                                + (f"  [{row['first_error']}]" if row["first_error"] else ""))
                return runs

            try:
                import uvloop
                runs = uvloop.run(everything())
            except ImportError:
                runs = asyncio.run(everything())
            loaded = {name: loaded_modules(pids["worker"]) for name, (_p, _u, pids) in servers.items()}
        finally:
            for proc, _url, _pids in servers.values():
                proc.stop()
            up.stop()
    rows = []
    for c in opts.concurrency_list:
        for name in opts.servers_list:
            all_runs = runs[(name, c)]
            clean = [x for x in all_runs if (x.get("unattributed_cpu_pct") or 0.0) <= CLEAN_OTHER_PCT]
            ordered = sorted(clean or all_runs, key=lambda x: x["requests_per_s"])
            row = dict(ordered[(len(ordered) - 1) // 2])
            row["runs_requests_per_s"] = [x["requests_per_s"] for x in all_runs]
            row["clean_runs"] = len(clean)
            rows.append(row)
    say("")
    say(f"Gateway under {' vs '.join(opts.servers_list)}, 1 worker each, no store, store: false; {opts.tokens} tokens per response, "
        f"one token per upstream chunk, no delay; {opts.requests} requests per run after a warm-up round. Median of "
        f"{opts.repeat} interleaved runs by req/s (among runs with other CPU ≤ {CLEAN_OTHER_PCT:g}% when there are "
        "any). " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ". Loaded in the serving process: "
        + "; ".join(f"{k}: {', '.join(v) or '?'}" for k, v in loaded.items()) + ". Gateway from "
        + (opts.gateway_src or "the installed package") + ".")
    say("")
    say(table(rows))
    say("")
    say(comparison(rows, runs))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
