"""Computer use through the real gateway on vision models over Chat Completions (tools/computer/,
docs/computer-use.md): a scripted model in each coordinate profile, offered the function it takes, answering in
its own frame and checked on what it receives back (its calls in its frame, the screenshots as images after the
tool messages, in order, older ones pruned); the model's mistakes retried; bad input refused; safety checks;
streamed and not, stored and chained (previous_response_id, a replayed history, a conversation, background),
over WebSocket too; and the Agents SDK's ComputerTool driving a fake computer through whole loops."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import time
import zlib

import httpx
import openai
import pytest
from openai.types.responses import ResponseComputerToolCall, ResponseComputerToolCallOutputItem

from responses_gateway.configure import make as make_settings
from tests.helpers import create, stream
from tests.support.fake_chat import FakeChatUpstream, Stream, text_stream, tool_calls_stream
from tests.support.server import GatewayServer

W, H = 1280, 800  # the display, and the screenshots' size


def png(width: int = W, height: int = H) -> bytes:
    """A real PNG of this size (one grey colour)."""
    raw = b"".join(b"\x00" + b"\x80" * (width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def data_url(image: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(image).decode()


SHOT = png()
SHOT_URL = data_url(SHOT)
PREVIEW = {"type": "computer_use_preview", "display_width": W, "display_height": H, "environment": "browser"}


def computer(arguments: dict, call_id: str = "call_1", name: str = "computer") -> Stream:
    """The model calls the function it is offered for the computer (streamed in two argument pieces)."""
    text = json.dumps(arguments)
    return Stream(tool_calls_stream([(call_id, name, [text[:10], text[10:]])]))


def screenshot(call_id: str, url: str = SHOT_URL, **extra) -> dict:
    return {"type": "computer_call_output", "call_id": call_id,
            "output": {"type": "computer_screenshot", "image_url": url, **extra.pop("output", {})}, **extra}


@pytest.fixture
def gw(upstream, tmp_path):
    def start(**settings):
        return GatewayServer(make_settings(upstream_url=upstream.base_url, db=str(tmp_path / "r.db"), **settings))
    return start


def routes(tmp_path, *entries: dict):
    """A --config file of these [[routes]] entries."""
    path = tmp_path / "routes.toml"
    path.write_text("".join("[[routes]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in e.items()) + "\n"
                            for e in entries))
    return path


def client(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0)


def sent_images(request) -> list[str]:
    """The image URLs a Chat Completions request shows the model, in order."""
    return [part["image_url"]["url"] for m in request.body["messages"] if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


def offered(request) -> dict:
    """The one function a Chat Completions request offers."""
    (tool,) = request.body["tools"]
    return tool["function"]


def called(request) -> list[dict]:
    """The arguments of the calls an upstream request shows the model made, in order."""
    return [json.loads(c["function"]["arguments"]) for m in request.body["messages"] for c in m.get("tool_calls") or ()]


# -- a vision model over Chat Completions, in each coordinate profile --------------------------------------

# profile, the function its model is offered, a click at the display's (640, 400) as the model writes it, what
# the function's description says of the model's frame
PROFILES = [
    ("pixels", "computer", {"action": "click", "button": "left", "x": 640, "y": 400}, "(1280x800)"),
    ("qwen2.5-vl", "computer_use", {"action": "left_click", "coordinate": [644, 406]}, "resolution is 1288x812"),
    ("opencua", "computer", {"action": "click", "button": "left", "x": 644, "y": 406}, "(1288x812)"),
    ("holo", "computer", {"action": "click", "button": "left", "x": 644, "y": 406}, "(1288x812)"),
    ("qwen3-vl", "computer_use", {"action": "left_click", "coordinate": [500, 500]}, "resolution is 1000x1000"),
    ("glm-4.5v", "computer", {"action": "click", "button": "left", "x": 500, "y": 500}, "0 to 999"),
]


@pytest.mark.parametrize("profile, function, click, says", PROFILES, ids=[p[0] for p in PROFILES])
def test_each_profile_offers_its_function_maps_its_points_and_gets_the_screenshots_back(
        gw, upstream, profile, function, click, says):
    with gw(computer_profile=profile) as gateway, httpx.Client(base_url=gateway.url, timeout=30) as http:
        upstream.enqueue(computer({"action": "screenshot"}, "call_1", function))
        first = create(http, {"model": "m", "input": "Open the menu.", "tools": [PREVIEW]})
        (call,) = first["output"]
        assert (call["type"], call["action"], call["status"], call["pending_safety_checks"]) == (
            "computer_call", {"type": "screenshot"}, "completed", [])
        assert call["id"].startswith("cu_") and ResponseComputerToolCall.model_validate(call)
        function_offered = offered(upstream.requests[0])
        assert function_offered["name"] == function and says in function_offered["description"]

        upstream.enqueue(computer(click, "call_2", function))
        second = stream(http, {"model": "m", "previous_response_id": first["id"], "tools": [PREVIEW],
                               "input": [screenshot("call_1")]}).response
        (clicked,) = second["output"]
        assert clicked["action"]["type"] == "click" and clicked["action"]["button"] == "left"
        assert abs(clicked["action"]["x"] - 640) <= 1 and abs(clicked["action"]["y"] - 400) <= 1

        upstream.enqueue(Stream(text_stream(["Done."])))
        third = create(http, {"model": "m", "previous_response_id": second["id"], "tools": [PREVIEW],
                              "input": [screenshot("call_2")]})
        assert third["output"][0]["content"][0]["text"] == "Done."
    last = upstream.requests[2]
    assert called(last)[1] == click  # the model's own call, in its own frame and words
    messages = last.body["messages"]
    # each screenshot: the call's tool message, then the image in a user message right after it
    assert [m["role"] for m in messages][-6:] == ["assistant", "tool", "user", "assistant", "tool", "user"]
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["call_1", "call_2"]
    assert sent_images(last) == [SHOT_URL] * 2


def said(text: str) -> Stream:
    """The model answers in text (streamed in two pieces)."""
    return Stream(text_stream([text[:15], text[15:]]))


def test_ui_tars_writes_its_actions_in_its_own_language_and_reads_its_history_so(gw, upstream):
    """UI-TARS-1.5, served without tool calling: told its action space in the instructions, its answer's
    Thought becomes reasoning and its Action the computer call; its earlier actions come back as it wrote
    them, the screenshots as images in user messages."""
    with gw(computer_profile="ui-tars-1.5") as gateway, httpx.Client(base_url=gateway.url, timeout=30) as http:
        upstream.enqueue(said("Thought: I should look first.\nAction: wait()"))
        first = stream(http, {"model": "m", "input": "Open the menu.", "tools": [PREVIEW],
                              "instructions": "Be quick."}).response
        assert [i["type"] for i in first["output"]] == ["reasoning", "computer_call"]
        assert first["output"][0]["content"][0]["text"] == "I should look first."
        assert first["output"][1]["action"] == {"type": "wait"}
        sent = upstream.requests[0].body
        assert "tools" not in sent and "tool_choice" not in sent
        system = sent["messages"][0]
        assert system["role"] in ("system", "developer") and "## Action Space" in system["content"]
        assert system["content"].endswith("Be quick.")

        upstream.enqueue(said("Thought: The menu is there.\nAction: click(start_box='<|box_start|>(644,406)<|box_end|>')"))
        second = create(http, {"model": "m", "previous_response_id": first["id"], "tools": [PREVIEW],
                               "input": [screenshot(first["output"][1]["call_id"])]})
        clicked = second["output"][-1]
        assert clicked["action"] == {"type": "click", "x": 640, "y": 400, "button": "left"}

        upstream.enqueue(said("Thought: It opened.\nAction: finished(content='The menu is open.')"))
        third = stream(http, {"model": "m", "previous_response_id": second["id"], "tools": [PREVIEW],
                              "input": [screenshot(clicked["call_id"])]}).response
        assert third["output"][-1]["content"][0]["text"] == "The menu is open."
    messages = upstream.requests[2].body["messages"]
    assert not any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    spoken = [m["content"] for m in messages if m["role"] == "assistant"]
    assert "Action: wait()" in spoken[0] and \
        "Action: click(start_box='<|box_start|>(644,406)<|box_end|>')" in spoken[1]
    assert sent_images(upstream.requests[2]) == [SHOT_URL] * 2
    assert [m["role"] for m in messages][-4:] == ["assistant", "user", "assistant", "user"]


def test_ui_tars_gets_its_mistake_back_in_words_and_tries_again(gw, upstream):
    with gw(computer_profile="ui-tars-1.5") as gateway:
        upstream.enqueue(said("Thought: Fly there.\nAction: fly(start_box='(1,1)')"),
                         said("Thought: Click then.\nAction: click(start_box='(10,10)')"))
        response = client(gateway).responses.create(model="m", input="Go.", tools=[PREVIEW])
        # each attempt's thought is the model's reasoning; only the good call is the client's
        assert [i.type for i in response.output] == ["reasoning", "reasoning", "computer_call"]
        assert (response.output[2].action.x, response.output[2].action.y) == (10, 10)
        retry = upstream.requests[1].body["messages"]
        assert retry[-2]["role"] == "assistant" and "Action: fly(start_box='(1,1)')" in retry[-2]["content"]
        assert retry[-1]["role"] == "user" and "unknown action 'fly'" in json.dumps(retry[-1]["content"])


def test_a_route_sets_its_coordinates_and_its_models_resize(upstream, tmp_path):
    """Two routes of one gateway: Qwen2.5-VL served with a smaller max_pixels (its frame shrinks), and a model
    answering 0..1000 on a profile that says 0..999 — each route's own settings win."""
    config = routes(tmp_path, {"match": "qwen*", "base_url": upstream.base_url, "computer_profile": "qwen2.5-vl",
                               "computer_max_pixels": 1003520},
                    {"match": "glm*", "base_url": upstream.base_url, "computer_profile": "glm-4.5v",
                     "computer_coordinates": "normalized_1000"})
    with GatewayServer(make_settings(config=str(config), db=str(tmp_path / "r.db"))) as gateway:
        sdk = client(gateway)
        # smart_resize(800, 1280, max_pixels=1003520) is 784 x 1260: the model's (630, 392) is the display's middle
        upstream.enqueue(computer({"action": "left_click", "coordinate": [630, 392]}, name="computer_use"))
        qwen = sdk.responses.create(model="qwen2.5-vl-7b", input="Click.", tools=[PREVIEW])
        assert "resolution is 1260x784" in offered(upstream.requests[0])["description"]
        assert (qwen.output[0].action.x, qwen.output[0].action.y) == (640, 400)
        upstream.enqueue(computer({"action": "click", "x": 500, "y": 500}))
        glm = sdk.responses.create(model="glm-4.5v", input="Click.", tools=[PREVIEW])
        assert "0 to 1000" in offered(upstream.requests[1])["description"]
        assert (glm.output[0].action.x, glm.output[0].action.y) == (640, 400)


