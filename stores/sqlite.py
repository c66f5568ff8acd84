"""SQLiteStore: the storage interface on one SQLite file that several processes may share.

Why these choices:

- `BEGIN IMMEDIATE` with the module's own transaction handling switched off
  (`isolation_level=None`). Python's sqlite3 otherwise begins a transaction
  lazily at the first write, so a contract's reads would run before it holds
  the write lock and another process could change the rows in between.
  IMMEDIATE takes the write lock at BEGIN: each contract's read-then-write is
  serialized against every other process, and commits or rolls back whole.
- WAL journal mode. Readers (a checker polling `events()`) neither block the
  writer nor see its uncommitted rows. A process killed at any instant
  (SIGKILL included) leaves the file at its last commit: the next opener
  ignores a WAL tail that was never committed. `synchronous=FULL` syncs the
  WAL at every commit, so a committed contract survives a power cut as well;
  NORMAL keeps atomicity but may lose the latest commits on a power cut.
- Guards in the writes. Every update is `UPDATE ... WHERE <id> = ? AND version
  = ?` (and, for an Attempt, `AND state NOT IN <terminal>`): the write lock
  alone would make a check in Python safe here, but the guard in the WHERE
  clause is what stays correct when this store is ported to a server database
  running at READ COMMITTED, and it keeps one rule for every backend.
- Columns derived from the record dataclasses (`records.field_names` and their
  type hints), so a field added to a record cannot be forgotten by the store;
  Budget and Plan are JSON text, booleans 0/1.

Alternatives set aside: an ORM is a dependency and a layer a porter must see
through; one JSON blob per record loses the indexes and the column guards.
"""

from __future__ import annotations

import inspect
import os
import sqlite3
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shiftchange.core.errors import InputError, NotFound, StoreConflict, StoreError
from shiftchange.core.records import Attempt, Budget, Event, Intent, Leader, Plan, Task, new_event
from shiftchange.core.states import ATTEMPT_TERMINAL
from shiftchange.core.store import Store, Transaction

from .columns import Columns, check_changes

__all__ = ["BUSY_TIMEOUT_S", "MIGRATIONS", "SCHEMA_VERSION", "SYNCHRONOUS_LEVELS", "SQLiteStore"]

BUSY_TIMEOUT_S = 30.0
"""How long a transaction waits for another process to release the write lock before it gives up."""

SCHEMA_VERSION = 5
"""Kept in `PRAGMA user_version`. A file of an older version listed in MIGRATIONS is migrated on open, under the write lock;
any other version is refused rather than guessed at."""

SYNCHRONOUS_LEVELS = ("NORMAL", "FULL", "EXTRA")
"""The `PRAGMA synchronous` levels allowed. Each keeps the file consistent through a power cut; OFF may not, so it is refused."""


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


def _refusal(error: sqlite3.IntegrityError, what: str) -> Exception:
    """The typed error for a constraint the database enforced."""
    name = getattr(error, "sqlite_errorname", "")
    if name in ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"):
        return StoreConflict(f"{what} already exists")
    if name == "SQLITE_CONSTRAINT_FOREIGNKEY":
        return NotFound(f"{what} names a task or attempt that does not exist")
    return InputError(f"{what} was refused by the database: {error}")


