"""The Response object skeleton: every field of the spec's ResponseResource, echoing the request."""

from __future__ import annotations

import time
from typing import Any

from ..ids import new_id
from .request import CreateResponse, TextFormat
from .tools import ToolSet


def skeleton(req: CreateResponse, tools: ToolSet) -> dict[str, Any]:
    reasoning = req.reasoning
    text = req.text
    fmt = text.format if text and text.format else None
    return {
        "id": new_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "queued" if req.background else "in_progress",
        "background": bool(req.background),
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "max_tool_calls": req.max_tool_calls,
        "model": req.model,
        "output": [],
        "parallel_tool_calls": True if req.parallel_tool_calls is None else req.parallel_tool_calls,
        "previous_response_id": req.previous_response_id,
        "prompt_cache_key": req.prompt_cache_key,
        "prompt_cache_retention": req.prompt_cache_retention,
        "reasoning": {
            "effort": reasoning.effort if reasoning else None,
            "summary": (reasoning.summary or reasoning.generate_summary) if reasoning else None,
        },
        "safety_identifier": req.safety_identifier,
        "service_tier": "default",
        "store": True if req.store is None else req.store,
        "temperature": 1.0 if req.temperature is None else req.temperature,
        "text": {
            "format": _format(fmt),
            "verbosity": (text.verbosity if text and text.verbosity else "medium"),
        },
        "tool_choice": tools.echo_choice,
        "tools": tools.echo,
        "top_logprobs": req.top_logprobs or 0,
        "top_p": 1.0 if req.top_p is None else req.top_p,
        "presence_penalty": req.presence_penalty or 0.0,
        "frequency_penalty": req.frequency_penalty or 0.0,
        "truncation": req.truncation or "disabled",
        "usage": None,
        "user": req.user,
        "metadata": req.metadata or {},
    }


def _format(fmt: TextFormat | None) -> dict[str, Any]:
    if fmt is None or fmt.type == "text":
        return {"type": "text"}
    if fmt.type == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema", "name": fmt.name, "description": fmt.description, "schema": fmt.json_schema,
            "strict": bool(fmt.strict)}