def test_a_hidpi_screenshot_is_the_models_frame_and_the_declared_display_the_clients(gw, upstream):
    with gw() as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Click the middle.", tools=[PREVIEW])
        upstream.enqueue(computer({"action": "click", "x": 1280, "y": 800}, "call_2"))
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW],
                                      input=[screenshot("call_1", data_url(png(2 * W, 2 * H)))])
        assert "(2560x1600)" in offered(upstream.requests[1])["description"]  # what the model sees
        assert (second.output[0].action.x, second.output[0].action.y) == (640, 400)  # what the client acts on


def test_older_screenshots_become_text_and_only_the_last_n_are_images(gw, upstream):
    with gw(computer_keep_screenshots=2) as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}, "c0"))
        previous = sdk.responses.create(model="m", input="Go.", tools=[PREVIEW])
        urls = [data_url(png(W, H - i)) for i in (1, 2, 3)]
        for turn, url in enumerate(urls):
            upstream.enqueue(computer({"action": "wait"}, f"c{turn + 1}"))
            previous = sdk.responses.create(model="m", previous_response_id=previous.id, tools=[PREVIEW],
                                            input=[screenshot(previous.output[0].call_id, url)])
        last = upstream.requests[-1]
        assert sent_images(last) == urls[-2:]  # the last two as images, in order
        outputs = [m["content"] for m in last.body["messages"] if m["role"] == "tool"]
        assert "left out" in outputs[0] and "left out" not in outputs[-1]
        assert len(outputs) == 3 and [m["role"] for m in last.body["messages"]].count("user") == 3  # task + 2 images


