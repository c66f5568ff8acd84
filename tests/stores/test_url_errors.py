"""Store URLs refused by the store layer in Python: a typed error (a CoreError) in one line, nothing connected to or made.

The URL tests need no server (each URL is refused before anything connects); the schema tests take `make_postgres_store`.
"""

from __future__ import annotations

import uuid

import pytest

from shiftchange.core import CoreError, InputError, StoreError
from shiftchange.stores import check_url, migrate_url, open_store

pytest.importorskip("psycopg")  # a PostgreSQL URL without the driver is StoreError saying how to install it (tested apart)

UNPARSABLE = [
    "postgresql://postgres:hunter2@127.0.0.1:5432/test?schema=x&bogus=1",
    "postgresql://postgres:hunter2@[::1:5432/test",
    "postgres://postgres:hunter2@127.0.0.1:5432/test?sslmode=sometimes&schema=x",
]


@pytest.mark.parametrize("url", UNPARSABLE)
@pytest.mark.parametrize("opener", [open_store, migrate_url], ids=["open_store", "migrate_url"])
def test_an_unparsable_postgresql_url_is_an_input_error(opener, url):
    with pytest.raises(InputError) as raised:
        opener(url)
    said = str(raised.value)
    assert said.startswith("not a ") and "PostgreSQL connection string: " in said and "\n" not in said
    assert "hunter2" not in said


def test_the_store_class_refuses_it_too():
    from shiftchange.stores.postgres import PostgresStore

    with pytest.raises(InputError, match="not a PostgreSQL connection string"):
        PostgresStore("host=127.0.0.1 password=hunter2 bogus=1")
    assert issubclass(InputError, CoreError)


# ---- a schema that holds no store (issue 42, defect 6): said as such, with the schemas that hold one; `db migrate` only
# suggested for a store that truly lacks migrations.


def schema_exists(url: str, schema: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() == (1,)


def test_a_mistyped_schema_is_said_not_to_exist_with_the_schemas_that_hold_a_store(make_postgres_store):
    store = make_postgres_store()
    typo = store.schema + "x"
    with pytest.raises(StoreError) as raised:
        open_store(f"{make_postgres_store.url}?schema={typo}", migrate=False)
    said = str(raised.value)
    assert said.startswith(f"no schema '{typo}' at ") and f", did you mean '{store.schema}';" in said
    assert said.partition("the schemas there that hold one: ")[2].startswith(store.schema)  # the likeliest first
    assert "migrate" not in said and "\n" not in said
    assert not schema_exists(make_postgres_store.url, typo)


def test_an_empty_schema_holds_no_store_and_is_left_empty(make_postgres_store):
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:8]}"
    make_postgres_store.schemas.append(schema)
    with psycopg.connect(make_postgres_store.url, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    with pytest.raises(StoreError, match=rf"^schema '{schema}' at \S+ holds no shiftchange store") as raised:
        open_store(f"{make_postgres_store.url}?schema={schema}", migrate=False)
    assert "migrate" not in str(raised.value)
    with psycopg.connect(make_postgres_store.url, autocommit=True) as connection:
        tables = connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    assert tables == (0,)


def test_a_store_that_lacks_migrations_is_told_to_run_db_migrate(make_postgres_store):
    import psycopg

    from shiftchange.stores.postgres import CREATE_SCHEMA_MIGRATIONS, MIGRATIONS, RECORD_MIGRATION

    schema = f"t_{uuid.uuid4().hex[:8]}"
    make_postgres_store.schemas.append(schema)
    with psycopg.connect(make_postgres_store.url, autocommit=True) as connection, connection.transaction():
        connection.execute(f'CREATE SCHEMA "{schema}"')
        connection.execute(f'SET LOCAL search_path TO "{schema}"')
        connection.execute(CREATE_SCHEMA_MIGRATIONS)
        for version, name, text in MIGRATIONS[:-1]:
            connection.execute(text)
            connection.execute(RECORD_MIGRATION, (version, name))
    said = rf"is at version {len(MIGRATIONS) - 1}, this code needs {len(MIGRATIONS)}: run `shiftchange db migrate`"
    with pytest.raises(StoreError, match=said):
        open_store(f"{make_postgres_store.url}?schema={schema}", migrate=False)


# ---- check_url: what opening would refuse, said without opening, creating or connecting to anything.


def test_check_url_names_the_kind_of_a_well_formed_url(tmp_path):
    assert check_url("memory:") == "memory"
    assert check_url(f"sqlite:///{tmp_path}/new.db?synchronous=normal") == "sqlite"
    assert check_url("postgresql://nobody:pw@192.0.2.1:1/nowhere?schema=s&sslmode=disable") == "postgresql"  # never connected
    assert check_url("postgres://localhost/db", pool_max=2) == "postgresql"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "options", "said"),
    [
        ("nosuch://x", {}, "not a store URL: 'nosuch://x'; use memory:, sqlite:///"),
        ("sqlite://host/x.db", {}, "an SQLite URL has no host"),
        ("sqlite:///DIR/x.db?synchronous=sometimes", {}, "synchronous must be one of"),
        ("sqlite:///DIR/x.db", {"busy_timeout_s": -1}, "busy_timeout_s must be a number of seconds >= 0"),
        ("sqlite:///DIR/x.db", {"pool_max": 2}, "SQLiteStore got an unexpected keyword argument 'pool_max'"),
        ("postgresql://h/db?schema=Bad-Name", {}, "schema must be a plain identifier"),
        ("postgresql://h/db", {"pool_max": 0}, "pool_max must be an integer >= 1"),
        (UNPARSABLE[0], {}, "not a PostgreSQL connection string"),
    ],
)
def test_check_url_refuses_what_open_store_would_and_makes_nothing(tmp_path, url, options, said):
    url = url.replace("DIR", str(tmp_path))
    with pytest.raises(InputError) as raised:
        check_url(url, **options)
    assert said in str(raised.value)
    with pytest.raises(InputError):
        open_store(url, **options)
    assert list(tmp_path.iterdir()) == []
