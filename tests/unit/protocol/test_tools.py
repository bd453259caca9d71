"""protocol/tools.py alone: what a malformed tool or tool_choice gets."""

import pytest

from responses_gateway.errors import APIError
from responses_gateway.protocol.tools import normalize_tools


@pytest.mark.parametrize("bad", [["function"], {"type": "function"}, 7])
def test_a_tool_type_that_is_not_a_string_is_a_400_naming_it(bad):
    with pytest.raises(APIError) as caught:
        normalize_tools([{"type": "function", "name": "f"}, {"type": bad}], None)
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "tools[1].type", "invalid_type")


@pytest.mark.parametrize("bad", [["function"], {"type": "function"}, None])
def test_a_tool_choice_type_that_is_not_a_string_is_a_400_naming_it(bad):
    with pytest.raises(APIError) as caught:
        normalize_tools([{"type": "function", "name": "f"}], {"type": bad, "name": "f"})
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "tool_choice.type", "invalid_type")
