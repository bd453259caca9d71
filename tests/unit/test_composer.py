"""composer.py alone: generation events in, Responses events out, checked as a client would check them."""

from __future__ import annotations

import pytest

from responses_gateway import generation as g
from responses_gateway.composer import response_error_code
from responses_gateway.protocol.reasoning import unseal
from responses_gateway.tools.frame import Context
from responses_gateway.tools.mcp.runner import MCPRunner
from responses_gateway.tools.mcp.service import MCP

from .streams import Sink, new_composer


def compose(*batches: list, ending=None, schema: bool = False, **options):
    """Run batches of generation events through a fresh composer; `ending(composer)` ends it (default: finish)."""
    composer = new_composer(**options)
    sink = Sink()
    sink.add(composer.start())
    for batch in batches:
        sink.add(composer.feed(batch))
    sink.add(ending(composer) if ending is not None else composer.finish())
    return composer, sink.check(schema=schema)


def types(result) -> list[str]:
    return [t for t in result.types if t not in ("response.created", "response.in_progress")]


# -- one message -----------------------------------------------------------------------------------------


def test_text_message_event_order_and_sequence_numbers():
    composer, result = compose([g.TextDelta("Hel"), g.TextDelta("lo")], [g.Finish("stop")])
    assert result.types == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in result.events] == list(range(len(result.events)))
    assert result.text == "Hello"
    response = result.response
    assert response["status"] == "completed" and response["completed_at"] is not None
    assert response["output"][0]["content"][0]["text"] == "Hello"
    assert response["output"][0]["status"] == "completed"
    assert composer.final is composer.response and composer.closed


def test_lifecycle_events_show_no_output_and_the_same_id():
    composer = new_composer()
    created, in_progress = composer.start()
    assert created["response"]["output"] == [] and in_progress["response"]["status"] == "in_progress"
    assert created["response"]["id"] == in_progress["response"]["id"] == composer.response["id"]


def test_empty_deltas_open_nothing():
    _, result = compose([g.TextDelta(""), g.RefusalDelta(""), g.ReasoningDelta("")][:2])
    assert types(result) == ["response.completed"]
    assert result.response["output"] == []


def test_refusal_then_text_are_two_parts_of_one_message():
    _, result = compose([g.RefusalDelta("no"), g.TextDelta("but")], schema=True)
    parts = result.response["output"][0]["content"]
    assert parts == [{"type": "refusal", "refusal": "no"},
                     {"type": "output_text", "annotations": [], "logprobs": [], "text": "but"}]
    assert [e["content_index"] for e in result.events if e["type"] == "response.content_part.added"] == [0, 1]


def test_item_end_starts_a_new_message():
    _, result = compose([g.TextDelta("a"), g.ItemEnd(), g.TextDelta("b")])
    assert [item["content"][0]["text"] for item in result.response["output"]] == ["a", "b"]


# -- every ending has one terminal event ------------------------------------------------------------------


ENDINGS = {
    "stop": ([g.Finish("stop")], None, "response.completed", None),
    "no finish reason": ([], None, "response.completed", None),
    "length": ([g.Finish("length")], None, "response.incomplete", "max_output_tokens"),
    "content_filter": ([g.Finish("content_filter")], None, "response.incomplete", "content_filter"),
    "gateway stopped short": ([], lambda c: c.finish("max_messages"), "response.incomplete", "max_messages"),
    "failure": ([], lambda c: c.fail("upstream_error", "boom"), "response.failed", None),
}


@pytest.mark.parametrize("name", ENDINGS)
@pytest.mark.parametrize("opened", ["nothing", "text", "reasoning", "tool call", "text and two calls"])
def test_every_ending_closes_everything_with_one_terminal_event(name, opened):
    tail, ending, terminal, reason = ENDINGS[name]
    opening, still_open = {
        "nothing": ([], 0),
        "text": ([g.TextDelta("partial")], 0),
        "reasoning": ([g.ReasoningDelta("thinking")], 0),
        "tool call": ([g.ToolCallStart(0, "call_1", "f"), g.ToolCallDelta(0, '{"a"')], 0),
        # the message is complete once a call starts: only the calls are open at the end
        "text and two calls": ([g.TextDelta("t"), g.ToolCallStart(0, "c0", "f"), g.ToolCallStart(1, "c1", "h"),
                                g.ToolCallDelta(1, "{}"), g.ToolCallDelta(0, "{")], 1),
    }[opened]
    # shapes: each kind of terminal event once, after the richest opening
    schema = opened == "text and two calls" and name in ("stop", "length", "failure")
    composer, result = compose(opening, tail, ending=ending, schema=schema)
    assert [t for t in result.types if t.startswith("response.") and t.split(".")[1] in
            ("completed", "incomplete", "failed")] == [terminal]
    assert result.types[-1] == terminal
    response = result.response
    assert response["incomplete_details"] == ({"reason": reason} if reason else None)
    expected_status = {"response.completed": "completed"}.get(terminal, "incomplete")
    for item in response["output"][still_open:]:
        if "status" in item:
            assert item["status"] == expected_status, item
    assert all(item["status"] == "completed" for item in response["output"][:still_open])
    # nothing more once the terminal event is out
    assert composer.fail("late", "ignored") == []


