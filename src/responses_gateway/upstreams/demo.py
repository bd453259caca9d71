"""DEMO upstream: a scripted stand-in model so a newcomer can watch the stream with no model server.

It is not a model. It "thinks" a sentence, then answers by quoting the last user message and the earlier
ones of the whole history it was given (so `previous_response_id` and conversations can be seen to carry
the history). Given tools, it uses them as a real model would (demo_tools.py): it calls the tool the question
asks for, with arguments drawn from the question, and answers from the tool's output on the next step,
citing what a search found. Its input usage is the gateway's documented estimate of that whole input
(tokens.py). Everything real is tested against HTTP upstreams; this exists only for
`responses-gateway serve --upstream demo`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator
from typing import Any

from .. import generation as g
from ..ids import new_id
from .base import Batch, Call, Route
from .demo_tools import answer, call_input, choose, read_turn

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
        turn = read_turn(call.items)
        tool = choose(call.tools, turn)
        prompt = turn.question or "(nothing)"
        steps: list[list[Any]]
        if tool is not None:
            asks = _short(prompt).rstrip()
            asks += "" if asks.endswith(("?", ".", "!", "…")) else "."
            steps = _thought(f"The user asks: {asks} The {tool.name} tool can help; I will call it.")
            steps.append([g.ToolCallStart(0, new_id("call"), tool.name, tool.kind, tool.namespace, tool.runner)])
            steps.extend([g.ToolCallDelta(0, piece)] for piece in _pieces(call_input(tool, turn.question)))
            steps.append([g.Finish("tool_calls")])
        elif turn.results:
            names = " and ".join(dict.fromkeys(result.name for result in turn.results))
            steps = _thought(f"{names} answered; I will answer from what it returned.")
            steps.extend([g.TextDelta(w)] for w in _words(answer(turn.results)))
            steps.append([g.Finish("stop")])
        else:
            steps = _thought("The user said something; I will echo it.")
            text = f"[demo] This is a scripted demo model, not a real one. You said: {prompt}"
            if len(turn.said) > 1:
                text += " Earlier you said: " + _quoted(turn.said[:-1])
            steps.extend([g.TextDelta(w)] for w in _words(text))
            steps.append([g.Finish("stop")])
        output = sum(len(s) for s in steps)
        steps.append([g.Usage(input_tokens=call.estimated_usage(0, 0).input_tokens, output_tokens=output)])
        return steps


def _thought(text: str) -> list[list[Any]]:
    return [[g.ReasoningDelta(w)] for w in _words(text)]


def _short(text: str, most: int = 120) -> str:
    return text if len(text) <= most else text[:most] + "…"


def _pieces(text: str, size: int = 12) -> list[str]:
    """A call's input in small pieces, as a model streams it (at least one, so an empty input is a delta too)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


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


def _quoted(texts: list[str], most: int = 5, longest: int = 200) -> str:
    """Earlier messages, each cut to `longest` characters, the first `most` of them (a long history is not
    read back whole)."""
    shown = [f"“{t if len(t) <= longest else t[:longest] + '…'}”" for t in texts[:most]]
    more = len(texts) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")
