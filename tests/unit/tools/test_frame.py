"""The gateway-run tool frame (tools/frame.py, tools/loop.py, tools/history.py) with a toy tool: items and
events made through the composer's public API, citations while the text streams, `include[]`, the loop's
deadlines, parallel calls and caps — all through the real pipeline, the upstream steps from memory."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from responses_gateway import generation as g
from responses_gateway.composer import Composer
from responses_gateway.errors import APIError
from responses_gateway.pipeline import run
from responses_gateway.protocol.request import parse_request
from responses_gateway.protocol.response import skeleton
from responses_gateway.protocol.tools import Toolbox, normalize_tools
from responses_gateway.respond import start_runners
from responses_gateway.tools import kits
from responses_gateway.tools.frame import ToolServices
from responses_gateway.tools.history import lower_tools, shown_item
from responses_gateway.tools.loop import ToolLoop
from responses_gateway.upstreams.base import Call

from ..streams import FakeStream, Sink
from . import toy

TOOLBOX = Toolbox({"toy": toy.KIT, "mcp": kits.MCP}, by_item={"toy_call": toy.KIT}, includes=("toy_call.secret",))


def call_step(*calls: tuple[str, str]) -> FakeStream:
    """A step in which the model calls `toy` once per (call id, text)."""
    batch: list = []
    for i, (call_id, text) in enumerate(calls):
        batch += [g.ToolCallStart(i, call_id, "toy", runner="toy"),
                  g.ToolCallDelta(i, orjson.dumps({"text": text}).decode())]
    return FakeStream([batch, [g.Finish("tool_calls")]])


def text_step(*pieces: str) -> FakeStream:
    return FakeStream([[g.TextDelta(p) for p in pieces], [g.Finish("stop")]])


class Upstream:
    def __init__(self, steps: list[FakeStream]):
        self.steps = list(steps)
        self.calls: list[Call] = []

    async def open(self, call: Call) -> FakeStream:
        self.calls.append(call)
        return self.steps.pop(0)


def respond(steps: list[FakeStream], *, tools=None, include=(), max_rounds=4, **fields):
    """Run one response through the real pipeline and tool loop; (checked stream, composer, upstream)."""
    with registered():
        return _respond(steps, tools, include, max_rounds, **fields)


def _respond(steps, tools, include, max_rounds, **fields):
    toy.Toy.runs = []
    body = {"model": "m", "input": "hi", "tools": tools or [{"type": "toy"}], **fields}
    if include:
        body["include"] = list(include)
    req = parse_request(orjson.dumps(body))
    toolset = normalize_tools(req.tools, req.tool_choice, toolbox=TOOLBOX)
    composer = Composer(skeleton(req, toolset))
    wanted = frozenset(include)
    composer.show(lambda item: shown_item(item, wanted))
    call = Call(req, [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                toolset)
    runners = start_runners(toolset.gateway, ToolServices(), "", req, [], wanted, None, None)
    loop = ToolLoop(call, call.items, runners, render=lower_tools, max_rounds=max_rounds)
    upstream = Upstream(steps)
    sink = Sink()

    async def main():
        async for events in run(composer, None, None, loop, None, upstream):
            sink.add(events)

    asyncio.run(main())
    return sink.check(allow_unknown=True), composer, upstream  # the toy's own events are not OpenAI's


class registered:
    def __enter__(self):
        kits.register(toy.KIT)

    def __exit__(self, *exc):
        kits.unregister("toy")


def test_a_call_runs_between_steps_and_the_next_step_sees_its_result():
    result, composer, upstream = respond([call_step(("c1", "ping")), text_step("pong")])
    assert result.response["status"] == "completed"
    call, message = result.response["output"]
    assert (call["type"], call["status"], call["arguments"]) == ("toy_call", "completed", '{"text":"ping"}')
    assert message["content"][0]["text"] == "pong"
    toy_events = [t for t in result.types if t.startswith("response.toy_call")]
    assert toy_events == ["response.toy_call.in_progress", "response.toy_call.delta", "response.toy_call.running",
                          "response.toy_call.completed"]
    # the second step sees the call as a function call and its result, as a stored history would render it
    second = upstream.calls[1].items
    assert second[-2]["type"] == "function_call" and second[-2]["call_id"] == call["id"]
    assert second[-1] == {"type": "function_call_output", "call_id": call["id"], "output": "echo:ping"}


def test_what_include_leaves_out_is_stored_but_never_shown():
    result, composer, _ = respond([call_step(("c1", "ping")), text_step("ok")])
    done = next(e for e in result.events if e["type"] == "response.output_item.done"
                and e["item"]["type"] == "toy_call")
    assert "secret" not in done["item"] and "secret" not in result.response["output"][0]
    assert composer.stored()["output"][0]["secret"] == "echo:ping"  # kept for later turns
    shown, _, _ = respond([call_step(("c1", "ping")), text_step("ok")], include=["toy_call.secret"])
    assert shown.response["output"][0]["secret"] == "echo:ping"


@pytest.mark.parametrize("mode, message", [
    ("hang", "did not finish within 0.5 seconds"),
    ("raise", "failed inside the gateway"),
    ("open", "ended without a result"),
])
def test_a_call_that_hangs_fails_or_is_left_open_ends_failed_and_the_model_sees_it(mode, message):
    result, _, upstream = respond([call_step(("c1", "x")), text_step("sorry")], tools=[{"type": "toy", "mode": mode}])
    assert result.response["status"] == "completed"
    call = result.response["output"][0]
    assert call["status"] == "failed" and message in call["error"]
    assert "response.toy_call.failed" in result.types
    assert message in upstream.calls[1].items[-1]["output"]


def test_calls_of_one_step_run_together_and_each_keeps_its_own_order():
    result, _, _ = respond([call_step(("c1", "slow one"), ("c2", "fast"), ("c3", "slow two")), text_step("done")])
    assert toy.Toy.runs == ["slow one", "fast", "slow two"]  # all started before any finished
    done_order = [e["item"]["arguments"] for e in result.events
                  if e["type"] == "response.output_item.done" and e["item"]["type"] == "toy_call"]
    assert done_order[0] == '{"text":"fast"}'  # the fast one finished first
    for item in result.response["output"][:3]:
        mine = [e["type"] for e in result.events if e.get("item_id") == item["id"]]
        assert mine.index("response.toy_call.running") < mine.index("response.toy_call.completed")


def test_parallel_tool_calls_false_runs_one_call_after_another():
    result, _, _ = respond([call_step(("c1", "slow one"), ("c2", "fast")), text_step("done")],
                           parallel_tool_calls=False)
    done_order = [e["item"]["arguments"] for e in result.events
                  if e["type"] == "response.output_item.done" and e["item"]["type"] == "toy_call"]
    assert done_order == ['{"text":"slow one"}', '{"text":"fast"}']


def test_max_tool_calls_counts_calls_and_then_withdraws_the_tool():
    result, _, upstream = respond([call_step(("c1", "a"), ("c2", "b")), text_step("done")], max_tool_calls=1)
    first, second = result.response["output"][:2]
    assert first["status"] == "completed"
    assert second["status"] == "failed" and "max_tool_calls (1)" in second["error"]
    assert [t.name for t in upstream.calls[1].tools.offered] == []  # the model must answer now


def test_a_model_that_keeps_calling_is_cut_at_max_rounds():
    steps = [call_step((f"c{i}", "again")) for i in range(4)]
    result, _, _ = respond(steps, max_rounds=2)
    assert result.response["status"] == "incomplete"
    assert result.response["incomplete_details"] == {"reason": "max_messages"}


def test_citations_are_added_while_the_text_streams_and_markers_never_reach_the_client():
    steps = [call_step(("c1", "q")), text_step("Paris is the capital [", "7] of France[8", "].")]
    result, _, _ = respond(steps, tools=[{"type": "toy", "mode": "marker"}])
    deltas = [e["delta"] for e in result.events if e["type"] == "response.output_text.delta"]
    text = result.response["output"][1]["content"][0]["text"]
    assert "".join(deltas) == text == "Paris is the capital  of France."
    added = [(i, e) for i, e in enumerate(result.events) if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation"]["index"] for _, e in added] == [21, 31]
    assert [e["annotation_index"] for _, e in added] == [0, 1]
    # each annotation goes out while the text streams, right after the text it follows
    first_done = result.types.index("response.output_text.done")
    assert all(i < first_done for i, _ in added)
    annotations = result.response["output"][1]["content"][0]["annotations"]
    assert [a["file_id"] for a in annotations] == ["file_7", "file_8"]


def test_a_name_a_gateway_tool_reserves_is_a_400():
    with registered(), pytest.raises(APIError) as caught:
        normalize_tools([{"type": "toy"}, {"type": "function", "name": "toy"}], None, toolbox=TOOLBOX)
    assert caught.value.status == 400 and "reserved" in caught.value.message


def test_tool_choice_naming_the_tool_type_forces_it_and_allowed_tools_narrows_to_it():
    with registered():
        forced = normalize_tools([{"type": "toy"}], {"type": "toy"}, toolbox=TOOLBOX)
        assert forced.mode == "required" and forced.forced is toy.FUNCTION
        narrowed = normalize_tools([{"type": "toy"}, {"type": "function", "name": "f"}],
                                   {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "toy"}]},
                                   toolbox=TOOLBOX)
        assert [t.name for t in narrowed.offered] == ["toy"]
        with pytest.raises(APIError):  # a hosted type the request does not declare
            normalize_tools([{"type": "function", "name": "f"}], {"type": "file_search"}, toolbox=TOOLBOX)


def test_a_tool_the_deployment_cannot_run_is_dropped_counted_and_named_or_rejected(caplog):
    from prometheus_client import REGISTRY

    toolbox = Toolbox({}, {"toy": "no toy box is configured: start with --toy"})
    before = REGISTRY.get_sample_value("responses_gateway_hosted_tools_dropped_total", {"type": "toy"}) or 0
    with registered():
        dropped = normalize_tools([{"type": "toy"}], None, toolbox=toolbox)
        assert dropped.offered == [] and dropped.gateway == []
        assert REGISTRY.get_sample_value("responses_gateway_hosted_tools_dropped_total", {"type": "toy"}) == before + 1
        assert "start with --toy" in caplog.text
        with pytest.raises(APIError) as caught:
            normalize_tools([{"type": "toy"}], None, hosted_policy="reject", toolbox=toolbox)
    assert caught.value.param == "tools[0].type" and "start with --toy" in caught.value.message


def test_lowering_keeps_one_assistant_turn_then_the_results():
    with registered():
        items = [{"type": "message", "role": "user", "content": []},
                 {"id": "t1", "type": "toy_call", "arguments": "{}", "secret": "one"},
                 {"type": "function_call", "call_id": "f", "name": "f", "arguments": "{}"},
                 {"id": "t2", "type": "toy_call", "arguments": "{}", "secret": "two"},
                 {"type": "message", "role": "assistant", "content": []}]
        lowered = lower_tools(items)
    assert [i["type"] for i in lowered] == ["message", "function_call", "function_call", "function_call",
                                            "function_call_output", "function_call_output", "message"]
    assert [i.get("output") for i in lowered[4:6]] == ["one", "two"]
