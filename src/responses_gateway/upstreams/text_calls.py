"""A tool the model calls in its own words: the upstream is told of it in the instructions, and its calls are
read out of the answer's text (protocol/tools.TextCalls).

Some models are trained to answer with their action as text — UI-TARS writes `Thought: ...` then
`Action: click(start_box='(235,512)')` — and the servers that run them have no tool-call parser for it. For a
request offering such a tool, this wrapper opens every step of the upstream without the tool among the
functions and with its prompt before the instructions, holds the answer's text until the step finishes, and
then gives the composer what the text says: the model's thinking as reasoning, then the call (a tool call
event of the tool, its arguments whole) — or, with no call in it, the text left as the answer. Every other
event (usage, reasoning, other tools' calls) passes as it comes. Only such requests pay for the holding: a
request without the tool never meets this module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from .. import generation as g
from ..ids import new_id
from ..protocol.tools import TextCalls, Tool
from .base import Batch, Call, EventStream, Upstream

KEY = "text-call"  # the call's key among the step's tool calls (upstream keys are indexes or ids)


class TextCallsUpstream:
    """Wraps an upstream for one request whose `tool` the model calls in text."""

    def __init__(self, upstream: Upstream, tool: Tool):
        self.upstream = upstream
        self.label = upstream.label
        self.tool = tool

    async def open(self, call: Call) -> EventStream:
        reader = self.tool.text_calls
        assert reader is not None
        tools = replace(call.tools, offered=[t for t in call.tools.offered if t is not self.tool],
                        forced=None if call.tools.forced is self.tool else call.tools.forced)
        if call.tools.forced is self.tool:
            tools.mode = "auto"
        prompt = reader.prompt()
        instructions = f"{prompt}\n\n{call.instructions}" if call.instructions else prompt
        inner = await self.upstream.open(replace(call, tools=tools, instructions=instructions))
        return TextCallStream(inner, self.tool, reader)

    async def list_models(self) -> list[dict[str, Any]]:
        return await self.upstream.list_models()

    async def close(self) -> None:
        await self.upstream.close()


class TextCallStream:
    def __init__(self, inner: EventStream, tool: Tool, reader: TextCalls):
        self.inner = inner
        self.tool = tool
        self.reader = reader

    async def __aiter__(self) -> AsyncIterator[Batch]:
        text: list[str] = []
        async for batch in self.inner:
            passed: Batch = []
            for event in batch:
                if isinstance(event, g.TextDelta):
                    text.append(event.text)
                elif isinstance(event, g.Finish):
                    passed += self.answer("".join(text), event.reason)
                    text = []
                else:
                    passed.append(event)
            if passed:
                yield passed
        if text:  # a stream cut before it finished: its text as it was
            yield [g.TextDelta("".join(text))]

    def answer(self, text: str, reason: str) -> Batch:
        """The events a finished step's text stands for."""
        thought, arguments, rest = self.reader.read(text)
        out: Batch = []
        if thought and (arguments is not None or rest):
            out += [g.ReasoningDelta(thought), g.ItemEnd()]
        elif thought:
            rest = thought
        if arguments is not None:
            tool = self.tool
            out += [g.ToolCallStart(KEY, new_id("call"), tool.name, tool.kind, tool.namespace, tool.runner),
                    g.ToolCallDelta(KEY, arguments)]
            reason = "tool_calls" if reason == "stop" else reason
        elif rest:
            out.append(g.TextDelta(rest))
        out.append(g.Finish(reason))
        return out

    async def aclose(self) -> None:
        await self.inner.aclose()
