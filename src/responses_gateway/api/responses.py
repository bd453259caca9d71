"""POST /v1/responses over HTTP: read and validate the body, start the response, stream it or return it whole."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from .. import offload
from ..errors import APIError, invalid
from ..protocol.bounds import Bounds, InputLayout, check_body
from ..protocol.request import CreateResponse, parse_request
from ..respond import start
from .errors import error_response
from .streaming import EventStreamResponse


async def read_body(request: Request, limit: int) -> bytes | bytearray:
    """The whole body, refused with a 413 above `limit` bytes and a 400 when it costs too much to parse."""
    raw, _ = await _read_checked(request, limit)
    return raw


async def read_request(request: Request) -> CreateResponse:
    """The validated body of POST /v1/responses; a large one is parsed in a worker thread, its input items
    one by one (so no single step holds the GIL for long)."""
    settings = request.app.state.settings
    raw, layout = await _read_checked(request, settings.max_body_bytes)
    req = await offload.run(parse_request, raw, layout if offload.is_large() else None)
    if isinstance(req.input, list) and len(req.input) > settings.max_input_items:
        raise invalid(f"Invalid 'input': array too long. Expected an array with maximum length "
                      f"{settings.max_input_items}, but got an array with length {len(req.input)} instead.",
                      "input", "array_above_max_length")
    return req


async def _read_checked(request: Request, limit: int) -> tuple[bytes | bytearray, InputLayout | None]:
    raw = await _read(request, limit)
    offload.mark(len(raw))  # what this request's items cost is paid in a worker thread too (offload.py)
    settings = request.app.state.settings
    layout = await offload.run(check_body, raw, Bounds(settings.max_json_depth, settings.max_json_containers))
    return raw, layout


async def _read(request: Request, limit: int) -> bytes | bytearray:
    too_large = APIError(413, f"Request body too large: the limit is {limit} bytes.", code="request_too_large")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise too_large
    # Appended chunk by chunk as it arrives: one join of tens of MB at the end would be a single step of
    # tens of milliseconds on the event loop (most of it page faults on the fresh memory).
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise too_large
        body += chunk
    return body


def owner(request: Request) -> str:
    who: str = request.scope.get("state", {}).get("owner", "")
    return who


class ClientGone(Exception):
    """The client hung up while the gateway was still working for it."""


@contextlib.asynccontextmanager
async def cancelled_if_client_leaves(request: Request) -> AsyncIterator[None]:
    """Run the block in this task, cancelled the moment the client goes away: waiting for the upstream's
    headers, or for a whole non-streamed answer, must not keep a model generating for nobody (once streaming,
    the SSE sink watches). The work stays in this task, so nothing waits for a task switch."""
    task = asyncio.current_task()
    assert task is not None
    gone = False

    async def watch() -> None:
        nonlocal gone
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone = True
        task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        yield
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()
        raise ClientGone from None
    finally:
        watcher.cancel()


async def create_response(request: Request) -> Response | EventStreamResponse:
    state = request.app.state
    req = await read_request(request)
    if req.background:
        return await _background(state, req, owner(request))
    try:
        async with cancelled_if_client_leaves(request):
            started = await start(state, req, owner(request))
            if not req.stream:
                async for _ in started.batches:
                    pass
    except ClientGone:
        return Response(status_code=499)  # nobody reads it; the upstream call was closed
    if req.stream:
        return EventStreamResponse(started.batches, state.settings.sse_keepalive or None)
    final = started.final
    if final["status"] == "failed":
        kept = req.store is not False and await is_stored(state, final["id"], owner(request))
        return failed_response(final, stored=kept)
    return Response(orjson.dumps(final), media_type="application/json")


async def is_stored(state: Any, response_id: str, owner: str) -> bool:
    """Whether GET /v1/responses/{id} finds the response now: a failed response whose write failed too is not
    there, and the store is asked rather than assumed. Bounded like /health: the database that just
    refused a write may not answer at all."""
    if state.store is None:
        return False
    try:
        found = await asyncio.wait_for(state.store.get(response_id, owner), state.settings.health_db_timeout)
    except Exception:
        return False
    return found is not None


def failed_response(final: dict[str, Any], *, stored: bool) -> Response:
    """A non-streamed response that failed: a 502 whose message (and `x-response-id` header) names the
    response and says whether it was stored, so the client knows whether GET /v1/responses/{id} finds it."""
    error = final["error"] or {}
    rid = final["id"]
    note = f"response {rid} was stored with status failed" if stored else f"response {rid} was not stored"
    message = f"{error.get('message') or 'The response failed.'} ({note})"
    return error_response(502, {"error": {"message": message, "type": "server_error", "param": None,
                                          "code": error.get("code")}}, headers={"x-response-id": rid})


async def _background(state: Any, req: CreateResponse, key: str) -> Response | EventStreamResponse:
    """Start a background response (background.py) and answer at once: the queued response, or a stream that
    follows its event log (a client that leaves does not stop the response)."""
    jobs = state.background
    if jobs is None:
        raise APIError(400, "Background responses need a response store; this gateway runs with --db none.",
                       param="background", code="invalid_value")
    jobs.admit()
    started = await start(state, req, key)
    queued = await jobs.submit(started)
    if req.stream:
        return EventStreamResponse(jobs.follow(queued["id"], key, -1), encoded=True)
    return Response(orjson.dumps(queued), media_type="application/json")
