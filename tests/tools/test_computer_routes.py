"""Computer use on the routes whose upstream has a computer tool of its own (tools/computer/,
docs/computer-use.md): Claude's versioned computer tool on an Anthropic route (the fake Anthropic refuses it
without its beta header, as Anthropic does), in Claude's frame, actions and keys both ways, screenshots as
tool_result images, mistakes retried, streamed and not, the Agents SDK's ComputerTool over it; and a Responses
upstream that runs OpenAI's tool itself, its items passed through as they are."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from responses_gateway.configure import make as make_settings
from responses_gateway.route import Route
from responses_gateway.routing import Router
from responses_gateway.upstreams.anthropic import AnthropicUpstream
from responses_gateway.upstreams.responses import ResponsesUpstream
from tests.helpers import create, stream
from tests.support.fake_anthropic import (
    FakeAnthropic,
    computer_problem,
    computer_use_block,
    message_stream,
    text_block,
)
from tests.support.fake_chat import Stream
from tests.support.fake_responses import FakeResponsesUpstream, text_response_stream
from tests.support.server import GatewayServer
from tests.tools.test_computer import PREVIEW, SHOT, H, W, data_url, fake_computer, png, run_agent, screenshot

BIG = data_url(png(1920, 1080))


@pytest.fixture
def claude(tmp_path):
    """A gateway whose one route is a fake Anthropic API; yields (gateway, fake)."""
    with FakeAnthropic() as fake:
        route = Route(kind="anthropic", base_url=fake.url, api_key="k", max_tokens=1024)
        settings = make_settings(db=str(tmp_path / "r.db"))
        with GatewayServer(settings, router=Router.single(AnthropicUpstream(route), route)) as gateway:
            yield gateway, fake


def sdk(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0)


def blocks(request, kind: str) -> list[dict]:
    return [b for m in request.body["messages"] for b in m["content"] if isinstance(b, dict) and b["type"] == kind]


def uses(action: dict, id: str = "toolu_1") -> list[str]:
    return message_stream(computer_use_block(0, id, action), stop_reason="tool_use")


# -- Claude's own computer tool ------------------------------------------------------------------------------

def test_claude_gets_its_versioned_tool_and_beta_and_its_actions_map_both_ways(claude):
    gateway, fake = claude
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        fake.enqueue(uses({"action": "left_click", "coordinate": [100, 200], "text": "shift"}))
        first = create(http, {"model": "claude-sonnet-4-5", "input": "Click it.", "tools": [PREVIEW]})
        (call,) = first["output"]
        assert (call["call_id"], call["action"]) == ("toolu_1", {"type": "click", "x": 100, "y": 200,
                                                                 "button": "left", "keys": ["shift"]})
        sent = fake.requests[0]
        assert sent.body["tools"] == [{"type": "computer_20250124", "name": "computer",
                                       "display_width_px": W, "display_height_px": H}]
        assert sent.headers["anthropic-beta"] == "computer-use-2025-01-24"

        fake.enqueue(uses({"action": "key", "text": "ctrl+Return"}, "toolu_2"))
        second = stream(http, {"model": "claude-sonnet-4-5", "previous_response_id": first["id"], "tools": [PREVIEW],
                               "input": [screenshot("toolu_1")]}).response
        assert second["output"][0]["action"] == {"type": "keypress", "keys": ["ctrl", "enter"]}
        (result,) = blocks(fake.requests[1], "tool_result")
        image = next(c for c in result["content"] if c["type"] == "image")
        assert image["source"]["data"] == data_url(SHOT).split(",", 1)[1]

        fake.enqueue(message_stream(text_block(0, ["Sent."])))
        done = create(http, {"model": "claude-sonnet-4-5", "previous_response_id": second["id"], "tools": [PREVIEW],
                             "input": [screenshot("toolu_2")]})
        assert done["output"][0]["content"][0]["text"] == "Sent."
    # Claude reads its own calls back as it wrote them
    assert [b["input"] for b in blocks(fake.requests[2], "tool_use")] == [
        {"action": "left_click", "coordinate": [100, 200], "text": "shift"}, {"action": "key", "text": "ctrl+Return"}]
    assert [len([c for c in b["content"] if c["type"] == "image"]) for b in blocks(fake.requests[2], "tool_result")] \
        == [1, 1]


@pytest.mark.parametrize("model, kind, beta", [
    ("claude-opus-4-6", "computer_20251124", "computer-use-2025-11-24"),
    ("claude-haiku-4-5", "computer_20250124", "computer-use-2025-01-24"),
    ("claude-3-5-sonnet-20241022", "computer_20241022", "computer-use-2024-10-22"),
])
def test_each_claude_model_gets_the_tool_version_it_takes(claude, model, kind, beta):
    gateway, fake = claude
    fake.enqueue(uses({"action": "screenshot"}))
    response = sdk(gateway).responses.create(model=model, input="Look.", tools=[PREVIEW])
    assert response.output[0].action.type == "screenshot"
    assert fake.requests[0].body["tools"][0]["type"] == kind and fake.requests[0].headers["anthropic-beta"] == beta


def test_a_large_screen_is_named_to_claude_as_anthropic_scales_it_and_its_points_map_back(claude):
    """OpenAI's `computer` tool names no display: Claude is told XGA until a screenshot is seen, then the 1920x1080
    screenshot's size scaled to Anthropic's image limits (1430x804); its points come back in the display's
    pixels, and go back to Claude in its own frame."""
    gateway, fake = claude
    client = sdk(gateway)
    fake.enqueue(uses({"action": "screenshot"}))
    first = client.responses.create(model="claude-sonnet-4-5", input="Click the middle.", tools=[{"type": "computer"}])
    assert fake.requests[0].body["tools"][0]["display_width_px"] == 1024
    fake.enqueue(uses({"action": "left_click", "coordinate": [715, 402]}, "toolu_2"))
    second = client.responses.create(model="claude-sonnet-4-5", previous_response_id=first.id,
                                     tools=[{"type": "computer"}], input=[screenshot("toolu_1", BIG)])
    tool = fake.requests[1].body["tools"][0]
    assert (tool["display_width_px"], tool["display_height_px"]) == (1430, 804)
    assert [(a.type, a.x, a.y) for a in second.output[0].actions] == [("click", 960, 540)]
    fake.enqueue(message_stream(text_block(0, ["Done."])))
    client.responses.create(model="claude-sonnet-4-5", previous_response_id=second.id, tools=[{"type": "computer"}],
                            input=[screenshot("toolu_2", BIG)])
    assert blocks(fake.requests[2], "tool_use")[1]["input"] == {"action": "left_click", "coordinate": [715, 402]}


def test_claudes_mistake_is_retried_and_the_client_sees_only_the_corrected_call(claude):
    gateway, fake = claude
    fake.enqueue(uses({"action": "triple_click", "coordinate": [5, 5]}),
                 uses({"action": "double_click", "coordinate": [5, 5]}, "toolu_2"))
    response = sdk(gateway).responses.create(model="claude-sonnet-4-5", input="Select the line.", tools=[PREVIEW])
    assert [(i.call_id, i.action.type) for i in response.output] == [("toolu_2", "double_click")]
    (result,) = blocks(fake.requests[1], "tool_result")
    assert "use double_click" in json.dumps(result)
    assert blocks(fake.requests[1], "tool_use")[0]["input"] == {"action": "triple_click", "coordinate": [5, 5]}


def test_the_fake_refuses_claudes_tool_without_its_beta_as_anthropic_does():
    tool = {"type": "computer_20250124", "name": "computer", "display_width_px": W, "display_height_px": H}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}],
            "tools": [tool]}
    assert "does not match any of the expected tags" in computer_problem(body, {})
    assert computer_problem(body, {"anthropic-beta": "other-beta,computer-use-2025-01-24"}) is None
    assert "name" in computer_problem({**body, "tools": [{**tool, "name": "screen"}]},
                                      {"anthropic-beta": "computer-use-2025-01-24"})
    with FakeAnthropic() as fake:
        refused = httpx.post(f"{fake.url}/v1/messages", json=body, headers={"x-api-key": "k"})
        assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"


def test_the_agents_sdk_computer_tool_drives_a_fake_computer_through_claude(claude):
    gateway, fake = claude
    done: list[tuple] = []
    fake.enqueue(uses({"action": "screenshot"}, "toolu_a"),
                 uses({"action": "left_click", "coordinate": [640, 400]}, "toolu_b"),
                 uses({"action": "type", "text": "hello"}, "toolu_c"),
                 uses({"action": "key", "text": "Return"}, "toolu_d"),
                 message_stream(text_block(0, ["Submitted."])))
    assert run_agent(gateway, "claude-sonnet-4-5", "Say hello in the box.", fake_computer(done)) == "Submitted."
    assert [d for d in done if d[0] != "screenshot"] == [("click", 640, 400, "left"), ("type", "hello"),
                                                         ("keypress", ("enter",))]
    last = fake.requests[-1]
    assert [len(b["content"]) for b in blocks(last, "tool_result")][-3:] == [2, 2, 2]  # text and image each
    assert last.headers["anthropic-beta"] == "computer-use-2025-01-24"


# -- a Responses upstream runs OpenAI's tool itself ------------------------------------------------------------

@pytest.fixture
def responses_route(tmp_path):
    with FakeResponsesUpstream() as fake:
        route = Route(kind="responses", base_url=fake.base_url, api_key="k")
        settings = make_settings(db=str(tmp_path / "r.db"))
        with GatewayServer(settings, router=Router.single(ResponsesUpstream(route), route)) as gateway:
            yield gateway, fake


def message(text: str) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def test_a_responses_route_runs_the_tool_itself_and_its_items_pass_as_they_are(responses_route):
    gateway, fake = responses_route
    upstream_call = {"id": "cu_up", "type": "computer_call", "call_id": "call_up", "status": "completed",
                     "action": {"type": "double_click", "x": 11, "y": 12}, "pending_safety_checks": []}
    client = sdk(gateway)
    fake.enqueue(Stream(text_response_stream([upstream_call])))
    first = client.responses.create(model="computer-use-preview", input="Open it.", tools=[PREVIEW])
    (call,) = first.output
    assert (call.call_id, call.action.type, call.action.x) == ("call_up", "double_click", 11)
    assert fake.requests[0].body["tools"] == [PREVIEW]  # the declaration, as the client gave it
    fake.enqueue(Stream(text_response_stream([message("Opened.")])))
    client.responses.create(model="computer-use-preview", previous_response_id=first.id, tools=[PREVIEW],
                            input=[screenshot("call_up")])
    items = fake.requests[1].body["input"]
    assert items[-2] == {"type": "computer_call", "call_id": "call_up", "pending_safety_checks": [],
                         "action": {"type": "double_click", "x": 11, "y": 12}}
    assert items[-1]["type"] == "computer_call_output" and items[-1]["output"]["image_url"] == data_url(SHOT)


def test_a_responses_route_passes_the_computer_tools_actions_and_safety_checks_both_ways(responses_route):
    """The GA `computer` tool: several actions a call, the upstream's own pending safety check, acknowledged by
    the client and passed back; streamed, every event checked."""
    gateway, fake = responses_route
    check = {"id": "cu_sc_1", "code": "malicious_instructions", "message": "Careful."}
    upstream_call = {"id": "cu_up", "type": "computer_call", "call_id": "call_up", "status": "completed",
                     "actions": [{"type": "click", "x": 1, "y": 2, "button": "left"}, {"type": "type", "text": "x"}],
                     "pending_safety_checks": [check]}
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        fake.enqueue(Stream(text_response_stream([upstream_call])))
        first = stream(http, {"model": "gpt-5.4", "input": "Fill it.", "tools": [{"type": "computer"}]}).response
        assert first["output"][0]["actions"] == upstream_call["actions"]
        assert first["output"][0]["pending_safety_checks"] == [check]
        refused = http.post("/v1/responses", json={"model": "gpt-5.4", "previous_response_id": first["id"],
                                                   "tools": [{"type": "computer"}], "input": [screenshot("call_up")]})
        assert refused.status_code == 400 and "cu_sc_1" in refused.json()["error"]["message"]
        fake.enqueue(Stream(text_response_stream([message("Filled.")])))
        create(http, {"model": "gpt-5.4", "previous_response_id": first["id"], "tools": [{"type": "computer"}],
                      "input": [screenshot("call_up", acknowledged_safety_checks=[check])]})
    assert fake.requests[-1].body["input"][-1]["acknowledged_safety_checks"] == [check]
    assert len(fake.requests) == 2  # the refused request never reached the upstream
