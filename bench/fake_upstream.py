"""A fast fake Chat Completions server for benchmarks: raw asyncio (uvloop when installed), pre-encoded frames.

    python -m bench.fake_upstream --port 8001 --tokens 256 --tokens-per-chunk 1 --delay-ms 0

`POST .../chat/completions` with `stream: true` answers with SSE chunks shaped like vLLM's (and OpenAI's):

    data: {"id":"chatcmpl-…","object":"chat.completion.chunk","created":…,"model":"…","choices":[{"index":0,
           "delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}

a role chunk first, optional reasoning deltas, `--tokens` content tokens (`--tokens-per-chunk` per chunk),
optional tool-call deltas, a finish chunk, a usage-only chunk when the request asks for
`stream_options.include_usage`, and `data: [DONE]`. `max_tokens` / `max_completion_tokens` below `--tokens`
cut the answer with `finish_reason: "length"`. Without `stream` it answers one `chat.completion` object.

Why it is cheap: the whole answer for a (model, length) is encoded once, HTTP chunk framing included, and
each request only swaps in its own fixed-length id (one `bytes.replace`) and then writes slices; streams are
driven by loop callbacks, not tasks. With `--delay-ms 0` each write is followed by one loop turn, so
concurrent streams interleave one chunk at a time like a server that emits one token per step for every
sequence; `--delay-ms D` sends chunk i at t0 + (tokens so far) × D, on an absolute schedule (no drift).

`--processes N` runs N processes that share the port (SO_REUSEPORT: the kernel spreads connections over
them), for a machine with cores to spare; the options, the counters and the stream timeline are kept in
shared memory, so `/_bench/config` and `/_bench/stats` on any connection act on, and answer for, all of them.

Control (for the harness, not part of the upstream protocol):
    GET  /health               {"status":"ok"}
    GET  /_bench/stats         requests served, bytes written, and for the last 2000 streams the
                               CLOCK_MONOTONIC times (time.monotonic(), time.perf_counter()) at which the request
                               was parsed and the first token was written: the harness splits the gateway's
                               added time to first token into "before the upstream" and "after the upstream"
    POST /_bench/config        change any option below at run time (JSON object); answers the full config
"""

from __future__ import annotations

import argparse
import asyncio
import mmap
import os
import signal
import socket
import struct
import time
from collections import deque
from dataclasses import asdict, dataclass, fields

import orjson

from .reuseport import fork_siblings, reap

WORDS = [" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", ",", " and", " then",
         " it", " runs", " back", " home", " café", " again", ".", "\n"]
ID_PLACEHOLDER = b"chatcmpl-@@@@@@@@@@@@@@@@"  # same length as the real ids swapped in per request
CREATED = int(time.time())


@dataclass
class Config:
    tokens: int = 256                 # content tokens per response
    tokens_per_chunk: int = 1         # tokens in each content (and reasoning) delta
    delay_ms: float = 0.0             # per-token delay
    reasoning_tokens: int = 0         # reasoning deltas before the content
    reasoning_field: str = "reasoning_content"  # vLLM's older name; newer vLLM also sends "reasoning"
    tool_calls: int = 0               # tool calls after the content (finish_reason becomes tool_calls)
    tool_arg_chunks: int = 4          # argument fragments per tool call
    chunks_per_write: int = 1         # SSE chunks in one socket write / one HTTP chunk
    first_token_ms: float | None = None  # delay before the first token; default: delay_ms (one token time)


