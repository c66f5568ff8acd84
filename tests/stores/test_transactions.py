"""The Transaction interface through the conformance kit, run against every store; then what only the SQLite file must add.

The shared suite is `shiftchange.testing.check_store`, one check per test
here, against a factory of fresh memory stores and one of fresh SQLite files.
The kit's checks must be able to fail: each store in `broken_stores` breaks
one contract, and the checks it breaks must fail for it, while the same
wrapper broken in nothing passes them all.
"""

from __future__ import annotations

import itertools
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shiftchange.core import Attempt, Event, InputError, Intent, MemoryStore, NotFound, StoreConflict, StoreError, StoreRetryable, Task
from shiftchange.core.records import field_names
from shiftchange.core.store import WRITABLE
from shiftchange.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from shiftchange.testing import SharedStore, Skipped, check_store, shared_store_checks, store_checks
from shiftchange.testing.stores import clock as kit_clock
from shiftchange.testing.stores import durability as kit_durability
from shiftchange.testing.stores import (
    event_fields,
    make_attempt,
    make_intent,
    make_task,
    minimal_attempt,
    seed,
)
from shiftchange.testing.stores.fields import _away_from_defaults, _update_seeds
from tests.kit import broken_stores


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request, tmp_path):
    """A factory of fresh, empty stores of one kind (each SQLite store a new file)."""
    numbers = itertools.count()

    def make():
        return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / f"store-{next(numbers)}.sqlite")

    make.kind = request.param
    return make


CLOCK_CHECKS = frozenset(check.name for check in kit_clock.CHECKS) | {"both_handles_read_the_same_store_clock"}
"""The checks of a store's own clock: skipped, saying why, for the memory and SQLite stores (one machine, no clock of their own)."""
DURABILITY_CHECKS = frozenset(check.name for check in kit_durability.CHECKS)
"""Skipped, saying why, for the memory store (it does not say it is durable)."""
EXPECTED_SKIPS = {
    "memory": {**dict.fromkeys(CLOCK_CHECKS, "no clock of its own"), **dict.fromkeys(DURABILITY_CHECKS, "does not say it is durable")},
    "sqlite": dict.fromkeys(CLOCK_CHECKS, "no clock of its own"),
}
"""For each store, the checks that do not apply to it, and what their skip must say."""


@pytest.mark.parametrize("check", store_checks(), ids=lambda check: check.name)
def test_store_contract(make_store, check):
    """Goal: the store under test keeps the rule the kit's check states (its docstring is the rule); a check that does not apply
    to it (a clock it has not, a durability it does not claim) says so, and only those."""
    try:
        check(make_store)
    except Skipped as skipped:
        expected = EXPECTED_SKIPS[make_store.kind].get(check.name)
        assert expected is not None and expected in str(skipped), f"{check.name} was skipped: {skipped}"
    else:
        assert check.name not in EXPECTED_SKIPS[make_store.kind], f"{check.name} ran on a store it does not apply to"


def test_the_memory_store_passes_the_whole_store_contract_as_one_report():
    """Goal: check_store returns a report with every check, each passed (the two-handle ones skipped); raise_for_failures is quiet."""
    report = check_store(MemoryStore)
    assert [result.name for result in report.results] == [check.name for check in (*store_checks(), *shared_store_checks())]
    assert report.ok and report.failures == ()
    report.raise_for_failures()


@pytest.mark.parametrize("factory", sorted(broken_stores.BROKEN))
def test_a_store_broken_in_one_contract_fails_check_store(factory):
    """Goal: every store broken in one contract fails the checks of that contract, and the report says why."""
    report = check_store(getattr(broken_stores, factory))
    failed = {result.name: result.detail for result in report.failures}
    assert set(broken_stores.BROKEN[factory]) <= set(failed), failed
    assert all(detail for detail in failed.values())
    with pytest.raises(AssertionError, match=f"{len(failed)} of {len(report.results)} store checks failed"):
        report.raise_for_failures()


def test_the_wrapper_the_broken_stores_share_passes_unbroken():
    """Goal: the broken stores fail for their break alone: the same wrapper with nothing broken passes every check."""
    report = check_store(broken_stores.make_wrapped)
    expected = {check.name for check in shared_store_checks()} | CLOCK_CHECKS | DURABILITY_CHECKS
    assert report.ok and {result.name for result in report.skips} == expected


