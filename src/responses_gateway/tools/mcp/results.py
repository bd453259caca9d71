"""What the MCP SDK returns, as the Responses items carry it: tools for `mcp_list_tools`, text for `mcp_call`."""

from __future__ import annotations

import json
from typing import Any


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _block_text(block: Any) -> tuple[str, bool]:
    """(text, is_real_text) for one content block; non-text blocks become short placeholders."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text, True
    if kind == "image":
        return f"[image: {block.mime_type}]", False
    if kind == "audio":
        return f"[audio: {block.mime_type}]", False
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if isinstance(text, str):
            return text, True
        return f"[resource: {res.uri}{' (' + res.mime_type + ')' if res.mime_type else ''}]", False
    if kind == "resource_link":
        return f"[resource link: {block.uri}]", False
    return f"[{kind or 'unknown'} content]", False


def result_to_text(result: Any) -> str:
    """A `CallToolResult` as the text OpenAI puts in `mcp_call.output`.

    Text parts (and embedded text resources) joined with newlines; when there is no text part, the
    structured content as JSON text; images, audio, blobs and links as short placeholders.
    """
    parts: list[tuple[str, bool]] = [_block_text(b) for b in (getattr(result, "content", None) or [])]
    structured = getattr(result, "structured_content", None)
    if not any(is_text for _, is_text in parts) and structured is not None:
        parts.insert(0, (_json_text(structured), True))
    return "\n".join(text for text, _ in parts)


def tool_dict(tool: Any) -> dict[str, Any]:
    annotations = tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True) if tool.annotations else None
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": annotations or None,
    }
