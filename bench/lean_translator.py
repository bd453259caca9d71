"""A lean Responses → Chat Completions translator: the floor the gateway is compared with, not a product.

    python -m bench.lean_translator --upstream http://127.0.0.1:8001/v1 --port 8090 [--workers N]

Text only, no store, no validation, no tools, no limits, no deadlines: `POST /v1/responses` with `stream:
true` and a string `input` (or message items with string or input_text content) becomes one streamed
`POST /chat/completions`; every upstream read's chunks become `response.output_text.delta` events, written
with one write per read, between the lifecycle events a client needs (`response.created`, `in_progress`,
`output_item.added`, `content_part.added` … `output_text.done`, `content_part.done`, `output_item.done`,
`response.completed`) and a closing `data: [DONE]` as the gateway sends it. aiohttp for both sides, orjson,
uvloop: what a minimal hand-written translator on the same libraries costs per response and per token.
`--workers N` forks N processes that share the port (SO_REUSEPORT), as `serve --workers N` shares it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import time

import aiohttp
import orjson
from aiohttp import web

from .reuseport import fork_siblings, reap


def sse(kind: str, obj: dict) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def messages(inp) -> list[dict]:
    if isinstance(inp, str):
        return [{"role": "user", "content": inp}]
    out = []
    for item in inp or ():
        content = item.get("content")
        if not isinstance(content, str):
            content = "".join(part.get("text", "") for part in content or ())
        out.append({"role": item.get("role", "user"), "content": content})
    return out


class Translator:
    def __init__(self, upstream: str):
        self.url = upstream.rstrip("/") + "/chat/completions"
        self.session: aiohttp.ClientSession | None = None

    async def start(self, _app: web.Application) -> None:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60))

    async def stop(self, _app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def responses(self, request: web.Request) -> web.StreamResponse:
        req = orjson.loads(await request.read())
        rid = "resp_" + os.urandom(16).hex()
        mid = "msg_" + os.urandom(16).hex()
        model = req.get("model", "")
        body = orjson.dumps({"model": model, "messages": messages(req.get("input")), "stream": True,
                             "stream_options": {"include_usage": True}})
        async with self.session.post(self.url, data=body, headers={"content-type": "application/json"}) as up:
            if up.status != 200:
                return web.json_response({"error": {"message": f"upstream answered {up.status}",
                                                    "type": "server_error", "param": None, "code": None}},
                                         status=502)
            resp = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
            await resp.prepare(request)
            seq = 0
            response = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "in_progress",
                        "model": model, "output": [], "usage": None}
            head = []
            for kind in ("response.created", "response.in_progress"):
                head.append(sse(kind, {"type": kind, "sequence_number": seq, "response": response}))
                seq += 1
            item = {"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            head.append(sse("response.output_item.added", {"type": "response.output_item.added",
                                                           "sequence_number": seq, "output_index": 0, "item": item}))
            part = {"type": "output_text", "text": "", "annotations": []}
            head.append(sse("response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": seq + 1, "item_id": mid,
                "output_index": 0, "content_index": 0, "part": part}))
            seq += 2
            await resp.write(b"".join(head))
            text: list[str] = []
            usage = None
            buf = b""
            async for data in up.content.iter_any():
                buf += data
                frames = buf.split(b"\n\n")
                buf = frames.pop()
                out = []
                for frame in frames:
                    if not frame.startswith(b"data: ") or frame == b"data: [DONE]":
                        continue
                    chunk = orjson.loads(frame[6:])
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or ():
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            text.append(delta)
                            out.append(sse("response.output_text.delta", {
                                "type": "response.output_text.delta", "sequence_number": seq, "item_id": mid,
                                "output_index": 0, "content_index": 0, "delta": delta, "logprobs": []}))
                            seq += 1
                if out:
                    await resp.write(b"".join(out))
            full = "".join(text)
            part = {"type": "output_text", "text": full, "annotations": []}
            item = {**item, "status": "completed", "content": [part]}
            response = {**response, "status": "completed", "output": [item], "usage": usage and {
                "input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0)}}
            tail = [
                sse("response.output_text.done", {"type": "response.output_text.done", "sequence_number": seq,
                                                  "item_id": mid, "output_index": 0, "content_index": 0,
                                                  "text": full, "logprobs": []}),
                sse("response.content_part.done", {"type": "response.content_part.done", "sequence_number": seq + 1,
                                                   "item_id": mid, "output_index": 0, "content_index": 0,
                                                   "part": part}),
                sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": seq + 2,
                                                  "output_index": 0, "item": item}),
                sse("response.completed", {"type": "response.completed", "sequence_number": seq + 3,
                                           "response": response}),
                b"data: [DONE]\n\n",
            ]
            await resp.write(b"".join(tail))
            await resp.write_eof()
            return resp


async def health(_request: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


async def serve(upstream: str, sock: socket.socket, announce: bool, parent: int | None) -> None:
    translator = Translator(upstream)
    app = web.Application()
    app.router.add_post("/v1/responses", translator.responses)
    app.router.add_get("/health", health)
    app.on_startup.append(translator.start)
    app.on_cleanup.append(translator.stop)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    if announce:
        host, port = sock.getsockname()[:2]
        print(f"lean translator listening on http://{host}:{port} pid={os.getpid()}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        if parent is not None and os.getppid() != parent:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.lean_translator", description=__doc__.split("\n")[0])
    p.add_argument("--upstream", required=True, help="Chat Completions base URL, e.g. http://127.0.0.1:8001/v1")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    p.add_argument("--workers", type=int, default=1, help="processes sharing the port (SO_REUSEPORT) [1]")
    args = p.parse_args(argv)
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    first, children = fork_siblings(args.workers, args.host, args.port,
                                    lambda _i, sock, parent: runner(serve(args.upstream, sock, False, parent)))
    try:
        runner(serve(args.upstream, first, True, None))
    finally:
        reap(children)


if __name__ == "__main__":
    main()
