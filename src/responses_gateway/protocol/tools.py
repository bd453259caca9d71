"""Tools and tool_choice: what the model is offered, what is echoed back, and what was dropped.

Client-executed tools (function, custom, namespace groups of them, a client-run `tool_search`) are offered
to the model. Hosted tools the gateway cannot run are not offered (logged, or rejected when configured); the
model never sees a tool that nobody would execute.

Deferred tools (`defer_loading: true`) are hidden while a client `tool_search` can find them; the tools it
found come back in `tool_search_output` input items and are offered from then on. Without a client
tool_search, deferred tools are offered directly, since nothing else could reveal them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ..errors import APIError, invalid, unsupported
from .mcp_tool import MCPServer
from .request import json_type

log = logging.getLogger("responses_gateway.tools")

_warned: set[str] = set()

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")

HOSTED = {
    "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
    "file_search", "code_interpreter", "image_generation", "computer_use_preview", "computer",
    "local_shell", "shell", "apply_patch", "tool_search",  # tool_search with execution "server"
}


ToolKind = Literal["function", "custom", "tool_search", "mcp", "mcp_approval"]
"""What a Tool is: a client's function or custom (freeform) tool, a client-run tool_search, or a tool of an MCP
server the gateway runs (`mcp_approval`: one that needs the client's approval before each call)."""
ToolMode = Literal["auto", "none", "required"]


@dataclass(frozen=True)
class Tool:
    """One callable the model is offered. `wire_name` is the name the upstream sees."""

    kind: ToolKind
    name: str
    wire_name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    format: dict[str, Any] | None = None  # custom tools: {"type": "text"} or {"type": "grammar", "syntax", "definition"}
    namespace: str | None = None
    deferred: bool = False


@dataclass
class ToolSet:
    echo: list[dict[str, Any]] = field(default_factory=list)
    offered: list[Tool] = field(default_factory=list)
    by_wire_name: dict[str, Tool] = field(default_factory=dict)
    mcp: list[MCPServer] = field(default_factory=list)  # declared MCP servers, run by the gateway
    # The normalized tool_choice: `forced` is the one tool it names (mode "required"); an `allowed_tools`
    # choice narrows `offered` itself, so the upstream is offered only those.
    mode: ToolMode = "auto"
    forced: Tool | None = None
    echo_choice: Any = "auto"

    def add(self, tool: Tool, where: str, found: bool = False) -> None:
        known = self.by_wire_name.get(tool.wire_name)
        if known is not None:
            if found:  # a search result naming a tool the request already has: it is no longer deferred
                self.offered = [tool if t is known else t for t in self.offered]
                self.by_wire_name[tool.wire_name] = tool
                return
            raise invalid(f"Invalid 'tools': duplicate tool name '{tool.wire_name}'.", where)
        self.offered.append(tool)
        self.by_wire_name[tool.wire_name] = tool

    # -- while the gateway runs MCP tools --------------------------------------------------------------

    def offer_listed(self, server: MCPServer, listed: list[dict[str, Any]]) -> None:
        """Offer the tools an MCP server listed (`mcp_list_tools` shape), named `<server_label>__<tool>`."""
        for spec in listed:
            name = spec["name"]
            kind: ToolKind = "mcp_approval" if server.requires_approval(name, spec.get("annotations")) else "mcp"
            tool = Tool(kind, name, wire_name(name, server.label), spec.get("description"),
                        spec.get("input_schema") or {"type": "object", "properties": {}}, namespace=server.label)
            if tool.wire_name not in self.by_wire_name:
                self.add(tool, f"tools.{server.label}")

    def withdraw_mcp(self) -> None:
        """No more MCP tools (`max_tool_calls` is spent): the model must answer, or call a client tool."""
        self.offered = [t for t in self.offered if t.kind not in ("mcp", "mcp_approval")]

    def unforce(self) -> None:
        """A forced tool choice applies to the first step of a response, not to every round after it."""
        self.mode, self.forced = "auto", None


def found_tools(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools a client's tool search returned (`tool_search_output` items), to be offered from now on."""
    return [tool for item in items if item["type"] == "tool_search_output" for tool in item["tools"]]


def normalize_tools(tools: list[dict[str, Any]] | None, tool_choice: Any, *, hosted_policy: str = "drop",
                    found: Sequence[dict[str, Any]] = ()) -> ToolSet:
    """`found`: the tools carried by `tool_search_output` items of the input (a client's search results)."""
    out = ToolSet()
    for i, spec in enumerate(tools or ()):
        _add_spec(out, spec, f"tools[{i}]", hosted_policy, echo=True)
    searching = any(t.kind == "tool_search" for t in out.offered)
    for i, spec in enumerate(found):
        _add_spec(out, spec, f"input.tool_search_output.tools[{i}]", hosted_policy, echo=False, found=True)
    if searching:
        out.offered = [t for t in out.offered if not t.deferred]
    _choice(out, tool_choice)
    return out


def _add_spec(out: ToolSet, spec: dict[str, Any], where: str, hosted_policy: str, *, echo: bool, found: bool = False) -> None:
    if not isinstance(spec, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    kind = spec.get("type")
    if found and kind in ("function", "custom", "namespace"):
        # search results re-announce tools the request may already carry (deferred): offer them, once
        spec = {**spec, "defer_loading": False}
        if kind == "namespace":
            spec["tools"] = [{**m, "defer_loading": False} for m in spec.get("tools") or () if isinstance(m, dict)]
    if kind == "function":
        out.add(_function(spec, where), where, found)
        if echo:
            out.echo.append(_echo_function(spec))
    elif kind == "custom":
        out.add(_custom(spec, where), where, found)
        if echo:
            out.echo.append(spec)
    elif kind == "namespace":
        ns = spec.get("name")
        if not isinstance(ns, str) or not NAME_RE.match(ns):
            raise invalid(f"Invalid '{where}.name': expected a name matching '^[a-zA-Z0-9_-]+$'.",
                          f"{where}.name")
        members = spec.get("tools")
        if not isinstance(members, list):
            raise APIError(400, f"Missing required parameter: '{where}.tools'.", param=f"{where}.tools",
                           code="missing_required_parameter")
        for j, member in enumerate(members):
            mwhere = f"{where}.tools[{j}]"
            mkind = member.get("type") if isinstance(member, dict) else None
            if mkind == "function":
                tool = _function(member, mwhere, namespace=ns)
            elif mkind == "custom":
                tool = _custom(member, mwhere, namespace=ns)
            else:
                raise invalid(f"Invalid value: '{mkind}'. Namespace members must be 'function' or 'custom'.",
                              f"{mwhere}.type")
            out.add(tool, mwhere, found)
        if echo:
            out.echo.append(spec)
    elif kind == "tool_search" and spec.get("execution") == "client":
        params = spec.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise APIError(400, f"Invalid type for '{where}.parameters': expected an object.",
                           param=f"{where}.parameters", code="invalid_type")
        out.add(Tool("tool_search", "tool_search", "tool_search", spec.get("description"), params), where)
        if echo:
            out.echo.append(spec)
    elif kind == "mcp":
        try:
            server = MCPServer.from_tool(spec)
        except ValueError as exc:
            raise invalid(f"Invalid '{where}': {exc}", where) from None
        if any(s.label == server.label for s in out.mcp):
            raise invalid(f"Invalid '{where}.server_label': duplicate server_label '{server.label}'.",
                          f"{where}.server_label")
        out.mcp.append(server)
        if echo:
            out.echo.append(server.public_tool())  # never the headers or authorization
    elif kind in HOSTED:
        if hosted_policy == "reject":
            raise unsupported(f"{where}.type", f"The hosted tool '{kind}'")
        if kind not in _warned:  # once per process: agents send the same tools on every turn
            _warned.add(kind)
            log.warning("hosted tool %r is not offered to the model: this gateway cannot execute it", kind)
    elif kind is None:
        raise APIError(400, f"Missing required parameter: '{where}.type'.", param=f"{where}.type",
                       code="missing_required_parameter")
    else:
        raise invalid(f"Invalid value: '{kind}'. Unknown tool type.", f"{where}.type")


def _function(spec: dict[str, Any], where: str, namespace: str | None = None) -> Tool:
    name = spec.get("name")
    if name is None:
        raise APIError(400, f"Missing required parameter: '{where}.name'.", param=f"{where}.name",
                       code="missing_required_parameter")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise invalid(f"Invalid '{where}.name': string does not match pattern. Expected a string that matches "
                      "the pattern '^[a-zA-Z0-9_-]+$'.", f"{where}.name")
    params = spec.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise APIError(400, f"Invalid type for '{where}.parameters': expected an object.",
                       param=f"{where}.parameters", code="invalid_type")
    return Tool("function", name, wire_name(name, namespace), spec.get("description"), params, spec.get("strict"),
                namespace=namespace, deferred=bool(spec.get("defer_loading")))


def _custom(spec: dict[str, Any], where: str, namespace: str | None = None) -> Tool:
    name = spec.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise invalid(f"Invalid '{where}.name': expected a name matching '^[a-zA-Z0-9_-]+$'.", f"{where}.name")
    fmt = spec.get("format") or {"type": "text"}
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "grammar"):
        raise invalid(f"Invalid '{where}.format': expected type 'text' or 'grammar'.", f"{where}.format")
    return Tool("custom", name, wire_name(name, namespace), spec.get("description"), format=fmt, namespace=namespace,
                deferred=bool(spec.get("defer_loading")))


def wire_name(name: str, namespace: str | None) -> str:
    """The one name an upstream sees for a tool: namespace members are flattened as `namespace__name`."""
    return f"{namespace}__{name}" if namespace else name


def _echo_function(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": spec["name"],
        "description": spec.get("description"),
        "parameters": spec.get("parameters"),
        "strict": spec.get("strict"),
    }


def _find(out: ToolSet, kind: Any, name: Any, namespace: Any = None) -> Tool | None:
    for tool in out.offered:
        if tool.kind == kind and tool.name == name and (namespace is None or tool.namespace == namespace):
            return tool
    return None


def _choice(out: ToolSet, choice: Any) -> None:
    if choice is None:
        out.echo_choice = "auto"
        return
    out.echo_choice = choice
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise invalid(f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'.",
                          "tool_choice")
        if choice == "required" and not out.offered and not out.mcp:
            raise invalid("Tool choice 'required' must be specified with 'tools' parameter.", "tool_choice", None)
        out.mode = cast(ToolMode, choice)  # one of the three, checked above
        return
    kind = choice.get("type")
    if kind in ("function", "custom"):
        tool = _find(out, kind, choice.get("name"), choice.get("namespace"))
        if tool is None:
            raise invalid(f"Tool choice '{kind}' not found in 'tools' parameter.", "tool_choice", None)
        out.mode, out.forced = "required", tool
        return
    if kind == "allowed_tools":
        mode = choice.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise invalid(f"Invalid value: '{mode}'. Supported values are: 'auto' and 'required'.",
                          "tool_choice.mode")
        refs = choice.get("tools") or []
        if not isinstance(refs, list):
            raise invalid(f"Invalid type for 'tool_choice.tools': expected an array, but got "
                          f"{json_type(refs)} instead.", "tool_choice.tools", "invalid_type")
        allowed: list[Tool] = []
        for j, ref in enumerate(refs):
            tool = _find(out, ref.get("type"), ref.get("name"), ref.get("namespace")) if isinstance(ref, dict) \
                else None
            if tool is None:
                raise invalid(f"Tool '{ref.get('name') if isinstance(ref, dict) else ref}' in "
                              f"'tool_choice.tools[{j}]' not found in 'tools' parameter.", f"tool_choice.tools[{j}]")
            allowed.append(tool)
        # The restriction is real: the upstream is offered only the allowed tools.
        out.offered = allowed
        out.mode = mode
        return
    if kind in HOSTED:
        raise unsupported("tool_choice", f"Forcing the hosted tool '{kind}'")
    if kind == "mcp":  # {"type": "mcp", "server_label", "name"?}: MCP tools are listed later; keep it soft
        out.mode = "required" if choice.get("name") else "auto"
        return
    raise invalid(f"Invalid value: '{kind}'. Supported values are: 'function', 'custom' and 'allowed_tools'.",
                  "tool_choice.type")
