"""`open_store(url)`: a store named by one string, for commands and configuration files.

Three forms, the first two as SQLAlchemy spells them:

- `memory:` is a fresh `MemoryStore` (gone when the process ends);
- `sqlite:///relative/path.db` and `sqlite:////absolute/path.db` are an
  `SQLiteStore` on that file: the path is what follows the third slash. The
  one query parameter is `?synchronous=NORMAL|FULL|EXTRA`;
- `postgresql://user@host:5432/db` (or `postgres://`) is a `PostgresStore`.
  `?schema=name` picks its schema (default `shiftchange`) and
  `?prepare=false` sends its statements unprepared (behind a pooler that
  does not carry prepared statements); both are taken out of the URL before
  libpq sees it, and every other parameter (`sslmode`, `application_name`,
  `options`, ...) is libpq's.

Keyword options go to the store's constructor (`pool_max=4`, `migrate=False`,
`busy_timeout_s=5`). `describe(url)` is the URL fit to print: any password
replaced by `***`. psycopg is imported only when a PostgreSQL URL is opened.
"""

from __future__ import annotations

import inspect
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from shiftchange.core.errors import InputError
from shiftchange.core.store import MemoryStore, Store

__all__ = ["check_url", "describe", "migrate_url", "open_store"]

FORMS = "memory:, sqlite:///relative/path.db, sqlite:////absolute/path.db, or postgresql://user@host:5432/db[?schema=name]"


def open_store(url: str, **options: Any) -> Store:
    """The store `url` names, opened; InputError (one line, listing the forms) for anything else."""
    kind = _kind(url)
    if kind == "memory":
        return _construct(MemoryStore, "memory:", (), options)
    if kind == "sqlite":
        return _open_sqlite(url, options)
    return _open_postgres(url, options)


def check_url(url: str, **options: Any) -> str:
    """What `open_store(url, **options)` would refuse the URL for, said without opening, creating or connecting to anything.

    Its kind (`memory`, `sqlite` or `postgresql`) if the URL and the options
    are well formed; InputError (one line) otherwise. A command checks its
    store URL with this before it makes anything else, so that a store URL it
    would refuse later does not leave a file or a schema behind (and neither
    does another argument refused after the URL: check those first).
    Whether the file or server is there is only known by opening it.
    """
    kind = _kind(url)
    if kind == "memory":
        _bind(MemoryStore, url, (), options)
    elif kind == "sqlite":
        from .sqlite import SQLiteStore

        path, options = _sqlite_arguments(url, options)
        _bind(SQLiteStore, url, (path,), options)
        SQLiteStore.check_options(**options)
    else:
        from .postgres import PostgresStore
        from .postgres.connect import _where
        from .postgres.driver import require_psycopg

        conninfo, options = _postgres_arguments(url, options)
        _bind(PostgresStore, url, (conninfo,), options)
        require_psycopg()
        PostgresStore.check_options(**options)
        _where(conninfo)  # InputError if libpq cannot parse it
    return kind


def _kind(url: Any) -> str:
    if not isinstance(url, str):
        raise InputError(f"a store URL is a string ({FORMS}), not {type(url).__name__}")
    scheme = url.partition(":")[0].lower()
    if url == "memory:":
        return "memory"
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    raise InputError(f"not a store URL: {describe(url)!r}; use {FORMS}")


def _bind(kind: Any, url: str, arguments: tuple, options: dict[str, Any]) -> None:
    try:
        inspect.signature(kind).bind(*arguments, **options)
    except TypeError as error:
        raise InputError(f"{describe(url)}: {kind.__name__} {error}") from None


def _construct(kind: Any, url: str, arguments: tuple, options: dict[str, Any]) -> Store:
    _bind(kind, url, arguments, options)
    return kind(*arguments, **options)


def _open_sqlite(url: str, options: dict[str, Any]) -> Store:
    from .sqlite import SQLiteStore

    path, options = _sqlite_arguments(url, options)
    return _construct(SQLiteStore, url, (path,), options)


