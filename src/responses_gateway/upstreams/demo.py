"""DEMO upstream: a scripted stand-in model so a newcomer can watch the stream with no model server.

It is not a model. It "thinks" a sentence, then answers by quoting the last user message; if the request
forces a function tool, it calls that tool with empty arguments instead. Everything real is tested against
HTTP upstreams; this exists only for `responses-gateway serve --upstream demo`.
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
        prompt = _last_user_text(call.items) or "(nothing)"
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
            steps.extend([g.TextDelta(w)] for w in _words(answer))
            steps.append([g.Finish("stop")])
        output = sum(len(s) for s in steps)
        steps.append([g.Usage(input_tokens=len(prompt.split()) + 1, output_tokens=output)])
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


def _last_user_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item["type"] == "message" and item["role"] == "user":
            return " ".join(p.get("text", "") for p in item["content"] if p.get("text"))
    return ""
