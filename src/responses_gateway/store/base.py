"""What the gateway needs from a response store. The store knows rows, not HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Page:
    items: list[dict]
    has_more: bool


class Store(Protocol):
    async def save(self, response: dict, input_items: list[dict], owner: str) -> None:
        """Persist a finished response and the input items it was given (ids already assigned)."""
        ...

    async def get(self, response_id: str, owner: str) -> dict | None: ...

    async def delete(self, response_id: str, owner: str) -> bool: ...

    async def history(self, response_id: str, owner: str) -> list[dict] | None:
        """The chain's items, oldest first: each response's input then its output. None if not chainable."""
        ...

    async def items_by_id(self, ids: list[str], owner: str) -> dict[str, dict]:
        """Stored items (input or output) by item id, for `item_reference` inputs."""
        ...

    async def input_items(self, response_id: str, owner: str, *, after: str | None, before: str | None,
                          limit: int, order: str) -> Page | None: ...

    async def secret(self, name: str, new: str) -> str:
        """The value kept under `name`, after storing `new` if there was none: the first writer wins, so
        every replica sharing the store ends up with the same value. Never purged."""
        ...

    async def purge(self) -> int:
        """Delete expired rows; returns how many responses went."""
        ...

    async def close(self) -> None: ...
