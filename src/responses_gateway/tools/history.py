"""Gateway-run items in a history: what upstreams see of them, and what a client is shown.

Adapters know nothing of gateway-run tools. Before any upstream sees a history, each gateway-run item becomes
what its kit's `lower` makes of it — a function call (named as the model was offered it) followed by its
output — or nothing (a tool listing, an approval still pending). Outputs wait until a run of calls ends, so
an upstream sees one assistant turn with its calls, then their results.

What is stored is every item in full; what a client is shown depends on `include[]` (a file search's
`results`, a code interpreter's `outputs`, ...): `shown_item` is the one place that decides, for the live
stream and for every read of a stored item alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .frame import NO_ROUTE, Lowering
from .kits import kit_for_item

if TYPE_CHECKING:
    from ..store import Store

# the calls the client runs itself: a response that makes one ends for the client to run it
CLIENT_CALLS = ("function_call", "custom_tool_call", "tool_search_call", "computer_call")

Item = dict[str, Any]


def lower_tools(items: list[Item], lowering: Lowering = NO_ROUTE) -> list[Item]:
    """Raw items → what upstreams see: gateway-run items as function calls and their outputs, for the route
    and settings of `lowering`."""
    if not any(kit_for_item(item["type"]) is not None for item in items):
        return items
    for kit in {kit for item in items if (kit := kit_for_item(item["type"])) is not None}:
        if kit.rewrite is not None:
            items = kit.rewrite(items, lowering)
    out: list[Item] = []
    results: list[Item] = []  # outputs wait until the run of calls ends: one assistant turn, then results
    for item in items:
        kit = kit_for_item(item["type"])
        if kit is None:
            if item["type"] not in CLIENT_CALLS:
                out += results
                results = []
            out.append(item)
            continue
        pair = kit.lower(item)
        if pair is not None:
            if pair[0] is not None:
                out.append(pair[0])
            if pair[1] is not None:
                results.append(pair[1])
    return out + results


def shown_item(item: Item, include: frozenset[str]) -> Item:
    """A stored item as a client sees it, given the request's `include[]`."""
    kit = kit_for_item(item.get("type", ""))
    return item if kit is None else kit.shown(item, include)


def shown_items(items: Iterable[Item], include: Iterable[str]) -> list[Item]:
    wanted = frozenset(include)
    return [shown_item(item, wanted) for item in items]


def stored_item(item: Item) -> Item:
    """An item as the store keeps it: its kit's `stored` (a large part kept elsewhere in the store)."""
    kit = kit_for_item(item.get("type", ""))
    return item if kit is None or kit.stored is None else kit.stored(item)


def keeps_apart(kits: Iterable[Any]) -> bool:
    """Whether any of these kits keeps part of its items apart when stored (`Kit.stored`)."""
    return any(kit.stored is not None for kit in kits)


async def restored(items: list[Item], store: Store | None, owner: str) -> list[Item]:
    """Stored items with what their kits keep apart put back (an image from the files store), in place, for a
    client's read: `GET /v1/responses/{id}`, input_items, a conversation's items."""
    if store is None:
        return items
    kits = {kit for item in items if (kit := kit_for_item(item.get("type", ""))) is not None}
    for kit in kits:
        if kit.restore is not None:
            await kit.restore(items, store, owner)
    return items


def is_gateway_item(item: Item) -> bool:
    return kit_for_item(item.get("type", "")) is not None
