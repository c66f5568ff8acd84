"""PostgresStore: the storage interface on one PostgreSQL schema that many threads and processes share.

Why these choices:

- One database transaction per `transaction()`, at READ COMMITTED, on a
  connection checked out of a `psycopg_pool.ConnectionPool` for the block and
  no longer. Different threads run transactions side by side, each on its own
  connection; a thread cannot nest them.
- As few round trips as the answers allow. Nothing is sent until the first
  read, and BEGIN goes with it. A read waits for its answer; a write does not:
  writes are kept and go with the next read or with the COMMIT, several
  statements to a round trip (libpq's pipeline mode: each statement a Parse,
  Bind and Execute, the batch one Sync). Every value is a bound parameter,
  never part of the statement text, so nothing depends on how the server
  would read a quoted literal (`standard_conforming_strings` included). Each
  statement is prepared once per connection, by name, on its first use
  (`prepare=False`: never, for a pooler that does not carry prepared
  statements). A contract's cycle on a lease (claim and start, renew,
  complete) is six round trips, three of them commits.
- Nothing is set on a session: each transaction's first statement sets its
  search_path and its two lock bounds for itself (`SETTINGS`, SET LOCAL's
  scope), so a transaction-mode pooler (PgBouncer) may hand every
  transaction to another server connection. What needs a session is the
  prepared statements (`prepare=False` behind such a pooler, unless it
  carries protocol-level prepared statements, as PgBouncer 1.21 and later do
  with max_prepared_statements set) and the wake-up listener's LISTEN (see
  `stores.wakeup`; without it idle workers poll).
- An insert becomes a statement only when it is sent, so updates of the
  record until then ride in it: a bulk intake's create, accept and dispatch
  of a task are one INSERT. A message of nothing but inserts (a batch) is one
  multi-row INSERT per table, its guard counting every row; a transaction's
  events are one INSERT. An Attempt of a task the same transaction inserted
  needs no check of its parent or number on the server: no other transaction
  can see that task before this one commits. `tasks(ids)` reads a batch's
  tasks in one round trip, locked in id order.
- Reads that precede writes lock their rows (`task`, `attempt`, `intent`,
  `attempts_of`, `intents_of`, `claimable`, `claim_candidate`), so two
  contracts on the same records take turns instead of racing. The lock is
  `FOR NO KEY UPDATE`, the lock an UPDATE of non-key columns takes itself: it
  excludes every other contract exactly as `FOR UPDATE` would, but not the
  `FOR KEY SHARE` a foreign-key check takes. No contract ever changes a key
  (`store.WRITABLE` has none). A record locked once is read once per
  transaction: a second read is the first's object, which the writes keep
  current.
- The guard stays in the write, as in every store: `UPDATE ... WHERE key =
  %s AND version = %s` (and for an Attempt `AND state NOT IN (terminal)`).
  Since a write is sent without waiting, the server checks its row count
  (`shiftchange_guard`, migration 4): a write that matched no row, an insert
  of a key that exists, an Attempt out of its 1..N order or of an unknown
  parent aborts the transaction with SQLSTATE SCG01 naming which write it
  was, and the store says why in the core's terms: changed since read
  (StoreRetryable: the core runs the contract again), missing or terminal
  (StoreConflict), unknown parent (NotFound). The error comes from the round
  trip that carried the write: the next read, or the commit. Deadlocks,
  serialization failures and lock timeouts are `StoreRetryable` too; a lost
  connection is `StoreUnavailable` (saying whether the commit may have
  happened).
- `claimable()` is the claim queue: `FOR NO KEY UPDATE SKIP LOCKED`, so many
  claimers each take a different row instead of queueing behind one;
  `claim_candidate()` reads the pick, its task and the task's Attempts in one
  message, locked in that order (the second statement finds the task by a
  transaction-local setting the first one set).
- The history is numbered after commit. A transaction's events are inserted
  with its COMMIT, after every row lock it takes, with `pos` from a sequence
  and `xid` its transaction, and no `seq`. One sequencer at a time
  (`number_events`, run by every reader before it reads, holding
  `event_counter`'s row for the batch only) numbers every committed event it
  can see, ordered by the smallest `pos` of its transaction, then `pos`,
  from the last number on. So no lock is held across any contract's
  transaction and commits share WAL flushes. What a reader may rely on: the
  history it reads is numbered 1..N with no gap, and no event is ever
  numbered before one a reader already saw (a batch sees a transaction only
  once it committed, and every transaction that committed before it too);
  events of one transaction are consecutive; a transaction that waited for
  another's row lock, or began after it committed, has its events after the
  other's. Two transactions that touched no common row and overlapped may
  be numbered in either order. `append_event` returns the event with seq 0
  (`Store.numbers_on_append` is False); `events()` inside an open
  transaction shows the numbered history it can see, not its own events.
  Versions 1-3 took each number from `event_counter` inside the appending
  transaction, holding that row's lock to commit: every event-writing commit
  waited for the one before, so 16 processes ran slower than 4.
- Leases are judged by the server's clock: `store.clock()` is a
  `ServerClock`, whose time inside a transaction is the server's
  `clock_timestamp()` read right after the transaction's latest locking read
  (in the same message), and outside one the server's time last read plus
  local monotonic time, never the local wall clock.
- A transaction that makes an Attempt admitted sends `pg_notify(channel,
  workspace)` with its COMMIT (`stores.wakeup`): idle workers LISTEN instead
  of polling. NOTIFY serialises committing transactions that send it, which
  is why only admission (one leader) sends it.
- Inserts never block on a duplicate: `ON CONFLICT DO NOTHING`, and the
  guard turns "nothing inserted" into StoreConflict. The foreign keys are in
  the schema as well.
- Text holds every string Python can encode as UTF-8, NUL included, as the
  other stores do, and sorts as they sort it, by code point. PostgreSQL text
  cannot hold U+0000, so a string that contains U+0000 or U+0001 is stored
  with U+0001 written as U+0001 U+0002 and U+0000 as U+0001 U+0001. That
  escape keeps code-point order (both replacements sort below every other
  character, and in the order of what they replace), so `ORDER BY` on a
  stored id is the order of the ids themselves, a tie in the claim queue
  included. Every other string is stored as it is. The connection's adapters
  do it both ways, for every parameter and every text column. Lone
  surrogates cannot be sent: InputError. (Schema version 2 and before used an
  escape that did not keep order; migration 3 rewrites what it stored.)
- Every text column collates "C": ids sort by code point, as Python sorts
  them, whatever the database's locale.
- The schema lives only in numbered SQL files (`migrations/postgresql/`),
  applied in order under a transaction-level advisory lock and recorded in the
  schema's `schema_migrations`; a schema of a newer version, or a schema
  holding tables that is not a shiftchange store, is refused untouched.

psycopg is optional: this module imports without it, and `PostgresStore`
then raises StoreError saying how to install it.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.resources
import inspect
import logging
import math
import operator
import os
import re
import select
import threading
import time
import typing
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from shiftchange.core.errors import CoreError, InputError, NotFound, StoreConflict, StoreError, StoreRetryable, StoreUnavailable
from shiftchange.core.records import (
    Attempt,
    Budget,
    Event,
    Intent,
    Leader,
    Plan,
    Task,
    new_event,
)
from shiftchange.core.states import ATTEMPT_TERMINAL
from shiftchange.core.store import Store, Transaction

from . import wakeup
from .columns import Columns, check_changes

try:
    import psycopg
    import psycopg.adapt
    from psycopg import errors as pg_errors
    from psycopg import pq, sql
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.pq import TransactionStatus
    from psycopg.types import string as pg_string
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

    _TEXT = psycopg.adapt.PyFormat.TEXT
except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess by the tests
    psycopg = None  # type: ignore[assignment]

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore", "ServerClock", "check_schema_name", "migrate"]

INSTALL_HINT = "PostgreSQL stores need psycopg 3: pip install 'shiftchange[postgres]'"

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A plain, unquoted PostgreSQL identifier (at most 63 bytes): what a schema name may be."""

