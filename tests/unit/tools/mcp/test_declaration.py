"""tools/mcp/declaration.py: an `mcp` tool declaration checked, filtered, and echoed without its secrets."""

from __future__ import annotations

import pytest

from responses_gateway.tools.mcp.declaration import MCPServer

BASE = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/sse"}


def test_the_echo_never_carries_headers_or_authorization():
    server = MCPServer.from_tool({**BASE, "headers": {"X-Key": "secret"}, "authorization": "Bearer s3cret",
                                  "allowed_tools": ["search"], "server_description": "Docs"})
    public = server.public_tool()
    assert "headers" not in public and "authorization" not in public and "s3cret" not in str(public)
    assert public == {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/sse",
                      "allowed_tools": ["search"], "require_approval": server.require_approval,
                      "server_description": "Docs"}


@pytest.mark.parametrize("spec, says", [
    ({"type": "mcp", "server_url": "https://x"}, "server_label is required"),
    ({"type": "mcp", "server_label": "a"}, "server_url is required"),
    ({"type": "mcp", "server_label": "a", "connector_id": "c"}, "connector_id is not supported"),
    ({**BASE, "headers": {"X": 1}}, "headers must be an object of strings"),
    ({**BASE, "headers": {"bad name": "v"}}, "invalid header name"),
    ({**BASE, "headers": {"X": "a\r\nInjected: 1"}}, "has an invalid value"),
    ({**BASE, "require_approval": "sometimes"}, "require_approval must be"),
    ({**BASE, "allowed_tools": {"tool_names": ["a"], "other": 1}}, "unknown field"),
])
def test_a_bad_declaration_says_what_is_wrong(spec, says):
    with pytest.raises(ValueError, match=says):
        MCPServer.from_tool(spec)


def test_allowed_tools_filter_by_name_and_read_only():
    by_name = MCPServer.from_tool({**BASE, "allowed_tools": ["a"]})
    listed = [{"name": "a"}, {"name": "b"}]
    assert [t["name"] for t in by_name.filter_tools(listed)] == ["a"]
    read_only = MCPServer.from_tool({**BASE, "allowed_tools": {"read_only": True}})
    assert read_only.allows("a", {"readOnlyHint": True}) and not read_only.allows("b", {})


def test_require_approval_always_by_default_never_or_by_filter():
    assert MCPServer.from_tool(BASE).requires_approval("x")
    assert not MCPServer.from_tool({**BASE, "require_approval": "never"}).requires_approval("x")
    mixed = MCPServer.from_tool({**BASE, "require_approval": {"never": {"tool_names": ["safe"]}}})
    assert not mixed.requires_approval("safe") and mixed.requires_approval("other")
