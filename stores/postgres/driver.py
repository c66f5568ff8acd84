"""psycopg, if it is installed: a PostgreSQL store needs it, and everything else imports without it."""

from __future__ import annotations

from shiftchange.core.errors import StoreError

try:
    import psycopg
    import psycopg.adapt
    from psycopg import errors as pg_errors
    from psycopg import pq, sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg.types import string as pg_string
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

    _TEXT = psycopg.adapt.PyFormat.TEXT
except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess by the tests
    psycopg = None  # type: ignore[assignment]
    pg_errors = pq = sql = conninfo_to_dict = TransactionStatus = pg_string = None  # type: ignore[assignment]
    ConnectionPool = PoolClosed = PoolTimeout = _TEXT = None  # type: ignore[assignment,misc]

__all__ = [
    "INSTALL_HINT",
    "_TEXT",
    "ConnectionPool",
    "PoolClosed",
    "PoolTimeout",
    "TransactionStatus",
    "_first_line",
    "conninfo_to_dict",
    "pg_errors",
    "pg_string",
    "pq",
    "psycopg",
    "require_psycopg",
    "sql",
]

INSTALL_HINT = "PostgreSQL stores need psycopg 3: pip install 'shiftchange[postgres]'"


def _first_line(error: BaseException) -> str:
    """The first line of what an error says (a psycopg error may run to several, with the statement it refused)."""
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def require_psycopg() -> None:
    """StoreError saying how to install psycopg, when it is not."""
    if psycopg is None:
        raise StoreError(INSTALL_HINT)
