"""aiohttp against httpx for reading the upstream stream: the gateway's upstream side alone, in one process.

    python -m bench.compare_clients                  # C = 1 and 64, 3 interleaved rounds (about a minute)
    python -m bench.compare_clients --requests 200   # shorter

Starts `python -m bench.fake_upstream` (256 tokens, one token per chunk, no delay) and, in this process on
uvloop, streams N responses at concurrency C with

  * aiohttp: `session.post(...)`, `resp.content.iter_any()` — a session set up like the gateway's
    (`TCPConnector(limit=0, keepalive_timeout=60)`, auto-decompression on);
  * httpx:   `client.stream("POST", ...)`, `aiter_bytes()` — an `AsyncClient` with the same pooling
    (no connection limit, every connection kept alive, HTTP/1.1, `trust_env=False`);
  * raw:     no library — a bare asyncio protocol that writes the request and de-chunks the body, one read
    per `data_received`, connections kept alive: the floor any client library sits on.

Each read goes through `responses_gateway.sse.SSEDecoder` and each frame but `[DONE]` through `orjson.loads`:
what the gateway does with the upstream body before it builds events. It measures this process's CPU time
(`time.process_time()`, all threads) and the wall time of the recorded requests, after an unrecorded warm-up
round at the same C on the same client. Each (client, C) runs `--repeat` times, interleaved (the order of the
two clients alternates between rounds), each after a short wait (`--quiet-per-run`, bounded) for the machine
to be idle; the run with the median CPU per response is reported, and the ratios are also given paired by round
(the median of the per-round httpx/aiohttp ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
import orjson

from responses_gateway.sse import SSEDecoder

from . import load
from .run import CLEAN_OTHER_PCT, ROOT, Proc, clean_env, fmt_num, median_of, wait_http, wait_quiet

CLIENTS = ("aiohttp", "httpx", "raw")
HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}


@dataclass
class Run:
    ok: int = 0
    errors: list[str] = field(default_factory=list)
    frames: int = 0
    reads: int = 0
    wall: float = 0.0
    cpu: float = 0.0


async def _consume(chunks, run: Run) -> None:
    """What the gateway does per upstream read: SSE-decode it and JSON-decode every frame."""
    decoder = SSEDecoder()
    done = False
    frames = reads = 0
    async for data in chunks:
        reads += 1
        for _event, payload in decoder.feed(data):
            frames += 1
            if payload == b"[DONE]":
                done = True
            else:
                orjson.loads(payload)
    for _event, payload in decoder.flush():
        frames += 1
        done = done or payload == b"[DONE]"
    if not done:
        raise RuntimeError("stream did not end with [DONE]")
    run.frames += frames
    run.reads += reads


class AiohttpClient:
    name = "aiohttp"

    def __init__(self) -> None:
        # As the gateway's HTTPUpstream.session.
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=600),
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60, ttl_dns_cache=300),
            auto_decompress=True)

    async def one(self, url: str, body: bytes, run: Run) -> None:
        async with self.session.post(url, data=body, headers=HEADERS) as resp:
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
            await _consume(resp.content.iter_any(), run)

    async def close(self) -> None:
        await self.session.close()


class HttpxClient:
    name = "httpx"

    def __init__(self) -> None:
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=30, read=600, write=None, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=60),
            trust_env=False)

    async def one(self, url: str, body: bytes, run: Run) -> None:
        async with self.client.stream("POST", url, content=body, headers=HEADERS) as resp:
            if resp.status_code != 200:
                raise RuntimeError(f"HTTP {resp.status_code}")
            await _consume(resp.aiter_bytes(), run)

    async def close(self) -> None:
        await self.client.aclose()


class _RawConnection(asyncio.Protocol):
    """One kept-alive connection speaking just enough HTTP/1.1 for the fake upstream: a request out, a
    status line and headers, a chunked body handed on one read at a time (as `iter_any()` does)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.ready: list[bytes] = []
        self.head = False
        self.done = False
        self.lost = False
        self.waiter: asyncio.Future | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.lost = self.done = True
        self._wake()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.head:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if self.buf[9:12] != b"200":
                raise RuntimeError(f"HTTP {bytes(self.buf[9:12]).decode()}")
            del self.buf[:end + 4]
            self.head = True
        decoded = []
        buf = self.buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                break
            size = int(buf[:eol], 16)
            if len(buf) < eol + 4 + size:
                break
            if size == 0:
                del buf[:eol + 4]
                self.done = True
                break
            decoded.append(bytes(buf[eol + 2:eol + 2 + size]))
            del buf[:eol + 4 + size]
        if decoded:
            self.ready.append(b"".join(decoded))
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def stream(self, request: bytes):
        self.head = self.done = False
        self.transport.write(request)
        loop = asyncio.get_running_loop()
        while True:
            if self.ready:
                chunks, self.ready = self.ready, []
                for chunk in chunks:
                    yield chunk
                continue
            if self.done:
                if self.lost:
                    raise RuntimeError("connection lost")
                return
            self.waiter = loop.create_future()
            await self.waiter