def test_a_call_the_model_gets_wrong_is_never_shown_and_the_model_tries_again(gw, upstream):
    with gw() as gateway, httpx.Client(base_url=gateway.url, timeout=30) as http:
        upstream.enqueue(computer({"action": "click", "x": 5000, "y": 10}, "bad"),
                         computer({"action": "fly"}, "worse"),
                         computer({"action": "click", "x": 10, "y": 10}, "good"))
        result = stream(http, {"model": "m", "input": "Click.", "tools": [PREVIEW]})
        (call,) = result.response["output"]
        assert (call["call_id"], call["action"]) == ("good", {"type": "click", "x": 10, "y": 10, "button": "left"})
        second = upstream.requests[1].body["messages"]
        assert "outside the screen" in second[-1]["content"] and second[-1]["tool_call_id"] == "bad"
        assert "unknown action 'fly'" in upstream.requests[2].body["messages"][-1]["content"]
        # OpenAI's order for a computer call: added with its action, then done; no argument events
        kinds = result.types
        added = kinds.index("response.output_item.added")
        assert kinds[added + 1] == "response.output_item.done"
        assert result.events[added]["item"]["action"]["type"] == "click"
        assert (result.events[added]["item"]["status"], result.events[added + 1]["item"]["status"]) == (
            "in_progress", "completed")
        assert not any("arguments" in k for k in kinds)
        stored = http.get(f"/v1/responses/{result.response['id']}").json()
        assert [i["call_id"] for i in stored["output"]] == ["good"]  # the attempts are not kept either