def test_failure_sends_error_event_then_failed():
    _, result = compose([g.TextDelta("x")], ending=lambda c: c.fail("rate_limit_error", "slow down",
                                                                    type="rate_limit_error", param="p"))
    error, failed = result.events[-2:]
    assert error["type"] == "error"
    assert (error["code"], error["message"], error["param"]) == ("rate_limit_error", "slow down", "p")
    assert error["error"] == {"type": "rate_limit_error", "code": "rate_limit_error", "message": "slow down",
                              "param": "p"}
    assert failed["response"]["error"] == {"code": "rate_limit_exceeded", "message": "slow down"}


@pytest.mark.parametrize("code,expected", [
    ("server_error", "server_error"), ("context_length_exceeded", "context_length_exceeded"),
    ("rate_limit_error", "rate_limit_exceeded"), ("tokens", "rate_limit_exceeded"),
    ("upstream_error", "server_error"), (None, "server_error"),
])
def test_response_error_code_is_a_closed_set(code, expected):
    assert response_error_code(code) == expected


# -- reasoning -------------------------------------------------------------------------------------------


def test_reasoning_then_text_are_two_items_in_order():
    _, result = compose([g.ReasoningDelta("think"), g.ReasoningDelta("ing")], [g.TextDelta("answer")], schema=True)
    reasoning, message = result.response["output"]
    assert reasoning["type"] == "reasoning" and reasoning["content"] == [{"type": "reasoning_text",
                                                                          "text": "thinking"}]
    assert reasoning["summary"] == [] and "encrypted_content" not in reasoning
    assert message["type"] == "message"
    done = [e["output_index"] for e in result.events if e["type"] == "response.output_item.done"]
    added = [e["output_index"] for e in result.events if e["type"] == "response.output_item.added"]
    assert added == done == [0, 1]
    # the reasoning item is done before the message is announced
    assert result.types.index("response.output_item.done") < result.types.index("response.output_text.delta")


def test_reasoning_summary_mode_streams_summary_parts():
    _, result = compose([g.ReasoningDelta("why")], reasoning_summary=True, schema=True)
    assert "response.reasoning_summary_text.delta" in result.types
    assert "response.reasoning_text.delta" not in result.types
    assert result.response["output"][0]["summary"] == [{"type": "summary_text", "text": "why"}]


def test_reasoning_and_text_in_one_batch_announce_an_empty_item():
    """The .added event must show the item as it was then, even when it closes within the same batch."""
    _, result = compose([g.ReasoningDelta("why"), g.TextDelta("so")], reasoning_summary=True)
    added = [e for e in result.events if e["type"] == "response.output_item.added"]
    assert added[0]["item"]["summary"] == [] and added[0]["item"]["content"] == []
    assert added[1]["item"]["content"] == []


def test_item_end_keeps_two_reasoning_items_apart():
    _, result = compose([g.ReasoningDelta("one"), g.ItemEnd(), g.ReasoningDelta("two")])
    assert [item["content"][0]["text"] for item in result.response["output"]] == ["one", "two"]


def test_encrypted_reasoning_when_asked():
    composer, result = compose([g.ReasoningDelta("secret", signature="sig")], encrypted_reasoning=True)
    item = result.response["output"][0]
    assert unseal(item["encrypted_content"]) == ("secret", "sig")
    assert composer.stored() is composer.response


def test_upstream_signature_is_stored_but_not_shown():
    composer, result = compose([g.ReasoningDelta("a", signature="s1"), g.ReasoningDelta("b", signature="s2")])
    item = result.response["output"][0]
    assert "encrypted_content" not in item
    stored = composer.stored()["output"][0]
    assert unseal(stored["encrypted_content"]) == ("ab", "s1s2")
    assert "encrypted_content" not in composer.response["output"][0]  # stored() copies


