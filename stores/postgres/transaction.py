"""One transaction of a PostgreSQL store: reads that lock, writes kept until the next read or the commit, the guard
in every write, and the events inserted with the COMMIT (why: the package docstring)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from shiftchange.core.errors import CoreError, NotFound, StoreConflict, StoreError, StoreRetryable
from shiftchange.core.store import Transaction

from .driver import TransactionStatus, psycopg
from .pipeline import _bindable, _ended_by_server, _exchange, _mapped, _rollback, _round_trip, _SessionEnded
from .records import _RecordAccess
from .statements import (
    BEGIN,
    BULK_ROWS_MIN,
    COMMIT,
    COUNT_ATTEMPTS_OF_TASK,
    GUARD_SQLSTATE,
    INSERT_EVENT_ROWS,
    INSERT_EVENTS,
    NOTIFY,
    NOW,
    TABLES,
)

if TYPE_CHECKING:
    from .store import PostgresStore

# ---- the transaction


class _PostgresTransaction(_RecordAccess, Transaction):
    """Record access inside one database transaction on one connection, in as few round trips as the answers allow.

    Nothing is sent until the first read: BEGIN goes with it, and the
    transaction's own settings (`SETTINGS`). A read waits for its answer; a
    write does not. Writes are kept and sent with the next read or with the
    COMMIT, several statements in one round trip (`_round_trip`: libpq's
    pipeline mode, one Sync). Every value is a bound parameter, never written
    into the statement text. Each write checks its own row count on the server
    (`shiftchange_guard`), so a guarded write that matched no row aborts the
    transaction as surely as if it had been checked at once, and the error,
    raised by the round trip that carried it, names the write. The history's
    events of the transaction go in one statement with its COMMIT, after every
    row lock it takes (the order the sequencer relies on). Every locking read
    also reads the server's clock after it (`now`), so the time a contract
    judges a lease by is the server's, taken once its locks are held. A record
    this transaction locked is read once: later reads of it are the same
    object, which the writes keep current.
    """

    __slots__ = (
        "_admitted",
        "_began",
        "_cache",
        "_connection",
        "_cursor",
        "_events",
        "_failure",
        "_guards",
        "_heard_at",
        "_inserted_tasks",
        "_now",
        "_pending",
        "_store",
        "_unsent",
        "_unsent_updates",
        "_where",
    )

    def __init__(self, connection: Any, store: PostgresStore) -> None:
        self._connection = connection
        self._cursor = connection.cursor()
        self._store = store
        self._where = store.where
        self._failure: CoreError | None = None
        """The first error the database raised in this transaction: PostgreSQL has aborted it, so it cannot commit."""
        self._began = False
        self._pending: list[tuple[str, tuple] | None] = []
        """Statements written but not yet sent (guarded writes), in order, each (text, values); None for one not yet made."""
        self._guards: list[tuple] = []
        """Per guarded write, by its index: (kind, table, identity, version, detail), to say why it matched no row."""
        self._events: list[tuple] = []
        """Per event appended, its values (checked): the rows of the INSERT sent with the COMMIT."""
        self._unsent: dict[tuple[str, str], list] = {}
        """Inserts kept and not yet sent, by record: [index in `_pending`, table, query, record, guard index, its row].

        The row is None once an update was folded into the insert (`_update`):
        it is taken from the record as it is when sent.
        """
        self._unsent_updates: dict[tuple[str, str], list] = {}
        """Updates kept and not yet sent, by record: [index in `_pending`, table, version read, changes, terminal guard, steps,
        guard index]. A second update of the record before they are sent merges into the first (one row version, not two)."""
        self._inserted_tasks: dict[str, int] = {}
        """Tasks this transaction inserted, with how many Attempts it inserted for each (no other transaction sees them)."""
        self._cache: dict[tuple[str, str], Any] = {}
        self._now: float | None = None
        self._heard_at = 0.0
        """time.monotonic() when `_now` was read: how the store's clock carries the server's time on between transactions."""
        self._admitted: set[str] = set()
        """Workspaces of Attempts this transaction made admitted: announced with its commit (`stores.wakeup`)."""

    def end(self) -> None:
        # A transaction object kept past its `with` block would write outside any transaction; make that fail loudly.
        cursor, self._cursor, self._connection = self._cursor, None, None
        if cursor is not None:
            cursor.close()

    # ---- round trips

    def _usable(self) -> None:
        if self._cursor is None:
            raise RuntimeError("this transaction has ended; open a new one with store.transaction()")
        if self._failure is not None:
            raise type(self._failure)(f"{self._failure}; the transaction was aborted by it") from self._failure

    def _statement(self, query: str, parameters: Iterable[Any] = ()) -> tuple[str, tuple]:
        """`query` with `parameters` to bind, checked now (InputError, and the transaction is intact: nothing was sent)."""
        self._usable()
        return query, _bindable(parameters)

    def _check_text(self, values: Iterable[Any]) -> None:
        """What binding `values` later would refuse, refused now (an InputError, nothing kept)."""
        self._usable()
        _bindable(values)

    def _write(self, query: str, parameters: Iterable[Any], guard: tuple | None) -> None:
        """Keep a write to send with the next round trip; `guard` says why it failed should the server's check refuse it."""
        if guard is not None:
            parameters = (*parameters, len(self._guards))
            self._pending.append(self._statement(query, parameters))
            self._guards.append(guard)
        else:
            self._pending.append(self._statement(query, parameters))

    def _trip(self, statements: list[tuple[str, tuple]], answers: int, *, commit: bool = False) -> list[Any]:
        """Send the kept writes and `statements` in one round trip; the rows of the last `answers` statements, each a list."""
        if self._unsent:
            self._render_inserts()
        if self._unsent_updates:
            self._render_updates()
        assert None not in self._pending, "a kept write was never made a statement"
        batch: list[Any] = [(BEGIN, ()), self._store._settings] if not self._began else []
        batch += self._pending
        batch += statements
        self._pending = []
        self._store.round_trips += 1
        replaced = 0
        while True:
            try:
                found = self._send(batch, answers)
                break
            except psycopg.OperationalError as error:
                # A pooled connection the server dropped while it sat idle fails the first trip before anything ran: run
                # it again on a fresh one. Safe when the trip holds no COMMIT, or when the server answered it with an error
                # (the session's termination), which it sends before it would run anything after.
                unknown = commit and getattr(error, "sqlstate", None) is None and not isinstance(error, _SessionEnded)
                if self._began or unknown or replaced > self._store.pool_max or not self._connection.broken:
                    lost = error
                else:
                    replaced += 1
                    self._replace_connection()
                    continue
            except psycopg.Error as error:
                lost = error
            mapped = self._refused(lost, commit and not isinstance(lost, _SessionEnded))
            if self._failure is None:
                self._failure = mapped
            raise mapped from lost
        self._began = True
        return found

    def _send(self, batch: list[tuple[str, tuple]], answers: int) -> list[list[tuple]]:
        """`batch` in one round trip (`_round_trip`); the rows of its last `answers` statements."""
        if _ended_by_server(self._connection):
            raise _SessionEnded("the server had closed the session (terminated, or timed out idle in the transaction)")
        return _round_trip(self._connection, batch, range(len(batch) - answers, len(batch)), self._store.prepare)

    def _render_inserts(self) -> None:
        """Put the kept inserts into the message as statements: one per record, or, when every kept write is an insert (a
        bulk intake), one per table, parents first (tasks, Attempts, intents: the foreign keys are checked per statement)."""
        unsent, pending = list(self._unsent.values()), self._pending
        self._unsent.clear()
        if len(unsent) == len(pending) and len(unsent) > BULK_ROWS_MIN:
            by_table: dict[str, list] = {table.name: [] for table in TABLES}
            for entry in unsent:
                by_table[entry[1].name].append(entry)
            statements = []
            for entries in (entries for entries in by_table.values() if entries):
                table = entries[0][1]
                rows = [table.to_row(entry[3]) if entry[5] is None else entry[5] for entry in entries]
                columns = [list(column) for column in zip(*rows, strict=True)]
                keys = [getattr(entry[3], table.key) for entry in entries]
                statements.append(self._statement(table.insert_many(), (*columns, len(rows), len(self._guards))))
                self._guards.append(("inserts", table, keys, None, ""))
            self._pending = statements
            return
        for index, table, query, record, guard_index, row in unsent:
            pending[index] = self._statement(query, (*(table.to_row(record) if row is None else row), guard_index))

    def _render_updates(self) -> None:
        """Put the kept updates into the message, each record's merged changes as one UPDATE."""
        for key, kept in self._unsent_updates.items():
            self._render_update(key, kept, forget=False)
        self._unsent_updates.clear()

    def _render_update(self, key: tuple[str, str], kept: list, *, forget: bool = True) -> None:
        index, table, version, changes, terminal_guard, steps, guard_index = kept
        query = table.update_sql(tuple(changes), terminal_guard, steps)
        self._pending[index] = self._statement(query, (*changes.values(), key[1], version, guard_index))
        if forget:
            del self._unsent_updates[key]

    def _read(self, query: str, parameters: Iterable[Any], *, clock: bool = True) -> list[tuple]:
        """One statement's rows (with the kept writes before it), and the server's time after it."""
        statements = [self._statement(query, parameters)]
        if clock:
            statements.append((NOW, ()))
            rows, ((now,),) = self._trip(statements, 2)
            self._now, self._heard_at = now, time.monotonic()
            return rows
        return self._trip(statements, 1)[0]

    def _refused(self, error: Exception, committing: bool) -> CoreError:
        """The core's error for what the server said; for a guarded write, why it matched no row."""
        mapped = _mapped(error, self._where, broken=self._connection.broken, committing=committing)
        if getattr(error, "sqlstate", None) != GUARD_SQLSTATE:
            return mapped
        match = re.search(r"shiftchange guard (\d+) matched (-?\d+)", str(error))
        if match is None or int(match[1]) >= len(self._guards):
            return mapped
        kind, table, identity, version, detail = self._guards[int(match[1])]
        _rollback(self._connection)  # the guard aborted it; the reads below are plain, outside it
        if kind == "insert":
            return StoreConflict(f"{detail} already exists")
        if kind == "parent":
            return NotFound(detail)
        try:
            return self._why(kind, table, identity, version)
        except psycopg.Error:  # the reason could not be read (the connection went too): the guard's own words
            return mapped

    def _why(self, kind: str, table: Any, identity: Any, version: Any) -> CoreError:
        """Why the guarded write of `kind` matched no row, read in a transaction of its own."""

        def read(query: str, parameters: tuple) -> list[tuple]:
            return _exchange(self._connection, [self._store._settings, (query, _bindable(parameters))], -1, self._store.prepare)

        if kind == "inserts":
            noun = table.record_type.__name__.lower()
            stored = [key for (key,) in read(f"SELECT {table.key} FROM {table.name} WHERE {table.key} = ANY(%s) ORDER BY 1", (identity,))]
            if stored:
                return StoreConflict(f"{noun} {stored[0]!r} already exists" + (f" (and {len(stored) - 1} more)" if len(stored) > 1 else ""))
            return StoreConflict(f"one of the {len(identity)} {noun}s inserted together already exists")
        if kind == "numbering":
            ((siblings,),) = read(COUNT_ATTEMPTS_OF_TASK, (identity,))
            return StoreConflict(f"attempt numbers must run 1..N: task {identity!r} has {siblings}, got {version}")
        what = f"{table.record_type.__name__.lower()} {identity!r}"
        rows = read(table.guard_read, (identity,))
        if not rows:
            return StoreConflict(f"{what} does not exist")
        row = rows[0]
        if row[0] != version:
            return StoreRetryable(
                f"{what} changed since it was read (stored version {row[0]}, read {version}): another transaction wrote it"
            )
        return StoreConflict(f"{what} is terminal ({row[1]}) and immutable")

    def commit(self) -> None:
        """Send what is kept, the events and any wake-up with COMMIT, in one round trip; nothing at all if nothing was done."""
        failure = self._failure
        if failure is not None or self._connection.info.transaction_status == TransactionStatus.INERROR:
            # PostgreSQL answers COMMIT of an aborted transaction with a rollback, not an error: say so instead of pretending.
            self.rollback()
            kind = type(failure) if failure is not None else StoreError
            raise kind(
                f"{failure or 'an earlier statement failed'}; the transaction was aborted by it and nothing was committed"
            ) from failure
        statements = self._event_statements()
        for workspace in sorted(self._admitted):
            statements.append(self._statement(NOTIFY, (self._store.wakeup_channel, workspace)))
        if not (self._began or self._pending or statements):
            return
        statements.append((COMMIT, ()))
        self._trip(statements, 0, commit=True)

    def _event_statements(self) -> list[tuple[str, tuple]]:
        """The INSERT of this transaction's events, in the order appended (none: no statement)."""
        events = self._events
        if not events:
            return []
        if len(events) <= BULK_ROWS_MIN:
            return [(INSERT_EVENT_ROWS[len(events)], tuple(value for event in events for value in event))]
        return [(INSERT_EVENTS, tuple(list(column) for column in zip(*events, strict=True)))]

    def _replace_connection(self) -> None:
        store = self._store
        old = self._connection
        self._cursor.close()
        store._release(store._pool, old)
        self._connection = store._checkout(store._pool)
        self._cursor = self._connection.cursor()

    @property
    def connection(self) -> Any:
        return self._connection

    def rollback(self) -> None:
        connection = self._connection
        if connection is None:
            return
        _rollback(connection)

    def now(self) -> float:
        """The server's time as last read in this transaction (after its latest locking read), reading it if never yet."""
        if self._now is None:
            ((now,),) = self._trip([(NOW, ())], 1)[0]
            self._now, self._heard_at = now, time.monotonic()
        return self._now

    # ---- reads
