"""WebSocket mode next to SSE, in one run: events/s and the gateway's CPU per response and per event.

    python -m bench.websocket                      # C = 1 and 16, 400 responses each, 256 tokens, 3 repeats
    python -m bench.websocket --quick              # a smoke run of a few seconds

It starts the fake upstream and a gateway exactly as `bench.run` does (pinned layout where there are two
CPUs: the gateway alone on the first), then, for each concurrency C, streams the same responses through the
gateway both ways, alternating, `--repeat` times, and reports the median run of each:

* `sse`: C concurrent `POST /v1/responses` with `stream: true` on keep-alive connections (bench/load.py);
* `websocket`: C WebSocket connections to `GET /v1/responses`, each sending its share of `response.create`
  messages one after another (as Codex does) and reading one event per message until the terminal one.

The client reads raw frames and parses no JSON on either side. SSE counts `data: [DONE]` as an event (one
more per response than WebSocket sends); µs per event is therefore slightly flattering to SSE.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench import layout, load
from bench.run import median_of, upstream_and_gateway

TERMINAL = (b'{"type":"response.completed"', b'{"type":"response.incomplete"', b'{"type":"response.failed"',
            b'{"type":"error"')


async def one_ws(ws: aiohttp.ClientWebSocketResponse, message: str) -> load.Sample:
    """One response over an open connection: send `message`, read frames up to the terminal event."""
    s = load.Sample()
    t0 = s.start = time.perf_counter()
    try:
        await ws.send_str(message)
        while True:
            frame = await ws.receive()
            if frame.type is not aiohttp.WSMsgType.TEXT:
                s.error = f"connection ended: {frame.type.name} {frame.data!r}"[:200]
                return s
            now = time.perf_counter()
            data = frame.data.encode() if isinstance(frame.data, str) else frame.data
            if not s.events:
                s.ttfb = now - t0
            s.events += 1
            s.reads += 1
            s.bytes += len(data)
            if s.ttft != s.ttft and load.TEXT_DELTA in data[:40]:  # NaN until the first text delta
                s.ttft = now - t0
            if data.startswith(TERMINAL):
                s.total = now - t0
                s.ok = data.startswith(TERMINAL[0])
                if not s.ok:
                    s.error = data[:200].decode(errors="replace")
                return s
    except (aiohttp.ClientError, OSError) as exc:
        s.error = f"{exc.__class__.__name__}: {exc}"
        return s


async def run_ws(url: str, requests: int, concurrency: int, message: str, warmup: bool = True) -> load.RunResult:
    """`requests` responses over `concurrency` connections, each connection's one after another."""
    result = load.RunResult()
    async with aiohttp.ClientSession() as session:
        sockets = [await session.ws_connect(url, max_msg_size=0, autoping=True) for _ in range(concurrency)]
        try:
            if warmup:  # one unrecorded response per connection
                await asyncio.gather(*(one_ws(ws, message) for ws in sockets))
            remaining = requests
            start = time.perf_counter()
            cpu0 = load._self_cpu()

            async def worker(ws) -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    result.samples.append(await one_ws(ws, message))

            await asyncio.gather(*(worker(ws) for ws in sockets))
            result.wall = time.perf_counter() - start
            result.client_cpu = load._self_cpu() - cpu0
        finally:
            for ws in sockets:
                await ws.close()
    return result


async def compare(gw_url: str, gw_pid: int, up_pid: int, opts, say) -> list[dict]:
    body = load.request_body("gateway", store=False)
    message = orjson.dumps({"type": "response.create", **orjson.loads(body)}).decode()
    ws_url = gw_url.replace("http://", "ws://", 1) + load.GATEWAY_PATH
    rows = []
    for c in opts.concurrency:
        runs: dict[str, list[dict]] = {"sse": [], "websocket": []}
        for _ in range(opts.repeat):
            runs["sse"].append(await load.measured(gw_url, "gateway", opts.requests, c, body, pid=gw_pid,
                                                   upstream_pid=up_pid))

            async def recorded(c=c) -> load.RunResult:
                return await run_ws(ws_url, opts.requests, c, message)

            runs["websocket"].append(await load.measure_around(recorded, gw_pid, up_pid, keep_samples=False))
        for transport, summaries in runs.items():
            middle = median_of([s["events_per_s"] for s in summaries])
            summary = next(s for s in summaries if s["events_per_s"] == middle)
            row = {"transport": transport, "concurrency": c, "tokens": opts.tokens, **summary}
            rows.append(row)
            say(f"  {transport:<9} C={c:<3} {summary['ok']:>5}/{summary['requests']:<5} ok "
                f"{summary['events_per_s']:9.0f} ev/s {summary['requests_per_s']:8.1f} resp/s  "
                f"CPU {summary['gateway_cpu_ms_per_request']:.2f} ms/resp "
                f"{summary['gateway_cpu_us_per_event']:.1f} µs/event  "
                f"TTFT p50 {summary['ttft_p50_ms']:.2f} ms"
                + (f"  [{summary['first_error']}]" if summary["first_error"] else ""))
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| transport | C | responses ok | events/s | responses/s | gateway CPU ms/response | "
             "gateway CPU µs/event | TTFT p50 ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['transport']} | {r['concurrency']} | {r['ok']}/{r['requests']} | "
                     f"{r['events_per_s']:.0f} | {r['requests_per_s']:.1f} | {r['gateway_cpu_ms_per_request']:.2f} | "
                     f"{r['gateway_cpu_us_per_event']:.2f} | {r['ttft_p50_ms']:.2f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.websocket", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=400, help="responses per run and transport (400)")
    p.add_argument("--concurrency", default="1,16", help="comma-separated C values (1,16)")
    p.add_argument("--tokens", type=int, default=256, help="tokens per response (256)")
    p.add_argument("--repeat", type=int, default=3, help="runs per case; the median is reported (3)")
    p.add_argument("--quick", action="store_true", help="--requests 20 --concurrency 1,4 --tokens 32 --repeat 1")
    p.add_argument("--out", type=Path, help="also write the JSON rows here")
    if p.parse_args(argv).quick:  # the quick values are defaults: explicit options still win
        p.set_defaults(requests=20, concurrency="1,4", tokens=32, repeat=1)
    opts = p.parse_args(argv)
    opts.concurrency = [int(c) for c in str(opts.concurrency).split(",")]
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)

    def say(msg: str) -> None:
        print(msg, flush=True)

    with tempfile.TemporaryDirectory(prefix="rg-bench-ws-") as tmp:
        tmpdir = Path(tmp)
        try:
            with upstream_and_gateway(tmpdir, ["--tokens", str(opts.tokens)], []) as (up, _, gw, gw_url):
                place = layout.make(layout.default_names()[0])
                layout.apply(place, load.tree(gw.pid), [up.pid, os.getpid()])
                say(f"bench.websocket: gateway pid {gw.pid}, upstream pid {up.pid}; layout {place.describe()}")
                rows = asyncio.run(compare(gw_url, gw.pid, up.pid, opts, say))
        finally:
            layout.pin([os.getpid()], frozenset(layout.available()))
    say("")
    say(markdown(rows))
    if opts.out:
        opts.out.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    failed = sum(r["errors"] for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
