"""PostgresStore: the conformance kit on a real server, then what only a server store must add, and store URLs.

The kit (`check_store`, `check_contracts`) holds PostgresStore to every rule
the memory and SQLite stores keep. What one handle cannot show is tested
here: row locks that make a second contract wait, SKIP LOCKED claims that
many OS processes race on, a stale write after an unlocked read, a deadlock
and a lock timeout (StoreRetryable), a connection killed mid-transaction
(StoreUnavailable, nothing committed, the store usable again), migrations
run by several processes at once, and schemas the store must refuse.

Every test that needs a server takes the `postgres_url` fixture (skips, or
fails under SHIFTCHANGE_REQUIRE_POSTGRES=1, without one) and works in fresh
schemas that `make_postgres_store` drops afterwards. `open_store` and
`describe` are tested without a server where they can be.
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import subprocess
import sys
import textwrap
import threading
import time
import typing
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core import (
    InputError,
    Leader,
    MemoryStore,
    NotFound,
    StoreConflict,
    StoreError,
    StoreRetryable,
    StoreUnavailable,
)
from shiftchange.core.records import Attempt, Budget, Event, Intent, Plan, Task, field_names
from shiftchange.stores import describe, open_store
from shiftchange.stores.postgres import SCHEMA_VERSION, TABLES, escape_text, migrate, unescape_text
from shiftchange.stores.sqlite import SQLiteStore
from shiftchange.testing import check_store
from shiftchange.testing.stores import event_fields, make_task, minimal_attempt, minimal_task, seed
from tests.conftest import unsynced

# The adapter's own tests take a schema each (and some a server-side wait): heavy, out of the fast tier, which still meets
# PostgreSQL through tests/core's store fixture.
pytestmark = pytest.mark.heavy

SPAWN = multiprocessing.get_context("spawn")


def admin(url: str):
    """A plain autocommit connection, without the store's adapters: what another SQL client sees."""
    import psycopg

    return psycopg.connect(url, autocommit=True)


def relations(url: str, schema: str) -> dict[str, list]:
    """Every table of `schema` with its rows (schema_migrations without its timestamps): a snapshot to prove nothing changed."""
    with admin(url) as connection:
        names = [name for (name,) in connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema,))]
        snapshot = {}
        for name in names:
            columns = "version, name" if name == "schema_migrations" else "*"
            snapshot[name] = connection.execute(f'SELECT {columns} FROM "{schema}"."{name}" ORDER BY 1').fetchall()
        return snapshot


def run_threads(*targets) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    return threads


def with_parameter(url: str, parameter: str) -> str:
    return url + ("&" if "?" in url else "?") + parameter


# ---- the conformance kit, unchanged


def test_the_store_contract_passes_on_postgres_and_an_unsynced_session_fails_only_its_durability(make_postgres_store):
    """Goal: through one handle every check of the store contract passes (atomicity, guards, round trips, NUL included, history
    numbering, the server's clock) but one: the URL turns synchronous_commit off, and the durability check says so.

    The synced store passes it too: tests/stores/test_transactions.py checks it through two handles."""
    report = check_store(lambda: make_postgres_store(conninfo=unsynced(make_postgres_store.url), pool_max=2))
    failed = {result.name: result.detail for result in report.failures}
    assert list(failed) == ["a_durable_store_runs_with_settings_a_commit_survives_a_crash_under"], failed
    assert "synchronous_commit=off" in failed["a_durable_store_runs_with_settings_a_commit_survives_a_crash_under"]
    assert len(report.results) > 30


# ---- the schema: the SQL files against the records
# (every contract rule over PostgreSQL is tests/core/test_contracts.py's, one case per rule, on every store)


SQL_TYPES = {str: "text", int: "bigint", float: "double precision", bool: "boolean", Budget: "text", Plan: "text"}
RECORD_TABLES = {"tasks": Task, "attempts": Attempt, "intents": Intent, "events": Event, "leaders": Leader}


def test_every_table_has_exactly_its_records_fields_typed_and_nullable_as_declared(make_postgres_store):
    """Goal: a field added to a record and forgotten in the SQL files fails here: names in order, types, NULL only for `X | None`."""
    store = make_postgres_store()
    assert {table.name: table.record_type for table in TABLES} == RECORD_TABLES
    with admin(store_url := make_postgres_store.url) as connection:
        for table, record_type in RECORD_TABLES.items():
            rows = connection.execute(
                "SELECT column_name, data_type, is_nullable, collation_name FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (store.schema, table),
            ).fetchall()
            if table == "events":  # the store's own columns (numbering after commit: migration 4), after the record's
                internal = rows[len(field_names(Event)) :]
                rows = rows[: len(field_names(Event))]
                assert internal == [("pos", "bigint", "NO", None), ("xid", "xid8", "YES", None)], internal
            hints = typing.get_type_hints(record_type)
            expected = []
            for name in field_names(record_type):
                arguments = [argument for argument in typing.get_args(hints[name]) if argument is not type(None)]
                optional = type(None) in typing.get_args(hints[name])
                kind = SQL_TYPES[arguments[0] if optional else hints[name]]
                numbered_later = (table, name) == ("events", "seq")  # NULL until the sequencer numbers it
                expected.append((name, kind, "YES" if optional or numbered_later else "NO", "C" if kind == "text" else None))
            assert rows == expected, f"{table} in {store_url}"


def test_the_indexes_the_queries_need_exist(make_postgres_store):
    """Goal: the scans and the per-task reads are indexed, and (task_id, number) is unique in the database itself."""
    store = make_postgres_store()
    with admin(make_postgres_store.url) as connection:
        found = dict(connection.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (store.schema,)).fetchall())
    wanted = {
        "attempts_by_state": "(state)",
        "attempts_task_number": "UNIQUE INDEX attempts_task_number ON {}.attempts USING btree (task_id, number)",
        "intents_by_attempt": "(attempt_id)",
        "events_by_task": "(task_id, seq)",
        "tasks_by_state": "(state)",
    }
    for name, definition in wanted.items():
        assert definition.format(store.schema) in found[name], (name, found.get(name))


