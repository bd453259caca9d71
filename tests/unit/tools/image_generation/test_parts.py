"""image_generation's pure parts: the declaration, the function's arguments, earlier images in a history (what
the model is shown of them, which one a call edits), and reading image headers."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.image_generation import history, options, pictures
from responses_gateway.tools.image_generation.function import Arguments, parameters, parse_arguments
from tests.support import pngs

# -- the declaration ---------------------------------------------------------------------------------------


def test_a_bare_declaration_echoes_openais_defaults():
    parsed = options.parse({"type": "image_generation"}, "tools[0]")
    assert parsed.echo() == {"type": "image_generation", "background": "auto", "moderation": "auto",
                             "output_compression": 100, "output_format": "png", "quality": "auto", "size": "auto"}
    assert parsed.fields == {} and parsed.action == "auto" and parsed.partials == 0


def test_fields_go_to_the_endpoint_that_takes_them():
    parsed = options.parse({"type": "image_generation", "size": "1024x1536", "quality": "high", "moderation": "low",
                            "input_fidelity": "high", "partial_images": 2, "model": "flux", "action": "edit"},
                           "tools[0]")
    assert parsed.asked(edit=False) == {"size": "1024x1536", "quality": "high", "moderation": "low"}
    assert parsed.asked(edit=True) == {"size": "1024x1536", "quality": "high", "input_fidelity": "high"}
    assert parsed.partials == 2 and parsed.model == "flux" and parsed.action == "edit"
    assert parsed.echo()["partial_images"] == 2 and parsed.echo()["model"] == "flux"


@pytest.mark.parametrize(("spec", "param", "code"), [
    ({"partial_images": 4}, "tools[1].partial_images", "invalid_value"),
    ({"partial_images": "2"}, "tools[1].partial_images", "invalid_type"),
    ({"quality": "ultra"}, "tools[1].quality", "invalid_value"),
    ({"size": "big"}, "tools[1].size", "invalid_value"),
    ({"output_compression": 101}, "tools[1].output_compression", "invalid_value"),
    ({"action": "draw"}, "tools[1].action", "invalid_value"),
    ({"colour": "red"}, "tools[1].colour", "unknown_parameter"),
    ({"input_image_mask": {}}, "tools[1].input_image_mask.image_url", "missing_required_parameter"),
    ({"input_image_mask": {"image_url": "file:///etc/passwd"}}, "tools[1].input_image_mask.image_url",
     "invalid_value"),
    ({"input_image_mask": {"url": "x"}}, "tools[1].input_image_mask.url", "unknown_parameter"),
])
def test_a_wrong_field_is_a_400_naming_it(spec, param, code):
    with pytest.raises(APIError) as caught:
        options.parse({"type": "image_generation", **spec}, "tools[1]")
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, param, code)


def test_the_function_has_edit_unless_the_tool_only_generates():
    assert "edit" in parameters("auto")["properties"] and "edit" in parameters("edit")["properties"]
    assert list(parameters("generate")["properties"]) == ["prompt"]


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"prompt": "a cat"}', Arguments("a cat")),
    ('{"prompt": " a cat ", "edit": "latest"}', Arguments("a cat", "latest")),
    ('{"prompt": "x", "image_id": "ig_1"}', Arguments("x", "ig_1")),
    ('{"prompt": "x", "edit": true}', Arguments("x", "latest")),
    ('"a bare prompt"', Arguments("a bare prompt")),
    ("a prompt that is not JSON", Arguments("a prompt that is not JSON")),
])
def test_arguments_are_read_leniently(raw, expected):
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize("raw", ['{}', '{"prompt": ""}', '[1]', '{"prompt": "x", "edit": 3}'])
def test_arguments_that_cannot_be_read_say_how_to_call(raw):
    with pytest.raises(ValueError, match="image_generation"):
        parse_arguments(raw)


# -- earlier images --------------------------------------------------------------------------------------------

DRAWN = {"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "iVBORw0KGgo=",
         "revised_prompt": "a red fox", "size": "64x64", "output_format": "png", "action": "generate"}
KEPT = {"id": "ig_2", "type": "image_generation_call", "status": "completed", "result": None,
        "result_file_id": "file-2", "revised_prompt": "a blue fox", "action": "edit", "edited": "ig_1"}
FAILED = {"id": "ig_3", "type": "image_generation_call", "status": "failed", "result": None,
          "error": {"type": "invalid_request_error", "code": "invalid_value", "param": "size",
                    "message": "Invalid value: '9x9'."}}


def user(*parts) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}, *parts]}


def image_part(url="data:image/png;base64,AAAA"):
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def test_an_earlier_call_renders_as_its_prompt_and_one_line_never_base64():
    call, output = history.lower(DRAWN)
    assert call == {"type": "function_call", "call_id": "ig_1", "name": "image_generation",
                    "arguments": json.dumps({"prompt": "a red fox"}, separators=(",", ":"))}
    assert output["output"] == ('Image ig_1 was drawn (64x64, png) and shown to the user. To change it later, call '
                                'image_generation with "edit": "ig_1".')
    assert "iVBOR" not in json.dumps([call, output])
    call, output = history.lower(KEPT)
    assert json.loads(call["arguments"]) == {"prompt": "a blue fox", "edit": "ig_1"}
    assert output["output"].startswith("Image ig_2 was edited")
    assert history.lower(FAILED)[1]["output"] == "The image could not be made: Invalid value: '9x9'."


def test_the_images_of_a_history_newest_last():
    items = [user(image_part("data:image/png;base64,U1")), DRAWN, FAILED, KEPT, user()]
    found = history.images_in(items)
    assert [(s.id, s.image_url, s.kept) for s in found] == [
        (None, "data:image/png;base64,U1", False), ("ig_1", None, False), ("ig_2", None, True)]
    assert history.this_turn(items) == []
    assert [s.image_url for s in history.this_turn([*items, user(image_part("data:x"))])] == ["data:x"]


def test_which_image_a_call_edits():
    items = [user(image_part("data:U1")), DRAWN, KEPT]
    found = history.images_in(items)
    latest = history.choose(Arguments("x", "latest"), "auto", found, [])
    assert [s.id for s in latest] == ["ig_2"]
    assert [s.id for s in history.choose(Arguments("x", "ig_1"), "auto", found, [])] == ["ig_1"]
    assert history.choose(Arguments("x"), "auto", found, []) is None  # auto, nothing named: a new image
    assert history.choose(Arguments("x", "latest"), "generate", found, []) is None
    assert [s.id for s in history.choose(Arguments("x"), "edit", found, [])] == ["ig_2"]  # edit: the latest
    assert [s.id for s in history.choose(Arguments("x"), "auto", found, [], masked=True)] == ["ig_2"]
    turn = history.this_turn([*items, user(image_part("data:T1"), image_part("data:T2"))])
    assert [s.image_url for s in history.choose(Arguments("x"), "auto", found, turn)] == ["data:T1", "data:T2"]
    made = [history.generated({**DRAWN, "id": "ig_9"})]
    assert [s.id for s in history.choose(Arguments("x", "latest"), "auto", found, [], made)] == ["ig_9"]


def test_an_image_that_is_not_there_is_a_message_for_the_model():
    with pytest.raises(history.NoImage, match="There is no image in this conversation to edit"):
        history.choose(Arguments("x", "latest"), "auto", [], [])
    with pytest.raises(history.NoImage, match=r"There is no image 'ig_x'.*ig_1"):
        history.choose(Arguments("x", "ig_x"), "auto", history.images_in([DRAWN]), [])
    gone = history.images_in([{**DRAWN, "result": None}])
    with pytest.raises(history.NoImage, match="no longer available"):
        history.choose(Arguments("x", "ig_1"), "auto", gone, [])


def test_a_mask_needs_an_image():
    assert not history.has_image([user(), FAILED])
    assert history.has_image([user(image_part())]) and history.has_image([KEPT])


# -- image headers -----------------------------------------------------------------------------------------------


def test_formats_and_sizes_are_read_from_the_bytes():
    png = pngs.draw(33, 17)
    assert pictures.sniff(png) == "png" and pictures.size_of(png) == "33x17"
    jpeg = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffc0001108002a003003012200021101031101")
    assert pictures.sniff(jpeg) == "jpeg" and pictures.size_of(jpeg) == "48x42"
    webp = b"RIFF\x00\x00\x00\x00WEBPVP8X" + bytes(8) + (99).to_bytes(3, "little") + (49).to_bytes(3, "little")
    assert pictures.sniff(webp) == "webp" and pictures.size_of(webp) == "100x50"
    assert pictures.sniff(b"<svg") is None and pictures.size_of(b"nothing") is None
    with pytest.raises(pictures.BadImage):
        pictures.picture(b"%PDF-1.7")


def test_data_urls_and_base64():
    png = pngs.draw(4, 4)
    encoded = base64.b64encode(png).decode()
    assert pictures.data_url_payload(f"data:image/png;base64,{encoded}") == encoded
    assert pictures.decoded_length(encoded) == len(png)
    with pytest.raises(pictures.BadImage):
        pictures.data_url_payload("https://example.com/a.png")


def test_base64_is_the_same_with_pybase64_and_without(monkeypatch):
    from responses_gateway.tools.image_generation import b64

    png = pngs.noise(5000)
    fast = (b64.encode(png), b64.decode(base64.b64encode(png)))
    monkeypatch.setattr(b64, "_fast", None)
    monkeypatch.setattr(b64, "FAST", False)
    monkeypatch.setattr(b64, "SLICE", 1024)  # several slices, decoded in turns
    text = base64.b64encode(png).decode()
    assert (b64.encode(png), b64.decode(text)) == fast == (text, png)
    assert asyncio.run(b64.decode_in_turns(text, validate=True)) == png
    with pytest.raises(b64.Error):
        asyncio.run(b64.decode_in_turns("not base64!" * 200, validate=True))