# -- tool calls ------------------------------------------------------------------------------------------


def test_interleaved_function_calls_close_in_index_order():
    _, result = compose(
        [g.TextDelta("let me"), g.ToolCallStart(0, "call_a", "alpha"), g.ToolCallStart(1, "call_b", "beta",
                                                                                         namespace="ns")],
        [g.ToolCallDelta(1, '{"b":'), g.ToolCallDelta(0, '{"a":'), g.ToolCallDelta(0, "1}"),
         g.ToolCallDelta(1, "2}")],
        [g.Finish("tool_calls")], schema=True,
    )
    message, alpha, beta = result.response["output"]
    assert message["status"] == "completed"
    assert (alpha["call_id"], alpha["name"], alpha["arguments"]) == ("call_a", "alpha", '{"a":1}')
    assert (beta["call_id"], beta["name"], beta["namespace"], beta["arguments"]) == ("call_b", "beta", "ns",
                                                                                      '{"b":2}')
    args_done = [e for e in result.events if e["type"] == "response.function_call_arguments.done"]
    assert [(e["output_index"], e["name"]) for e in args_done] == [(1, "alpha"), (2, "beta")]
    assert result.response["status"] == "completed"


def test_delta_for_an_unknown_call_is_ignored():
    _, result = compose([g.ToolCallDelta(7, "{}")])
    assert result.response["output"] == []


def test_reused_key_finishes_the_earlier_call():
    _, result = compose([g.ToolCallStart(0, "c1", "f"), g.ToolCallDelta(0, "{}"),
                         g.ToolCallStart(0, "c2", "f"), g.ToolCallDelta(0, "[]")])
    first, second = result.response["output"]
    assert (first["call_id"], first["arguments"], first["status"]) == ("c1", "{}", "completed")
    assert (second["call_id"], second["arguments"]) == ("c2", "[]")


def test_custom_tool_call_streams_its_raw_input():
    _, result = compose([g.ToolCallStart("k", "c1", "shell", kind="custom"), g.ToolCallDelta("k", "ls "),
                         g.ToolCallDelta("k", "-la")], schema=True)
    assert [e["delta"] for e in result.events if e["type"] == "response.custom_tool_call_input.delta"] == [
        "ls ", "-la"]
    item = result.response["output"][0]
    assert (item["type"], item["input"], item["name"]) == ("custom_tool_call", "ls -la", "shell")


@pytest.mark.parametrize("text,arguments", [('{"query": "x"}', {"query": "x"}), ("plain", {"query": "plain"}),
                                            ('"quoted"', {"query": "quoted"}), ("", {})])
def test_tool_search_call_has_no_argument_events(text, arguments):
    _, result = compose([g.ToolCallStart(0, "c", "tool_search", kind="tool_search"), g.ToolCallDelta(0, text)])
    assert types(result) == ["response.output_item.added", "response.output_item.done", "response.completed"]
    assert result.response["output"][0]["arguments"] == arguments


# -- usage and logprobs ----------------------------------------------------------------------------------


def test_usage_adds_up_over_steps():
    composer = new_composer()
    sink = Sink()
    sink.add(composer.start())
    sink.add(composer.feed([g.TextDelta("a"), g.Usage(10, 2, cached_tokens=4, reasoning_tokens=1)]))
    composer.next_step()
    sink.add(composer.feed([g.Usage(20, 3, cache_write_tokens=5)]))
    sink.add(composer.finish())
    assert sink.check().response["usage"] == {
        "input_tokens": 30, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 5},
        "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 35,
    }


def test_no_usage_reported_is_null():
    _, result = compose([g.TextDelta("x")])
    assert result.response["usage"] is None


@pytest.mark.parametrize("want", [True, False])
def test_logprobs_only_when_asked(want):
    lp = [{"token": "a", "logprob": -0.1, "bytes": [97], "top_logprobs": []}]
    _, result = compose([g.TextDelta("a", logprobs=lp), g.TextDelta("b")], logprobs=want, schema=want)
    deltas = [e["logprobs"] for e in result.events if e["type"] == "response.output_text.delta"]
    assert deltas == ([lp, []] if want else [[], []])
    assert result.response["output"][0]["content"][0]["logprobs"] == (lp if want else [])


# -- MCP: calls the gateway runs between steps (through the tool frame: tools/frame.py) ----------------------


def mcp_runner(composer, approval=()):
    """The real MCP runner of one response, with no server to reach (nothing here runs a call)."""
    runner = MCPRunner([], Context(MCP(), "", None, []))
    runner.approval.update(approval)
    composer.use("mcp", runner)
    return runner