def _sqlite_arguments(url: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The file's path and the store's options (with the URL's synchronous=, if any); InputError for a malformed URL."""
    if not url.startswith("sqlite:///"):
        raise InputError(f"not a store URL: {url!r}; an SQLite URL has no host: sqlite:///relative/path.db or sqlite:////absolute/path.db")
    parts = urlsplit(url)
    path = unquote(parts.path[1:])
    if not path or path.endswith("/"):
        raise InputError(f"not a store URL: {url!r} names no file; use sqlite:///relative/path.db or sqlite:////absolute/path.db")
    if parts.fragment:
        raise InputError(f"not a store URL: {url!r}; an SQLite URL has no #fragment")
    query = parse_qsl(parts.query, keep_blank_values=True)
    unknown = sorted({name for name, _ in query} - {"synchronous"})
    if unknown or len(query) > 1:
        raise InputError(f"{url}: an SQLite URL takes one query parameter, synchronous=NORMAL|FULL|EXTRA, not {parts.query!r}")
    if query:
        if "synchronous" in options:
            raise InputError(f"{url}: synchronous is given both in the URL and as an option")
        options = {**options, "synchronous": query[0][1].upper()}
    return path, options


def _open_postgres(url: str, options: dict[str, Any]) -> Store:
    from .postgres import PostgresStore

    conninfo, options = _postgres_arguments(url, options)
    return _construct(PostgresStore, url, (conninfo,), options)


STORE_PARAMETERS = ("schema", "prepare")
"""The query parameters of a PostgreSQL URL that are the store's, taken out before libpq sees the rest."""
_BOOLEANS = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False, "0": False}


def _postgres_arguments(url: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """libpq's conninfo (the URL without the store's parameters) and the store's options (with those the URL named)."""
    base, mark, query = url.partition("?")
    query, hash_mark, fragment = query.partition("#")
    kept: list[str] = []
    found: dict[str, list[str]] = {name: [] for name in STORE_PARAMETERS}
    for item in query.split("&") if query else ():
        name, _, value = item.partition("=")
        if unquote(name) in found:
            found[unquote(name)].append(unquote(value))
        else:
            kept.append(item)
    for name, values in found.items():
        if len(values) > 1:
            raise InputError(f"{describe(url)}: {name} is given {len(values)} times")
        if not values:
            continue
        if name in options:
            raise InputError(f"{describe(url)}: {name} is given both in the URL and as an option")
        value: Any = values[0]
        if name == "prepare":
            value = _BOOLEANS.get(value.lower())
            if value is None:
                raise InputError(f"{describe(url)}: prepare is true or false, not {values[0]!r}")
        options = {**options, name: value}
    conninfo = base + (mark + "&".join(kept) if kept else "") + hash_mark + fragment
    return conninfo, options


def _sqlite_version(path: str) -> int:
    """The schema version of an SQLite file as it is (0 for none yet), read without creating or changing anything."""
    import sqlite3
    from pathlib import Path

    if not Path(path).is_file():
        return 0
    raw = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(raw.execute("PRAGMA user_version").fetchone()[0])
    finally:
        raw.close()


def migrate_url(url: str) -> list[int]:
    """Create or bring up to date the schema of the store `url` names; the schema versions this applied (empty: already current).

    A store migrates itself when opened; this is the same step on its own,
    for a deployment that migrates before it starts its processes.
    """
    kind = _kind(url)
    if kind == "memory":
        raise InputError("memory: has no schema to migrate: it is made anew by every process that opens it")
    if kind == "sqlite":
        path, _options = _sqlite_arguments(url, {})
        before = _sqlite_version(path)
        _open_sqlite(url, {}).close()  # checks the file, and migrates it
        after = _sqlite_version(path)
        return list(range(before + 1, after + 1)) if before else [after]
    from .postgres import migrate

    conninfo, options = _postgres_arguments(url, {})
    return migrate(conninfo, **options)


_AUTHORITY = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^/?#]*)(?P<rest>.*)", re.DOTALL)
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#]*")
_KEYWORD_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def describe(url: str) -> str:
    """`url` with any password (user:PASSWORD@, ?password=, or a key=value string's password=) replaced by `***`, for printing."""
    match = _AUTHORITY.fullmatch(url)
    if match is None:  # a libpq key=value string, or no URL at all
        return _KEYWORD_PASSWORD.sub(r"\1***", url)
    authority = match["authority"]
    if "@" in authority:
        userinfo, _, hosts = authority.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        if colon:
            authority = f"{user}:***@{hosts}"
    return match["scheme"] + authority + _QUERY_PASSWORD.sub(r"\1***", match["rest"])