@pytest.mark.parametrize("check", shared_store_checks(), ids=lambda check: check.name)
def test_shared_store_contract_on_two_sqlite_handles(check, tmp_path):
    """Goal: two handles on one SQLite file keep each two-handle rule (isolation, a waiting writer, concurrent claimers)."""
    try:
        check(SharedStore(*broken_stores.sqlite_files(tmp_path)))
    except Skipped as skipped:
        assert check.name in CLOCK_CHECKS and "no clock of its own" in str(skipped), skipped


def test_sqlite_passes_the_whole_contract_through_two_handles(tmp_path):
    """Goal: with reopen=, check_store runs every check, none skipped, and SQLite passes them all."""
    make, reopen = broken_stores.sqlite_files(tmp_path)
    report = check_store(make, reopen=reopen)
    assert report.ok, [(result.name, result.detail) for result in report.failures]
    assert {result.name for result in report.skips} == CLOCK_CHECKS
    assert [result.name for result in report.results] == [check.name for check in (*store_checks(), *shared_store_checks())]


@pytest.mark.heavy
def test_postgres_passes_the_whole_contract_through_two_handles(make_postgres_store):
    """Goal: PostgresStore, a second pool on the same schema as its other handle, passes every check, the two-handle ones too."""
    from shiftchange.stores.postgres import PostgresStore

    url = make_postgres_store.url  # synced: the kit checks that the store runs with synchronous_commit on

    def reopen(store):
        return PostgresStore(url, schema=store.schema, migrate=False, pool_max=2)

    report = check_store(lambda: make_postgres_store(pool_max=2), reopen=reopen)
    assert report.ok, [(result.name, result.detail) for result in report.failures]
    assert report.skips == ()


@pytest.mark.parametrize("name", sorted(broken_stores.SHARED_BROKEN))
def test_a_store_broken_between_two_handles_fails_check_store(name, tmp_path):
    """Goal: a deferred-BEGIN SQLite, dirty reads, or a reopen that opens another store each fail their two-handle check, with why."""
    make, reopen = getattr(broken_stores, name)(tmp_path)
    report = check_store(make, reopen=reopen)
    failed = {result.name: result.detail for result in report.failures}
    assert set(broken_stores.SHARED_BROKEN[name]) <= set(failed), failed
    assert all(detail for detail in failed.values())


def test_a_deferred_sqlite_store_passes_through_one_handle_and_fails_through_two(tmp_path):
    """Goal: the deferred BEGIN is a break only two handles show: one handle passes, and the waiting writer names "busy"."""
    make, reopen = broken_stores.deferred_sqlite(tmp_path)
    assert check_store(make).ok
    failed = {result.name: result.detail for result in check_store(make, reopen=reopen).failures}
    assert "failed instead of waiting" in failed["a_writer_waits_for_the_other_handles_write_transaction"]
    assert "busy" in failed["a_writer_waits_for_the_other_handles_write_transaction"]


def test_a_reopen_that_shares_nothing_is_one_failure_and_the_other_two_handle_checks_are_skipped(tmp_path):
    """Goal: a second handle on another store is diagnosed once; the checks that would fail for that reason are skipped, saying why."""
    make, reopen = broken_stores.reopen_elsewhere(tmp_path)
    report = check_store(make, reopen=reopen)
    assert [result.name for result in report.failures] == ["second_handle_shares_the_first_handles_store"]
    shared = [result for result in report.skips if result.name in {check.name for check in shared_store_checks()}]
    assert len(shared) == len(shared_store_checks()) - 1
    assert all("does not share the store" in result.detail for result in shared)


def test_without_reopen_the_two_handle_checks_are_skipped_saying_what_to_pass():
    """Goal: check_store of the memory store reports the two-handle checks as skipped (not passed, not failed), naming reopen=."""
    report = check_store(MemoryStore)
    assert report.ok
    shared = [result for result in report.skips if result.name in {check.name for check in shared_store_checks()}]
    assert [result.name for result in shared] == [check.name for check in shared_store_checks()]
    assert all("reopen=" in result.detail and result.passed and result.skipped for result in shared)


