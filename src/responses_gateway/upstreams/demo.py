"""DEMO upstream: a scripted stand-in model so a newcomer can watch the stream with no model server.

It is not a model. It "thinks" a sentence, then answers by quoting the last user message and the earlier
ones of the whole history it was given (so `previous_response_id` and conversations can be seen to carry
the history); if the request forces a function tool, it calls that tool with empty arguments instead. Its
input usage is the gateway's documented estimate of that whole input (tokens.py). Everything real is tested
against HTTP upstreams; this exists only for `responses-gateway serve --upstream demo`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator
from typing import Any

from .. import generation as g
from ..ids import new_id
from .base import Batch, Call, Route

MODEL = "demo"


class DemoUpstream:
    label = "DEMO (scripted responses, not a real model)"

    def __init__(self, route: Route | None = None, *, delay: float = 0.02):
        self.delay = delay  # (a demo route has nothing to configure)

    async def list_models(self) -> list[dict[str, Any]]:
        return [{"id": MODEL, "object": "model", "created": 0, "owned_by": "responses-gateway-demo"}]

    async def close(self) -> None:
        return None

    async def open(self, call: Call) -> _DemoStream:
        return _DemoStream(self._script(call), self.delay)

    def _script(self, call: Call) -> list[list[Any]]:
        said = _user_texts(call.items)
        prompt = said[-1] if said else "(nothing)"
        steps: list[list[Any]] = [[g.ReasoningDelta(w)] for w in _words("The user said something; I will echo it.")]
        forced = call.tools.forced if call.tools.mode == "required" else None
        if forced is None and call.tools.mode == "required" and call.tools.offered:
            forced = call.tools.offered[0]
        if forced is not None:
            steps.append([g.ToolCallStart(0, new_id("call"), forced.name, forced.kind, forced.namespace,
                                         forced.runner)])
            steps.append([g.ToolCallDelta(0, "{}" if forced.kind == "function" else "")])
            steps.append([g.Finish("tool_calls")])
        else:
            answer = f"[demo] This is a scripted demo model, not a real one. You said: {prompt}"
            if len(said) > 1:
                answer += " Earlier you said: " + _quoted(said[:-1])
            steps.extend([g.TextDelta(w)] for w in _words(answer))
            steps.append([g.Finish("stop")])
        output = sum(len(s) for s in steps)
        steps.append([g.Usage(input_tokens=call.estimated_usage(0, 0).input_tokens, output_tokens=output)])
        return steps


class _DemoStream:
    def __init__(self, steps: list[list[Any]], delay: float):
        self.steps = steps
        self.delay = delay

    def __aiter__(self) -> AsyncGenerator[Batch, None]:
        return self._run()

    async def _run(self) -> AsyncGenerator[Batch, None]:
        for step in self.steps:
            await asyncio.sleep(self.delay)
            yield step

    async def aclose(self) -> None:
        return None


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


def _user_texts(items: list[dict[str, Any]]) -> list[str]:
    """The text of each user message of the history, oldest first."""
    out = []
    for item in items:
        if item["type"] == "message" and item["role"] == "user":
            text = " ".join(p.get("text", "") for p in item["content"] if p.get("text"))
            if text:
                out.append(text)
    return out


def _quoted(texts: list[str], most: int = 5, longest: int = 200) -> str:
    """Earlier messages, each cut to `longest` characters, the first `most` of them (a long history is not
    read back whole)."""
    shown = [f"“{t if len(t) <= longest else t[:longest] + '…'}”" for t in texts[:most]]
    more = len(texts) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")
