"""The Transaction interface, one suite run against every store; then what only the SQLite file must add."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shiftchange.core.errors import InputError, NotFound, StoreConflict, StoreError
from shiftchange.core.machine import ATTEMPT_TERMINAL
from shiftchange.core.records import Attempt, Budget, Event, Intent, Plan, Task, field_names
from shiftchange.core.sqlite_store import SCHEMA_VERSION, SQLiteStore
from shiftchange.core.store import MemoryStore

# ---- Record builders: every field set away from its default, so a dropped or mangled column shows. ----


def make_task(task_id: str = "task-1", **overrides) -> Task:
    fields = dict(
        task_id=task_id,
        objective="fix the flaky test",
        scope="tests/",
        workspace="repo-a",
        state="ready",
        budget=Budget(
            attempts_max=3, elapsed_max_s=90.5, cost_max_usd=1.25, tokens_max=1000, repeated_signatures_max=2, interruptions_max=1
        ),
        created_at=10.25,
        cost_usd=0.5,
        tokens=42,
        elapsed_s=3.5,
        interruptions=1,
        decision="retry",
        decision_reason="validation failed with a new signature",
    )
    fields.update(overrides)
    return Task(**fields)


def make_attempt(attempt_id: str = "attempt-1", task_id: str = "task-1", number: int = 1, state: str = "running", **overrides) -> Attempt:
    fields = dict(
        attempt_id=attempt_id,
        task_id=task_id,
        number=number,
        state=state,
        created_at=11.0,
        hypothesis="the fixture leaks a port",
        reason="first try at the task",
        plan=Plan(hypothesis="the fixture leaks a port", base_sha="a" * 40, executor="executor/2", model="model/3"),
        worker_id="worker-7",
        generation=4,
        token_digest="d" * 64,
        claimed_at=12.0,
        heartbeat_at=13.5,
        expires_at=43.5,
        manifest_digest="m" * 64,
        worktree="/work/trees/1",
        base_sha="a" * 40,
        head_sha="b" * 40,
        started_at=12.5,
        ended_at=50.0,
        timeout_budget_s=600.0,
        checkpoint="step-3",
        result="tests pass",
        reconciliation="landed",
        failure_domain="provider",
        failure_signature="sig-1",
        evidence="ci run 99",
        cancel_requested=True,
        cancel_reason="operator asked",
        cancel_deadline_at=70.0,
        cost_usd=0.75,
        tokens=1234,
        elapsed_s=38.0,
    )
    fields.update(overrides)
    return Attempt(**fields)


def make_intent(key: str = "create-pr:task-1:" + "b" * 40, attempt_id: str = "attempt-1", **overrides) -> Intent:
    fields = dict(
        key=key,
        task_id="task-1",
        attempt_id=attempt_id,
        operation="create-pr",
        identity="b" * 40,
        request='{"title": "fix"}',
        minted_at=20.0,
        granted_at=21.0,
        deadline_at=51.0,
        receipt="pr-17",
        result="created",
    )
    fields.update(overrides)
    return Intent(**fields)


def event_fields(task_id: str = "task-1", **overrides) -> dict:
    fields = dict(
        at=30.0,
        actor="worker-7",
        kind="renew",
        task_id=task_id,
        attempt_id="attempt-1",
        accepted=False,
        reason="stale generation",
        from_state="running",
        to_state="running",
        generation=3,
        worker_id="worker-7",
        detail="presented 3, current 4",
    )
    fields.update(overrides)
    return fields


def minimal_attempt(attempt_id: str, task_id: str = "task-1", number: int = 1, state: str = "queued") -> Attempt:
    return Attempt(attempt_id=attempt_id, task_id=task_id, number=number, state=state, created_at=1.0, hypothesis="h")


# ---- The shared contract suite: every store must pass it unchanged. ----


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    made = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.sqlite")
    yield made
    made.close()


def seed(store, *records) -> None:
    """Insert a task and records in one committed transaction."""
    with store.transaction() as tx:
        for record in records:
            {Task: tx.insert_task, Attempt: tx.insert_attempt, Intent: tx.insert_intent}[type(record)](record)


def test_task_round_trips_every_field(store):
    """Goal: a Task comes back equal field by field, its Budget as a Budget."""
    seed(store, make_task())
    read = store.get_task("task-1")
    assert read == make_task()
    assert isinstance(read.budget, Budget) and read.budget.elapsed_max_s == 90.5


def test_task_with_defaults_round_trips(store):
    """Goal: None and default values survive as themselves, not as empty strings or zeros."""
    task = Task(task_id="t", objective="o", scope="s", workspace="w", state="inbox", budget=Budget(), created_at=0.0)
    seed(store, task)
    read = store.get_task("t")
    assert read == task and read.decision is None and read.budget == Budget()


def test_attempt_round_trips_every_field(store):
    """Goal: an Attempt comes back equal, its Plan as a Plan and its flag as a real bool."""
    seed(store, make_task(), make_attempt())
    read = store.get_attempt("attempt-1")
    assert read == make_attempt()
    assert isinstance(read.plan, Plan) and read.plan.model == "model/3"
    assert type(read.cancel_requested) is bool and read.cancel_requested is True


def test_attempt_with_defaults_round_trips(store):
    """Goal: an Attempt with no plan and a false flag comes back with None and False."""
    seed(store, make_task(), minimal_attempt("attempt-1"))
    read = store.get_attempt("attempt-1")
    assert read == minimal_attempt("attempt-1")
    assert read.plan is None and read.cancel_requested is False and type(read.cancel_requested) is bool


def test_intent_round_trips_every_field(store):
    """Goal: an Intent comes back equal, by key and among its Attempt's intents."""
    seed(store, make_task(), make_attempt(), make_intent())
    assert store.get_intent(make_intent().key) == make_intent()
    assert store.get_intents("attempt-1") == [make_intent()]
    assert store.get_intent("no-such-key") is None