@pytest.mark.parametrize("factory", ["make_same_store_twice", "make_sharing_data"])
def test_a_factory_that_does_not_make_fresh_stores_is_one_failed_check(factory):
    """Goal: a factory that returns one store, or stores over one data set, gets one failure saying so, not a failure per check."""
    report = check_store(getattr(broken_stores, factory))
    assert [(result.name, result.passed) for result in report.results] == [("factory_makes_a_fresh_empty_store_each_call", False)]
    assert "make_store()" in report.results[0].detail and "\n" not in report.results[0].detail


class _WithoutRuntimeMethods(broken_stores.WrappedTransaction):
    """A port the runtime does not run on: its Transaction keeps the protocol's defaults for tasks_in and the leader leases."""

    tasks_in = broken_stores.Transaction.tasks_in
    leader = broken_stores.Transaction.leader
    put_leader = broken_stores.Transaction.put_leader


def test_a_port_without_the_optional_methods_has_their_checks_skipped_not_failed():
    """Goal: leaving out tasks_in and the leader leases (allowed by the protocol) skips their checks and fails none."""
    store_type = type("WithoutRuntimeMethods", (broken_stores.WrappedStore,), {"transaction_type": _WithoutRuntimeMethods})
    report = check_store(store_type)
    assert report.ok, [(result.name, result.detail) for result in report.failures]
    skipped = {result.name for result in report.skips} - {check.name for check in shared_store_checks()} - CLOCK_CHECKS - DURABILITY_CHECKS
    assert skipped == {
        "tasks_in_answers_from_current_state_in_task_id_order",
        "leader_lease_round_trips_and_put_leader_overwrites",
        "a_held_leader_lease_cannot_be_taken_until_it_expires",
    }


def test_the_update_check_writes_every_writable_field_away_from_what_was_seeded():
    """Goal: the update round-trip check can see a dropped field: each value it writes differs from the seeded record's."""
    task, _first, attempt, intent = _update_seeds()
    values = _away_from_defaults()
    for record in (task, attempt, intent):
        written = values[type(record)]
        assert set(written) == WRITABLE[type(record)]
        assert [name for name, value in written.items() if getattr(record, name) == value] == [], type(record).__name__


# ---- SQLite only: the file, its settings, and several processes. ----


def test_data_survives_close_and_reopen(tmp_path):
    """Goal: every record and the history are on disk after close, and seq numbering continues."""
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as first:
        seed(first, make_task(), make_attempt(), make_intent())
        with first.transaction() as tx:
            appended = tx.append_event(**event_fields())
    with SQLiteStore(path) as second:
        assert second.get_task("task-1") == make_task()
        assert second.get_attempt("attempt-1") == make_attempt()
        assert second.get_intent(make_intent().key) == make_intent()
        assert second.events() == [appended]
        with second.transaction() as tx:
            assert tx.append_event(**event_fields()).seq == appended.seq + 1


@pytest.mark.parametrize(("level", "code"), [("NORMAL", 1), ("FULL", 2), ("EXTRA", 3)])
def test_wal_synchronous_and_foreign_keys_are_in_effect(tmp_path, level, code):
    """Goal: the pragmas the durability argument rests on are actually set on the connection and the file."""
    with SQLiteStore(tmp_path / "s.sqlite", synchronous=level) as store:
        connection = store._connection
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA synchronous").fetchone() == (code,)
        assert connection.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert connection.execute("PRAGMA busy_timeout").fetchone() == (30000,)
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_default_synchronous_is_full(tmp_path):
    """Goal: with no argument a commit is synced (FULL), the safe default."""
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        assert store._connection.execute("PRAGMA synchronous").fetchone() == (2,)


@pytest.mark.parametrize("level", ["OFF", "full", "", None, 2])
def test_unsafe_or_unknown_synchronous_is_an_input_error(tmp_path, level):
    """Goal: only NORMAL, FULL and EXTRA are accepted, and a refused store creates no file."""
    with pytest.raises(InputError, match="synchronous"):
        SQLiteStore(tmp_path / "s.sqlite", synchronous=level)
    assert not (tmp_path / "s.sqlite").exists()


