"""Computer use through the real gateway (tools/computer/, docs/computer-use.md): a scripted vision model in
each coordinate profile, the Agents SDK's ComputerTool with a fake computer through a whole loop, Claude's
computer tool on an Anthropic route, a Responses route passing the tool through, the checks of bad input,
streamed and not, stored and chained, over WebSocket too."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib

import httpx
import openai
import pytest

from responses_gateway.configure import make as make_settings
from tests.support.fake_chat import Stream, text_stream, tool_calls_stream
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream

W, H = 1280, 800  # the display, and the screenshots' size


def png(width: int = W, height: int = H) -> bytes:
    """A real PNG of this size (one grey colour)."""
    raw = b"".join(b"\x00" + b"\x80" * (width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


SHOT = png()
SHOT_URL = "data:image/png;base64," + base64.b64encode(SHOT).decode()
PREVIEW = {"type": "computer_use_preview", "display_width": W, "display_height": H, "environment": "browser"}


def computer(arguments: dict, call_id: str = "call_1") -> Stream:
    """The model calls the gateway's `computer` function."""
    text = json.dumps(arguments)
    return Stream(tool_calls_stream([(call_id, "computer", [text[:10], text[10:]])]))


def screenshot(call_id: str, url: str = SHOT_URL, **extra) -> dict:
    return {"type": "computer_call_output", "call_id": call_id,
            "output": {"type": "computer_screenshot", "image_url": url, **extra.pop("output", {})}, **extra}


@pytest.fixture
def gw(upstream, tmp_path):
    def start(**settings):
        return GatewayServer(make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"), **settings))
    return start


def client(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0)


def sent_images(request) -> list[str]:
    """The image URLs a Chat Completions request shows the model, in order."""
    return [part["image_url"]["url"] for m in request.body["messages"] if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


# -- a vision model over Chat Completions, in each coordinate profile --------------------------------------

@pytest.mark.parametrize("profile, model_point, display_point", [
    ("pixels", (640, 400), (640, 400)),
    ("qwen3-vl", (500, 500), (640, 400)),  # 0..1000
    ("glm-4.5v", (333, 111), (427, 89)),  # 0..999
    ("qwen2.5-vl", (644, 406), (640, 400)),  # pixels of the smart-resized image: 1288x812 for 1280x800
    ("ui-tars-1.5", (644, 406), (640, 400)),
])
def test_a_models_point_reaches_the_client_in_display_pixels_and_goes_back_in_the_models(
        gw, upstream, profile, model_point, display_point):
    with gw(computer_profile=profile) as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Open the menu.", tools=[PREVIEW])
        (call,) = first.output
        assert (call.type, call.action.type, call.status, call.pending_safety_checks) == (
            "computer_call", "screenshot", "completed", [])
        upstream.enqueue(computer({"action": "click", "x": model_point[0], "y": model_point[1]}, "call_2"))
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW],
                                      input=[screenshot(call.call_id)])
        (click,) = second.output
        assert (click.action.type, click.action.button, click.action.x, click.action.y) == (
            "click", "left", *display_point)
        upstream.enqueue(Stream(text_stream(["Done."])))
        third = sdk.responses.create(model="m", previous_response_id=second.id, tools=[PREVIEW],
                                     input=[screenshot(click.call_id)])
        assert third.output_text == "Done."
        messages = upstream.requests[2].body["messages"]
        calls = [json.loads(c["function"]["arguments"]) for m in messages for c in m.get("tool_calls") or ()]
        assert calls[1]["action"] == "click" and (calls[1]["x"], calls[1]["y"]) == model_point  # the model's frame
        # each screenshot: the call's tool message, then the image in a user message after it
        assert [m["role"] for m in messages][-6:] == ["assistant", "tool", "user", "assistant", "tool", "user"]
        assert sent_images(upstream.requests[2]) == [SHOT_URL] * 2


