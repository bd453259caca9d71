"""compaction/history.py: what the model sees of a compacted history — the summary, the messages it did not
write, and only whole tool round trips."""

from __future__ import annotations

from responses_gateway.compaction.history import (
    SUMMARY_PREFIX,
    has_compaction,
    kept_messages,
    lower_compaction,
    misplaced_trigger,
    sealed,
)


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def call(call_id: str) -> dict:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def output(call_id: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


COMPACTION = {"type": "compaction", "encrypted_content": "sealed-1"}


def test_the_summary_replaces_what_the_model_wrote_and_user_messages_stay():
    items = [user("first"), assistant("long answer"), COMPACTION, user("next")]
    lowered = lower_compaction(items, {"sealed-1": "they asked twice"})
    assert [i.get("role") for i in lowered] == ["user", "user", "user"]
    assert lowered[0] == user("first")
    assert lowered[1]["content"][0]["text"] == SUMMARY_PREFIX + "they asked twice"
    assert lowered[2] == user("next")


def test_only_whole_tool_round_trips_before_the_item_are_kept():
    items = [user("go"), call("c1"), output("c1"), call("c2"), COMPACTION, output("c2")]
    lowered = lower_compaction(items, {"sealed-1": "s"})
    kinds = [(i["type"], i.get("call_id")) for i in lowered]
    # c1 is a whole round trip before the item: kept; c2's output comes after: its call moves beside it
    assert kinds == [("message", None), ("function_call", "c1"), ("function_call_output", "c1"),
                     ("message", None), ("function_call", "c2"), ("function_call_output", "c2")]


def test_without_a_sealed_item_nothing_changes_but_codex_markers_go():
    marker = {"type": "context_compaction"}
    assert lower_compaction([user("a"), marker, user("b")], {}) == [user("a"), user("b")]
    assert sealed(marker) is None and sealed(COMPACTION) == "sealed-1"
    assert has_compaction([marker]) and not has_compaction([user("a")])


def test_kept_messages_are_the_newest_within_the_budget_but_always_one():
    huge = user("x " * 50_000)
    assert kept_messages([user("old"), huge]) == [huge]  # over budget alone: still kept
    assert kept_messages([user("a"), assistant("b"), user("c")], budget=10_000) == [user("a"), user("c")]


def test_a_trigger_must_be_last():
    assert misplaced_trigger([user("a")]) is None
    error = misplaced_trigger([{"type": "compaction_trigger"}, user("a")])
    assert error is not None and error.param == "input[0]"