# ---- migrations


def test_a_fresh_schema_is_migrated_and_recorded_and_migrating_again_does_nothing(make_postgres_store):
    """Goal: opening creates the schema at the newest version, records each file once; migrate() then applies nothing."""
    store = make_postgres_store()
    assert store.migrated == list(range(1, SCHEMA_VERSION + 1))
    assert migrate(make_postgres_store.url, store.schema) == []
    assert make_postgres_store(schema=store.schema).migrated == []
    recorded = relations(make_postgres_store.url, store.schema)["schema_migrations"]
    assert recorded == [
        (1, "schema"),
        (2, "claim_order"),
        (3, "ordered_text_escape"),
        (4, "history_numbered_after_commit"),
        (5, "cancelled_spelling"),
    ]


def _open_or_migrate(url: str, schema: str, how: str, barrier, results) -> None:
    """A child process: wait for the others, then open a store (or run migrate) on one new schema; report what it applied."""
    try:
        from shiftchange.stores.postgres import PostgresStore
        from shiftchange.stores.postgres import migrate as run_migrate

        barrier.wait(60)
        if how == "open":
            store = PostgresStore(url, schema=schema, pool_min=1, pool_max=1)
            applied = store.migrated
            store.close()
        else:
            applied = run_migrate(url, schema)
        results.put(("ok", applied))
    except BaseException as error:
        results.put(("error", repr(error)))


def test_processes_opening_one_new_schema_at_once_migrate_it_once(make_postgres_store):
    """Goal: two processes opening a store and one running migrate, on one new schema at once: one applies the files, once."""
    schema = f"t_{uuid.uuid4().hex[:8]}"
    make_postgres_store.schemas.append(schema)
    ways = ("open", "open", "migrate")
    barrier, results = SPAWN.Barrier(len(ways)), SPAWN.Queue()
    children = [SPAWN.Process(target=_open_or_migrate, args=(make_postgres_store.url, schema, how, barrier, results)) for how in ways]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(30)
    everything = ("ok", list(range(1, SCHEMA_VERSION + 1)))
    assert (outcomes.count(everything), outcomes.count(("ok", []))) == (1, len(ways) - 1), outcomes
    assert relations(make_postgres_store.url, schema)["schema_migrations"] == [
        (1, "schema"),
        (2, "claim_order"),
        (3, "ordered_text_escape"),
        (4, "history_numbered_after_commit"),
        (5, "cancelled_spelling"),
    ]


def test_a_schema_of_a_newer_version_is_refused_and_left_as_it_was(make_postgres_store):
    """Goal: a schema_migrations row this code does not know makes open and migrate refuse with StoreError, changing nothing."""
    store = make_postgres_store()
    seed(store, make_task())
    store.close()
    with admin(make_postgres_store.url) as connection:
        connection.execute(f'INSERT INTO "{store.schema}".schema_migrations (version, name) VALUES (%s, %s)', (SCHEMA_VERSION + 1, "later"))
    before = relations(make_postgres_store.url, store.schema)
    message = f"schema version {SCHEMA_VERSION + 1}, this code knows {SCHEMA_VERSION}"
    with pytest.raises(StoreError, match=message):
        make_postgres_store(schema=store.schema)
    with pytest.raises(StoreError, match=message):
        make_postgres_store(schema=store.schema, migrate=False)
    with pytest.raises(StoreError, match=message):
        migrate(make_postgres_store.url, store.schema)
    assert relations(make_postgres_store.url, store.schema) == before


def test_a_schema_with_tables_but_no_schema_migrations_is_not_a_store_and_is_left_alone(make_postgres_store):
    """Goal: someone else's tables are never migrated into: StoreError, and the schema still holds only what it held."""
    schema = f"t_{uuid.uuid4().hex[:8]}"
    make_postgres_store.schemas.append(schema)
    with admin(make_postgres_store.url) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
        connection.execute(f'CREATE TABLE "{schema}".jobs (id integer PRIMARY KEY)')
    with pytest.raises(StoreError, match="no schema_migrations: not a shiftchange store"):
        make_postgres_store(schema=schema)
    with pytest.raises(StoreError, match="not a shiftchange store"):
        migrate(make_postgres_store.url, schema)
    assert relations(make_postgres_store.url, schema) == {"jobs": []}


def test_migrate_false_refuses_a_missing_schema_and_creates_nothing(make_postgres_store):
    """Goal: a store opened with migrate=False on a missing schema says it does not exist (not "run db migrate", which would
    make an empty one) and creates no schema. tests/stores/test_url_errors.py says what the message lists."""
    schema = f"t_{uuid.uuid4().hex[:8]}"
    make_postgres_store.schemas.append(schema)
    with pytest.raises(StoreError, match=rf"^no schema '{schema}' at "):
        make_postgres_store(schema=schema, migrate=False)
    with admin(make_postgres_store.url) as connection:
        assert connection.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() == (0,)


# ---- many processes: the claim queue


def _claimer(url: str, schema: str, worker: str, barrier, results) -> None:
    """A child process: claim one admitted Attempt per transaction (claimable + guarded update + event) until none is left."""
    try:
        from shiftchange.core import StoreConflict
        from shiftchange.stores.postgres import PostgresStore

        store = PostgresStore(url, schema=schema, pool_min=1, pool_max=1, migrate=False)
        claimed, conflicts = [], []
        barrier.wait(60)
        while True:
            try:
                with store.transaction() as tx:
                    found = tx.claimable(["admitted"], 1)
                    if not found:
                        break
                    attempt = found[0]
                    tx.update_attempt(attempt, state="claimed", worker_id=worker)
                    tx.append_event(
                        at=1.0,
                        actor="worker",
                        kind="claim",
                        task_id=attempt.task_id,
                        attempt_id=attempt.attempt_id,
                        accepted=True,
                        reason="accepted",
                        worker_id=worker,
                    )
                claimed.append(attempt.attempt_id)
            except StoreConflict as error:
                conflicts.append(repr(error))
        store.close()
        results.put((worker, claimed, conflicts))
    except BaseException as error:
        results.put((worker, None, [repr(error)]))


