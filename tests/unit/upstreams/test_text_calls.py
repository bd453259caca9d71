"""upstreams/text_calls.py: a tool the model calls in text — the upstream told of it in the instructions, its
calls read out of the answer's text into the events the composer knows."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from responses_gateway import generation as g
from responses_gateway.protocol.tools import Tool, ToolSet
from responses_gateway.upstreams.text_calls import TextCallsUpstream


class Reader:
    def prompt(self) -> str:
        return "Say DO(x) to act."

    def read(self, text: str) -> tuple[str, str | None, str]:
        if "DO(" in text:
            thought, _, action = text.partition("DO(")
            return thought.strip(), json.dumps({"x": action.rstrip(")")}), ""
        return "", None, text


@dataclass
class Call:  # the fields of upstreams.base.Call the wrapper reads
    tools: ToolSet
    instructions: str | None


class Stream:
    def __init__(self, batches):
        self.batches = batches
        self.closed = False

    async def __aiter__(self):
        for batch in self.batches:
            yield batch

    async def aclose(self):
        self.closed = True


class Inner:
    label = "inner"

    def __init__(self, batches):
        self.batches = batches
        self.opened = []

    async def open(self, call):
        self.opened.append(call)
        return Stream(self.batches)


def run(batches, instructions="Be brief."):
    tool = Tool("computer", "computer", "computer", runner="computer", text_calls=Reader())
    other = Tool("function", "lookup", "lookup")
    tools = ToolSet(offered=[tool, other], by_wire_name={"computer": tool, "lookup": other}, mode="required",
                    forced=tool)
    inner = Inner(batches)

    async def go():
        stream = await TextCallsUpstream(inner, tool).open(Call(tools, instructions))
        return [e for batch in [b async for b in stream] for e in batch]

    return asyncio.run(go()), inner.opened[0]


def test_the_upstream_is_told_in_the_instructions_and_never_offered_the_tool():
    _, sent = run([[g.Finish("stop")]])
    assert [t.name for t in sent.tools.offered] == ["lookup"]
    assert sent.tools.forced is None and sent.tools.mode == "auto"  # a text call cannot be forced
    assert sent.instructions == "Say DO(x) to act.\n\nBe brief."
    _, sent = run([[g.Finish("stop")]], instructions=None)
    assert sent.instructions == "Say DO(x) to act."


def test_a_call_in_the_text_becomes_reasoning_then_the_tools_call():
    events, _ = run([[g.TextDelta("I will "), g.TextDelta("act. DO(")], [g.TextDelta("1)"), g.Usage(5, 3)],
                     [g.Finish("stop")]])
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Usage", "ReasoningDelta", "ItemEnd", "ToolCallStart", "ToolCallDelta", "Finish"]
    start, delta, finish = events[3], events[4], events[5]
    assert (events[1].text, start.name, start.runner, delta.text, finish.reason) == (
        "I will act.", "computer", "computer", '{"x": "1"}', "tool_calls")


def test_text_without_a_call_is_the_answer_and_other_events_pass():
    events, _ = run([[g.ReasoningDelta("hm"), g.TextDelta("Hello.")], [g.Finish("length")]])
    assert [(type(e).__name__, getattr(e, "text", getattr(e, "reason", None))) for e in events] == [
        ("ReasoningDelta", "hm"), ("TextDelta", "Hello."), ("Finish", "length")]
