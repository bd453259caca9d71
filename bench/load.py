"""An asyncio load generator: N streamed requests at concurrency C, against the gateway or the upstream directly.

    python -m bench.load --url http://127.0.0.1:8080 --mode gateway --requests 256 --concurrency 16 --pid 1234
    python -m bench.load --url http://127.0.0.1:8001 --mode upstream --requests 256 --concurrency 16

Per request it records the time to the first body byte (TTFB), to the first text delta (TTFT: the first
`response.output_text.delta` event from the gateway, the first non-empty `delta.content` from the upstream),
the total time, the number of SSE events (frames, `[DONE]` included) and the body bytes. It reads the stream
as raw bytes and parses no JSON, so that the client costs as little CPU as possible.

It reports requests/s, events/s, p50/p90/p99 of TTFB, TTFT and total, and, given `--pid`, that process's
(and its children's) CPU seconds per request, from /proc/<pid>/stat utime+stime, and peak RSS (VmHWM in
/proc/<pid>/status, reset before the run through /proc/<pid>/clear_refs when the kernel allows it).

Every run is bounded: at most N requests, no new request after `--duration` seconds, and a hard deadline
after which what is still in flight is cancelled and counted as an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from dataclasses import dataclass, field

import aiohttp
import orjson

GATEWAY_PATH = "/v1/responses"
UPSTREAM_PATH = "/v1/chat/completions"
PROMPT = "Write a long story about a fox."
TEXT_DELTA = b"response.output_text.delta"
COMPLETED = b"response.completed"
CONTENT = b'"content":"'
DONE = b"data: [DONE]\n\n"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def request_body(mode: str, store: bool = False, model: str = "bench-model", prompt: str = PROMPT,
                 tools: bool = False) -> bytes:
    """The request each load case sends; the upstream body is what the gateway itself sends upstream."""
    tool = {"type": "function", "name": "get_weather", "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    if mode == "gateway":
        body: dict = {"model": model, "input": prompt, "stream": True, "store": store}
        if tools:
            body["tools"] = [tool]
    else:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
                "stream_options": {"include_usage": True}}
        if tools:
            fn = {k: v for k, v in tool.items() if k != "type"}
            body["tools"] = [{"type": "function", "function": fn}]
            body["tool_choice"] = "auto"
    return orjson.dumps(body)


@dataclass
class Sample:
    start: float = float("nan")    # time.perf_counter() (CLOCK_MONOTONIC on Linux) when the request was sent
    ttfb: float = float("nan")     # seconds from sending the request to the first body bytes
    ttft: float = float("nan")     # ... to the first text delta
    total: float = float("nan")    # ... to the end of the body
    events: int = 0
    bytes: int = 0
    reads: int = 0                 # body reads (≈ the sender's writes, when the client keeps up)
    ok: bool = False
    error: str | None = None


def _first_text_gateway(buf: bytes) -> bool:
    return TEXT_DELTA in buf


def _first_text_upstream(buf: bytes) -> bool:
    """A chunk with a non-empty `"content":"…"` (the role chunk carries `"content":""`)."""
    start = 0
    while True:
        i = buf.find(CONTENT, start)
        if i < 0 or i + len(CONTENT) >= len(buf):
            return False
        if buf[i + len(CONTENT)] != 0x22:  # not the closing quote of an empty string
            return True
        start = i + 1


async def one(session: aiohttp.ClientSession, url: str, body: bytes, gateway: bool,
              gaps: list[float] | None = None) -> Sample:
    """One streamed request. With `gaps`, the time between consecutive reads that carry text tokens is
    appended to it (the inter-token gap as the client sees it; only meaningful when the upstream paces)."""
    s = Sample()
    t0 = s.start = time.perf_counter()
    first_text = _first_text_gateway if gateway else _first_text_upstream
    last_token = 0.0
    try:
        async with session.post(url, data=body, headers={"content-type": "application/json"}) as resp:
            if resp.status != 200:
                s.error = f"HTTP {resp.status}: {(await resp.read())[:200]!r}"
                return s
            head = b""      # the stream until the first text delta (a few kB), searched as a whole
            carry = b""     # the last bytes of the previous read, for markers split between reads
            last = 0        # last byte of the previous read, for "\n\n" split between reads
            found = False
            completed = not gateway
            async for data in resp.content.iter_any():
                now = time.perf_counter()
                if not s.bytes:
                    s.ttfb = now - t0
                s.bytes += len(data)
                s.reads += 1
                s.events += data.count(b"\n\n") + (last == 10 and data[0] == 10)
                last = data[-1]
                if not found:
                    head += data
                    if first_text(head):
                        found = True
                        s.ttft = now - t0
                        head = b""
                        last_token = now
                    elif len(head) > 4 * 1024 * 1024:
                        found = True  # give up looking; TTFT stays NaN
                elif gaps is not None and first_text(data):
                    gaps.append(now - last_token)
                    last_token = now
                window = carry + data[:64] if len(data) > 64 else carry + data
                if not completed:
                    completed = COMPLETED in window or COMPLETED in data
                carry = window[-64:] if len(data) <= 64 else data[-64:]
            s.total = time.perf_counter() - t0
            if not carry.endswith(DONE):
                s.error = "stream did not end with [DONE]"
            elif not completed:
                s.error = "no response.completed event"
            else:
                s.ok = True
    except asyncio.CancelledError:
        s.error = "cancelled at the deadline"
        raise
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        s.error = f"{exc.__class__.__name__}: {exc}"
    return s


@dataclass
class RunResult:
    samples: list[Sample] = field(default_factory=list)
    wall: float = 0.0
    client_cpu: float = 0.0
    gaps: list[float] | None = None  # inter-token gaps (s) of all streams, when tracked


def new_session(concurrency: int, hard: float) -> aiohttp.ClientSession:
    """`concurrency` 0: no connection limit (open-loop arrivals)."""
    # idle connections go before the server drops them (uvicorn: after 5 s), so none fails on reuse
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, force_close=False,
                                     keepalive_timeout=3.0)
    timeout = aiohttp.ClientTimeout(total=hard, sock_connect=10)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False,
                                 cookie_jar=aiohttp.DummyCookieJar())


def endpoint(base_url: str, mode: str) -> str:
    return base_url.rstrip("/") + (GATEWAY_PATH if mode == "gateway" else UPSTREAM_PATH)


async def run_load(base_url: str, mode: str, requests: int, concurrency: int, body: bytes,
                   duration: float = 60.0, hard_deadline: float | None = None,
                   session: aiohttp.ClientSession | None = None, stagger: float = 0.0,
                   gaps: bool = False, first_delays: list[float] | None = None) -> RunResult:
    """Stream `requests` requests, `concurrency` at a time (closed loop: each worker sends its next request
    when the previous one ends). No new request starts after `duration` seconds; requests still running at
    `hard_deadline` (default duration + 30 s) are cancelled and counted as failed. With `session`, its
    (warm) connections are used; else a session of its own is opened and closed. `stagger` seconds: the
    workers' first requests are spread evenly over it instead of all leaving at once; `first_delays` gives
    each worker's own delay instead (a share of a load spread over several processes)."""
    gateway = mode == "gateway"
    url = endpoint(base_url, mode)
    hard = (duration + 30.0) if hard_deadline is None else hard_deadline
    if session is None:
        async with new_session(concurrency, hard) as own:
            return await run_load(base_url, mode, requests, concurrency, body, duration, hard, own, stagger, gaps,
                                  first_delays)
    result = RunResult(gaps=[] if gaps else None)
    remaining = requests
    start = time.perf_counter()
    cpu0 = _self_cpu()
    workers = min(concurrency, requests)

    async def worker(i: int) -> None:
        nonlocal remaining
        if first_delays:
            await asyncio.sleep(first_delays[i % len(first_delays)])
        elif stagger:
            await asyncio.sleep(stagger * i / workers)
        while remaining > 0 and time.perf_counter() - start < duration:
            remaining -= 1
            index = len(result.samples)
            result.samples.append(Sample(error="cancelled at the deadline"))  # until it finishes
            result.samples[index] = await one(session, url, body, gateway, result.gaps)

    tasks = [asyncio.create_task(worker(i)) for i in range(workers)]
    return await _finish(result, tasks, start, cpu0, hard)


