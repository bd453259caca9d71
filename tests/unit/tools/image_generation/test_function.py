"""The function the model is offered (edit only where the declaration lets it) and its arguments, read leniently."""

from __future__ import annotations

import pytest

from responses_gateway.tools.image_generation.function import Arguments, parameters, parse_arguments


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