class RawClient:
    """The floor: no HTTP library at all, a bare asyncio protocol (above) on the same event loop; what any
    client library adds is what it costs above this."""

    name = "raw"

    def __init__(self) -> None:
        self.idle: list[_RawConnection] = []

    async def one(self, url: str, body: bytes, run: Run) -> None:
        rest = url.removeprefix("http://")
        hostport, path = rest.split("/", 1)
        host, port = hostport.split(":")
        if self.idle:
            conn = self.idle.pop()
        else:
            _t, conn = await asyncio.get_running_loop().create_connection(_RawConnection, host, int(port))
        request = (f"POST /{path} HTTP/1.1\r\nhost: {hostport}\r\ncontent-type: application/json\r\n"
                   f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n").encode() + body
        await _consume(conn.stream(request), run)
        if not conn.lost:
            self.idle.append(conn)

    async def close(self) -> None:
        for conn in self.idle:
            conn.transport.close()
        self.idle = []


def make_client(name: str):
    return {"aiohttp": AiohttpClient, "httpx": HttpxClient, "raw": RawClient}[name]()


async def stream_many(client, url: str, body: bytes, requests: int, concurrency: int, duration: float) -> Run:
    """`requests` streams, `concurrency` at a time; none started after `duration` s; cancelled 30 s later."""
    run = Run()
    remaining = requests
    start = time.perf_counter()

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() - start < duration:
            remaining -= 1
            try:
                await client.one(url, body, run)
                run.ok += 1
            except (aiohttp.ClientError, httpx.HTTPError, OSError, RuntimeError, ValueError) as exc:
                run.errors.append(f"{exc.__class__.__name__}: {exc}")

    tasks = [asyncio.create_task(worker()) for _ in range(min(concurrency, requests))]
    _done, pending = await asyncio.wait(tasks, timeout=duration + 30.0)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5)
        run.errors.append(f"{len(pending)} worker(s) cancelled at the deadline")
    return run


async def one_case(name: str, url: str, body: bytes, requests: int, concurrency: int, duration: float,
                   upstream_pid: int) -> dict:
    client = make_client(name)
    try:
        await stream_many(client, url, body, concurrency, concurrency, duration)  # warm-up: opens the pool
        gc.collect()
        u0 = load.cpu_seconds([upstream_pid])
        m0 = load.machine_busy_seconds()
        c0, t0 = time.process_time(), time.perf_counter()
        run = await stream_many(client, url, body, requests, concurrency, duration)
        run.cpu, run.wall = time.process_time() - c0, time.perf_counter() - t0
        m1 = load.machine_busy_seconds()
        u1 = load.cpu_seconds([upstream_pid])
    finally:
        await client.close()
    ok = run.ok or float("nan")
    out = {"client": name, "concurrency": concurrency, "requests": requests, "ok": run.ok,
           "errors": len(run.errors), "first_error": run.errors[0] if run.errors else None,
           "wall_s": run.wall, "responses_per_s": run.ok / run.wall if run.wall else float("nan"),
           "cpu_s": run.cpu, "cpu_ms_per_response": 1000.0 * run.cpu / ok,
           "cpu_us_per_frame": 1e6 * run.cpu / run.frames if run.frames else float("nan"),
           "cpu_pct": 100.0 * run.cpu / run.wall if run.wall else float("nan"),
           "frames_per_response": run.frames / ok, "reads_per_response": run.reads / ok,
           "upstream_cpu_pct": 100.0 * (u1 - u0) / run.wall if run.wall else float("nan")}
    if m0 is not None and m1 is not None and run.wall:
        out["other_cpu_pct"] = 100.0 * ((m1 - m0) - run.cpu - (u1 - u0)) / run.wall
    return out