def test_processes_racing_on_the_claim_queue_claim_every_attempt_exactly_once(make_postgres_store):
    """Goal: eight OS processes taking claimable(...) + a guarded write each get different rows: all claimed once, no conflict."""
    store = make_postgres_store()
    tasks, per_task = 32, 5
    with store.transaction() as tx:
        for t in range(tasks):
            tx.insert_task(minimal_task(f"task-{t:02}"))
            for n in range(1, per_task + 1):
                attempt = minimal_attempt(f"task-{t:02}#{n}", task_id=f"task-{t:02}", number=n, state="admitted")
                tx.insert_attempt(dataclasses.replace(attempt, created_at=float(t * per_task + n)))
    total = tasks * per_task
    workers = [f"worker-{i}" for i in range(8)]
    barrier, results = SPAWN.Barrier(len(workers)), SPAWN.Queue()
    children = [SPAWN.Process(target=_claimer, args=(make_postgres_store.url, store.schema, w, barrier, results)) for w in workers]
    for child in children:
        child.start()
    reports = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(30)
    assert [conflicts for _, _, conflicts in reports] == [[]] * len(workers)
    claims = collections.Counter(attempt_id for _, claimed, _ in reports for attempt_id in claimed)
    assert len(claims) == total and set(claims.values()) == {1}
    claimer = {attempt_id: worker for worker, claimed, _ in reports for attempt_id in claimed}
    assert sum(1 for _, claimed, _ in reports if claimed) >= 2, "the processes did not race"
    with store.transaction() as tx:
        stored = tx.attempts_in(["admitted", "claimed"])
    assert {(a.attempt_id, a.state, a.worker_id, a.version) for a in stored} == {(i, "claimed", w, 1) for i, w in claimer.items()}
    history = store.events()
    assert [event.seq for event in history] == list(range(1, total + 1)), "the history is numbered 1..N in commit order"
    assert {event.attempt_id: event.worker_id for event in history} == claimer


# ---- locks, within one process


def test_a_locked_attempt_makes_a_second_contract_wait_until_the_first_commits(make_postgres_store):
    """Goal: attempt() locks its row: another thread's attempt() blocks until the holder commits, then reads its write."""
    store = make_postgres_store(pool_max=3)
    seed(store, make_task(), minimal_attempt("attempt-1", state="admitted"))
    held, release, seen = threading.Event(), threading.Event(), {}

    def holder() -> None:
        with store.transaction() as tx:
            attempt = tx.attempt("attempt-1")
            held.set()
            release.wait(10)
            tx.update_attempt(attempt, checkpoint="written by the holder")

    def second() -> None:
        with store.transaction() as tx:
            seen["checkpoint"] = tx.attempt("attempt-1").checkpoint

    (first,) = run_threads(holder)
    assert held.wait(10)
    (waiting,) = run_threads(second)
    waiting.join(0.5)
    assert waiting.is_alive(), "the second attempt() did not wait for the row lock"
    with store.transaction() as tx:  # an unlocked scan, on this thread, neither waits nor sees the uncommitted write
        assert [(a.attempt_id, a.checkpoint) for a in tx.attempts_in(["admitted"])] == [("attempt-1", None)]
    release.set()
    first.join(10)
    waiting.join(10)
    assert seen == {"checkpoint": "written by the holder"}


def test_claimable_skips_the_rows_another_transaction_holds(make_postgres_store):
    """Goal: while one transaction holds the oldest claimable Attempt, another's claimable() returns the next ones at once."""
    store = make_postgres_store(pool_max=3)
    seed(store, minimal_task("task-1"))
    seed(store, *(dataclasses.replace(minimal_attempt(f"a-{n}", "task-1", n, "admitted"), created_at=10.0 - n) for n in (1, 2, 3)))
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with store.transaction() as tx:
            assert [a.attempt_id for a in tx.claimable(["admitted"], 1)] == ["a-3"]  # the oldest: created_at 7.0
            held.set()
            release.wait(10)

    (thread,) = run_threads(holder)
    assert held.wait(10)
    started = time.monotonic()
    with store.transaction() as tx:
        assert [a.attempt_id for a in tx.claimable(["admitted"], 5)] == ["a-2", "a-1"]
        assert tx.claimable(["admitted", "queued"], 0) == [] and tx.claimable([], 3) == []
        with pytest.raises(InputError, match="limit"):
            tx.claimable(["admitted"], -1)
    assert time.monotonic() - started < 2.0
    release.set()
    thread.join(10)


def test_the_default_claimable_of_a_serializing_store_is_oldest_first():
    """Goal: the Transaction ABC's claimable orders by (created_at, attempt id) and cuts at limit, for the memory store."""
    store = MemoryStore()
    seed(store, minimal_task("task-1"))
    created = {"a-1": 5.0, "a-2": 1.0, "a-3": 1.0, "a-4": 0.5}
    seed(
        store, *(dataclasses.replace(minimal_attempt(i, "task-1", n, "admitted"), created_at=created[i]) for n, i in enumerate(created, 1))
    )
    with store.transaction() as tx:
        assert [a.attempt_id for a in tx.claimable(["admitted"], 3)] == ["a-4", "a-2", "a-3"]
        with pytest.raises(InputError):
            tx.claimable(["admitted"], True)


