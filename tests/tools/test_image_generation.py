"""image_generation run by the gateway, end to end: the real gateway on loopback, the fake model (tests/support/
fake_chat.py) scripted to call the `image_generation` function the gateway offers, the fake images server
(tests/support/fake_images.py) speaking OpenAI's Images API with real PNGs, and the openai SDK.

Every stream goes through the stream checker (its image.* rules), the spec schemas and the openai SDK's own models
(helpers.stream).
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time

import httpx
import openai
import pytest

from responses_gateway.config import Settings
from responses_gateway.tools.image_generation.settings import ImageGenerationSettings
from tests import helpers
from tests.support import needs, pngs
from tests.support.fake_chat import make_usage, text_stream, tool_calls_stream
from tests.support.fake_images import color_of
from tests.support.server import GatewayServer
from tests.support.stream_check import check_stream

stream = helpers.stream
DRAW = {"type": "image_generation"}


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    return tmp_path_factory.mktemp("images") / "db.sqlite"


def image_settings(images, **more) -> ImageGenerationSettings:
    return ImageGenerationSettings(image_generation_url=images.base_url, image_generation_timeout=more.pop("timeout", 20.0),
                                   image_generation_max_bytes=more.pop("max_bytes", 2_000_000), **more)


@pytest.fixture(scope="module")
def ig_gateway(_upstream_server, _fake_images, db_path):
    settings = Settings(upstream_url=_upstream_server.base_url, db=str(db_path), max_tool_rounds=4,
                        groups=(image_settings(_fake_images),))
    with GatewayServer(settings) as gw:
        yield gw


@pytest.fixture
def http(ig_gateway, images):
    with httpx.Client(base_url=ig_gateway.url, timeout=30) as client:
        yield client


@pytest.fixture
def client(ig_gateway, images):
    return openai.OpenAI(base_url=f"{ig_gateway.url}/v1", api_key="x", max_retries=0)


def draw(prompt: str, edit: str | None = None, call_id: str = "call_ig") -> list[str]:
    """The model calls image_generation once."""
    args = {"prompt": prompt} | ({"edit": edit} if edit else {})
    return tool_calls_stream([(call_id, "image_generation", [json.dumps(args)])], usage=make_usage(10, 5))


tool_output = helpers.tool_output


def image_events(result) -> list[dict]:
    return helpers.item_events(result, "image_generation_call")


def png_of(item: dict) -> pngs.Picture:
    return pngs.read(base64.b64decode(item["result"]))


def test_a_call_streams_as_openai_does_and_the_model_is_told_in_words(http, upstream, images):
    upstream.enqueue(draw("a red fox"))
    upstream.enqueue(text_stream(["Here is your fox."], usage=make_usage(30, 5)))
    result = stream(http, {"model": "m", "input": "Draw a fox.", "tools": [DRAW]})
    r = result.response
    assert r["status"] == "completed" and result.text == "Here is your fox."
    assert r["tools"] == [{"type": "image_generation", "background": "auto", "moderation": "auto",
                           "output_compression": 100, "output_format": "png", "quality": "auto", "size": "auto"}]
    events = image_events(result)
    assert [e["type"] for e in events] == [
        "response.output_item.added", "response.image_generation_call.in_progress",
        "response.image_generation_call.generating", "response.image_generation_call.completed",
        "response.output_item.done"]
    item_id = events[0]["item"]["id"]
    assert item_id.startswith("ig_") and events[0]["item"] == {"id": item_id, "type": "image_generation_call",
                                                               "status": "in_progress"}
    done = events[-1]["item"]
    assert {k: v for k, v in done.items() if k != "result"} == {
        "id": item_id, "type": "image_generation_call", "status": "completed", "revised_prompt": "a red fox",
        "action": "generate", "background": "opaque", "output_format": "png", "quality": "medium", "size": "64x64"}
    assert png_of(done).at(0, 0) == color_of("a red fox")  # the images server's own picture
    assert r["output"][0] == done
    # the images server was asked as OpenAI's API defines it
    (asked,) = images.requests("/generations")
    assert asked.fields == {"prompt": "a red fox", "response_format": "b64_json"}
    # the model saw the call and one line about it, never the image
    shown = tool_output(upstream, 1)
    assert shown == (f'Image {item_id} was drawn (64x64, png) and shown to the user. To change it later, call '
                     f'image_generation with "edit": "{item_id}".')
    offered = upstream.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered] == ["image_generation"]
    assert set(offered[0]["function"]["parameters"]["properties"]) == {"prompt", "edit"}


def test_partial_images_pass_through_in_order(http, upstream, images):
    upstream.enqueue(draw("a cat"))
    upstream.enqueue(text_stream(["Done."]))
    result = stream(http, {"model": "m", "input": "Draw a cat.",
                           "tools": [{**DRAW, "partial_images": 2, "size": "48x32", "quality": "low"}]})
    partials = [e for e in result.events if e["type"] == "response.image_generation_call.partial_image"]
    assert [p["partial_image_index"] for p in partials] == [0, 1]
    assert all(pngs.size(base64.b64decode(p["partial_image_b64"])) == (48, 32) for p in partials)
    assert partials[0]["size"] == "48x32" and partials[0]["quality"] == "low"
    types = [e["type"] for e in image_events(result)]
    assert types.index("response.image_generation_call.generating") < result.types.index(
        "response.image_generation_call.partial_image") < result.types.index("response.image_generation_call.completed")
    (asked,) = images.requests("/generations")
    assert asked.fields["stream"] is True and asked.fields["partial_images"] == 2
    assert asked.fields["size"] == "48x32" and asked.fields["quality"] == "low"


def test_a_server_without_streaming_gives_no_partials(http, upstream, images):
    images.streams = False
    upstream.enqueue(draw("a cat"))
    upstream.enqueue(text_stream(["Done."]))
    result = stream(http, {"model": "m", "input": "x", "tools": [{**DRAW, "partial_images": 3}]})
    assert "response.image_generation_call.partial_image" not in result.types
    assert result.response["output"][0]["status"] == "completed"


def test_openai_python_streamed_and_not(client, upstream, images):
    from openai.types.responses import (
        ResponseImageGenCallCompletedEvent,
        ResponseImageGenCallGeneratingEvent,
        ResponseImageGenCallInProgressEvent,
        ResponseImageGenCallPartialImageEvent,
    )

    upstream.enqueue(draw("a lighthouse"), text_stream(["There."]))
    seen = []
    with client.responses.create(model="m", input="Draw.", stream=True,
                                 tools=[{"type": "image_generation", "partial_images": 1}]) as events:
        seen = list(events)
    kinds = [type(e) for e in seen]
    for kind in (ResponseImageGenCallInProgressEvent, ResponseImageGenCallGeneratingEvent,
                 ResponseImageGenCallPartialImageEvent, ResponseImageGenCallCompletedEvent):
        assert kinds.count(kind) == 1, kind
    final = seen[-1].response
    call = final.output[0]
    assert call.type == "image_generation_call" and call.status == "completed" and call.size == "64x64"
    assert pngs.read(base64.b64decode(call.result)).at(1, 1) == color_of("a lighthouse")

    upstream.enqueue(draw("a boat"), text_stream(["Boat."]))
    response = client.responses.create(model="m", input="Draw.", tools=[{"type": "image_generation"}])
    call = response.output[0]
    assert call.type == "image_generation_call" and call.revised_prompt == "a boat"
    assert response.output_text == "Boat."
    assert pngs.read(base64.b64decode(call.result)).at(0, 0) == color_of("a boat")


def test_two_turns_edit_the_latest_image_through_the_edits_endpoint(client, upstream, images, db_path, http):
    upstream.enqueue(draw("a red square"), text_stream(["A square."]))
    first = client.responses.create(model="m", input="Draw a square.", tools=[{"type": "image_generation"}])
    drawn = first.output[0]
    upstream.enqueue(draw("make it blue", edit="latest"), text_stream(["Blue now."]))
    second = client.responses.create(model="m", input="Make it blue.", previous_response_id=first.id,
                                     tools=[{"type": "image_generation"}])
    edited = second.output[0]
    assert edited.status == "completed" and edited.action == "edit"
    # the edit sent the first image, byte for byte, as OpenAI's multipart edit
    (asked,) = images.requests("/edits")
    assert [(u.name, u.filename, u.content_type) for u in asked.files] == [("image", "image_1.png", "image/png")]
    assert asked.files[0].data == base64.b64decode(drawn.result)
    assert asked.fields["prompt"] == "make it blue"
    picture = pngs.read(base64.b64decode(edited.result))
    assert picture.at(0, 0) == color_of("a red square") and picture.at(32, 32) == color_of("make it blue")
    # the second turn's model saw the first call as a call and a line, never its bytes
    body = json.dumps(upstream.requests[2].body)
    assert drawn.result[:200] not in body and f"Image {drawn.id} was drawn" in body
    # the store keeps the image in the files store, not in the item; GET puts it back as OpenAI returns it
    with sqlite3.connect(db_path) as db:
        (row,) = db.execute("SELECT body FROM items WHERE id = ?", (drawn.id,)).fetchall()
        (head,) = db.execute("SELECT body FROM responses WHERE id = ?", (first.id,)).fetchone()
    kept = json.loads(row[0])
    assert kept["result"] is None and kept["result_file_id"].startswith("file_")
    assert len(head) < 5_000
    got = http.get(f"/v1/responses/{first.id}").json()
    assert got["output"][0]["result"] == drawn.result and "result_file_id" not in got["output"][0]
    items = http.get(f"/v1/responses/{second.id}/input_items").json()["data"]
    assert all("result_file_id" not in i for i in items)
    # the file itself: the Files API lists and serves it
    listed = http.get("/v1/files", params={"purpose": "assistants_output"}).json()["data"]
    mine = next(f for f in listed if f["filename"] == f"{drawn.id}.png")
    assert http.get(f"/v1/files/{mine['id']}/content").content == base64.b64decode(drawn.result)


def test_the_users_image_and_the_mask_are_the_edits_image_and_mask(http, upstream, images):
    photo = pngs.draw(32, 32, (10, 20, 30))
    mask = pngs.mask(32, 32)
    upstream.enqueue(draw("add a hat"), text_stream(["Hat added."]))
    url = f"data:image/png;base64,{base64.b64encode(photo).decode()}"
    result = stream(http, {"model": "m", "tools": [{**DRAW, "input_image_mask": {
        "image_url": f"data:image/png;base64,{base64.b64encode(mask).decode()}"}}],
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Give my cat a hat."},
                                               {"type": "input_image", "image_url": url}]}]})
    call = result.response["output"][0]
    assert call["status"] == "completed" and call["action"] == "edit"
    (asked,) = images.requests("/edits")
    assert [(u.name, u.data) for u in asked.files] == [("image", photo), ("mask", mask)]
    assert png_of(call).at(0, 0) == (10, 20, 30)


def test_a_mask_without_an_image_is_a_400_naming_it(http, upstream):
    body = {"model": "m", "input": "Draw.", "tools": [{**DRAW, "input_image_mask": {"image_url": "data:image/png;base64,AAAA"}}]}
    resp = http.post("/v1/responses", json=body)
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "tools[0].input_image_mask"
    assert upstream.requests == []  # refused before any model call


def test_a_size_the_server_refuses_fails_the_call_with_its_reason_and_the_model_reads_it(http, upstream, images):
    images.sizes = {"1024x1024"}
    upstream.enqueue(draw("a huge poster"), text_stream(["That size is not available."]))
    result = stream(http, {"model": "m", "input": "x", "tools": [{**DRAW, "size": "4096x4096"}]})
    assert result.response["status"] == "completed"
    call = result.response["output"][0]
    assert call["status"] == "failed" and call["result"] is None
    assert call["error"]["param"] == "size" and call["error"]["code"] == "invalid_value"
    assert "Invalid value: '4096x4096'" in call["error"]["message"]
    assert [e["type"] for e in image_events(result)][-2:] == ["response.image_generation_call.generating",
                                                               "response.output_item.done"]
    assert "The image could not be made: Invalid value: '4096x4096'" in tool_output(upstream, 1)


def test_an_edit_of_an_image_that_is_not_there_is_a_failed_call(http, upstream, images):
    upstream.enqueue(draw("bluer", edit="ig_nothing"), text_stream(["Sorry."]))
    result = stream(http, {"model": "m", "input": "x", "tools": [DRAW]})
    call = result.response["output"][0]
    assert call["status"] == "failed" and "There is no image 'ig_nothing'" in call["error"]["message"]
    assert images.requests() == []


def test_a_faulty_images_server(_upstream_server, upstream, images, tmp_path):
    """Down, slow, too large, cut off: each a failed call the model reads, one terminal event, nothing stored
    half."""
    settings = Settings(upstream_url=_upstream_server.base_url, db=str(tmp_path / "db.sqlite"),
                        groups=(image_settings(images, timeout=1.0, max_bytes=100_000),))
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        images.delay = 3.0
        upstream.enqueue(draw("slow"), text_stream(["Too slow."]))
        result = stream(client, {"model": "m", "input": "x", "tools": [DRAW]})
        call = result.response["output"][0]
        assert call["status"] == "failed"
        assert "did not answer within 1 seconds (--image-generation-timeout)" in call["error"]["message"]
        assert call["error"]["code"] == "images_server_timeout"
        assert result.types.count("response.completed") == 1
        images.delay = 0.0

        images.image_bytes = 300_000
        upstream.enqueue(draw("big"), text_stream(["Too big."]))
        result = stream(client, {"model": "m", "input": "x", "tools": [DRAW]})
        call = result.response["output"][0]
        assert call["status"] == "failed" and call["error"]["code"] == "image_too_large"
        assert client.get("/v1/files", params={"purpose": "assistants_output"}).json()["data"] == []
        images.image_bytes = None

        images.drop_after_partial = True
        upstream.enqueue(draw("cut"), text_stream(["Cut off."]))
        result = stream(client, {"model": "m", "input": "x", "tools": [{**DRAW, "partial_images": 2}]})
        call = result.response["output"][0]
        assert call["status"] == "failed" and result.types.count("response.image_generation_call.partial_image") == 1
        assert "response.image_generation_call.completed" not in result.types

    settings = Settings(upstream_url=_upstream_server.base_url, db="none",
                        groups=(ImageGenerationSettings(image_generation_url="http://127.0.0.1:9/v1"),))
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        upstream.enqueue(draw("x"), text_stream(["Down."]))
        result = stream(client, {"model": "m", "input": "x", "tools": [DRAW]})
        call = result.response["output"][0]
        assert call["status"] == "failed" and "connection refused" in call["error"]["message"]
        assert call["error"]["code"] == "images_server_unreachable"


def test_a_url_answer_is_fetched(http, upstream, images):
    images.answer = "url"
    upstream.enqueue(draw("a kite"), text_stream(["Kite."]))
    result = stream(http, {"model": "m", "input": "x", "tools": [DRAW]})
    assert png_of(result.response["output"][0]).at(0, 0) == color_of("a kite")


def test_tool_choice_forces_the_function_and_one_declaration_only(http, upstream, images):
    upstream.enqueue(draw("forced"), text_stream(["ok"]))
    stream(http, {"model": "m", "input": "x", "tools": [DRAW], "tool_choice": {"type": "image_generation"}})
    choice = upstream.requests[0].body["tool_choice"]
    assert choice == {"type": "function", "function": {"name": "image_generation"}}
    resp = http.post("/v1/responses", json={"model": "m", "input": "x", "tools": [DRAW, DRAW]})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "tools[1]"
    resp = http.post("/v1/responses", json={"model": "m", "input": "x", "tools": [{**DRAW, "partial_images": 5}]})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "tools[0].partial_images"


def test_generate_only_offers_no_edit(http, upstream, images):
    upstream.enqueue(draw("new"), text_stream(["ok"]))
    stream(http, {"model": "m", "input": "x", "tools": [{**DRAW, "action": "generate"}]})
    params = upstream.requests[0].body["tools"][0]["function"]["parameters"]
    assert list(params["properties"]) == ["prompt"]


def test_in_a_background_response(http, upstream, images):
    upstream.enqueue(draw("in the background", call_id="c_bg"), text_stream(["Done later."]))
    resp = http.post("/v1/responses", json={"model": "m", "input": "x", "background": True,
                                            "tools": [{**DRAW, "partial_images": 1}]})
    assert resp.status_code == 200, resp.text
    rid = resp.json()["id"]
    deadline = time.monotonic() + 30
    while (done := http.get(f"/v1/responses/{rid}").json())["status"] in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert done["status"] == "completed"
    call = done["output"][0]
    assert call["status"] == "completed" and png_of(call).at(0, 0) == color_of("in the background")
    replay = http.get(f"/v1/responses/{rid}", params={"stream": "true"})
    events = check_stream(replay.content).events
    assert [e["type"] for e in events].count("response.image_generation_call.partial_image") == 1


def test_a_websocket_turn(ig_gateway, upstream, images):
    from websockets.sync.client import connect

    url = ig_gateway.url.replace("http://", "ws://", 1) + "/v1/responses"
    with connect(url, max_size=None) as ws:
        upstream.enqueue(draw("over a socket"), text_stream(["Socket."]))
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "x", "store": False,
                            "tools": [{**DRAW, "partial_images": 1}]}))
        events = []
        while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(json.loads(ws.recv(timeout=60)))
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        check_stream(sse)
        first = events[-1]["response"]
        call = first["output"][0]
        assert call["status"] == "completed" and png_of(call).at(0, 0) == color_of("over a socket")
        # store: false, chained on the connection: the edit reads the image from the connection's last response
        upstream.enqueue(draw("greener", edit="latest"), text_stream(["Greener."]))
        ws.send(json.dumps({"type": "response.create", "model": "m", "input": "greener", "store": False,
                            "previous_response_id": first["id"], "tools": [DRAW]}))
        events = []
        while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(json.loads(ws.recv(timeout=60)))
        edited = events[-1]["response"]["output"][0]
        assert edited["status"] == "completed" and edited["action"] == "edit"
        (asked,) = images.requests("/edits")
        assert asked.files[0].data == base64.b64decode(call["result"])


def test_the_agents_sdk_image_generation_tool(ig_gateway, upstream, images):
    needs.python_package("agents")
    import asyncio

    from agents import Agent, ImageGenerationTool, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.items import ToolCallItem

    set_tracing_disabled(True)
    upstream.enqueue(draw("an agent's drawing", call_id="call_agent"), text_stream(["Drawn."]))

    async def main():
        async with openai.AsyncOpenAI(base_url=f"{ig_gateway.url}/v1", api_key="x", max_retries=0) as aclient:
            agent = Agent(name="a", instructions="Draw.",
                          tools=[ImageGenerationTool(tool_config={"type": "image_generation", "quality": "low"})],
                          model=OpenAIResponsesModel(model="fake-model", openai_client=aclient))
            return await Runner.run(agent, "Draw something.")

    result = asyncio.run(asyncio.wait_for(main(), 60))
    calls = [i for i in result.new_items if isinstance(i, ToolCallItem)]
    assert [c.raw_item.type for c in calls] == ["image_generation_call"]
    assert pngs.read(base64.b64decode(calls[0].raw_item.result)).at(0, 0) == color_of("an agent's drawing")
    assert result.final_output == "Drawn."
    (asked,) = images.requests("/generations")
    assert asked.fields["quality"] == "low"


def test_without_an_images_server_the_tool_is_a_hosted_tool_the_gateway_cannot_run(_upstream_server, upstream):
    settings = Settings(upstream_url=_upstream_server.base_url, db="none", hosted_tools="reject")
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        resp = client.post("/v1/responses", json={"model": "m", "input": "x", "tools": [DRAW]})
    assert resp.status_code == 400
    assert "--image-generation" in resp.json()["error"]["message"]


def test_fields_go_where_the_images_api_takes_them_and_refused_ones_are_dropped(http, upstream, images):
    images.accepts_response_format = False  # as OpenAI's GPT image models
    tool = {**DRAW, "moderation": "low", "input_fidelity": "high", "quality": "high", "model": "gpt-image-1"}
    upstream.enqueue(draw("a bell"), text_stream(["ok"]))
    result = stream(http, {"model": "m", "input": "x", "tools": [tool]})
    assert result.response["output"][0]["status"] == "completed"
    first, again = images.requests("/generations")
    assert first.fields == {"prompt": "a bell", "model": "gpt-image-1", "quality": "high", "moderation": "low",
                            "response_format": "b64_json"}
    assert again.fields == {"prompt": "a bell", "model": "gpt-image-1", "quality": "high", "moderation": "low"}
    upstream.enqueue(draw("a bell again", edit="latest"), text_stream(["ok"]))
    result = stream(http, {"model": "m", "tools": [tool], "input": [
        *result.response["output"], {"role": "user", "content": "Again, edited."}]})
    assert result.response["output"][0]["status"] == "completed"
    edits = images.requests("/edits")
    assert [e.fields for e in edits][0] == {"prompt": "a bell again", "model": "gpt-image-1", "quality": "high",
                                            "input_fidelity": "high", "response_format": "b64_json"}


def test_images_the_user_gives_are_hostile_until_checked(http, upstream, images, ig_gateway):
    def turn(image_part: dict) -> dict:
        upstream.enqueue(draw("use it"), text_stream(["ok"]))
        result = stream(http, {"model": "m", "tools": [DRAW], "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Use my image."}, image_part]}]})
        return result.response["output"][0]

    call = turn({"type": "input_image", "image_url": "http://127.0.0.1:9/secret.png"})
    assert call["status"] == "failed" and "loopback" in call["error"]["message"]
    call = turn({"type": "input_image", "image_url": "data:image/png;base64,"
                 + base64.b64encode(b"%PDF-1.7 not an image").decode()})
    assert call["status"] == "failed" and "not a PNG, JPEG, WebP or GIF" in call["error"]["message"]
    big = pngs.noise(2_500_000)
    call = turn({"type": "input_image", "image_url": "data:image/png;base64," + base64.b64encode(big).decode()})
    assert call["status"] == "failed" and "--image-generation-max-bytes" in call["error"]["message"]
    assert images.requests() == []  # nothing reached the images server
    # a mask as a file of the Files API: the caller's own, read from the files store
    photo, mask = pngs.draw(24, 24, (1, 99, 7)), pngs.mask(24, 24)
    uploaded = http.post("/v1/files", files={"file": ("mask.png", mask, "image/png")},
                         data={"purpose": "vision"}).json()
    photo_url = "data:image/png;base64," + base64.b64encode(photo).decode()
    for file_id, status in ((uploaded["id"], "completed"), ("file_not_mine", "failed")):
        upstream.enqueue(draw("use it"), text_stream(["ok"]))
        result = stream(http, {"model": "m", "tools": [{**DRAW, "input_image_mask": {"file_id": file_id}}], "input": [
            {"role": "user", "content": [{"type": "input_image", "image_url": photo_url}]}]})
        call = result.response["output"][0]
        assert call["status"] == status
    assert [(u.name, u.data) for u in images.requests("/edits")[0].files] == [("image", photo), ("mask", mask)]
    assert "does not exist" in call["error"]["message"]


def over(transport: str, gw, http, body: dict) -> dict:
    """One request over `transport`: the final response, or {"error": ...} when it was refused before it started."""
    if transport == "http":
        resp = http.post("/v1/responses", json=body)
        return resp.json() if resp.status_code == 200 else {"status_code": resp.status_code, **resp.json()}
    if transport == "background":
        resp = http.post("/v1/responses", json={**body, "background": True})
        if resp.status_code != 200:
            return {"status_code": resp.status_code, **resp.json()}
        rid, deadline = resp.json()["id"], time.monotonic() + 30
        while (done := http.get(f"/v1/responses/{rid}").json())["status"] in ("queued", "in_progress"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return done
    from websockets.sync.client import connect

    with connect(gw.url.replace("http://", "ws://", 1) + "/v1/responses", max_size=None) as ws:
        ws.send(json.dumps({"type": "response.create", **body}))
        while True:
            event = json.loads(ws.recv(timeout=60))
            if event["type"] == "error":
                return {"status_code": event.get("status"), "error": event["error"]}
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                return event["response"]


@pytest.mark.parametrize("transport", ["http", "websocket", "background"])
def test_the_limits_hold_over_every_transport(transport, ig_gateway, http, upstream, images):
    images.image_bytes = 2_500_000  # over the gateway's --image-generation-max-bytes (2 MB here)
    upstream.enqueue(draw("too big"), text_stream(["Too big."]))
    done = over(transport, ig_gateway, http, {"model": "m", "input": "x", "tools": [DRAW]})
    assert done["status"] == "completed"
    call = done["output"][0]
    assert call["status"] == "failed" and call["error"]["code"] == "image_too_large" and call["result"] is None
    images.image_bytes = None

    upstream.enqueue(draw("from my link"), text_stream(["Refused."]))
    done = over(transport, ig_gateway, http, {"model": "m", "tools": [DRAW], "input": [
        {"role": "user", "content": [{"type": "input_image", "image_url": "http://10.0.0.7/cat.png"}]}]})
    assert done["output"][0]["status"] == "failed" and "private" in done["output"][0]["error"]["message"]
    assert len(images.requests()) == 1  # the first call's: the refused image never reached the images server

    refused = over(transport, ig_gateway, http, {"model": "m", "input": "x", "tools": [
        {**DRAW, "input_image_mask": {"image_url": "data:image/png;base64,AAAA"}}]})
    assert refused["status_code"] == 400 and refused["error"]["param"] == "tools[0].input_image_mask"


def test_the_images_servers_key_is_sent_and_never_shown(_upstream_server, upstream, images, tmp_path, caplog):
    images.api_key = "sk-images-secret-1234"
    settings = Settings(upstream_url=_upstream_server.base_url, db=str(tmp_path / "db.sqlite"),
                        groups=(image_settings(images, image_generation_api_key="sk-images-secret-1234"),))
    caplog.set_level("DEBUG")
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        upstream.enqueue(draw("a key"), text_stream(["ok"]))
        raw = client.post("/v1/responses", json={"model": "m", "input": "x", "tools": [DRAW], "stream": True}).text
        assert '"status":"completed"' in raw.replace(" ", "")
    assert images.requests()[0].headers["authorization"] == "Bearer sk-images-secret-1234"
    assert "sk-images-secret-1234" not in raw + caplog.text
    images.api_key = "another-key"  # a key the server refuses: the model reads the refusal, never the key
    with GatewayServer(settings) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        upstream.enqueue(draw("a key"), text_stream(["ok"]))
        done = client.post("/v1/responses", json={"model": "m", "input": "x", "tools": [DRAW]}).json()
    assert done["output"][0]["error"]["code"] == "invalid_api_key"
    assert "sk-images-secret-1234" not in json.dumps(done) + json.dumps(upstream.requests[-1].body) + caplog.text
