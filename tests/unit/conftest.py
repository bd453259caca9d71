"""The store fixtures (tests/unit/store/conftest.py: a real SQLite file or this run's PostgreSQL database) for
every unit test that needs a store: the store's own roles' tests, and the tools' store roles'
(tests/unit/tools/*/test_store.py)."""

from tests.unit.store.conftest import anyio_backend, db_url, pg_database, store

__all__ = ["anyio_backend", "db_url", "pg_database", "store"]
