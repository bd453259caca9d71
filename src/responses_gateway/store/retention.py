"""Retention: expired responses go, with their items and event logs; event logs also go after their own,
shorter, retention. Run every hour by the server (app.py) and by `responses-gateway db purge`."""

from __future__ import annotations

import time
from typing import Protocol

from .base import Queries


class Retention(Protocol):
    async def purge(self, event_retention: float | None = None) -> int:
        """Delete expired rows (and background event logs older than `event_retention` s); returns how many
        responses went."""
        ...


class RetentionQueries(Queries):
    async def purge(self, event_retention: float | None = None) -> int:
        """Expired responses go with their items and events; event logs also go after `event_retention` s."""
        now = int(time.time())
        if event_retention is not None:
            await self.engine.write([("DELETE FROM response_events WHERE created_at <= ?",
                                      [(now - int(event_retention),)])])
        return await self.engine.write([
            ("DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)",
             [(now,)]),
            ("DELETE FROM items WHERE response_id IN (SELECT id FROM responses WHERE expires_at <= ?)", [(now,)]),
            ("DELETE FROM responses WHERE expires_at <= ?", [(now,)]),
        ], count_last=True)
