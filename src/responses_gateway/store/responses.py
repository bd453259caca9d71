"""Stored responses: the final object, the items it was given and produced, and chains of them.

A response is one `responses` row (the final object as JSON) and its `items` rows (input items, then output
items, in order). A chain is resolved with one recursive query over `previous_response_id`. Deleting a
response hides it (not retrievable, not chainable, no input_items); its items stay readable to responses
chained after it until retention removes them, so deleting one turn never breaks a later turn's history.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol

import orjson

from .. import offload
from .base import Page, Queries, Row
from .conversations import append_statements
from .schema import ACTIVE, INPUT, OUTPUT


class Responses(Protocol):
    """What the request path needs to keep responses and resolve history from them."""

    async def save(self, response: dict[str, Any], input_items: list[dict[str, Any]], owner: str,
                   conversation: str | None = None) -> None:
        """Persist a finished response and the input items it was given (ids already assigned); with
        `conversation`, append those items and the response's output to it in the same transaction, so that
        the response is kept if and only if its conversation has its items."""
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


# The whole chain in one statement, visibility of the response asked for included: a row per item, oldest
# response first; a visible response without items still gives one row (body NULL), none means not found.
CHAIN = f"""
WITH RECURSIVE chain(id, prev, depth) AS (
    SELECT id, previous_response_id, 0 FROM responses
     WHERE id = ? AND owner = ? AND deleted = 0 AND expires_at > ?
       AND (status IS NULL OR status NOT IN {ACTIVE})  -- a background response: once ended
    UNION ALL
    SELECT r.id, r.previous_response_id, c.depth + 1 FROM responses r JOIN chain c ON r.id = c.prev
)
SELECT i.body FROM chain c LEFT JOIN items i ON i.response_id = c.id
ORDER BY c.depth DESC, i.part, i.position
"""


def item_rows(rid: str, owner: str, inputs: list[dict[str, Any]],
              outputs: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = [(rid, INPUT, i, item.get("id", ""), owner, orjson.dumps(item).decode()) for i, item in enumerate(inputs)]
    rows += [(rid, OUTPUT, i, item.get("id", ""), owner, orjson.dumps(item).decode())
             for i, item in enumerate(outputs)]
    return rows


class ResponseQueries(Queries):
    async def save(self, response: dict[str, Any], input_items: list[dict[str, Any]], owner: str,
                   conversation: str | None = None) -> None:
        created = int(response.get("created_at") or time.time())
        rid = response["id"]
        output = response.get("output") or []
        rows = await offload.run(item_rows, rid, owner, input_items, output)
        appended = append_statements(conversation, owner, input_items + output) if conversation else []
        await self.engine.write([
            # A background response's row exists since it was queued: the final state replaces it, unless
            # another replica already declared it failed (its lease had expired).
            ("INSERT INTO responses (id, owner, previous_response_id, created_at, expires_at, deleted, body, status) "
             "VALUES (?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body, "
             f"status = excluded.status, worker = NULL, lease_until = NULL WHERE responses.status IN {ACTIVE}",
             [(rid, owner, response.get("previous_response_id"), created, created + self.retention,
               orjson.dumps(response).decode(), response.get("status"))]),
            ("INSERT INTO items (response_id, part, position, id, owner, body) VALUES (?, ?, ?, ?, ?, ?)", rows),
            *appended,
        ])

    async def _head(self, response_id: str, owner: str) -> Row | None:
        return await self.engine.fetchone(
            "SELECT body FROM responses WHERE id = ? AND owner = ? AND deleted = 0 AND expires_at > ?",
            (response_id, owner, int(time.time())))

    async def get(self, response_id: str, owner: str) -> dict[str, Any] | None:
        row = await self._head(response_id, owner)
        return orjson.loads(row[0]) if row else None

    async def delete(self, response_id: str, owner: str) -> bool:
        return await self.engine.execute_count(
            "UPDATE responses SET deleted = 1 WHERE id = ? AND owner = ? AND deleted = 0 AND expires_at > ?",
            (response_id, owner, int(time.time()))) > 0

    async def history(self, response_id: str, owner: str) -> list[dict[str, Any]] | None:
        """One statement whatever the depth of the chain (a recursive query over previous_response_id)."""
        rows = await self.engine.fetchall(CHAIN, (response_id, owner, int(time.time())))
        if not rows:
            return None
        return [orjson.loads(r[0]) for r in rows if r[0] is not None]

    async def items_by_id(self, ids: list[str], owner: str) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        rows = await self.engine.fetchall(
            f"SELECT i.id, i.body FROM items i JOIN responses r ON r.id = i.response_id "
            f"WHERE i.id IN ({marks}) AND i.owner = ? AND r.deleted = 0 AND r.expires_at > ? ORDER BY r.created_at",
            (*ids, owner, int(time.time())))
        return {row[0]: orjson.loads(row[1]) for row in rows}  # the latest copy wins

    async def input_items(self, response_id: str, owner: str, *, after: str | None, before: str | None,
                          limit: int, order: str) -> Page | None:
        if await self._head(response_id, owner) is None:
            return None
        clauses, args = ["response_id = ?", "part = 0"], [response_id]
        for cursor, op in ((after, ">" if order == "asc" else "<"), (before, "<" if order == "asc" else ">")):
            if cursor is None:
                continue
            row = await self.engine.fetchone(
                "SELECT position FROM items WHERE response_id = ? AND part = 0 AND id = ? ORDER BY position",
                (response_id, cursor))
            if row is None:
                return Page([], False)
            clauses.append(f"position {op} ?")
            args.append(row[0])
        # With only a `before` cursor the page is the one just before it: walk toward the cursor, then flip.
        backwards = before is not None and after is None
        ascending = (order == "asc") != backwards
        rows = await self.engine.fetchall(
            f"SELECT body FROM items WHERE {' AND '.join(clauses)} ORDER BY position "
            f"{'ASC' if ascending else 'DESC'} LIMIT ?",
            (*args, limit + 1))
        items = [orjson.loads(r[0]) for r in rows[:limit]]
        if backwards:
            items.reverse()
        return Page(items, len(rows) > limit)