ROW_LOCK = "FOR NO KEY UPDATE"
"""The lock a read that precedes a write takes (see the module docstring for why not FOR UPDATE)."""

CHECKOUT_TIMEOUT_S = 30.0
"""How long a transaction waits for a free connection when every one of the pool's is in use."""


# ---- migrations: the numbered SQL files, read once.


def _load_migrations() -> tuple[tuple[int, str, str], ...]:
    folder = importlib.resources.files(__package__).joinpath("migrations", "postgresql")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match is not None:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort()
    # Gaps or repeats would make "the version of a schema" ambiguous: fail at import, not on some user's database.
    assert [version for version, _, _ in found] == list(range(1, len(found) + 1)), f"migrations must be numbered 1..N: {found!r:.200}"
    return tuple(found)


MIGRATIONS: tuple[tuple[int, str, str], ...] = _load_migrations()
"""(version, name, SQL text) of every file in migrations/postgresql/, in order."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The newest schema version this code knows."""

CREATE_SCHEMA_MIGRATIONS = (
    "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
)
RECORD_MIGRATION = "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)"
SCHEMA_RELATIONS = (
    "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
)
ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(%s)"


def check_schema_name(schema: Any) -> str:
    """`schema` if it is a plain lower-case identifier; InputError otherwise (it is never quoted into SQL unchecked)."""
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise InputError(f"schema must be a plain identifier ([a-z_][a-z0-9_]{{0,62}}), not {schema!r:.80}")
    return schema


def _advisory_key(schema: str) -> int:
    """The advisory lock migrations of `schema` take: a signed 64-bit number derived from its name."""
    return int.from_bytes(hashlib.sha256(f"shiftchange migrate {schema}".encode()).digest()[:8], "big", signed=True)


# ---- text with NUL: the escape every parameter and every text column goes through (see the module docstring).

_NUL, _ONE = "\x00", "\x01"


def escape_text(text: str) -> str:
    """How `text` is stored: itself, unless it holds U+0000 or U+0001 (then U+0001 -> U+0001 U+0002, U+0000 -> U+0001 U+0001)."""
    if _NUL not in text and _ONE not in text:
        return text
    return text.replace(_ONE, "\x01\x02").replace(_NUL, "\x01\x01")


def unescape_text(stored: str) -> str:
    """The string `escape_text` stored as `stored`.

    Two replacements suffice: scanning left to right, a U+0001 always starts a
    pair, so a pair is never read across two of them.
    """
    if _ONE not in stored:
        return stored
    return stored.replace("\x01\x01", _NUL).replace("\x01\x02", _ONE)


if psycopg is not None:

    class _EscapingMixin:
        _encoding: str

        def dump(self, obj: str) -> bytes:
            if _NUL in obj or _ONE in obj:
                obj = escape_text(obj)
            return obj.encode(self._encoding)

    class _TextDumper(_EscapingMixin, pg_string.StrDumperUnknown):
        """The default str dumper (text format, unknown oid, so PostgreSQL infers the type), escaping."""

    class _TextOidDumper(_EscapingMixin, pg_string.StrDumper):
        """A str dumper to the text oid (arrays of text, `state = ANY(%s)`), escaping."""

    class _TextBinaryDumper(_EscapingMixin, pg_string.StrBinaryDumper):
        """A str dumper in binary format, escaping."""

    class _TextLoader(pg_string.TextLoader):
        def load(self, data: Any) -> str:
            text = str(data, "utf-8")
            return unescape_text(text) if _ONE in text else text

    class _TextBinaryLoader(_TextLoader):
        format = pg_string.TextBinaryLoader.format

    class _UntypedDumper(psycopg.adapt.Dumper):
        """int, float and bool as text of no stated type (oid 0): the server types each parameter from where it stands, the
        column or function it meets, as it types the parameters of a statement prepared without types. One statement then
        has one set of parameter types, whatever values (or NULLs) it carries, and `shiftchange_guard(count(*), %s)` finds
        its integer argument (a bigint, as psycopg would send a large Python int, would find no such function)."""

        oid = 0
        format = pq.Format.TEXT

        def dump(self, obj: Any) -> bytes:
            kind = type(obj)
            if kind is bool:
                return b"t" if obj else b"f"
            if kind is float and not math.isfinite(obj):
                return b"NaN" if math.isnan(obj) else (b"Infinity" if obj > 0 else b"-Infinity")
            return repr(obj).encode()


def _adapt_text(connection: Any) -> None:
    """Make `connection` store and read text through the NUL escape (registered in psycopg's order: the last is the default)."""
    adapters = connection.adapters
    adapters.register_dumper(str, _TextBinaryDumper)
    adapters.register_dumper(str, _TextOidDumper)
    adapters.register_dumper(str, _TextDumper)
    adapters.register_loader("text", _TextLoader)
    adapters.register_loader("text", _TextBinaryLoader)


def _adapt_numbers(connection: Any) -> None:
    """Make `connection` bind int, float and bool untyped (`_UntypedDumper`), in lists too (an int list typed by a cast)."""
    adapters = connection.adapters
    for kind in (int, float, bool):
        adapters.register_dumper(kind, _UntypedDumper)


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


# ---- statements: text with %s placeholders, values bound as parameters, several to one round trip (libpq's pipeline mode)