def test_a_write_after_an_unlocked_read_of_a_changed_row_is_retryable_and_changes_nothing(make_postgres_store):
    """Goal: attempts_in does not lock; if another transaction changes the row before the write, StoreRetryable, row as it left it."""
    store = make_postgres_store()
    other = make_postgres_store(schema=store.schema, migrate=False)
    seed(store, make_task(), minimal_attempt("attempt-1", state="suspect"))
    with pytest.raises(StoreRetryable, match="changed since it was read"), store.transaction() as tx:
        (scanned,) = tx.attempts_in(["suspect"])
        tx.append_event(**event_fields())
        with other.transaction() as racing:
            racing.update_attempt(racing.attempt("attempt-1"), checkpoint="the other transaction")
        tx.update_attempt(scanned, state="reconciling")
    stored = store.get_attempt("attempt-1")
    assert (stored.state, stored.checkpoint, stored.version) == ("suspect", "the other transaction", 1)
    assert store.events() == []
    assert issubclass(StoreRetryable, StoreConflict)


def test_a_deadlock_surfaces_as_retryable_in_one_transaction_and_the_other_commits(make_postgres_store):
    """Goal: two threads lock two tasks in opposite orders: PostgreSQL breaks the deadlock, one gets StoreRetryable and keeps nothing."""
    import psycopg

    store = make_postgres_store(pool_max=2)
    seed(store, make_task("left", tokens=0), make_task("right", tokens=0))
    barrier, outcomes = threading.Barrier(2, timeout=10), {}

    def lock(first: str, second: str) -> None:
        try:
            with store.transaction() as tx:
                tx.update_task(tx.task(first), tokens=1)
                barrier.wait()
                tx.update_task(tx.task(second), tokens=2)
            outcomes[first] = "committed"
        except StoreRetryable as error:
            outcomes[first] = error

    threads = run_threads(lambda: lock("left", "right"), lambda: lock("right", "left"))
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["left", "right"]
    (loser,) = [name for name, outcome in outcomes.items() if outcome != "committed"]
    assert isinstance(outcomes[loser].__cause__, psycopg.errors.DeadlockDetected)
    winner = "left" if loser == "right" else "right"
    assert (store.get_task(winner).tokens, store.get_task(loser).tokens) == (1, 2), "only the winner's writes are kept"


def test_a_lock_timeout_is_retryable(make_postgres_store):
    """Goal: with libpq's `options=-c lock_timeout=...` in the URL, a read that waits too long for a row lock raises StoreRetryable."""
    store = make_postgres_store(pool_max=2)
    impatient = make_postgres_store(
        schema=store.schema, conninfo=with_parameter(make_postgres_store.url, "options=-c%20lock_timeout%3D200")
    )
    seed(store, make_task())
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with store.transaction() as tx:
            tx.task("task-1")
            held.set()
            release.wait(10)

    (thread,) = run_threads(holder)
    assert held.wait(10)
    try:
        with pytest.raises(StoreRetryable, match="LockNotAvailable"), impatient.transaction() as tx:
            tx.task("task-1")
    finally:
        release.set()
        thread.join(10)
    assert impatient.get_task("task-1").version == 0


def test_transactions_on_different_threads_run_side_by_side_but_do_not_nest_on_one(make_postgres_store):
    """Goal: a thread's open transaction does not stop another thread's; on one thread a second one is a RuntimeError."""
    store = make_postgres_store(pool_max=2)
    inside, done = threading.Event(), []

    def other() -> None:
        with store.transaction() as tx:
            tx.insert_task(make_task("from-the-other-thread"))
            tx.append_event(**event_fields(task_id="from-the-other-thread"))
        done.append(True)

    with store.transaction() as tx:
        tx.insert_task(make_task("from-this-thread"))
        (thread,) = run_threads(other)
        thread.join(10)
        inside.set()
        assert done == [True]
        with pytest.raises(RuntimeError, match="do not nest"), store.transaction():
            pass
        # events() here reads the numbered history this transaction sees: the other thread's committed event, not its own yet.
        tx.append_event(**event_fields(task_id="from-this-thread"))
        assert [(e.seq, e.task_id) for e in store.events()] == [(1, "from-the-other-thread")]
    assert store.get_task("from-this-thread") is not None and store.get_task("from-the-other-thread") is not None
    assert [(e.seq, e.task_id) for e in store.events()] == [(1, "from-the-other-thread"), (2, "from-this-thread")]


# ---- connections lost


def test_a_connection_killed_mid_transaction_is_unavailable_commits_nothing_and_the_store_recovers(make_postgres_store):
    """Goal: pg_terminate_backend inside a transaction: StoreUnavailable from the transaction, nothing kept, the next one works."""
    import psycopg

    store = make_postgres_store(pool_max=1)
    seed(store, make_task("kept"))
    with pytest.raises(StoreUnavailable, match="nothing was committed") as raised, store.transaction() as tx:
        tx.insert_task(make_task("doomed"))
        tx.update_task(tx.task("kept"), state="done")
        killed = tx._connection.info.backend_pid
        with admin(make_postgres_store.url) as connection:
            assert connection.execute("SELECT pg_terminate_backend(%s, 5000)", (killed,)).fetchone() == (True,)
        tx.task("kept")
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    assert "\n" not in str(raised.value)
    assert store.get_task("doomed") is None and store.get_task("kept").state == "ready"
    with store.transaction() as tx:
        tx.insert_task(make_task("after"))
        assert tx._connection.info.backend_pid != killed
    assert store.get_task("after") is not None


def test_a_pooled_connection_the_server_dropped_while_idle_is_replaced_silently(make_postgres_store, capfd):
    """Goal: a connection terminated while it sat in the pool costs no error: the next transaction gets a fresh one, stderr stays quiet."""
    store = make_postgres_store(pool_max=1)
    with store.transaction() as tx:
        idle = tx._connection.info.backend_pid
    with admin(make_postgres_store.url) as connection:
        assert connection.execute("SELECT pg_terminate_backend(%s, 5000)", (idle,)).fetchone() == (True,)
    seed(store, make_task())
    with store.transaction() as tx:
        assert tx._connection.info.backend_pid != idle
    assert store.get_task("task-1") is not None
    assert "discarding" not in capfd.readouterr().err