def test_schema_mirrors_the_records(tmp_path):
    """Goal: each table has one column per record field, in field order, with the indexes the scans use."""
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        connection = store._connection
        for table, record_type in (("tasks", Task), ("attempts", Attempt), ("intents", Intent), ("events", Event)):
            columns = tuple(row[1] for row in connection.execute("SELECT * FROM pragma_table_info(?)", (table,)))
            assert columns == field_names(record_type), table
        indexed = {
            (table, row[2])
            for table in ("attempts", "intents", "events")
            for index in connection.execute("SELECT name FROM pragma_index_list(?)", (table,))
            for row in connection.execute("SELECT * FROM pragma_index_info(?)", (index[0],))
        }
        assert {("attempts", "state"), ("intents", "attempt_id"), ("events", "task_id")} <= indexed


def test_missing_directory_is_a_store_error(tmp_path):
    """Goal: a path whose directory does not exist fails with one clear line, creating nothing."""
    with pytest.raises(StoreError, match="does not exist") as caught:
        SQLiteStore(tmp_path / "absent" / "s.sqlite")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "absent").exists()


def test_file_that_is_not_a_database_is_a_store_error(tmp_path):
    """Goal: a file that is not SQLite is refused with a StoreError and left untouched."""
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"these are my notes, not a database\n" * 20)
    with pytest.raises(StoreError, match="not a database"):
        SQLiteStore(path)
    assert path.read_bytes() == b"these are my notes, not a database\n" * 20


def test_directory_as_path_is_a_store_error(tmp_path):
    """Goal: a path naming a directory is refused with a StoreError, not a raw sqlite3 error."""
    with pytest.raises(StoreError, match="cannot open store"):
        SQLiteStore(tmp_path)


def test_unknown_schema_version_is_a_store_error(tmp_path):
    """Goal: a store written by another schema version is refused rather than misread."""
    path = tmp_path / "s.sqlite"
    SQLiteStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SQLiteStore(path)