_BINDABLE = (bool, int, float)
"""Besides str, None, lists and tuples (arrays), the exact types a statement takes as a parameter."""


def _bindable(values: Iterable[Any]) -> tuple:
    """`values` as they are bound, checked first: InputError for what the server would never get, before anything is kept or sent.

    Text must be UTF-8 (a lone surrogate is refused); a tuple is bound as a
    list (an array); any other type but None, bool, int and float is refused.
    """
    found = []
    for value in values:
        kind = type(value)
        if kind is str:
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise InputError(f"text the store cannot encode as UTF-8 ({error.reason} at position {error.start})") from None
        elif kind is list or kind is tuple:
            value = list(_bindable(value))
        elif value is not None and kind not in _BINDABLE:
            raise InputError(f"the PostgreSQL store cannot bind a {kind.__name__} ({value!r:.60})")
        found.append(value)
    return tuple(found)


_WIRE: dict[str, tuple[bytes, bytes]] = {}
"""Statement text (with %s placeholders) -> (the text sent, with $1..$N; the name it is prepared under)."""
_PREPARED: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()
"""Per connection, the names of the statements prepared on it (each the first time a round trip on it ran the statement)."""
_PREPARED_LOST = ("26000", "42P05")
"""SQLSTATEs of a prepared statement missing or made twice: this module's record of a connection's statements was wrong."""
_TRANSFORMERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""Per connection, psycopg's Transformer: its adapters turn the values into parameters and the rows into Python values."""


def _wire(query: str) -> tuple[bytes, bytes]:
    found = _WIRE.get(query)
    if found is None:
        assert "%%" not in query and "$" not in query, f"statement text must hold only %s placeholders: {query[:80]}"
        pieces = query.split("%s")
        text = (pieces[0] + "".join(f"${number}{piece}" for number, piece in enumerate(pieces[1:], 1))).encode()
        found = _WIRE[query] = (text, b"shiftchange_" + hashlib.sha256(text).hexdigest()[:20].encode())
    return found


def _round_trip(connection: Any, batch: list[tuple[str, tuple]], wanted: range, prepare: bool) -> list[list[tuple]]:
    """Send `batch` ((text, values) pairs) on `connection` and wait for it: one round trip; the rows of the statements `wanted`.

    libpq's pipeline mode: each statement is a Parse (with a name, once per
    connection, when `prepare`), Bind and Execute, its values parameters in
    the Bind (never in the text), and the batch ends in one Sync, the only
    point where the server answers and the only one it waits at. (psycopg's
    own pipeline also sends a Flush after a Sync, which stops the server's
    idle-in-transaction timer until the next Sync: a process stopped between
    two round trips would then hold its row locks for good.) The first error
    is raised once the Sync is read; what followed it did not run. A
    connection left in the middle of a message (an interrupt) is closed.
    """
    pgconn = connection.pgconn
    transformer = _TRANSFORMERS.get(connection)
    if transformer is None:
        transformer = _TRANSFORMERS[connection] = psycopg.adapt.Transformer(connection)
    prepared = _PREPARED.setdefault(connection, set()) if prepare else None
    commands: list[tuple[int | None, bytes]] = []
    """Per command sent: the index of its statement, or None for a prepare (with the name it makes)."""
    pgconn.enter_pipeline_mode()
    try:
        for index, (query, values) in enumerate(batch):
            text, name = _wire(query)
            parameters = transformer.dump_sequence(values, [_TEXT] * len(values)) if values else None
            if prepared is None:
                pgconn.send_query_params(text, parameters)
            else:
                if name not in prepared and (None, name) not in commands:
                    pgconn.send_prepare(name, text)
                    commands.append((None, name))
                pgconn.send_query_prepared(name, parameters)
            commands.append((index, b""))
        pgconn.pipeline_sync()
        results = _results(pgconn)
        pgconn.exit_pipeline_mode()
    except BaseException:
        if pgconn.status != pq.ConnStatus.BAD:
            connection.close()  # alive, but in the middle of a message: nothing else may use it
        raise
    failed = None
    found = []
    for (index, name), result in zip(commands, results, strict=True):
        status = result.status
        if status == pq.ExecStatus.FATAL_ERROR:
            failed = failed or result
        elif index is None:
            if status == pq.ExecStatus.COMMAND_OK:  # made (whatever came after it): the server keeps it past a rollback
                prepared.add(name)  # type: ignore[union-attr]
        elif index in wanted and failed is None:
            transformer.set_pgresult(result)
            found.append(transformer.load_rows(0, result.ntuples, tuple) if status == pq.ExecStatus.TUPLES_OK else [])
    if failed is not None:
        error = pg_errors.error_from_result(failed, encoding=connection.info.encoding)
        if error.sqlstate in _PREPARED_LOST:
            _PREPARED.pop(connection, None)  # the server forgot them (DISCARD ALL, DEALLOCATE): prepare again from the next trip
        raise error
    return found


def _results(pgconn: Any) -> list[Any]:
    """Flush what was sent, then read one result per command up to the Sync (waiting on the socket, never busy)."""
    socket = pgconn.socket
    while pgconn.flush():  # the server may answer while a long message is still going out: read as well, or both stall
        readable, _, _ = select.select([socket], [socket], [])
        if readable:
            pgconn.consume_input()
    found = []
    while True:
        while pgconn.is_busy():
            select.select([socket], [], [])
            pgconn.consume_input()
        result = pgconn.get_result()
        if pgconn.status == pq.ConnStatus.BAD:
            raise psycopg.OperationalError(pgconn.get_error_message())
        if result is None:  # the end of one command's results
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            return found
        found.append(result)


def _exchange(connection: Any, batch: list[tuple[str, tuple]], wanted: int, prepare: bool) -> list[tuple]:
    """`batch` in one round trip; the rows of statement `wanted` (an index, negative from the end).

    For what runs outside a store transaction (the sequencer, a read of why
    a guard refused): a batch without BEGIN is one implicit transaction, so
    its first statement can set what the rest need (`SETTINGS`).
    """
    index = wanted % len(batch)
    return _round_trip(connection, batch, range(index, index + 1), prepare)[0]


if psycopg is not None:

    class _SessionEnded(psycopg.OperationalError):
        """The server had ended the session before a round trip was sent: nothing of that trip ran (a COMMIT included)."""


def _ended_by_server(connection: Any) -> bool:
    """Whether the server ended the session while it was asked nothing (its goodbye, or the close, waits unread on the socket).

    A look at the socket without waiting, before each round trip: a session
    the server terminated or timed out has sent its last message and closed.
    Whatever waits on a live session (a notice) is read into libpq and kept.
    """
    pgconn = connection.pgconn
    try:
        for _ in range(4):
            if not select.select([pgconn.socket], [], [], 0)[0]:
                return False
            pgconn.consume_input()
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return pgconn.status == pq.ConnStatus.BAD


