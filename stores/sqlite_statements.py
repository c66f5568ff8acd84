"""The SQLite store's tables and statements: how one record type maps to one table, the schema it creates, and every
statement the store runs. Column names come only from the record fields (`records.field_names` and their type hints), so
a field added to a record cannot be forgotten by the store; every value is a `?`. The store itself is `sqlite.SQLiteStore`.
"""

from __future__ import annotations

import typing
from typing import Any

from shiftchange.core.records import Attempt, Budget, Event, Intent, Plan, Task
from shiftchange.core.states import ATTEMPT_TERMINAL

from .columns import Columns

SCHEMA_VERSION = 5
"""Kept in `PRAGMA user_version`. A file of an older version listed in MIGRATIONS is migrated on open, under the write lock;
any other version is refused rather than guessed at."""


class _Table(Columns):
    """How one record type maps to one SQLite table: the shared columns, their SQL types, and the statements."""

    __slots__ = ("_updates",)

    # Python type of a field -> SQL column type; SQLite has no boolean, so a bool is read back through bool().
    SQL_TYPES: typing.ClassVar[dict[type, str]] = {
        str: "TEXT",
        int: "INTEGER",
        float: "REAL",
        bool: "INTEGER",
        Budget: "TEXT",
        Plan: "TEXT",
    }
    DECODERS: typing.ClassVar[dict[type, Any]] = {bool: bool, **Columns.DECODERS}

    def __init__(self, name: str, record_type: type, key: str) -> None:
        super().__init__(name, record_type, key)
        self._updates: dict[tuple[str, tuple[str, ...]], str] = {}
        """The UPDATE text per (template, changed fields): a contract writes one of a few sets of fields."""

    def definitions(self, key_constraint: str) -> str:
        """The column definitions of CREATE TABLE, in field order; the key column gets `key_constraint`."""
        lines = []
        for column in self.columns:
            line = column + " " + self.SQL_TYPES[self.kinds[column]]
            if column not in self.optional:
                line += " NOT NULL"
            if column == self.key:
                line += " " + key_constraint
            lines.append(line)
        return ",\n    ".join(lines)

    def select(self, clause: str) -> str:
        return "SELECT " + ", ".join(self.columns) + " FROM " + self.name + " " + clause

    def insert(self, columns: tuple[str, ...]) -> str:
        return "INSERT INTO " + self.name + " (" + ", ".join(columns) + ") VALUES (" + _placeholders(len(columns)) + ")"

    def update(self, guard: str) -> str:
        """An UPDATE template; `{assignments}` is filled per call from validated field names only."""
        return "UPDATE " + self.name + " SET {assignments} WHERE " + self.key + " = ? AND version = ?" + guard

    def update_sql(self, template: str, names: tuple[str, ...]) -> str:
        """The UPDATE of `template` setting `names` (already checked to be fields), built once per set of names."""
        sql = self._updates.get((template, names))
        if sql is None:
            assignments = ", ".join([name + " = ?" for name in names] + ["version = version + 1"])
            sql = self._updates[(template, names)] = template.format(assignments=assignments)
        return sql

    def to_row(self, record: Any, columns: tuple[str, ...]) -> tuple:
        return tuple(self.encode(column, getattr(record, column)) for column in columns)


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


TASKS = _Table("tasks", Task, "task_id")
ATTEMPTS = _Table("attempts", Attempt, "attempt_id")
INTENTS = _Table("intents", Intent, "key")
EVENTS = _Table("events", Event, "seq")

# The guard on every Attempt write; the states are bound as parameters, only their count is in the text.
_TERMINAL_STATES = tuple(sorted(ATTEMPT_TERMINAL))

# ---- Every statement the store runs. Column names come only from the record fields; every value is a `?`. ----