def test_event_round_trips_every_field_with_assigned_seq(store):
    """Goal: append_event returns the Event with its seq, and the history holds the same Event."""
    with store.transaction() as tx:
        appended = tx.append_event(**event_fields())
    assert appended == Event(seq=appended.seq, **event_fields())
    assert store.events() == [appended]
    assert type(store.events()[0].accepted) is bool and store.events()[0].accepted is False


def test_reads_of_missing_records_are_empty(store):
    """Goal: unknown ids read as None or empty lists, never an error."""
    with store.transaction() as tx:
        assert tx.task("nope") is None and tx.attempt("nope") is None and tx.intent("nope") is None
        assert tx.attempts_of("nope") == [] and tx.intents_of("nope") == [] and tx.attempts_in(["running"]) == []


def test_update_bumps_version_in_store_and_on_the_passed_record(store):
    """Goal: a guarded write applies its changes and bumps the version on both the row and the caller's object."""
    seed(store, make_task(), make_attempt(state="running"), make_intent())
    with store.transaction() as tx:
        task = tx.task("task-1")
        tx.update_task(task, state="in_progress", budget=Budget(attempts_max=9), decision=None)
        attempt = tx.attempt("attempt-1")
        tx.update_attempt(attempt, state="verifying", cancel_requested=False, plan=None)
        intent = tx.intent(make_intent().key)
        tx.update_intent(intent, receipt="pr-18")
        tx.update_intent(intent, result=None)
    assert (task.version, task.state, task.budget.attempts_max) == (1, "in_progress", 9)
    assert (attempt.version, attempt.state, attempt.cancel_requested) == (1, "verifying", False)
    assert intent.version == 2
    stored_task, stored_attempt, stored_intent = store.get_task("task-1"), store.get_attempt("attempt-1"), store.get_intent(intent.key)
    assert stored_task == task and stored_task.decision is None and stored_task.budget == Budget(attempts_max=9)
    assert stored_attempt == attempt and stored_attempt.plan is None and stored_attempt.cancel_requested is False
    assert stored_intent == intent and (stored_intent.receipt, stored_intent.result) == ("pr-18", None)