def test_an_unreachable_server_is_one_line_of_store_unavailable_naming_host_and_database_without_the_password(postgres_url):
    """Goal: a refused connection fails fast with StoreUnavailable in one line, naming host, port and database, never the password."""
    from shiftchange.stores.postgres import PostgresStore

    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as raised:
        PostgresStore("postgresql://someone:hunter2@127.0.0.1:1/orders", connect_timeout_s=2)
    message = str(raised.value)
    assert message.startswith("cannot reach PostgreSQL at 127.0.0.1:1/orders: ") and "\n" not in message
    assert "hunter2" not in message and raised.value.__suppress_context__
    assert time.monotonic() - started < 5


def test_an_aborted_transaction_is_never_committed_silently(make_postgres_store):
    """Goal: a database error swallowed inside the block still fails the transaction at its end (PostgreSQL would just roll back)."""
    store = make_postgres_store()
    seed(store, make_task())
    orphan = dataclasses.replace(minimal_attempt("attempt-1"), previous_attempt_id="no-such-attempt")
    with pytest.raises(NotFound, match="nothing was committed"), store.transaction() as tx:
        tx.update_task(tx.task("task-1"), state="in_progress")
        tx.insert_attempt(orphan)  # sent with the next round trip: the foreign key refuses it, and PostgreSQL aborts the transaction
        with pytest.raises(NotFound):
            tx.attempts_of("task-1")
    assert store.get_task("task-1").state == "ready" and store.get_attempts("task-1") == []


# ---- the handle


def test_a_transaction_object_is_dead_after_its_block_and_a_closed_store_refuses_use(make_postgres_store):
    """Goal: a Transaction kept past its block raises RuntimeError; after close() (twice is fine) the store raises StoreError."""
    store = make_postgres_store()
    with store.transaction() as tx:
        pass
    with pytest.raises(RuntimeError, match="ended"):
        tx.insert_task(make_task())
    assert store.get_task("task-1") is None
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass
    with pytest.raises(StoreError, match="closed"):
        store.events()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"schema": "Orders"}, "plain identifier"),
        ({"schema": "1st"}, "plain identifier"),
        ({"schema": "a" * 64}, "plain identifier"),
        ({"schema": 'x"; DROP SCHEMA public; --'}, "plain identifier"),
        ({"schema": ""}, "plain identifier"),
        ({"pool_min": 0}, "pool_min"),
        ({"pool_min": 3, "pool_max": 2}, "must not exceed"),
        ({"pool_max": True}, "pool_max"),
        ({"connect_timeout_s": 0}, "connect_timeout_s"),
    ],
)
def test_bad_arguments_are_input_errors_before_any_connection(options, match):
    """Goal: a schema that is not a plain identifier, or a bad pool size or timeout, is an InputError (no server needed)."""
    from shiftchange.stores.postgres import PostgresStore

    with pytest.raises(InputError, match=match):
        PostgresStore("postgresql://nobody@127.0.0.1:1/nothing", **options)


# ---- text PostgreSQL cannot hold as it is


def test_nul_is_kept_through_an_escape_other_sql_clients_can_see_and_plain_text_is_stored_as_it_is(make_postgres_store):
    """Goal: text with NUL or U+0001 round-trips; stored, NUL is U+0001 U+0001 and U+0001 is U+0001 U+0002, all else verbatim."""
    store = make_postgres_store()
    texts = ["plain", "a\x00b", "\x00", "\x01", "\x01\x01", "\x00\x01\x02", "x\ufdd0y", "caf\u00e9 \U0001f680"]
    seed(store, *(make_task(f"task-{index}", objective=text, decision=text) for index, text in enumerate(texts)))
    for index, text in enumerate(texts):
        task = store.get_task(f"task-{index}")
        assert (task.objective, task.decision) == (text, text)
    with store.transaction() as tx:  # a NUL in a lookup key and in a state list goes through the same escape
        tx.insert_task(minimal_task("key\x00with nul"))
        assert tx.task("key\x00with nul") is not None
    with admin(make_postgres_store.url) as connection:
        stored = dict(connection.execute(f'SELECT task_id, objective FROM "{store.schema}".tasks').fetchall())
    assert stored["task-0"] == "plain" and stored["task-6"] == "x\ufdd0y" and stored["task-7"] == "caf\u00e9 \U0001f680"
    assert stored["task-1"] == "a\x01\x01b" and stored["task-3"] == "\x01\x02" and stored["task-5"] == "\x01\x01\x01\x02\x02"
    assert "key\x01\x01with nul" in stored


ESCAPED_ALPHABET = st.sampled_from("\x00\x01\x02\ufdd0\U0010ffff0ab")


@given(st.text(alphabet=ESCAPED_ALPHABET, max_size=12) | st.text(max_size=30))
def test_the_text_escape_is_reversible_and_never_leaves_a_nul(text):
    """Goal: for any string, unescape(escape(s)) == s, the stored form holds no NUL, and a string needing no escape is unchanged."""
    stored = escape_text(text)
    assert unescape_text(stored) == text and "\x00" not in stored
    assert (stored == text) == ("\x00" not in text and "\x01" not in text)


@given(st.text(alphabet=ESCAPED_ALPHABET, max_size=8), st.text(alphabet=ESCAPED_ALPHABET, max_size=8))
def test_the_text_escape_keeps_code_point_order(one, other):
    """Goal: stored forms compare as the strings do (COLLATE "C" is code-point order), so ORDER BY on an id is the ids' order."""
    assert (escape_text(one) < escape_text(other)) == (one < other)
    assert (escape_text(one) == escape_text(other)) == (one == other)


