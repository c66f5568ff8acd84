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

from shiftchange.core.errors import InputError, NotFound, StoreConflict, StoreError, StoreRetryable
from shiftchange.core.records import Attempt, Event, Intent, Leader, Task, new_event
from shiftchange.core.store import Durability, Store, Transaction

from .columns import check_changes
from .sqlite_statements import (
    _EVENT_FIELDS,
    _SELECT_BY_KEY,
    _TERMINAL_STATES,
    ATTEMPTS,
    BEGIN,
    COMMIT,
    COUNT_ATTEMPTS_OF_TASK,
    COUNT_SCHEMA_OBJECTS,
    EVENTS,
    INSERT_ATTEMPT,
    INSERT_EVENT,
    INSERT_INTENT,
    INSERT_TASK,
    INTENTS,
    MIGRATIONS,
    PUT_LEADER,
    READ_SCHEMA_VERSION,
    ROLLBACK,
    SCHEMA,
    SCHEMA_VERSION,
    SELECT_ATTEMPT,
    SELECT_ATTEMPTS_IN_STATES,
    SELECT_ATTEMPTS_OF_TASK,
    SELECT_EVENTS,
    SELECT_EVENTS_OF_TASK,
    SELECT_INTENT,
    SELECT_INTENTS_OF_ATTEMPT,
    SELECT_LEADER,
    SELECT_TASK,
    SELECT_TASKS_IN_STATES,
    SET_FOREIGN_KEYS,
    SET_SYNCHRONOUS,
    SET_WAL,
    TASKS,
    UPDATE_ATTEMPT,
    UPDATE_INTENT,
    UPDATE_TASK,
    _placeholders,
    _Table,
)

__all__ = ["BUSY_TIMEOUT_S", "MIGRATIONS", "SCHEMA_VERSION", "SYNCHRONOUS_LEVELS", "SQLiteStore"]

BUSY_TIMEOUT_S = 30.0
"""How long a transaction waits for another process to release the write lock before it gives up."""


SYNCHRONOUS_LEVELS = ("NORMAL", "FULL", "EXTRA")
"""The `PRAGMA synchronous` levels allowed. Each keeps the file consistent through a power cut; OFF may not, so it is refused."""
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
"""`PRAGMA synchronous` answers with a number; its name, as the level is set."""


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

    @property
    def lock_timeout_s(self) -> float:  # type: ignore[override]
        """The busy timeout: how long a transaction waits for another process's write lock before StoreRetryable."""
        return self.busy_timeout_s

    def durability(self) -> Durability:
        """The journal mode and the synchronous level this connection runs with, read from SQLite itself."""
        connection = self._open_connection()
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
        (level,) = connection.execute("PRAGMA synchronous").fetchone()
        return Durability("sqlite", {"journal_mode": str(mode).lower(), "synchronous": SYNCHRONOUS_NAMES.get(level, str(level))})

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

    def _error(self, error: sqlite3.Error) -> StoreError | StoreRetryable:
        if getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY":
            # Retryable: nothing of the transaction was written, and the same contract may win once the lock is free.
            return StoreRetryable(f"store {self.path} is busy: another process held its write lock for over {self.busy_timeout_s} s")
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
