"""POST /v1/responses over HTTP: read and validate the body, start the response, stream it or return it whole."""

from __future__ import annotations

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


async def create_response(request: Request) -> Response | EventStreamResponse:
    state = request.app.state
    req = parse_request(await read_body(request, state.settings.max_body_bytes))
    started = await start(state, req, owner(request))
    if req.stream:
        return EventStreamResponse(started.batches)
    async for _ in started.batches:
        pass
    final = started.final
    if final["status"] == "failed":
        error = final["error"] or {}
        return error_response(502, {"error": {"message": error.get("message"), "type": "server_error",
                                              "param": None, "code": error.get("code")}})
    return Response(orjson.dumps(final), media_type="application/json")
