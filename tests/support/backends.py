"""Store backends for the state tests: SQLite (a fresh file) and PostgreSQL (a database of this run's own);
the test Redis (`redis_url`).

    from tests.support import backends
    backend = backends.backend              # parametrized: "sqlite", "postgresql"
    start_gateway = backends.start_gateway  # start_gateway(api_keys="key-a,key-b") -> a running GatewayServer

PostgreSQL is real: each test session creates `rg_test_<random>` on 127.0.0.1:5432 and drops it at the end;
its tables are emptied before every test. Without a reachable server the PostgreSQL cases are skipped, or
fail when the environment variable CI is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from responses_gateway.configure import make as make_settings
from tests.support import needs
from tests.support.server import GatewayServer

PG_ADMIN_URL = os.environ.get("RG_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("RG_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
BACKENDS = ("sqlite", "postgresql")


# --------------------------------------------------------------------------- PostgreSQL, one database a run


def _pg_url(database: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{database}"


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The URL of a PostgreSQL database created for this test run (dropped afterwards)."""
    name = f"rg_test_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # unreachable, refused, no permission
        needs.need("PostgreSQL", False, f"a server at {PG_ADMIN_URL} with trust auth (apt-get install postgresql; "
                   f"here: {type(exc).__name__}: {exc})")
    try:
        yield _pg_url(name)
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of the test Redis (shared: tests use keys of their own)."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        needs.need("Redis", False, f"a server at {REDIS_URL} (apt-get install redis-server; here: {exc})")
    return REDIS_URL


# --------------------------------------------------------------------------- direct access to the rows


def _pg_sql(sql: str) -> str:
    pieces = sql.split("?")
    return pieces[0] + "".join(f"${n}{piece}" for n, piece in enumerate(pieces[1:], start=1))


@dataclass
class Backend:
    name: str  # "sqlite" or "postgresql"
    db: str  # what Settings.db / --db gets

    def query(self, sql: str, *args) -> list[tuple]:
        """Run SQL (with `?` placeholders) directly against the store's database; rows as tuples."""
        if self.name == "sqlite":
            conn = sqlite3.connect(self.db, timeout=10)
            try:
                rows = [tuple(row) for row in conn.execute(sql, args).fetchall()]
                conn.commit()  # an UPDATE/DELETE takes effect
                return rows
            finally:
                conn.close()
        return asyncio.run(self._pg_query(sql, args))

    async def _pg_query(self, sql: str, args: tuple) -> list[tuple]:
        import asyncpg

        conn = await asyncpg.connect(self.db, timeout=5)
        try:
            return [tuple(row) for row in await conn.fetch(_pg_sql(sql), *args)]
        finally:
            await conn.close()

    @contextlib.contextmanager
    def refusing(self, table: str) -> Iterator[None]:
        """Inserts into `table` fail inside the database while in the block (a trigger raises): a real write
        failure, at the point of the database the test chooses."""
        if self.name == "sqlite":
            self.query(f"CREATE TRIGGER rg_test_refuse BEFORE INSERT ON {table} "
                       f"BEGIN SELECT RAISE(ABORT, '{table} refused'); END")
            undo = ["DROP TRIGGER rg_test_refuse"]
        else:
            self.query("CREATE FUNCTION rg_test_refuse() RETURNS trigger AS $$ BEGIN "
                       f"RAISE EXCEPTION '{table} refused'; END $$ LANGUAGE plpgsql")
            self.query(f"CREATE TRIGGER rg_test_refuse BEFORE INSERT ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION rg_test_refuse()")
            undo = [f"DROP TRIGGER rg_test_refuse ON {table}", "DROP FUNCTION rg_test_refuse()"]
        try:
            yield
        finally:
            for sql in undo:
                self.query(sql)

    def tables_exist(self) -> bool:
        if self.name == "sqlite":
            if not Path(self.db).exists():
                return False
            return bool(self.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'responses'"))
        return self.query("SELECT to_regclass('public.responses') IS NOT NULL")[0][0]

    def clear(self) -> None:
        if self.tables_exist():
            for table in ("items", "responses"):
                self.query(f"DELETE FROM {table}")

    def consistency_problems(self) -> list[str]:
        """What is wrong with the stored rows: orphan items, responses without their items, gaps."""
        problems = []
        orphans = self.query("SELECT response_id, part, position FROM items i "
                             "WHERE NOT EXISTS (SELECT 1 FROM responses r WHERE r.id = i.response_id)")
        if orphans:
            problems.append(f"items without a response: {orphans}")
        import orjson

        for rid, body in self.query("SELECT id, body FROM responses"):
            outputs = orjson.loads(body).get("output") or []
            rows = self.query("SELECT part, position, id FROM items WHERE response_id = ? ORDER BY part, position",
                              rid)
            inputs = [r for r in rows if r[0] == 0]
            stored_out = [r for r in rows if r[0] == 1]
            if not inputs:
                problems.append(f"{rid}: no input items")
            if [r[1] for r in inputs] != list(range(len(inputs))):
                problems.append(f"{rid}: input positions {[r[1] for r in inputs]}")
            if [r[2] for r in stored_out] != [o.get("id", "") for o in outputs]:
                problems.append(f"{rid}: output items {stored_out} vs body {[o.get('id') for o in outputs]}")
        return problems


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Iterator[Backend]:
    """A store with no rows in it: a fresh SQLite file, or this run's PostgreSQL database emptied."""
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "responses.db"))
        return
    b = Backend("postgresql", request.getfixturevalue("pg_database"))
    b.clear()
    yield b


# --------------------------------------------------------------------------- gateways


@pytest.fixture
def start_gateway(backend: Backend, upstream) -> Iterator[Callable[..., GatewayServer]]:
    """start_gateway(**settings) → a running in-process gateway in front of the fake upstream, on `backend`."""
    servers: list[GatewayServer] = []

    def start(**overrides) -> GatewayServer:
        settings = make_settings(upstream_url=upstream.base_url, db=backend.db, **overrides)
        server = GatewayServer(settings).__enter__()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.__exit__(None, None, None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GatewayProcess:
    """`python -m responses_gateway serve ...` as a real child process."""

    def __init__(self, upstream_url: str, db: str, *args: str, log_path: Path | None = None,
                 log_level: str = "warning", nofile: int | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "responses_gateway", "serve", "--upstream", upstream_url,
             "--port", str(self.port), "--db", db, "--log-level", log_level, *args],
            stdout=self.log, stderr=self.log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=None if nofile is None else lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                               (nofile, nofile)),
        )

    def rss(self) -> int:
        """The process's resident memory, in bytes (from /proc)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def wait_ready(self, timeout: float = 15.0) -> GatewayProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"gateway not ready after {timeout}s: {self.output()}")

    def output(self) -> str:
        if self.log_path is None:
            return ""
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.log is not subprocess.DEVNULL:
                self.log.close()


def run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """`python -m responses_gateway <args>`, checked; stdout and stderr captured as text."""
    done = subprocess.run([sys.executable, "-m", "responses_gateway", *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def closed_counts(url: str, headers: dict[str, str] | None = None) -> dict[str, float]:
    """A gateway's `responses_gateway_connections_closed_total` by reason (from its /metrics)."""
    out = {}
    for line in httpx.get(f"{url}/metrics", headers=headers, timeout=10).text.splitlines():
        if line.startswith('responses_gateway_connections_closed_total{reason="'):
            out[line.split('"')[1]] = float(line.split()[-1])
    return out
