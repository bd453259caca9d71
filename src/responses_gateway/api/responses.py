"""POST /v1/responses: validate, open the upstream, then stream or return the final object."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..composer import Composer
from ..generation import UpstreamError
from ..pipeline import run
from ..protocol.items import found_tools, normalize_input
from ..protocol.request import parse_request
from ..protocol.response import skeleton
from ..protocol.tools import normalize_tools
from ..state import resolve
from ..tools.history import lower_mcp
from ..upstreams.base import Call
from .errors import APIError, error_response
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
    return request.scope.get("state", {}).get("owner", "")


async def create_response(request: Request) -> Response:
    state = request.app.state
    settings = state.settings
    req = parse_request(await read_body(request, settings.max_body_bytes))
    who = owner(request)
    upstream, upstream_model = state.router.pick(req.model)
    history, items = await resolve(state.store, req.previous_response_id, normalize_input(req.input), who)
    tools = normalize_tools(req.tools, req.tool_choice, hosted_policy=settings.hosted_tools,
                            found=found_tools(history))
    call = Call(req, lower_mcp(history), tools, req.instructions, upstream_model)
    include = req.include or ()
    composer = Composer(
        skeleton(req, tools),
        logprobs="message.output_text.logprobs" in include,
        encrypted_reasoning="reasoning.encrypted_content" in include,
        reasoning_summary=bool(req.reasoning and (req.reasoning.summary or req.reasoning.generate_summary)
                               not in (None, "none")),
    )
    loop = stream = None
    if tools.mcp:  # tools are listed inside the stream first, so every step opens inside it
        from ..tools.loop import MCPLoop

        loop = MCPLoop(call, history, upstream, allow_hosts=settings.mcp_hosts(), timeout=settings.mcp_timeout,
                       max_rounds=settings.max_tool_rounds)
    else:
        try:
            stream = await upstream.open(call)
        except UpstreamError as exc:
            raise APIError(exc.status, exc.message, type=exc.type, param=exc.param, code=exc.code) from None
    on_final = None
    if state.store is not None and req.store is not False:
        async def on_final(final: dict) -> None:
            await state.store.save(composer.stored(), items, who)
    batches = run(composer, stream, on_final, loop)
    if req.stream:
        return EventStreamResponse(batches)
    async for _ in batches:
        pass
    final = composer.final
    if final["status"] == "failed":
        error = final["error"] or {}
        return error_response(502, {"error": {"message": error.get("message"), "type": "server_error",
                                              "param": None, "code": error.get("code")}})
    return Response(orjson.dumps(final), media_type="application/json")
