"""Compaction against the real gateway: Codex's remote compaction (a trigger item), POST /v1/responses/compact,
`context_management` thresholds, sealed items read back, and clean failures.

The fake upstreams speak their protocols byte for byte; what they received is checked, so a compaction item
is proven to reach every adapter as plain text.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from responses_gateway.compaction.history import SUMMARY_PREFIX
from responses_gateway.compaction.step import SUMMARY_PROMPT
from responses_gateway.config import Settings
from responses_gateway.route import Route
from responses_gateway.upstreams.anthropic import AnthropicUpstream
from tests.helpers import create, stream
from tests.support import backends
from tests.support import fake_anthropic as anth
from tests.support.fake_chat import (
    DROP,
    FakeChatUpstream,
    Stream,
    error_in_stream,
    error_json,
    make_usage,
    text_stream,
    tool_calls_stream,
)
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

MODEL = "fake-model"
SUMMARY = "The user is building a CLI in Rust; main.rs parses flags; next: add --verbose."
SHELL = {"type": "function", "name": "shell", "description": "Run a command",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
TRIGGER = {"type": "compaction_trigger"}


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


CONVERSATION = [
    user("Build me a CLI in Rust."),
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
    {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd": "ls"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "main.rs"},
    user("Now add flags."),
]


def compaction_items(output: list[dict]) -> list[dict]:
    return [item for item in output if item["type"] == "compaction"]


def compact(http: httpx.Client, items: list[dict], **extra) -> dict:
    """A remote compaction as Codex runs it (streamed, store false); returns the one compaction item."""
    result = stream(http, {"model": MODEL, "input": [*items, TRIGGER], "store": False, **extra})
    assert result.terminal["type"] == "response.completed"
    (item,) = compaction_items(result.response["output"])
    return item


def sent_messages(upstream, index: int = -1) -> list[dict]:
    return upstream.requests[index].body["messages"]


# --------------------------------------------------------------------------- remote compaction (Codex)


def test_trigger_streams_exactly_one_compaction_item_and_nothing_of_the_summary(http, upstream):
    upstream.enqueue(text_stream([SUMMARY[:20], SUMMARY[20:]], usage=make_usage(300, 40)))
    result = stream(http, {"model": MODEL, "input": [*CONVERSATION, TRIGGER], "tools": [SHELL],
                           "parallel_tool_calls": True, "store": False, "include": ["reasoning.encrypted_content"]})
    assert result.terminal["type"] == "response.completed"
    done = [e["item"] for e in result.events if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in done] == ["compaction"]  # what Codex counts: exactly one
    assert result.response["output"] == done
    assert done[0]["id"].startswith("cmp_") and done[0]["encrypted_content"].startswith("rgc1.")
    assert SUMMARY not in done[0]["encrypted_content"]
    assert not any("delta" in e["type"] for e in result.events), "the summary must not stream as text"
    assert result.response["usage"]["input_tokens"] == 300 and result.response["usage"]["output_tokens"] == 40

    sent = upstream.requests[0].body
    assert sent["messages"][-1] == {"role": "user", "content": SUMMARY_PROMPT}
    assert sent["messages"][:-1] == [
        {"role": "user", "content": "Build me a CLI in Rust."},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "main.rs"},
        {"role": "user", "content": "Now add flags."},
    ]
    assert sent["tool_choice"] == "none"  # the tools stay declared (the history has calls); none may be called
    assert "compaction_trigger" not in str(sent)


def test_trigger_without_streaming_returns_the_item(http, upstream):
    upstream.enqueue(text_stream([SUMMARY]))
    body = create(http, {"model": MODEL, "input": [*CONVERSATION, TRIGGER]})
    assert [i["type"] for i in body["output"]] == ["compaction"]
    assert body["status"] == "completed"


def test_round_trip_the_upstream_reads_the_summary_instead_of_the_item(http, upstream):
    upstream.enqueue(text_stream([SUMMARY]))
    item = compact(http, CONVERSATION)
    # Codex's next request: the user messages it kept, the compaction item, then the new turn
    upstream.enqueue(text_stream(["Added --verbose."]))
    result = stream(http, {"model": MODEL, "store": False, "instructions": "Be brief.", "input": [
        user("Build me a CLI in Rust."), user("Now add flags."), item, user("Go on.")]})
    assert result.text == "Added --verbose."
    assert sent_messages(upstream) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Build me a CLI in Rust."},
        {"role": "user", "content": "Now add flags."},
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
        {"role": "user", "content": "Go on."},
    ]


def test_everything_before_the_latest_compaction_item_but_the_user_messages_is_covered_by_it(http, upstream):
    upstream.enqueue(text_stream(["first summary"]))
    first = compact(http, CONVERSATION[:2])
    upstream.enqueue(text_stream([SUMMARY]))
    second = compact(http, [CONVERSATION[0], first, *CONVERSATION[1:]])
    # the second summary was written from the first one, as text
    assert {"role": "user", "content": SUMMARY_PREFIX + "first summary"} in sent_messages(upstream)
    upstream.enqueue(text_stream(["ok"]))
    stream(http, {"model": MODEL, "store": False, "tools": [SHELL],
                  "input": [first, *CONVERSATION, second, user("Next?")]})
    assert sent_messages(upstream) == [
        {"role": "user", "content": "Build me a CLI in Rust."},
        {"role": "user", "content": "Now add flags."},
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
        {"role": "user", "content": "Next?"},
    ]


def test_a_call_whose_output_follows_the_compaction_item_is_kept_with_its_output(http, upstream):
    upstream.enqueue(text_stream([SUMMARY]))
    item = compact(http, CONVERSATION[:1])
    upstream.enqueue(text_stream(["done"]))
    stream(http, {"model": MODEL, "store": False, "tools": [SHELL],
                  "input": [*CONVERSATION[:3], item, CONVERSATION[3]]})
    assert sent_messages(upstream)[-3:] == [
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "main.rs"},
    ]


def test_codex_context_compaction_items_are_read_back_and_empty_markers_dropped(http, upstream):
    upstream.enqueue(text_stream([SUMMARY]))
    item = compact(http, CONVERSATION)
    upstream.enqueue(text_stream(["ok"]))
    stream(http, {"model": MODEL, "store": False, "input": [
        {"type": "context_compaction"}, user("hi"),
        {"type": "context_compaction", "id": "cc_1", "encrypted_content": item["encrypted_content"]}, user("next")]})
    assert sent_messages(upstream) == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
        {"role": "user", "content": "next"},
    ]


def test_stored_compaction_chains_with_previous_response_id(http, upstream):
    upstream.enqueue(text_stream(["Hello!"]))
    first = create(http, {"model": MODEL, "input": "Remember the number 7."})
    upstream.enqueue(text_stream([SUMMARY]))
    compacted = create(http, {"model": MODEL, "previous_response_id": first["id"], "input": [TRIGGER]})
    listed = http.get(f"/v1/responses/{compacted['id']}/input_items").json()["data"]
    assert listed == []  # the trigger is a request, not an item
    upstream.enqueue(text_stream(["7"]))
    create(http, {"model": MODEL, "previous_response_id": compacted["id"], "input": "Which number?"})
    assert sent_messages(upstream) == [
        {"role": "user", "content": "Remember the number 7."},
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
        {"role": "user", "content": "Which number?"},
    ]


# --------------------------------------------------------------------------- refusals before any event


@pytest.mark.parametrize("content, why", [
    ("gAAAAABpM0Yj-openai-made-this", "not produced by this gateway"),
    ("rgc1.deadbeef.AAAA", "key is not configured"),
])
def test_unknown_compaction_items_are_a_clear_400(http, upstream, content, why):
    resp = http.post("/v1/responses", json={"model": MODEL, "input": [
        user("hi"), {"type": "compaction", "encrypted_content": content}, user("more")]})
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert why in error["message"]
    assert error["param"] == "input[1].encrypted_content" and error["code"] == "invalid_encrypted_content"
    assert upstream.requests == []


def test_a_forged_item_is_a_clear_400(http, upstream):
    upstream.enqueue(text_stream([SUMMARY]))
    content = compact(http, CONVERSATION)["encrypted_content"]
    head, blob = content.rsplit(".", 1)
    forged = f"{head}.{blob[:20]}{'A' if blob[20] != 'A' else 'B'}{blob[21:]}"
    resp = http.post("/v1/responses", json={"model": MODEL, "input": [
        {"type": "compaction", "encrypted_content": forged}, user("more")]})
    assert resp.status_code == 400
    assert "altered" in resp.json()["error"]["message"]


@pytest.mark.parametrize("items, param", [
    ([TRIGGER, user("hi")], "input[0]"),
    ([TRIGGER], "input"),
    ([{"type": "compaction"}], "input[0].encrypted_content"),
])
def test_misused_compaction_input_is_a_400(http, upstream, items, param):
    resp = http.post("/v1/responses", json={"model": MODEL, "input": items})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] == param


@pytest.mark.parametrize("management, param", [
    ([{"type": "truncation"}], "context_management[0].type"),
    ([{"type": "compaction", "compact_threshold": 0}], "context_management[0].compact_threshold"),
    ([{"type": "compaction", "threshold": 5}], "context_management[0].threshold"),
])
def test_bad_context_management_is_a_400(http, upstream, management, param):
    resp = http.post("/v1/responses", json={"model": MODEL, "input": "hi", "context_management": management})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] == param


# --------------------------------------------------------------------------- upstream failures


def failed_cleanly(result) -> None:
    assert result.terminal["type"] == "response.failed"
    assert not compaction_items(result.response["output"])
    assert not any(e.get("item", {}).get("type") == "compaction" for e in result.events)


@pytest.mark.parametrize("script", [
    Stream([*text_stream(["half a summ"], finish_reason=None, done=False)[:2], DROP]),
    Stream([*text_stream(["half"], finish_reason=None, done=False)[:2], error_in_stream("boom", code=500)]),
    Stream(text_stream([" "])),
], ids=["dropped", "error-frame", "empty"])
def test_upstream_failing_during_compaction_fails_the_response_without_an_item(http, upstream, script):
    upstream.enqueue(script)
    resp = http.post("/v1/responses", json={"model": MODEL, "input": [*CONVERSATION, TRIGGER], "stream": True})
    failed_cleanly(check_stream(resp.content, require_done=True))


def test_upstream_refusing_the_summary_request_is_an_http_error(http, upstream):
    upstream.enqueue(error_json(503, "overloaded", type="server_error"))
    resp = http.post("/v1/responses", json={"model": MODEL, "input": [*CONVERSATION, TRIGGER], "stream": True})
    assert resp.status_code >= 500 and "error" in resp.json()


# --------------------------------------------------------------------------- POST /v1/responses/compact


def test_openai_sdk_compact(client, upstream):
    upstream.enqueue(text_stream([SUMMARY], usage=make_usage(120, 30)))
    compacted = client.responses.compact(model=MODEL, input=CONVERSATION, instructions="You are a coder.")
    assert compacted.object == "response.compaction" and compacted.id.startswith("resp_")
    assert [(i.type, getattr(i, "role", None)) for i in compacted.output] == [
        ("message", "user"), ("message", "user"), ("compaction", None)]
    assert compacted.output[0].content[0].text == "Build me a CLI in Rust."
    assert compacted.usage.input_tokens == 120 and compacted.usage.output_tokens == 30
    assert upstream.requests[0].body["messages"][0] == {"role": "system", "content": "You are a coder."}

    # the SDK's own output, sent back as input, continues the conversation
    upstream.enqueue(text_stream(["Sure."]))
    following = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    reply = client.responses.create(model=MODEL, input=[*following, user("And tests?")], store=False)
    assert reply.output_text == "Sure."
    assert sent_messages(upstream)[-2:] == [{"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
                                             {"role": "user", "content": "And tests?"}]


def test_compact_endpoint_failure_and_refusals(http, upstream):
    upstream.enqueue(Stream([*text_stream(["x"], finish_reason=None, done=False)[:2], DROP]))
    resp = http.post("/v1/responses/compact", json={"model": MODEL, "input": "hello"})
    assert resp.status_code == 502 and resp.json()["error"]["message"]
    resp = http.post("/v1/responses/compact", json={"model": MODEL, "input": "hi", "tools": []})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "unknown_parameter"
    resp = http.post("/v1/responses/compact", json={"model": MODEL})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "input"


# --------------------------------------------------------------------------- context_management thresholds


def test_threshold_compacts_first_then_answers_in_the_same_stream(http, upstream):
    upstream.enqueue(text_stream([SUMMARY], usage=make_usage(200, 20)),
                     text_stream(["Here is --verbose."], usage=make_usage(50, 5)))
    result = stream(http, {"model": MODEL, "input": CONVERSATION, "tools": [SHELL], "store": False,
                           "context_management": [{"type": "compaction", "compact_threshold": 10}]})
    assert [i["type"] for i in result.response["output"]] == ["compaction", "message"]
    assert result.text == "Here is --verbose."
    assert result.response["usage"]["input_tokens"] == 250
    assert len(upstream.requests) == 2
    answer = upstream.requests[1].body
    assert answer["messages"] == [
        {"role": "user", "content": "Build me a CLI in Rust."},
        {"role": "user", "content": "Now add flags."},
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
    ]
    assert answer["tool_choice"] == "auto"

    # the output appended to the input (stateless chaining) carries the compaction forward
    upstream.enqueue(text_stream(["ok"]))
    stream(http, {"model": MODEL, "store": False, "input": [*CONVERSATION, *result.response["output"], user("Thanks")],
                  "context_management": [{"type": "compaction", "compact_threshold": 1000}]})
    assert sent_messages(upstream)[-3:] == [{"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
                                             {"role": "assistant", "content": "Here is --verbose."},
                                             {"role": "user", "content": "Thanks"}]


def test_below_the_threshold_nothing_happens(http, upstream):
    upstream.enqueue(text_stream(["plain"]))
    result = stream(http, {"model": MODEL, "input": CONVERSATION,
                           "context_management": [{"type": "compaction", "compact_threshold": 100_000}]})
    assert [i["type"] for i in result.response["output"]] == ["message"]
    assert len(upstream.requests) == 1


def test_threshold_compaction_failing_ends_with_one_terminal_event(http, upstream):
    upstream.enqueue(Stream([*text_stream(["half"], finish_reason=None, done=False)[:2], DROP]))
    resp = http.post("/v1/responses", json={"model": MODEL, "input": CONVERSATION, "stream": True,
                                            "context_management": [{"type": "compaction", "compact_threshold": 5}]})
    failed_cleanly(check_stream(resp.content, require_done=True))
    assert len(upstream.requests) == 1  # no answer after a failed compaction


def test_threshold_then_tool_call(http, upstream):
    upstream.enqueue(text_stream([SUMMARY]),
                     tool_calls_stream([("call_2", "shell", ['{"cmd": "cargo build"}'])]))
    result = stream(http, {"model": MODEL, "input": CONVERSATION, "tools": [SHELL],
                           "context_management": [{"type": "compaction", "compact_threshold": 5}]})
    assert [i["type"] for i in result.response["output"]] == ["compaction", "function_call"]
    assert result.response["output"][1]["arguments"] == '{"cmd": "cargo build"}'


# --------------------------------------------------------------------------- keys: rotation, replicas, tenants


def gateway_with(up: FakeChatUpstream, **settings) -> GatewayServer:
    return GatewayServer(Settings(upstream_url=up.base_url, **settings))


def trigger_body() -> dict:
    return {"model": MODEL, "input": [*CONVERSATION, TRIGGER], "store": False}


def continue_body(item: dict) -> dict:
    return {"model": MODEL, "input": [item, user("go on")], "store": False}


def test_key_rotation_old_key_id_still_opens(upstream):
    old, new = "old-secret-0123456789", "new-secret-0123456789"
    with gateway_with(upstream, db="none", compaction_key=old) as gw, httpx.Client(base_url=gw.url) as http:
        upstream.enqueue(text_stream([SUMMARY]))
        item = create(http, trigger_body())["output"][0]
    with gateway_with(upstream, db="none", compaction_key=f"{new},{old}") as gw, \
            httpx.Client(base_url=gw.url) as http:
        upstream.enqueue(text_stream(["continued"]))
        assert create(http, continue_body(item))["output"][0]["content"][0]["text"] == "continued"
        upstream.enqueue(text_stream([SUMMARY]))
        fresh = create(http, trigger_body())["output"][0]
        assert fresh["encrypted_content"].split(".")[1] != item["encrypted_content"].split(".")[1]  # new key id
    with gateway_with(upstream, db="none", compaction_key=new) as gw, httpx.Client(base_url=gw.url) as http:
        resp = http.post("/v1/responses", json=continue_body(item))
        assert resp.status_code == 400 and "rotated out" in resp.json()["error"]["message"]
        upstream.enqueue(text_stream(["ok"]))
        create(http, continue_body(fresh))


def test_generated_key_is_shared_through_the_store(start_gateway, upstream, backend):
    """Two replicas on one database, no key configured: the key generated by the first opens at the second."""
    a, b = start_gateway(), start_gateway()
    with httpx.Client(base_url=a.url) as http_a, httpx.Client(base_url=b.url) as http_b:
        upstream.enqueue(text_stream([SUMMARY]))
        item = create(http_a, trigger_body())["output"][0]
        upstream.enqueue(text_stream(["replica b read it"]))
        create(http_b, continue_body(item))
        assert sent_messages(upstream)[0] == {"role": "user", "content": SUMMARY_PREFIX + SUMMARY}
    assert len(backend.query("SELECT value FROM rg_secrets")) == 1


def test_an_item_opens_only_for_the_api_key_it_was_made_for(upstream):
    with gateway_with(upstream, db="none", api_keys="key-a,key-b") as gw:
        a = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="key-a", max_retries=0)
        b = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="key-b", max_retries=0)
        upstream.enqueue(text_stream([SUMMARY]))
        item = a.responses.compact(model=MODEL, input="Remember 7.").output[-1].model_dump()
        with pytest.raises(openai.BadRequestError) as info:
            b.responses.create(model=MODEL, input=[item, user("which number?")], store=False)
        assert "another API key" in info.value.message
        upstream.enqueue(text_stream(["7"]))
        assert a.responses.create(model=MODEL, input=[item, user("which number?")], store=False).output_text == "7"


# --------------------------------------------------------------------------- another upstream protocol


@pytest.fixture(scope="module")
def anthropic():
    with anth.FakeAnthropic() as fake:
        route = Route(kind="anthropic", base_url=fake.url, api_key="k", max_tokens=1024)
        with GatewayServer(Settings(db="none"), upstream=AnthropicUpstream(route)) as gw:
            yield fake, gw


def test_anthropic_upstream_trigger_and_round_trip(anthropic):
    fake, gw = anthropic
    fake.reset()
    with httpx.Client(base_url=gw.url, timeout=30) as http:
        fake.enqueue(anth.message_stream(anth.text_block(0, [SUMMARY[:10], SUMMARY[10:]])))
        item = compact(http, CONVERSATION, tools=[SHELL])
        sent = fake.requests[0].body
        assert sent["tool_choice"] == {"type": "none"} and sent["tools"][0]["name"] == "shell"
        assert sent["messages"][-1]["content"][-1] == {"type": "text", "text": SUMMARY_PROMPT}

        fake.enqueue(anth.message_stream(anth.text_block(0, ["Continuing."])))
        result = stream(http, {"model": "claude-x", "store": False, "input": [user("Now add flags."), item, user("go")]})
        assert result.text == "Continuing."
        texts = [block["text"] for m in fake.requests[1].body["messages"] for block in m["content"]]
        assert texts == ["Now add flags.", SUMMARY_PREFIX + SUMMARY, "go"]

        fake.enqueue(anth.message_stream(anth.text_block(0, ["partial"]), stop_reason=None, stop=False))
        resp = http.post("/v1/responses", json={"model": "claude-x", "input": [*CONVERSATION, TRIGGER],
                                                "stream": True})
        failed_cleanly(check_stream(resp.content, require_done=True))



def test_the_tool_round_trip_just_before_the_compaction_item_is_kept(http, upstream):
    """Codex puts its latest complete tool transaction right before the compaction item: the model sees it."""
    upstream.enqueue(text_stream([SUMMARY]))
    item = compact(http, CONVERSATION[:1])
    upstream.enqueue(text_stream(["done"]))
    dangling = {"type": "function_call", "call_id": "call_0", "name": "shell", "arguments": "{}"}
    stream(http, {"model": MODEL, "store": False, "tools": [SHELL],
                  "input": [CONVERSATION[0], CONVERSATION[1], dangling, *CONVERSATION[2:4], item]})
    assert sent_messages(upstream) == [
        {"role": "user", "content": "Build me a CLI in Rust."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "main.rs"},
        {"role": "user", "content": SUMMARY_PREFIX + SUMMARY},
    ]
