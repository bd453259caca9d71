"""Input items: accepted in every form OpenAI accepts, normalized to one canonical dict per item type.

Clients replay history in many shapes: easy messages without `type`, string content, items with or
without `id`/`status` (coding agents send their own `msg_<uuid>` ids), reasoning items with `content: null`.
Everything downstream (upstream adapters, the store) sees only the canonical forms built here.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import APIError, invalid
from .request import json_type
from .tools import Toolbox

ROLES = ("user", "system", "developer", "assistant")
INPUT_PARTS = ("input_text", "input_image", "input_file")
ASSISTANT_PARTS = ("output_text", "refusal", "input_text")

# Item types OpenAI defines that this gateway cannot serve (no kit in tools/ runs them): a clear 400, never a
# silent drop.
UNSERVABLE = {
    "additional_tools": "'additional_tools' input items",
    "file_search_call": "Hosted file_search items",
    "image_generation_call": "image_generation_call items",
    "code_interpreter_call": "code_interpreter_call items",
    "local_shell_call": "local_shell_call items",
    "local_shell_call_output": "local_shell_call_output items",
    "shell_call": "shell_call items",
    "shell_call_output": "shell_call_output items",
    "apply_patch_call": "apply_patch_call items",
    "apply_patch_call_output": "apply_patch_call_output items",
}


# Compaction items (docs/compaction.md), by the names clients use; `compaction_summary` is an older name.
COMPACTION_ITEMS = {"compaction": "compaction", "compaction_summary": "compaction",
                    "context_compaction": "context_compaction"}


def _missing(param: str) -> APIError:
    return APIError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def _need_str(item: dict[str, Any], key: str, where: str, *, allow_empty: bool = True) -> str:
    value = item.get(key)
    if value is None:
        raise _missing(f"{where}.{key}")
    if not isinstance(value, str):
        raise APIError(400, f"Invalid type for '{where}.{key}': expected a string.", param=f"{where}.{key}",
                       code="invalid_type")
    return value


def normalize_input(value: str | list[Any] | None, toolbox: Toolbox) -> list[dict[str, Any]]:
    """`toolbox`: the gateway-run tools, whose kits normalize their own items (tools/kits.py)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    return [normalize_item(item, f"input[{i}]", toolbox) for i, item in enumerate(value)]


def _type_of(value: dict[str, Any], where: str) -> Any:
    """The `type` of an item or part: a string, or None when absent (an array or object is a 400 here, before
    it meets a lookup by type)."""
    kind = value.get("type")
    if kind is not None and not isinstance(kind, str):
        raise APIError(400, f"Invalid type for '{where}.type': expected a string, but got {json_type(kind)} "
                       "instead.", param=f"{where}.type", code="invalid_type")
    return kind