def test_a_model_that_never_gets_it_right_ends_incomplete_and_the_client_sees_no_call(gw, upstream):
    with gw(max_tool_rounds=2) as gateway:
        upstream.enqueue(computer({"action": "triple_click", "x": 1, "y": 1}, "a"),
                         computer({"action": "triple_click", "x": 1, "y": 1}, "b"))
        response = client(gateway).responses.create(model="m", input="Select.", tools=[PREVIEW])
        assert response.status == "incomplete" and response.incomplete_details.reason == "max_messages"
        assert response.output == []
        assert "use double_click" in upstream.requests[1].body["messages"][-1]["content"]


def test_several_actions_with_the_computer_tool(gw, upstream):
    with gw() as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Type.", tools=[{"type": "computer"}])
        assert first.output[0].actions[0].type == "screenshot" and first.output[0].action is None
        assert "as you see it" in offered(upstream.requests[0])["description"]  # no screen size known yet
        upstream.enqueue(computer({"actions": [{"action": "click", "x": 1, "y": 2},
                                               {"action": "type", "text": "hi"},
                                               {"action": "keypress", "keys": ["CTRL", "Return"]},
                                               {"action": "drag", "path": [{"x": 0, "y": 0}, {"x": 9, "y": 9}]},
                                               {"action": "scroll", "x": 5, "y": 5, "scroll_y": 300}]}, "c2"))
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[{"type": "computer"}],
                                      input=[screenshot(first.output[0].call_id)])
        done = second.output[0].actions
        assert [a.type for a in done] == ["click", "type", "keypress", "drag", "scroll"]
        assert done[2].keys == ["ctrl", "enter"]  # OpenAI's key names
        assert done[3].path[1].x == 9 and done[4].scroll_y == 300
        assert "(1280x800)" in offered(upstream.requests[1])["description"]  # the screenshot's size


