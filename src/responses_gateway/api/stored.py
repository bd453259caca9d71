"""Stored responses: retrieve, delete, input_items, cancel."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..errors import APIError, invalid, unsupported
from ..protocol.reasoning import seal
from ..protocol.request import INCLUDE_VALUES
from ..state import not_found
from .paging import page_body, page_params
from .responses import owner


def _json(obj: Any) -> Response:
    return Response(orjson.dumps(obj), media_type="application/json")


def _include(request: Request) -> list[str]:
    values = request.query_params.getlist("include") + request.query_params.getlist("include[]")
    for i, value in enumerate(values):
        if value not in INCLUDE_VALUES:
            raise invalid(f"Invalid value: '{value}'. Supported values are: "
                          + ", ".join(f"'{v}'" for v in INCLUDE_VALUES) + ".", f"include[{i}]")
    return values


async def _get(request: Request) -> dict[str, Any]:
    response_id = request.path_params["response_id"]
    store = request.app.state.store
    found: dict[str, Any] | None = await store.get(response_id, owner(request)) if store is not None else None
    if found is None:
        raise not_found(response_id)
    return found


async def get_response(request: Request) -> Response:
    include = _include(request)
    if request.query_params.get("stream") in ("true", "1"):
        raise unsupported("stream", "Streaming a stored response (background mode)")
    obj = await _get(request)
    wanted = "reasoning.encrypted_content" in include
    for item in obj["output"]:
        if item.get("type") != "reasoning":
            continue
        if not wanted:
            item.pop("encrypted_content", None)  # stored for later turns; shown only when asked for
        elif not item.get("encrypted_content"):
            parts = item.get("content") or item.get("summary") or ()
            item["encrypted_content"] = seal("".join(p.get("text", "") for p in parts))
    return _json(obj)


async def delete_response(request: Request) -> Response:
    response_id = request.path_params["response_id"]
    store = request.app.state.store
    if store is None or not await store.delete(response_id, owner(request)):
        raise not_found(response_id)
    return _json({"id": response_id, "object": "response.deleted", "deleted": True})


async def cancel_response(request: Request) -> Response:
    await _get(request)
    raise APIError(400, "Only responses created with background=true can be cancelled.", code=None)


async def list_input_items(request: Request) -> Response:
    q = request.query_params
    _include(request)
    limit, order = page_params(q)
    response_id = request.path_params["response_id"]
    store = request.app.state.store
    page = None
    if store is not None:
        page = await store.input_items(response_id, owner(request), after=q.get("after"), before=q.get("before"),
                                       limit=limit, order=order)
    if page is None:
        raise not_found(response_id)
    return _json(page_body(page))