def mcp_step(arguments: str):
    """A step that ends with one MCP call for the gateway to run."""
    composer = new_composer()
    mcp_runner(composer)
    sink = Sink()
    sink.add(composer.start())
    sink.add(composer.feed([g.ToolCallStart(0, "c", "search", namespace="docs", runner="mcp"),
                            g.ToolCallDelta(0, arguments), g.Finish("tool_calls")]))
    return composer, sink


def test_mcp_call_waits_for_its_result():
    composer, sink = mcp_step('{"q": 1}')
    (call,) = composer.take_pending()
    assert composer.take_pending() == []
    assert call.item["status"] == "in_progress" and not call.done  # not done until it has run
    call.item["output"] = "found"
    sink.add(composer.end_call(call, "completed", [("response.mcp_call.completed", {})]))
    assert call.done
    composer.next_step()
    sink.add(composer.feed([g.TextDelta("answer"), g.Finish("stop")]))
    sink.add(composer.finish())
    result = sink.check(schema=True)
    assert "response.mcp_call.completed" in result.types
    assert result.types.count("response.mcp_call_arguments.delta") == 1
    mcp, message = result.response["output"]
    assert (mcp["server_label"], mcp["name"], mcp["arguments"], mcp["output"], mcp["status"]) == (
        "docs", "search", '{"q": 1}', "found", "completed")
    assert message["content"][0]["text"] == "answer"


def test_mcp_call_left_pending_fails_when_the_response_fails():
    composer, sink = mcp_step("{}")
    sink.add(composer.fail("server_error", "the tool server went away"))
    result = sink.check(schema=True)
    assert "response.mcp_call.failed" in result.types
    assert result.response["output"][0]["status"] == "failed"
    assert result.response["output"][0]["error"]["type"] == "mcp_protocol_error"
    assert composer.take_pending() == []


def test_mcp_list_tools_and_approved_call():
    composer = new_composer()
    mcp_runner(composer)
    sink = Sink()
    sink.add(composer.start())
    item, events = composer.add_item("mcp", {"id": "mcpl_1", "type": "mcp_list_tools", "server_label": "docs",
                                             "tools": []}, [("response.mcp_list_tools.in_progress", {})])
    sink.add(events)
    item.item["tools"] = [{"name": "search", "input_schema": {}}]
    sink.add(composer.end_call(item, None, [("response.mcp_list_tools.completed", {})]))
    failing, events = composer.add_item("mcp", {"id": "mcpl_2", "type": "mcp_list_tools", "server_label": "other",
                                                "tools": []}, [("response.mcp_list_tools.in_progress", {})])
    sink.add(events)
    failing.item["error"] = "unreachable"
    sink.add(composer.end_call(failing, None, [("response.mcp_list_tools.failed", {})]))
    call, events = composer.add_item("mcp", {"id": "mcp_1", "type": "mcp_call", "status": "in_progress",
                                             "server_label": "docs", "name": "search", "arguments": '{"q": 2}',
                                             "approval_request_id": "mcpr_1", "output": None, "error": None},
                                     [("response.mcp_call.in_progress", {})], run=True)
    sink.add(events)
    assert composer.take_pending() == [call]
    sink.add(composer.fail_call(call, "not run"))
    sink.add(composer.finish())
    result = sink.check(schema=True)
    listed, failed, mcp = result.response["output"]
    assert listed["tools"] == [{"name": "search", "input_schema": {}}]
    assert failed["error"] == "unreachable"
    assert mcp["approval_request_id"] == "mcpr_1"
    assert mcp["error"] == {"type": "mcp_protocol_error", "code": -32000, "message": "not run"}
    assert result.types.count("response.mcp_list_tools.completed") == 1
    assert result.types.count("response.mcp_list_tools.failed") == 1


def test_mcp_approval_request_arrives_whole():
    composer = new_composer()
    mcp_runner(composer, approval={"fs__rm"})
    sink = Sink()
    sink.add(composer.start())
    sink.add(composer.feed([g.ToolCallStart(0, "c", "rm", namespace="fs", runner="mcp"),
                            g.ToolCallDelta(0, '{"path": "/"}')]))
    sink.add(composer.finish())
    result = sink.check(schema=True)
    assert types(result) == ["response.output_item.added", "response.output_item.done", "response.completed"]
    item = result.response["output"][0]
    assert (item["type"], item["server_label"], item["arguments"]) == ("mcp_approval_request", "fs",
                                                                       '{"path": "/"}')
