"""The `mcp` tool declaration: a remote MCP server a request names, checked at the request boundary.

Parsing needs nothing of the MCP SDK (a request pays for importing it only when it runs MCP tools); what
the gateway then does with a server — connecting, listing, calling — is the rest of `tools.mcp`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValueError(f"{what} must be a list of tool names")
    return list(value)


@dataclass
class ToolFilter:
    """OpenAI's tool filter: `tool_names` and/or `read_only` (tools annotated `readOnlyHint: true`)."""

    tool_names: list[str] | None = None
    read_only: bool | None = None

    @classmethod
    def parse(cls, value: Any, what: str) -> ToolFilter:
        if isinstance(value, list):
            return cls(tool_names=_names(value, what))
        if not isinstance(value, Mapping):
            raise ValueError(f"{what} must be a list of tool names or an object with tool_names / read_only")
        unknown = set(value) - {"tool_names", "read_only"}
        if unknown:
            raise ValueError(f"{what} has unknown field(s): {', '.join(sorted(unknown))}")
        names = value.get("tool_names")
        read_only = value.get("read_only")
        if read_only is not None and not isinstance(read_only, bool):
            raise ValueError(f"{what}.read_only must be a boolean")
        return cls(tool_names=None if names is None else _names(names, f"{what}.tool_names"), read_only=read_only)

    def matches(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        """Whether the filter selects this tool (a filter with no criteria selects nothing)."""
        if self.tool_names is None and self.read_only is None:
            return False
        if self.tool_names is not None and name not in self.tool_names:
            return False
        if self.read_only is not None:
            is_read_only = bool((annotations or {}).get("readOnlyHint"))
            if is_read_only != self.read_only:
                return False
        return True


@dataclass
class MCPServer:
    """One remote MCP server declared by a request's `{"type": "mcp"}` tool.

    `headers` carries the secrets (including `Authorization` built from `authorization`): it is excluded from
    `repr()` and must never be stored, logged or echoed; use `public_tool()` for what may be stored.
    """

    label: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    allowed_tools: list[str] | None = None
    read_only: bool | None = None  # from allowed_tools={"read_only": ...}: keep only (non-)read-only tools
    require_approval: Any = "always"
    description: str | None = None

    @classmethod
    def from_tool(cls, spec: Mapping[str, Any]) -> MCPServer:
        """Build from a Responses tool; raises `ValueError` with a readable reason for a bad declaration."""
        if spec.get("type", "mcp") != "mcp":
            raise ValueError(f"not an mcp tool: type {spec.get('type')!r}")
        label = spec.get("server_label")
        if not isinstance(label, str) or not label.strip():
            raise ValueError("mcp tool: server_label is required")
        url = spec.get("server_url")
        if url is None and spec.get("connector_id") is not None:
            raise ValueError(f"mcp tool {label!r}: connector_id is not supported, give a server_url")
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"mcp tool {label!r}: server_url is required")
        headers: dict[str, str] = {}
        raw_headers = spec.get("headers")
        if raw_headers is not None:
            if not isinstance(raw_headers, Mapping):
                raise ValueError(f"mcp tool {label!r}: headers must be an object of strings")
            for key, value in raw_headers.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise ValueError(f"mcp tool {label!r}: headers must be an object of strings")
                if not _HEADER_NAME.fullmatch(key):
                    raise ValueError(f"mcp tool {label!r}: invalid header name {key[:64]!r}")
                if _BAD_HEADER_VALUE.search(value):  # never echo the value: it may be a secret
                    raise ValueError(f"mcp tool {label!r}: header {key!r} has an invalid value")
                headers[key] = value
        authorization = spec.get("authorization")
        if authorization is not None:
            if not isinstance(authorization, str):
                raise ValueError(f"mcp tool {label!r}: authorization must be a string")
            if _BAD_HEADER_VALUE.search(authorization):
                raise ValueError(f"mcp tool {label!r}: authorization has an invalid value")
            if authorization and not any(k.lower() == "authorization" for k in headers):
                token = authorization.strip()
                headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
        allowed: list[str] | None = None
        read_only: bool | None = None
        raw_allowed = spec.get("allowed_tools")
        if raw_allowed is not None:
            flt = ToolFilter.parse(raw_allowed, f"mcp tool {label!r}: allowed_tools")
            allowed, read_only = flt.tool_names, flt.read_only
        require_approval = spec.get("require_approval")
        if require_approval is None:
            require_approval = "always"
        _check_require_approval(require_approval, label)
        description = spec.get("server_description")
        if description is not None and not isinstance(description, str):
            raise ValueError(f"mcp tool {label!r}: server_description must be a string")
        return cls(
            label=label,
            url=url.strip(),
            headers=headers,
            allowed_tools=allowed,
            read_only=read_only,
            require_approval=require_approval,
            description=description,
        )

    def allows(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        """Whether `allowed_tools` lets the model see / call this tool."""
        if self.allowed_tools is not None and name not in self.allowed_tools:
            return False
        if self.read_only is not None:
            return bool((annotations or {}).get("readOnlyHint")) == self.read_only
        return True

    def filter_tools(self, tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Keep the `mcp_list_tools`-shaped tools that `allowed_tools` admits."""
        return [dict(t) for t in tools if self.allows(t["name"], t.get("annotations"))]

    def requires_approval(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        """OpenAI's `require_approval`: "always" (default), "never", or {"always": filter, "never": filter}.

        With the object form, a tool matched by `never` needs no approval, one matched by `always` does, and
        one matched by neither needs approval (the default).
        """
        policy = self.require_approval
        if policy == "never":
            return False
        if isinstance(policy, Mapping) and "never" in policy:
            return not ToolFilter.parse(policy["never"], "never").matches(name, annotations)
        return True

    def public_tool(self) -> dict[str, Any]:
        """The declaration as it may be stored or echoed: no headers, no authorization."""
        out: dict[str, Any] = {"type": "mcp", "server_label": self.label, "server_url": self.url}
        if self.allowed_tools is not None or self.read_only is not None:
            if self.read_only is None:
                out["allowed_tools"] = list(self.allowed_tools or [])
            else:
                flt: dict[str, Any] = {"read_only": self.read_only}
                if self.allowed_tools is not None:
                    flt["tool_names"] = list(self.allowed_tools)
                out["allowed_tools"] = flt
        out["require_approval"] = self.require_approval
        if self.description is not None:
            out["server_description"] = self.description
        return out


def _check_require_approval(value: Any, label: str) -> None:
    if value in ("always", "never"):
        return
    if isinstance(value, Mapping):
        unknown = set(value) - {"always", "never"}
        if unknown:
            raise ValueError(f"mcp tool {label!r}: require_approval has unknown field(s): {', '.join(sorted(unknown))}")
        for key in ("always", "never"):
            if key in value:
                ToolFilter.parse(value[key], f"mcp tool {label!r}: require_approval.{key}")
        return
    raise ValueError(f"mcp tool {label!r}: require_approval must be 'always', 'never' or an object")