def table(rows: list[dict]) -> str:
    head = ("| client | C | ok/req | CPU ms/response (runs) | CPU µs/frame | wall s | responses/s | "
            "client CPU % | reads/response | upstream CPU % | other CPU % | clean runs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        runs = ", ".join(fmt_num(x, ".3f") for x in r["runs_cpu_ms_per_response"])
        lines.append(
            f"| {r['client']} | {r['concurrency']} | {r['ok']}/{r['requests']} | "
            f"**{fmt_num(r['cpu_ms_per_response'], '.3f')}** ({runs}) | {fmt_num(r['cpu_us_per_frame'], '.2f')} | "
            f"{fmt_num(r['wall_s'], '.2f')} | {fmt_num(r['responses_per_s'], '.0f')} | {fmt_num(r['cpu_pct'], '.0f')} | "
            f"{fmt_num(r['reads_per_response'], '.1f')} | {fmt_num(r['upstream_cpu_pct'], '.0f')} | "
            f"{fmt_num(r.get('other_cpu_pct'), '.0f')} | {r['clean_runs']}/{len(r['runs_cpu_ms_per_response'])} |")
    return "\n".join(lines)


def comparison(rows: list[dict], runs: dict) -> str:
    """Per C: httpx and the raw floor against aiohttp from the medians in the table, and paired by round (the
    clients ran back to back in each round, so a round's ratio is less exposed to load that came and went)."""
    lines = []
    others = [o for o in CLIENTS[1:] if any(r["client"] == o for r in rows)]
    for c, other in ((c, o) for c in sorted({r["concurrency"] for r in rows}) for o in others):
        a = next((r for r in rows if r["client"] == "aiohttp" and r["concurrency"] == c), None)
        h = next((r for r in rows if r["client"] == other and r["concurrency"] == c), None)
        if not a or not h or not a["cpu_ms_per_response"] or not h["cpu_ms_per_response"]:
            continue
        pairs = list(zip(runs[("aiohttp", c)], runs[(other, c)], strict=True))
        cpu = median_of([y["cpu_ms_per_response"] / x["cpu_ms_per_response"] for x, y in pairs
                       if x["cpu_ms_per_response"]])
        wall = median_of([y["wall_s"] / x["wall_s"] for x, y in pairs if x["wall_s"]])
        lines.append(f"- C={c}: {other} uses {h['cpu_ms_per_response'] / a['cpu_ms_per_response']:.2f}× the CPU of "
                     f"aiohttp per response ({h['cpu_ms_per_response']:.3f} vs {a['cpu_ms_per_response']:.3f} ms; "
                     f"{1000 * (h['cpu_ms_per_response'] - a['cpu_ms_per_response']) / h['frames_per_response']:+.2f}"
                     f" µs per frame), wall {h['wall_s'] / a['wall_s']:.2f}×; paired by round (median of "
                     f"{len(pairs)}): CPU {cpu:.2f}×, wall {wall:.2f}×")
    return "\n".join(lines)


# -- instructions: the same reads counted by callgrind (a measure a busy machine does not move) ---------------

def one_client(name: str, url: str, requests: int, concurrency: int) -> None:
    """`--one`: a warm-up round, then `requests` streams with one client, in this process; nothing printed
    but errors. Run twice under callgrind with two request counts, the difference is per response."""
    body = load.request_body("upstream")

    async def go() -> None:
        client = make_client(name)
        try:
            await stream_many(client, url, body, concurrency, concurrency, 600)
            run = await stream_many(client, url, body, requests, concurrency, 600)
        finally:
            await client.close()
        if run.errors or run.ok != requests:
            raise SystemExit(f"{name}: {run.ok} of {requests} ok, {run.errors[:1]}")

    try:
        import uvloop
        uvloop.run(go())
    except ImportError:
        asyncio.run(go())


def instructions(opts, up_url: str, tmp: Path, say) -> list[dict]:
    """Each client's instructions per response: two runs under callgrind (all of the process, from start to
    exit) with `--requests` and 3 × `--requests` streams; the difference over the extra streams cancels the
    start-up and the warm-up."""
    from .instructions import total_instructions

    url = f"{up_url}{load.UPSTREAM_PATH}"
    rows = []
    for c in opts.concurrency_list:
        for name in opts.clients_list:
            totals = []
            for n in (opts.requests, 3 * opts.requests):
                out = tmp / f"callgrind.{name}.{c}.{n}"
                done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                                       "-m", "bench.compare_clients", "--one", name, "--url", url, "--requests", str(n),
                                       "--concurrency", str(c)], cwd=ROOT, env=clean_env(), capture_output=True,
                                      text=True, timeout=1800)
                if done.returncode != 0:
                    raise RuntimeError(f"{name} under callgrind: {done.stderr[-2000:]}")
                totals.append(total_instructions(out))
            per = (totals[1] - totals[0]) / (2 * opts.requests)
            rows.append({"client": name, "concurrency": c, "instructions_per_response": per,
                         "instructions_per_token": per / opts.tokens})
            say(f"  {name:<7} C={c:<3} {per / 1e6:.3f} M instructions per response, {per / opts.tokens / 1e3:.1f} k per token")
    return rows


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m bench.compare_clients", description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=1000, help="recorded responses per run [1000]")
    p.add_argument("--concurrency", default="1,64", help="comma-separated concurrency levels [1,64]")
    p.add_argument("--tokens", type=int, default=256, help="content tokens per response [256]")
    p.add_argument("--delay-ms", type=float, default=0.0,
                   help="the upstream's per-token delay: above 0 each token arrives as a read of its own, as from "
                        "a real model (CPU per response is then the figure; wall is the pace) [0]")
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs of each case; median reported [3]")
    p.add_argument("--duration", type=float, default=20.0, help="no new request after this many s in a run [20]")
    p.add_argument("--wait-quiet", type=float, default=10.0, metavar="SECONDS",
                   help="wait up to this long for other load on the machine to stop first [10]")
    p.add_argument("--quiet-per-run", type=float, default=4.0, metavar="SECONDS",
                   help="and up to this long before each run, 0 not to [4]")
    p.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated, aiohttp first [{','.join(CLIENTS)}]")
    p.add_argument("--instructions", action="store_true",
                   help="count instructions per response under callgrind (needs valgrind) instead of timing")
    p.add_argument("--one", metavar="CLIENT", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    opts.clients_list = tuple(x.strip() for x in opts.clients.split(",") if x.strip())
    if not opts.clients_list or opts.clients_list[0] != "aiohttp" or set(opts.clients_list) - set(CLIENTS):
        p.error(f"--clients: aiohttp first, then any of {', '.join(CLIENTS[1:])}")
    opts.concurrency_list = [int(x) for x in opts.concurrency.split(",") if x.strip()]
    if not opts.concurrency_list or min(opts.concurrency_list) < 1 or opts.requests < 1 or opts.repeat < 1:
        p.error("--concurrency needs positive integers, --requests and --repeat at least 1")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.one:
        one_client(opts.one, opts.url, opts.requests, opts.concurrency_list[0])
        return 0

    def say(msg: str) -> None:
        print(msg, flush=True)

    if opts.wait_quiet > 0:
        wait_quiet(opts.wait_quiet, say)
    versions = {pkg: importlib.metadata.version(pkg) for pkg in ("aiohttp", "httpx", "httpcore", "h11", "uvloop")}
    with tempfile.TemporaryDirectory(prefix="rg-clients-") as tmp:
        up = Proc("upstream", [sys.executable, "-m", "bench.fake_upstream", "--port", "0", "--tokens",
                               str(opts.tokens), "--tokens-per-chunk", "1", "--delay-ms", str(opts.delay_ms)],
                  Path(tmp), clean_env(),
                  capture_stdout=True)
        try:
            up_url = up.first_line(timeout=20).split()[-2].removesuffix("/v1")
            wait_http(f"{up_url}/health", up)
            url = f"{up_url}{load.UPSTREAM_PATH}"
            body = load.request_body("upstream")  # what the gateway sends upstream
            say(f"upstream pid {up.pid} at {up_url}; {opts.requests} responses of {opts.tokens} tokens per run")
            if opts.instructions:
                rows = instructions(opts, up_url, Path(tmp), say)
                base = {r["concurrency"]: r["instructions_per_response"] for r in rows if r["client"] == "aiohttp"}
                say("")
                say("| client | C | M instructions per response | k per token | × aiohttp |")
                say("|---|---|---|---|---|")
                for r in rows:
                    say(f"| {r['client']} | {r['concurrency']} | {r['instructions_per_response'] / 1e6:.3f} | "
                        f"{r['instructions_per_token'] / 1e3:.1f} | "
                        f"{r['instructions_per_response'] / base[r['concurrency']]:.2f} |")
                return 0

            async def everything() -> dict:
                runs: dict[tuple[str, int], list[dict]] = {}
                for r in range(opts.repeat):
                    order = opts.clients_list if r % 2 == 0 else opts.clients_list[::-1]
                    for c in opts.concurrency_list:
                        for name in order:
                            busy = wait_quiet(opts.quiet_per_run, lambda _msg: None) if opts.quiet_per_run else None
                            row = await one_case(name, url, body, opts.requests, c, opts.duration, up.pid)
                            row["busy_before_pct"] = busy
                            runs.setdefault((name, c), []).append(row)
                            say(f"  round {r + 1}/{opts.repeat}  {name:<7} C={c:<3} {row['ok']:>5}/{row['requests']} "
                                f"ok  CPU {row['cpu_ms_per_response']:.3f} ms/response  wall {row['wall_s']:.2f} s  "
                                f"{row['reads_per_response']:.1f} reads/response  "
                                f"other {row.get('other_cpu_pct', float('nan')):.0f}%"
                                + (f"  [{row['first_error']}]" if row["first_error"] else ""))
                return runs

            try:
                import uvloop
                runs = uvloop.run(everything())
            except ImportError:
                runs = asyncio.run(everything())
        finally:
            up.stop()
    rows = []
    for c in opts.concurrency_list:
        for name in opts.clients_list:
            all_runs = runs[(name, c)]
            clean = [x for x in all_runs if (x.get("other_cpu_pct") or 0.0) <= CLEAN_OTHER_PCT]
            ordered = sorted(clean or all_runs, key=lambda x: x["cpu_ms_per_response"])
            row = dict(ordered[(len(ordered) - 1) // 2])
            row["runs_cpu_ms_per_response"] = [x["cpu_ms_per_response"] for x in all_runs]
            row["clean_runs"] = len(clean)
            rows.append(row)
    say("")
    say(f"Upstream read side only, one process on uvloop: {opts.tokens} tokens per response, one token per chunk, "
        + (f"{opts.delay_ms:g} ms per token, " if opts.delay_ms else "no delay, ") +
        f"SSEDecoder + orjson.loads per frame. Median of {opts.repeat} interleaved runs (by CPU per response; "
        f"among runs with other CPU ≤ {CLEAN_OTHER_PCT:g}% when there are any). "
        + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    say("")
    say(table(rows))
    say("")
    say(comparison(rows, runs))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