def test_older_screenshots_become_text_and_only_the_last_n_are_images(gw, upstream):
    with gw(computer_keep_screenshots=2) as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}, "c0"))
        previous = sdk.responses.create(model="m", input="Go.", tools=[PREVIEW])
        shots = [png(W, H - 1), png(W, H - 2), png(W, H - 3)]
        urls = ["data:image/png;base64," + base64.b64encode(s).decode() for s in shots]
        for turn, url in enumerate(urls):
            upstream.enqueue(computer({"action": "wait"}, f"c{turn + 1}"))
            previous = sdk.responses.create(model="m", previous_response_id=previous.id, tools=[PREVIEW],
                                            input=[screenshot(previous.output[0].call_id, url)])
        last = upstream.requests[-1]
        assert sent_images(last) == urls[-2:]  # the last two as images, in order
        outputs = [m["content"] for m in last.body["messages"] if m["role"] == "tool"]
        assert "left out" in outputs[0] and "left out" not in outputs[-1]


def test_a_call_the_model_gets_wrong_is_never_shown_and_the_model_tries_again(gw, upstream):
    with gw() as gateway:
        upstream.enqueue(computer({"action": "click", "x": 5000, "y": 10}, "bad"),
                         computer({"action": "fly"}, "worse"),
                         computer({"action": "click", "x": 10, "y": 10}, "good"))
        raw = httpx.post(f"{gateway.url}/v1/responses", timeout=30, json={
            "model": "m", "input": "Click.", "tools": [PREVIEW], "stream": True}).text
        result = check_stream(raw)
        events = result.events
        (call,) = result.response["output"]
        assert (call["call_id"], call["action"]) == ("good", {"type": "click", "x": 10, "y": 10, "button": "left"})
        second = upstream.requests[1].body["messages"]
        assert "outside the screen" in second[-1]["content"] and second[-1]["tool_call_id"] == "bad"
        assert "unknown action 'fly'" in upstream.requests[2].body["messages"][-1]["content"]
        # OpenAI's order for a computer call: added with its action, then done; no argument events
        kinds = [e["type"] for e in events]
        added = kinds.index("response.output_item.added")
        assert kinds[added + 1] == "response.output_item.done"
        assert events[added]["item"]["action"]["type"] == "click"
        assert not any("arguments" in k for k in kinds)


def test_several_actions_with_the_computer_tool(gw, upstream):
    with gw() as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Type.", tools=[{"type": "computer"}])
        assert first.output[0].actions[0].type == "screenshot" and first.output[0].action is None
        upstream.enqueue(computer({"actions": [{"action": "click", "x": 1, "y": 2},
                                               {"action": "type", "text": "hi"},
                                               {"action": "keypress", "keys": ["ctrl", "s"]},
                                               {"action": "drag", "path": [{"x": 0, "y": 0}, {"x": 9, "y": 9}]},
                                               {"action": "scroll", "x": 5, "y": 5, "scroll_y": 300}]}, "c2"))
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[{"type": "computer"}],
                                      input=[screenshot(first.output[0].call_id)])
        assert [a.type for a in second.output[0].actions] == ["click", "type", "keypress", "drag", "scroll"]
        assert second.output[0].actions[3].path[1].x == 9 and second.output[0].actions[4].scroll_y == 300


# -- bad input: a clear 400, nothing stored lost ------------------------------------------------------------

def test_bad_screenshots_and_unknown_calls_are_400s(gw, upstream):
    with gw(max_image_bytes=50_000) as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Go.", tools=[PREVIEW])
        call_id = first.output[0].call_id
        cases = [
            (screenshot("nobody"), "No computer_call found with call_id 'nobody'"),
            (screenshot(call_id, "data:image/png;base64," + base64.b64encode(b"not an image at all").decode()),
             "is not a PNG, JPEG, WebP or GIF image"),
            (screenshot(call_id, "data:image/png;base64," + base64.b64encode(png(400, 400) + b"\0" * 60_000).decode()),
             "larger than the 50,000 bytes"),
            ({"type": "computer_call_output", "call_id": call_id,
              "output": {"type": "computer_screenshot", "file_id": "file_1"}}, "file_id is not read"),
            ({"type": "computer_call_output", "call_id": call_id, "output": {"type": "text"}},
             "expected 'computer_screenshot'"),
        ]
        for item, says in cases:
            with pytest.raises(openai.BadRequestError) as caught:
                sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW], input=[item])
            assert says in caught.value.body["message"], caught.value.body
        assert sdk.responses.retrieve(first.id).output[0].call_id == call_id  # nothing stored lost
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.responses.create(model="m", input="x", tools=[{**PREVIEW, "environment": "amiga"}])
        assert caught.value.body["param"] == "tools[0].environment"