def _chunk(delta: dict, finish: str | None = None, extra: dict | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = None
    obj = {"id": ID_PLACEHOLDER.decode(), "object": "chat.completion.chunk", "created": CREATED,
           "model": "MODEL", "choices": [choice]}
    if extra:
        obj.update(extra)
    return obj


def _frame(obj: dict, model: bytes) -> bytes:
    return b"data: " + orjson.dumps(obj).replace(b'"model":"MODEL"', b'"model":' + model, 1) + b"\n\n"


def _http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def _texts(n: int, per: int, offset: int = 0) -> list[tuple[str, int]]:
    """n tokens grouped `per` to a delta: [(text, tokens in it)]."""
    out = []
    for start in range(0, n, per):
        k = min(per, n - start)
        out.append(("".join(WORDS[(offset + start + j) % len(WORDS)] for j in range(k)), k))
    return out


class Answer:
    """One pre-encoded streamed answer: the body as HTTP chunks, with the due time of each write unit."""

    __slots__ = ("data", "offsets", "due", "completion_tokens", "text", "finish", "first_token_unit")

    def __init__(self, cfg: Config, model: bytes, n_tokens: int, finish: str):
        frames: list[tuple[bytes, int]] = []  # (SSE frame, tokens it carries)
        frames.append((_frame(_chunk({"role": "assistant", "content": ""}), model), 0))
        for text, k in _texts(cfg.reasoning_tokens, cfg.tokens_per_chunk, offset=7):
            frames.append((_frame(_chunk({cfg.reasoning_field: text}), model), k))
        texts = _texts(n_tokens, cfg.tokens_per_chunk)
        for text, k in texts:
            frames.append((_frame(_chunk({"content": text}), model), k))
        for i in range(cfg.tool_calls):
            args = orjson.dumps({"city": "Paris", "unit": "celsius", "call": i}).decode()
            parts = max(1, cfg.tool_arg_chunks)
            step = -(-len(args) // parts)
            first = {"id": f"call_{i:024d}", "type": "function", "index": i,
                     "function": {"name": "get_weather", "arguments": ""}}
            frames.append((_frame(_chunk({"tool_calls": [first]}), model), 1))
            for s in range(0, len(args), step):
                frag = {"index": i, "function": {"arguments": args[s:s + step]}}
                frames.append((_frame(_chunk({"tool_calls": [frag]}), model), 1))
        frames.append((_frame(_chunk({"content": ""}, finish), model), 0))
        # Group into write units; a unit is due when the last token it carries has been "generated".
        delay = cfg.delay_ms / 1000.0
        first = delay if cfg.first_token_ms is None else cfg.first_token_ms / 1000.0
        units, due, tokens_so_far = [], [], 0
        self.first_token_unit = None
        per = max(1, cfg.chunks_per_write)
        for start in range(0, len(frames), per):
            group = frames[start:start + per]
            carried = sum(k for _, k in group)
            if carried:
                tokens_so_far += carried
                if self.first_token_unit is None:
                    self.first_token_unit = len(units)
            units.append(_http_chunk(b"".join(f for f, _ in group)))
            due.append(0.0 if tokens_so_far == 0 else first + (tokens_so_far - 1) * delay)
        offsets = [0]
        for u in units:
            offsets.append(offsets[-1] + len(u))
        self.data = b"".join(units)
        self.offsets = offsets
        self.due = due
        self.completion_tokens = tokens_so_far
        self.text = "".join(t for t, _ in texts)
        self.finish = finish


HEAD_SSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n")
DONE_TAIL = _http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class Shared:
    """The options, counters and stream timelines of every process of a multi-process upstream, in one
    anonymous shared mapping made before the processes fork. Each process writes only its own slot; the
    options are written by whichever process is asked to change them (the harness asks one at a time) and
    the others take them, by their generation number, when their next request arrives."""

    CONFIG_MAX = 64 * 1024
    TIMELINE = 2000
    HEAD = struct.Struct("<qi")      # options generation, length of the options' JSON
    SLOT = struct.Struct("<qqqq")    # requests, streams done, bytes written, timeline entries so far
    ENTRY = struct.Struct("<dd")     # request parsed, first token written (NaN until then)

    def __init__(self, processes: int, cfg: Config):
        self.processes = processes
        self.slot_size = self.SLOT.size + self.TIMELINE * self.ENTRY.size
        self.base = self.HEAD.size + self.CONFIG_MAX
        self.mm = mmap.mmap(-1, self.base + processes * self.slot_size)  # MAP_SHARED | MAP_ANONYMOUS
        self.index = 0  # this process's slot
        self.write_config(cfg)

    def generation(self) -> int:
        return self.HEAD.unpack_from(self.mm, 0)[0]

    def write_config(self, cfg: Config) -> int:
        data = orjson.dumps(asdict(cfg))
        if len(data) > self.CONFIG_MAX:
            raise ValueError("options too large")
        generation = self.generation() + 1
        self.mm[self.HEAD.size:self.HEAD.size + len(data)] = data
        self.HEAD.pack_into(self.mm, 0, generation, len(data))
        return generation

    def read_config(self) -> tuple[int, Config]:
        generation, length = self.HEAD.unpack_from(self.mm, 0)
        return generation, Config(**orjson.loads(self.mm[self.HEAD.size:self.HEAD.size + length]))

    def _slot(self, index: int) -> int:
        return self.base + index * self.slot_size

    def publish(self, requests: int, streams_done: int, nbytes: int) -> None:
        at = self._slot(self.index)
        entries = self.SLOT.unpack_from(self.mm, at)[3]
        self.SLOT.pack_into(self.mm, at, requests, streams_done, nbytes, entries)

    def track(self, arrived: float) -> int:
        """A new stream's entry in this process's timeline; returns where its first-token time goes."""
        at = self._slot(self.index)
        requests, done, nbytes, entries = self.SLOT.unpack_from(self.mm, at)
        where = at + self.SLOT.size + (entries % self.TIMELINE) * self.ENTRY.size
        self.ENTRY.pack_into(self.mm, where, arrived, float("nan"))
        self.SLOT.pack_into(self.mm, at, requests, done, nbytes, entries + 1)
        return where

    def first_token(self, where: int, when: float) -> None:
        self.mm[where + 8:where + 16] = struct.pack("<d", when)

    def stats(self) -> dict:
        """Every process's counters summed, and their timelines merged by arrival (the last TIMELINE)."""
        out = {"requests": 0, "streams_done": 0, "bytes": 0, "processes": self.processes}
        timeline = []
        for index in range(self.processes):
            at = self._slot(index)
            requests, done, nbytes, entries = self.SLOT.unpack_from(self.mm, at)
            out["requests"] += requests
            out["streams_done"] += done
            out["bytes"] += nbytes
            for k in range(min(entries, self.TIMELINE)):
                arrived, first = self.ENTRY.unpack_from(self.mm, at + self.SLOT.size + k * self.ENTRY.size)
                timeline.append([arrived, None if first != first else first])
        timeline.sort(key=lambda entry: entry[0])
        out["timeline"] = timeline[-self.TIMELINE:]
        return out


class Server:
    def __init__(self, cfg: Config, shared: Shared | None = None):
        self.cfg = cfg
        self.cache: dict[tuple, Answer] = {}
        self.requests = 0
        self.streams_done = 0
        self.bytes = 0
        self.timeline: deque = deque(maxlen=2000)  # [request parsed, first token written] per stream
        self.shared = shared
        self.generation = shared.generation() if shared is not None else 0

    def sync(self) -> None:
        """Take the options another process of a multi-process upstream was given."""
        if self.shared is not None and self.shared.generation() != self.generation:
            self.generation, self.cfg = self.shared.read_config()
            self.cache.clear()

    def track(self, times: list) -> int | None:
        """Record a stream in the timeline: its [parsed, first token] list here, or its place in shared memory."""
        if self.shared is not None:
            return self.shared.track(times[0])
        self.timeline.append(times)
        return None

    def publish(self) -> None:
        if self.shared is not None:
            self.shared.publish(self.requests, self.streams_done, self.bytes)

    def stats(self) -> dict:
        if self.shared is not None:
            return {**self.shared.stats(), "pid": os.getpid()}
        return {"requests": self.requests, "streams_done": self.streams_done, "bytes": self.bytes,
                "pid": os.getpid(), "timeline": list(self.timeline)}

    def answer(self, model: bytes, n_tokens: int, finish: str) -> Answer:
        key = (model, n_tokens, finish)
        ans = self.cache.get(key)
        if ans is None:
            if len(self.cache) > 64:
                self.cache.clear()
            ans = self.cache[key] = Answer(self.cfg, model, n_tokens, finish)
        return ans

    def set_config(self, changes: dict) -> None:
        names = {f.name for f in fields(Config)}
        unknown = set(changes) - names
        if unknown:
            raise ValueError(f"unknown options: {sorted(unknown)}")
        self.sync()
        values = asdict(self.cfg)
        values.update(changes)
        self.cfg = Config(**values)
        self.cache.clear()
        if self.shared is not None:
            self.generation = self.shared.write_config(self.cfg)


class Conn(asyncio.Protocol):
    __slots__ = ("server", "loop", "transport", "buf", "busy", "paused", "closed", "waiting", "keep_alive")

    def __init__(self, server: Server):
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport = None
        self.buf = bytearray()
        self.busy = False        # a streamed answer is in progress; pipelined requests wait
        self.paused = False      # transport buffer is full
        self.closed = False
        self.waiting = None      # the stream step to run on resume_writing
        self.keep_alive = True

    # -- asyncio.Protocol ------------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.waiting = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        step, self.waiting = self.waiting, None
        if step is not None:
            step()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > 64 * 1024 * 1024:
            self.transport.close()
            return
        self.process()

    # -- HTTP/1.1 ------------------------------------------------------------------------------------------

    def process(self) -> None:
        while not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            parts = head[0].split(" ")
            if len(parts) != 3:
                self.reply(400, b'{"error":{"message":"bad request line"}}', close=True)
                return
            method, path, version = parts
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.reply(411, b'{"error":{"message":"chunked request bodies are not supported"}}', close=True)
                return
            length = int(headers.get("content-length") or 0)
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4:end + 4 + length])
            del self.buf[:end + 4 + length]
            conn = headers.get("connection", "").lower()
            self.keep_alive = conn != "close" and (version == "HTTP/1.1" or conn == "keep-alive")
            self.route(method, path.split("?", 1)[0], body)

    def reply(self, status: int, body: bytes, ctype: bytes = b"application/json", close: bool = False) -> None:
        reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 411: b"Length Required"}.get(status, b"")
        close = close or not self.keep_alive
        self.transport.write(b"HTTP/1.1 %d %b\r\ncontent-type: %b\r\ncontent-length: %d\r\n%b\r\n%b" % (
            status, reason, ctype, len(body), b"connection: close\r\n" if close else b"", body))
        if close:
            self.transport.close()
            self.closed = True

    def route(self, method: str, path: str, body: bytes) -> None:
        server = self.server
        if method == "POST" and path.endswith("/chat/completions"):
            self.completions(body)
        elif method == "GET" and path.endswith("/models"):
            self.reply(200, orjson.dumps({"object": "list", "data": [
                {"id": "bench-model", "object": "model", "created": CREATED, "owned_by": "bench"}]}))
        elif method == "GET" and path == "/health":
            self.reply(200, b'{"status":"ok"}')
        elif method == "GET" and path == "/_bench/stats":
            self.reply(200, orjson.dumps(server.stats()))
        elif method == "POST" and path == "/_bench/config":
            try:
                server.set_config(orjson.loads(body or b"{}"))
            except (ValueError, TypeError) as exc:
                self.reply(400, orjson.dumps({"error": {"message": str(exc)}}))
                return
            self.reply(200, orjson.dumps(asdict(server.cfg)))
        else:
            self.reply(404, b'{"error":{"message":"not found","type":"invalid_request_error","code":null}}')

    def completions(self, body: bytes) -> None:
        arrived = time.monotonic()
        server = self.server
        server.sync()
        server.requests += 1
        server.publish()
        try:
            req = orjson.loads(body)
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            self.reply(400, b'{"error":{"message":"body is not a JSON object","type":"BadRequestError",'
                            b'"param":null,"code":400}}')
            return
        model = orjson.dumps(str(req.get("model") or "bench-model"))
        cfg = server.cfg
        n = cfg.tokens
        limit = req.get("max_completion_tokens") or req.get("max_tokens")
        finish = "tool_calls" if cfg.tool_calls else "stop"
        if isinstance(limit, int) and 0 < limit < n:
            n, finish = limit, "length"
        ans = server.answer(model, n, finish)
        rid = b"chatcmpl-" + os.urandom(8).hex().encode()
        prompt_tokens = max(1, len(body) // 4)
        if not req.get("stream"):
            self.reply(200, _completion(rid, model, ans, prompt_tokens, cfg))
            return
        tail = DONE_TAIL
        if (req.get("stream_options") or {}).get("include_usage"):
            usage = {"id": rid.decode(), "object": "chat.completion.chunk", "created": CREATED, "model": "MODEL",
                     "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                              "total_tokens": prompt_tokens + ans.completion_tokens,
                                              "completion_tokens": ans.completion_tokens}}
            tail = _http_chunk(_frame(usage, model)) + DONE_TAIL
        head = HEAD_SSE + (b"\r\n" if self.keep_alive else b"connection: close\r\n\r\n")
        _Stream(self, ans.data.replace(ID_PLACEHOLDER, rid), ans, head, tail, arrived).step()


