"""Tools and tool_choice: what the model is offered, what is echoed back, and what was dropped.

Client-executed tools (function, custom, namespace groups of them, a client-run `tool_search`) are offered
to the model. Tools the gateway runs itself (MCP servers, and the hosted tools this deployment has a kit for)
are parsed by their kit and offered under names they reserve. This module knows kits only as the `ToolKind`
the request boundary needs: the `Toolbox` it is given (made once at start-up by tools/kits.py) says which
kits the deployment runs. Hosted tools the deployment cannot
run are not offered — dropped with a log line once per type and the metric
`responses_gateway_hosted_tools_dropped_total{type}`, or rejected with a 400 (`--hosted-tools reject`); the
model never sees a tool that nobody would execute.

Deferred tools (`defer_loading: true`) are hidden while a client `tool_search` can find them; the tools it
found come back in `tool_search_output` input items and are offered from then on. Without a client
tool_search, deferred tools are offered directly, since nothing else could reveal them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from .. import generation, metrics
from ..errors import APIError, invalid, unsupported
from .request import json_type

log = logging.getLogger("responses_gateway.tools")

_warned: set[str] = set()

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")

# OpenAI's hosted tool types. Those a kit serves (tools/kits.py) run when the deployment has what they need.
HOSTED = {
    "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
    "file_search", "code_interpreter", "image_generation", "computer_use_preview", "computer",
    "local_shell", "shell", "apply_patch", "tool_search",  # tool_search with execution "server"
}
NO_KIT = "this gateway has no implementation of it"

ToolMode = Literal["auto", "none", "required"]


class TextCalls(Protocol):
    """A tool the model calls in its own words instead of by tool calling (a GUI agent that answers
    `Thought: ...` then `Action: click(start_box='(100,200)')`): what the model is told of it (in place of
    the tool's declaration), and an answer's text read into its parts — the model's thinking, the call's
    arguments (a JSON object, None: no call), and the text left to show as the answer."""

    def prompt(self) -> str: ...

    def read(self, text: str) -> tuple[str, str | None, str]: ...


@dataclass(frozen=True)
class Tool:
    """One callable the model is offered. `wire_name` is the name the upstream sees; `kind` the shape it is
    offered in; `runner` the gateway-run tool's kit that runs its calls (None: the client runs them)."""

    kind: generation.ToolKind
    name: str
    wire_name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    format: dict[str, Any] | None = None  # custom tools: {"type": "text"} or {"type": "grammar", "syntax", "definition"}
    namespace: str | None = None
    deferred: bool = False
    runner: str | None = None
    # A hosted tool some upstreams run natively (computer use): its declaration as the client gave it, for a
    # Responses upstream (passed as it is) or Anthropic (its own computer tool); others see `parameters`.
    spec: dict[str, Any] | None = None
    # A tool the model calls in text rather than by tool calling (upstreams/text_calls.py): never offered as a
    # function; its prompt joins the instructions and its calls are read out of the answer.
    text_calls: TextCalls | None = None


class ToolKind(Protocol):
    """What the request boundary needs of a gateway-run tool's kit (tools/frame.Kit is one): which
    declarations and items are its, how to parse, echo and normalize them, and the include[] values it honours."""

    @property
    def name(self) -> str: ...

    @property
    def types(self) -> tuple[str, ...]: ...

    @property
    def item_types(self) -> tuple[str, ...]: ...

    @property
    def includes(self) -> tuple[str, ...]: ...

    @property
    def parse(self) -> Callable[[dict[str, Any], str], Declared]: ...

    @property
    def echo(self) -> Callable[[Declared], dict[str, Any]]: ...

    @property
    def normalize(self) -> Callable[[dict[str, Any], str], dict[str, Any]]: ...

    @property
    def check(self) -> Callable[[Sequence[Declared]], None] | None: ...


@dataclass(frozen=True)
class Declared:
    """One tool of a request's `tools` that the gateway runs, parsed by its kit.

    `config` is the kit's own typed view of the declaration (e.g. the MCP server, the vector store ids);
    `functions` what the model is offered for it from the start (an MCP server's come later, once listed).
    """

    kit: ToolKind
    where: str  # its place in the request, e.g. "tools[2]", for errors
    config: Any
    functions: tuple[Tool, ...] = ()


@dataclass(frozen=True)
class Toolbox:
    """The gateway-run tools as requests meet them, made once at start-up (tools/kits.py):

    - `available`: the kits this deployment runs, by declaration type;
    - `missing`: for the other types a kit serves, how to enable it (a declaration is dropped or refused as
      `--hosted-tools` says); `refused`: types the deployment asked for but cannot run here (a 400 saying why);
    - `by_item`: every kit of the build by the item types it makes (items replayed by clients are normalized by
      their kit even where the tool does not run);
    - `includes`: the include[] values beyond OpenAI's that the kits honour.
    """

    available: Mapping[str, ToolKind] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
    by_item: Mapping[str, ToolKind] = field(default_factory=dict)
    includes: Collection[str] = ()


EMPTY = Toolbox()  # no gateway-run tool at all (a request parsed outside a running gateway, in tests)


@dataclass
class ToolSet:
    echo: list[dict[str, Any]] = field(default_factory=list)
    offered: list[Tool] = field(default_factory=list)
    by_wire_name: dict[str, Tool] = field(default_factory=dict)
    gateway: list[Declared] = field(default_factory=list)  # declared tools the gateway runs (MCP, file_search...)
    # The normalized tool_choice: `forced` is the one tool it names (mode "required"); an `allowed_tools`
    # choice narrows `offered` itself, so the upstream is offered only those.
    mode: ToolMode = "auto"
    forced: Tool | None = None
    echo_choice: Any = "auto"

    def add(self, tool: Tool, where: str, found: bool = False) -> None:
        known = self.by_wire_name.get(tool.wire_name)
        if known is not None:
            if found and known.runner is None:  # a search result naming a tool the request has: no longer deferred
                self.offered = [tool if t is known else t for t in self.offered]
                self.by_wire_name[tool.wire_name] = tool
                return
            runner = known.runner or tool.runner
            if runner is not None and known.runner == tool.runner:
                raise invalid(f"Invalid '{where}': only one '{runner}' tool may be given.", where)
            if runner is not None:
                raise invalid(f"Invalid 'tools': the name '{tool.wire_name}' is reserved by the '{runner}' tool "
                              "that the gateway runs; give your tool another name.", where)
            raise invalid(f"Invalid 'tools': duplicate tool name '{tool.wire_name}'.", where)
        self.offered.append(tool)
        self.by_wire_name[tool.wire_name] = tool

    # -- while the gateway runs its tools (tools/loop.py) -------------------------------------------------

    def offer(self, tool: Tool, where: str) -> None:
        """Offer a tool found once the response started (an MCP server's listing); a name already offered
        keeps its first tool."""
        if tool.wire_name not in self.by_wire_name:
            self.add(tool, where)

    def refit(self, old: Tool, new: Tool) -> None:
        """A gateway-run tool offered in the terms of the route its request went to (computer use: the function
        the route's model was trained with, Claude's own tool), once the response starts. A new name another
        tool of the request already has leaves the tool as it was."""
        if new.wire_name != old.wire_name and new.wire_name in self.by_wire_name:
            return
        self.offered = [new if t is old else t for t in self.offered]
        if self.by_wire_name.get(old.wire_name) is old:
            del self.by_wire_name[old.wire_name]
        self.by_wire_name[new.wire_name] = new
        if self.forced is old:
            self.forced = new

    def withdraw_gateway(self) -> None:
        """No more gateway-run tools (`max_tool_calls` is spent): the model must answer, or call a client tool."""
        self.offered = [t for t in self.offered if t.runner is None]

    def unforce(self) -> None:
        """A forced tool choice applies to the first step of a response, not to every round after it."""
        self.mode, self.forced = "auto", None


def found_tools(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools a client's tool search returned (`tool_search_output` items), to be offered from now on."""
    return [tool for item in items if item["type"] == "tool_search_output" for tool in item["tools"]]


def normalize_tools(tools: list[dict[str, Any]] | None, tool_choice: Any, *, hosted_policy: str = "drop",
                    found: Sequence[dict[str, Any]] = (), toolbox: Toolbox = EMPTY) -> ToolSet:
    """`found`: the tools carried by `tool_search_output` items of the input (a client's search results);
    `toolbox`: the gateway-run tools this deployment can run."""
    out = ToolSet()
    if not tools and not found:  # most requests: no tools (what the loops below would conclude)
        _choice(out, tool_choice)
        return out
    for i, spec in enumerate(tools or ()):
        _add_spec(out, spec, f"tools[{i}]", hosted_policy, toolbox, echo=True)
    searching = any(t.kind == "tool_search" for t in out.offered)
    for i, spec in enumerate(found):
        _add_spec(out, spec, f"input.tool_search_output.tools[{i}]", hosted_policy, toolbox, echo=False, found=True)
    if searching:
        out.offered = [t for t in out.offered if not t.deferred]
    for kit in {d.kit for d in out.gateway}:
        if kit.check is not None:
            kit.check([d for d in out.gateway if d.kit is kit])
    _choice(out, tool_choice)
    return out


def _add_spec(out: ToolSet, spec: dict[str, Any], where: str, hosted_policy: str, toolbox: Toolbox, *,
              echo: bool, found: bool = False) -> None:
    if not isinstance(spec, dict):
        raise APIError(400, f"Invalid type for '{where}': expected an object.", param=where, code="invalid_type")
    kind = spec.get("type")
    if kind is not None and not isinstance(kind, str):
        raise APIError(400, f"Invalid type for '{where}.type': expected a string.", param=f"{where}.type",
                       code="invalid_type")
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
    elif isinstance(kind, str) and kind in toolbox.refused:
        raise APIError(400, f"The hosted tool '{kind}' cannot run on this gateway: {toolbox.refused[kind]}",
                       param=f"{where}.type", code="unsupported_parameter")
    elif isinstance(kind, str) and kind in toolbox.available:
        declared = toolbox.available[kind].parse(spec, where)
        out.gateway.append(declared)
        for tool in declared.functions:
            out.add(tool, where)
        if echo:
            out.echo.append(declared.kit.echo(declared))
    elif isinstance(kind, str) and (kind in HOSTED or kind in toolbox.missing):
        why = toolbox.missing.get(kind, NO_KIT)
        if hosted_policy == "reject":
            raise unsupported(f"{where}.type", f"The hosted tool '{kind}' ({why})")
        metrics.hosted_tools_dropped.labels(kind).inc()
        if kind not in _warned:  # once per process: agents send the same tools on every turn
            _warned.add(kind)
            log.warning("hosted tool %r is dropped from requests, not offered to the model: %s "
                        "(docs/request-fields.md; --hosted-tools reject refuses such requests instead)", kind, why)
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


def _declared(out: ToolSet, kind: Any) -> Declared | None:
    """The request's gateway-run tool declared with this `type` (the first, if several)."""
    for declared in out.gateway:
        if kind in declared.kit.types and kind != "mcp":
            return declared
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
        if choice == "required" and not out.offered and not out.gateway:
            raise invalid("Tool choice 'required' must be specified with 'tools' parameter.", "tool_choice", None)
        out.mode = cast(ToolMode, choice)  # one of the three, checked above
        return
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(kind, str):
        raise APIError(400, "Invalid type for 'tool_choice.type': expected a string.", param="tool_choice.type",
                       code="invalid_type")
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
            hosted = _declared(out, ref.get("type")) if isinstance(ref, dict) else None
            if hosted is not None:  # {"type": "file_search"}: the functions of that gateway-run tool
                allowed += [t for t in hosted.functions if t not in allowed]
                continue
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
    hosted = _declared(out, kind)
    if hosted is not None and hosted.functions:  # {"type": "web_search"}: the model must use that tool
        out.mode, out.forced = "required", hosted.functions[0]
        return
    if kind in HOSTED:
        raise invalid(f"Tool choice '{kind}' not found in 'tools' parameter.", "tool_choice", None)
    if kind == "mcp":  # {"type": "mcp", "server_label", "name"?}: MCP tools are listed later; keep it soft
        out.mode = "required" if choice.get("name") else "auto"
        return
    raise invalid(f"Invalid value: '{kind}'. Supported values are: 'function', 'custom' and 'allowed_tools'.",
                  "tool_choice.type")
