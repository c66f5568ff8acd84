"""Every statement a PostgreSQL store's transaction runs, and how one record type maps to one table. Column names come
only from the record fields; every value is a parameter."""

from __future__ import annotations

import operator
import re
import typing
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


# ---- Every statement a transaction runs. Column names come only from the record fields; every value is a parameter. ----

BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

SELECT_TASK = TASKS.select("WHERE task_id = %s")
LOCK_TASK = SELECT_TASK + " " + ROW_LOCK
LOCK_TASK_ROW = "SELECT 1 FROM tasks WHERE task_id = %s " + ROW_LOCK
SELECT_TASKS_IN_STATES = TASKS.select("WHERE state = ANY(%s) ORDER BY task_id")
LOCK_TASKS = TASKS.select("WHERE task_id = ANY(%s) ORDER BY task_id " + ROW_LOCK)
INSERT_TASK = TASKS.insert()

SELECT_ATTEMPT = ATTEMPTS.select("WHERE attempt_id = %s")
LOCK_ATTEMPT = SELECT_ATTEMPT + " " + ROW_LOCK
SELECT_ATTEMPTS_OF_TASK = ATTEMPTS.select("WHERE task_id = %s ORDER BY number")
LOCK_ATTEMPTS_OF_TASK = SELECT_ATTEMPTS_OF_TASK + " " + ROW_LOCK
SELECT_ATTEMPTS_IN_STATES = ATTEMPTS.select("WHERE state = ANY(%s) ORDER BY attempt_id")
_CLAIM_ORDER = " ORDER BY created_at, attempt_id LIMIT %s " + ROW_LOCK + " SKIP LOCKED"
# A worker serves one workspace: the filter is in the query (one primary-key probe of tasks per candidate, in claim
# order), so Attempts of other workspaces are neither returned nor locked, and never starve this worker's queue.
_IN_WORKSPACE = " AND EXISTS (SELECT 1 FROM tasks WHERE tasks.task_id = attempts.task_id AND tasks.workspace = %s)"
LOCK_CLAIMABLE = ATTEMPTS.select("WHERE state = ANY(%s)" + _CLAIM_ORDER)
LOCK_CLAIMABLE_IN = ATTEMPTS.select("WHERE state = ANY(%s)" + _IN_WORKSPACE + _CLAIM_ORDER)
# One state, as a claim asks: `state = %s` lets the planner read attempts_claim_order in order and stop after `limit`
# rows (0.06 ms with 3,000 admitted), where `= ANY` sorts every admitted Attempt first (1.5 ms).
LOCK_CLAIMABLE_ONE = ATTEMPTS.select("WHERE state = %s" + _CLAIM_ORDER)
LOCK_CLAIMABLE_ONE_IN = ATTEMPTS.select("WHERE state = %s" + _IN_WORKSPACE + _CLAIM_ORDER)
COUNT_ATTEMPTS_OF_TASK = "SELECT count(*) FROM attempts WHERE task_id = %s"


def _pick_with_task(in_workspace: bool) -> str:
    """The claim queue's pick of one Attempt with its task, both locked, in the order a claim takes them (the Attempt first).

    Each row is the Attempt's columns, then its task's. The task's id is kept
    as a transaction-local setting, so that the next statement of the same
    message (`PICKED_SIBLINGS`, with a snapshot of its own, taken once these
    locks are held) reads and locks the task's Attempts: what `attempts_of`
    would read one round trip later.
    """
    where = "state = %s" + (_IN_WORKSPACE if in_workspace else "")
    picked = f"SELECT * FROM attempts WHERE {where} ORDER BY created_at, attempt_id LIMIT 1 {ROW_LOCK} SKIP LOCKED"
    columns = ", ".join([f"picked.{column}" for column in ATTEMPTS.columns] + [f"task.{column}" for column in TASKS.columns])
    return (
        f"WITH picked AS ({picked}) SELECT {columns}, set_config('{PICKED_SETTING}', task.task_id, true)"
        f" FROM picked JOIN tasks AS task ON task.task_id = picked.task_id {ROW_LOCK} OF task"
    )


