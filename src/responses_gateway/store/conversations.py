"""Conversations: a list of items owned by one API key, kept until deleted (never expired by retention).

A conversation is one `conversations` row (its metadata) and its `conversation_items`, in append order
(`position`). Responses created in a conversation read its items as history and append theirs at the end.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from .base import Page, Queries, Statements


class Conversations(Protocol):
    """What the Conversations API and responses created in a conversation need."""

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


def append_statements(conversation_id: str, owner: str, items: list[dict[str, Any]]) -> Statements:
    """The statements of an append, to run in a transaction of their own or with a response's save. The first
    takes the conversation's row lock (PostgreSQL; SQLite has one writer), so concurrent appends queue up and
    each one's items stay together, in the order the appends commit. A conversation that is not there (or
    not the owner's) gets nothing."""
    return [
        ("UPDATE conversations SET created_at = created_at WHERE id = ? AND owner = ?", [(conversation_id, owner)]),
        ("INSERT INTO conversation_items (conversation_id, position, id, body) "
         "SELECT ?, COALESCE((SELECT max(position) FROM conversation_items WHERE conversation_id = ?), -1) + 1,"
         " ?, ? WHERE EXISTS (SELECT 1 FROM conversations WHERE id = ? AND owner = ?)",
         [(conversation_id, conversation_id, item["id"], orjson.dumps(item).decode(), conversation_id, owner)
          for item in items]),
    ]


class ConversationQueries(Queries):
    async def create_conversation(self, conversation: dict[str, Any], items: list[dict[str, Any]], owner: str) -> None:
        cid = conversation["id"]
        await self.engine.write([
            ("INSERT INTO conversations (id, owner, created_at, metadata) VALUES (?, ?, ?, ?)",
             [(cid, owner, conversation["created_at"], orjson.dumps(conversation["metadata"]).decode())]),
            ("INSERT INTO conversation_items (conversation_id, position, id, body) VALUES (?, ?, ?, ?)",
             [(cid, i, item["id"], orjson.dumps(item).decode()) for i, item in enumerate(items)]),
        ])

    async def get_conversation(self, conversation_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            "SELECT id, created_at, metadata FROM conversations WHERE id = ? AND owner = ?",
            (conversation_id, owner))
        if row is None:
            return None
        return {"id": row[0], "object": "conversation", "created_at": int(row[1]),
                "metadata": orjson.loads(row[2])}

    async def update_conversation(self, conversation_id: str, owner: str, metadata: dict[str, Any]) -> bool:
        return await self.engine.execute_count(
            "UPDATE conversations SET metadata = ? WHERE id = ? AND owner = ?",
            (orjson.dumps(metadata).decode(), conversation_id, owner)) > 0

    async def delete_conversation(self, conversation_id: str, owner: str) -> bool:
        return await self.engine.write([
            ("DELETE FROM conversation_items WHERE conversation_id IN "
             "(SELECT id FROM conversations WHERE id = ? AND owner = ?)", [(conversation_id, owner)]),
            ("DELETE FROM conversations WHERE id = ? AND owner = ?", [(conversation_id, owner)]),
        ], count_last=True) > 0

    async def append_conversation(self, conversation_id: str, owner: str, items: list[dict[str, Any]]) -> None:
        """Append after the conversation's last item, all in one transaction (`append_statements`)."""
        if items:
            await self.engine.write(append_statements(conversation_id, owner, items))

    async def conversation_history(self, conversation_id: str, owner: str) -> list[dict[str, Any]] | None:
        if await self.get_conversation(conversation_id, owner) is None:
            return None
        rows = await self.engine.fetchall(
            "SELECT body FROM conversation_items WHERE conversation_id = ? ORDER BY position", (conversation_id,))
        return [orjson.loads(r[0]) for r in rows]

    async def conversation_items(self, conversation_id: str, owner: str, *, after: str | None, limit: int,
                                 order: str) -> Page | None:
        if await self.get_conversation(conversation_id, owner) is None:
            return None
        clauses, args = ["conversation_id = ?"], [conversation_id]
        if after is not None:
            row = await self.engine.fetchone(
                "SELECT position FROM conversation_items WHERE conversation_id = ? AND id = ?",
                (conversation_id, after))
            if row is None:
                return Page([], False)
            clauses.append("position > ?" if order == "asc" else "position < ?")
            args.append(row[0])
        rows = await self.engine.fetchall(
            f"SELECT body FROM conversation_items WHERE {' AND '.join(clauses)} ORDER BY position "
            f"{'ASC' if order == 'asc' else 'DESC'} LIMIT ?", (*args, limit + 1))
        return Page([orjson.loads(r[0]) for r in rows[:limit]], len(rows) > limit)

    async def conversation_item(self, conversation_id: str, item_id: str, owner: str) -> dict[str, Any] | None:
        row = await self.engine.fetchone(
            "SELECT i.body FROM conversation_items i JOIN conversations c ON c.id = i.conversation_id "
            "WHERE i.conversation_id = ? AND i.id = ? AND c.owner = ?", (conversation_id, item_id, owner))
        return orjson.loads(row[0]) if row else None

    async def delete_conversation_item(self, conversation_id: str, item_id: str, owner: str) -> bool:
        return await self.engine.write([
            ("DELETE FROM conversation_items WHERE conversation_id = ? AND id = ? AND conversation_id IN "
             "(SELECT id FROM conversations WHERE id = ? AND owner = ?)",
             [(conversation_id, item_id, conversation_id, owner)]),
        ], count_last=True) > 0
