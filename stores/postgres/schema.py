"""The schema of a PostgreSQL store: the numbered migrations, applied in order under an advisory lock, and the checks
that refuse a schema of a newer version or someone else's tables untouched."""

from __future__ import annotations

import difflib
import hashlib
import importlib.resources
import re
from typing import Any

from shiftchange.core.errors import InputError, StoreError, StoreUnavailable

from .connect import _connect, _where
from .driver import _first_line, psycopg, require_psycopg, sql
from .statements import _SCHEMA_NAME, SQL

# ---- migrations: the numbered SQL files, read once.


def _load_migrations() -> tuple[tuple[int, str, str], ...]:
    folder = importlib.resources.files("shiftchange.stores").joinpath("migrations", "postgresql")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match is not None:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort()
    # Gaps or repeats would make "the version of a schema" ambiguous: fail at import, not on some user's database.
    assert [version for version, _, _ in found] == list(range(1, len(found) + 1)), f"migrations must be numbered 1..N: {found!r:.200}"
    return tuple(found)


MIGRATIONS: tuple[tuple[int, str, str], ...] = _load_migrations()
"""(version, name, SQL text) of every file in migrations/postgresql/, in order."""

CREATE_SCHEMA_MIGRATIONS, RECORD_MIGRATION, SCHEMA_RELATIONS = (
    SQL["CREATE_SCHEMA_MIGRATIONS"],
    SQL["RECORD_MIGRATION"],
    SQL["SCHEMA_RELATIONS"],
)
ADVISORY_LOCK, STORE_SCHEMAS, SCHEMA_EXISTS = SQL["ADVISORY_LOCK"], SQL["STORE_SCHEMAS"], SQL["SCHEMA_EXISTS"]
"""The schema's own statements (statements.sql)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The newest schema version this code knows."""


def check_schema_name(schema: Any) -> str:
    """`schema` if it is a plain lower-case identifier; InputError otherwise (it is never quoted into SQL unchecked)."""
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise InputError(f"schema must be a plain identifier ([a-z_][a-z0-9_]{{0,62}}), not {schema!r:.80}")
    return schema


def _advisory_key(schema: str) -> int:
    """The advisory lock migrations of `schema` take: a signed 64-bit number derived from its name."""
    return int.from_bytes(hashlib.sha256(f"shiftchange migrate {schema}".encode()).digest()[:8], "big", signed=True)


# ---- migrations


def _applied(connection: Any, schema: str, where: str) -> dict[int, str] | None:
    """The versions recorded in `schema`, or None for a schema that is missing or empty; StoreError for someone else's tables."""
    relations = {name for (name,) in connection.execute(SCHEMA_RELATIONS, (schema,))}
    if not relations:
        return None
    if "schema_migrations" not in relations:
        raise StoreError(
            f"schema {schema!r} at {where} holds tables ({', '.join(sorted(relations)[:5])}) but no schema_migrations: "
            "not a shiftchange store; use another schema"
        )
    query = sql.SQL("SELECT version, name FROM {}.schema_migrations").format(sql.Identifier(schema))
    return dict(connection.execute(query).fetchall())


STORES_LISTED = 8
"""How many of a database's store schemas a message names (the rest are counted)."""


def _no_store(connection: Any, schema: str, where: str) -> str:
    """Why there is no store in `schema` (it does not exist, or holds nothing), and which schemas of the database hold one."""
    (exists,) = connection.execute(SCHEMA_EXISTS, (schema,)).fetchone()
    found = [name for (name,) in connection.execute(STORE_SCHEMAS)]
    said = f"schema {schema!r} at {where} holds no shiftchange store" if exists else f"no schema {schema!r} at {where}"
    if not found:
        return f"{said}, and no schema of that database holds one: is the URL's database the right one?"
    close = difflib.get_close_matches(schema, found, n=STORES_LISTED, cutoff=0.6)
    hint = f", did you mean {close[0]!r}" if close else ""
    found = close + [name for name in found if name not in close]  # the likeliest first
    listed = ", ".join(found[:STORES_LISTED]) + (f" and {len(found) - STORES_LISTED} more" if len(found) > STORES_LISTED else "")
    return f"{said}{hint}; the schemas there that hold one: {listed} (name one with ?schema=NAME)"


def _migrate(connection: Any, schema: str, where: str, *, apply: bool) -> list[int]:
    """Bring `schema` to SCHEMA_VERSION (apply) or check that it is there (not apply), in one transaction; the versions applied."""
    try:
        with connection.transaction():
            # The migration files are SQL text with literals of their own (U&'...' among them), written for the default.
            connection.execute("SET LOCAL standard_conforming_strings = on")
            if apply:
                connection.execute(ADVISORY_LOCK, (_advisory_key(schema),))
            applied = _applied(connection, schema, where)
            unknown = sorted(set(applied or ()) - {version for version, _, _ in MIGRATIONS})
            if unknown:
                raise StoreError(
                    f"schema {schema!r} at {where}: schema version {max(applied or unknown)}, this code knows {SCHEMA_VERSION}; "
                    "upgrade shiftchange to use it"
                )
            missing = [migration for migration in MIGRATIONS if migration[0] not in (applied or {})]
            if not apply:
                if applied is None:  # no store there at all: `db migrate` would make an empty one, not find the one meant
                    raise StoreError(_no_store(connection, schema, where))
                if missing:
                    current = max(applied or {0: ""})
                    raise StoreError(
                        f"schema {schema!r} at {where} is at version {current}, this code needs {SCHEMA_VERSION}: "
                        "run `shiftchange db migrate` (or open the store with migrate=True)"
                    )
                return []
            if not missing:
                return []
            name = sql.Identifier(schema)
            connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
            connection.execute(sql.SQL("SET LOCAL search_path TO {}").format(name))
            if applied is None:
                connection.execute(CREATE_SCHEMA_MIGRATIONS)
            for version, title, text in missing:
                connection.execute(text)
                connection.execute(RECORD_MIGRATION, (version, title))
            return [version for version, _, _ in missing]
    except psycopg.OperationalError as error:
        raise StoreUnavailable(f"PostgreSQL at {where}, migrating schema {schema!r}: {_first_line(error)}") from None
    except psycopg.Error as error:
        raise StoreError(f"PostgreSQL at {where}, migrating schema {schema!r}: {_first_line(error)}") from None


def migrate(conninfo: str, schema: str = "shiftchange", *, connect_timeout_s: float = 10.0) -> list[int]:
    """Apply the migrations `schema` lacks (creating it if need be); the versions applied now, [] if it was up to date.

    Safe to run from several processes at once: they take turns on an
    advisory lock, and only the first applies anything.
    """
    require_psycopg()
    check_schema_name(schema)
    where = _where(conninfo)
    with _connect(conninfo, connect_timeout_s, where) as connection:
        return _migrate(connection, schema, where, apply=True)