def _rollback(connection: Any) -> None:
    """Roll back whatever transaction `connection` has open; close it if that fails (the pool then replaces it).

    ROLLBACK is sent as it is rather than through psycopg, which would also
    forget (and deallocate) every statement prepared on the connection.
    """
    if connection.closed or connection.info.transaction_status == TransactionStatus.IDLE:
        return
    try:
        done = connection.pgconn.exec_(ROLLBACK.encode()).status == pq.ExecStatus.COMMAND_OK
    except Exception:
        done = False
    if not done:
        connection.close()


# ---- errors: what a psycopg error means to the core.

if psycopg is not None:
    _RETRYABLE: tuple[type[BaseException], ...] = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure, pg_errors.LockNotAvailable)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def _mapped(error: Exception, where: str, *, broken: bool = False, committing: bool = False) -> CoreError:
    """The core's error for a psycopg error raised inside a transaction (the caller raises it `from error`)."""
    line = _first_line(error)
    if isinstance(error, _RETRYABLE):
        return StoreRetryable(f"PostgreSQL at {where} rolled the transaction back ({type(error).__name__}: {line}); run it again")
    if broken or isinstance(error, psycopg.OperationalError):
        # A server that answered with an error (a terminated session included) stopped before the COMMIT that came after
        # it in the message: only a connection lost with no answer at all leaves the outcome unknown.
        if committing and getattr(error, "sqlstate", None) is None:
            return StoreUnavailable(f"lost PostgreSQL at {where} while committing; the transaction may or may not have committed: {line}")
        return StoreUnavailable(f"PostgreSQL at {where}: {line}; nothing was committed")
    if isinstance(error, pg_errors.ForeignKeyViolation):
        return NotFound(f"a record names a task or attempt that does not exist ({line})")
    if isinstance(error, pg_errors.UniqueViolation):
        return StoreConflict(f"a record already exists ({line})")
    if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
        return InputError(f"PostgreSQL refused a value: {line}")
    return StoreError(f"PostgreSQL at {where}: {line}")


_DISCARDED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Connections a store closed because the server dropped them, and then handed back to their pool to be replaced."""


class _QuietDiscard(logging.Filter):
    """Drop the pool's warning about a connection this module discarded on purpose: the store has raised StoreUnavailable for it.

    Every other record of the `psycopg.pool` logger, about any other pool's connections included, passes untouched.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.args, tuple) and len(record.args) == 1):
            return True
        try:
            return record.args[0] not in _DISCARDED
        except TypeError:  # an unhashable argument: not one of ours
            return True


logging.getLogger("psycopg.pool").addFilter(_QuietDiscard())


def _require_psycopg() -> None:
    if psycopg is None:
        raise StoreError(INSTALL_HINT)


def _where(conninfo: Any) -> str:
    """host:port/database of a connection string, for messages (never the password); InputError if it does not parse."""
    if not isinstance(conninfo, str):
        raise InputError(f"conninfo must be a PostgreSQL URL or key=value string, not {type(conninfo).__name__}")
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as error:
        from .urls import describe  # libpq quotes the string it could not parse: never print its password

        raise InputError(f"not a PostgreSQL connection string: {_first_line(error).replace(conninfo, describe(conninfo))}") from None
    host = params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "localhost"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    user = params.get("user") or os.environ.get("PGUSER") or os.environ.get("USER") or "?"
    database = params.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{host}:{port}/{database}"


def _connection_options(connect_timeout_s: float) -> dict[str, Any]:
    # libpq counts whole seconds, and treats anything under 2 as 2.
    return {"autocommit": True, "connect_timeout": max(2, math.ceil(connect_timeout_s)), "client_encoding": "UTF8"}


_BAD_PARAMETER = re.compile(r"(?:connection is bad: )?(invalid .*)")
"""How libpq words a connection parameter's value it refused before connecting (`invalid sslmode value: "x"`)."""


def _connect(conninfo: str, connect_timeout_s: float, where: str) -> Any:
    """One connection outside the pool (migrations); StoreUnavailable in one line if the server cannot be reached."""
    try:
        connection = psycopg.connect(conninfo, **_connection_options(connect_timeout_s))
    except psycopg.OperationalError as error:
        line = _first_line(error)
        # libpq checks a parameter's value (sslmode, port, ...) before it sends anything: bad input, not an unreachable server.
        refused = _BAD_PARAMETER.match(line)
        if refused is not None:
            raise InputError(f"not a usable PostgreSQL connection string: {refused[1]}") from None
        if "FATAL:" in line:  # the server answered, and refused the session (credentials, database, options)
            raise StoreUnavailable(f"PostgreSQL at {where} refused the connection: {line.partition('FATAL:')[2].strip()}") from None
        raise StoreUnavailable(f"cannot reach PostgreSQL at {where}: {line}") from None
    except psycopg.Error as error:
        raise StoreError(f"cannot open PostgreSQL at {where}: {_first_line(error)}") from None
    _adapt_text(connection)
    return connection


# ---- migrations


def _applied(connection: Any, schema: str, where: str) -> dict[int, str] | None:
    """The versions recorded in `schema`, or None for a schema that is missing or empty; StoreError for someone else's tables."""
    relations = {name for (name,) in connection.execute(SCHEMA_RELATIONS, (schema,))}
    if not relations:
        return None
    if "schema_migrations" not in relations:
        raise StoreError(
            f"schema {schema!r} at {where} holds tables ({', '.join(sorted(relations)[:5])}) but no schema_migrations: "
            "not a shiftchange store; use another schema"
        )
    query = sql.SQL("SELECT version, name FROM {}.schema_migrations").format(sql.Identifier(schema))
    return dict(connection.execute(query).fetchall())


STORE_SCHEMAS = (
    "SELECT n.nspname FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid"
    " WHERE c.relkind IN ('r', 'p') AND c.relname IN ('schema_migrations', 'tasks', 'attempts', 'events')"
    " GROUP BY n.nspname HAVING count(DISTINCT c.relname) = 4 ORDER BY 1"
)
"""The schemas of a database that hold a shiftchange store (its migrations' table and its three main ones)."""
SCHEMA_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s)"
STORES_LISTED = 8
"""How many of a database's store schemas a message names (the rest are counted)."""


