"""Pools of replicas (issue 33): what session affinity buys over round robin and least-loaded, with replicas
that cache prompt prefixes as vLLM and SGLang do (bench/prefix_upstream.py), and what pool routing costs.

    python -m bench.pools              # 4 replicas, 64 concurrent sessions of 20 turns, each policy
    python -m bench.pools --quick      # a smoke run (tests/benchmarks/test_bench_pools.py)

Each session is a `previous_response_id` chain, Codex-like: every turn sends `--instructions-tokens` of
instructions and adds about `--turn-tokens` tokens of new input to the history the gateway sends (the store
holds it). Each replica prefills the prompt tokens it has not cached
at `--prefill-us` µs a token, within a cache of `--cache-tokens` tokens, evicting the least recently used.
Per policy (fresh replicas each): time to first token at the client (the first `output_text.delta`), p50
and p99; the prefix-cache hit rate (cached prompt tokens over all prompt tokens, from the replicas); and the
load imbalance (the busiest replica's requests over the mean). Then the gateway's CPU seconds per response
for the affinity pool against the same sessions on one plain route (no pool): what routing adds.

Targets (docs/routing.md, "Pools"): affinity ≥ 90 % prefix hits and TTFT p50 ≤ 0.3 × round robin's;
imbalance ≤ 1.5; routing's CPU per response ≤ 2 % over the plain route.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .run import Proc, clean_env, free_port, get_json, wait_http

POLICIES = ("round_robin", "least_loaded", "affinity")
RESPONSE_ID = re.compile(rb'"id":"(resp_[0-9a-f]+)"')


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pinned(argv: list[str], core: int | None) -> list[str]:
    """`taskset -c core` in front, where there is taskset and more than one core."""
    if core is None or shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        return argv
    return ["taskset", "-c", str(core), *argv]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_replicas(n: int, log_dir: Path, opts: argparse.Namespace, tag: str) -> list[tuple[Proc, str]]:
    out = []
    for i in range(n):
        port = free_port()
        proc = Proc(f"replica-{tag}-{i}", pinned([sys.executable, "-m", "bench.prefix_upstream", "--port", str(port),
                                                  "--prefill-us", str(opts.prefill_us),
                                                  "--cache-tokens", str(opts.cache_tokens)], 0),
                    log_dir, clean_env(opts.src))
        wait_http(f"http://127.0.0.1:{port}/_bench/stats", proc)
        out.append((proc, f"http://127.0.0.1:{port}/v1"))
    return out


def start_gateway(urls: list[str], balance: str | None, log_dir: Path, opts: argparse.Namespace,
                  tag: str) -> tuple[Proc, int]:
    port = free_port()
    config = log_dir / f"routes-{tag}.toml"
    if balance is None:
        routes = f'[[routes]]\nmatch = "*"\nbase_url = "{urls[0]}"\n'
    else:
        routes = f'[[routes]]\nmatch = "*"\nbalance = "{balance}"\nbase_url = {json.dumps(urls)}\n'
    config.write_text(routes)
    proc = Proc(f"gateway-{tag}", pinned([sys.executable, "-m", "responses_gateway", "serve", "--config", str(config),
                                          "--port", str(port), "--db", str(log_dir / f"store-{tag}.db"),
                                          "--log-level", "warning"], 1),
                log_dir, clean_env(opts.src))
    wait_http(f"http://127.0.0.1:{port}/health", proc)
    return proc, port


async def session(client: httpx.AsyncClient, port: int, n: int, opts: argparse.Namespace,
                  ttfts: list[float]) -> None:
    previous = None
    filler = (f"session {n} " + "lorem ipsum dolor sit amet " * 1000)
    for turn in range(opts.turns):
        text = f"turn {turn}: " + filler[turn * 7 % 50: turn * 7 % 50 + opts.turn_tokens * 4]
        body = {"model": "m", "input": text, "stream": True, "previous_response_id": previous,
                "instructions": opts.instructions}
        started = time.perf_counter()
        first = None
        this = None
        head = b""
        async with client.stream("POST", f"http://127.0.0.1:{port}/v1/responses", json=body) as answer:
            async for data in answer.aiter_raw():  # raw bytes: the client must stay far lighter than the gateway
                if first is None:
                    head += data
                    if this is None and (found := RESPONSE_ID.search(head)):
                        this = found.group(1).decode()  # response.created's own id
                    if b'"response.output_text.delta"' in head:
                        first = time.perf_counter() - started
        previous = this
        ttfts.append(first if first is not None else float("nan"))


async def drive(port: int, opts: argparse.Namespace) -> list[float]:
    ttfts: list[float] = []
    limits = httpx.Limits(max_connections=opts.sessions + 8, max_keepalive_connections=opts.sessions + 8)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(session(client, port, n, opts, ttfts) for n in range(opts.sessions)))
    return ttfts


def run_policy(balance: str | None, log_dir: Path, opts: argparse.Namespace) -> dict:
    tag = balance or "single"
    replicas = start_replicas(1 if balance is None else opts.replicas, log_dir, opts, tag)
    gateway, port = start_gateway([url for _, url in replicas], balance, log_dir, opts, tag)
    try:
        cpu0 = cpu_seconds(gateway.pid)
        ttfts = asyncio.run(drive(port, opts))
        cpu = cpu_seconds(gateway.pid) - cpu0
        stats = [get_json(url.replace("/v1", "/_bench/stats")) for _, url in replicas]
    finally:
        gateway.stop()
        for proc, _ in replicas:
            proc.stop()
    requests = [s["requests"] for s in stats]
    prompt = sum(s["prompt_tokens"] for s in stats)
    return {"policy": tag, "responses": len(ttfts), "p50": statistics.median(ttfts), "p99": pct(ttfts, 0.99),
            "hit": sum(s["cached_tokens"] for s in stats) / prompt if prompt else 0.0,
            "imbalance": max(requests) / statistics.mean(requests), "cpu_ms": cpu / len(ttfts) * 1000}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.pools", description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--turns", type=int, default=20)
    p.add_argument("--turn-tokens", type=int, default=500, help="new input tokens per turn [500]")
    p.add_argument("--instructions-tokens", type=int, default=4000,
                   help="tokens of instructions every turn sends, as coding agents do [4000]")
    p.add_argument("--prefill-us", type=float, default=100.0, help="µs to prefill a prompt token not cached (about 10k tokens a second, a modest GPU) [100]")
    p.add_argument("--cache-tokens", type=int, default=400_000, help="tokens each replica caches [400000]")
    p.add_argument("--quick", action="store_true", help="8 sessions of 4 turns")
    p.add_argument("--src", help="run this source tree's gateway (put first on PYTHONPATH)")
    opts = p.parse_args(argv)
    opts.instructions = "You are a careful coding agent. " * (opts.instructions_tokens * 4 // 32)
    if opts.quick:
        opts.sessions, opts.turns = 8, 4
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-pools-") as tmp:
        for balance in (*POLICIES, None):
            rows.append(run_policy(balance, Path(tmp), opts))
            print(f"  {rows[-1]['policy']}: done", file=sys.stderr, flush=True)
    print(f"{opts.replicas} replicas, {opts.sessions} concurrent sessions of {opts.turns} turns "
          f"(+{opts.turn_tokens} tokens a turn), prefill {opts.prefill_us:g} µs a token, cache "
          f"{opts.cache_tokens} tokens a replica\n")
    print("| policy | responses | TTFT p50 ms | TTFT p99 ms | prefix hits | imbalance (max/mean) | gateway CPU ms/response |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['responses']} | {r['p50'] * 1000:.1f} | {r['p99'] * 1000:.1f} | {r['hit']:.1%} | "
              f"{r['imbalance']:.2f} | {r['cpu_ms']:.2f} |")
    by = {r["policy"]: r for r in rows}
    affinity, rr, single = by["affinity"], by["round_robin"], by["single"]
    checks = [
        ("affinity prefix hits ≥ 90 %", affinity["hit"] >= 0.9, f"{affinity['hit']:.1%}"),
        ("affinity TTFT p50 ≤ 0.3 × round robin's", affinity["p50"] <= 0.3 * rr["p50"],
         f"{affinity['p50'] / rr['p50']:.2f}×"),
        ("affinity imbalance ≤ 1.5", affinity["imbalance"] <= 1.5, f"{affinity['imbalance']:.2f}"),
        ("gateway CPU per response, affinity pool vs one plain route ≤ +2 % (loads differ: the pool's own cost "
         "per step is `bench.instructions --pool`)", affinity["cpu_ms"] <= 1.02 * single["cpu_ms"],
         f"{affinity['cpu_ms'] / single['cpu_ms'] - 1:+.1%}"),
    ]
    print()
    for name, ok, got in checks:
        print(f"{'PASS' if ok else 'MISS'} {name}: {got}")


if __name__ == "__main__":
    main()
