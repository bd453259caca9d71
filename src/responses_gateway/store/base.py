"""What the gateway needs from a response store. The store knows rows, not HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Page:
    items: list[dict[str, Any]]
    has_more: bool


class Store(Protocol):
    label: str  # where the rows live, for logs (never a password)

    async def open(self) -> None: ...

    async def upgrade(self) -> int:
        """Apply pending schema migrations; returns the schema version."""
        ...

    async def save(self, response: dict[str, Any], input_items: list[dict[str, Any]], owner: str) -> None:
        """Persist a finished response and the input items it was given (ids already assigned)."""
        ...

    async def get(self, response_id: str, owner: str) -> dict[str, Any] | None: ...

    async def delete(self, response_id: str, owner: str) -> bool: ...

    async def history(self, response_id: str, owner: str) -> list[dict[str, Any]] | None:
        """The chain's items, oldest first: each response's input then its output. None if not chainable."""
        ...

    async def items_by_id(self, ids: list[str], owner: str) -> dict[str, dict[str, Any]]:
        """Stored items (input or output) by item id, for `item_reference` inputs."""
        ...

    async def input_items(self, response_id: str, owner: str, *, after: str | None, before: str | None,
                          limit: int, order: str) -> Page | None: ...

    async def secret(self, name: str, new: str) -> str:
        """The value kept under `name`, after storing `new` if there was none: the first writer wins, so
        every replica sharing the store ends up with the same value. Never purged."""
        ...

    async def create_conversation(self, conversation: dict[str, Any], items: list[dict[str, Any]],
                                  owner: str) -> None: ...

    async def get_conversation(self, conversation_id: str, owner: str) -> dict[str, Any] | None: ...

    async def update_conversation(self, conversation_id: str, owner: str, metadata: dict[str, Any]) -> bool: ...

    async def delete_conversation(self, conversation_id: str, owner: str) -> bool: ...

    async def append_conversation(self, conversation_id: str, owner: str, items: list[dict[str, Any]]) -> None:
        """Append after the conversation's last item; concurrent appends keep each one's items together."""
        ...

    async def conversation_history(self, conversation_id: str, owner: str) -> list[dict[str, Any]] | None: ...

    async def conversation_items(self, conversation_id: str, owner: str, *, after: str | None, limit: int,
                                 order: str) -> Page | None: ...

    async def conversation_item(self, conversation_id: str, item_id: str, owner: str) -> dict[str, Any] | None: ...

    async def delete_conversation_item(self, conversation_id: str, item_id: str, owner: str) -> bool: ...

    async def reown(self, owners: dict[str, str]) -> None:
        """Give every row owned by a key of `owners` to its value (old owner id → new)."""
        ...

    async def ping(self) -> None:
        """One trivial query: raises if the database cannot answer (`/health` bounds it with a deadline)."""
        ...

    async def purge(self, event_retention: float | None = None) -> int:
        """Delete expired rows (and background event logs older than `event_retention` s); returns how many
        responses went."""
        ...

    async def close(self) -> None:
        """Release the connections; the last call."""
        ...

    # -- background responses (background.py): the row, the lease of the replica running it, the event log --

    async def queue(self, response: dict[str, Any], owner: str, worker: str, lease_until: int) -> None:
        """Insert a background response (status queued) held by `worker` until `lease_until` (ms epoch)."""
        ...

    async def progress(self, response: dict[str, Any]) -> None:
        """Replace the body of a still-active background response (e.g. status in_progress)."""
        ...

    async def renew(self, worker: str, lease_until: int) -> dict[str, bool]:
        """Extend `worker`'s leases; its still-active response ids → whether a cancel was requested."""
        ...

    async def request_cancel(self, response_id: str, owner: str) -> bool:
        """Flag an active background response for cancelling; False if it is not active."""
        ...

    async def expired(self, now: int, response_id: str | None = None) -> list[tuple[str, dict[str, Any], bool]]:
        """Active responses whose lease ended before `now`: (id, body, cancel requested)."""
        ...

    async def abandon(self, response: dict[str, Any], now: int) -> bool:
        """Store the final body of an expired response; False if it was not (or no longer) expired."""
        ...

    async def append_events(self, rows: list[tuple[str, int, int, str]]) -> None:
        """Append (response id, first seq, last seq, SSE frames) runs to event logs; duplicates are ignored."""
        ...

    async def events_after(self, response_id: str, after: int, limit: int = 100) -> list[tuple[int, int, str]]:
        """(first seq, last seq, SSE frames) of the logged runs that reach past `after`, in order."""
        ...

    async def last_event(self, response_id: str) -> int:
        """The highest logged sequence number, -1 if none."""
        ...