def test_qwens_drag_starts_where_the_pointer_was_left_on_an_earlier_turn(gw, upstream):
    with gw(computer_profile="qwen3-vl") as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "mouse_move", "coordinate": [250, 250]}, name="computer_use"))
        first = sdk.responses.create(model="m", input="Drag it.", tools=[PREVIEW])
        assert (first.output[0].action.x, first.output[0].action.y) == (320, 200)
        upstream.enqueue(computer({"action": "left_click_drag", "coordinate": [750, 750]}, "c2", "computer_use"))
        second = sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW],
                                      input=[screenshot("call_1")])
        assert [(p.x, p.y) for p in second.output[0].action.path] == [(320, 200), (960, 600)]
        upstream.enqueue(computer({"action": "key", "keys": ["Return"]}, "c3", "computer_use"))
        third = sdk.responses.create(model="m", previous_response_id=second.id, tools=[PREVIEW],
                                     input=[screenshot("c2")])
        assert third.output[0].action.keys == ["enter"]
        assert called(upstream.requests[2])[1] == {"action": "left_click_drag", "coordinate": [750, 750]}


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
            (screenshot(call_id, "data:text/plain;base64,aGVsbG8="), "image"),
            (screenshot(call_id, "data:image/png;base64," + base64.b64encode(png(400, 400) + b"\0" * 60_000).decode()),
             "larger than the 50,000 bytes"),
            ({"type": "computer_call_output", "call_id": call_id,
              "output": {"type": "computer_screenshot", "file_id": "file_1"}}, "file_id is not read"),
            ({"type": "computer_call_output", "call_id": call_id, "output": {"type": "text"}},
             "expected 'computer_screenshot'"),
            ({"type": "computer_call", "call_id": "x", "action": {"type": "fly"}, "pending_safety_checks": []},
             "'type' must be one of"),
            ({"type": "computer_call", "call_id": "x", "action": {"type": "click", "x": "1", "y": 2,
                                                                   "button": "left"}}, "'x' must be an integer"),
        ]
        for item, says in cases:
            with pytest.raises(openai.BadRequestError) as caught:
                sdk.responses.create(model="m", previous_response_id=first.id, tools=[PREVIEW], input=[item])
            assert says in caught.value.body["message"], caught.value.body
            assert caught.value.status_code == 400
        assert sdk.responses.retrieve(first.id).output[0].call_id == call_id  # nothing stored lost
        assert len(upstream.requests) == 1  # no model was asked
        for tool, param in (({**PREVIEW, "environment": "amiga"}, "tools[0].environment"),
                            ({**PREVIEW, "display_width": 0}, "tools[0].display_width"),
                            ({k: v for k, v in PREVIEW.items() if k != "display_height"}, "tools[0].display_height"),
                            ({"type": "computer", "display_width": 3}, "tools[0].display_width")):
            with pytest.raises(openai.BadRequestError) as caught:
                sdk.responses.create(model="m", input="x", tools=[tool])
            assert caught.value.body["param"] == param
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.responses.create(model="m", input="x", tools=[PREVIEW, {"type": "computer"}])
        assert "only one 'computer' tool may be given" in caught.value.body["message"]


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
        assert "The page is https://www.bank.example/pay." in json.dumps(upstream.requests[-1].body["messages"])
        # a page elsewhere raises none
        upstream.enqueue(computer({"action": "wait"}, "c3"))
        elsewhere = sdk.responses.create(model="m", input=[
            {"role": "user", "content": "Go on."},
            {"type": "computer_call", "call_id": "c9", "action": {"type": "wait"}, "pending_safety_checks": []},
            screenshot("c9", output={"current_url": "https://bank.example.org/"})], tools=[PREVIEW])
        assert elsewhere.output[0].pending_safety_checks == []


# -- stored, chained, shown as include[] says; a replayed history, a conversation, background, WebSocket -------

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
        assert ResponseComputerToolCallOutputItem.model_validate(full).call_id == first.output[0].call_id


def test_a_replayed_history_without_the_store_reaches_the_model_the_same(gw, upstream):
    """store=false: the client sends the whole history back (the call as it got it, then its screenshot)."""
    with gw() as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "click", "x": 3, "y": 4}))
        first = sdk.responses.create(model="m", input="Click.", tools=[PREVIEW], store=False)
        upstream.enqueue(Stream(text_stream(["Clicked."])))
        again = sdk.responses.create(model="m", store=False, tools=[PREVIEW], input=[
            {"role": "user", "content": "Click."}, first.output[0].model_dump(exclude_none=True),
            screenshot(first.output[0].call_id)])
        assert again.output_text == "Clicked."
        assert called(upstream.requests[1]) == [{"action": "click", "button": "left", "x": 3, "y": 4}]
        assert sent_images(upstream.requests[1]) == [SHOT_URL]
        with pytest.raises(openai.NotFoundError):
            sdk.responses.retrieve(first.id)


def test_a_conversation_carries_the_calls_and_screenshots(gw, upstream):
    with gw() as gateway:
        sdk = client(gateway)
        conversation = sdk.conversations.create()
        upstream.enqueue(computer({"action": "screenshot"}))
        first = sdk.responses.create(model="m", input="Look.", tools=[PREVIEW], conversation=conversation.id)
        upstream.enqueue(Stream(text_stream(["A desktop."])))
        sdk.responses.create(model="m", tools=[PREVIEW], conversation=conversation.id,
                             input=[screenshot(first.output[0].call_id)])
        assert sent_images(upstream.requests[1]) == [SHOT_URL]
        kinds = [item.type for item in sdk.conversations.items.list(conversation.id, order="asc")]
        assert kinds == ["message", "computer_call", "computer_call_output", "message"]


