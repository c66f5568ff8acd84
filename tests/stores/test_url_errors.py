"""Store URLs refused by the store layer in Python: a typed error (InputError, a CoreError) in one line, nothing connected or made.

None of these needs a server: each URL is refused before anything connects.
"""

from __future__ import annotations

import pytest

from shiftchange.core import CoreError, InputError
from shiftchange.stores import migrate_url, open_store

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
