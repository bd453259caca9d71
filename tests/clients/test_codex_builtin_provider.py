"""End to end: the real Codex CLI with its BUILT-IN OpenAI provider pointed at the gateway.

This is how most people point Codex at a gateway: `openai_base_url = "http://HOST:PORT/v1"` in config.toml
(or OPENAI_BASE_URL) and the key in OPENAI_API_KEY. Codex then speaks the Responses WebSocket: it opens
`GET /v1/responses`, warms the connection up with `generate: false`, and sends every later request as
`previous_response_id` plus only the new items, with `store: false`. The test requires that path from
start to end — no "failed to connect to Responses WebSocket", no fallback to HTTP — and checks that the
upstream still received the full history every time. A custom provider with `supports_websockets = true`
takes the same path. With `model_auto_compact_token_limit` far below the first request's usage, Codex
compacts remotely in the middle of the turn (a `compaction_trigger` request over the same WebSocket), and
finishes the task from the summary. With `--websocket off` Codex falls back to HTTP and still completes, which also shows
that the fallback lines this test looks for are the ones Codex really prints.

The binary and the scripted upstream are those of test_codex_e2e.py.
"""

from __future__ import annotations

import json
import re

import pytest

from responses_gateway.compaction.history import SUMMARY_PREFIX
from responses_gateway.config import Settings
from tests.clients.test_codex_e2e import (
    CALL_ID,
    COMMON,
    CONFIG,
    GREETING,
    MODEL,
    PATCH,
    codex_bin,
    jsonl,
    run_codex,
    split,
)
from tests.edge.test_websocket import metric
from tests.support.fake_chat import RecordedRequest, Stream, make_usage, text_stream, tool_calls_stream
from tests.support.server import GatewayServer

BUILTIN = 'model = "{model}"\nopenai_base_url = "{base_url}"\n' + COMMON

# the custom provider of test_codex_e2e.py (its table comes last), opting in to WebSockets
CUSTOM_WS = CONFIG + "supports_websockets = true\n"


# Auto-compaction far below the first request's reported usage: Codex compacts in the middle of the turn.
COMPACT_LIMIT = 'model_auto_compact_token_limit = 4000\n'
SUMMARY = "The user asked for hello.txt; apply_patch created it with the greeting."

# What Codex prints when the WebSocket does not work and it switches to HTTP.
FALLBACK = re.compile(r"failed to connect to (the )?Responses WebSocket|fall(ing|s)? ?back|HTTP fallback", re.I)


def ws_counts(gateway) -> tuple[float, float]:
    return (metric(gateway, "responses_gateway_websocket_connections_total"),
            metric(gateway, 'responses_gateway_websocket_messages_total{type="response.create"}'))


def script_patch_then_done(upstream) -> None:
    arguments = json.dumps({"input": PATCH})
    upstream.enqueue(
        tool_calls_stream([(CALL_ID, "apply_patch", split(arguments, 9))], model=MODEL,
                          usage=make_usage(prompt_tokens=9000, completion_tokens=40)),
        text_stream(["Do", "ne."], model=MODEL, usage=make_usage(prompt_tokens=9100, completion_tokens=3)),
    )


def model_for_a_compacting_session(request: RecordedRequest) -> Stream:
    """The fake model, by what the gateway asks: a summary for a compaction (offered tools, none may be
    called), "Done." once the patch's output or the summary of its work is in the history, else the
    apply_patch call with usage far above Codex's auto-compaction limit."""
    body = request.body
    messages = body["messages"]
    if body.get("tool_choice") == "none":
        return Stream(text_stream([SUMMARY], model=MODEL, usage=make_usage(prompt_tokens=900, completion_tokens=20)))
    if any(m["role"] == "tool" for m in messages) or SUMMARY in json.dumps(messages):
        return Stream(text_stream(["Do", "ne."], model=MODEL,
                                  usage=make_usage(prompt_tokens=800, completion_tokens=3)))
    arguments = json.dumps({"input": PATCH})
    return Stream(tool_calls_stream([(CALL_ID, "apply_patch", split(arguments, 9))], model=MODEL,
                                    usage=make_usage(prompt_tokens=9000, completion_tokens=40)))


