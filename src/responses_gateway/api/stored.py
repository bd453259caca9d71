"""Stored responses: retrieve, delete, input_items, cancel."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ..errors import APIError, invalid, unsupported
from ..protocol.reasoning import seal
from ..protocol.request import INCLUDE_VALUES
from ..state import not_found
from .responses import owner


def _json(obj) -> Response:
    return Response(orjson.dumps(obj), media_type="application/json")


def _include(request: Request) -> list[str]:
    values = request.query_params.getlist("include") + request.query_params.getlist("include[]")
    for i, value in enumerate(values):
        if value not in INCLUDE_VALUES:
            raise invalid(f"Invalid value: '{value}'. Supported values are: "
                          + ", ".join(f"'{v}'" for v in INCLUDE_VALUES) + ".", f"include[{i}]")
    return values


async def _get(request: Request) -> dict:
    response_id = request.path_params["response_id"]
    store = request.app.state.store
    found = await store.get(response_id, owner(request)) if store is not None else None
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
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid(f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", "order")
    try:
        limit = int(q.get("limit", "20"))
    except ValueError:
        raise APIError(400, "Invalid type for 'limit': expected an integer.", param="limit",
                       code="invalid_type") from None
    if not 1 <= limit <= 100:
        raise invalid(f"Invalid 'limit': expected a value between 1 and 100, but got {limit} instead.", "limit")
    response_id = request.path_params["response_id"]
    store = request.app.state.store
    page = None
    if store is not None:
        page = await store.input_items(response_id, owner(request), after=q.get("after"), before=q.get("before"),
                                       limit=limit, order=order)
    if page is None:
        raise not_found(response_id)
    data = page.items
    return _json({
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": page.has_more,
    })
