"""tools/mcp/results.py: what an MCP server returns, as the text `mcp_call.output` carries."""

from __future__ import annotations

from types import SimpleNamespace as NS

from responses_gateway.tools.mcp.results import result_to_text


def test_text_parts_are_joined_and_other_blocks_become_placeholders():
    result = NS(content=[NS(type="text", text="one"), NS(type="image", mime_type="image/png"),
                         NS(type="text", text="two")], structured_content=None)
    assert result_to_text(result) == "one\n[image: image/png]\ntwo"


def test_structured_content_is_json_when_there_is_no_text():
    result = NS(content=[NS(type="resource_link", uri="file:///a")], structured_content={"n": 1, "s": "é"})
    assert result_to_text(result) == '{"n": 1, "s": "é"}\n[resource link: file:///a]'


def test_an_embedded_text_resource_is_text():
    result = NS(content=[NS(type="resource", resource=NS(text="inside", uri="x", mime_type=None))],
                structured_content=None)
    assert result_to_text(result) == "inside"