def codex_task(gateway, tmp_path, config: str):
    binary = codex_bin()
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(
        config.format(model=MODEL, base_url=f"{gateway.url}/v1", key_var="OPENAI_API_KEY"))
    work = tmp_path / "work"
    work.mkdir()
    result = run_codex(binary, "Create hello.txt", home, work, OPENAI_API_KEY="sk-e2e-test")
    output = f"codex exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, output
    assert (work / "hello.txt").read_text() == f"{GREETING}\n", output
    events = jsonl(result.stdout)
    assert events[-1].get("type") == "turn.completed", output
    assert not [e for e in events if e.get("type") in ("error", "turn.failed")], output
    messages = [e["item"].get("text") for e in events if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]
    assert messages and messages[-1] == "Done.", output
    return result, output


@pytest.mark.parametrize("config", [BUILTIN, CUSTOM_WS], ids=["builtin-provider", "custom-provider-websocket"])
def test_codex_uses_the_websocket_without_fallback(gateway, upstream, tmp_path, config):
    script_patch_then_done(upstream)
    connections, creates = ws_counts(gateway)
    result, output = codex_task(gateway, tmp_path, config)

    assert not FALLBACK.search(result.stdout + result.stderr), output
    new_connections, new_creates = ws_counts(gateway)
    assert new_connections > connections, "Codex never opened a WebSocket"
    # the warm-up and the two model requests of the turn, all as WebSocket messages
    assert new_creates - creates >= 3, (new_creates - creates, output)

    # The warm-up called no model; the turn's two requests did, each with the full history although Codex
    # sent the second one as previous_response_id plus the apply_patch output alone.
    posts = [r.body for r in upstream.requests if r.method == "POST"]
    assert len(posts) == 2, output
    first, second = (body["messages"] for body in posts)
    assert second[:len(first)] == first
    at = next(i for i, m in enumerate(second) if m["role"] == "assistant" and m.get("tool_calls"))
    assert second[at]["tool_calls"][0]["id"] == CALL_ID
    assert second[at + 1]["role"] == "tool" and "hello.txt" in second[at + 1]["content"]


def test_codex_compacts_remotely_over_the_websocket(gateway, upstream, tmp_path):
    """The whole issue in one run: built-in provider, WebSocket, a remote compaction mid-turn, the task done."""
    upstream.default = model_for_a_compacting_session
    connections, creates = ws_counts(gateway)
    result, output = codex_task(gateway, tmp_path, COMPACT_LIMIT + BUILTIN)

    assert not FALLBACK.search(result.stdout + result.stderr), output
    assert "remote compact" not in (result.stdout + result.stderr).lower(), output  # "Error running remote compact task"
    assert ws_counts(gateway)[0] > connections
    # warm-up, the patch request, the compaction, the request after it: all over the WebSocket
    assert ws_counts(gateway)[1] - creates >= 4, output
    posts = [r.body for r in upstream.requests if r.method == "POST"]
    summaries = [b for b in posts if b.get("tool_choice") == "none"]
    assert len(summaries) == 1, output  # the gateway summarised the history with the upstream model, once
    # the request after the compaction: the summary stands in for what it covers
    last = posts[-1]["messages"]
    assert any(m["role"] == "user" and m["content"] == SUMMARY_PREFIX + SUMMARY for m in last), last


def test_codex_falls_back_to_http_when_websocket_mode_is_off(upstream, tmp_path):
    with GatewayServer(Settings(upstream_url=upstream.base_url, db=str(tmp_path / "db.sqlite"),
                                websocket="off")) as gateway:
        script_patch_then_done(upstream)
        connections, _ = ws_counts(gateway)
        result, output = codex_task(gateway, tmp_path, BUILTIN)
        assert ws_counts(gateway)[0] == connections
    assert FALLBACK.search(result.stdout + result.stderr), output
    assert len([r for r in upstream.requests if r.method == "POST"]) == 2, output