CREATE_TASKS = "CREATE TABLE tasks (\n    " + TASKS.definitions("PRIMARY KEY") + "\n)"
CREATE_ATTEMPTS = (
    "CREATE TABLE attempts (\n    "
    + ATTEMPTS.definitions("PRIMARY KEY")
    + ",\n    UNIQUE (task_id, number)"
    + ",\n    FOREIGN KEY (task_id) REFERENCES tasks (task_id)"
    + ",\n    FOREIGN KEY (previous_attempt_id) REFERENCES attempts (attempt_id)\n)"
)
CREATE_ATTEMPTS_BY_STATE = "CREATE INDEX attempts_by_state ON attempts (state)"
CREATE_INTENTS = (
    "CREATE TABLE intents (\n    "
    + INTENTS.definitions("PRIMARY KEY")
    + ",\n    FOREIGN KEY (task_id) REFERENCES tasks (task_id)"
    + ",\n    FOREIGN KEY (attempt_id) REFERENCES attempts (attempt_id)\n)"
)
CREATE_INTENTS_BY_ATTEMPT = "CREATE INDEX intents_by_attempt ON intents (attempt_id)"
# A plain INTEGER PRIMARY KEY (the rowid): the history is append-only, so the newest seq is never deleted and
# never reused; AUTOINCREMENT would add a write to sqlite_sequence on every commit for nothing.
# No foreign key on events: a refused call about an unknown task is history too.
CREATE_EVENTS = "CREATE TABLE events (\n    " + EVENTS.definitions("PRIMARY KEY") + "\n)"
# An index entry carries the rowid (here `seq`), so this index also yields one task's events in seq order.
CREATE_EVENTS_BY_TASK = "CREATE INDEX events_by_task ON events (task_id)"
# Schema 4: what processes sharing the file need besides the contracts (the runtime's control plane): tasks by state,
# and named leader leases (one admission leader among several orchestrator processes).
CREATE_TASKS_BY_STATE = "CREATE INDEX tasks_by_state ON tasks (state)"
CREATE_LEADERS = (
    "CREATE TABLE leaders (\n    name TEXT NOT NULL PRIMARY KEY,\n    holder TEXT NOT NULL,"
    "\n    generation INTEGER NOT NULL,\n    expires_at REAL NOT NULL\n)"
)
SCHEMA = (
    CREATE_TASKS,
    CREATE_ATTEMPTS,
    CREATE_ATTEMPTS_BY_STATE,
    CREATE_INTENTS,
    CREATE_INTENTS_BY_ATTEMPT,
    CREATE_EVENTS,
    CREATE_EVENTS_BY_TASK,
    CREATE_TASKS_BY_STATE,
    CREATE_LEADERS,
    # PRAGMA takes no parameters; the version is this module's own integer constant.
    "PRAGMA user_version = " + str(int(SCHEMA_VERSION)),
)

# Version 2 -> 3: events carry their refusal code, lateness, lease expiry and operation key as columns. Version 2 said a
# refusal was late only in its reason's words, and named the key only in the detail: this migration is the one place that
# reads them, once, so the old history keeps what it said. Codes other than the late ones were never recorded: NULL.
MIGRATE_2_TO_3 = (
    "ALTER TABLE events ADD COLUMN code TEXT",
    "ALTER TABLE events ADD COLUMN late INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE events ADD COLUMN expires_at REAL",
    "ALTER TABLE events ADD COLUMN operation_key TEXT",
    "UPDATE events SET late = 1, code = 'stale_fence' WHERE accepted = 0 AND reason LIKE 'late: stale fence%'",
    "UPDATE events SET late = 1, code = 'expired_lease'"
    " WHERE accepted = 0 AND reason LIKE 'late: the lease is no longer honoured (expired%'",
    "UPDATE events SET late = 1, code = 'not_leased'"
    " WHERE accepted = 0 AND reason LIKE 'late: the lease is no longer honoured (the Attempt%'",
    "UPDATE events SET operation_key = substr(detail, 1, instr(detail || ': ', ': ') - 1)"
    " WHERE kind IN ('grant_tool', 'report_call_failure') AND detail != ''",
    "UPDATE events SET operation_key = substr(detail, 1, instr(detail, ' -> ') - 1)"
    " WHERE kind = 'record_receipt' AND instr(detail, ' -> ') > 0",
    "PRAGMA user_version = 3",
)
# Version 3 -> 4: events say how many times their contract ran again after losing a race in the store. SQLite serializes
# every transaction behind its write lock, so no event it ever kept was retried: 0. Tasks by state and leader leases
# are new (the runtime's control plane).
MIGRATE_3_TO_4 = (
    "ALTER TABLE events ADD COLUMN retries INTEGER NOT NULL DEFAULT 0",
    CREATE_TASKS_BY_STATE,
    CREATE_LEADERS,
    "PRAGMA user_version = 4",
)
MIGRATE_4_TO_5 = (
    "UPDATE tasks SET state = 'cancelled' WHERE state = 'canceled'",
    "UPDATE events SET from_state = 'cancelled' WHERE from_state = 'canceled'",
    "UPDATE events SET to_state = 'cancelled' WHERE to_state = 'canceled'",
    "PRAGMA user_version = 5",
)
"""Version 4 -> 5: the Task state `canceled` is spelled `cancelled`, as the Attempt state always was (one word, one spelling).

Tasks in the old state are rewritten. So are the history's `from_state` and `to_state`, rather than every reader accepting
both spellings: the checkers (cancel_is_final), the timeline and spec coverage match those fields against the spec's names,
and a reader that forgot the old one would pass a reopened cancelled task in silence. The rewrite changes no meaning, since
no Attempt state was ever spelled `canceled`, so only Task states match. An event's `reason` and `detail` are what was said
at the time and are kept word for word. The task's `version` is left alone: the task is the same record, and since no row
leaves a terminal state, no write holding the old version could follow."""
MIGRATIONS: dict[int, tuple[str, ...]] = {2: MIGRATE_2_TO_3, 3: MIGRATE_3_TO_4, 4: MIGRATE_4_TO_5}
"""From each older schema version, the statements that bring a file to the next one."""

