"""Compaction items, as the model sees them: the summary as plain text, and only what it does not cover.

Adapters know nothing of compaction. Before any upstream sees the history, the most recent compaction item
becomes a user message carrying its summary. Of everything before it, the summary covers what the model
wrote; kept verbatim are the messages the model did not write (user, developer, system) — the most recent
first, within KEEP_TOKENS — and the complete tool round trips (calls with their outputs) directly before the
item, as Codex places its latest tool transaction there. Older compaction items are covered too (their
summary was part of what the newer one summarised). A tool call before the item whose output comes after it
is kept, just before that output: never an output without its call, never a call without its output.
"""

from __future__ import annotations

from typing import Any

from ..errors import APIError
from ..tokens import item_tokens
from ..tools.history import CLIENT_CALLS as CALLS

KINDS = ("compaction", "context_compaction", "compaction_trigger")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "tool_search_output", "computer_call_output")
ROUND_TRIP = (*CALLS, *OUTPUTS, "compaction", "context_compaction")
KEEP_TOKENS = 20_000  # estimated tokens of earlier messages kept verbatim beside a summary
SUMMARY_PREFIX = "Summary of the earlier conversation (written when the context was compacted):\n\n"


def has_compaction(items: list[dict[str, Any]]) -> bool:
    return any(item["type"] in KINDS for item in items)


def sealed(item: dict[str, Any]) -> str | None:
    """The sealed content of a compaction item (Codex's `context_compaction` marker may carry none)."""
    return item.get("encrypted_content") if item["type"] in ("compaction", "context_compaction") else None


def misplaced_trigger(items: list[dict[str, Any]]) -> APIError | None:
    for i, item in enumerate(items):
        if item["type"] == "compaction_trigger":
            return APIError(400, "A 'compaction_trigger' item must be the last input item.", param=f"input[{i}]",
                            code="invalid_value")
    return None


def kept_messages(items: list[dict[str, Any]], budget: int = KEEP_TOKENS) -> list[dict[str, Any]]:
    """The messages the model did not write, newest first within `budget` (the newest always), in order."""
    out: list[dict[str, Any]] = []
    left = budget
    for item in reversed(items):
        if item["type"] == "message" and item["role"] != "assistant":
            cost = item_tokens(item)
            if cost > left and out:
                break
            out.append(item)
            left -= cost
    out.reverse()
    return out


def lower_compaction(items: list[dict[str, Any]], summaries: dict[str, str]) -> list[dict[str, Any]]:
    """`summaries`: sealed content → summary text, for every compaction item in `items` (already opened)."""
    last = next((i for i in range(len(items) - 1, -1, -1) if sealed(items[i]) is not None), None)
    content = sealed(items[last]) if last is not None else None
    if last is None or content is None:
        return [item for item in items if item["type"] != "context_compaction"]
    start = last  # the tool round trips (and older compaction items) directly before the compaction item
    while start and items[start - 1]["type"] in ROUND_TRIP:
        start -= 1
    run = [item for item in items[start:last] if item["type"] in CALLS or item["type"] in OUTPUTS]
    answered = {item["call_id"] for item in run if item["type"] in OUTPUTS}
    asked = {item["call_id"] for item in run if item["type"] in CALLS}
    run = [item for item in run if item["call_id"] in answered and item["call_id"] in asked]
    kept = {item["call_id"] for item in run}
    before, after = items[:last], [item for item in items[last + 1:] if item["type"] != "context_compaction"]
    summary = {"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": SUMMARY_PREFIX + summaries[content]}]}
    called = {item["call_id"] for item in after if item["type"] in CALLS}
    waiting = {item["call_id"]: item for item in before
               if item["type"] in CALLS and item["call_id"] not in called and item["call_id"] not in kept}
    tail: list[dict[str, Any]] = []
    for item in after:
        if item["type"] in OUTPUTS and item["call_id"] in waiting:
            tail.append(waiting.pop(item["call_id"]))
        tail.append(item)
    return [*kept_messages(items[:start]), *run, summary, *tail]
