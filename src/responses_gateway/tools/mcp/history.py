"""MCP items, as the model sees them: plain tool calls and their results.

Each `mcp_call` becomes a function call (named `<server_label>__<tool>` on the wire, via its namespace)
followed by its output, and a declined approval request becomes a call answered "declined". Tool lists and
pending approvals are not shown.
"""

from __future__ import annotations

from typing import Any

from ..frame import Lowering

DECLINED = "The user declined to run this tool call."
_DECLINED_MARK = "declined"  # set on an approval request the client declined, by `mark_declined` (never stored)

Item = dict[str, Any]


def mark_declined(items: list[Item], lowering: Lowering | None = None) -> list[Item]:
    """Approval requests that a later `mcp_approval_response` declined, marked so `lower` can answer them."""
    declined = {i["approval_request_id"] for i in items
                if i["type"] == "mcp_approval_response" and not i["approve"]}
    if not declined:
        return items
    return [{**item, _DECLINED_MARK: True} if item["type"] == "mcp_approval_request" and item.get("id") in declined
            else item for item in items]


def lower(item: Item) -> tuple[Item, Item] | None:
    kind = item["type"]
    if kind == "mcp_call":
        error = item.get("error")
        return _pair(item, f"Error: {error_text(error)}" if error else (item.get("output") or ""))
    if kind == "mcp_approval_request" and item.get(_DECLINED_MARK):
        return _pair(item, DECLINED)
    return None  # a tool list, an approval still pending or approved (its mcp_call says the rest)


def error_text(error: Any) -> str:
    """An mcp_call error as words: a string (older shape), or OpenAI's error object."""
    if isinstance(error, dict):
        if error.get("message"):
            return str(error["message"])
        content = error.get("content")
        if isinstance(content, list):
            return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict)) or "the tool failed"
        return str(content or "the tool failed")
    return str(error)


def _pair(item: Item, output: str) -> tuple[Item, Item]:
    call_id = item.get("id") or "mcp_call"
    return (
        {"type": "function_call", "call_id": call_id, "name": item["name"], "namespace": item["server_label"],
         "arguments": item.get("arguments") or "{}"},
        {"type": "function_call_output", "call_id": call_id, "output": output},
    )