def test_foreign_sqlite_database_is_a_store_error(tmp_path):
    """Goal: an unrelated SQLite database (version 0 with tables) is refused, not adopted."""
    path = tmp_path / "other.sqlite"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE recipes (name TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not a shiftchange store"):
        SQLiteStore(path)


def test_sql_injection_shaped_values_round_trip_harmlessly(tmp_path):
    """Goal: values are parameters, never SQL: a hostile id round-trips and every table survives."""
    hostile = "x'); DROP TABLE tasks; --"
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        seed(store, make_task("innocent"), make_task(hostile, objective='"; DELETE FROM tasks; --'))
        seed(store, minimal_attempt(hostile, task_id=hostile, state=hostile))
        with store.transaction() as tx:
            tx.update_task(tx.task(hostile), decision="' OR '1'='1")
            tx.append_event(**event_fields(task_id=hostile, detail="'); DROP TABLE events; --"))
            assert [a.attempt_id for a in tx.attempts_in([hostile, "' OR 1=1 --"])] == [hostile]
        assert store.get_task(hostile).objective == '"; DELETE FROM tasks; --'
        assert store.get_task(hostile).decision == "' OR '1'='1"
        assert store.get_task("innocent") == make_task("innocent")
        assert [e.detail for e in store.events(task_id=hostile)] == ["'); DROP TABLE events; --"]


def test_change_names_are_checked_before_they_reach_sql(tmp_path):
    """Goal: only record fields may be named in a write; identity and version are the store's, and a crafted name is refused."""
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        seed(store, make_task())
        for changes in ({"state = 'done', version": 5}, {"no_such_field": 1}, {"task_id": "other"}, {"version": 7}):
            with pytest.raises(InputError), store.transaction() as tx:
                tx.update_task(tx.task("task-1"), **changes)
        assert store.get_task("task-1") == make_task()


def test_transaction_holds_the_write_lock_from_begin(tmp_path):
    """Goal: while one store's transaction is open, another process's transaction waits (here: gives up), even before any write."""
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as holder, SQLiteStore(path, busy_timeout_s=0.05) as other:
        with holder.transaction() as tx:
            tx.task("task-1")  # only a read: IMMEDIATE must already hold the lock
            with pytest.raises(StoreRetryable, match="busy"), other.transaction():
                pass
        with other.transaction() as tx:
            tx.insert_task(make_task())
        assert holder.get_task("task-1") == make_task()


def test_readers_see_only_committed_history(tmp_path):
    """Goal: under WAL a reader is not blocked by an open write and does not see its uncommitted rows."""
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as writer, SQLiteStore(path, busy_timeout_s=0.05) as reader:
        with writer.transaction() as tx:
            tx.append_event(**event_fields())
            assert reader.events() == []
        assert [e.kind for e in reader.events()] == ["renew"]


def test_closed_store_refuses_use(tmp_path):
    """Goal: after close (or leaving `with`) the store raises StoreError instead of touching a closed file; close is idempotent."""
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        pass
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass
    with pytest.raises(StoreError, match="closed"):
        store.events()


def test_transaction_object_is_dead_after_its_block(tmp_path):
    """Goal: a Transaction kept past its block cannot write outside the lock."""
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        with store.transaction() as tx:
            pass
        with pytest.raises(RuntimeError, match="ended"):
            tx.insert_task(make_task())
        assert store.get_task("task-1") is None


def run_child(script: str, path: Path) -> subprocess.Popen:
    """Start a Python process running `script` against the store at `path`."""
    preamble = "import sys\nfrom shiftchange.stores.sqlite import SQLiteStore\nstore = SQLiteStore(sys.argv[1])\n"
    return subprocess.Popen(
        [sys.executable, "-c", preamble + textwrap.dedent(script), str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_processes_sharing_one_file_lose_no_update(tmp_path):
    """Goal: several OS processes doing read-then-write on one row serialize; no increment is lost."""
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        seed(store, make_task(tokens=0))
    increments = 25
    script = f"""
        for _ in range({increments}):
            with store.transaction() as tx:
                task = tx.task("task-1")
                tx.update_task(task, tokens=task.tokens + 1)
        store.close()
        """
    children = [run_child(script, path) for _ in range(3)]
    assert [child.wait(timeout=60) for child in children] == [0, 0, 0]
    with SQLiteStore(path) as store:
        task = store.get_task("task-1")
    assert (task.tokens, task.version) == (3 * increments, 3 * increments)


def test_sigkill_mid_transaction_leaves_the_last_commit(tmp_path):
    """Goal: a process killed inside a transaction leaves no trace of it, the file intact and the lock free."""
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store:
        seed(store, make_task("committed"))
    script = """
        import time
        from shiftchange.core.records import Budget, Task
        with store.transaction() as tx:
            task = Task(task_id="doomed", objective="o", scope="s", workspace="w", state="ready", budget=Budget(), created_at=0.0)
            tx.insert_task(task)
            tx.update_task(tx.task("committed"), state="done")
            tx.append_event(at=1.0, actor="a", kind="k", task_id="doomed", attempt_id=None, accepted=True, reason="r")
            print("inside", flush=True)
            time.sleep(60)
        """
    child = run_child(script, path)
    assert child.stdout.readline().strip() == "inside"
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=10) == -signal.SIGKILL
    with SQLiteStore(path, busy_timeout_s=1.0) as store:
        assert store._connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert store.get_task("doomed") is None and store.events() == []
        assert store.get_task("committed").state == "ready"
        seed(store, make_task("after"))
        assert store.get_task("after") is not None


# ---- Retention (memory store): what the simulator relies on to stay within the live set. ----


def _finished_task(store: MemoryStore, task_id: str, state: str = "failed") -> None:
    with store.transaction() as tx:
        tx.insert_task(make_task(task_id))
        tx.insert_attempt(make_attempt(f"{task_id}#1", task_id=task_id, state=state))
        tx.insert_intent(make_intent(f"create-pr:{task_id}:sha", attempt_id=f"{task_id}#1", task_id=task_id))


def test_forget_drops_a_finished_task_with_its_attempts_and_intents_and_nothing_else():
    """Retention removes exactly one finished task's records, from every index, and leaves its neighbours whole."""
    store = MemoryStore()
    _finished_task(store, "task-1")
    _finished_task(store, "task-2")
    store.forget("task-1")
    assert store.get_task("task-1") is None and store.get_attempts("task-1") == []
    assert store.get_attempt("task-1#1") is None and store.get_intent("create-pr:task-1:sha") is None
    with store.transaction() as tx:
        assert [a.attempt_id for a in tx.attempts_in(["failed"])] == ["task-2#1"]
    assert store.get_task("task-2") is not None and store.get_intent("create-pr:task-2:sha") is not None


def test_forget_refuses_a_task_with_an_active_attempt_and_an_unknown_one():
    """Only finished work is forgotten: an active Attempt keeps its task, and an unknown task is NotFound; nothing changes."""
    store = MemoryStore()
    _finished_task(store, "task-1", state="running")
    with pytest.raises(StoreConflict):
        store.forget("task-1")
    assert store.get_attempt("task-1#1").state == "running"
    with pytest.raises(NotFound):
        store.forget("task-9")


class _Racing(MemoryStore):
    """A memory store that runs transactions 'side by side': the next `losses` transactions that wrote lose their race at commit."""

    races = True

    def __init__(self) -> None:
        super().__init__()
        self.losses = 0

    def transaction(self):
        from contextlib import contextmanager

        from shiftchange.core import StoreRetryable

        inner = super().transaction()

        @contextmanager
        def racing():
            with inner as tx:
                before = self._next_seq
                yield tx
                if self.losses and self._next_seq != before:
                    self.losses -= 1
                    raise StoreRetryable("deadlock detected (staged)")

        return racing()


def test_a_contract_that_loses_its_race_runs_again_and_its_event_says_so():
    """Goal: a lost race (deadlock, serialization failure) reruns the whole contract; the event records how many times."""
    from shiftchange.core import CoreConfig, LedgerProvider, ManualClock, Orchestrator

    store = _Racing()
    clock = ManualClock(0.0)
    orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(store_retries_max=3))
    store.losses = 2
    orchestrator.create_task("t1", "objective", "repo")
    (created,) = [e for e in store.events() if e.kind == "create"]
    assert created.retries == 2
    orchestrator.accept_task("t1")
    assert [e.retries for e in store.events() if e.kind == "accept"] == [0]


def test_a_contract_that_keeps_losing_raises_store_contention_and_records_nothing():
    from shiftchange.core import CoreConfig, LedgerProvider, ManualClock, Orchestrator, StoreContention

    store = _Racing()
    clock = ManualClock(0.0)
    orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(store_retries_max=3))
    store.losses = 4
    with pytest.raises(StoreContention, match="4 times in a row") as raised:
        orchestrator.create_task("t1", "objective", "repo")
    assert raised.value.retries == 3
    assert store.events() == [] and store.get_task("t1") is None