def test_ids_with_nul_and_noncharacters_come_back_in_code_point_order(make_postgres_store):
    """Goal: the reaper's scan, tasks_in, intents_of and a claim-queue tie all sort ids as Python sorts them, escaped ones included."""
    store = make_postgres_store()
    ids = ["a", "a\x00", "a\x00b", "a\x01", "\x00", "\ufdd0", "\ufdd00", "b", "A", "a\U0010ffff"]
    seed(store, *(minimal_task(task_id) for task_id in ids))
    seed(store, *(minimal_attempt("attempt-" + task_id, task_id=task_id) for task_id in ids))
    with store.transaction() as tx:
        assert [task.task_id for task in tx.tasks_in(["inbox"])] == sorted(ids)
        assert [attempt.attempt_id for attempt in tx.attempts_in(["queued"])] == sorted("attempt-" + task_id for task_id in ids)
        assert [attempt.attempt_id for attempt in tx.claimable(["queued"], 3)] == sorted("attempt-" + task_id for task_id in ids)[:3]


def test_migration_3_rewrites_what_the_old_escape_stored_and_restores_order(make_postgres_store):
    """Goal: a version-2 schema holding U+FDD0-escaped ids (and raw U+0001) reads back exactly, in code-point order, after migration 3."""
    store = make_postgres_store()
    ids = ["a\x00b", "a", "\ufdd0x", "a\x01", "\x00", "\ufdd00", "\ufdd0\x00\ufdd0\ufdd0", "b"]
    seed(store, *(make_task(task_id, objective="objective " + task_id) for task_id in ids))
    seed(store, *(minimal_attempt("attempt-" + task_id, task_id=task_id) for task_id in ids))
    store.close()
    mark = "\ufdd0"

    def old_escape(text: str) -> str:  # what versions 1 and 2 stored
        if "\x00" not in text and not text.startswith(mark):
            return text
        return mark + text.replace(mark, mark + mark).replace("\x00", mark + "0")

    with admin(make_postgres_store.url) as connection:  # turn the schema back into a version-2 one holding old-escaped text
        schema = store.schema
        for table in ("tasks", "attempts"):
            columns = [
                name
                for (name,) in connection.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s AND data_type = 'text'",
                    (schema, table),
                )
            ]
            key = "task_id" if table == "tasks" else "attempt_id"
            rows = connection.execute(f'SELECT {key}, {", ".join(columns)} FROM "{schema}".{table}').fetchall()
            connection.execute(f'ALTER TABLE "{schema}".{table} DISABLE TRIGGER ALL')
            for row in rows:
                assignments = ", ".join(f"{column} = %s" for column in columns)
                values = [None if value is None else old_escape(unescape_text(value)) for value in row[1:]]
                connection.execute(f'UPDATE "{schema}".{table} SET {assignments} WHERE {key} = %s', (*values, row[0]))
            connection.execute(f'ALTER TABLE "{schema}".{table} ENABLE TRIGGER ALL')
        connection.execute(f'DELETE FROM "{schema}".schema_migrations WHERE version = 3')
        stored_ids = [task_id for (task_id,) in connection.execute(f'SELECT task_id FROM "{schema}".tasks ORDER BY task_id')]
    by_stored = {old_escape(task_id): task_id for task_id in ids}
    assert [by_stored[stored] for stored in stored_ids] != sorted(ids), "the old escape sorted these ids out of order: the case to repair"
    assert migrate(make_postgres_store.url, schema=schema) == [3]
    again = make_postgres_store(schema=schema)
    with again.transaction() as tx:
        assert [task.task_id for task in tx.tasks_in(["ready"])] == sorted(ids)
        assert [tx.task(task_id).objective for task_id in ids] == ["objective " + task_id for task_id in ids]
        assert [attempt.attempt_id for attempt in tx.attempts_in(["queued"])] == sorted("attempt-" + task_id for task_id in ids)
        assert [tx.attempt("attempt-" + task_id).task_id for task_id in ids] == ids


# ---- the control plane's records


def test_leader_leases_lock_their_row_and_tasks_in_scans_by_state(make_postgres_store):
    """Goal: put_leader writes (insert, then overwrite), leader() locks the row so a takeover waits; tasks_in lists by state, by id."""
    store = make_postgres_store(pool_max=3)
    with store.transaction() as tx:
        assert tx.leader("admission") is None
        tx.put_leader("admission", "process-1", 1, 10.0)
    with store.transaction() as tx:
        assert tx.leader("admission") == Leader("admission", "process-1", 1, 10.0)
        tx.put_leader("admission", "process-1", 1, 20.5)
    held, release, seen = threading.Event(), threading.Event(), []

    def leading_step() -> None:
        with store.transaction() as tx:
            tx.leader("admission")
            held.set()
            release.wait(10)

    def takeover() -> None:
        with store.transaction() as tx:
            seen.append(tx.leader("admission"))
            tx.put_leader("admission", "process-2", 2, 40.0)

    (step,) = run_threads(leading_step)
    assert held.wait(10)
    (taking,) = run_threads(takeover)
    taking.join(0.5)
    assert taking.is_alive() and seen == []
    release.set()
    step.join(10)
    taking.join(10)
    assert seen == [Leader("admission", "process-1", 1, 20.5)]
    with store.transaction() as tx:
        assert tx.leader("admission") == Leader("admission", "process-2", 2, 40.0)
    seed(store, *(minimal_task(task_id) for task_id in ("t-c", "t-a", "t-b")))
    with store.transaction() as tx:
        tx.update_task(tx.task("t-b"), state="ready")
        assert [t.task_id for t in tx.tasks_in(["inbox", "ready"])] == ["t-a", "t-b", "t-c"]
        assert [t.task_id for t in tx.tasks_in(["ready"])] == ["t-b"] and tx.tasks_in([]) == []