class _SQLiteTransaction(Transaction):
    """Record access inside one `BEGIN IMMEDIATE` transaction; every read builds fresh records from rows."""

    __slots__ = ("_connection",)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection: sqlite3.Connection | None = connection

    def end(self) -> None:
        # A transaction object kept past its `with` block would write outside any lock; make that fail loudly.
        self._connection = None

    def _execute(self, sql: str, parameters: Iterable[Any]) -> sqlite3.Cursor:
        if self._connection is None:
            raise RuntimeError("this transaction has ended; open a new one with store.transaction()")
        try:
            return self._connection.execute(sql, tuple(parameters))
        except UnicodeEncodeError as error:
            # The memory store would keep such text; refusing it the same way everywhere keeps the stores' answers alike.
            raise InputError(f"text the store cannot encode as UTF-8 ({error.reason} at position {error.start})") from None

    def _one(self, table: _Table, sql: str, parameters: tuple) -> Any:
        row = self._execute(sql, parameters).fetchone()
        return None if row is None else table.from_row(row)

    def _all(self, table: _Table, sql: str, parameters: tuple) -> list:
        return [table.from_row(row) for row in self._execute(sql, parameters).fetchall()]

    # Reads.
    def task(self, task_id: str) -> Task | None:
        return self._one(TASKS, SELECT_TASK, (task_id,))

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self._one(ATTEMPTS, SELECT_ATTEMPT, (attempt_id,))

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return self._all(ATTEMPTS, SELECT_ATTEMPTS_OF_TASK, (task_id,))

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        wanted = tuple(dict.fromkeys(states))
        if not wanted:
            return []
        sql = SELECT_ATTEMPTS_IN_STATES.format(placeholders=_placeholders(len(wanted)))
        return self._all(ATTEMPTS, sql, wanted)

    def intent(self, key: str) -> Intent | None:
        return self._one(INTENTS, SELECT_INTENT, (key,))

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        wanted = tuple(dict.fromkeys(states))
        if not wanted:
            return []
        return self._all(TASKS, SELECT_TASKS_IN_STATES.format(placeholders=_placeholders(len(wanted))), wanted)

    def leader(self, name: str) -> Leader | None:
        row = self._execute(SELECT_LEADER, (name,)).fetchone()
        return None if row is None else Leader(*row)

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self._execute(PUT_LEADER, (name, holder, generation, expires_at))

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return self._all(INTENTS, SELECT_INTENTS_OF_ATTEMPT, (attempt_id,))

    # Guarded writes.
    def insert_task(self, task: Task) -> None:
        self._insert(TASKS, INSERT_TASK, task, f"task {task.task_id!r}")

    def update_task(self, task: Task, **changes: Any) -> None:
        self._update(TASKS, UPDATE_TASK, task, changes, ())

    def insert_attempt(self, attempt: Attempt) -> None:
        # The write lock is held since BEGIN, so no other process can append between this count and the insert.
        (siblings,) = self._execute(COUNT_ATTEMPTS_OF_TASK, (attempt.task_id,)).fetchone()
        if siblings != attempt.number - 1:
            raise StoreConflict(f"attempt numbers must run 1..N: task {attempt.task_id!r} has {siblings}, got {attempt.number}")
        self._insert(ATTEMPTS, INSERT_ATTEMPT, attempt, f"attempt {attempt.attempt_id!r}")

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self._update(ATTEMPTS, UPDATE_ATTEMPT, attempt, changes, _TERMINAL_STATES)

    def insert_intent(self, intent: Intent) -> None:
        self._insert(INTENTS, INSERT_INTENT, intent, f"intent {intent.key!r}")

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self._update(INTENTS, UPDATE_INTENT, intent, changes, ())

    # Every field spelled out, as the memory store does (an event per contract call); an Event has no column to encode.
    def append_event(
        self,
        *,
        at: float,
        actor: str,
        kind: str,
        task_id: str,
        attempt_id: str | None,
        accepted: bool,
        reason: str,
        from_state: str | None = None,
        to_state: str | None = None,
        generation: int | None = None,
        worker_id: str | None = None,
        detail: str = "",
        code: str | None = None,
        late: bool = False,
        expires_at: float | None = None,
        operation_key: str | None = None,
        retries: int = 0,
    ) -> Event:
        values = (at, actor, kind, task_id, attempt_id, accepted, reason, from_state, to_state, generation, worker_id, detail)
        values += (code, late, expires_at, operation_key, retries)
        try:
            cursor = self._execute(INSERT_EVENT, values)
        except sqlite3.IntegrityError as error:
            raise _refusal(error, f"event {kind!r}") from error
        return new_event(cursor.lastrowid, *values)

    def _insert(self, table: _Table, sql: str, record: Any, what: str) -> None:
        try:
            self._execute(sql, table.to_row(record, table.columns))
        except sqlite3.IntegrityError as error:
            raise _refusal(error, what) from error

    def _update(self, table: _Table, template: str, record: Any, changes: dict[str, Any], guard: tuple) -> None:
        """Write `changes` only if the row still has `record.version` (and passes `guard`); then mirror them on `record`."""
        check_changes(table, changes)
        names = tuple(changes)
        identity = getattr(record, table.key)
        parameters = [table.encode(name, value) for name, value in changes.items()] + [identity, record.version, *guard]
        try:
            cursor = self._execute(table.update_sql(template, names), parameters)
        except sqlite3.IntegrityError as error:
            raise _refusal(error, f"{table.record_type.__name__.lower()} {identity!r}") from error
        if cursor.rowcount != 1:
            raise StoreConflict(self._why_refused(table, record, f"{table.record_type.__name__.lower()} {identity!r}"))
        for name, value in changes.items():
            setattr(record, name, value)
        record.version += 1

    def _why_refused(self, table: _Table, record: Any, what: str) -> str:
        """Explain a refused update; the guard already decided, this read only words the message."""
        stored = self._one(table, _SELECT_BY_KEY[table.name], (getattr(record, table.key),))
        if stored is None:
            return f"{what} does not exist"
        if stored.version != record.version:
            return f"{what} changed since it was read (stored version {stored.version}, read {record.version})"
        return f"{what} is terminal ({stored.state}) and immutable"


assert tuple(inspect.signature(_SQLiteTransaction.append_event).parameters)[1:] == _EVENT_FIELDS, "append_event must take every field"