def _no_store(connection: Any, schema: str, where: str) -> str:
    """Why there is no store in `schema` (it does not exist, or holds nothing), and which schemas of the database hold one."""
    (exists,) = connection.execute(SCHEMA_EXISTS, (schema,)).fetchone()
    found = [name for (name,) in connection.execute(STORE_SCHEMAS)]
    said = f"schema {schema!r} at {where} holds no shiftchange store" if exists else f"no schema {schema!r} at {where}"
    if not found:
        return f"{said}, and no schema of that database holds one: is the URL's database the right one?"
    close = difflib.get_close_matches(schema, found, n=STORES_LISTED, cutoff=0.6)
    hint = f", did you mean {close[0]!r}" if close else ""
    found = close + [name for name in found if name not in close]  # the likeliest first
    listed = ", ".join(found[:STORES_LISTED]) + (f" and {len(found) - STORES_LISTED} more" if len(found) > STORES_LISTED else "")
    return f"{said}{hint}; the schemas there that hold one: {listed} (name one with ?schema=NAME)"


def _migrate(connection: Any, schema: str, where: str, *, apply: bool) -> list[int]:
    """Bring `schema` to SCHEMA_VERSION (apply) or check that it is there (not apply), in one transaction; the versions applied."""
    try:
        with connection.transaction():
            # The migration files are SQL text with literals of their own (U&'...' among them), written for the default.
            connection.execute("SET LOCAL standard_conforming_strings = on")
            if apply:
                connection.execute(ADVISORY_LOCK, (_advisory_key(schema),))
            applied = _applied(connection, schema, where)
            unknown = sorted(set(applied or ()) - {version for version, _, _ in MIGRATIONS})
            if unknown:
                raise StoreError(
                    f"schema {schema!r} at {where}: schema version {max(applied or unknown)}, this code knows {SCHEMA_VERSION}; "
                    "upgrade shiftchange to use it"
                )
            missing = [migration for migration in MIGRATIONS if migration[0] not in (applied or {})]
            if not apply:
                if applied is None:  # no store there at all: `db migrate` would make an empty one, not find the one meant
                    raise StoreError(_no_store(connection, schema, where))
                if missing:
                    current = max(applied or {0: ""})
                    raise StoreError(
                        f"schema {schema!r} at {where} is at version {current}, this code needs {SCHEMA_VERSION}: "
                        "run `shiftchange db migrate` (or open the store with migrate=True)"
                    )
                return []
            if not missing:
                return []
            name = sql.Identifier(schema)
            connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
            connection.execute(sql.SQL("SET LOCAL search_path TO {}").format(name))
            if applied is None:
                connection.execute(CREATE_SCHEMA_MIGRATIONS)
            for version, title, text in missing:
                connection.execute(text)
                connection.execute(RECORD_MIGRATION, (version, title))
            return [version for version, _, _ in missing]
    except psycopg.OperationalError as error:
        raise StoreUnavailable(f"PostgreSQL at {where}, migrating schema {schema!r}: {_first_line(error)}") from None
    except psycopg.Error as error:
        raise StoreError(f"PostgreSQL at {where}, migrating schema {schema!r}: {_first_line(error)}") from None


def migrate(conninfo: str, schema: str = "shiftchange", *, connect_timeout_s: float = 10.0) -> list[int]:
    """Apply the migrations `schema` lacks (creating it if need be); the versions applied now, [] if it was up to date.

    Safe to run from several processes at once: they take turns on an
    advisory lock, and only the first applies anything.
    """
    _require_psycopg()
    check_schema_name(schema)
    where = _where(conninfo)
    with _connect(conninfo, connect_timeout_s, where) as connection:
        return _migrate(connection, schema, where, apply=True)


# ---- the transaction