def _completion(rid: bytes, model: bytes, ans: Answer, prompt_tokens: int, cfg: Config) -> bytes:
    message: dict = {"role": "assistant", "content": ans.text}
    if cfg.tool_calls:
        message["tool_calls"] = [{"id": f"call_{i:024d}", "type": "function", "function": {
            "name": "get_weather", "arguments": orjson.dumps({"city": "Paris", "unit": "celsius", "call": i}).decode()}}
            for i in range(cfg.tool_calls)]
    obj = {"id": rid.decode(), "object": "chat.completion", "created": CREATED, "model": orjson.loads(model),
           "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": ans.finish}],
           "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + ans.completion_tokens,
                     "completion_tokens": ans.completion_tokens}}
    return orjson.dumps(obj)


class _Stream:
    """Writes one answer unit by unit, driven by loop callbacks, honouring the transport's flow control."""

    __slots__ = ("conn", "data", "offsets", "due", "i", "t0", "head", "tail", "times", "first", "slot")

    def __init__(self, conn: Conn, data: bytes, ans: Answer, head: bytes, tail: bytes, arrived: float):
        conn.busy = True
        self.conn = conn
        self.data = data
        self.offsets = ans.offsets
        self.due = ans.due
        self.i = 0
        self.t0 = conn.loop.time()
        self.head = head
        self.tail = tail
        self.times = [arrived, None]
        self.first = ans.first_token_unit if ans.first_token_unit is not None else len(ans.due)
        self.slot = conn.server.track(self.times)

    def step(self) -> None:
        conn = self.conn
        if conn.closed:
            return
        if conn.paused:
            conn.waiting = self.step
            return
        due, offsets, n = self.due, self.offsets, len(self.due)
        i = self.i
        now = conn.loop.time() - self.t0
        j = i + 1
        while j < n and due[j] <= now and due[j] > 0.0:  # everything already due goes out together
            j += 1
        out = self.data[offsets[i]:offsets[j]]
        if i == 0:
            out = self.head + out
        if j == n:
            out += self.tail
        conn.transport.write(out)
        if j > self.first and self.times[1] is None:  # this write carried the first token
            self.times[1] = time.monotonic()
            if self.slot is not None:
                conn.server.shared.first_token(self.slot, self.times[1])
        conn.server.bytes += len(out)
        self.i = j
        if j < n:
            wait = due[j] - (conn.loop.time() - self.t0)
            if wait > 0:
                conn.loop.call_later(wait, self.step)
            else:
                conn.loop.call_soon(self.step)
            return
        conn.server.streams_done += 1
        conn.server.publish()
        conn.busy = False
        if not conn.keep_alive:
            conn.transport.close()
            conn.closed = True
        elif conn.buf:
            conn.process()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.fake_upstream", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001, help="0 picks a free port (printed on stdout)")
    p.add_argument("--tokens", type=int, default=256, help="content tokens per response [256]")
    p.add_argument("--tokens-per-chunk", type=int, default=1, help="tokens in each delta [1]")
    p.add_argument("--delay-ms", type=float, default=0.0, help="per-token delay in ms [0: as fast as possible]")
    p.add_argument("--first-token-ms", type=float, default=None, help="delay before the first token [delay-ms]")
    p.add_argument("--reasoning-tokens", type=int, default=0, help="reasoning tokens before the content [0]")
    p.add_argument("--reasoning-field", default="reasoning_content", choices=("reasoning_content", "reasoning"))
    p.add_argument("--tool-calls", type=int, default=0, help="tool calls after the content [0]")
    p.add_argument("--tool-arg-chunks", type=int, default=4, help="argument fragments per tool call [4]")
    p.add_argument("--chunks-per-write", type=int, default=1, help="SSE chunks per socket write [1]")
    p.add_argument("--processes", type=int, default=1,
                   help="processes serving the port together (SO_REUSEPORT), for many-core runs [1]")
    return p