def test_update_with_no_changes_still_bumps_the_version(store):
    """Goal: an empty write is a version bump, so it still fences later stale writers."""
    seed(store, make_task())
    with store.transaction() as tx:
        task = tx.task("task-1")
        tx.update_task(task)
    assert task.version == 1 and store.get_task("task-1").version == 1


@pytest.mark.parametrize("kind", ["task", "attempt", "intent"])
def test_stale_version_write_conflicts_and_changes_nothing(store, kind):
    """Goal: a write guarded by an old read raises StoreConflict and leaves the newer write in place."""
    seed(store, make_task(), make_attempt(state="running"), make_intent())
    read, field, identity = {
        "task": (store.get_task, "objective", "task-1"),
        "attempt": (store.get_attempt, "checkpoint", "attempt-1"),
        "intent": (store.get_intent, "receipt", make_intent().key),
    }[kind]
    update = "update_" + kind
    stale = read(identity)
    with store.transaction() as tx:
        getattr(tx, update)(getattr(tx, kind)(identity), **{field: "first"})
    with pytest.raises(StoreConflict, match="changed since it was read"), store.transaction() as tx:
        getattr(tx, update)(stale, **{field: "second"})
    stored = read(identity)
    assert getattr(stored, field) == "first" and stored.version == 1


def test_update_of_a_missing_record_conflicts(store):
    """Goal: a write to a row that does not exist is refused, not silently a no-op."""
    with pytest.raises(StoreConflict), store.transaction() as tx:
        tx.update_task(make_task("ghost"), state="done")
    assert store.get_task("ghost") is None


@pytest.mark.parametrize("terminal", sorted(ATTEMPT_TERMINAL))
def test_terminal_attempt_is_immutable(store, terminal):
    """Goal: once an Attempt is terminal, no write (even with the current version) changes it."""
    seed(store, make_task(), make_attempt(state="running"))
    with store.transaction() as tx:
        tx.update_attempt(tx.attempt("attempt-1"), state=terminal)
    current = store.get_attempt("attempt-1")
    with pytest.raises(StoreConflict, match="terminal"), store.transaction() as tx:
        tx.update_attempt(current, state="running", result="rewritten")
    stored = store.get_attempt("attempt-1")
    assert (stored.state, stored.result, stored.version) == (terminal, "tests pass", 1)


def test_attempt_numbers_must_run_one_to_n(store):
    """Goal: the first Attempt is number 1 and each next one N+1; gaps and repeats conflict."""
    seed(store, make_task())
    for bad_number in (0, 2):
        with pytest.raises(StoreConflict, match=r"1\.\.N"), store.transaction() as tx:
            tx.insert_attempt(minimal_attempt("a-bad", number=bad_number))
    seed(store, minimal_attempt("a-1", number=1))
    with pytest.raises(StoreConflict), store.transaction() as tx:
        tx.insert_attempt(minimal_attempt("a-3", number=3))
    seed(store, minimal_attempt("a-2", number=2))
    with pytest.raises(StoreConflict), store.transaction() as tx:
        tx.insert_attempt(minimal_attempt("a-2-again", number=2))
    assert [a.attempt_id for a in store.get_attempts("task-1")] == ["a-1", "a-2"]


def test_attempts_of_are_by_number_and_per_task(store):
    """Goal: attempts_of lists one task's Attempts in number order, never another task's."""
    seed(store, make_task("task-1"), make_task("task-2"))
    seed(store, minimal_attempt("z", number=1), minimal_attempt("y", number=2), minimal_attempt("x", number=3))
    seed(store, minimal_attempt("w", task_id="task-2", number=1))
    assert [(a.attempt_id, a.number) for a in store.get_attempts("task-1")] == [("z", 1), ("y", 2), ("x", 3)]
    assert [a.attempt_id for a in store.get_attempts("task-2")] == ["w"]