def test_a_denied_domain_raises_a_safety_check_that_must_be_acknowledged(gw, upstream):
    with gw(computer_deny_domains="bank.example") as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Pay.", tools=[PREVIEW])
        upstream.enqueue(computer({"action": "click", "x": 3, "y": 4}, "c2"))
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW], input=[
            screenshot(first.output[0].call_id, output={"current_url": "https://www.bank.example/pay"})])
        (check,) = second.output[0].pending_safety_checks
        assert check.code == "sensitive_domain" and "bank.example" in check.message
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.responses.create(model="m", previous_response_id=second.id, tools=[PREVIEW],
                                 input=[screenshot("c2")])
        assert "must acknowledge its pending safety checks" in caught.value.body["message"]
        upstream.enqueue(Stream(text_stream(["Paid."])))
        done = sdk.responses.create(model="m", previous_response_id=second.id, tools=[PREVIEW], input=[
            screenshot("c2", acknowledged_safety_checks=[{"id": check.id}])])
        assert done.output_text == "Paid."


# -- stored, chained, shown as include[] says, over WebSocket ----------------------------------------------

def test_input_items_show_the_screenshot_only_with_include(gw, upstream):
    with gw() as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}), Stream(text_stream(["ok"])))
        first = sdk.responses.create(model="m", input="Look.", tools=[PREVIEW])
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW],
                                      input=[screenshot(first.output[0].call_id)])
        plain = httpx.get(f"{gateway.url}/v1/responses/{second.id}/input_items").json()["data"][0]
        assert plain["type"] == "computer_call_output" and "image_url" not in plain["output"]
        full = httpx.get(f"{gateway.url}/v1/responses/{second.id}/input_items",
                         params={"include[]": "computer_call_output.output.image_url"}).json()["data"][0]
        assert full["output"]["image_url"] == SHOT_URL


def test_over_websocket(gw, upstream):
    from tests.edge.test_websocket import read_turn, send, ws_url

    with gw() as gateway:
        upstream.enqueue(computer({"action": "move", "x": 7, "y": 8}))
        import websockets.sync.client as wsc

        with wsc.connect(ws_url(gateway)) as ws:
            send(ws, model="m", input="Move.", tools=[PREVIEW])
            events = read_turn(ws)
        final = events[-1]["response"]
        assert final["output"][0]["action"] == {"type": "move", "x": 7, "y": 8}


# -- the Agents SDK's ComputerTool, a whole loop -------------------------------------------------------------

def test_the_agents_sdk_computer_tool_drives_a_fake_computer(gw, upstream):
    from agents import Agent, AsyncComputer, ComputerTool, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    done: list[tuple] = []

    class Screen(AsyncComputer):
        @property
        def environment(self):
            return "browser"

        @property
        def dimensions(self):
            return (W, H)

        async def screenshot(self) -> str:
            done.append(("screenshot",))
            return base64.b64encode(SHOT).decode()

        async def click(self, x, y, button):
            done.append(("click", x, y, button))

        async def double_click(self, x, y):
            done.append(("double_click", x, y))

        async def scroll(self, x, y, scroll_x, scroll_y):
            done.append(("scroll", x, y, scroll_x, scroll_y))

        async def type(self, text):
            done.append(("type", text))

        async def wait(self):
            done.append(("wait",))

        async def move(self, x, y):
            done.append(("move", x, y))

        async def keypress(self, keys):
            done.append(("keypress", tuple(keys)))

        async def drag(self, path):
            done.append(("drag", tuple(path)))

    with gw(computer_profile="qwen3-vl") as gateway:
        upstream.enqueue(computer({"action": "screenshot"}, "a"),
                         computer({"action": "click", "x": 250, "y": 500}, "b"),
                         computer({"action": "type", "text": "hello"}, "c"),
                         Stream(text_stream(["Typed hello."])))

        async def main():
            async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as sdk:
                agent = Agent(name="operator", instructions="Use the computer.",
                              model=OpenAIResponsesModel(model="qwen3-vl", openai_client=sdk),
                              tools=[ComputerTool(computer=Screen())])
                return await asyncio.wait_for(Runner.run(agent, "Type hello in the box."), 60)

        result = asyncio.run(main())
    assert result.final_output == "Typed hello."
    assert [d for d in done if d[0] != "screenshot"] == [("click", 320, 400, "left"), ("type", "hello")]
    last = upstream.requests[-1]
    assert len(sent_images(last)) == 3  # a screenshot after each of the three actions


