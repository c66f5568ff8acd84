"""Connections of a PostgreSQL store: where a connection string points (never its password), the options every
connection gets, and one connection outside the pool for the migrations."""

from __future__ import annotations

import math
import os
import re
from typing import Any

from shiftchange.core.errors import InputError, StoreError, StoreUnavailable

from .driver import _first_line, conninfo_to_dict, psycopg
from .text import _adapt_text


def _where(conninfo: Any) -> str:
    """host:port/database of a connection string, for messages (never the password); InputError if it does not parse."""
    if not isinstance(conninfo, str):
        raise InputError(f"conninfo must be a PostgreSQL URL or key=value string, not {type(conninfo).__name__}")
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as error:
        from ..urls import describe  # libpq quotes the string it could not parse: never print its password

        raise InputError(f"not a PostgreSQL connection string: {_first_line(error).replace(conninfo, describe(conninfo))}") from None
    host = params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "localhost"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    user = params.get("user") or os.environ.get("PGUSER") or os.environ.get("USER") or "?"
    database = params.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{host}:{port}/{database}"


def _connection_options(connect_timeout_s: float) -> dict[str, Any]:
    # libpq counts whole seconds, and treats anything under 2 as 2.
    return {"autocommit": True, "connect_timeout": max(2, math.ceil(connect_timeout_s)), "client_encoding": "UTF8"}


_BAD_PARAMETER = re.compile(r"(?:connection is bad: )?(invalid .*)")
"""How libpq words a connection parameter's value it refused before connecting (`invalid sslmode value: "x"`)."""


def _connect(conninfo: str, connect_timeout_s: float, where: str) -> Any:
    """One connection outside the pool (migrations); StoreUnavailable in one line if the server cannot be reached."""
    try:
        connection = psycopg.connect(conninfo, **_connection_options(connect_timeout_s))
    except psycopg.OperationalError as error:
        line = _first_line(error)
        # libpq checks a parameter's value (sslmode, port, ...) before it sends anything: bad input, not an unreachable server.
        refused = _BAD_PARAMETER.match(line)
        if refused is not None:
            raise InputError(f"not a usable PostgreSQL connection string: {refused[1]}") from None
        if "FATAL:" in line:  # the server answered, and refused the session (credentials, database, options)
            raise StoreUnavailable(f"PostgreSQL at {where} refused the connection: {line.partition('FATAL:')[2].strip()}") from None
        raise StoreUnavailable(f"cannot reach PostgreSQL at {where}: {line}") from None
    except psycopg.Error as error:
        raise StoreError(f"cannot open PostgreSQL at {where}: {_first_line(error)}") from None
    _adapt_text(connection)
    return connection
