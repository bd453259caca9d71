"""How the gateway's cost grows with the size of the work, one request at a time.

Each case sends the same small streamed request, grown along one axis, `--growth-requests` times in a row
(C = 1, after a few unrecorded ones), and reports the gateway's CPU per request and the latency to the first
text delta and to the end, next to a baseline request of the same shape without the growth:

  * chain    — `previous_response_id` at the end of a chain of `--chain-depth` stored turns (built first,
               through the gateway); also the store's own resolution of that chain, timed in this process
               on the gateway's SQLite file, with the number of SQL statements it took;
  * input    — one input message of `--big-input-kib` KiB;
  * tools    — `--tools` function tools offered;
  * mcp list — an MCP server whose `--mcp-tools`-item tool list is already in the input (an
               `mcp_list_tools` item, as a chained turn has it): the gateway offers every listed tool to
               the model without contacting the server;
  * big body — one stored, streamed request of `--big-body-mb` MB (input items of 2 kB) while `/health` is
               probed every 5 ms: how long the gateway's event loop is kept from answering anyone else
               (the probes' latency, against probes with nothing else running).

The fake upstream answers with a few tokens and no delay, so what grows is the gateway's own work: reading
and validating the request, resolving history, building the upstream request, and the upstream reading it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import aiohttp
import orjson

from . import load

PROMPT = "Say hello."


def _body(**fields) -> bytes:
    body = {"model": "bench-model", "input": PROMPT, "stream": True, "store": False}
    body.update(fields)
    return orjson.dumps(body)


def _tools(n: int) -> list[dict]:
    return [{"type": "function", "name": f"tool_{i:03d}", "description": f"Tool number {i}: does thing {i}.",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
                            "required": ["city"]}} for i in range(n)]


def _mcp_body(n: int) -> bytes:
    listed = [{"name": f"mcp_tool_{i:03d}", "description": f"MCP tool {i}.", "annotations": None,
               "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}} for i in range(n)]
    items = [{"type": "mcp_list_tools", "id": "mcpl_bench", "server_label": "bench", "tools": listed},
             {"role": "user", "content": PROMPT}]
    tool = {"type": "mcp", "server_label": "bench", "server_url": "https://mcp.example.com/mcp",
            "require_approval": "never"}
    return _body(input=items, tools=[tool])


async def build_chain(gw_url: str, depth: int) -> tuple[str, str]:
    """`depth` stored turns, each chained to the one before; returns (first id, last id)."""
    url = gw_url + load.GATEWAY_PATH
    first = prev = None
    async with aiohttp.ClientSession() as session:
        for _ in range(depth):
            body = {"model": "bench-model", "input": PROMPT, "store": True}
            if prev:
                body["previous_response_id"] = prev
            async with session.post(url, data=orjson.dumps(body),
                                    headers={"content-type": "application/json"}) as resp:
                obj = orjson.loads(await resp.read())
                if resp.status != 200:
                    raise RuntimeError(f"building the chain failed: HTTP {resp.status}: {obj}")
            prev = obj["id"]
            first = first or prev
    return first, prev


async def chain_resolution(db_path: Path, response_id: str, repeat: int) -> dict:
    """The store's `history()` of the chain, timed here on the gateway's own SQLite file; and how many SQL
    statements one resolution runs."""
    from responses_gateway.store import open_store

    store = open_store(str(db_path))
    await store.open()
    statements = 0
    engine = store.engine
    for name in ("fetchone", "fetchall"):
        real = getattr(engine, name)

        async def counted(sql, args, _real=real):
            nonlocal statements
            statements += 1
            return await _real(sql, args)
        setattr(engine, name, counted)
    try:
        items = await store.history(response_id, "")
        statements_one = statements
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            await store.history(response_id, "")
            times.append(time.perf_counter() - t0)
    finally:
        await store.close()
    return {"items": len(items or ()), "statements": statements_one,
            "p50_ms": load.percentile(times, 50) * 1000, "p99_ms": load.percentile(times, 99) * 1000}


async def run_growth(opts, gw_url: str, gw_pid: int, up_pid: int, db_path: Path | None, post_config, say) -> dict:
    post_config(tokens=8, delay_ms=0.0, tokens_per_chunk=1)
    n = opts.growth_requests

    async def case(name: str, body: bytes, what: str) -> dict:
        summary = await load.measured(gw_url, "gateway", n, 1, body, duration=60.0, pid=gw_pid,
                                      upstream_pid=up_pid, warmup=2)
        say(f"  growth {name:<22} {summary['ok']}/{summary['requests']} ok  "
            f"CPU {summary['gateway_cpu_ms_per_request']:.2f} ms/req  TTFT p50 {summary['ttft_p50_ms']:.2f} ms  "
            f"total p50 {summary['total_p50_ms']:.2f} ms  body {len(body) / 1024:.0f} KiB"
            + (f"  [{summary['first_error']}]" if summary["first_error"] else ""))
        return {"case": name, "what": what, "request_kib": len(body) / 1024, **summary}

    rows = [await case("baseline", _body(), "the same request, nothing grown")]
    out: dict = {"rows": rows}
    if opts.chain_depth > 1 and db_path is not None:
        t0 = time.perf_counter()
        first, last = await build_chain(gw_url, opts.chain_depth)
        say(f"  growth: built a {opts.chain_depth}-turn chain in {time.perf_counter() - t0:.1f} s")
        rows.append(await case("chain depth 1", _body(previous_response_id=first),
                               "previous_response_id of a 1-turn chain"))
        rows.append(await case(f"chain depth {opts.chain_depth}", _body(previous_response_id=last),
                               f"previous_response_id of a {opts.chain_depth}-turn chain"))
        out["chain"] = {"depth": opts.chain_depth, **await chain_resolution(db_path, last, max(5, n))}
        say(f"  growth: store history() of the {opts.chain_depth}-turn chain: {out['chain']['items']} items in "
            f"{out['chain']['statements']} SQL statement(s), p50 {out['chain']['p50_ms']:.2f} ms")
    if opts.big_input_kib > 0:
        text = ("lorem ipsum dolor sit amet " * (opts.big_input_kib * 1024 // 27 + 1))[:opts.big_input_kib * 1024]
        rows.append(await case(f"input {opts.big_input_kib} KiB", _body(input=text),
                               f"one input message of {opts.big_input_kib} KiB"))
    if opts.tools > 0:
        rows.append(await case(f"{opts.tools} tools", _body(tools=_tools(opts.tools)),
                               f"{opts.tools} function tools offered"))
    if opts.mcp_tools > 0:
        rows.append(await case(f"MCP list of {opts.mcp_tools}", _mcp_body(opts.mcp_tools),
                               f"an MCP server with {opts.mcp_tools} listed tools (list already in the input)"))
    if opts.big_body_mb > 0:
        out["big_body"] = await big_body_probe(gw_url, opts.big_body_mb)
        b = out["big_body"]
        say(f"  growth: /health while a {b['mb']:.1f} MB body is handled ({b['status']} in {b['request_s']:.2f} s): "
            f"p50 {b['p50_ms']:.1f} / p99 {b['p99_ms']:.1f} / max {b['max_ms']:.1f} ms over {b['probes']} probes; "
            f"alone max {b['alone_max_ms']:.1f} ms")
    return out


# The sender of the big body, in a process of its own: encoding and writing 30 MB in the harness's process
# would stall its event loop, and the probes' latency would measure that instead of the gateway.
_SENDER = """
import sys, time, orjson, httpx
url, n = sys.argv[1], int(sys.argv[2])
items = [{"role": "user", "content": "y" * 2000 + f"{i:08d}"} for i in range(n)]
raw = orjson.dumps({"model": "bench-model", "input": items, "stream": True, "store": True})
del items
print(len(raw), flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
resp = httpx.post(url, content=raw, headers={"content-type": "application/json"}, timeout=300)
print(resp.status_code, time.perf_counter() - t0, flush=True)
"""


async def big_body_probe(gw_url: str, mb: int) -> dict:
    """/health probed every 5 ms, first alone, then while one `mb` MB body is sent (by another process),
    stored and answered."""
    n = mb * 1_000_000 // 2030
    sender = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SENDER, gw_url + load.GATEWAY_PATH, str(n),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert sender.stdin is not None and sender.stdout is not None
    size = int(await sender.stdout.readline())
    async with aiohttp.ClientSession() as session:
        async def probe() -> float:
            t0 = time.perf_counter()
            async with session.get(gw_url + "/health") as resp:
                await resp.read()
            await asyncio.sleep(0.005)
            return time.perf_counter() - t0 - 0.005

        alone = [await probe() for _ in range(200)]
        sender.stdin.write(b"go\n")
        await sender.stdin.drain()
        finished = asyncio.ensure_future(sender.stdout.readline())
        during = []
        while not finished.done():
            during.append(await probe())
        status, request_s = (await finished).split()
        await sender.wait()
    return {"mb": size / 1e6, "items": n, "status": int(status), "request_s": float(request_s),
            "probes": len(during), "p50_ms": load.percentile(during, 50) * 1000,
            "p99_ms": load.percentile(during, 99) * 1000, "max_ms": max(during) * 1000,
            "alone_max_ms": max(alone) * 1000}


def markdown(g: dict) -> str:
    rows = g["rows"]
    base = rows[0]
    lines = ["| case | request KiB | ok | gw CPU ms/req | added CPU ms | TTFT p50 ms | total p50 / p99 ms | "
             "added total p50 ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['request_kib']:.1f} | {r['ok']}/{r['requests']} | "
            f"{r['gateway_cpu_ms_per_request']:.2f} | "
            f"{r['gateway_cpu_ms_per_request'] - base['gateway_cpu_ms_per_request']:+.2f} | "
            f"{r['ttft_p50_ms']:.2f} | {r['total_p50_ms']:.2f} / {r['total_p99_ms']:.2f} | "
            f"{r['total_p50_ms'] - base['total_p50_ms']:+.2f} |")
    if "chain" in g:
        c = g["chain"]
        lines += ["", f"Chain resolution in the store (SQLite, timed in the harness's process): depth {c['depth']}, "
                  f"{c['items']} items, {c['statements']} SQL statement(s), p50 {c['p50_ms']:.2f} ms, "
                  f"p99 {c['p99_ms']:.2f} ms."]
    if "big_body" in g:
        b = g["big_body"]
        lines += ["", f"`/health` probed every 5 ms while one {b['mb']:.1f} MB body ({b['items']} input items, "
                  f"streamed, stored) was handled (HTTP {b['status']} in {b['request_s']:.2f} s): p50 "
                  f"{b['p50_ms']:.1f} ms, p99 {b['p99_ms']:.1f} ms, max {b['max_ms']:.1f} ms over {b['probes']} "
                  f"probes; alone, max {b['alone_max_ms']:.1f} ms."]
    return "\n".join(lines)
