"""tools/mcp/history.py: earlier MCP items as upstreams see them — a call and its output, errors in words, a
declined approval answered."""

from __future__ import annotations

from responses_gateway.tools.mcp.history import error_text, lower, mark_declined

CALL = {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "search", "arguments": '{"q": 1}',
        "output": "found"}


def test_a_call_is_a_namespaced_function_call_and_its_output():
    call, output = lower(CALL)
    assert call == {"type": "function_call", "call_id": "mcp_1", "name": "search", "namespace": "docs",
                    "arguments": '{"q": 1}'}
    assert output == {"type": "function_call_output", "call_id": "mcp_1", "output": "found"}


def test_a_failed_call_shows_its_error_in_words():
    _, output = lower({**CALL, "output": None, "error": {"type": "mcp_protocol_error", "message": "boom"}})
    assert output["output"] == "Error: boom"
    assert error_text("plain") == "plain"
    assert error_text({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "ab"
    assert error_text({}) == "the tool failed"


def test_listings_and_pending_approvals_are_not_shown_but_a_declined_one_is_answered():
    request = {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "docs", "name": "drop",
               "arguments": "{}"}
    answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False}
    assert lower({"type": "mcp_list_tools", "server_label": "docs", "tools": []}) is None
    assert lower(request) is None  # pending, or approved (its mcp_call says the rest)
    marked = mark_declined([request, answer])
    pair = lower(marked[0])
    assert pair is not None and pair[0]["call_id"] == "mcpr_1" and "declined" in pair[1]["output"].lower()
    assert mark_declined([request]) == [request]  # nothing declined: untouched
