"""POST /v1/responses over HTTP: read and validate the body, start the response, stream it or return it whole."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..errors import APIError
from ..protocol.request import parse_request
from ..respond import start
from .errors import error_response
from .streaming import EventStreamResponse


async def read_body(request: Request, limit: int) -> bytes:
    too_large = APIError(413, f"Request body too large: the limit is {limit} bytes.", code="request_too_large")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise too_large
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


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
    req = parse_request(await read_body(request, state.settings.max_body_bytes))
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
        error = final["error"] or {}
        return error_response(502, {"error": {"message": error.get("message"), "type": "server_error",
                                              "param": None, "code": error.get("code")}})
    return Response(orjson.dumps(final), media_type="application/json")