def test_a_rate_token_spent_by_a_grant_that_lost_its_race_is_given_back():
    """Goal: a rerun after a lost race is judged as the first run was: the token its rolled-back grant took comes back.

    With a burst of one, a lost token would refuse the rerun ("rate_allows") and the call would wait for a refill.
    """
    from shiftchange.core import CoreConfig, LedgerProvider, ManualClock, Orchestrator, Plan, RateLimitConfig, ReliabilityConfig

    store = _Racing()
    clock = ManualClock(0.0)
    reliability = ReliabilityConfig(rate_limits={"code_host": RateLimitConfig(rate_per_s=0.001, burst=1)})
    orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(store_retries_max=3), reliability)
    orchestrator.create_task("t1", "objective", "repo")
    orchestrator.accept_task("t1")
    orchestrator.dispatch("t1", Plan("hypothesis 1 for t1"))
    orchestrator.run_admission()
    lease = orchestrator.claim_attempt("t1", "w1", "repo").lease
    orchestrator.start_attempt(lease.attempt_id, lease.generation, lease.token)
    store.losses = 1
    grant = orchestrator.grant_tool(lease.attempt_id, lease.generation, lease.token, "create-pr", "sha-1")
    assert grant.accepted, grant
    (granted,) = [e for e in store.events() if e.kind == "grant_tool"]
    assert granted.accepted and granted.retries == 1
