"""PostgresStore: the storage interface on one PostgreSQL schema, its pool of connections, and the numbering of its
history after commit."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from shiftchange.core.errors import InputError, StoreError, StoreUnavailable
from shiftchange.core.records import (
    Attempt,
    Event,
    Intent,
    Task,
)
from shiftchange.core.store import Durability, Store, Transaction

from .. import wakeup
from .clock import ServerClock
from .connect import _connect, _connection_options, _where
from .driver import ConnectionPool, PoolClosed, PoolTimeout, psycopg, require_psycopg, sql
from .pipeline import _DISCARDED, _exchange, _mapped, _rollback
from .schema import _migrate, check_schema_name
from .statements import (
    ANY_UNNUMBERED,
    ATTEMPTS,
    BEGIN,
    COMMIT,
    INTENTS,
    LOCK_COUNTER,
    NUMBER_EVENTS,
    SELECT_ATTEMPT,
    SELECT_ATTEMPTS_OF_TASK,
    SELECT_INTENT,
    SELECT_INTENTS_OF_ATTEMPT,
    SELECT_TASK,
    SETTINGS,
    TASKS,
)
from .text import _adapt_numbers, _adapt_text
from .transaction import _PostgresTransaction

DURABILITY_SETTINGS = "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')"
"""What `durability()` reads: the settings of the server and of this store's sessions a crash-safe commit depends on."""
CHECKOUT_TIMEOUT_S = 30.0
"""How long a transaction waits for a free connection when every one of the pool's is in use."""


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
        require_psycopg()
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

    def durability(self) -> Durability:
        """The server settings that decide whether a commit survives a crash, as one pooled connection's session sees them.

        `synchronous_commit` is a session setting (a URL may set it, as the
        contract tests' unsynced URLs do), so it is read on a connection of
        this store's pool; `fsync` and `full_page_writes` are the server's.
        """
        pool = self._pool
        if pool is None:
            raise StoreError(f"store {self!r} is closed")
        connection = self._checkout(pool)
        try:
            row = connection.execute(DURABILITY_SETTINGS).fetchone()
        except psycopg.Error as error:
            raise _mapped(error, self.where, broken=connection.broken, committing=False) from error
        finally:
            self._release(pool, connection)
        return Durability("postgresql", dict(zip(("fsync", "synchronous_commit", "full_page_writes"), row, strict=True)))

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
