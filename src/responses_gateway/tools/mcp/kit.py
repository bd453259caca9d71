"""The MCP kit: `{"type": "mcp", ...}` declarations, MCP items, and the runner that talks to the servers.

Everything here is pure: the MCP SDK is imported only by `start` (runner.py), for a request that declares a
server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import APIError, invalid
from ..frame import Context, Declared, Item, Kit, Runner
from .declaration import MCPServer
from .history import lower, mark_declined
from .service import MCP, serve
from .settings import MCPSettings

ITEM_FIELDS = {
    "mcp_list_tools": ("server_label", "tools", "error"),
    "mcp_call": ("server_label", "name", "arguments", "output", "error", "status", "approval_request_id"),
    "mcp_approval_request": ("server_label", "name", "arguments"),
}


def parse(spec: dict[str, Any], where: str) -> Declared:
    try:
        server = MCPServer.from_tool(spec)
    except ValueError as exc:
        raise invalid(f"Invalid '{where}': {exc}", where) from None
    return Declared(KIT, where, server)


def check(declared: Sequence[Declared]) -> None:
    labels: set[str] = set()
    for one in declared:
        label = one.config.label
        if label in labels:
            raise invalid(f"Invalid '{one.where}.server_label': duplicate server_label '{label}'.",
                          f"{one.where}.server_label")
        labels.add(label)


def echo(declared: Declared) -> dict[str, Any]:
    server: MCPServer = declared.config
    return server.public_tool()  # never the headers or authorization


def normalize(item: dict[str, Any], where: str) -> Item:
    kind = item["type"]
    if kind == "mcp_approval_response":
        if not isinstance(item.get("approve"), bool):
            raise APIError(400, f"Missing required parameter: '{where}.approve'.", param=f"{where}.approve",
                           code="missing_required_parameter")
        request_id = item.get("approval_request_id")
        if not isinstance(request_id, str):
            raise APIError(400, f"Missing required parameter: '{where}.approval_request_id'.",
                           param=f"{where}.approval_request_id", code="missing_required_parameter")
        out = {"type": kind, "approval_request_id": request_id, "approve": item["approve"],
               "reason": item.get("reason")}
    else:
        if not isinstance(item.get("server_label"), str):
            raise APIError(400, f"Missing required parameter: '{where}.server_label'.",
                           param=f"{where}.server_label", code="missing_required_parameter")
        out = {k: item[k] for k in ITEM_FIELDS[kind] if k in item}
        out["type"] = kind
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    return out


def start(declared: Sequence[Declared], context: Context[MCP]) -> Runner:
    from .runner import MCPRunner  # the MCP SDK: only for requests that declare a server

    return MCPRunner([d.config for d in declared], context)


KIT: Kit[MCPSettings, MCP] = Kit(
    name="mcp",
    types=("mcp",),
    item_types=("mcp_list_tools", "mcp_call", "mcp_approval_request", "mcp_approval_response"),
    parse=parse,
    echo=echo,
    normalize=normalize,
    lower=lower,
    start=start,
    check=check,
    rewrite=mark_declined,
    settings=MCPSettings,
    serve=serve,
)