async def run_open(base_url: str, mode: str, rate: float, duration: float, body: bytes,
                   session: aiohttp.ClientSession, hard_deadline: float | None = None, seed: int = 1,
                   gaps: bool = True) -> RunResult:
    """Open loop: requests arrive as a Poisson process of `rate` per second for `duration` seconds, each
    sent when it arrives whatever is still running (as independent users do), so a slow server queues
    work instead of slowing the arrivals. The same `seed` gives the same arrival times."""
    import random

    gateway = mode == "gateway"
    url = endpoint(base_url, mode)
    hard = (duration + 30.0) if hard_deadline is None else hard_deadline
    rng = random.Random(seed)
    result = RunResult(gaps=[] if gaps else None)
    start = time.perf_counter()
    cpu0 = _self_cpu()
    tasks = []

    async def request(index: int) -> None:
        result.samples[index] = await one(session, url, body, gateway, result.gaps)

    due = rng.expovariate(rate)
    while due < duration:
        delay = start + due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        result.samples.append(Sample(error="cancelled at the deadline"))
        tasks.append(asyncio.create_task(request(len(result.samples) - 1)))
        due += rng.expovariate(rate)
    return await _finish(result, tasks, start, cpu0, hard)


async def _finish(result: RunResult, tasks: list, start: float, cpu0: float, hard: float) -> RunResult:
    if not tasks:
        result.wall = time.perf_counter() - start
        result.client_cpu = _self_cpu() - cpu0
        return result
    _done, pending = await asyncio.wait(tasks, timeout=max(0.1, hard - (time.perf_counter() - start)))
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5)
    result.wall = time.perf_counter() - start
    result.client_cpu = _self_cpu() - cpu0
    return result


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- process statistics from /proc ---------------------------------------------------------------------------