READ_SCHEMA_VERSION = "PRAGMA user_version"
COUNT_SCHEMA_OBJECTS = "SELECT count(*) FROM sqlite_master"
SET_WAL = "PRAGMA journal_mode = WAL"
SET_FOREIGN_KEYS = "PRAGMA foreign_keys = ON"
# Formatted only with a member of SYNCHRONOUS_LEVELS, checked before use: PRAGMA takes no parameters.
SET_SYNCHRONOUS = "PRAGMA synchronous = {level}"
BEGIN = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

SELECT_TASK = TASKS.select("WHERE task_id = ?")
SELECT_TASKS_IN_STATES = TASKS.select("WHERE state IN ({placeholders}) ORDER BY task_id")
SELECT_LEADER = "SELECT name, holder, generation, expires_at FROM leaders WHERE name = ?"
PUT_LEADER = (
    "INSERT INTO leaders (name, holder, generation, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, generation = excluded.generation, expires_at = excluded.expires_at"
)
INSERT_TASK = TASKS.insert(TASKS.columns)
UPDATE_TASK = TASKS.update("")

SELECT_ATTEMPT = ATTEMPTS.select("WHERE attempt_id = ?")
SELECT_ATTEMPTS_OF_TASK = ATTEMPTS.select("WHERE task_id = ? ORDER BY number")
SELECT_ATTEMPTS_IN_STATES = ATTEMPTS.select("WHERE state IN ({placeholders}) ORDER BY attempt_id")
COUNT_ATTEMPTS_OF_TASK = "SELECT count(*) FROM attempts WHERE task_id = ?"
INSERT_ATTEMPT = ATTEMPTS.insert(ATTEMPTS.columns)
UPDATE_ATTEMPT = ATTEMPTS.update(" AND state NOT IN (" + _placeholders(len(_TERMINAL_STATES)) + ")")

SELECT_INTENT = INTENTS.select("WHERE key = ?")
SELECT_INTENTS_OF_ATTEMPT = INTENTS.select("WHERE attempt_id = ? ORDER BY key")
INSERT_INTENT = INTENTS.insert(INTENTS.columns)
UPDATE_INTENT = INTENTS.update("")

_EVENT_FIELDS = tuple(column for column in EVENTS.columns if column != "seq")
INSERT_EVENT = EVENTS.insert(_EVENT_FIELDS)
assert not EVENTS._encoders, "append_event binds an Event's fields as they are: none may need encoding"
SELECT_EVENTS = EVENTS.select("WHERE seq > ? ORDER BY seq")
SELECT_EVENTS_OF_TASK = EVENTS.select("WHERE task_id = ? AND seq > ? ORDER BY seq")

_SELECT_BY_KEY = {"tasks": SELECT_TASK, "attempts": SELECT_ATTEMPT, "intents": SELECT_INTENT}
