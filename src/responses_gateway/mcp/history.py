"""MCP items, as the model sees them: plain tool calls and their results.

Adapters know nothing of MCP. Before any upstream sees the history, each `mcp_call` becomes a function
call (named `<server_label>__<tool>` on the wire, via its namespace) followed by its output, and a declined
approval request becomes a call answered "declined". Tool lists and pending approvals are not shown.
"""

from __future__ import annotations

from typing import Any

DECLINED = "The user declined to run this tool call."
CLIENT_CALLS = ("function_call", "custom_tool_call", "tool_search_call")  # the calls the client runs itself


def lower_mcp(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not any(item["type"].startswith("mcp_") for item in items):
        return items
    declined = {i["approval_request_id"] for i in items
                if i["type"] == "mcp_approval_response" and not i["approve"]}
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []  # outputs wait until the run of calls ends: one assistant turn, then results
    for item in items:
        kind = item["type"]
        if kind == "mcp_call":
            error = item.get("error")
            call, result = _pair(item, f"Error: {error_text(error)}" if error else (item.get("output") or ""))
        elif kind == "mcp_approval_request" and item.get("id") in declined:
            call, result = _pair(item, DECLINED)
        elif kind in ("mcp_list_tools", "mcp_approval_request", "mcp_approval_response"):
            continue  # a tool list, an approval still pending or approved (its mcp_call says the rest)
        else:
            if kind not in CLIENT_CALLS:
                out += results
                results = []
            out.append(item)
            continue
        out.append(call)
        results.append(result)
    return out + results


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


def _pair(item: dict[str, Any], output: str) -> tuple[dict[str, Any], dict[str, Any]]:
    call_id = item.get("id") or "mcp_call"
    return (
        {"type": "function_call", "call_id": call_id, "name": item["name"], "namespace": item["server_label"],
         "arguments": item.get("arguments") or "{}"},
        {"type": "function_call_output", "call_id": call_id, "output": output},
    )
