"""A load generator of several processes, for machines where one load process would be the limit.

One aiohttp client on one event loop streams at most about as fast as one gateway worker serves, so
measuring `--workers N` needs the load spread over processes on cores of their own. `LoadPool` starts
N worker processes (`python -m bench.loadpool`, each on uvloop with bench.load's client) once, and runs
each case on all of them: the concurrency, the request count and the open-loop rate are split between
them, each process warms up its own connections, and then all start the recorded run together (the
parent sends "go" once every process is ready), so that the CPU readings taken around the recorded run
cover only it. The samples come back to the parent, which summarises them exactly as `load.measured`
does; the client's CPU is the workers' (from /proc) plus the parent's own.

The protocol is one JSON object per line on the workers' stdin and stdout: `{"op": "prepare", ...}` →
`{"ready": true}`, `{"op": "go"}` → `{"result": ...}`, `{"op": "exit"}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time

import orjson

from . import load

SAMPLE_FIELDS = ("start", "ttfb", "ttft", "total", "events", "bytes", "reads", "ok", "error")


def split(total: int, parts: int) -> list[int]:
    """`total` spread over `parts` as evenly as integers allow (the first ones get the remainder)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _nan_to_none(v):
    return None if isinstance(v, float) and v != v else v


def _none_to_nan(v):
    return float("nan") if v is None else v


class LoadPool:
    """`processes` load-generator processes, started once and reused by every case."""

    def __init__(self, processes: int, env: dict, cwd: str):
        self.size = processes
        self.env = env
        self.cwd = cwd
        self.procs: list[asyncio.subprocess.Process] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    async def start(self) -> None:
        for _ in range(self.size):
            self.procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench.loadpool", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd, limit=64 * 1024 * 1024))

    async def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ConnectionError, RuntimeError):
                p.stdin.write(b'{"op":"exit"}\n')
        for p in self.procs:
            try:
                await asyncio.wait_for(p.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                await p.wait()
        self.procs = []

    async def _ask(self, proc: asyncio.subprocess.Process, msg: dict, timeout: float) -> dict:
        proc.stdin.write(orjson.dumps(msg) + b"\n")
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"load process {proc.pid} exited (code {proc.returncode})")
        return orjson.loads(line)

    async def measured(self, base_url: str, mode: str, requests: int, concurrency: int, body: bytes, *,
                       duration: float = 60.0, pid: int | None = None, upstream_pid: int | None = None,
                       warmup: int | None = None, keep_samples: bool = False, stagger: float = 0.0,
                       gaps: bool = False, open_rate: float | None = None, fresh: bool = False) -> dict:
        """`load.measured`, spread over the pool (same arguments, same summary)."""
        n = self.size
        conc = split(concurrency, n)
        active = [i for i in range(n) if conc[i] > 0]
        reqs = split(requests, len(active))
        warm = 0 if fresh else (concurrency if warmup is None else warmup)
        warms = split(warm, len(active))
        hard = duration + 30.0
        jobs = []
        for k, i in enumerate(active):
            # The workers' first requests interleave across processes: worker j of process k is the
            # (j * processes + k)-th of the whole load's staggered starts.
            delays = [stagger * (j * len(active) + k) / concurrency for j in range(conc[i])] if stagger else None
            jobs.append((self.procs[i], {
                "op": "prepare", "base_url": base_url, "mode": mode, "requests": reqs[k], "concurrency": conc[i],
                "body": body.decode(), "duration": duration, "warmup": warms[k], "stagger": stagger,
                "first_delays": delays, "gaps": gaps, "fresh": fresh,
                "open_rate": open_rate * conc[i] / concurrency if open_rate else None, "seed": 1 + i}))
        await asyncio.gather(*(self._ask(p, msg, hard + 60) for p, msg in jobs))

        async def recorded() -> load.RunResult:
            cpu0 = time.process_time()
            answers = await asyncio.gather(*(self._ask(p, {"op": "go"}, hard + 30) for p, _ in jobs))
            out = load.RunResult(gaps=[] if gaps else None)
            starts, ends = [], []
            for a in answers:
                r = a["result"]
                out.samples += [load.Sample(**{k: _none_to_nan(v) if k in ("start", "ttfb", "ttft", "total") else v
                                               for k, v in zip(SAMPLE_FIELDS, row, strict=True)})
                                for row in r["samples"]]
                if out.gaps is not None:
                    out.gaps += r["gaps"] or []
                starts.append(r["t_start"])
                ends.append(r["t_end"])
            out.wall = max(ends) - min(starts)
            out.client_cpu = time.process_time() - cpu0
            return out

        return await load.measure_around(recorded, pid, upstream_pid, keep_samples, client_pids=self.pids)


# -- the worker process -------------------------------------------------------------------------------------

async def _serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = sys.stdout.buffer

    def say(obj: dict) -> None:
        out.write(orjson.dumps(obj) + b"\n")
        out.flush()

    while True:
        line = await reader.readline()
        if not line:
            return
        msg = orjson.loads(line)
        if msg["op"] == "exit":
            return
        if msg["op"] != "prepare":
            raise SystemExit(f"unexpected {msg!r}")
        body = msg["body"].encode()
        hard = msg["duration"] + 30.0
        limit = 0 if msg["open_rate"] else msg["concurrency"]
        async with load.new_session(limit, hard) as session:
            if msg["warmup"]:
                await load.run_load(msg["base_url"], msg["mode"], msg["warmup"], msg["concurrency"], body,
                                    duration=msg["duration"], session=session, stagger=msg["stagger"],
                                    first_delays=msg["first_delays"])
            say({"ready": True})
            go = await reader.readline()
            if not go:
                return
            t_start = time.perf_counter()
            if msg["open_rate"]:
                result = await load.run_open(msg["base_url"], msg["mode"], msg["open_rate"], msg["duration"], body,
                                             session, gaps=msg["gaps"], seed=msg["seed"])
            else:
                result = await load.run_load(msg["base_url"], msg["mode"], msg["requests"], msg["concurrency"],
                                             body, duration=msg["duration"], session=session,
                                             stagger=msg["stagger"], gaps=msg["gaps"],
                                             first_delays=msg["first_delays"])
            t_end = t_start + result.wall
        say({"result": {"samples": [[_nan_to_none(getattr(s, f)) for f in SAMPLE_FIELDS] for s in result.samples],
                        "gaps": result.gaps, "t_start": t_start, "t_end": t_end}})


def main() -> None:
    try:
        import uvloop
        uvloop.run(_serve())
    except ImportError:
        asyncio.run(_serve())
    os._exit(0)  # nothing to flush; do not wait for aiohttp's connector to linger


if __name__ == "__main__":
    main()