# ---- psycopg stays optional


def test_the_core_imports_without_psycopg_and_a_postgres_url_says_how_to_install_it():
    """Goal: `import shiftchange.core` loads no psycopg; with psycopg unimportable, memory: opens and postgresql:// is a StoreError."""
    script = textwrap.dedent(
        """
        import sys
        import shiftchange.core
        print("loaded" if "psycopg" in sys.modules else "not loaded")
        sys.modules["psycopg"] = None
        sys.modules["psycopg_pool"] = None
        from shiftchange.core import StoreError
        from shiftchange.stores import open_store
        open_store("memory:")
        try:
            open_store("postgresql://someone@127.0.0.1/db?schema=orders")
        except StoreError as error:
            print(error)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["not loaded", "PostgreSQL stores need psycopg 3: pip install 'shiftchange[postgres]'"]


# ---- store URLs


def test_memory_and_sqlite_urls_open_their_stores(tmp_path, monkeypatch):
    """Goal: memory: is a MemoryStore; sqlite:/// takes a relative path, sqlite://// an absolute one, ?synchronous= the level."""
    assert type(open_store("memory:")) is MemoryStore
    assert open_store("memory:", keep_events=False)._keep_events is False
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with open_store("sqlite:///sub/relative.db") as store:
        assert isinstance(store, SQLiteStore) and store.path == Path("sub/relative.db") and store.synchronous == "FULL"
    assert (tmp_path / "sub" / "relative.db").is_file()
    absolute = tmp_path / "absolute.db"
    assert str(absolute).startswith("/")
    with open_store(f"sqlite:///{absolute}?synchronous=normal") as store:
        assert store.path == absolute and store.synchronous == "NORMAL"
    with open_store("sqlite:///sub/relative.db", busy_timeout_s=1.5) as store:
        assert store.busy_timeout_s == 1.5


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("", "use memory:, sqlite:///relative/path.db, sqlite:////absolute/path.db, or postgresql://"),
        ("memory", "not a store URL"),
        ("memory://", "not a store URL"),
        ("mysql://user@host/db", "not a store URL"),
        ("file:///tmp/s.db", "not a store URL"),
        ("sqlite://host/s.db", "has no host"),
        ("sqlite:///", "names no file"),
        ("sqlite:///dir/", "names no file"),
        ("sqlite:///s.db?mode=ro", "one query parameter, synchronous"),
        ("sqlite:///s.db?synchronous=OFF", "synchronous must be one of"),
        ("postgresql://u@127.0.0.1/db?schema=Orders", "plain identifier"),
        ("postgresql://u@127.0.0.1/db?schema=a&schema=b", "schema is given 2 times"),
    ],
)
def test_urls_that_name_no_store_are_one_line_input_errors(tmp_path, monkeypatch, url, match):
    """Goal: an unknown scheme, an SQLite URL with a host, no file or an unknown parameter, a bad schema: InputError, one line."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=match) as raised:
        open_store(url)
    assert "\n" not in str(raised.value)


def test_options_a_store_does_not_take_are_input_errors(tmp_path):
    """Goal: open_store passes options to the store's constructor, and an option it does not take is an InputError, not a TypeError."""
    with pytest.raises(InputError, match="pool_max"):
        open_store("memory:", pool_max=2)
    with pytest.raises(InputError, match="synchronous is given both"):
        open_store(f"sqlite:///{tmp_path}/s.db?synchronous=FULL", synchronous="NORMAL")
    with pytest.raises(InputError, match="a string"):
        open_store(None)  # type: ignore[arg-type]


def test_postgresql_urls_open_a_postgres_store_in_the_schema_they_name(make_postgres_store):
    """Goal: postgresql:// and postgres:// open a PostgresStore; ?schema= picks the schema, other parameters go to libpq."""
    schema = f"t_{uuid.uuid4().hex[:8]}"
    make_postgres_store.schemas.append(schema)
    url = make_postgres_store.url
    separator = "&" if "?" in url else "?"
    with open_store(f"{url}{separator}application_name=shiftchange-probe&schema={schema}", pool_max=2) as store:
        assert type(store).__name__ == "PostgresStore" and (store.schema, store.pool_max) == (schema, 2)
        seed(store, make_task())
        with store.transaction() as tx:
            assert tx._read("SELECT current_setting('application_name')", (), clock=False) == [("shiftchange-probe",)]
    alias = "postgres://" + url.split("://", 1)[1]
    with open_store(f"{alias}{separator}schema={schema}", migrate=False) as store:
        assert store.get_task("task-1") == make_task()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db.example:5432/orders?schema=x", "postgresql://app:***@db.example:5432/orders?schema=x"),
        ("postgres://app:p%40ss@h1:5432,h2:5433/db", "postgres://app:***@h1:5432,h2:5433/db"),
        ("postgresql://app@host/db?sslmode=require&password=s3cret", "postgresql://app@host/db?sslmode=require&password=***"),
        ("postgresql://app:s3cret@host", "postgresql://app:***@host"),
        ("host=db user=app password=s3cret dbname=orders", "host=db user=app password=*** dbname=orders"),
        ("postgresql://app@host/db", "postgresql://app@host/db"),
        ("sqlite:////var/lib/s.db", "sqlite:////var/lib/s.db"),
        ("memory:", "memory:"),
    ],
)
def test_describe_hides_every_password(url, shown):
    """Goal: describe() prints a URL with its password (in the authority, the query or a key=value string) replaced by ***."""
    assert describe(url) == shown


