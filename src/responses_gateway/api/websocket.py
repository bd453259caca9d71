"""WebSocket mode: `GET /v1/responses` upgraded, many responses over one connection, one at a time.

The client sends text frames `{"type": "response.create", ...the POST body...}`; the gateway answers each
with the very events an SSE stream carries (the same composer makes them), one JSON object per text frame,
no `[DONE]`. Requests are answered strictly in order: a reader task takes frames off the socket and queues
them, a worker runs them one by one, so even an error frame for a bad frame never lands inside the events of
a running response. Each response.create passes the front door (door.py) as an HTTP request does: the same
admission (in flight, per-key concurrency and rate; its place held until its last event is sent) and the same
bounds. A request refused there, or that fails before its stream starts, gets an error frame
`{"type": "error", "status": N, "error": {...}}` with the status and code HTTP would answer, and the
connection stays usable.

`response.processed` (Codex acknowledges every response with it) is ignored without a reply: an error frame
there would be read as the answer to the client's next request. The connection's most recent response is
kept in memory (ws_cache.py), so `previous_response_id` works for `store: false` chains. A connection ends
after `websocket_max_minutes` with the error code `websocket_connection_limit_reached` (clients such as Codex
reconnect on it). If the client goes away, the running response is cancelled, which closes the upstream
request, exactly as an HTTP client disconnect does.

The queue is bounded: at most `QUEUE_FRAMES` requests and `max_body_bytes` bytes of them wait (counted
before a frame is parsed); a request past either bound is answered with an error frame
(`websocket_queue_full`) instead of being kept, and past `QUEUE_JOBS` waiting answers the reader stops
reading (the client's sends wait, as TCP makes them). At SIGTERM (edge.py) the connection drains like an HTTP
stream: the running turn finishes, or is ended at the drain timeout with a stored `response.failed`
(`server_shutting_down`) sent as frames; requests still waiting get a `server_shutting_down` error frame;
then the connection closes (1012). A client that stops reading has its turn ended the same way, stored,
before the edge drops the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from .. import access, metrics, offload
from ..edge import edge_of
from ..errors import SERVER_ERROR, APIError, RateLimited
from ..pipeline import SHUTTING_DOWN, ending
from ..protocol.bounds import loads
from ..protocol.request import request_from
from ..respond import start
from ..services import Services, of
from .errors import error_response
from .nul import check_json
from .streaming import GRACE, end_from_outside
from .ws_cache import LastResponse

log = logging.getLogger("responses_gateway.websocket")

# Fields of response.create that are about the transport, not the response. `stream` and `stream_options`
# are accepted and ignored (Codex always sends `"stream": true`); `generate` is the warm-up switch.
ENVELOPE = ("type", "stream", "stream_options", "generate")

LIMIT_REACHED = "websocket_connection_limit_reached"
QUEUE_FRAMES = 16  # requests waiting on one connection (the one running not counted); error frames past it
QUEUE_JOBS = 64  # anything waiting (requests and error answers): past it the reader stops reading

MESSAGES = {kind: metrics.websocket_messages.labels(type=kind)
            for kind in ("response.create", "response.processed", "invalid")}


async def responses_websocket(websocket: WebSocket) -> None:
    services = of(websocket.app)
    if services.settings.websocket == "off":
        return await refuse(websocket)
    await websocket.accept()
    metrics.websocket_connections.inc()
    opened = access.websocket_opened(websocket.scope) if services.settings.access_log else None
    try:
        await Connection(websocket, services).serve()
    finally:
        if opened is not None:
            access.websocket_closed(websocket.scope, opened)


async def refuse(websocket: WebSocket) -> None:
    """WebSocket mode switched off: refuse the upgrade with a 426 so clients fall back to HTTP."""
    body = APIError(426, "WebSocket mode is not enabled on this gateway; use HTTP POST /v1/responses.",
                    code="websocket_not_supported").body()
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(error_response(426, body))
    else:
        await websocket.close(code=1008)


def error_frame(exc: APIError) -> str:
    """The WebSocket error envelope: the HTTP status the same failure would have, and OpenAI's error object."""
    return orjson.dumps({"type": "error", "status": exc.status, "error": {
        "type": exc.type, "code": exc.code or exc.type, "message": exc.message, "param": exc.param,
    }}).decode()


class _Limit:
    """Queued when the connection's lifetime is over: the worker ends the connection when it gets here."""


LIMIT = _Limit()


class _Drain:
    """Queued at SIGTERM: the worker closes the connection (1012) when it gets here."""


DRAIN = _Drain()

