"""Shared fixtures: a writable copy of the packaged spec to break on purpose; a PostgreSQL server and stores on it."""

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
