"""Earlier images in a history: what the model is shown of them (never base64), which image a call edits, and
when a mask has an image to apply to."""

from __future__ import annotations

import json

import pytest

from responses_gateway.tools.image_generation import history
from responses_gateway.tools.image_generation.function import Arguments

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