@pytest.mark.parametrize("kind", ["task", "attempt", "intent"])
def test_duplicate_insert_conflicts_and_keeps_the_first(store, kind):
    """Goal: inserting a record whose identity exists raises StoreConflict and the first record stays."""
    seed(store, make_task(), make_attempt())
    first = {"task": make_task(), "attempt": make_attempt(), "intent": make_intent()}[kind]
    if kind == "intent":
        seed(store, first)
    duplicate = {
        "task": make_task(objective="a different objective"),
        "attempt": make_attempt(number=2, hypothesis="different"),
        "intent": make_intent(operation="push"),
    }[kind]
    with pytest.raises(StoreConflict, match="already exists"), store.transaction() as tx:
        {"task": tx.insert_task, "attempt": tx.insert_attempt, "intent": tx.insert_intent}[kind](duplicate)
    read = {"task": store.get_task, "attempt": store.get_attempt, "intent": store.get_intent}[kind]
    identity = {"task": "task-1", "attempt": "attempt-1", "intent": make_intent().key}[kind]
    assert read(identity) == first


def test_exception_rolls_back_every_write_of_the_transaction(store):
    """Goal: a transaction that raises leaves no task, attempt, intent or event, and undoes a half-applied update."""
    seed(store, make_task("kept"))
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as tx:
        tx.insert_task(make_task())
        tx.insert_attempt(make_attempt())
        tx.insert_intent(make_intent())
        tx.append_event(**event_fields())
        tx.update_task(tx.task("kept"), state="in_progress", tokens=999)
        raise RuntimeError("boom")
    assert store.get_task("task-1") is None
    assert store.get_attempt("attempt-1") is None and store.get_attempts("task-1") == []
    assert store.get_intent(make_intent().key) is None and store.get_intents("attempt-1") == []
    assert store.events() == []
    kept = store.get_task("kept")
    assert (kept.state, kept.tokens, kept.version) == ("ready", 42, 0)


def test_conflict_mid_transaction_rolls_back_earlier_writes(store):
    """Goal: a StoreConflict raised after other writes undoes those writes too (a contract cannot half-happen)."""
    seed(store, make_task("kept"))
    stale = store.get_task("kept")
    with store.transaction() as tx:
        tx.update_task(tx.task("kept"), state="in_progress")
    with pytest.raises(StoreConflict), store.transaction() as tx:
        tx.append_event(**event_fields(task_id="kept"))
        tx.insert_task(make_task("new"))
        tx.update_task(stale, state="done")
    assert store.get_task("new") is None and store.events() == []
    assert store.get_task("kept").state == "in_progress"


def test_rolled_back_events_leave_no_gap_in_sequence_numbers(store):
    """Goal: committed history is numbered 1..N even when a transaction that appended was rolled back."""
    with store.transaction() as tx:
        tx.append_event(**event_fields(kind="a"))
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.append_event(**event_fields(kind="lost"))
        raise RuntimeError("abandon")
    with store.transaction() as tx:
        tx.append_event(**event_fields(kind="b"))
    assert [(e.seq, e.kind) for e in store.events()] == [(1, "a"), (2, "b")]


def test_events_are_in_seq_order_and_filter_by_task_and_seq(store):
    """Goal: events() is the history in append order, filtered by task and by `after_seq`."""
    with store.transaction() as tx:
        first = tx.append_event(**event_fields(task_id="a", kind="claim"))
        second = tx.append_event(**event_fields(task_id="b", kind="claim"))
    with store.transaction() as tx:
        third = tx.append_event(**event_fields(task_id="a", kind="renew", accepted=True))
    assert first.seq < second.seq < third.seq
    assert store.events() == [first, second, third]
    assert store.events(task_id="a") == [first, third]
    assert store.events(after_seq=first.seq) == [second, third]
    assert store.events(task_id="a", after_seq=first.seq) == [third]
    assert store.events(task_id="c") == [] and store.events(after_seq=third.seq) == []


