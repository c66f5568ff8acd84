"""Shared fixtures: a writable copy of the packaged spec to break on purpose; a PostgreSQL server; one store fixture over every store."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from shiftchange.spec import DEFAULT_DIRECTORY


class SpecCopy:
    """A copy of the packaged spec files in a temporary directory, with edit helpers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for source in DEFAULT_DIRECTORY.glob("*.toml"):
            shutil.copy(source, root / source.name)

    def replace(self, name: str, old: str, new: str) -> None:
        """Replace one exact occurrence; fail loudly if the text is not there, so no test breaks nothing."""
        path = self.root / name
        text = path.read_text()
        assert text.count(old) == 1, f"{old!r} must occur exactly once in {name}"
        path.write_text(text.replace(old, new))

    def append(self, name: str, text: str) -> None:
        path = self.root / name
        path.write_text(path.read_text() + "\n" + text)

    def line_of(self, name: str, needle: str) -> int:
        for number, line in enumerate((self.root / name).read_text().splitlines(), 1):
            if needle in line:
                return number
        raise AssertionError(f"{needle!r} not in {name}")


@pytest.fixture
def spec_copy(tmp_path: Path) -> SpecCopy:
    directory = tmp_path / "spec"
    directory.mkdir()
    return SpecCopy(directory)


# ---- PostgreSQL: a server to test PostgresStore against, and stores in throwaway schemas on it. ----

POSTGRES_URL_VARIABLE = "SHIFTCHANGE_TEST_POSTGRES_URL"
POSTGRES_DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The URL of a PostgreSQL server to test against, probed once; the tests that need one skip (or fail, if required) without it."""
    from shiftchange.stores import describe

    url = os.environ.get(POSTGRES_URL_VARIABLE) or POSTGRES_DEFAULT_URL
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=2, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except Exception as error:  # no driver, no server, bad credentials: all mean these tests cannot run here
        why = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
    else:
        return url
    reason = f"PostgreSQL not reachable at {describe(url)}: set {POSTGRES_URL_VARIABLE} to a server's URL to run these tests"
    if os.environ.get("SHIFTCHANGE_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{reason} (SHIFTCHANGE_REQUIRE_POSTGRES=1; {why})", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def make_postgres_store(postgres_url):
    """A factory of PostgresStores, each in a fresh schema `t_<8 hex digits>`; every schema it made is dropped at teardown.

    Keyword arguments go to PostgresStore (`schema=` names an existing one to open again: it is not dropped twice);
    `conninfo=` replaces the server's URL (the same server with other libpq parameters).
    """
    import psycopg

    from shiftchange.stores.postgres import PostgresStore

    stores, schemas = [], []

    def make(conninfo=None, **options):
        if "schema" not in options:
            options["schema"] = f"t_{uuid.uuid4().hex[:8]}"
            schemas.append(options["schema"])
        store = PostgresStore(conninfo or postgres_url, **options)
        stores.append(store)
        return store

    make.url = postgres_url
    make.schemas = schemas
    yield make
    for store in stores:
        store.close()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for start in range(0, len(schemas), 20):  # a few per statement: one commit each, within the server's lock table
            names = ", ".join(f'"{schema}"' for schema in schemas[start : start + 20])
            connection.execute(f"DROP SCHEMA IF EXISTS {names} CASCADE")


def unsynced(url: str) -> str:
    """`url` with commits that do not wait for the WAL to reach disk: the same visibility and atomicity, several times faster.

    For the many short-lived stores of the contract tests, which check transactional semantics, not what survives a power cut.
    """
    return url + ("&" if "?" in url else "?") + "options=-c%20synchronous_commit%3Doff"


# ---- One store fixture over every store: memory, SQLite and PostgreSQL. ----

STORE_KINDS = ("memory", "sqlite", "postgres")
POSTGRES_TEST_POOL_MAX = 2
"""Connections per test PostgresStore: these tests drive one orchestrator from one thread, and the server's slots are shared."""


@pytest.fixture(params=STORE_KINDS)
def make_store(request, tmp_path):
    """A factory of fresh, empty stores of one kind, each closed at teardown: a new memory store, SQLite file or PostgreSQL schema.

    The PostgreSQL kind skips in one line without a server (fails with SHIFTCHANGE_REQUIRE_POSTGRES=1); its stores commit
    unsynced and keep a small pool, and `make_postgres_store` drops every schema they made at teardown.
    """
    if request.param == "postgres":
        make_postgres_store = request.getfixturevalue("make_postgres_store")
        conninfo = unsynced(make_postgres_store.url)

        def make():
            return make_postgres_store(conninfo=conninfo, pool_max=POSTGRES_TEST_POOL_MAX)

        yield make
        return
    from shiftchange.core import MemoryStore
    from shiftchange.stores import SQLiteStore

    made = []

    def make():
        made.append(MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / f"store-{len(made)}.sqlite"))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store):
    """One fresh store of each kind in turn (see `make_store`)."""
    return make_store()
