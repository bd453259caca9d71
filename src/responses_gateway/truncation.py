"""`truncation: "auto"`: when the input does not fit the model's context, drop the oldest turns and retry.

A turn starts at a user message. Truncation drops whole turns from the front and never drops system or
developer messages (the instructions), compaction summaries, or the last user turn; a tool call's output
never outlives its call. When only the last turn is left and it still does not fit, the upstream's
`context_length_exceeded` error stands, as with `truncation: "disabled"`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from . import tokens
from .errors import UpstreamError
from .upstreams.base import Call, EventStream, Upstream

log = logging.getLogger("responses_gateway.truncation")

KEEP_ROLES = ("system", "developer")
CALL_OUTPUTS = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def _kept(item: dict[str, Any]) -> bool:
    return (item.get("type") == "message" and item.get("role") in KEEP_ROLES) or item.get("type") == "compaction"


def drop_oldest_turn(items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The items without their oldest turn; None when only the last user turn is left."""
    starts = [i for i, item in enumerate(items) if item.get("type") == "message" and item.get("role") == "user"]
    if len(starts) < 2:
        return None
    cut = starts[1]
    dropped_calls = {item.get("call_id") for item in items[:cut] if item.get("type") in CALL_OUTPUTS.values()}
    out = [item for item in items[:cut] if _kept(item)]
    out += [item for item in items[cut:]
            if not (item.get("type") in CALL_OUTPUTS and item.get("call_id") in dropped_calls)]
    return out


def fit(items: list[dict[str, Any]], budget: int, instructions: str | None, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Drop oldest turns until the estimate fits `budget` tokens (or only the last turn is left)."""
    while tokens.estimate(items, instructions, tools) > budget:
        shorter = drop_oldest_turn(items)
        if shorter is None:
            break
        items = shorter
    return items


async def _opened(upstream: Upstream, call: Call) -> EventStream:
    """Open and read up to the first generation events: a Responses upstream reports a context that is too
    long inside a 200 stream (OpenAI does), and that must still count as a refusal we can retry."""
    stream = await upstream.open(call)
    batches = aiter(stream)  # one iterator for the look-ahead and the rest
    ahead: list[list[Any]] = []
    try:
        async for batch in batches:
            ahead.append(batch)
            if batch:
                break
    except BaseException:
        await stream.aclose()
        raise
    return _Replayed(ahead, batches, stream)


class _Replayed:
    """The batches read ahead, then the rest of the stream."""

    def __init__(self, ahead: list[list[Any]], batches: AsyncIterator[list[Any]], stream: EventStream):
        self.ahead = ahead
        self.batches = batches
        self.stream = stream

    async def __aiter__(self) -> AsyncIterator[list[Any]]:
        for batch in self.ahead:
            yield batch
        self.ahead = []
        async for batch in self.batches:
            yield batch

    async def aclose(self) -> None:
        await self.stream.aclose()


class Truncating:
    """Wraps an upstream for one request: every step (MCP loops make several) is opened with the history
    fitted to `context_window` when the route declares one, and retried with the oldest turn dropped each
    time the upstream answers that the context is too long."""

    def __init__(self, upstream: Upstream, context_window: int | None):
        self.upstream = upstream
        self.label = upstream.label
        self.context_window = context_window

    async def open(self, call: Call) -> EventStream:
        items = call.items
        if self.context_window:
            budget = self.context_window - (call.request.max_output_tokens or 0)
            items = fit(items, budget, call.instructions, call.request.tools)
        while True:
            try:
                return await _opened(self.upstream, replace(call, items=items) if items is not call.items else call)
            except UpstreamError as exc:
                if exc.code != "context_length_exceeded":
                    raise
                shorter = drop_oldest_turn(items)
                if shorter is None:
                    raise
                log.info("context too long for %s: dropping the oldest turn (%d → %d items)",
                         self.label, len(items), len(shorter))
                items = shorter

    async def list_models(self) -> list[dict[str, Any]]:
        return await self.upstream.list_models()

    async def close(self) -> None:
        await self.upstream.close()
