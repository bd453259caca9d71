"""What every role of the store builds on: the engine a role's queries run on, and a page of rows.

The store is split by role (responses, conversations, background jobs and their event logs, secrets,
retention), each role a module with its protocol — what its callers may use — and its SQL. A role's SQL is
written once, with `?` placeholders, and runs on either engine (sqlite.py, postgres.py): both give the
`Engine` below. The store knows rows, not HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Row = Sequence[Any]
Statements = list[tuple[str, list[Any]]]  # (SQL with `?` placeholders, the rows of arguments to run it with)

DB_TIMEOUT = 10.0  # seconds: a stalled database fails a request cleanly instead of holding it forever


@dataclass
class Page:
    items: list[dict[str, Any]]
    has_more: bool


class Engine(Protocol):
    """A database: SQLite (sqlite.py) and PostgreSQL (postgres.py) each provide it."""

    label: str  # where the rows live, for logs (never a password)

    @property
    def batch_seconds(self) -> float:
        """How long one transaction of a bulk job (a purge's batch) may hold the database: short where a
        write holds every other writer (SQLite), far inside the statement deadline where not (PostgreSQL)."""
        ...

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def migrate(self, migrations: list[list[str]]) -> int:
        """Apply the migrations past the recorded version, one migrator at a time; returns the version."""
        ...

    async def write(self, statements: Statements, count_last: bool = False) -> int:
        """One transaction; with `count_last`, the rows the last statement touched."""
        ...

    async def execute_count(self, sql: str, args: tuple[Any, ...]) -> int: ...

    async def fetchone(self, sql: str, args: tuple[Any, ...]) -> Row | None: ...

    async def fetchall(self, sql: str, args: tuple[Any, ...]) -> list[Row]: ...


class Queries:
    """A role's SQL, run on the store's one engine. The store (sqlstore.py) is every core role's `Queries` over
    the same engine and retention; a gateway-run tool's own role (its tables: vector stores, containers) lives
    in the tool's package and is bound to the same engine by `Store.role`."""

    engine: Engine
    retention: int  # seconds a response is kept (whole seconds, at least 2)

    def __init__(self, engine: Engine, retention: int):
        self.engine = engine
        self.retention = retention


def merged(writes: list[Statements]) -> Statements:
    """The statements of many writes as few: writes of the same shape (the same SQL, in the same order) run
    each statement once with all their rows, in the order the shapes first appear. A write's own statements
    keep their order; writes of different shapes are independent (none reads what another writes)."""
    shapes: dict[tuple[str, ...], list[Statements]] = {}
    for statements in writes:
        shapes.setdefault(tuple(sql for sql, _ in statements), []).append(statements)
    out: Statements = []
    for shape, same in shapes.items():
        for k, sql in enumerate(shape):
            rows = [row for statements in same for row in statements[k][1]]
            if rows:
                out.append((sql, rows))
    return out
