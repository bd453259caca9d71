"""Retention: expired responses go, with their items and event logs; event logs also go after their own,
shorter, retention. Run by every server process at startup and then hourly (app.py), and by
`responses-gateway db purge`.

A backlog is deleted in bounded batches, each its own short transaction: one statement over millions of
rows outlived --db-timeout on PostgreSQL every time (rolled back, so the backlog never shrank) and, on
SQLite, held the one write lock — every save — for as long as it ran. The batch size adapts so that each
transaction takes about the engine's `batch_seconds` (rows differ in size from one deployment to the next):
on SQLite a save waits for one short batch at most, on PostgreSQL a batch stays far inside --db-timeout, one that fails loses nothing already
purged, and progress shows in the logs and in `responses_gateway_store_purged_total` as it goes.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from .. import metrics
from .base import Queries

log = logging.getLogger("responses_gateway.store")

BATCH = 500  # responses (with their items and event logs) in the first transaction
MIN_BATCH, MAX_BATCH = 50, 10_000  # and the bounds it adapts within (statements take up to MAX_BATCH + 1 values)
PROGRESS_EVERY = 5.0  # seconds between progress lines of a long purge


class Retention(Protocol):
    async def purge(self, event_retention: float | None = None) -> int:
        """Delete expired rows (and background event logs older than `event_retention` s), in batches;
        returns how many responses went."""
        ...


class RetentionQueries(Queries):
    async def purge(self, event_retention: float | None = None, batch: int = BATCH) -> int:
        """Expired responses go with their items and events; event logs also go after `event_retention` s."""
        now = int(time.time())
        if event_retention is not None:
            await self._purge_events(now - int(event_retention), batch)
        started = last_said = time.monotonic()
        total = 0
        while True:
            rows = await self.engine.fetchall(
                "SELECT id FROM responses WHERE expires_at <= ? ORDER BY expires_at LIMIT ?", (now, batch))
            if not rows:
                break
            ids = [row[0] for row in rows]
            marks = ", ".join("?" for _ in ids)
            began = time.monotonic()
            one_each = [(rid,) for rid in ids]  # one equality lookup per id: an index scan whatever the statistics
            gone = await self.engine.write([
                ("DELETE FROM response_events WHERE response_id = ?", one_each),
                ("DELETE FROM items WHERE response_id = ?", one_each),
                (f"DELETE FROM responses WHERE id IN ({marks}) AND expires_at <= ?", [(*ids, now)]),  # unique: counted
            ], count_last=True)
            total += gone
            metrics.store_purged.inc(gone)
            if len(rows) < batch:
                break
            batch = resize(batch, time.monotonic() - began, self.engine.batch_seconds)
            if time.monotonic() - last_said >= PROGRESS_EVERY:
                last_said = time.monotonic()
                log.info("retention: %d expired responses removed so far (%.0f/s)", total,
                         total / (last_said - started))
        if total:
            log.info("retention removed %d expired responses in %.1f s", total, time.monotonic() - started)
        return total

    async def _purge_events(self, before: int, batch: int) -> None:
        """Event logs written at or before `before` (epoch s), a batch of runs at a time."""
        while True:
            rows = await self.engine.fetchall(
                "SELECT response_id, seq FROM response_events WHERE created_at <= ? ORDER BY created_at LIMIT ?",
                (before, batch))
            if not rows:
                return
            began = time.monotonic()
            await self.engine.write([("DELETE FROM response_events WHERE response_id = ? AND seq = ?",
                                      [(row[0], row[1]) for row in rows])])
            if len(rows) < batch:
                return
            batch = resize(batch, time.monotonic() - began, self.engine.batch_seconds)


def resize(batch: int, took: float, target: float) -> int:
    """The next batch's size: twice as large when this one took under half the target, half when over it."""
    if took < target / 2:
        return min(MAX_BATCH, batch * 2)
    if took > target:
        return max(MIN_BATCH, batch // 2)
    return batch