def test_a_frozen_transaction_loses_its_locks_and_a_waiter_is_told_to_run_again(make_postgres_store):
    """Goal: one process frozen inside a contract (SIGSTOP, a cut network) does not freeze the others.

    A waiter gives up after lock_timeout_s with StoreRetryable (the contract runs again); the server ends the frozen
    session after idle_in_transaction_timeout_s, its transaction rolls back, and the waiter's next try gets the row.
    """
    import threading
    import time

    from shiftchange.core import LedgerProvider, ManualClock, Orchestrator, StoreRetryable, StoreUnavailable

    store = make_postgres_store(lock_timeout_s=0.3, idle_in_transaction_timeout_s=1.0)
    Orchestrator(store, ManualClock(), LedgerProvider()).create_task("t1", "objective", "repo")
    holding, frozen_outcome = threading.Event(), []

    def freeze() -> None:
        try:
            with store.transaction() as tx:
                tx.update_task(tx.task("t1"), scope="frozen")
                holding.set()
                time.sleep(2.0)  # longer than the idle timeout: the server ends this session
        except Exception as error:
            frozen_outcome.append(error)

    frozen = threading.Thread(target=freeze)
    frozen.start()
    assert holding.wait(10)
    # Without a lock timeout the waiter would simply get the row once the server ended the frozen session: no error.
    with pytest.raises(StoreRetryable), store.transaction() as tx:
        tx.task("t1")
    time.sleep(1.2)
    with store.transaction() as tx:
        assert tx.task("t1").scope == "", "the frozen transaction was rolled back, and its lock is free"
    frozen.join(10)
    assert len(frozen_outcome) == 1 and isinstance(frozen_outcome[0], StoreUnavailable)
    assert store.get_task("t1").scope == ""


# ---- the server's clock, and the admission announcement


def _server_now(url: str) -> float:
    with admin(url) as connection:
        return connection.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]


def _core_over(store, clock):
    from shiftchange.core import AdmissionConfig, CoreConfig, LedgerProvider, Orchestrator, ReliabilityConfig

    limits = AdmissionConfig(queue_depth_max=100, queue_age_max_s=1e9, partition_concurrency_max=100)
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(), ReliabilityConfig(admission=limits))


def test_leases_are_stamped_on_the_servers_clock_whatever_the_process_clock_says(make_postgres_store, monkeypatch):
    """Goal: with the process's wall clock 300 s ahead, a claim through store.clock() is stamped on the server's time;
    through the process's clock it is 300 s off (the hazard the store's clock removes)."""
    store = make_postgres_store()
    clock = store.clock()
    assert clock is not None and store.clock() is clock
    skewed = time.time
    monkeypatch.setattr(time, "time", lambda: skewed() + 300.0)
    orchestrator = _core_over(store, clock)
    for task_id in ("by-server", "by-process"):
        orchestrator.create_task(task_id, "claim me", "repo-a")
        orchestrator.accept_task(task_id)
        orchestrator.dispatch(task_id, Plan("p"))
    orchestrator.run_admission()
    before = _server_now(make_postgres_store.url)
    claim = orchestrator.claim_attempt("by-server", "worker-1", "repo-a")
    after = _server_now(make_postgres_store.url)
    attempt = store.get_attempt(claim.lease.attempt_id)
    assert before <= attempt.claimed_at <= after
    assert attempt.expires_at == pytest.approx(attempt.claimed_at + orchestrator.config.lease_ttl_s)
    assert before <= clock.now() and clock.now() <= _server_now(make_postgres_store.url) + 0.05  # outside a transaction: an estimate

    class ProcessClock:
        def now(self) -> float:
            return time.time()

    local = _core_over(store, ProcessClock())
    off = local.claim_attempt("by-process", "worker-2", "repo-a")
    assert store.get_attempt(off.lease.attempt_id).claimed_at > _server_now(make_postgres_store.url) + 250.0


def test_a_renewal_that_waited_for_a_row_lock_is_judged_at_the_servers_time_after_the_wait(make_postgres_store):
    """Goal: the time a contract reads inside its transaction is the server's, read once its lock is held, not when it began."""
    store = make_postgres_store(pool_max=3)
    orchestrator = _core_over(store, store.clock())
    orchestrator.create_task("t", "claim me", "repo-a")
    orchestrator.accept_task("t")
    orchestrator.dispatch("t", Plan("p"))
    orchestrator.run_admission()
    lease = orchestrator.claim_attempt("t", "worker-1", "repo-a").lease
    held, released = threading.Event(), []

    def holder() -> None:
        with store.transaction() as tx:
            tx.attempt(lease.attempt_id)
            held.set()
            time.sleep(0.6)
            released.append(_server_now(make_postgres_store.url))

    (thread,) = run_threads(holder)
    assert held.wait(10)
    renewal = orchestrator.renew_lease(lease.attempt_id, lease.generation, lease.token)
    thread.join(10)
    assert renewal.accepted
    assert store.get_attempt(lease.attempt_id).heartbeat_at >= released[0]


def test_admitting_announces_the_workspace_and_claims_announce_nothing(make_postgres_store):
    """Goal: a transaction that makes an Attempt admitted sends one NOTIFY (payload: its workspace) with its commit; a claim sends none."""
    store = make_postgres_store()
    orchestrator = _core_over(store, store.clock())
    with admin(make_postgres_store.url) as listener:
        listener.execute(f"LISTEN {store.wakeup_channel}")
        for task_id, workspace in (("t-a", "repo-a"), ("t-b", "repo-b")):
            orchestrator.create_task(task_id, "announce me", workspace)
            orchestrator.accept_task(task_id)
            orchestrator.dispatch(task_id, Plan("p"))
        assert list(listener.notifies(timeout=0.3)) == []  # queued, not admitted: nothing to claim yet
        orchestrator.run_admission()
        heard = sorted(note.payload for note in listener.notifies(timeout=1.0, stop_after=2))
        assert heard == ["repo-a", "repo-b"]
        assert orchestrator.claim_next("worker-1", "repo-a").lease is not None
        assert list(listener.notifies(timeout=0.3)) == []