# -- Claude's computer tool on an Anthropic route; a Responses route running the tool itself -----------------

def test_an_anthropic_route_offers_claudes_computer_tool_and_maps_its_actions(tmp_path):
    from responses_gateway.route import Route
    from responses_gateway.routing import Router
    from responses_gateway.upstreams.anthropic import AnthropicUpstream
    from tests.support.fake_anthropic import FakeAnthropic, message_stream, text_block, tool_use_block

    with FakeAnthropic() as fake:
        route = Route(kind="anthropic", base_url=fake.url, api_key="k", max_tokens=1024)
        upstream = AnthropicUpstream(route)
        with GatewayServer(make_settings(db=str(tmp_path / "r.db")), router=Router.single(upstream, route)) as gateway:
            sdk = client(gateway)
            fake.enqueue(message_stream(tool_use_block(0, "toolu_1", "computer",
                                                       ['{"action": "left_click", ', '"coordinate": [100, 200]}']),
                                        stop_reason="tool_use"))
            first = sdk.responses.create(model="claude-x", input="Click it.", tools=[PREVIEW])
            (call,) = first.output
            assert (call.call_id, call.action.type, call.action.x, call.action.y) == ("toolu_1", "click", 100, 200)
            sent = fake.requests[0]
            assert sent.body["tools"] == [{"type": "computer_20250124", "name": "computer",
                                           "display_width_px": W, "display_height_px": H}]
            assert sent.headers["anthropic-beta"] == "computer-use-2025-01-24"

            fake.enqueue(message_stream(text_block(0, ["Clicked."])))
            done = sdk.responses.create(model="claude-x", previous_response_id=first.id, tools=[PREVIEW],
                                        input=[screenshot("toolu_1")])
            assert done.output_text == "Clicked."
            messages = fake.requests[1].body["messages"]
            use = next(b for m in messages for b in m["content"] if b["type"] == "tool_use")
            assert use["input"] == {"action": "left_click", "coordinate": [100, 200]}
            result = next(b for m in messages for b in m["content"] if b["type"] == "tool_result")
            image = next(c for c in result["content"] if c["type"] == "image")
            assert image["source"]["data"] == base64.b64encode(SHOT).decode()


def test_a_responses_route_runs_the_tool_itself_and_its_items_pass_as_they_are(tmp_path):
    from responses_gateway.route import Route
    from responses_gateway.routing import Router
    from responses_gateway.upstreams.responses import ResponsesUpstream
    from tests.support.fake_responses import FakeResponsesUpstream, text_response_stream

    upstream_call = {"id": "cu_up", "type": "computer_call", "call_id": "call_up", "status": "completed",
                     "action": {"type": "double_click", "x": 11, "y": 12}, "pending_safety_checks": []}
    with FakeResponsesUpstream() as fake:
        route = Route(kind="responses", base_url=fake.base_url, api_key="k")
        adapter = ResponsesUpstream(route)
        with GatewayServer(make_settings(db=str(tmp_path / "r.db")), router=Router.single(adapter, route)) as gateway:
            sdk = client(gateway)
            fake.enqueue(Stream(text_response_stream([upstream_call])))
            first = sdk.responses.create(model="computer-use-preview", input="Open it.", tools=[PREVIEW])
            (call,) = first.output
            assert (call.call_id, call.action.type, call.action.x) == ("call_up", "double_click", 11)
            assert fake.requests[0].body["tools"] == [PREVIEW]  # the declaration, as the client gave it
            fake.enqueue(Stream(text_response_stream([{"id": "msg_1", "type": "message", "role": "assistant",
                                                       "status": "completed", "content": [
                                                           {"type": "output_text", "text": "Opened.",
                                                            "annotations": []}]}])))
            sdk.responses.create(model="computer-use-preview", previous_response_id=first.id, tools=[PREVIEW],
                                 input=[screenshot("call_up")])
            items = fake.requests[1].body["input"]
            assert {k: v for k, v in items[-2].items()} == {
                "type": "computer_call", "call_id": "call_up", "action": {"type": "double_click", "x": 11, "y": 12},
                "pending_safety_checks": []}
            assert items[-1]["type"] == "computer_call_output" and items[-1]["output"]["image_url"] == SHOT_URL
