"""The Conversations API: a conversation is a list of items owned by one API key, kept until deleted.

Responses created with `conversation` read its items as history and append their own input and output when
they finish (see respond.py and docs/conversations.md for the rule).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .. import offload
from ..errors import APIError
from ..ids import new_id
from ..protocol.conversations import parse_create, parse_items, parse_update
from ..services import of
from ..state import with_ids
from ..store.base import Page
from ..store.conversations import Conversations
from ..tools.history import restored, shown_items
from .paging import page_body, page_params
from .request import json_response, owner, read_body
from .stored import include_param


def not_found(conversation_id: str) -> APIError:
    return APIError(404, f"Conversation with id '{conversation_id}' not found.", code=None)


def _store(request: Request) -> Conversations:
    store: Conversations | None = of(request.app).store
    if store is None:
        raise APIError(400, "This gateway keeps no state (it runs with --db none): conversations are "
                       "unavailable.", code="unsupported_parameter")
    return store


async def _body(request: Request) -> bytes | bytearray:
    return await read_body(request)


async def _existing(request: Request) -> dict[str, Any]:
    cid = request.path_params["conversation_id"]
    found = await _store(request).get_conversation(cid, owner(request))
    if found is None:
        raise not_found(cid)
    return found


async def create_conversation(request: Request) -> Response:
    items, metadata = await offload.run(parse_create, await _body(request), of(request.app).toolbox)
    store = _store(request)
    conversation = {"id": new_id("conv"), "object": "conversation", "created_at": int(time.time()),
                    "metadata": metadata}
    await store.create_conversation(conversation, with_ids(items), owner(request))
    return json_response(conversation)


async def get_conversation(request: Request) -> Response:
    return json_response(await _existing(request))


async def update_conversation(request: Request) -> Response:
    metadata = parse_update(await _body(request))
    conversation = await _existing(request)
    await _store(request).update_conversation(conversation["id"], owner(request), metadata)
    return json_response({**conversation, "metadata": metadata})


async def delete_conversation(request: Request) -> Response:
    cid = request.path_params["conversation_id"]
    if not await _store(request).delete_conversation(cid, owner(request)):
        raise not_found(cid)
    return json_response({"id": cid, "object": "conversation.deleted", "deleted": True})


async def add_items(request: Request) -> Response:
    include_param(request)
    items = await offload.run(with_ids, await offload.run(parse_items, await _body(request), of(request.app).toolbox))
    conversation = await _existing(request)
    await _store(request).append_conversation(conversation["id"], owner(request), items)
    return json_response(page_body(Page(items, False)))


async def list_items(request: Request) -> Response:
    include = include_param(request)
    limit, order = page_params(request.query_params)
    cid = request.path_params["conversation_id"]
    page = await _store(request).conversation_items(cid, owner(request), after=request.query_params.get("after"),
                                                    limit=limit, order=order)
    if page is None:
        raise not_found(cid)
    page.items = shown_items(await restored(page.items, of(request.app).store, owner(request)), include)
    return json_response(page_body(page))


async def get_item(request: Request) -> Response:
    include = include_param(request)
    conversation = await _existing(request)
    item_id = request.path_params["item_id"]
    item = await _store(request).conversation_item(conversation["id"], item_id, owner(request))
    if item is None:
        raise APIError(404, f"Item with id '{item_id}' not found.", code=None)
    (shown,) = shown_items(await restored([item], of(request.app).store, owner(request)), include)
    return json_response(shown)


async def delete_item(request: Request) -> Response:
    conversation = await _existing(request)
    item_id = request.path_params["item_id"]
    if not await _store(request).delete_conversation_item(conversation["id"], item_id, owner(request)):
        raise APIError(404, f"Item with id '{item_id}' not found.", code=None)
    return json_response(conversation)
