"""A fake Chat Completions replica with a prefix cache, for bench/pools.py: time to first token grows with the
prompt tokens this replica has not seen, as vLLM's and SGLang's automatic prefix caching make it.

    python -m bench.prefix_upstream --port 8001 --prefill-us 20 --cache-tokens 200000

Each request's messages are hashed as a chain (message i's hash covers messages 0..i); the longest chain this
replica holds costs nothing to prefill, every other token `--prefill-us` microseconds (tokens: characters / 4),
one prefill at a time (a replica's prefill throughput is bounded: misses queue behind each other).
After prefill the request's chain, and the answer it generates (the next turn sends it back), are cached;
the cache holds at most `--cache-tokens` tokens, the least recently used chains evicted first. It then
streams `--tokens` tokens, `--token-ms` apart, in vLLM's chunk shape, with usage.

    GET /_bench/stats   {"requests", "prompt_tokens", "cached_tokens"}  (hit rate = cached / prompt)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from collections import OrderedDict

from aiohttp import web


class PrefixCache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.chains: OrderedDict[bytes, int] = OrderedDict()  # chain hash → tokens of its last message
        self.size = 0

    def lookup(self, hashes: list[bytes], tokens: list[int]) -> int:
        """Tokens of the longest cached prefix (its chains touched)."""
        cached = 0
        for chain, count in zip(hashes, tokens, strict=True):
            if chain not in self.chains:
                break
            self.chains.move_to_end(chain)
            cached += count
        return cached

    def add(self, hashes: list[bytes], tokens: list[int]) -> None:
        for chain, count in zip(hashes, tokens, strict=True):
            if chain in self.chains:
                self.chains.move_to_end(chain)
                continue
            self.chains[chain] = count
            self.size += count
        while self.size > self.capacity and self.chains:
            _, count = self.chains.popitem(last=False)
            self.size -= count


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def chain(messages: list[dict]) -> tuple[list[bytes], list[int]]:
    hashes, tokens = [], []
    running = hashlib.blake2b(digest_size=16)
    for message in messages:
        text = text_of(message)
        running.update(f"{message.get('role')}\0{text}\0".encode())
        hashes.append(running.copy().digest())
        tokens.append(max(1, len(text) // 4))
    return hashes, tokens


def make_app(opts: argparse.Namespace) -> web.Application:
    cache = PrefixCache(opts.cache_tokens)
    stats = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0}
    words = [f" w{i}" for i in range(opts.tokens)]
    prefill = asyncio.Lock()

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body.get("messages") or []
        hashes, tokens = chain(messages)
        cached = cache.lookup(hashes, tokens)
        total = sum(tokens)
        stats["requests"] += 1
        stats["prompt_tokens"] += total
        stats["cached_tokens"] += cached
        async with prefill:  # one prefill at a time: a replica's prefill throughput is what it is
            await asyncio.sleep((total - cached) * opts.prefill_us / 1e6)
        answer = "".join(words)
        full = messages + [{"role": "assistant", "content": answer}]
        cache.add(*chain(full))
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        rid = f"chatcmpl-{stats['requests']}"
        created = int(time.time())

        def frame(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
            chunk = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": body.get("model"),
                     "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                chunk["usage"] = usage
            return b"data: " + json.dumps(chunk).encode() + b"\n\n"

        await response.write(frame({"role": "assistant", "content": ""}))
        for word in words:
            await response.write(frame({"content": word}))
            if opts.token_ms:
                await asyncio.sleep(opts.token_ms / 1000)
        await response.write(frame({}, "stop"))
        await response.write(frame({}, usage={"prompt_tokens": total, "completion_tokens": opts.tokens,
                                              "total_tokens": total + opts.tokens,
                                              "prompt_tokens_details": {"cached_tokens": cached}}))
        await response.write(b"data: [DONE]\n\n")
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model", "created": 0,
                                                             "owned_by": "bench"}]})

    async def get_stats(request: web.Request) -> web.Response:
        return web.json_response(stats)

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/_bench/stats", get_stats)
    return app


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.prefix_upstream", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--prefill-us", type=float, default=20.0, help="microseconds per prompt token not cached [20]")
    p.add_argument("--cache-tokens", type=int, default=200_000, help="tokens the prefix cache holds [200000]")
    p.add_argument("--tokens", type=int, default=8, help="tokens in each answer [8]")
    p.add_argument("--token-ms", type=float, default=5.0, help="milliseconds between answer tokens [5]")
    opts = p.parse_args()
    web.run_app(make_app(opts), host="127.0.0.1", port=opts.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
