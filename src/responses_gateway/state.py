"""History: `previous_response_id`, `item_reference` and reasoning items sent by id alone resolved into the
full list of input items.

Follows OpenAI on inheritance: the previous chain's input and output items are inherited, in order;
`instructions` and `tools` are not (each request brings its own).
"""

from __future__ import annotations

from typing import Any

from . import offload
from .errors import APIError
from .ids import new_id
from .protocol.items import normalize_item
from .protocol.tools import Toolbox
from .store.conversations import Conversations
from .store.responses import Responses

ID_PREFIX = {
    "message": "msg", "function_call": "fc", "function_call_output": "fco", "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco", "reasoning": "rs", "tool_search_call": "tsc", "tool_search_output": "tso",
    "mcp_approval_response": "mcpa", "mcp_call": "mcp", "mcp_list_tools": "mcpl", "mcp_approval_request": "mcpr",
    "compaction": "cmp", "context_compaction": "cmp", "computer_call": "cu", "computer_call_output": "cuo",
}


def not_found(response_id: str, param: str | None = None, code: str | None = None) -> APIError:
    status = 400 if param else 404
    return APIError(status, f"Response with id '{response_id}' not found.", param=param, code=code)


def previous_not_found(previous_response_id: str) -> APIError:
    return APIError(400, f"Previous response with id '{previous_response_id}' not found.",
                    param="previous_response_id", code="previous_response_not_found")


async def resolve(store: Responses | None, previous_response_id: str | None, items: list[dict[str, Any]],
                  owner: str, toolbox: Toolbox) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(history for the upstream, this request's items as they will be stored). Raises before any stream.
    `toolbox`: the gateway-run tools, whose kits normalize their stored items."""
    refs = [item["id"] for item in items if item["type"] == "item_reference"]
    if (previous_response_id or refs) and store is None:
        raise APIError(400, "This gateway keeps no state (it runs with --db none): previous_response_id and "
                       "item_reference are unavailable.", param="previous_response_id" if previous_response_id
                       else "input", code="unsupported_parameter")
    history: list[dict[str, Any]] = []
    if previous_response_id and store is not None:
        found = await store.history(previous_response_id, owner)
        if found is None:
            running = await store.get(previous_response_id, owner)
            if running is not None:  # a background response still queued or in progress
                raise APIError(400, f"Previous response with id '{previous_response_id}' is still "
                               f"{running['status']}; chain from it once it has finished.",
                               param="previous_response_id", code="previous_response_not_finished")
            raise previous_not_found(previous_response_id)
        history = [normalize_item(item, "previous_response", toolbox) for item in found]
    bare = [item["id"] for item in items if _bare_reasoning(item) or _replayed_tool_item(item, toolbox)]
    if (refs or bare) and store is not None:
        stored = await store.items_by_id(refs + bare, owner)
        resolved = []
        for i, item in enumerate(items):
            if item["type"] == "item_reference":
                if item["id"] not in stored:
                    raise APIError(404, f"Item with id '{item['id']}' not found.", param=f"input[{i}]",
                                   code=None)
                item = normalize_item(stored[item["id"]], f"input[{i}]", toolbox)
            elif _bare_reasoning(item) and _sealed_reasoning(stored.get(item["id"])) or _replayed_tool_item(item, toolbox) and stored.get(item["id"], {}).get("type") == item["type"]:
                item = normalize_item(stored[item["id"]], f"input[{i}]", toolbox)
            resolved.append(item)
        items = resolved
    return history + items, await offload.run(with_ids, items)


def _bare_reasoning(item: dict[str, Any]) -> bool:
    """A reasoning item sent back without its encrypted_content (`{"id": "rs_…", "type": "reasoning",
    "summary": [], "content": [...]}`, as the Agents SDK, LangChain and pydantic-ai replay it when they did not
    ask for `reasoning.encrypted_content`): the stored copy of that id brings back what the upstream needs to
    continue (Anthropic's signed thinking rides in it). Not found, the item stays as sent; an adapter that
    needs more leaves out what it cannot continue."""
    return item["type"] == "reasoning" and isinstance(item.get("id"), str) and not item.get("encrypted_content")


def _replayed_tool_item(item: dict[str, Any], toolbox: Toolbox) -> bool:
    """A gateway-run tool's item sent back by value (clients replay output items as they were shown, without
    what `include` left out — a file search's results, a code interpreter's outputs): the stored copy of that
    id is the whole item, so the model sees on this turn what it saw on the first."""
    return isinstance(item.get("id"), str) and item["type"] in toolbox.by_item


def _sealed_reasoning(item: dict[str, Any] | None) -> bool:
    return item is not None and item.get("type") == "reasoning" and bool(item.get("encrypted_content"))


async def conversation_history(store: Conversations | None, conversation: str, owner: str,
                               toolbox: Toolbox) -> list[dict[str, Any]]:
    """A conversation's items, oldest first, as history for a response created in it."""
    found = await store.conversation_history(conversation, owner) if store is not None else None
    if found is None:
        raise APIError(404, f"Conversation with id '{conversation}' not found.", param="conversation", code=None)
    return [normalize_item(item, "conversation", toolbox) for item in found]


def with_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items as stored and listed: each with an id, messages with a status, as OpenAI lists them."""
    out = []
    for item in items:
        if "id" not in item:
            item = {"id": new_id(ID_PREFIX.get(item["type"], "item")), **item}
        if item["type"] == "message" and "status" not in item:
            item = {**item, "status": "completed"}
        out.append(item)
    return out
