"""A fake Chat Completions upstream that speaks real HTTP on loopback.

It stands in for vLLM / Ollama / OpenAI in gateway tests, so what it puts on the wire must
look exactly like what those servers send: SSE frames, usage-only chunks, `data: [DONE]`,
compact JSON error bodies. It runs its own event loop in a background thread so plain
synchronous pytest tests (and a gateway under test, in its own loop) can talk to it.

    with FakeChatUpstream() as up:
        up.enqueue(Stream(text_stream(["Hel", "lo"], usage=make_usage())))
        ...  # point the gateway at up.base_url
        assert up.requests[0].body["stream"] is True
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web

from .recordings import Recording

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()
"""Stream marker: cut the connection mid-body, like an upstream crash or a proxy reset."""


@dataclass
class Sleep:
    """Stream marker: pause mid-stream (a slow token, a stalled upstream)."""

    seconds: float


@dataclass
class Stream:
    chunks: Sequence[str | bytes | _Drop | Sleep]
    status: int = 200
    headers: dict[str, str] | None = None
    delay: float = 0.0
    before_headers: float = 0.0  # a model server that takes its time to answer at all


@dataclass
class Json:
    """A plain JSON response; a str/bytes body is sent verbatim (for malformed bodies)."""

    body: Any
    status: int = 200
    headers: dict[str, str] | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # keys lower-cased
    raw: bytes
    body: Any  # parsed JSON, or None when the body was not JSON


Script = Stream | Json | Callable[[RecordedRequest], "Script"]
"""A callable script is called with the request, for answers that depend on it."""


def dumps(obj: Any) -> str:
    """Compact JSON with raw non-ASCII, as vLLM (pydantic) and OpenAI serialise."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- builders


def make_usage(
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    cached_tokens: int = 0,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def sse_frame(payload: Any) -> str:
    return f"data: {payload if isinstance(payload, str) else dumps(payload)}\n\n"


def sse_chunks(
    deltas: Iterable[dict[str, Any]],
    model: str = "fake-model",
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    id: str | None = None,
    created: int | None = None,
    done: bool = True,
) -> list[str]:
    """Frames as vLLM sends them: role chunk, one chunk per delta, finish chunk, usage, [DONE].

    `finish_reason=None` leaves the finish chunk out and `done=False` the `[DONE]` line, to
    model upstreams that end a stream early.
    """
    head = {
        "id": id or f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()) if created is None else created,
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse_frame({**head, "choices": [choice]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk(d) for d in deltas]
    if finish_reason is not None:
        frames.append(chunk({}, finish_reason))
    if usage is not None:
        frames.append(sse_frame({**head, "choices": [], "usage": usage}))
    if done:
        frames.append("data: [DONE]\n\n")
    return frames


def text_stream(text_pieces: Iterable[str], **kw: Any) -> list[str]:
    return sse_chunks([{"content": p} for p in text_pieces], **kw)


def reasoning_then_text(
    reasoning_pieces: Iterable[str],
    text_pieces: Iterable[str],
    field: str | Sequence[str] = "reasoning_content",
    **kw: Any,
) -> list[str]:
    """`field` may name several keys: recent vLLM sends both `reasoning` and `reasoning_content`."""
    fields = (field,) if isinstance(field, str) else tuple(field)
    deltas = [{f: p for f in fields} for p in reasoning_pieces]
    deltas += [{"content": p} for p in text_pieces]
    return sse_chunks(deltas, **kw)


def tool_calls_stream(
    calls: Sequence[tuple[str, str, Sequence[str]]],
    interleave: bool = True,
    finish_reason: str | None = "tool_calls",
    **kw: Any,
) -> list[str]:
    """Tool-call deltas for (id, name, argument fragments) calls.

    Only the first fragment of a call carries id/type/name; later ones carry `index` and
    argument text alone, so a client must merge by `index`. With `interleave`, fragments of
    parallel calls alternate, which is legal and breaks clients that assume calls are serial.
    """
    per_call: list[list[dict[str, Any]]] = []
    for index, (call_id, name, fragments) in enumerate(calls):
        fragments = list(fragments) or [""]
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": fragments[0]},
        }
        rest = [{"index": index, "function": {"arguments": f}} for f in fragments[1:]]
        per_call.append([first, *rest])

    if interleave:
        longest = max((len(c) for c in per_call), default=0)
        order = [c[i] for i in range(longest) for c in per_call if i < len(c)]
    else:
        order = [piece for c in per_call for piece in c]
    return sse_chunks([{"tool_calls": [piece]} for piece in order], finish_reason=finish_reason, **kw)


def error_in_stream(message: str, type: str = "BadRequestError", code: int = 400) -> str:
    """The frame vLLM writes when generation fails after the 200 headers went out."""
    return sse_frame({"error": {"message": message, "type": type, "param": None, "code": code}})


def malformed() -> str:
    return "data: {not json\n\n"


def error_json(
    status: int,
    message: str,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | int | None = None,
) -> Json:
    """An OpenAI-style error response sent before any stream starts."""
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return Json(body, status=status)


def replay(recording: Recording, delay: float = 0.0) -> Stream | Json:
    content_type = recording.headers.get("content-type")
    if recording.sse_chunks is not None:
        headers = {"content-type": content_type or SSE_CONTENT_TYPE}
        return Stream(list(recording.sse_chunks), recording.status, headers, delay)
    headers = {"content-type": content_type or JSON_CONTENT_TYPE}
    return Json(recording.body, recording.status, headers)


# --------------------------------------------------------------------------- embeddings

EMBEDDING_DIMENSION = 384
EMBEDDING_MODEL = "fake-embedding"  # the embedding model the fake serves besides its chat models


def fake_embedding(text: str, dimension: int = EMBEDDING_DIMENSION) -> list[float]:
    """A deterministic vector from the text: each word (lower-cased) adds ±1 at three places chosen by its
    hash, so texts that share words are close (cosine) and others are not. Not normalised, as a model's
    raw output need not be."""
    import hashlib
    import re

    vector = [0.0] * dimension
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=12).digest()
        for i in range(3):
            slot = int.from_bytes(digest[4 * i:4 * i + 3], "little") % dimension
            vector[slot] += 1.0 if digest[4 * i + 3] & 1 else -1.0
    if not any(vector):
        vector[0] = 1.0  # a text without words still gets a valid (non-zero) vector
    return vector