class SQLiteStore(Store):
    """Records in one SQLite file (WAL, guarded writes); several processes may open the same file at once.

    `synchronous` is the durability level: FULL (default) syncs every commit;
    NORMAL keeps every transaction atomic but may lose the latest commits on a
    power cut; EXTRA is FULL plus SQLite's additional syncs. `busy_timeout_s`
    bounds how long a transaction waits for the write lock held by another
    process before it raises StoreError.
    """

    races: typing.ClassVar[bool] = False
    """BEGIN IMMEDIATE takes the write lock first: transactions never run side by side, so none loses a race."""

    @staticmethod
    def check_options(synchronous: Any = "FULL", *, busy_timeout_s: Any = BUSY_TIMEOUT_S) -> None:
        """InputError for an option the constructor would refuse, said before any file is opened (`stores.check_url`)."""
        if synchronous not in SYNCHRONOUS_LEVELS:
            raise InputError(f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, not {synchronous!r}")
        if isinstance(busy_timeout_s, bool) or not isinstance(busy_timeout_s, int | float) or not busy_timeout_s >= 0:
            raise InputError(f"busy_timeout_s must be a number of seconds >= 0, not {busy_timeout_s!r}")

    def __init__(self, path: str | os.PathLike[str], synchronous: str = "FULL", *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.check_options(synchronous, busy_timeout_s=busy_timeout_s)
        self.path = Path(path)
        self.synchronous = synchronous
        self.busy_timeout_s = float(busy_timeout_s)
        self._in_transaction = False
        self._connection: sqlite3.Connection | None = None
        if not self.path.parent.is_dir():
            raise StoreError(f"cannot open store {self.path}: directory {self.path.parent} does not exist")
        try:
            # `timeout` is SQLite's busy timeout: wait for another process's lock instead of failing at once.
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout_s)
        except sqlite3.Error as error:
            raise StoreError(f"cannot open store {self.path}: {error}") from error
        try:
            self._configure(connection)
        except sqlite3.Error as error:
            connection.close()
            raise StoreError(f"cannot open store {self.path}: {error}") from error
        except StoreError:
            connection.close()
            raise
        self._connection = connection

    def _configure(self, connection: sqlite3.Connection) -> None:
        # Look before changing anything, so a foreign file is refused untouched (not even switched to WAL).
        self._check_schema(connection)
        (mode,) = connection.execute(SET_WAL).fetchone()
        if mode.lower() != "wal":
            raise StoreError(f"cannot open store {self.path}: WAL journal mode unavailable (got {mode!r})")
        connection.execute(SET_SYNCHRONOUS.format(level=self.synchronous))
        connection.execute(SET_FOREIGN_KEYS)
        connection.execute(BEGIN)
        try:
            # Checked again under the write lock: another process may have created or migrated the schema meanwhile.
            version = self._check_schema(connection)
            if version == 0:
                for statement in SCHEMA:
                    connection.execute(statement)
            while version in MIGRATIONS:
                for statement in MIGRATIONS[version]:
                    connection.execute(statement)
                (version,) = connection.execute(READ_SCHEMA_VERSION).fetchone()
            connection.execute(COMMIT)
        except BaseException:
            if connection.in_transaction:
                connection.execute(ROLLBACK)
            raise

    def _check_schema(self, connection: sqlite3.Connection) -> int:
        """The file's schema version: SCHEMA_VERSION, one MIGRATIONS can bring up to it, or 0 for an empty file; else refused."""
        (version,) = connection.execute(READ_SCHEMA_VERSION).fetchone()
        if version == SCHEMA_VERSION or version in MIGRATIONS:
            return version
        if version != 0:
            raise StoreError(f"cannot open store {self.path}: schema version {version}, this code knows {SCHEMA_VERSION}")
        (objects,) = connection.execute(COUNT_SCHEMA_OBJECTS).fetchone()
        if objects:
            raise StoreError(f"cannot open store {self.path}: an SQLite database, but not a shiftchange store")
        return 0

    def _open_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StoreError(f"store {self.path} is closed")
        return self._connection

    def _error(self, error: sqlite3.Error) -> StoreError:
        if getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY":
            return StoreError(f"store {self.path} is busy: another process held its write lock for over {self.busy_timeout_s} s")
        return StoreError(f"store {self.path}: {error}")

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        if self._in_transaction:
            raise RuntimeError("SQLiteStore transactions do not nest")
        connection = self._open_connection()
        self._in_transaction = True
        tx = _SQLiteTransaction(connection)
        try:
            connection.execute(BEGIN)
            try:
                yield tx
                connection.execute(COMMIT)
            except BaseException:
                # SQLite rolls back by itself after some errors (a full disk); only roll back what is still open.
                if connection.in_transaction:
                    connection.execute(ROLLBACK)
                raise
        except sqlite3.Error as error:
            raise self._error(error) from error
        finally:
            tx.end()
            self._in_transaction = False

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        connection = self._open_connection()
        try:
            if task_id is None:
                rows = connection.execute(SELECT_EVENTS, (after_seq,)).fetchall()
            else:
                rows = connection.execute(SELECT_EVENTS_OF_TASK, (task_id, after_seq)).fetchall()
        except sqlite3.Error as error:
            raise self._error(error) from error
        return [EVENTS.from_row(row) for row in rows]

    def close(self) -> None:
        """Close the file; safe to call twice. A transaction still open is rolled back by SQLite."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
