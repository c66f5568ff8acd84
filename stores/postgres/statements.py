"""Every statement a PostgreSQL store runs, and how one record type maps to one table. Column names come only from the
record fields; every value is a parameter.

The fixed statements are in statements.sql, beside this module, by name, each with why it is written so; they are read
once at import (`read_statements`) with each table's column list filled in from its record type. What is built here is
what depends on the call: one record's INSERT or many records' (`_Table.insert`, `insert_many`), the UPDATE of the
columns a transaction changed with its version and terminal-state guard (`_Table.update`), and the INSERT of a
transaction's events (one text per number of rows)."""

from __future__ import annotations

import operator
import re
import string
import typing
from importlib import resources
from typing import Any

from shiftchange.core.records import (
    Attempt,
    Budget,
    Event,
    Intent,
    Leader,
    Plan,
    Task,
)
from shiftchange.core.states import ATTEMPT_TERMINAL

from ..columns import Columns

ROW_LOCK = "FOR NO KEY UPDATE"
"""The lock a read that precedes a write takes (see the module docstring for why not FOR UPDATE)."""


_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A plain, unquoted PostgreSQL identifier (at most 63 bytes): what a schema name may be."""


# ---- tables: how one record type maps to one table, derived from its fields as the SQLite store does.

_TERMINAL_SQL = "(" + ", ".join("'" + state + "'" for state in sorted(ATTEMPT_TERMINAL)) + ")"
"""The guard on every Attempt write, written into the SQL text (the states are plain identifiers, checked below)."""
assert all(_SCHEMA_NAME.fullmatch(state) for state in ATTEMPT_TERMINAL), "terminal states are written into the SQL text as they are"


class _Table(Columns):
    """How one record type maps to one PostgreSQL table: the shared columns, their column types, and the statements."""

    __slots__ = ("_encoded_at", "_updates", "_values", "guard_read")

    SQL_TYPES: typing.ClassVar[dict[type, str]] = {
        str: "text",
        int: "bigint",
        float: "double precision",
        bool: "boolean",
        Budget: "text",
        Plan: "text",
    }
    """Python type of a field -> PostgreSQL column type (information_schema's `data_type`): what the schema files declare."""

    def __init__(self, name: str, record_type: type, key: str) -> None:
        super().__init__(_identifier(name), record_type, key)
        for column in self.columns:
            _identifier(column)
        self._updates: dict[tuple[tuple[str, ...], bool, int], str] = {}
        self._values = operator.attrgetter(*self.columns)
        self._encoded_at = tuple((index, self._encoders[column]) for index, column in enumerate(self.columns) if column in self._encoders)
        guarded = ", state" if "state" in self.columns else ""
        self.guard_read = f"SELECT version{guarded} FROM {self.name} WHERE {key} = %s"
        """A plain read of what an UPDATE's guard looked at: only to say why it matched no row."""

    def select(self, clause: str) -> str:
        return "SELECT " + ", ".join(self.columns) + " FROM " + self.name + " " + clause

    def insert(self) -> str:
        """An INSERT of every column whose row count the server checks: a duplicate key aborts the transaction (SCG01)."""
        placeholders = ", ".join(["%s"] * len(self.columns))
        added = f"INSERT INTO {self.name} ({', '.join(self.columns)}) VALUES ({placeholders}) ON CONFLICT DO NOTHING RETURNING 1"
        return f"WITH added AS ({added}) SELECT shiftchange_guard(count(*), %s) FROM added"

    def insert_many(self) -> str:
        """One INSERT of any number of rows, all of which the server checks went in (SCG01).

        Its parameters: one array per column (the rows' values in that column,
        each cast to the column's type), then the number of rows and the
        write's index. One statement text for any number of rows.
        """
        arrays = ", ".join(f"%s::{self.SQL_TYPES[self.kinds[column]]}[]" for column in self.columns)
        added = f"INSERT INTO {self.name} ({', '.join(self.columns)}) SELECT * FROM unnest({arrays}) ON CONFLICT DO NOTHING RETURNING 1"
        return f"WITH added AS ({added}) SELECT shiftchange_guard((count(*) = %s)::int, %s) FROM added"

    def update_sql(self, names: tuple[str, ...], terminal_guard: bool, steps: int = 1) -> str:
        """The guarded UPDATE setting `names` (already checked to be writable fields), built once per set of names.

        Its parameters: the new values, the key, the version read, and the
        write's index in its transaction. It is sent without waiting for an
        answer: the server counts the rows it changed, and anything but one
        aborts the transaction (`shiftchange_guard`, SQLSTATE SCG01). `steps`
        updates merged into one move the version on by that many.
        """
        sql_text = self._updates.get((names, terminal_guard, steps))
        if sql_text is None:
            assignments = ", ".join([name + " = %s" for name in names] + [f"version = version + {steps}"])
            guard = f" AND state NOT IN {_TERMINAL_SQL}" if terminal_guard else ""
            changed = f"UPDATE {self.name} SET {assignments} WHERE {self.key} = %s AND version = %s{guard} RETURNING 1"
            sql_text = f"WITH changed AS ({changed}) SELECT shiftchange_guard(count(*), %s) FROM changed"
            self._updates[(names, terminal_guard, steps)] = sql_text
        return sql_text

    def to_row(self, record: Any) -> tuple:
        """The record's column values in column order, Budget and Plan as JSON text (a row of every write and insert)."""
        values = self._values(record)
        if not self._encoded_at:
            return values
        values = list(values)
        for index, encoder in self._encoded_at:
            if values[index] is not None:
                values[index] = encoder(values[index])
        return tuple(values)


def _identifier(name: str) -> str:
    """A record field or table name, checked to need no quoting: names come only from the records, never from input."""
    assert _SCHEMA_NAME.fullmatch(name), f"{name!r} is not a plain identifier"
    return name


TASKS = _Table("tasks", Task, "task_id")
ATTEMPTS = _Table("attempts", Attempt, "attempt_id")
INTENTS = _Table("intents", Intent, "key")
EVENTS = _Table("events", Event, "seq")
LEADERS = _Table("leaders", Leader, "name")
TABLES = (TASKS, ATTEMPTS, INTENTS, EVENTS, LEADERS)


# ---- Every fixed statement, read from statements.sql: the store's SQL in one file a porter reads whole.

_PLACEHOLDERS = {
    "lock": ROW_LOCK,
    **{table.name: ", ".join(table.columns) for table in TABLES},
    "attempts_as_picked": ", ".join(f"picked.{column}" for column in ATTEMPTS.columns),
    "tasks_as_task": ", ".join(f"task.{column}" for column in TASKS.columns),
}
"""What a statement in statements.sql may name in braces: the row lock, and each table's columns from its record's fields."""


def read_statements(text: str) -> dict[str, str]:
    """The statements of a statements.sql text by name: each from its `-- name: NAME` line to the next, comment lines
    left out, its lines joined by one space, its placeholders filled (`_PLACEHOLDERS`). A name given twice, a statement
    with no text, or a placeholder nobody defines is a `ValueError` naming it (the file is read at import: it fails at once)."""
    found: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("-- name: "):
            name = line.removeprefix("-- name: ").strip()
            if name in found:
                raise ValueError(f"statements.sql names {name} twice")
            lines = found[name] = []
        elif line.strip() and not line.lstrip().startswith("--") and lines is not None:
            lines.append(line.strip())
    statements = {}
    for name, body in found.items():
        if not body:
            raise ValueError(f"statements.sql gives {name} no statement")
        unknown = {field for _, field, _, _ in string.Formatter().parse(" ".join(body)) if field is not None} - set(_PLACEHOLDERS)
        if unknown:
            raise ValueError(f"statements.sql's {name} names {', '.join(sorted(unknown))}, which nothing fills")
        statements[name] = " ".join(body).format(**_PLACEHOLDERS)
    return statements


SQL = read_statements(resources.files(__package__).joinpath("statements.sql").read_text(encoding="utf-8"))
"""Every fixed statement by name (statements.sql); the names below are the ones the store's modules use."""

BEGIN, SETTINGS, COMMIT, ROLLBACK, NOW = SQL["BEGIN"], SQL["SETTINGS"], SQL["COMMIT"], SQL["ROLLBACK"], SQL["NOW"]
SELECT_TASK, LOCK_TASK, LOCK_TASK_ROW = SQL["SELECT_TASK"], SQL["LOCK_TASK"], SQL["LOCK_TASK_ROW"]
SELECT_TASKS_IN_STATES, LOCK_TASKS, SELECT_WORKSPACE = SQL["SELECT_TASKS_IN_STATES"], SQL["LOCK_TASKS"], SQL["SELECT_WORKSPACE"]
SELECT_ATTEMPT, LOCK_ATTEMPT = SQL["SELECT_ATTEMPT"], SQL["LOCK_ATTEMPT"]
SELECT_ATTEMPTS_OF_TASK, LOCK_ATTEMPTS_OF_TASK = SQL["SELECT_ATTEMPTS_OF_TASK"], SQL["LOCK_ATTEMPTS_OF_TASK"]
SELECT_ATTEMPTS_IN_STATES, COUNT_ATTEMPTS_OF_TASK = SQL["SELECT_ATTEMPTS_IN_STATES"], SQL["COUNT_ATTEMPTS_OF_TASK"]
LOCK_CLAIMABLE, LOCK_CLAIMABLE_IN = SQL["LOCK_CLAIMABLE"], SQL["LOCK_CLAIMABLE_IN"]
LOCK_CLAIMABLE_ONE, LOCK_CLAIMABLE_ONE_IN = SQL["LOCK_CLAIMABLE_ONE"], SQL["LOCK_CLAIMABLE_ONE_IN"]
PICK_WITH_TASK, PICK_WITH_TASK_IN = SQL["PICK_WITH_TASK"], SQL["PICK_WITH_TASK_IN"]
PICKED_SIBLINGS, FORGET_PICKED = SQL["PICKED_SIBLINGS"], SQL["FORGET_PICKED"]
LOCK_TASK_GUARD, COUNT_GUARD, PARENTS_GUARD = SQL["LOCK_TASK_GUARD"], SQL["COUNT_GUARD"], SQL["PARENTS_GUARD"]
SELECT_INTENT, LOCK_INTENT = SQL["SELECT_INTENT"], SQL["LOCK_INTENT"]
SELECT_INTENTS_OF_ATTEMPT, LOCK_INTENTS_OF_ATTEMPT = SQL["SELECT_INTENTS_OF_ATTEMPT"], SQL["LOCK_INTENTS_OF_ATTEMPT"]
LOCK_COUNTER, NUMBER_EVENTS, ANY_UNNUMBERED = SQL["LOCK_COUNTER"], SQL["NUMBER_EVENTS"], SQL["ANY_UNNUMBERED"]
SELECT_EVENTS, SELECT_EVENTS_OF_TASK, NOTIFY = SQL["SELECT_EVENTS"], SQL["SELECT_EVENTS_OF_TASK"], SQL["NOTIFY"]
LOCK_LEADER, PUT_LEADER = SQL["LOCK_LEADER"], SQL["PUT_LEADER"]
INSERT_TASK, INSERT_ATTEMPT, INSERT_INTENT = TASKS.insert(), ATTEMPTS.insert(), INTENTS.insert()

_EVENT_FIELDS = tuple(column for column in EVENTS.columns if column != "seq")
assert not EVENTS._encoders, "append_event binds an Event's fields as they are: none may need encoding"
# Every event of a transaction is sent with its COMMIT, in one INSERT of one array per field whatever their number;
# `pos` and `xid` come from their defaults (see migrations/postgresql/0004) in the order appended, and `seq` stays NULL
# until the sequencer numbers it.
_EVENT_ARRAYS = ", ".join(f"%s::{EVENTS.SQL_TYPES[EVENTS.kinds[column]]}[]" for column in _EVENT_FIELDS)
INSERT_EVENTS = (
    f"INSERT INTO events ({', '.join(_EVENT_FIELDS)}) SELECT {', '.join(_EVENT_FIELDS)}"
    f" FROM unnest({_EVENT_ARRAYS}) WITH ORDINALITY AS appended ({', '.join(_EVENT_FIELDS)}, appended_order) ORDER BY appended_order"
)
"""Any number of events: one array per field (a bulk intake's)."""
BULK_ROWS_MIN = 8
"""A message of nothing but more inserts than this (a bulk intake) sends one INSERT per table (`_Table.insert_many`); a
transaction's events up to this many go as rows of plain parameters (`INSERT_EVENT_ROWS`: a contract appends one to four, and
turning each field into an array costs the client more than the server saves), more as arrays (`INSERT_EVENTS`)."""
_EVENT_ROW = "(" + ", ".join(["%s"] * len(_EVENT_FIELDS)) + ")"
INSERT_EVENT_ROWS = tuple(
    f"INSERT INTO events ({', '.join(_EVENT_FIELDS)}) VALUES " + ", ".join([_EVENT_ROW] * count) for count in range(BULK_ROWS_MIN + 1)
)
"""Index n: the INSERT of n events, each a row of parameters, in the order appended (pos from its default, row by row)."""
GUARD_SQLSTATE = "SCG01"
"""What shiftchange_guard raises when a guarded write matched no row (migrations/postgresql/0004)."""