class _PostgresTransaction(Transaction):
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
            statements.append(self._statement("SELECT pg_notify(%s, %s)", (self._store.wakeup_channel, workspace)))
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

    def _locked(self, table: _Table, query: str, identity: str) -> Any:
        """A record read with its row lock, once per transaction: a second read is the first's object, kept current by writes."""
        key = (table.name, identity)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rows = self._read(query, (identity,))
        if not rows:
            return None
        record = self._cache[key] = table.from_row(rows[0])
        return record

    def _locked_all(self, table: _Table, query: str, parameters: tuple) -> list:
        """Records read with their row locks; one already read in this transaction is that object."""
        return self._cached_all(table, self._read(query, parameters))

    def _cached_all(self, table: _Table, rows: list[tuple]) -> list:
        found = []
        cache = self._cache
        for row in rows:
            record = table.from_row(row)
            identity = getattr(record, table.key)
            record = cache.setdefault((table.name, identity), record)
            found.append(record)
        return found

    def _one(self, table: _Table, query: str, parameters: tuple) -> Any:
        rows = self._read(query, parameters, clock=False)
        return table.from_row(rows[0]) if rows else None

    def _all(self, table: _Table, query: str, parameters: tuple) -> list:
        return [table.from_row(row) for row in self._read(query, parameters, clock=False)]

    def task(self, task_id: str) -> Task | None:
        return self._locked(TASKS, LOCK_TASK, task_id)

    def tasks(self, task_ids: Iterable[str]) -> list[Task | None]:
        """The tasks of `task_ids`, in their order, locked in task-id order, in one round trip (those read before are not read again)."""
        wanted = list(task_ids)
        cache = self._cache
        unread = [task_id for task_id in dict.fromkeys(wanted) if (TASKS.name, task_id) not in cache]
        if unread:
            self._cached_all(TASKS, self._read(LOCK_TASKS, (unread,)))
        return [cache.get((TASKS.name, task_id)) for task_id in wanted]

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self._locked(ATTEMPTS, LOCK_ATTEMPT, attempt_id)

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return self._locked_all(ATTEMPTS, LOCK_ATTEMPTS_OF_TASK, (task_id,))

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        """A plain read, no lock: a write based on it is guarded by the version, and raises StoreRetryable if it is stale."""
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        cache = self._cache
        return [cache.get((ATTEMPTS.name, row[0])) or ATTEMPTS.from_row(row) for row in self._read(SELECT_ATTEMPTS_IN_STATES, (wanted,))]

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        """Up to `limit` Attempts in `states` (of `workspace`'s tasks), oldest first, locked; rows others hold are skipped."""
        _check_limit(limit)
        wanted = list(dict.fromkeys(states))
        if not wanted or limit == 0:
            return []
        state: Any = wanted[0] if len(wanted) == 1 else wanted
        if workspace is None:
            found = self._locked_all(ATTEMPTS, LOCK_CLAIMABLE_ONE if len(wanted) == 1 else LOCK_CLAIMABLE, (state, limit))
        else:
            found = self._locked_all(ATTEMPTS, LOCK_CLAIMABLE_ONE_IN if len(wanted) == 1 else LOCK_CLAIMABLE_IN, (state, workspace, limit))
        return found

    def claim_candidate(self, states: Iterable[str], workspace: str | None = None) -> tuple[Attempt, Task | None, list[Attempt]] | None:
        """The claim queue's oldest Attempt, its task and the task's Attempts, locked in that order, in one round trip."""
        wanted = list(dict.fromkeys(states))
        if len(wanted) != 1:
            return super().claim_candidate(wanted, workspace)
        (state,) = wanted
        pick = self._statement(PICK_WITH_TASK, (state,)) if workspace is None else self._statement(PICK_WITH_TASK_IN, (state, workspace))
        rows, siblings, ((now,),) = self._trip([(FORGET_PICKED, ()), pick, (PICKED_SIBLINGS, ()), (NOW, ())], 3)
        self._now, self._heard_at = now, time.monotonic()
        if not rows:
            return None
        width = len(ATTEMPTS.columns)
        (attempt,) = self._cached_all(ATTEMPTS, [rows[0][:width]])
        task = self._cache.setdefault((TASKS.name, attempt.task_id), TASKS.from_row(rows[0][width:-1]))
        return attempt, task, self._cached_all(ATTEMPTS, siblings)

    def intent(self, key: str) -> Intent | None:
        return self._locked(INTENTS, LOCK_INTENT, key)

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        """A plain read, no lock (the control plane's scan), in task-id order."""
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        return self._all(TASKS, SELECT_TASKS_IN_STATES, (wanted,))

    def leader(self, name: str) -> Leader | None:
        """The named leader lease, its row locked until the transaction ends: a takeover waits for a fenced step to commit."""
        rows = self._read(LOCK_LEADER, (name,))
        return LEADERS.from_row(rows[0]) if rows else None

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self._write(PUT_LEADER, (name, holder, generation, expires_at), None)

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return self._locked_all(INTENTS, LOCK_INTENTS_OF_ATTEMPT, (attempt_id,))

    # ---- guarded writes

    def insert_task(self, task: Task) -> None:
        self._insert(TASKS, INSERT_TASK, task, f"task {task.task_id!r}")
        self._inserted_tasks.setdefault(task.task_id, 0)

    def update_task(self, task: Task, **changes: Any) -> None:
        self._update(TASKS, task, changes, terminal_guard=False)

    def insert_attempt(self, attempt: Attempt) -> None:
        # The task's row lock orders appends to one task: no other transaction can add an Attempt between the count and the insert.
        task_id = attempt.task_id
        siblings = self._inserted_tasks.get(task_id)
        if siblings is None:
            self._write(LOCK_TASK_GUARD, (task_id,), ("parent", None, task_id, None, f"unknown task {task_id!r}"))
            self._write(COUNT_GUARD, (task_id, attempt.number - 1), ("numbering", None, task_id, attempt.number, ""))
        elif attempt.number != siblings + 1:
            # A task this transaction inserted: it exists (or its INSERT aborts the transaction) and has only the Attempts
            # inserted here, since no other transaction sees its row until this one commits. The server need not count them.
            raise StoreConflict(f"attempt numbers must run 1..N: task {task_id!r} has {siblings}, got {attempt.number}")
        self._insert(ATTEMPTS, INSERT_ATTEMPT, attempt, f"attempt {attempt.attempt_id!r}")
        if siblings is not None:
            self._inserted_tasks[task_id] = siblings + 1
        if attempt.state == "admitted":
            self._admitted_in(attempt)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self._update(ATTEMPTS, attempt, changes, terminal_guard=True)
        if changes.get("state") == "admitted":
            self._admitted_in(attempt)

    def _admitted_in(self, attempt: Attempt) -> None:
        task = self._cache.get((TASKS.name, attempt.task_id))
        if task is None:
            rows = self._read(SELECT_WORKSPACE, (attempt.task_id,), clock=False)
            workspace = rows[0][0] if rows else ""
        else:
            workspace = task.workspace
        self._admitted.add(workspace)

    def insert_intent(self, intent: Intent) -> None:
        detail = f"intent {intent.key!r} names an unknown task or attempt"
        self._write(PARENTS_GUARD, (intent.task_id, intent.attempt_id), ("parent", None, intent.key, None, detail))
        self._insert(INTENTS, INSERT_INTENT, intent, f"intent {intent.key!r}")

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self._update(INTENTS, intent, changes, terminal_guard=False)

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
        """Keep one history entry, sent with the COMMIT; its seq is 0 until the history is read (numbered after commit)."""
        values = (at, actor, kind, task_id, attempt_id, accepted, reason, from_state, to_state, generation, worker_id, detail)
        values += (code, late, expires_at, operation_key, retries)
        self._check_text(values)
        self._events.append(values)
        return new_event(0, *values)

    def events(self, task_id: str | None, after_seq: int) -> list[Event]:
        """The numbered history this transaction sees (its own events are numbered only after it commits)."""
        if task_id is None:
            return self._all(EVENTS, SELECT_EVENTS, (after_seq,))
        return self._all(EVENTS, SELECT_EVENTS_OF_TASK, (task_id, after_seq))

    def _insert(self, table: _Table, query: str, record: Any, what: str) -> None:
        """Keep the INSERT, made into a statement only when sent (so updates of the record until then ride in it)."""
        row = table.to_row(record)
        self._check_text(row)
        key = (table.name, getattr(record, table.key))
        if key in self._unsent:  # the server would refuse the second; unsent, the first would be lost instead
            raise StoreConflict(f"{what} already exists")
        guard_index = len(self._guards)
        self._guards.append(("insert", table, None, None, what))
        self._pending.append(None)
        self._cache[key] = record
        self._unsent[key] = [len(self._pending) - 1, table, query, record, guard_index, row]

    def _update(self, table: _Table, record: Any, changes: dict[str, Any], *, terminal_guard: bool) -> None:
        """Write `changes` only if the row still has `record.version` (and is not terminal); then mirror them on `record`."""
        check_changes(table, changes)
        identity = getattr(record, table.key)
        if terminal_guard and record.state in ATTEMPT_TERMINAL:
            # Terminal is final: no other transaction can have changed that, so it is no race to run again.
            raise StoreConflict(f"{table.record_type.__name__.lower()} {identity!r} is terminal ({record.state}) and immutable")
        encoded = [table.encode(name, value) for name, value in changes.items()]
        unsent = self._unsent.get((table.name, identity))
        if unsent is not None and unsent[3].version == record.version:
            # Inserted by this transaction and not yet sent: the INSERT will carry the changed record instead (checked
            # as an UPDATE's parameters would be), so an intake's create, accept and dispatch are one statement.
            self._check_text(encoded)
            unsent[5] = None
        else:
            key = (table.name, identity)
            kept = self._unsent_updates.get(key)
            if kept is not None and kept[2] + kept[5] == record.version:
                # Updated earlier in this transaction and not yet sent (a claim and its start): one UPDATE carries both,
                # guarded by the version first read (a write after a terminal state was refused above).
                self._check_text(encoded)
                kept[3].update(zip(changes, encoded, strict=True))
                kept[5] += 1
            else:
                self._check_text(encoded)
                if kept is not None:  # a second write it cannot merge with (a copy read at another version): send both
                    self._render_update(key, kept)
                guard_index = len(self._guards)
                self._guards.append(("update", table, identity, record.version, ""))
                self._pending.append(None)
                merged = dict(zip(changes, encoded, strict=True))
                self._unsent_updates[key] = [len(self._pending) - 1, table, record.version, merged, terminal_guard, 1, guard_index]
        for name, value in changes.items():
            setattr(record, name, value)
        record.version += 1
        cached = self._cache.get((table.name, identity))
        if cached is not None and cached is not record:
            for name, value in changes.items():
                setattr(cached, name, value)
            cached.version = record.version