@dataclass
class _Create:
    """A response.create frame, and its size: a large one is worked on off the event loop (offload.py)."""

    frame: dict[str, Any]
    size: int


Job = _Create | APIError | _Limit | _Drain  # a response.create frame, an error to answer, or the end


class Connection:
    def __init__(self, websocket: WebSocket, services: Services):
        self.websocket = websocket
        self.services = services
        self.settings = services.settings
        self.owner = websocket.scope.get("state", {}).get("owner", "")
        self.last = LastResponse(services.store, services.toolbox)
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.waiting = 0  # requests in the queue, and their bytes
        self.waiting_bytes = 0
        self.room = asyncio.Event()  # set when the worker takes a job
        self.worker: asyncio.Task[None] | None = None
        self.delivering = False  # a response is being delivered
        self.ending = False  # ... and is being ended from outside: a disconnect must not cut that short
        self.draining = False
        edge = edge_of(websocket.scope)
        if edge is not None:
            edge.on_stall = self.stalled
            edge.on_shutdown = self.drain

    async def serve(self) -> None:
        self.worker = worker = asyncio.create_task(self.work())
        timer = asyncio.get_running_loop().call_later(self.settings.websocket_max_minutes * 60,
                                                      self.queue.put_nowait, LIMIT)
        try:
            await self.read(worker)
        finally:
            timer.cancel()
            if not self.ending:
                worker.cancel()  # the client is gone: a running response is cancelled, closing its upstream
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def read(self, worker: asyncio.Task[None]) -> None:
        """Frames off the socket into the queue, until the client leaves or the worker closes the connection."""
        receive = self.websocket.receive
        while True:
            while self.queue.qsize() >= QUEUE_JOBS and not worker.done():  # the worker is behind: read no
                self.room.clear()  # more until it catches up (the client's sends wait, as TCP makes them)
                await self.room.wait()
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            parsed: dict[str, Any] | APIError | None
            if self.waiting and self.waiting_bytes + len(data) > self.settings.max_body_bytes:
                parsed = self.queue_full()  # too many bytes waiting: refused before it is parsed
            else:
                offload.mark(len(data))  # this reader task's: the worker marks each response it starts
                parsed = await offload.run(self.parse, data)
                if isinstance(parsed, dict) and self.waiting >= QUEUE_FRAMES:
                    parsed = self.queue_full()
            MESSAGES["response.processed" if parsed is None else "response.create" if isinstance(parsed, dict)
                     else "invalid"].inc()
            if isinstance(parsed, dict):
                self.waiting += 1
                self.waiting_bytes += len(data)
                self.queue.put_nowait(_Create(parsed, len(data)))
            elif parsed is not None:
                self.queue.put_nowait(parsed)

    def queue_full(self) -> APIError:
        """The answer to a request that does not fit in the queue: past the bytes waiting (checked before the
        frame is parsed; one request always fits, its own size checked as it is parsed) or, once parsed, past
        the requests waiting."""
        frames, limit = self.waiting, self.settings.max_body_bytes
        return APIError(429, f"Too many requests are waiting on this WebSocket connection ({frames} requests, "
                        f"{self.waiting_bytes} bytes; the limits are {QUEUE_FRAMES} requests and {limit} bytes). "
                        "Send the next request when a response has ended, or use another connection.",
                        type="requests", code="websocket_queue_full")

    def parse(self, data: str | bytes) -> dict[str, Any] | APIError | None:
        """A response.create frame, the error to answer instead, or None for a frame that needs no answer."""
        door = self.services.door  # the bounds of an HTTP body
        try:
            door.check_size(len(data), "Message")
            raw = data.encode() if isinstance(data, str) else data
            layout = door.scan(raw)
            check_json(raw)  # NUL refused as in an HTTP body (api/nul.py)
            frame = loads(raw, layout if offload.is_large() else None)
        except APIError as exc:  # too large, too deep, too many objects, an integer wider than 64 bits
            return exc
        except orjson.JSONDecodeError as exc:
            return APIError(400, f"The message is not valid JSON: {exc}.", code="invalid_json")
        kind = frame.get("type") if isinstance(frame, dict) else None
        if kind == "response.create":
            return frame  # type: ignore[no-any-return]  # a dict, checked above
        if kind == "response.processed":
            return None  # Codex's acknowledgement of a finished response: nothing to answer
        if kind is None:
            return APIError(400, "Each message must be a JSON object with a 'type', such as "
                            "{\"type\": \"response.create\", ...}.", param="type", code="invalid_value")
        return APIError(400, f"Unknown message type '{str(kind)[:64]}'. Supported values are: "
                        "'response.create'.", param="type", code="invalid_value")

    async def work(self) -> None:
        try:
            while True:
                job = await self.queue.get()
                self.room.set()
                if isinstance(job, _Limit):
                    return await self.end()
                if isinstance(job, _Drain):
                    return await self.websocket.close(code=1012)  # "service restart"
                if isinstance(job, APIError):
                    await self.send(error_frame(job))
                    continue
                self.waiting -= 1
                self.waiting_bytes -= job.size
                if self.draining:
                    await self.send(error_frame(APIError(503, SHUTTING_DOWN, type="server_error",
                                                         code="server_shutting_down")))
                else:
                    offload.mark(job.size)
                    await self.respond(job.frame)
        except (OSError, WebSocketDisconnect):  # a send to a closed connection (Starlette turns the server's
            pass  # OSError into WebSocketDisconnect); the reader sees the disconnect and ends the connection
        finally:
            self.room.set()  # a reader waiting for room reads on, and sees the connection end

    def stalled(self, error: APIError) -> None:
        """The client reads nothing (edge.py): the running turn ends with `error`, stored; the edge then drops
        the connection."""
        if self.delivering and not self.ending and self.worker is not None:
            self.ending = True
            self.worker.cancel(error)

    def drain(self) -> None:
        """SIGTERM: no new turn starts; the running one finishes (or the drain timeout ends it, stored and sent
        as frames); then the connection closes."""
        self.draining = True
        self.queue.put_nowait(DRAIN)

    async def respond(self, frame: dict[str, Any]) -> None:
        """One turn, admitted as an HTTP request is (door.py); its place is held until its last event is sent."""
        try:
            ticket = await self.services.door.admit(self.owner)
        except RateLimited as exc:
            self.last.forget()
            return await self.send(error_frame(exc))
        try:
            await self.turn(frame)
        finally:
            await ticket.release()

    async def turn(self, frame: dict[str, Any]) -> None:
        last = self.last
        try:
            generate = frame.get("generate", True)
            if frame.get("background"):
                raise APIError(400, "Background responses are not available in WebSocket mode; use HTTP.",
                               param="background", code="unsupported_parameter")
            if not isinstance(generate, bool):
                raise APIError(400, "Invalid type for 'generate': expected a boolean.", param="generate",
                               code="invalid_type")
            body = {k: v for k, v in frame.items() if k not in ENVELOPE}
            req = await offload.run(request_from, body)

            async def then(final: dict[str, Any]) -> None:  # after the store, before the terminal event goes out
                last.remember(started.composer.stored(), started.history)

            started = await start(self.services, req, self.owner, resolver=last.resolve, then=then,
                                  generate=generate)
        except APIError as exc:
            last.forget()
            return await self.send(error_frame(exc))
        except Exception:
            log.exception("WebSocket request failed inside the gateway")
            last.forget()
            return await self.send(error_frame(SERVER_ERROR))
        await self.deliver(started.batches)

    async def deliver(self, batches: AsyncGenerator[list[dict[str, Any]], None]) -> None:
        """The response's events as frames. Ended from outside while a send waits on the client (the drain,
        a client that reads nothing: pipeline.ending), it is handed to the pipeline, which ends and stores it;
        its last frames go out if the client takes them within GRACE."""
        send = self.websocket.send
        self.delivering = True
        try:
            async for events in batches:
                for event in events:
                    await send({"type": "websocket.send", "text": orjson.dumps(event).decode()})
        except asyncio.CancelledError as exc:
            if ending(exc) is None:
                raise
            self.ending = True
            last = await end_from_outside(batches, exc) or []
            try:
                async with asyncio.timeout(GRACE):
                    for event in last:
                        await send({"type": "websocket.send", "text": orjson.dumps(event).decode()})
            except TimeoutError:  # the client takes nothing: drop the connection (a close would wait on it too)
                edge = edge_of(self.websocket.scope)
                if edge is not None:
                    edge.abort()
        finally:
            self.delivering = self.ending = False
            await batches.aclose()

    async def send(self, text: str) -> None:
        await self.websocket.send({"type": "websocket.send", "text": text})

    async def end(self) -> None:
        """The lifetime limit: say so (every request still waiting gets the same answer), then close."""
        minutes = f"{self.settings.websocket_max_minutes:g}"
        error = APIError(400, f"WebSocket connection limit reached ({minutes} minutes). Create a new WebSocket "
                         "connection to continue.", code=LIMIT_REACHED)
        await self.send(error_frame(error))
        while not self.queue.empty():
            if isinstance(self.queue.get_nowait(), _Create):
                await self.send(error_frame(error))
        await self.websocket.close(code=1000)
