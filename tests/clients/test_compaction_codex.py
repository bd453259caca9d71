"""Compaction end to end: the real Codex CLI (built-in OpenAI provider, WebSocket) compacts remotely mid-task,
and a compaction trigger over a raw WebSocket connection.

With `model_auto_compact_token_limit` below what the first model step reports, Codex compacts before it sends
the tool output back: a request whose input ends with `compaction_trigger` (over its WebSocket, chained with
`previous_response_id`), which fails its session unless the answer holds exactly one `compaction` item. It
then continues from the user messages it kept plus that item, and the task must still complete.
"""

from __future__ import annotations

import json

from responses_gateway.compaction.history import SUMMARY_PREFIX
from responses_gateway.compaction.step import SUMMARY_PROMPT
from tests.clients import test_codex_builtin_provider as builtin  # WebSocket mode's own test helpers
from tests.clients.test_codex_e2e import CALL_ID, MODEL, PATCH, split
from tests.edge import test_websocket as ws
from tests.support.fake_chat import RecordedRequest, Stream, make_usage, text_stream, tool_calls_stream

SUMMARY = "The user asked for hello.txt; apply_patch was called to add it; next: confirm and finish."


def asks_for_summary(body: dict) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and last["content"] == SUMMARY_PROMPT


def model(request: RecordedRequest):
    """The scripted model: the patch, a summary when asked for one, then the final answer. Codex compacts
    before it sends the patch's output back, so after compaction the summary alone tells of the patch."""
    body = request.body
    if asks_for_summary(body):
        return Stream(text_stream([SUMMARY[:30], SUMMARY[30:]], model=MODEL, usage=make_usage(9000, 30)))
    if any(m["role"] == "tool" or m["content"] == SUMMARY_PREFIX + SUMMARY for m in body["messages"]):
        # the patch is applied (its output, or the summary that replaced it, says so)
        return Stream(text_stream(["Do", "ne."], model=MODEL, usage=make_usage(900, 3)))
    arguments = json.dumps({"input": PATCH})
    return Stream(tool_calls_stream([(CALL_ID, "apply_patch", split(arguments, 9))], model=MODEL,
                                    usage=make_usage(prompt_tokens=9000, completion_tokens=40)))


def test_codex_builtin_provider_compacts_remotely_and_completes_the_task(gateway, upstream, tmp_path):
    upstream.default = model
    config = builtin.BUILTIN.replace("openai_base_url", "model_auto_compact_token_limit = 4000\nopenai_base_url", 1)
    _, creates = builtin.ws_counts(gateway)
    result, output = builtin.codex_task(gateway, tmp_path, config)

    assert not builtin.FALLBACK.search(result.stdout + result.stderr), output
    assert "compact" not in result.stderr.lower() or "error" not in result.stderr.lower(), output
    bodies = [r.body for r in upstream.requests if r.method == "POST"]
    summaries = [b for b in bodies if asks_for_summary(b)]
    assert len(summaries) == 1, output
    # the summary request saw the task so far: the user's prompt and the patch call
    assert any(m["role"] == "user" and "Create hello.txt" in str(m["content"]) for m in summaries[0]["messages"])
    assert any(m.get("tool_calls") for m in summaries[0]["messages"]), output
    # after it, the model saw the summary in place of the compacted turn
    after = bodies[bodies.index(summaries[0]) + 1:]
    assert after and any(m["content"] == SUMMARY_PREFIX + SUMMARY for m in after[-1]["messages"]), output
    assert builtin.ws_counts(gateway)[1] - creates >= 3, output  # every request went over the WebSocket


def test_compaction_trigger_over_the_websocket_chains_on_the_connection(gateway, upstream):
    from websockets.sync.client import connect

    upstream.enqueue(text_stream(["Noted."]), text_stream([SUMMARY]), text_stream(["Still 42."]))
    with connect(ws.ws_url(gateway)) as conn:
        warm = ws.checked(ws.turn(conn, model="m", input=ws.user("remember 42"), generate=False, store=False))
        one = ws.checked(ws.turn(conn, model="m", input=[], previous_response_id=warm.response["id"], store=False))
        # Codex's shape: the previous response id and the trigger alone
        compacted = ws.checked(ws.turn(conn, model="m", input=[{"type": "compaction_trigger"}],
                                       previous_response_id=one.response["id"], store=False, stream=True))
        assert [i["type"] for i in compacted.response["output"]] == ["compaction"]
        assert compacted.terminal["type"] == "response.completed"
        item = compacted.response["output"][0]
        after = ws.checked(ws.turn(conn, model="m", store=False,
                                   input=[*ws.user("remember 42"), item, *ws.user("which number?")]))
        assert after.text == "Still 42."
    summary_request, answer = (r.body["messages"] for r in upstream.requests[1:])
    assert summary_request == [{"role": "user", "content": "remember 42"},
                               {"role": "assistant", "content": "Noted."},
                               {"role": "user", "content": SUMMARY_PROMPT}]
    assert answer == [{"role": "user", "content": "remember 42"},
                      {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
                      {"role": "user", "content": "which number?"}]
