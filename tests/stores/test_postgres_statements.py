"""The PostgreSQL store's fixed statements live in statements.sql, read whole at import; no server is needed here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shiftchange.stores.postgres import statements
from shiftchange.stores.postgres.statements import SQL, read_statements

FOLDER = Path(statements.__file__).parent


def test_every_statement_in_the_file_is_used_by_the_store_and_each_has_its_column_lists_filled():
    """Goal: the file holds no dead statement, and no brace is left for the server to choke on."""
    sources = "\n".join(path.read_text(encoding="utf-8") for path in FOLDER.glob("*.py"))
    unused = [name for name in SQL if len(re.findall(rf"\b{name}\b", sources)) < 2]  # bound in statements.py, used elsewhere
    assert not unused, f"statements.sql names statements no module uses: {unused}"
    assert all("{" not in text and "}" not in text for text in SQL.values())
    assert ", ".join(statements.ATTEMPTS.columns) in SQL["LOCK_CLAIMABLE_ONE"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("-- name: A\nSELECT 1\n-- name: A\nSELECT 2\n", "names A twice"),
        ("-- name: A\n-- only a comment\n", "gives A no statement"),
        ("-- name: A\nSELECT {nobody} FROM tasks\n", "names nobody, which nothing fills"),
    ],
)
def test_a_malformed_statements_file_is_refused_naming_what_is_wrong(text, why):
    with pytest.raises(ValueError, match=why):
        read_statements(text)


def test_a_statement_is_its_lines_without_comments_joined_by_one_space():
    found = read_statements("-- header\n-- name: A\n  SELECT {tasks}\n  -- why\n  FROM tasks {lock}\n")
    assert found == {"A": f"SELECT {', '.join(statements.TASKS.columns)} FROM tasks FOR NO KEY UPDATE"}