def test_a_background_response_makes_the_call_and_a_bad_screenshot_is_refused_before_queueing(gw, upstream):
    with gw() as gateway:
        sdk = client(gateway)
        upstream.enqueue(computer({"action": "double_click", "x": 7, "y": 8}))
        response = sdk.responses.create(model="m", input="Open it.", tools=[PREVIEW], background=True)
        deadline = time.monotonic() + 30
        while response.status in ("queued", "in_progress") and time.monotonic() < deadline:
            time.sleep(0.05)
            response = sdk.responses.retrieve(response.id)
        assert response.status == "completed"
        assert response.output[0].action.model_dump(exclude_none=True) == {"type": "double_click", "x": 7, "y": 8}
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.responses.create(model="m", previous_response_id=response.id, tools=[PREVIEW], background=True,
                                 input=[screenshot("call_1", "data:image/png;base64,AAAA")])
        assert caught.value.body["code"] == "invalid_image" and len(upstream.requests) == 1


@pytest.mark.parametrize("tool", [PREVIEW, {"type": "computer"}], ids=["computer_use_preview", "computer"])
def test_a_forced_computer_tool_choice_forces_the_function_the_model_takes(gw, upstream, tool):
    with gw(computer_profile="qwen3-vl") as gateway:
        upstream.enqueue(computer({"action": "screenshot"}, name="computer_use"))
        response = client(gateway).responses.create(model="m", input="Look.", tools=[tool],
                                                    tool_choice={"type": tool["type"]})
        assert response.tool_choice.type == tool["type"]
        assert upstream.requests[0].body["tool_choice"] == {"type": "function", "function": {"name": "computer_use"}}


def test_a_whole_loop_over_websocket(gw, upstream):
    import websockets.sync.client as wsc

    from tests.edge.test_websocket import read_turn, send, ws_url

    with gw(computer_profile="qwen3-vl") as gateway, wsc.connect(ws_url(gateway)) as ws:
        upstream.enqueue(computer({"action": "mouse_move", "coordinate": [10, 10]}, name="computer_use"))
        send(ws, model="m", input="Move.", tools=[PREVIEW])
        first = read_turn(ws)
        final = first[-1]["response"]
        assert final["output"][0]["action"] == {"type": "move", "x": 13, "y": 8}
        assert [e["type"] for e in first if "computer" in json.dumps(e.get("item", {}))] == [
            "response.output_item.added", "response.output_item.done"]
        upstream.enqueue(Stream(text_stream(["Moved."])))
        send(ws, model="m", tools=[PREVIEW], previous_response_id=final["id"], input=[screenshot("call_1")])
        second = read_turn(ws)
        assert second[-1]["type"] == "response.completed"
        assert sent_images(upstream.requests[1]) == [SHOT_URL]
        assert called(upstream.requests[1]) == [{"action": "mouse_move", "coordinate": [10, 10]}]
        # a bad screenshot over WebSocket: the same 400, as an error frame
        send(ws, model="m", tools=[PREVIEW], previous_response_id=second[-1]["response"]["id"],
             input=[screenshot("call_1", "data:image/png;base64,AAAA")])
        (error,) = read_turn(ws)
        assert error["status"] == 400 and "screenshot" in error["error"]["message"]


# -- the Agents SDK's ComputerTool, whole loops --------------------------------------------------------------

def fake_computer(done: list[tuple]):
    from agents import AsyncComputer

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

    return Screen()


def run_agent(gateway, model: str, task: str, computer) -> str:
    from agents import Agent, ComputerTool, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)

    async def main():
        async with openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as sdk:
            agent = Agent(name="operator", instructions="Use the computer.",
                          model=OpenAIResponsesModel(model=model, openai_client=sdk),
                          tools=[ComputerTool(computer=computer)])
            return await asyncio.wait_for(Runner.run(agent, task), 60)

    return str(asyncio.run(main()).final_output)


