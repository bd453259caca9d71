"""Background responses (background.py): the row of a response still running, the lease of the replica
running it, its cancel flag, and its event log.

A background response's `responses` row exists from the moment it is queued (status queued, then
in_progress), held by one replica (`worker`) until `lease_until` (ms epoch), which that replica keeps
renewing. A replica that dies stops renewing: another one finds the lease expired and ends the response as
failed (`abandon`). The event log (`response_events`) keeps the stream's SSE frames for replay, a row per
flush (a run of frames, seq .. last_seq), not one per event.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import orjson

from .base import Queries
from .schema import ACTIVE


class Jobs(Protocol):
    """The rows and leases of background responses."""

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


class EventLogs(Protocol):
    """The logged SSE frames of background responses, for replay (`GET /v1/responses/{id}?stream=true`)."""

    async def append_events(self, rows: list[tuple[str, int, int, str]]) -> None:
        """Append (response id, first seq, last seq, SSE frames) runs to event logs; duplicates are ignored."""
        ...

    async def events_after(self, response_id: str, after: int, limit: int = 100) -> list[tuple[int, int, str]]:
        """(first seq, last seq, SSE frames) of the logged runs that reach past `after`, in order."""
        ...

    async def last_event(self, response_id: str) -> int:
        """The highest logged sequence number, -1 if none."""
        ...


class JobQueries(Queries):
    async def queue(self, response: dict[str, Any], owner: str, worker: str, lease_until: int) -> None:
        """A background response accepted by `worker`: its row exists (status queued) before it runs."""
        created = int(response.get("created_at") or time.time())
        await self.engine.write([(
            "INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, deleted, body, status, "
            "worker, lease_until) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            [(response["id"], owner, response.get("previous_response_id"), created, created + self.retention,
              orjson.dumps(response).decode(), response["status"], worker, lease_until)])])

    async def progress(self, response: dict[str, Any]) -> None:
        """The running state (status in_progress) of a background response, as GET shows it."""
        await self.engine.execute_count(
            f"UPDATE responses SET body = ?, status = ? WHERE id = ? AND status IN {ACTIVE}",
            (orjson.dumps(response).decode(), response["status"], response["id"]))

    async def renew(self, worker: str, lease_until: int) -> dict[str, bool]:
        """Extend the leases `worker` holds; returns its still-active responses → cancel requested."""
        await self.engine.execute_count(
            f"UPDATE responses SET lease_until = ? WHERE worker = ? AND status IN {ACTIVE}", (lease_until, worker))
        rows = await self.engine.fetchall(
            f"SELECT id, cancel_requested FROM responses WHERE worker = ? AND status IN {ACTIVE}", (worker,))
        return {row[0]: bool(row[1]) for row in rows}

    async def request_cancel(self, response_id: str, owner: str) -> bool:
        return await self.engine.execute_count(
            f"UPDATE responses SET cancel_requested = 1 WHERE id = ? AND owner = ? AND status IN {ACTIVE}",
            (response_id, owner)) > 0

    async def expired(self, now: int, response_id: str | None = None) -> list[tuple[str, dict[str, Any], bool]]:
        """Active background responses whose lease ran out: (id, body, cancel requested)."""
        sql = f"SELECT id, body, cancel_requested FROM responses WHERE status IN {ACTIVE} AND lease_until < ?"
        args: tuple[Any, ...] = (now,)
        if response_id is not None:
            sql += " AND id = ?"
            args = (now, response_id)
        return [(row[0], orjson.loads(row[1]), bool(row[2])) for row in await self.engine.fetchall(sql, args)]

    async def abandon(self, response: dict[str, Any], now: int) -> bool:
        """Store the final state of a response whose replica died; False if another replica was first."""
        return await self.engine.execute_count(
            "UPDATE responses SET body = ?, status = ?, worker = NULL, lease_until = NULL "
            f"WHERE id = ? AND status IN {ACTIVE} AND lease_until < ?",
            (orjson.dumps(response).decode(), response["status"], response["id"], now)) > 0


class EventLogQueries(Queries):
    async def append_events(self, rows: list[tuple[str, int, int, str]]) -> None:
        """(response id, first sequence number, last sequence number, their SSE frames) rows of event logs."""
        now = int(time.time())
        await self.engine.write([(
            "INSERT INTO response_events (response_id, seq, last_seq, created_at, frames) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING", [(rid, first, last, now, frames) for rid, first, last, frames in rows])])

    async def events_after(self, response_id: str, after: int, limit: int = 100) -> list[tuple[int, int, str]]:
        rows = await self.engine.fetchall(
            "SELECT seq, last_seq, frames FROM response_events WHERE response_id = ? AND last_seq > ? "
            "ORDER BY seq LIMIT ?", (response_id, after, limit))
        return [(row[0], row[1], row[2]) for row in rows]

    async def last_event(self, response_id: str) -> int:
        row = await self.engine.fetchone("SELECT max(last_seq) FROM response_events WHERE response_id = ?",
                                         (response_id,))
        return -1 if row is None or row[0] is None else row[0]