def normalize_item(item: Any, where: str, toolbox: Toolbox) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    kind = _type_of(item, where)
    if kind is None and "role" in item:
        kind = "message"
    if kind == "message":
        return _message(item, where)
    if kind == "function_call":
        out = {"type": kind, "call_id": _need_str(item, "call_id", where), "name": _need_str(item, "name", where),
               "arguments": _need_str(item, "arguments", where)}
        if item.get("namespace"):
            out["namespace"] = item["namespace"]
        return _keep_id(item, out)
    if kind == "custom_tool_call":
        out = {"type": kind, "call_id": _need_str(item, "call_id", where), "name": _need_str(item, "name", where),
               "input": _need_str(item, "input", where)}
        if item.get("namespace"):
            out["namespace"] = item["namespace"]
        return _keep_id(item, out)
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        if output is None:
            raise _missing(f"{where}.output")
        if isinstance(output, list):
            output = [_part(p, f"{where}.output[{j}]", INPUT_PARTS) for j, p in enumerate(output)]
        elif not isinstance(output, str):
            raise APIError(400, f"Invalid type for '{where}.output': expected a string or an array.",
                           param=f"{where}.output", code="invalid_type")
        return _keep_id(item, {"type": kind, "call_id": _need_str(item, "call_id", where), "output": output})
    if kind == "tool_search_call":
        args = item.get("arguments")
        if isinstance(args, str):
            try:
                args = orjson.loads(args)
            except orjson.JSONDecodeError:
                args = {"query": args}
        out = {"type": kind, "call_id": _need_str(item, "call_id", where), "arguments": args or {},
               "execution": item.get("execution") or "client"}
        return _keep_id(item, out)
    if kind == "tool_search_output":
        tools = item.get("tools")
        if not isinstance(tools, list):
            raise _missing(f"{where}.tools")
        out = {"type": kind, "call_id": _need_str(item, "call_id", where), "tools": tools,
               "execution": item.get("execution") or "client"}
        return _keep_id(item, out)
    kit = toolbox.by_item.get(kind) if isinstance(kind, str) else None
    if kit is not None:  # an item of a gateway-run tool (MCP, file_search, ...): its kit knows its shape
        return kit.normalize(item, where)
    if kind in COMPACTION_ITEMS:
        content = item.get("encrypted_content")
        if kind == "context_compaction" and content is None:
            return _keep_id(item, {"type": kind})  # Codex's marker without content: nothing to restore
        content = _need_str(item, "encrypted_content", where)
        return _keep_id(item, {"type": COMPACTION_ITEMS[kind], "encrypted_content": content})
    if kind == "compaction_trigger":
        return {"type": kind}
    if kind == "item_reference":
        return {"type": kind, "id": _need_str(item, "id", where)}
    if kind == "reasoning":
        summary = item.get("summary") or []
        content = item.get("content") or []
        if not isinstance(summary, list) or not isinstance(content, list):
            raise invalid(f"Invalid '{where}': summary and content must be arrays.", where, "invalid_type")
        out = {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": str(p.get("text", ""))} for p in summary if isinstance(p, dict)],
            "content": [{"type": "reasoning_text", "text": str(p.get("text", ""))} for p in content if isinstance(p, dict)],
            "encrypted_content": item.get("encrypted_content"),
        }
        return _keep_id(item, out)
    if kind is None:
        raise _missing(f"{where}.type")
    if kind in UNSERVABLE:
        raise APIError(400, f"{UNSERVABLE[kind]} are not supported by this gateway ('{where}').",
                       param=f"{where}.type", code="unsupported_parameter")
    raise APIError(400, f"Invalid value: '{kind}'. Unknown input item type.", param=f"{where}.type",
                   code="invalid_value")


def _keep_id(src: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(src.get("id"), str):
        out["id"] = src["id"]
    return out


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role is None:
        raise _missing(f"{where}.role")
    if role not in ROLES:
        raise invalid(f"Invalid value: '{role}'. Supported values are: 'user', 'system', 'developer', and "
                      f"'assistant'.", f"{where}.role")
    content = item.get("content")
    allowed = ASSISTANT_PARTS if role == "assistant" else INPUT_PARTS
    if isinstance(content, str):
        parts = [{"type": "output_text" if role == "assistant" else "input_text", "text": content}]
    elif isinstance(content, list):
        parts = [_part(p, f"{where}.content[{j}]", allowed) for j, p in enumerate(content)]
    elif content is None:
        raise _missing(f"{where}.content")
    else:
        raise APIError(400, f"Invalid type for '{where}.content': expected a string or an array.",
                       param=f"{where}.content", code="invalid_type")
    return _keep_id(item, {"type": "message", "role": role, "content": parts})


def _part(part: Any, where: str, allowed: tuple[Any, ...]) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    kind = _type_of(part, where)
    if kind not in allowed:
        if kind == "input_file":
            raise APIError(400, f"File inputs are not supported by this gateway ('{where}').",
                           param=f"{where}.type", code="unsupported_parameter")
        raise invalid(f"Invalid value: '{kind}'. Supported values are: "
                      + ", ".join(f"'{a}'" for a in allowed) + ".", f"{where}.type")
    if kind in ("input_text", "output_text"):
        return {"type": kind, "text": _need_str(part, "text", where)}
    if kind == "refusal":
        return {"type": "refusal", "refusal": _need_str(part, "refusal", where)}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            if part.get("file_id"):
                raise APIError(400, f"Image file ids are not supported by this gateway ('{where}'); send "
                               "image_url as a URL or a data URL.", param=f"{where}.file_id",
                               code="unsupported_parameter")
            raise _missing(f"{where}.image_url")
        detail = part.get("detail") or "auto"
        if detail not in ("auto", "low", "high", "original"):
            raise invalid(f"Invalid value: '{detail}'. Supported values are: 'auto', 'low', 'high' and "
                          "'original'.", f"{where}.detail")
        return {"type": "input_image", "image_url": url, "detail": detail}
    raise APIError(400, f"File inputs are not supported by this gateway ('{where}').", param=f"{where}.type",
                   code="unsupported_parameter")
