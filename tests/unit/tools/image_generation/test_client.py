"""The images server's client against the fake images server (tests/support/fake_images.py), over loopback:
generations and edits as the openai SDK sends them, streamed partials, URL answers, refused fields dropped once,
the server's refusals with its reason, and the size limit."""

from __future__ import annotations

import asyncio
import base64

import pytest

from responses_gateway.pictures import picture
from responses_gateway.tools.image_generation.client import Ask, ImagesClient, ImagesError, Made, Partial
from tests.support import pngs
from tests.support.fake_images import FakeImages, color_of


def run(client: ImagesClient, ask: Ask) -> list[Partial | Made]:
    async def go() -> list[Partial | Made]:
        try:
            return [got async for got in client.run(ask)]
        finally:
            client.close()

    return asyncio.run(go())


def client_for(images: FakeImages, max_bytes: int = 8 << 20, key: str | None = None) -> ImagesClient:
    return ImagesClient(images.base_url, key, max_bytes=max_bytes)


def test_a_generation_is_asked_as_json_and_its_png_comes_back(images):
    (made,) = run(client_for(images), Ask("a red fox", {"size": "32x16", "quality": "low"}))
    assert isinstance(made, Made)
    image = base64.b64decode(made.b64)
    assert pngs.size(image) == (32, 16)
    assert pngs.read(image).at(0, 0) == color_of("a red fox")
    assert made.meta == {"size": "32x16", "quality": "low", "output_format": "png", "background": "opaque"}
    (seen,) = images.requests("/generations")
    assert seen.fields == {"prompt": "a red fox", "size": "32x16", "quality": "low", "response_format": "b64_json"}
    assert seen.content_type == "application/json"


def test_a_refused_response_format_is_dropped_once_and_remembered(images):
    images.accepts_response_format = False  # OpenAI's GPT image models
    client = client_for(images)

    async def twice() -> None:
        for _ in range(2):
            assert [got async for got in client.run(Ask("x"))]
        client.close()

    asyncio.run(twice())
    fields = [s.fields for s in images.requests("/generations")]
    assert fields == [{"prompt": "x", "response_format": "b64_json"}, {"prompt": "x"}, {"prompt": "x"}]


def test_partials_stream_in_openai_sse_shape(images):
    got = run(client_for(images), Ask("a cat", partials=2))
    assert [type(g) for g in got] == [Partial, Partial, Made]
    assert [g.index for g in got[:2] if isinstance(g, Partial)] == [0, 1]
    assert pngs.size(base64.b64decode(got[0].b64)) == (64, 64)
    (seen,) = images.requests("/generations")
    assert seen.fields["stream"] is True and seen.fields["partial_images"] == 2


def test_a_server_without_streaming_gives_the_image_alone(images):
    images.streams = False
    got = run(client_for(images), Ask("a cat", partials=3))
    assert [type(g) for g in got] == [Made]


def test_an_edit_is_multipart_with_the_images_and_the_mask(images):
    source = pngs.draw(40, 40, (10, 200, 30))
    mask = pngs.mask(40, 40)
    ask = Ask("make it blue", {"input_fidelity": "high"}, images=(picture(source),), mask=picture(mask))
    (made,) = run(client_for(images), ask)
    result = pngs.read(base64.b64decode(made.b64))
    assert (result.width, result.height) == (40, 40)
    assert result.at(0, 0) == (10, 200, 30)  # the edited image's own colour
    assert result.at(20, 20) == color_of("make it blue")
    (seen,) = images.requests("/edits")
    assert seen.content_type == "multipart/form-data"
    assert seen.fields == {"prompt": "make it blue", "input_fidelity": "high", "response_format": "b64_json"}
    assert [(u.name, u.filename, u.content_type, u.data) for u in seen.files] == [
        ("image", "image_1.png", "image/png", source), ("mask", "mask.png", "image/png", mask)]


def test_several_images_go_as_the_sdk_array(images):
    one, two = pngs.draw(8, 8, (1, 2, 3)), pngs.draw(8, 8, (4, 5, 6))
    run(client_for(images), Ask("combine", images=(picture(one), picture(two))))
    (seen,) = images.requests("/edits")
    assert [u.name for u in seen.files] == ["image[]", "image[]"]


def test_a_refusal_carries_the_servers_reason(images):
    images.sizes = {"1024x1024"}
    with pytest.raises(ImagesError) as caught:
        run(client_for(images), Ask("x", {"size": "4096x4096"}))
    assert caught.value.param == "size" and caught.value.code == "invalid_value"
    assert "Invalid value: '4096x4096'" in caught.value.message


def test_a_wrong_key_is_refused_and_the_key_is_sent_as_bearer(images):
    images.api_key = "sk-images"
    with pytest.raises(ImagesError) as caught:
        run(client_for(images, key="wrong"), Ask("x"))
    assert caught.value.code == "invalid_api_key"
    assert run(client_for(images, key="sk-images"), Ask("x"))
    assert images.requests()[-1].headers["authorization"] == "Bearer sk-images"


def test_an_image_over_the_limit_is_refused_while_it_arrives(images):
    images.image_bytes = 300_000
    with pytest.raises(ImagesError) as caught:
        run(client_for(images, max_bytes=100_000), Ask("x"))
    assert caught.value.code == "image_too_large"
    images.image_bytes = 300_000
    with pytest.raises(ImagesError):
        run(client_for(images, max_bytes=100_000), Ask("x", partials=1))


def test_a_url_answer_is_fetched_from_the_images_servers_own_host(images):
    images.answer = "url"
    (made,) = run(client_for(images), Ask("a fox"))
    assert pngs.read(base64.b64decode(made.b64)).at(0, 0) == color_of("a fox")


def test_a_url_answer_elsewhere_on_loopback_is_refused(images):
    images.answer = "url"
    images.url_base = "http://127.0.0.2:9"  # not the images server's host: a private address
    with pytest.raises(ImagesError) as caught:
        run(client_for(images), Ask("a fox"))
    assert "loopback" in caught.value.message and "--image-generation-allow-hosts" in caught.value.message


def test_a_stream_cut_off_is_a_failure(images):
    images.drop_after_partial = True
    with pytest.raises(ImagesError) as caught:
        run(client_for(images), Ask("x", partials=2))
    assert "broke off" in caught.value.message or "ended without" in caught.value.message


def test_a_server_that_is_down_is_unreachable():
    client = ImagesClient("http://127.0.0.1:9/v1", None, max_bytes=1000)
    with pytest.raises(ImagesError) as caught:
        run(client, Ask("x"))
    assert caught.value.code == "images_server_unreachable" and "connection refused" in caught.value.message


def test_a_missing_endpoint_says_which(images):
    with pytest.raises(ImagesError) as caught:
        run(ImagesClient(images.url, None, max_bytes=1000), Ask("x"))  # without /v1
    assert caught.value.message.startswith("The images server has no /images/generations (HTTP 404")
