"""A WebSocket connection's memory of its most recent response, so a continuation can send only new items.

Codex and other agents send `store: false` and then, on the same connection, `previous_response_id` plus only
the items that are new (possibly none at all). Such a parent exists nowhere but here: the connection keeps
the full history its last response saw and produced. Older ids fall back to the store (with the caller's
owner, so keys stay isolated); an id known to neither is `previous_response_not_found`. A failed turn
forgets the parent, so a client never continues from state the gateway did not finish.
"""

from __future__ import annotations

from typing import Any

from ..protocol.items import normalize_item
from ..protocol.tools import Toolbox
from ..state import previous_not_found, resolve
from ..store.responses import Responses


class LastResponse:
    __slots__ = ("store", "toolbox", "id", "history")

    def __init__(self, store: Responses | None, toolbox: Toolbox):
        self.store = store
        self.toolbox = toolbox
        self.id: str | None = None
        self.history: list[dict[str, Any]] = []  # everything a continuation inherits: the parent's input and output

    async def resolve(self, previous_response_id: str | None, items: list[dict[str, Any]],
                      owner: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`respond.start`'s resolver: the cached parent when it is the one asked for, else the store."""
        if previous_response_id is not None and previous_response_id == self.id:
            history, stored = await resolve(self.store, None, items, owner, self.toolbox)
            return self.history + history, stored
        if previous_response_id is not None and self.store is None:
            raise previous_not_found(previous_response_id)
        return await resolve(self.store, previous_response_id, items, owner, self.toolbox)

    def remember(self, response: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """`response` as stored (sealed reasoning included); `history`: the input it was generated from."""
        if response["status"] == "failed":
            self.forget()
            return
        self.id = response["id"]
        self.history = history + [normalize_item(item, "previous_response", self.toolbox) for item in response["output"]]

    def forget(self) -> None:
        self.id = None
        self.history = []