def config_from(args: argparse.Namespace) -> Config:
    return Config(**{f.name: getattr(args, f.name) for f in fields(Config)})


async def serve(host: str, port: int, cfg: Config, sock: socket.socket | None = None, shared: Shared | None = None,
                parent: int | None = None) -> None:
    """Serve until SIGTERM/SIGINT. `sock`: an already listening socket (multi-process); `parent`: the pid
    whose exit ends this process too (a forked sibling must not outlive the upstream it belongs to)."""
    loop = asyncio.get_running_loop()
    server = Server(cfg, shared)
    if sock is None:
        srv = await loop.create_server(lambda: Conn(server), host, port, backlog=1024, reuse_address=True)
    else:
        srv = await loop.create_server(lambda: Conn(server), sock=sock, backlog=1024)
    port = srv.sockets[0].getsockname()[1]
    if parent is None:
        processes = f" ({shared.processes} processes)" if shared is not None else ""
        print(f"fake upstream{processes} listening on http://{host}:{port}/v1 pid={os.getpid()}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def orphaned() -> None:
        while os.getppid() == parent:
            await asyncio.sleep(0.5)
        stop.set()

    watch = asyncio.create_task(orphaned()) if parent is not None else None
    async with srv:
        await stop.wait()
    if watch is not None:
        watch.cancel()


def serve_processes(args: argparse.Namespace, runner) -> None:
    """`--processes N`: this process and N - 1 forked ones, each with its own socket on the same port
    (SO_REUSEPORT) and its own event loop, sharing options and counters through `Shared`."""
    cfg = config_from(args)
    shared = Shared(args.processes, cfg)

    def child(index: int, sock: socket.socket, parent: int) -> None:
        shared.index = index
        runner(serve(args.host, sock.getsockname()[1], cfg, sock=sock, shared=shared, parent=parent))

    first, children = fork_siblings(args.processes, args.host, args.port, child)
    try:
        runner(serve(args.host, first.getsockname()[1], cfg, sock=first, shared=shared))
    finally:
        reap(children)


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        import uvloop
    except ImportError:  # plain asyncio still works, a little slower
        uvloop = None
    runner = uvloop.run if uvloop is not None else asyncio.run
    if args.processes > 1:
        serve_processes(args, runner)
    else:
        runner(serve(args.host, args.port, config_from(args)))


if __name__ == "__main__":
    main()
