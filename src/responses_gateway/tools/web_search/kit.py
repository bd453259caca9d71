"""The web_search kit: `{"type": "web_search"}` declarations (and their aliases), `web_search_call` items, and the
runner that searches and reads pages.

Everything here is pure; `start` imports the runner (providers, fetcher, HTML extraction). What a client is
shown of an item depends on `include[]`: `action.sources` with `web_search_call.action.sources` (as OpenAI),
and the results the model saw (`results`, or `error` for a failed call) with `web_search_call.results`. The store
keeps the item whole, so later turns render the call to the model exactly as it saw it live.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import APIError, invalid
from ..frame import Context, Declared, Item, Kit, Runner, Start, Unavailable
from . import options, render
from .actions import ARGUMENTS, MAX_ARGUMENTS, NAME, arguments_of, function
from .settings import WebSearchSettings

if TYPE_CHECKING:
    from .service import WebSearch

SOURCES = "web_search_call.action.sources"
RESULTS = "web_search_call.results"
PRIVATE = ("results", "error")  # shown with include web_search_call.results only
STATUSES = ("in_progress", "searching", "completed", "failed", "incomplete")
ACTIONS = ("search", "open_page", "find_in_page")
HOW = ("no web search provider is configured: start the gateway with e.g. "
       "--web-search searxng=http://127.0.0.1:8888 (docs/web-search.md)")


def parse(spec: dict[str, Any], where: str) -> Declared:
    return Declared(KIT, where, options.parse(spec, where), (function(),))


def echo(declared: Declared) -> dict[str, Any]:
    opts: options.Options = declared.config
    return opts.echo()


def normalize(item: dict[str, Any], where: str) -> Item:
    """A `web_search_call` a client sends back (Codex replays them with `store: false`)."""
    action = item.get("action")
    if not isinstance(action, dict):
        raise APIError(400, f"Missing required parameter: '{where}.action'.", param=f"{where}.action",
                       code="missing_required_parameter")
    if action.get("type") not in ACTIONS:
        raise invalid(f"Invalid value: '{action.get('type')}'. Supported values are: "
                      + ", ".join(f"'{a}'" for a in ACTIONS) + ".", f"{where}.action.type")
    status = item.get("status") or "completed"
    if status not in STATUSES:
        raise invalid(f"Invalid value: '{status}'. Supported values are: "
                      + ", ".join(f"'{s}'" for s in STATUSES) + ".", f"{where}.status")
    out: dict[str, Any] = {"type": "web_search_call", "status": status, "action": action}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    for key in PRIVATE:
        if key in item:
            out[key] = item[key]
    if isinstance(item.get(ARGUMENTS), str):  # a stored failed call's own words (the chain is read back here)
        out[ARGUMENTS] = item[ARGUMENTS][:MAX_ARGUMENTS]
    return out


def lower(item: Item) -> tuple[Item, Item]:
    """An earlier call as upstreams see it: the `web_search` function call and what the model was shown."""
    call_id = item.get("id") or "ws"
    call = {"type": "function_call", "call_id": call_id, "name": NAME,
            "arguments": arguments_of(item.get("action") or {}, item.get(ARGUMENTS))}
    return call, {"type": "function_call_output", "call_id": call_id, "output": render.output(item)}


def shown(item: Item, include: frozenset[str]) -> Item:
    if ARGUMENTS in item:  # the model's own words of a failed call: for later turns, not for clients
        item = {k: v for k, v in item.items() if k != ARGUMENTS}
    sources = SOURCES in include
    results = RESULTS in include
    if sources and results:
        return item
    out = item if results else {k: v for k, v in item.items() if k not in PRIVATE}
    action = out.get("action")
    if not sources and isinstance(action, dict) and "sources" in action:
        out = {**out, "action": {k: v for k, v in action.items() if k != "sources"}}
    return out


async def serve(start: Start[WebSearchSettings]) -> WebSearch | Unavailable:
    """The process's providers when the deployment configures any (flags, or the `[web_search]` table)."""
    from .config import from_settings
    from .service import serve as make

    config = from_settings(start.settings, start.group)
    return Unavailable(HOW) if config is None else make(config)


def start(declared: Sequence[Declared], context: Context[WebSearch]) -> Runner:
    from .runner import WebSearchRunner  # providers, fetcher, extraction: only for requests that declare it

    return WebSearchRunner(declared[0].config, context)


KIT: Kit[WebSearchSettings, WebSearch] = Kit(
    name="web_search",
    types=options.TYPES,
    item_types=("web_search_call",),
    parse=parse,
    echo=echo,
    normalize=normalize,
    lower=lower,
    start=start,
    shown=shown,
    includes=(RESULTS, SOURCES),
    settings=WebSearchSettings,
    serve=serve,
)
