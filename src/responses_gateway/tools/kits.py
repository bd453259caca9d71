"""The gateway-run tools this build knows (`KITS`), and which of them a deployment can run (`Toolbox`).

A new tool is a kit (tools/frame.py) added to `BUILTIN` — or, from another package, an entry point in the group
`responses_gateway.tools` naming a `Kit` (loaded once, at the first use of the registry), or `register(kit)`
for an application that embeds the gateway (before `create_app`). A kit whose
deployment is not configured for it (no search provider, no sandbox) is unavailable: a request declaring it
gets what `--hosted-tools` says (dropped with a log line once per type and a metric, or a 400), exactly as a
hosted tool the gateway has no kit for.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from .code_interpreter.kit import KIT as CODE_INTERPRETER
from .file_search.kit import KIT as FILE_SEARCH
from .frame import Kit
from .mcp.kit import KIT as MCP
from .web_search.kit import KIT as WEB_SEARCH

if TYPE_CHECKING:
    from ..services import Services

log = logging.getLogger("responses_gateway.tools")

ENTRY_POINTS = "responses_gateway.tools"

# In order: annotators of earlier kits see the text first (one that removes citation markers goes first).
BUILTIN: tuple[Kit, ...] = (
    FILE_SEARCH,
    WEB_SEARCH,
    CODE_INTERPRETER,
    MCP,
)


_registered: list[Kit] = []


def register(kit: Kit) -> None:
    """Add a kit to the registry (an embedding application's own tool); a kit of the same name is replaced."""
    _registered[:] = [k for k in _registered if k.name != kit.name] + [kit]
    _forget()


def unregister(name: str) -> None:
    _registered[:] = [k for k in _registered if k.name != name]
    _forget()


def _forget() -> None:
    for cached in (all_kits, _by_item, _by_type):
        cached.cache_clear()


@functools.cache
def all_kits() -> tuple[Kit, ...]:
    mine = {kit.name for kit in _registered}
    found = [kit for kit in BUILTIN if kit.name not in mine] + list(_registered)
    for point in entry_points(group=ENTRY_POINTS):
        try:
            kit = point.load()
        except Exception:  # a broken plugin must not stop the gateway
            log.exception("the tool plugin %r could not be loaded", point.name)
            continue
        if isinstance(kit, Kit) and kit.name not in {k.name for k in found}:
            found.append(kit)
    return tuple(found)


@functools.cache
def _by_item() -> dict[str, Kit]:
    return {kind: kit for kit in all_kits() for kind in kit.item_types}


@functools.cache
def _by_type() -> dict[str, Kit]:
    return {kind: kit for kit in all_kits() for kind in kit.types}


def kit_for_item(item_type: str) -> Kit | None:
    """The kit whose items are of this type (an `mcp_call`, a `file_search_call`, ...)."""
    return _by_item().get(item_type)


def kit_for_type(declared_type: str) -> Kit | None:
    """The kit a tool declaration of this `type` names."""
    return _by_type().get(declared_type)


@dataclass(frozen=True)
class Toolbox:
    """The kits a deployment can run, by declaration type, and for the others how to enable them."""

    available: Mapping[str, Kit] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def for_services(cls, services: Services) -> Toolbox:
        available: dict[str, Kit] = {}
        missing: dict[str, str] = {}
        for kit in all_kits():
            why = kit.unavailable(services)
            for kind in kit.types:
                if why is None:
                    available[kind] = kit
                else:
                    missing[kind] = why
        return cls(available, missing)


DEFAULT = Toolbox({kind: MCP for kind in MCP.types})  # what runs with no deployment settings: MCP