assert tuple(inspect.signature(_PostgresTransaction.append_event).parameters)[1:] == _EVENT_FIELDS, "append_event must take every field"


def _check_limit(limit: Any) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InputError(f"limit must be an integer >= 0, not {limit!r}")


# ---- the server's clock


class ServerClock:
    """The PostgreSQL server's clock as the core's Clock: the one time every process sharing the server judges leases by.

    Inside this thread's open transaction on the store, `now()` is the
    server's `clock_timestamp()` read in that transaction after its latest
    locking read (it rides in the same round trip as the read, so a contract
    that waited for a row lock is judged at the time it got it), or read on
    first ask when the transaction has locked nothing. Outside a transaction
    it is the server's time as last heard by this store handle plus the
    local `time.monotonic()` since, never the local wall clock: a process
    whose wall clock is minutes off reads the server's time all the same.
    It never goes backwards for one handle (a reading a few milliseconds
    behind an earlier estimate is held at the estimate).
    """

    __slots__ = ("_last", "_lock", "_offset", "_store")

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._offset: float | None = None
        self._last = -math.inf
        self._lock = threading.Lock()
        """Threads of a process share a handle's clock (a worker's heartbeat paces itself on it): `_last` moves under it."""

    def now(self) -> float:
        tx = getattr(self._store._local, "tx", None)
        if tx is not None and tx._cursor is not None:
            reading = tx.now()
        else:
            if self._offset is None:
                with self._store.transaction() as fresh:
                    fresh.now()
            reading = time.monotonic() + self._offset  # type: ignore[operator]
        with self._lock:
            if reading < self._last:
                return self._last
            self._last = reading
        return reading

    def heard(self, server_s: float, monotonic_s: float) -> None:
        """A transaction read the server's time `server_s` at local monotonic time `monotonic_s`."""
        self._offset = server_s - monotonic_s

    def __repr__(self) -> str:
        return f"ServerClock({self._store.where})"


# ---- the store


