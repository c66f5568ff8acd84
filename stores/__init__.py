"""The store adapters: SQLite (the embedded default), PostgreSQL (many machines), store URLs and migrations.

The core keeps the protocol every store implements (`shiftchange.core.Store`
and `Transaction`) and the in-memory store; this package holds the stores
that do I/O, so the core imports no database driver. Public surface:

- `open_store(url)`: `memory:`, `sqlite:///path.db`, `postgresql://...`;
  `migrate_url(url)` brings a store's schema up to date; `check_url(url)`
  says what opening it would refuse, without opening anything; `describe(url)`
  is the URL fit to print;
- `SQLiteStore` (stdlib sqlite3) and `PostgresStore` (psycopg 3, imported
  only when a PostgreSQL store is first named here).

A port of the store implements `Store` and `Transaction`
(`shiftchange.core.store`) and passes `shiftchange.testing.check_store`.
"""

from typing import Any

from .sqlite import SQLiteStore
from .urls import check_url, describe, migrate_url, open_store

__all__ = ["PostgresStore", "SQLiteStore", "check_url", "describe", "migrate_url", "open_store"]


def __getattr__(name: str) -> Any:
    """`PostgresStore` on first use, so importing the package does not import psycopg."""
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