def test_attempts_in_spans_states_in_attempt_id_order_and_follows_updates(store):
    """Goal: the reaper's scan finds Attempts in any of several states, by id, and sees state changes."""
    seed(store, make_task("task-1"), make_task("task-2"), make_task("task-3"))
    seed(
        store,
        minimal_attempt("c", task_id="task-1", state="running"),
        minimal_attempt("a", task_id="task-2", state="suspect"),
        minimal_attempt("b", task_id="task-3", state="claimed"),
        minimal_attempt("d", task_id="task-1", number=2, state="running"),
    )
    with store.transaction() as tx:
        assert [a.attempt_id for a in tx.attempts_in(["running", "suspect"])] == ["a", "c", "d"]
        assert [a.attempt_id for a in tx.attempts_in(state for state in ("claimed",))] == ["b"]
        assert tx.attempts_in([]) == []
        tx.update_attempt(tx.attempt("c"), state="succeeded")
        tx.update_attempt(tx.attempt("b"), state="running")
    with store.transaction() as tx:
        assert [a.attempt_id for a in tx.attempts_in({"running", "suspect"})] == ["a", "b", "d"]
        assert [(a.attempt_id, a.state) for a in tx.attempts_in(["succeeded"])] == [("c", "succeeded")]


def test_intents_of_are_by_key_and_follow_a_reassigned_attempt(store):
    """Goal: intents_of lists an Attempt's intents by key; an intent handed to attempt N+1 moves with it."""
    seed(store, make_task(), minimal_attempt("attempt-1"), minimal_attempt("attempt-2", number=2))
    seed(store, make_intent("k-b"), make_intent("k-a"), make_intent("k-c", attempt_id="attempt-2"))
    assert [i.key for i in store.get_intents("attempt-1")] == ["k-a", "k-b"]
    with store.transaction() as tx:
        tx.update_intent(tx.intent("k-b"), attempt_id="attempt-2")
    assert [i.key for i in store.get_intents("attempt-1")] == ["k-a"]
    assert [i.key for i in store.get_intents("attempt-2")] == ["k-b", "k-c"]


def test_transactions_do_not_nest(store):
    """Goal: opening a transaction inside another is refused, and the store stays usable."""
    with pytest.raises(RuntimeError, match="nest"), store.transaction() as tx:
        tx.insert_task(make_task())
        with store.transaction():
            pass
    assert store.get_task("task-1") is None
    seed(store, make_task())
    assert store.get_task("task-1") == make_task()


def test_returning_inside_a_transaction_commits(store):
    """Goal: leaving the block normally (here by `return`) commits, so helpers may return from inside."""

    def insert_and_return() -> str:
        with store.transaction() as tx:
            tx.insert_task(make_task())
            return "done"

    assert insert_and_return() == "done"
    assert store.get_task("task-1") == make_task()


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


def test_records_must_name_existing_parents(tmp_path):
    """Goal: an Attempt of an unknown task, or an intent of an unknown Attempt, is refused with NotFound."""
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(NotFound), store.transaction() as tx:
            tx.insert_attempt(minimal_attempt("orphan", task_id="no-such-task"))
        seed(store, make_task())
        with pytest.raises(NotFound), store.transaction() as tx:
            tx.insert_intent(make_intent(attempt_id="no-such-attempt"))
        assert store.get_attempt("orphan") is None and store.get_intent(make_intent().key) is None


def test_transaction_holds_the_write_lock_from_begin(tmp_path):
    """Goal: while one store's transaction is open, another process's transaction waits (here: gives up), even before any write."""
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as holder, SQLiteStore(path, busy_timeout_s=0.05) as other:
        with holder.transaction() as tx:
            tx.task("task-1")  # only a read: IMMEDIATE must already hold the lock
            with pytest.raises(StoreError, match="busy"), other.transaction():
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
    preamble = "import sys\nfrom shiftchange.core.sqlite_store import SQLiteStore\nstore = SQLiteStore(sys.argv[1])\n"
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


def test_reads_outside_contracts_are_copies_the_caller_cannot_write_through():
    """get_* return copies: changing one does not change the store."""
    store = MemoryStore()
    _finished_task(store, "task-1")
    copy_of = store.get_attempt("task-1#1")
    copy_of.state = "running"
    store.get_attempts("task-1")[0].result = "tampered"
    assert store.get_attempt("task-1#1").state == "failed" and store.get_attempt("task-1#1").result == "tests pass"
