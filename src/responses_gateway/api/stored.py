"""Stored responses: retrieve, delete, input_items, cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from ..errors import APIError, invalid
from ..protocol.reasoning import seal
from ..protocol.request import check_include
from ..services import of
from ..state import not_found
from ..tools.history import restored, shown_items
from .paging import page_body, page_params
from .request import json_response, owner
from .streaming import EventStreamResponse

if TYPE_CHECKING:
    from ..background import Background


def include_param(request: Request) -> list[str]:
    """The `include` query values, each checked."""
    values = request.query_params.getlist("include") + request.query_params.getlist("include[]")
    check_include(values, of(request.app).toolbox.includes)
    return values


async def _get(request: Request) -> dict[str, Any]:
    response_id = request.path_params["response_id"]
    store = of(request.app).store
    found: dict[str, Any] | None = await store.get(response_id, owner(request)) if store is not None else None
    if found is None:
        raise not_found(response_id)
    return found


async def get_response(request: Request) -> Response | EventStreamResponse:
    include = include_param(request)
    if request.query_params.get("stream") in ("true", "1"):
        return await _stream(request)
    obj = await _get(request)
    kept = await restored(obj["output"], of(request.app).store, owner(request))  # (an image in the files store)
    obj["output"] = shown_items(kept, include)  # a tool's results only when include asks for them
    wanted = "reasoning.encrypted_content" in include
    for item in obj["output"]:
        if item.get("type") != "reasoning":
            continue
        if not wanted:
            item.pop("encrypted_content", None)  # stored for later turns; shown only when asked for
        elif not item.get("encrypted_content"):
            parts = item.get("content") or item.get("summary") or ()
            item["encrypted_content"] = seal("".join(p.get("text", "") for p in parts))
    return json_response(obj)


async def delete_response(request: Request) -> Response:
    response_id = request.path_params["response_id"]
    store = of(request.app).store
    if store is None or not await store.delete(response_id, owner(request)):
        raise not_found(response_id)
    return json_response({"id": response_id, "object": "response.deleted", "deleted": True})


def _starting_after(request: Request) -> int:
    raw = request.query_params.get("starting_after")
    if raw is None or raw == "":
        return -1
    try:
        value = int(raw)
    except ValueError:
        raise APIError(400, "Invalid type for 'starting_after': expected an integer.", param="starting_after",
                       code="invalid_type") from None
    if value < -1:
        raise invalid(f"Invalid 'starting_after': expected a value >= 0, but got {value} instead.",
                      "starting_after")
    return value


async def _stream(request: Request) -> EventStreamResponse:
    """GET ?stream=true[&starting_after=N]: a background response's events after N, then live to its end."""
    after = _starting_after(request)
    obj = await _get(request)
    if not obj.get("background"):
        raise APIError(400, "Only responses created with background=true can be streamed.", param="stream",
                       code=None)
    jobs = background_of(request)
    if await jobs.log_expired(obj):
        hours = of(request.app).settings.event_retention_hours
        raise APIError(400, f"The events of response '{obj['id']}' are no longer kept (event logs are kept "
                            f"{hours:g} hours); retrieve the response without stream=true.", param="stream",
                       code="event_log_expired")
    return EventStreamResponse(jobs.follow(obj["id"], owner(request), after), encoded=True)


async def cancel_response(request: Request) -> Response:
    obj = await _get(request)
    if not obj.get("background"):
        raise APIError(400, "Only responses created with background=true can be cancelled.", code=None)
    ended = await background_of(request).cancel(obj, owner(request))
    output = await restored(list(ended.get("output") or []), of(request.app).store, owner(request))
    return json_response({**ended, "output": shown_items(output, ())})


def background_of(request: Request) -> Background:
    """The background jobs, there whenever a stored response was found (both come with the store)."""
    jobs = of(request.app).background
    if jobs is None:
        raise RuntimeError("a response was found in the store, but background jobs (which come with it) are not")
    return jobs


async def list_input_items(request: Request) -> Response:
    q = request.query_params
    include = include_param(request)
    limit, order = page_params(q)
    response_id = request.path_params["response_id"]
    store = of(request.app).store
    page = None
    if store is not None:
        page = await store.input_items(response_id, owner(request), after=q.get("after"), before=q.get("before"),
                                       limit=limit, order=order)
    if page is None:
        raise not_found(response_id)
    page.items = shown_items(await restored(page.items, store, owner(request)), include)
    return json_response(page_body(page))
