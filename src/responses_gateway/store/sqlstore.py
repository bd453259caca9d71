"""The store: every role's queries over one engine, and `open_store`, which picks the engine from a URL.

Each role is a module of its own (responses, conversations, jobs, secrets, retention, files) with the protocol
its callers type against and the SQL that implements it; `Store` is all of them. A new core role is a module
like those, its migrations in schema.py, and its two names in the lists below (`Store`'s bases and
`SQLStore`'s). A gateway-run tool's role (vector stores, containers) is a `Queries` in the tool's package,
bound to the store's engine with `Store.role`; its tables are migrations in schema.py too (one history of the
schema, whatever made each table).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol, TypeVar
from urllib.parse import urlparse

from .base import DB_TIMEOUT, Engine, Queries
from .conversations import ConversationQueries, Conversations
from .files import FileQueries, Files, blobs_for
from .jobs import EventLogQueries, EventLogs, JobQueries, Jobs
from .postgres import Postgres
from .responses import ResponseQueries, Responses
from .retention import Retention, RetentionQueries
from .schema import MIGRATIONS
from .secrets import SecretQueries, Secrets
from .sqlite import SQLite, default_sqlite_path

R = TypeVar("R", bound=Queries)


class Lifecycle(Protocol):
    """Opening, migrating, probing and closing the store (app.py, `responses-gateway db`)."""

    label: str  # where the rows live, for logs (never a password)

    async def open(self) -> None: ...

    async def upgrade(self) -> int:
        """Apply pending schema migrations; returns the schema version."""
        ...

    async def ping(self) -> None:
        """One trivial query: raises if the database cannot answer (`/health` bounds it with a deadline)."""
        ...

    async def close(self) -> None:
        """Release the connections; the last call."""
        ...


class Roles(Protocol):
    def role(self, kind: type[R]) -> R:
        """A gateway-run tool's own role (its queries, in its package) over this store's engine."""
        ...


class Store(Lifecycle, Responses, Conversations, Jobs, EventLogs, Secrets, Retention, Files, Roles, Protocol):
    """The whole store, for what holds it (the app) or uses most of it (background.py)."""


class SQLStore(ResponseQueries, ConversationQueries, JobQueries, EventLogQueries, SecretQueries, RetentionQueries,
               FileQueries):
    def __init__(self, engine: Engine, retention_days: float):
        self.engine = engine
        self.blobs = blobs_for(engine)  # uploaded files' bytes (store/files.py)
        # whole seconds, rounded up: even a tiny retention keeps a response past the second it was made in
        self.retention = max(2, math.ceil(retention_days * 86400))
        self.label = engine.label

    async def open(self) -> None:
        await self.engine.connect()

    async def upgrade(self) -> int:
        """Apply pending migrations (safe when several processes start at once); returns the version."""
        return await self.engine.migrate(MIGRATIONS)

    def role(self, kind: type[R]) -> R:
        return kind(self.engine, self.retention)

    async def ping(self) -> None:
        await self.engine.fetchone("SELECT 1", ())

    async def close(self) -> None:
        await self.engine.close()


def open_store(url: str | None, retention_days: float = 30.0, timeout: float = DB_TIMEOUT) -> SQLStore:
    """`url`: None (SQLite in the user's data directory), a path, `sqlite:///path`, or `postgresql://...`."""
    if url and url.startswith(("postgres://", "postgresql://")):
        engine = Postgres(url)
        engine.timeout = timeout
        return SQLStore(engine, retention_days)
    if url and url.startswith("sqlite:"):
        parsed = urlparse(url)
        path = Path(parsed.path if parsed.netloc == "" else parsed.netloc + parsed.path)
    else:
        path = Path(url) if url else default_sqlite_path()
    return SQLStore(SQLite(path, timeout), retention_days)