# --------------------------------------------------------------------------- server


class FakeChatUpstream:
    """The fake upstream server; see the module docstring for usage.

    Other protocols' fakes (Anthropic, Responses) subclass it: `POST_PATH`, `_stream_headers`,
    `_no_script` and `_models` are theirs to change; queueing, recording, streaming and disconnect
    detection are shared."""

    POST_PATH = "/v1/chat/completions"
    COUNT_PATH = "/tokenize"  # vLLM's token counter lives at the server root

    def __init__(self, models: Sequence[str] = ("fake-model",)) -> None:
        self.models: list[str] = list(models)
        self.default: Script | None = None
        self.url = ""  # the server's root
        self.base_url = ""  # the same with /v1
        self.port = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[Script] = deque()
        self._requests: list[RecordedRequest] = []
        self.counted: list[RecordedRequest] = []  # token-count requests, kept apart from generations
        self.embedded: list[RecordedRequest] = []  # POST /v1/embeddings requests
        # how /v1/embeddings answers: `embed` makes each vector; `embeddings_hook` may answer instead (an error,
        # a malformed body); `embeddings_delay` seconds before answering (a slow embedding server)
        self.embed: Callable[[str], list[float]] = fake_embedding
        self.embeddings_hook: Callable[[RecordedRequest], Json | None] | None = None
        self.embeddings_delay = 0.0
        self._disconnects = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # ---- test-facing API

    def enqueue(self, *scripts: Script | Sequence[str]) -> None:
        """Queue scripts for the next POSTs, in order; a bare chunk list means Stream(chunks)."""
        with self._lock:
            for script in scripts:
                is_chunks = isinstance(script, (list, tuple))
                self._queue.append(Stream(list(script)) if is_chunks else script)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        with self._lock:
            return self._disconnects

    def wait_disconnect(self, timeout: float = 5.0, count: int = 1) -> bool:
        """Wait until `count` streams lost their client; the server notices only between chunks."""
        with self._changed:
            return self._changed.wait_for(lambda: self._disconnects >= count, timeout)

    def wait_requests(self, count: int, timeout: float = 15.0) -> None:
        """Wait until `count` generation requests have arrived."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            assert time.monotonic() < deadline, "the request never reached the upstream"
            time.sleep(0.02)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self.counted.clear()
            self.embedded.clear()
            self._disconnects = 0
        self.embed = fake_embedding
        self.embeddings_hook = None
        self.embeddings_delay = 0.0

    # ---- lifecycle

    def start(self) -> Self:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fake-chat-upstream", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result(timeout=10)
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        return self

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=10)
        loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # a real model server takes long histories
        app.router.add_post(self.POST_PATH, self._play)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post(self.COUNT_PATH, self._count)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._add_routes(app.router)
        # A short shutdown timeout: a test that leaves a stream sleeping must not stall teardown.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    # ---- handlers

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return _json_response(Json({"object": "list", "data": data}))

    def fake_token_count(self, body: dict) -> int:
        """The fake's tokenizer: characters / 4 over every string in the messages, plus 3 per message."""
        return sum(3 + len(json.dumps(m.get("content"))) // 4 for m in body.get("messages") or ())

    async def _count(self, request: web.Request) -> web.Response:
        """vLLM's `POST /tokenize` for chat messages: `{"count", "max_model_len", "tokens"}`."""
        recorded = await self._record(request)
        body = recorded.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _json_response(error_json(400, "messages: Field required", type="BadRequestError", code=400))
        count = self.fake_token_count(body)
        with self._lock:
            self.counted.append(recorded)
        return _json_response(Json({"count": count, "max_model_len": 32768, "tokens": list(range(count)),
                                    "token_strs": None}))

    async def _embeddings(self, request: web.Request) -> web.Response:
        """vLLM's `POST /v1/embeddings`: the same fields in the same order, compact JSON."""
        recorded = await self._record(request)
        with self._lock:
            self.embedded.append(recorded)
        if self.embeddings_delay:
            await asyncio.sleep(self.embeddings_delay)
        if self.embeddings_hook is not None:
            answer = self.embeddings_hook(recorded)
            if answer is not None:
                return _json_response(answer)
        body = recorded.body
        if not isinstance(body, dict) or "input" not in body:
            return _json_response(error_json(400, "input: Field required", type="BadRequestError", code=400))
        model = body.get("model")
        if model is not None and model not in (*self.models, EMBEDDING_MODEL):
            return _json_response(error_json(404, f"The model `{model}` does not exist.", type="NotFoundError",
                                             param="model", code=404))
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = [self.embed(text) for text in inputs]
        tokens = sum(max(1, len(text) // 4) for text in inputs)
        answer = {"id": f"embd-{uuid.uuid4().hex}", "object": "list", "created": int(time.time()),
                  "model": model or self.models[0],
                  "data": [{"index": i, "object": "embedding", "embedding": v} for i, v in enumerate(vectors)],
                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
                            "prompt_tokens_details": None}}
        return _json_response(Json(answer))

    @staticmethod
    async def _record(request: web.Request) -> RecordedRequest:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return RecordedRequest(method=request.method, path=request.path_qs,
                               headers={k.lower(): v for k, v in request.headers.items()}, raw=raw, body=body)

    def _stream_headers(self) -> dict[str, str]:
        return {}

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        """More endpoints of the protocol, for subclasses (e.g. GET /v1/responses/{id})."""

    def _no_script(self) -> Json:
        return error_json(500, "fake upstream: no script queued", type="server_error")

    async def _play(self, request: web.Request) -> web.StreamResponse:
        """Record the request and answer with the next queued script."""
        recorded = await self._record(request)
        with self._lock:
            self._requests.append(recorded)
            script = self._queue.popleft() if self._queue else self.default

        while callable(script):
            script = script(recorded)
        if script is None:
            script = self._no_script()
        if isinstance(script, Json):
            return _json_response(script)
        return await self._stream(request, script)

    async def _stream(self, request: web.Request, script: Stream) -> web.StreamResponse:
        headers = {"content-type": SSE_CONTENT_TYPE, **self._stream_headers(), **(script.headers or {})}
        response = web.StreamResponse(status=script.status, headers=headers)
        try:
            if script.before_headers:
                await self._pause(request, script.before_headers)
            await response.prepare(request)
            for i, chunk in enumerate(script.chunks):
                if i and script.delay:
                    await self._pause(request, script.delay)
                if isinstance(chunk, Sleep):
                    await self._pause(request, chunk.seconds)
                elif chunk is DROP:
                    # Closing the socket mid-body leaves the chunked encoding unterminated.
                    if request.transport is not None:
                        request.transport.close()
                    return response
                else:
                    data = chunk.encode() if isinstance(chunk, str) else chunk
                    await response.write(data)
            await response.write_eof()
        except ConnectionError:
            with self._changed:
                self._disconnects += 1
                self._changed.notify_all()
        return response

    @staticmethod
    async def _pause(request: web.Request, seconds: float) -> None:
        """Sleep, but notice a client that leaves meanwhile, as a writing server would."""
        deadline = time.monotonic() + seconds
        while True:
            if request.transport is None or request.transport.is_closing():
                raise ConnectionResetError("client went away")
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.01))


def _json_response(script: Json) -> web.Response:
    body = script.body
    if not isinstance(body, (str, bytes)):
        body = dumps(body)
    if isinstance(body, str):
        body = body.encode()
    headers = {"content-type": JSON_CONTENT_TYPE, **(script.headers or {})}
    return web.Response(body=body, status=script.status, headers=headers)
