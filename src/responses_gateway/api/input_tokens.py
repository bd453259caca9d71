"""POST /v1/responses/input_tokens: how many input tokens a request would use, without generating.

Exact when the upstream can count (an adapter with `count_tokens`), otherwise the documented estimate of
tokens.py. The body is the subset of a create request that shapes the input.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from .. import offload, tokens
from ..protocol.request import CreateResponse, Reasoning, StrictModel, Text, check_semantics, to_api_error
from ..respond import prepare
from ..services import of
from .request import ClientGone, cancelled_if_client_leaves, owner, read_body


class InputTokensRequest(StrictModel):
    model: str | None = None
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning: Reasoning | None = None
    text: Text | None = None
    truncation: Literal["auto", "disabled"] | None = None
    personality: str | None = None


def parse(raw: bytes | bytearray) -> CreateResponse:
    try:
        body = InputTokensRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise to_api_error(exc) from None
    fields = body.model_dump(exclude_none=True, exclude={"personality"}, by_alias=True)
    req = CreateResponse.model_construct(**{"model": "", **fields, "reasoning": body.reasoning, "text": body.text})
    check_semantics(req)
    return req


async def count_input_tokens(request: Request) -> Response:
    req = await offload.run(parse, await read_body(request))
    try:
        async with cancelled_if_client_leaves(request):  # an upstream count must not outlive its client
            prepared = await prepare(of(request.app), req, owner(request))
            counter = getattr(prepared.upstream, "count_tokens", None)
            count = await counter(prepared.call) if counter is not None else None
    except ClientGone:
        return Response(status_code=499)
    if count is None:
        count = tokens.estimate(prepared.call.items, req.instructions, req.tools)
    return Response(orjson.dumps({"object": "response.input_tokens", "input_tokens": count}),
                    media_type="application/json")