def test_the_agents_sdk_computer_tool_drives_a_fake_computer_on_qwen3_vl(gw, upstream):
    """The SDK sends the `computer` tool (several actions a call) for a model not named computer-use-preview;
    Qwen3-VL answers in 0..1000 through its `computer_use` function."""
    done: list[tuple] = []
    with gw(computer_profile="qwen3-vl") as gateway:
        upstream.enqueue(computer({"action": "screenshot"}, "a", "computer_use"),
                         computer({"action": "left_click", "coordinate": [250, 500]}, "b", "computer_use"),
                         computer({"action": "type", "text": "hello"}, "c", "computer_use"),
                         Stream(text_stream(["Typed hello."])))
        assert run_agent(gateway, "qwen3-vl", "Type hello in the box.", fake_computer(done)) == "Typed hello."
    assert [d for d in done if d[0] != "screenshot"] == [("click", 320, 400, "left"), ("type", "hello")]
    last = upstream.requests[-1]
    assert len(sent_images(last)) == 3  # a screenshot after each of the three calls
    assert [m["role"] for m in last.body["messages"]][-3:] == ["assistant", "tool", "user"]
    assert offered(last)["name"] == "computer_use" and "resolution is 1000x1000" in offered(last)["description"]


def test_the_agents_sdk_computer_tool_drives_a_fake_computer_on_ui_tars(gw, upstream):
    """UI-TARS answers in text; the SDK gets reasoning items and computer calls, and the final answer."""
    done: list[tuple] = []
    with gw(computer_profile="ui-tars-1.5") as gateway:
        upstream.enqueue(said("Thought: Look.\nAction: wait()"),
                         said("Thought: The box.\nAction: click(start_box='(322,203)')"),
                         said("Thought: Type.\nAction: type(content='hello\\n')"),
                         said("Thought: Sent.\nAction: finished(content='Typed hello.')"))
        assert run_agent(gateway, "ui-tars-1.5", "Type hello in the box.", fake_computer(done)) == "Typed hello."
    assert [d for d in done if d[0] != "screenshot"] == [("wait",), ("click", 320, 200, "left"), ("type", "hello\n")]
    assert len(sent_images(upstream.requests[-1])) == 3


def test_the_agents_sdk_drives_the_preview_tool_through_every_kind_of_action(gw, upstream):
    """For a model named computer-use-preview the SDK declares `computer_use_preview` with its display."""
    done: list[tuple] = []
    actions = [{"action": "screenshot"}, {"action": "double_click", "x": 5, "y": 6},
               {"action": "scroll", "x": 1, "y": 2, "scroll_x": 0, "scroll_y": 120},
               {"action": "keypress", "keys": ["ctrl", "a"]}, {"action": "move", "x": 8, "y": 9},
               {"action": "drag", "path": [{"x": 1, "y": 1}, {"x": 40, "y": 30}]}, {"action": "wait"},
               {"action": "click", "x": 100, "y": 200, "button": "right"}]
    with gw() as gateway:
        upstream.enqueue(*(computer(a, f"c{i}") for i, a in enumerate(actions)), Stream(text_stream(["All done."])))
        assert run_agent(gateway, "computer-use-preview", "Exercise the screen.", fake_computer(done)) == "All done."
    assert [d for d in done if d[0] != "screenshot"] == [
        ("double_click", 5, 6), ("scroll", 1, 2, 0, 120), ("keypress", ("ctrl", "a")), ("move", 8, 9),
        ("drag", ((1, 1), (40, 30))), ("wait",), ("click", 100, 200, "right")]
    assert upstream.requests[0].body["tools"][0]["function"]["name"] == "computer"
    assert len(sent_images(upstream.requests[-1])) == 3  # the last three of eight screenshots


def test_one_gateway_two_upstreams_each_in_its_frame(tmp_path):
    """Two vision models behind one gateway, each route with its profile: the same display point reaches both
    clients, each model wrote it in its own frame."""
    with FakeChatUpstream() as qwen, FakeChatUpstream() as glm:
        config = routes(tmp_path, {"match": "qwen3*", "base_url": qwen.base_url, "computer_profile": "qwen3-vl"},
                        {"match": "glm*", "base_url": glm.base_url, "computer_profile": "glm-4.5v"})
        with GatewayServer(make_settings(config=str(config), db=str(tmp_path / "r.db"))) as gateway:
            sdk = client(gateway)
            qwen.enqueue(computer({"action": "left_click", "coordinate": [500, 500]}, name="computer_use"))
            glm.enqueue(computer({"action": "click", "x": 499, "y": 499}))
            a = sdk.responses.create(model="qwen3-vl-8b", input="Click.", tools=[PREVIEW])
            b = sdk.responses.create(model="glm-4.5v", input="Click.", tools=[PREVIEW])
            assert (a.output[0].action.x, a.output[0].action.y) == (640, 400)
            assert (b.output[0].action.x, b.output[0].action.y) == (639, 400)