class PostgresStore(Store):
    """Records in one PostgreSQL schema (guarded writes, row locks, a pool of connections); safe across threads and processes.

    `conninfo` is a libpq URL (`postgresql://user@host:5432/db`) or key=value
    string. Every table lives in `schema`, which is created and migrated on
    open unless `migrate=False` (then a schema not at this code's version is
    refused: run `shiftchange db migrate`). The pool keeps `pool_min` to
    `pool_max` connections; one transaction holds one of them for its block.
    Opening waits at most `connect_timeout_s` for the server, and raises
    StoreUnavailable naming the host and database if it cannot be reached.

    Two bounds keep one frozen process from freezing every other one. A
    transaction waits at most `lock_timeout_s` for a row another holds (then
    StoreRetryable: the contract runs again, a bounded number of times); and
    the server ends a session that sits inside a transaction, waiting for its
    client, for `idle_in_transaction_timeout_s` (a process SIGSTOPped or cut
    off mid-contract), which rolls that transaction back and frees its locks,
    and its claim on the claim queue. Keep the second well under a lease.

    `prepare` (default true) prepares each statement once per connection;
    false sends every statement unnamed, for a transaction-mode pooler that
    does not carry prepared statements from one server connection to another
    (it costs the server a parse and a plan per statement).
    """

    numbers_on_append = False

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "shiftchange",
        pool_min: int = 1,
        pool_max: int = 8,
        connect_timeout_s: float = 10.0,
        migrate: bool = True,
        lock_timeout_s: float = 2.0,
        idle_in_transaction_timeout_s: float = 3.0,
        prepare: bool = True,
    ) -> None:
        _require_psycopg()
        self.check_options(
            schema=schema,
            pool_min=pool_min,
            pool_max=pool_max,
            connect_timeout_s=connect_timeout_s,
            lock_timeout_s=lock_timeout_s,
            idle_in_transaction_timeout_s=idle_in_transaction_timeout_s,
            prepare=prepare,
        )
        self.schema = schema
        self.prepare = bool(prepare)
        """Whether statements are prepared on each connection (on first use): see `PREPARE_HELP`."""
        self.lock_timeout_s, self.idle_in_transaction_timeout_s = float(lock_timeout_s), float(idle_in_transaction_timeout_s)
        self.where = _where(conninfo)
        """host:port/database, for messages."""
        self.pool_min, self.pool_max, self.connect_timeout_s = pool_min, pool_max, float(connect_timeout_s)
        self._local = threading.local()
        self._pool: Any = None
        self._server_clock = ServerClock(self)
        self.round_trips = 0
        """Messages transactions sent to the server (each holds one or more statements); approximate across threads, for benchmarks."""
        self.wakeup_channel = wakeup.channel(self.schema)
        """The LISTEN/NOTIFY channel every transaction that admits an Attempt announces its workspace on."""
        # Whole milliseconds, from numbers checked above.
        bounds = (f"{math.ceil(self.lock_timeout_s * 1000)}ms", f"{math.ceil(self.idle_in_transaction_timeout_s * 1000)}ms")
        self._settings = (SETTINGS, (f'"{self.schema}"', *bounds))
        """The statement every transaction of this store runs first (`SETTINGS`), with its values."""
        with _connect(conninfo, connect_timeout_s, self.where) as connection:
            self.migrated = _migrate(connection, self.schema, self.where, apply=bool(migrate))
            """The schema versions this open applied ([] when the schema was already up to date, or migrate=False)."""
        pool = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=pool_max,
            kwargs=_connection_options(connect_timeout_s),
            configure=self._configure,
            open=False,
            timeout=CHECKOUT_TIMEOUT_S,
            name=f"shiftchange-{self.schema}",
        )
        try:
            pool.open(wait=True, timeout=self.connect_timeout_s)
        except PoolTimeout:
            pool.close()
            raise StoreUnavailable(f"cannot reach PostgreSQL at {self.where}: no connection within {self.connect_timeout_s:g} s") from None
        self._pool = pool

    @staticmethod
    def check_options(
        *,
        schema: Any = "shiftchange",
        pool_min: Any = 1,
        pool_max: Any = 8,
        connect_timeout_s: Any = 10.0,
        lock_timeout_s: Any = 2.0,
        idle_in_transaction_timeout_s: Any = 3.0,
        migrate: Any = True,
        prepare: Any = True,
    ) -> None:
        """InputError for an option the constructor would refuse, said before anything connects (`stores.check_url`)."""
        check_schema_name(schema)
        if type(prepare) is not bool:
            raise InputError(f"prepare must be true or false, not {prepare!r}")
        for name, value in (("pool_min", pool_min), ("pool_max", pool_max)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be an integer >= 1, not {value!r}")
        if pool_min > pool_max:
            raise InputError(f"pool_min ({pool_min}) must not exceed pool_max ({pool_max})")
        for name, value in (
            ("connect_timeout_s", connect_timeout_s),
            ("lock_timeout_s", lock_timeout_s),
            ("idle_in_transaction_timeout_s", idle_in_transaction_timeout_s),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise InputError(f"{name} must be a number of seconds > 0, not {value!r}")

    def _configure(self, connection: Any) -> None:
        """Every pooled connection: the NUL-escaping text adapters, and untyped numbers.

        Nothing is set on the session: each transaction sets the schema and its
        bounds for itself (`SETTINGS`), so nothing depends on which server
        connection a pooler in between hands it.
        """
        _adapt_text(connection)
        _adapt_numbers(connection)
        connection.prepare_threshold = None  # the store prepares its statements itself, by name (`_round_trip`), or none

    def __repr__(self) -> str:
        return f"PostgresStore({self.where}, schema={self.schema!r})"

    # ---- connections

    def _checkout(self, pool: Any) -> Any:
        """A pooled connection for one transaction; BEGIN is sent with its first statements, not on its own."""
        try:
            connection = pool.getconn()
        except PoolTimeout as error:
            raise StoreUnavailable(
                f"PostgreSQL at {self.where}: no connection came free within {CHECKOUT_TIMEOUT_S:g} s (pool_max={self.pool_max})"
            ) from error
        except PoolClosed as error:
            raise StoreError(f"store {self!r} is closed") from error
        return connection

    @staticmethod
    def _release(pool: Any, connection: Any) -> None:
        if connection.broken:
            connection.close()
        if connection.closed:
            _DISCARDED.add(connection)
        pool.putconn(connection)  # a closed connection is discarded and replaced

    # ---- the interface

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        local = self._local
        if getattr(local, "tx", None) is not None:
            raise RuntimeError("PostgresStore transactions do not nest (one per thread at a time)")
        pool = self._pool
        if pool is None:
            raise StoreError(f"store {self!r} is closed")
        tx = _PostgresTransaction(self._checkout(pool), self)
        local.tx = tx
        try:
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise
            tx.commit()
            if tx._now is not None:
                self._server_clock.heard(tx._now, tx._heard_at)
        finally:
            connection = tx.connection
            tx.end()
            local.tx = None
            self._release(pool, connection)

    def number_events(self) -> int:
        """Number every committed event that has none yet (the sequencer, see the module docstring); the last seq, or 0.

        Readers call it before they read (`events`), so what they read is
        numbered; a process may also call it on a cadence to keep the
        unnumbered tail short. It runs on a connection of its own, in a
        transaction of its own, even while this thread has one open (which
        never holds event_counter: no contract's transaction takes it), and
        holds event_counter's row only for the batch: one round trip.
        """
        pool = self._pool
        if pool is None:
            raise StoreError(f"store {self!r} is closed")
        connection = self._checkout(pool)
        try:
            ((todo,),) = _exchange(connection, [self._settings, (ANY_UNNUMBERED, ())], -1, self.prepare)
            if not todo:
                return 0
            numbering = [(BEGIN, ()), self._settings, (LOCK_COUNTER, ()), (NUMBER_EVENTS, ()), (COMMIT, ())]
            ((last,),) = _exchange(connection, numbering, 3, self.prepare)
            return last
        except psycopg.Error as error:
            _rollback(connection)
            raise _mapped(error, self.where, broken=connection.broken, committing=True) from error
        finally:
            self._release(pool, connection)

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        """The committed history, numbered first; inside this thread's open transaction, the numbered history it sees."""
        self.number_events()
        open_tx = getattr(self._local, "tx", None)
        if open_tx is not None:
            return open_tx.events(task_id, after_seq)
        with self.transaction() as tx:
            return tx.events(task_id, after_seq)  # type: ignore[attr-defined]

    def clock(self) -> ServerClock:
        """The server's clock: leases are judged by it (see `ServerClock`)."""
        return self._server_clock

    # Reads outside contracts take no row lock: a monitor's read neither waits for a contract nor holds one up.
    def get_task(self, task_id: str) -> Task | None:
        with self.transaction() as tx:
            return tx._one(TASKS, SELECT_TASK, (task_id,))  # type: ignore[attr-defined]

    def get_attempt(self, attempt_id: str) -> Attempt | None:
        with self.transaction() as tx:
            return tx._one(ATTEMPTS, SELECT_ATTEMPT, (attempt_id,))  # type: ignore[attr-defined]

    def get_attempts(self, task_id: str) -> list[Attempt]:
        with self.transaction() as tx:
            return tx._all(ATTEMPTS, SELECT_ATTEMPTS_OF_TASK, (task_id,))  # type: ignore[attr-defined]

    def get_intent(self, key: str) -> Intent | None:
        with self.transaction() as tx:
            return tx._one(INTENTS, SELECT_INTENT, (key,))  # type: ignore[attr-defined]

    def get_intents(self, attempt_id: str) -> list[Intent]:
        with self.transaction() as tx:
            return tx._all(INTENTS, SELECT_INTENTS_OF_ATTEMPT, (attempt_id,))  # type: ignore[attr-defined]

    def drop_schema(self) -> None:
        """Drop the store's schema and everything in it (for tests); the store is closed first."""
        wakeup.close(self)  # its LISTEN connection would otherwise outlive the pool
        pool, self._pool = self._pool, None
        if pool is None:
            raise StoreError(f"store {self!r} is closed")
        try:
            with pool.connection() as connection:
                connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))
        finally:
            pool.close()

    def close(self) -> None:
        """Close the pool and its connections (and the wake-up listener's); safe to call twice."""
        wakeup.close(self)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