PICKED_SETTING = "shiftchange.picked_task"
FORGET_PICKED = f"SELECT set_config('{PICKED_SETTING}', '', true)"
PICK_WITH_TASK = _pick_with_task(False)
PICK_WITH_TASK_IN = _pick_with_task(True)
PICKED_SIBLINGS = ATTEMPTS.select(f"WHERE task_id = current_setting('{PICKED_SETTING}') ORDER BY number {ROW_LOCK}")
# insert_attempt's checks, sent with its INSERT: the task exists (and is locked), and the Attempt is its next number.
# Every guarded statement takes the write's index as its last parameter.
LOCK_TASK_GUARD = "WITH task AS (SELECT 1 FROM tasks WHERE task_id = %s " + ROW_LOCK + ") SELECT shiftchange_guard(count(*), %s) FROM task"
COUNT_GUARD = (
    "WITH siblings AS (SELECT count(*) AS number FROM attempts WHERE task_id = %s)"
    " SELECT shiftchange_guard((number = %s)::int, %s) FROM siblings"
)
SELECT_WORKSPACE = "SELECT workspace FROM tasks WHERE task_id = %s"
INSERT_ATTEMPT = ATTEMPTS.insert()

SELECT_INTENT = INTENTS.select("WHERE key = %s")
LOCK_INTENT = SELECT_INTENT + " " + ROW_LOCK
SELECT_INTENTS_OF_ATTEMPT = INTENTS.select("WHERE attempt_id = %s ORDER BY key")
LOCK_INTENTS_OF_ATTEMPT = SELECT_INTENTS_OF_ATTEMPT + " " + ROW_LOCK
PARENTS_GUARD = (
    "SELECT shiftchange_guard((EXISTS (SELECT 1 FROM tasks WHERE task_id = %s)"
    " AND EXISTS (SELECT 1 FROM attempts WHERE attempt_id = %s))::int, %s)"
)
INSERT_INTENT = INTENTS.insert()

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
NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"
"""The server's time, read after the statement before it finished (its lock waits included)."""
# The sequencer (see the module docstring): one at a time, holding event_counter's row for the batch only. The lock
# is its own statement so that the numbering statement's snapshot is taken after it: it then sees every event the
# previous batch numbered as numbered.
LOCK_COUNTER = "SELECT last_seq FROM event_counter FOR UPDATE"
NUMBER_EVENTS = (
    "WITH unnumbered AS (SELECT pos, min(pos) OVER (PARTITION BY xid) AS first FROM events WHERE seq IS NULL),"
    " ranked AS (SELECT pos, row_number() OVER (ORDER BY first, pos) AS rank FROM unnumbered),"
    " numbered AS (UPDATE events SET seq = (SELECT last_seq FROM event_counter) + ranked.rank FROM ranked"
    " WHERE events.pos = ranked.pos AND events.seq IS NULL RETURNING 1)"
    " UPDATE event_counter SET last_seq = last_seq + (SELECT count(*) FROM numbered) RETURNING last_seq"
)
ANY_UNNUMBERED = "SELECT EXISTS (SELECT 1 FROM events WHERE seq IS NULL)"
GUARD_SQLSTATE = "SCG01"
"""What shiftchange_guard raises when a guarded write matched no row (migrations/postgresql/0004)."""
LOCK_LEADER = LEADERS.select("WHERE name = %s " + ROW_LOCK)
# As the SQLite store writes it: the caller read the row (locked, if it exists) in this transaction and decided. Two
# transactions that both found no row both write; the second waits for the first's commit and overwrites it, and the
# loser's next fenced read of the lease sees it lost.
PUT_LEADER = (
    "INSERT INTO leaders (name, holder, generation, expires_at) VALUES (%s, %s, %s, %s) ON CONFLICT (name)"
    " DO UPDATE SET holder = excluded.holder, generation = excluded.generation, expires_at = excluded.expires_at"
)
SELECT_EVENTS = EVENTS.select("WHERE seq > %s ORDER BY seq")
SELECT_EVENTS_OF_TASK = EVENTS.select("WHERE task_id = %s AND seq > %s ORDER BY seq")


SETTINGS = (
    "SELECT set_config('search_path', %s, true), set_config('lock_timeout', %s, true),"
    " set_config('idle_in_transaction_session_timeout', %s, true)"
)
"""What every transaction sets first, for itself alone: the store's schema and its two lock bounds. Nothing is set on a
session, so no transaction depends on what an earlier one left on its connection (a transaction-mode pooler such as
PgBouncer hands each transaction to whichever server connection is free)."""
