"""What background mode costs: gateway CPU per response of a background stream next to a normal stream, and
the cost of 10 followers on one response next to one.

    python -m bench.background            # about a minute on 2 cores
    python -m bench.background --quick    # a smoke run of a few seconds

Starts `python -m bench.fake_upstream` (paced: `--delay-ms` per token, so followers attach mid-stream) and
`python -m responses_gateway serve` (SQLite store in a temp dir, no Redis: the single-process default) as
separate processes, then runs, interleaved `--repeat` times, at concurrency `--concurrency`:

  * stream      — POST stream:true, store:true (the normal path, stored like a background response is);
  * background  — POST background:true, stream:true (the job runs detached; the client follows its log);
  * 1 follower  — POST background:true, then one GET ?stream=true reading the log to the end;
  * N followers — the same with `--followers` (10) concurrent GET ?stream=true on each response.

CPU is the gateway process's own (user + system, from /proc), divided by the responses of the case; the
median over the repeats is reported. Prints a Markdown table and the two ratios the design promises
(background ≤ 1.10 × stream; N followers well below N × one follower); `--json PATH` also writes them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

import aiohttp
import orjson

from . import load
from .run import upstream_and_gateway

DONE = b"data: [DONE]\n\n"


async def _read(session: aiohttp.ClientSession, method: str, url: str, body: bytes | None = None) -> bytes:
    async with session.request(method, url, data=body, headers={"content-type": "application/json"}) as resp:
        data = await resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{method} {url}: {resp.status} {data[:300]!r}")
    return data


async def _one(session, gw: str, case: str, followers: int) -> None:
    body = {"model": "bench-model", "input": "Write a long story about a fox.", "store": True}
    if case == "stream":
        data = await _read(session, "POST", f"{gw}/v1/responses", orjson.dumps({**body, "stream": True}))
        assert data.endswith(DONE)
        return
    if case == "background":
        data = await _read(session, "POST", f"{gw}/v1/responses",
                           orjson.dumps({**body, "background": True, "stream": True}))
        assert data.endswith(DONE)
        return
    queued = orjson.loads(await _read(session, "POST", f"{gw}/v1/responses",
                                      orjson.dumps({**body, "background": True})))
    url = f"{gw}/v1/responses/{queued['id']}?stream=true"
    bodies = await asyncio.gather(*[_read(session, "GET", url) for _ in range(followers)])
    assert all(b.endswith(DONE) and b == bodies[0] for b in bodies)


async def run_case(gw: str, pid: int, case: str, requests: int, concurrency: int, followers: int) -> float:
    """Gateway CPU seconds per response for `requests` responses of `case`, `concurrency` at a time."""
    pids = load.tree(pid)
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:

        async def bounded() -> None:
            async with gate:
                await _one(session, gw, case, followers)

        cpu0 = load.cpu_seconds(pids)
        await asyncio.gather(*[bounded() for _ in range(requests)])
        cpu1 = load.cpu_seconds(pids)
    return (cpu1 - cpu0) / requests


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.background", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 8 requests, 32 tokens, 1 repeat")
    p.add_argument("--requests", type=int, default=64, help="responses per case [64]")
    p.add_argument("--concurrency", type=int, default=8, help="responses in flight [8]")
    p.add_argument("--tokens", type=int, default=256, help="content tokens per response [256]")
    p.add_argument("--delay-ms", type=float, default=2.0, help="upstream per-token delay [2]")
    p.add_argument("--followers", type=int, default=10, help="followers per response in the N-followers case [10]")
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs of each case; the median counts [3]")
    p.add_argument("--json", type=Path, help="also write the results here")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.requests, opts.tokens, opts.repeat, opts.concurrency = 8, 32, 1, 4
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    cases = ["stream", "background", "1 follower", f"{opts.followers} followers"]
    samples: dict[str, list[float]] = {c: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="rg-bench-bg-") as tmp:
        tmpdir = Path(tmp)
        with upstream_and_gateway(tmpdir, ["--tokens", str(opts.tokens), "--delay-ms", str(opts.delay_ms)],
                                  ["--max-background", str(max(64, opts.concurrency))]) as (_, _, gw, gw_url):

            async def everything() -> None:
                await run_case(gw_url, gw.pid, "stream", opts.concurrency, opts.concurrency, 1)  # warm up
                for _ in range(opts.repeat):
                    for case in cases:
                        followers = opts.followers if case.endswith("followers") else 1
                        kind = case if case in ("stream", "background") else "followers"
                        samples[case].append(await run_case(gw_url, gw.pid, kind, opts.requests,
                                                            opts.concurrency, followers))

            asyncio.run(everything())
    cpu = {case: statistics.median(values) for case, values in samples.items()}
    ratios = {
        "background / stream": cpu["background"] / cpu["stream"],
        f"{opts.followers} followers / 1 follower": cpu[cases[3]] / cpu["1 follower"],
    }
    lines = [f"gateway CPU per response ({opts.requests} responses × {opts.repeat}, C={opts.concurrency}, "
             f"{opts.tokens} tokens at {opts.delay_ms:g} ms/token)", "",
             "| case | CPU ms per response |", "|---|---|"]
    lines += [f"| {case} | {cpu[case] * 1000:.2f} |" for case in cases]
    lines += ["", "| ratio | value |", "|---|---|"]
    lines += [f"| {name} | {value:.2f} |" for name, value in ratios.items()]
    print("\n".join(lines))
    if opts.json:
        opts.json.write_bytes(orjson.dumps({"options": {k: str(v) for k, v in vars(opts).items()},
                                            "cpu_s_per_response": cpu, "ratios": ratios},
                                           option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
