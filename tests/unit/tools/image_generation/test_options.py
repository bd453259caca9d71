"""The image_generation declaration: OpenAI's defaults echoed, fields sent where the Images API takes them,
a 400 naming the field for anything wrong."""

from __future__ import annotations

import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.image_generation import options


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