def tree(pid: int) -> list[int]:
    """pid and all its descendants (uvicorn with --workers N forks its workers)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


def threads(pid: int) -> list[str]:
    """The thread ids of a process (as /proc names them); none when it is gone."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def cpu_seconds(pids: list[int]) -> float:
    """CPU time of the processes (all their threads), summed: nanosecond run time from
    /proc/<pid>/task/*/schedstat when the kernel has it, else utime + stime (10 ms ticks) from /proc/<pid>/stat.
    (A thread that exits between two readings takes its schedstat time with it; the gateway's threads —
    the event loop and aiosqlite's — live as long as the process.)"""
    total = 0.0
    for pid in pids:
        tids = threads(pid)
        if not tids:
            continue  # gone
        if not os.path.exists(f"/proc/{pid}/task/{tids[0]}/schedstat"):
            total += _stat_cpu(pid)
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                    total += int(fh.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile
    return total


def _stat_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return 0.0
    fields_ = stat[stat.rfind(b")") + 2:].split()
    return (int(fields_[11]) + int(fields_[12])) / CLK_TCK  # utime, stime (fields 14 and 15 of stat)


def peak_rss_mib(pids: list[int]) -> float:
    """VmHWM (peak resident set) summed over the processes, in MiB."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total / 1024


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except OSError:
            continue
    return total / (1024 * 1024)


def reset_peak_rss(pids: list[int]) -> bool:
    """Restart VmHWM from the current RSS (Linux ≥ 4.0, needs permission on the process)."""
    ok = True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            ok = False
    return ok


# -- summary ---------------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    vals = sorted(v for v in values if v == v)
    if not vals:
        return float("nan")
    k = max(0, min(len(vals) - 1, int(-(-q * len(vals) // 100)) - 1))
    return vals[k]


def summarize(result: RunResult, gateway_cpu: float | None = None, upstream_cpu: float | None = None,
              peak_rss: float | None = None) -> dict:
    ok = [s for s in result.samples if s.ok]
    wall = result.wall or float("nan")
    out = {
        "requests": len(result.samples),
        "ok": len(ok),
        "errors": len(result.samples) - len(ok),
        "first_error": next((s.error for s in result.samples if not s.ok), None),
        "wall_s": wall,
        "requests_per_s": len(ok) / wall,
        "events": sum(s.events for s in ok),
        "events_per_s": sum(s.events for s in ok) / wall,
        "events_per_request": (sum(s.events for s in ok) / len(ok)) if ok else 0,
        "bytes": sum(s.bytes for s in ok),
        "reads_per_request": (sum(s.reads for s in ok) / len(ok)) if ok else 0,
        "client_cpu_pct": 100.0 * result.client_cpu / wall,
    }
    for name in ("ttfb", "ttft", "total"):
        values = [getattr(s, name) for s in ok]
        for q in (50, 90, 99):
            out[f"{name}_p{q}_ms"] = percentile(values, q) * 1000.0
    if result.gaps is not None:
        for q in (50, 99, 99.9):
            out[f"gap_p{q:g}_ms"] = percentile(result.gaps, q) * 1000.0
    if gateway_cpu is not None:
        out["gateway_cpu_s"] = gateway_cpu
        out["gateway_cpu_ms_per_request"] = 1000.0 * gateway_cpu / len(ok) if ok else float("nan")
        out["gateway_cpu_pct"] = 100.0 * gateway_cpu / wall
        out["gateway_cpu_us_per_event"] = 1e6 * gateway_cpu / out["events"] if out["events"] else float("nan")
    if upstream_cpu is not None:
        out["upstream_cpu_pct"] = 100.0 * upstream_cpu / wall
        out["upstream_cpu_ms_per_request"] = 1000.0 * upstream_cpu / len(ok) if ok else float("nan")
    if peak_rss is not None:
        out["gateway_peak_rss_mib"] = peak_rss
    return out


async def measured(base_url: str, mode: str, requests: int, concurrency: int, body: bytes, *,
                   duration: float = 60.0, pid: int | None = None, upstream_pid: int | None = None,
                   warmup: int | None = None, keep_samples: bool = False, stagger: float = 0.0,
                   gaps: bool = False, open_rate: float | None = None, fresh: bool = False) -> dict:
    """One load case: warm-up (one round at this concurrency, not recorded), then the measured run with the
    CPU of the gateway (`pid` and its children) and of the upstream read around it.

    `open_rate` (requests/s): the recorded run is open-loop Poisson arrivals for `duration` s instead of
    `requests` closed-loop requests. `fresh`: no warm-up, and the recorded requests open new connections
    (a burst of new users). `gaps`: record inter-token gaps."""
    limit = 0 if open_rate else concurrency
    async with new_session(limit, duration + 30.0) as session:
        warm = 0 if fresh else (concurrency if warmup is None else warmup)
        if warm:  # also opens the connections the recorded run uses
            await run_load(base_url, mode, warm, concurrency, body, duration=duration, session=session,
                           stagger=stagger)

        async def recorded() -> RunResult:
            if open_rate:
                return await run_open(base_url, mode, open_rate, duration, body, session, gaps=gaps)
            return await run_load(base_url, mode, requests, concurrency, body, duration=duration,
                                  session=session, stagger=stagger, gaps=gaps)

        return await measure_around(recorded, pid, upstream_pid, keep_samples)


async def measure_around(recorded, pid: int | None, upstream_pid: int | None, keep_samples: bool,
                         client_pids: list[int] | None = None) -> dict:
    """Run `recorded()` (a coroutine giving a RunResult) with the CPU of the gateway (`pid` and its children),
    of the upstream (`upstream_pid` and its children: a multi-process upstream's siblings) and of the whole
    machine read around it. `client_pids`: load-generator processes whose CPU is the client's (a
    multi-process load), instead of this process's own."""
    pids = tree(pid) if pid else []
    up_pids = tree(upstream_pid) if upstream_pid else []
    if pids:
        reset_peak_rss(pids)
    g0 = cpu_seconds(pids) if pids else None
    u0 = cpu_seconds(up_pids) if up_pids else None
    c0 = cpu_seconds(client_pids) if client_pids else None
    m0 = machine_busy_seconds()
    result = await recorded()
    m1 = machine_busy_seconds()
    g1 = cpu_seconds(pids) if pids else None
    u1 = cpu_seconds(up_pids) if up_pids else None
    if c0 is not None:
        result.client_cpu = cpu_seconds(client_pids) - c0 + result.client_cpu
    summary = summarize(result,
                        gateway_cpu=None if g0 is None else g1 - g0,
                        upstream_cpu=None if u0 is None else u1 - u0,
                        peak_rss=peak_rss_mib(pids) if pids else None)
    if m0 is not None and m1 is not None and result.wall:
        busy = 100.0 * (m1 - m0) / result.wall
        ours = result.client_cpu + (g1 - g0 if pids else 0.0) + (u1 - u0 if up_pids else 0.0)
        summary["machine_busy_pct"] = busy
        # CPU nobody here accounts for: other processes on the machine, and kernel work (softirq) not charged
        # to a process. Large values mean the run shared the machine and its figures are low.
        summary["unattributed_cpu_pct"] = busy - 100.0 * ours / result.wall
    if keep_samples:
        summary["samples"] = result.samples
    return summary


def machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine spent not idle, all cores summed (/proc/stat)."""
    try:
        with open("/proc/stat") as fh:
            values = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


def _fmt(summary: dict) -> str:
    lines = [f"requests {summary['ok']}/{summary['requests']} ok in {summary['wall_s']:.2f} s: "
             f"{summary['requests_per_s']:.1f} req/s, {summary['events_per_s']:.0f} events/s "
             f"({summary['events_per_request']:.0f} events/request)"]
    for name in ("ttfb", "ttft", "total"):
        lines.append(f"{name:5s} p50 {summary[f'{name}_p50_ms']:.2f} ms  p90 {summary[f'{name}_p90_ms']:.2f} ms  "
                     f"p99 {summary[f'{name}_p99_ms']:.2f} ms")
    if "gateway_cpu_ms_per_request" in summary:
        lines.append(f"process CPU {summary['gateway_cpu_ms_per_request']:.2f} ms/request "
                     f"({summary['gateway_cpu_us_per_event']:.1f} µs/event, {summary['gateway_cpu_pct']:.0f}% of a "
                     f"core), peak RSS {summary['gateway_peak_rss_mib']:.1f} MiB")
    lines.append(f"load generator CPU {summary['client_cpu_pct']:.0f}% of a core")
    if summary["first_error"]:
        lines.append(f"first error: {summary['first_error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="base URL of the gateway or upstream (no /v1)")
    p.add_argument("--mode", choices=("gateway", "upstream"), default="gateway")
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--store", action="store_true", help="gateway: send store: true (default store: false)")
    p.add_argument("--tools", action="store_true", help="offer a function tool in the request")
    p.add_argument("--duration", type=float, default=60.0, help="no new request after this many seconds [60]")
    p.add_argument("--warmup", type=int, default=None, help="unrecorded requests first [= concurrency]")
    p.add_argument("--pid", type=int, help="process to read CPU time and peak RSS of (with its children)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args(argv)
    body = request_body(args.mode, store=args.store, tools=args.tools)

    async def go() -> dict:
        return await measured(args.url, args.mode, args.requests, args.concurrency, body,
                              duration=args.duration, pid=args.pid, warmup=args.warmup)

    try:
        import uvloop
        summary = uvloop.run(go())
    except ImportError:
        summary = asyncio.run(go())
    print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() if args.json else _fmt(summary))


if __name__ == "__main__":
    main()
