"""The gateway-run tools this build knows (`all_kits`), their settings groups, their services in one process
(`serve_all`), and the `Toolbox` the request boundary is given.

A new tool is a package (tools/frame.py says what it holds) added to `BUILTIN` — or, from another package,
an entry point in the group `responses_gateway.tools` naming a `Kit` (loaded once, at the first use of the
registry), or `register(kit)` for an application that embeds the gateway (before `create_app`). A kit
whose service is `Unavailable` (no search provider, no sandbox) does not run: a request declaring it gets
what `--hosted-tools` says (dropped with a log line once per type and a metric, or a 400) — or a 400 saying
why, when the deployment asked for the tool and it cannot run here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from .. import settings as declare
from ..config import Settings
from ..protocol.tools import Toolbox
from ..store import Store
from .code_interpreter.kit import KIT as CODE_INTERPRETER
from .computer.kit import KIT as COMPUTER
from .file_search.kit import KIT as FILE_SEARCH
from .frame import Kit, Start, ToolServices, Unavailable
from .image_generation.kit import KIT as IMAGE_GENERATION
from .mcp.kit import KIT as MCP
from .web_search.kit import KIT as WEB_SEARCH

log = logging.getLogger("responses_gateway.tools")

ENTRY_POINTS = "responses_gateway.tools"

AnyKit = Kit[Any, Any]

# In order: annotators of earlier kits see the text first (one that removes citation markers goes first).
BUILTIN: tuple[AnyKit, ...] = (
    FILE_SEARCH,
    WEB_SEARCH,
    CODE_INTERPRETER,
    IMAGE_GENERATION,
    COMPUTER,
    MCP,
)


_registered: list[AnyKit] = []


def register(kit: AnyKit) -> None:
    """Add a kit to the registry (an embedding application's own tool); a kit of the same name is replaced."""
    _registered[:] = [k for k in _registered if k.name != kit.name] + [kit]
    _forget()


def unregister(name: str) -> None:
    _registered[:] = [k for k in _registered if k.name != name]
    _forget()


def _forget() -> None:
    for cached in (all_kits, _by_item):
        cached.cache_clear()


@functools.cache
def all_kits() -> tuple[AnyKit, ...]:
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
def _by_item() -> dict[str, AnyKit]:
    return {kind: kit for kit in all_kits() for kind in kit.item_types}


def kit_for_item(item_type: str) -> AnyKit | None:
    """The kit whose items are of this type (an `mcp_call`, a `file_search_call`, ...)."""
    return _by_item().get(item_type)


def order_of(kit: AnyKit) -> int:
    """A kit's place in the registry: the order in which annotators see the answer's text."""
    kits = all_kits()
    return kits.index(kit) if kit in kits else len(kits)


# -- settings -------------------------------------------------------------------------------------------

def setting_groups() -> tuple[type, ...]:
    """Every settings group: the core settings first, then each kit's, in the registry's order."""
    return (Settings, *(kit.settings for kit in all_kits() if kit.settings is not None))


def tool_groups(values: Mapping[str, Any], config: str | None = None) -> tuple[Any, ...]:
    """Each kit's settings group from `values` (by setting name: flags and variables already merged), under
    its `[<kit name>]` table of the `--config` file when it has one (the flags and variables win), checked."""
    groups = []
    for kit in all_kits():
        if kit.settings is None:
            continue
        mine = dict(values)
        if config:
            table = declare.load_table(config, kit.name)
            if table is not None and _plain_table(kit.settings):
                table_values = declare.from_table(kit.settings, table, f"{config}: [{kit.name}]", kit.name)
                mine = {**table_values, **mine}
        group = declare.build(kit.settings, mine)
        check_group(group)
        groups.append(group)
    return tuple(groups)


def _plain_table(group: type) -> bool:
    """A group whose `[<kit>]` table is its settings one to one (a group with a table of its own shape, such
    as web_search's providers, reads it in its own service)."""
    return not getattr(group, "OWN_TABLE", False)


def check_group(group: Any) -> None:
    """A group's declared checks, then its own rules (`validate`, when it has one)."""
    declare.check(group)
    validate = getattr(group, "validate", None)
    if validate is not None:
        validate()


def with_groups(settings: Settings, groups: Iterable[Any]) -> Settings:
    """`settings` carrying these tool groups (the given ones replace groups of the same type)."""
    from dataclasses import replace

    given = list(groups)
    kinds = {type(g) for g in given}
    return replace(settings, groups=tuple(g for g in settings.groups if type(g) not in kinds) + tuple(given))


# -- services -------------------------------------------------------------------------------------------

async def serve_all(settings: Settings, store: Store | None, stack: contextlib.AsyncExitStack) -> ToolServices:
    """Start every kit's service, in the registry's order; each is closed by `stack` (in the reverse order).
    A service that cannot start says why (`Unavailable`); an exception stops the gateway (a deployment that
    asked for something impossible, e.g. `--code-interpreter bubblewrap` without bubblewrap)."""
    running: dict[str, Any] = {}
    unavailable: dict[str, Unavailable] = {}
    for kit in all_kits():
        if kit.serve is None:
            running[kit.name] = None
            continue
        group = settings.group(kit.settings) if kit.settings is not None else None
        made = await kit.serve(Start(settings, group, store))
        if isinstance(made, Unavailable):
            unavailable[kit.name] = made  # the start-up block (startup.summary) says why, and how to enable it
            continue
        stack.push_async_callback(made.aclose)
        running[kit.name] = made
    return ToolServices(running, unavailable)


def toolbox(tools: ToolServices) -> Toolbox:
    """What the request boundary is given: the kits that run here by declaration type, how to enable the
    others (or why they are refused), every kit by item type, and the include[] values they honour."""
    available: dict[str, AnyKit] = {}
    missing: dict[str, str] = {}
    refused: dict[str, str] = {}
    for kit in all_kits():
        why = tools.why(kit.name)
        for kind in kit.types:
            if why is None:
                available[kind] = kit
            elif why.refuse:
                refused[kind] = why.why
            else:
                missing[kind] = why.why
    includes = tuple(dict.fromkeys(value for kit in all_kits() for value in kit.includes))
    return Toolbox(available, missing, refused, dict(_by_item()), includes)


def everything() -> Toolbox:
    """Every kit available, none refused: items and declarations parsed as a gateway running all its tools
    would (tests, and tools that work on stored items outside a running gateway)."""
    return toolbox(ToolServices({kit.name: None for kit in all_kits()}))
