"""`check_store(make_store)`: the transactional contract of a `Store`, one suite for every implementation.

What the suite holds a store to is what `shiftchange.core.store` promises
and every contract of the core relies on: a transaction commits whole on
success and leaves nothing on any exception (records, indexes and history
alike); writes are guarded by the version they read and refused for a
terminal Attempt; a transaction reads its own writes; transactions do not
nest; the history is numbered 1..N in append order with no gap left by a
rolled-back transaction; reads outside transactions are copies; and every
record comes back exactly as it was written, field by field, type by type,
awkward text included.

`make_store()` must return a fresh, empty store on every call; the suite
closes each store it made. Error messages are not part of the contract,
only the error types (`StoreConflict`, `NotFound`, `InputError`).

Not checked here, because one handle cannot show it: isolation between two
handles on one database (readers see only committed history, writers
serialize). A store that several processes share needs its own test of that,
as `tests/stores/test_transactions.py` has for SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields, replace
from typing import Any

from shiftchange.core import (
    Attempt,
    Budget,
    Event,
    InputError,
    Intent,
    NotFound,
    Plan,
    Store,
    StoreConflict,
    Task,
)

from .checks import Check, Report, collector, expect, expect_equal, expect_raises, run_checks

__all__ = ["AWKWARD_TEXT", "check_store", "store_checks"]

StoreFactory = Callable[[], Store]

TERMINAL_STATES = ("blocked", "cancelled", "failed", "quarantined", "succeeded")
"""The Attempt machine's terminal states (spec/attempt.toml); a store refuses any write to an Attempt in one."""

AWKWARD_TEXT: tuple[str, ...] = (
    "",
    " ",
    "'",
    '"',
    "\\",
    "x'); DROP TABLE tasks; --",
    "%s ? :name $1",
    "NULL",
    "None",
    "0",
    "a\x00b",
    "\n\r\t\x0b\x0c",
    "\u2028\u2029",
    "\ufeffbom",
    "caf\u00e9",
    "cafe\u0301",
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
    "\U0001f680\U0001f469\u200d\U0001f4bb",
    "\U0010ffff",
    "x" * 100_000,
)
"""Valid Unicode a store must hold exactly: quotes, SQL, NUL, line breaks, both forms of é, RTL, emoji, U+10FFFF, 100k characters."""

UNENCODABLE_TEXT = ("\ud800", "lone \udfff surrogate")
"""Strings no UTF-8 codec can encode (lone surrogates): a store keeps them exactly, or refuses them with InputError."""

_CHECKS: list[Check] = []
_check = collector(_CHECKS)


def store_checks() -> tuple[Check, ...]:
    """Every check of the store contract, in the suite's order (each is a function of `make_store`)."""
    return tuple(_CHECKS)


def check_store(make_store: StoreFactory) -> Report:
    """Run the whole store contract against stores from `make_store` (a fresh, empty store per call)."""
    return run_checks("store", _CHECKS, make_store)


# ---- builders: every field away from its default, so a dropped or mangled column shows.


def make_task(task_id: str = "task-1", **overrides: Any) -> Task:
    values: dict[str, Any] = dict(
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
        priority=-7,
        deadline_at=3600.125,
        decision="retry",
        decision_reason="validation failed with a new signature",
    )
    values.update(overrides)
    return Task(**values)


def make_attempt(
    attempt_id: str = "attempt-1", task_id: str = "task-1", number: int = 1, state: str = "running", **overrides: Any
) -> Attempt:
    values: dict[str, Any] = dict(
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
        eligible_at=12.75,
        backoff_s=1.5,
        fallback="model_provider -> small_model",
        cost_usd=0.75,
        tokens=1234,
        elapsed_s=38.0,
    )
    values.update(overrides)
    return Attempt(**values)


def make_intent(key: str = "create-pr:task-1:" + "b" * 40, attempt_id: str = "attempt-1", **overrides: Any) -> Intent:
    values: dict[str, Any] = dict(
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
        dependency="model_provider",
        outcome="failed",
        result="created",
    )
    values.update(overrides)
    return Intent(**values)


def event_fields(task_id: str = "task-1", **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        at=30.0,
        actor="worker",
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
        code="stale_fence",
        late=True,
        expires_at=44.0,
        operation_key="create-pr:task-1:" + "b" * 40,
        retries=2,
    )
    values.update(overrides)
    return values


def minimal_attempt(attempt_id: str, task_id: str = "task-1", number: int = 1, state: str = "queued") -> Attempt:
    return Attempt(attempt_id=attempt_id, task_id=task_id, number=number, state=state, created_at=1.0, hypothesis="h")


def minimal_task(task_id: str) -> Task:
    return Task(task_id=task_id, objective="o", scope="s", workspace="w", state="inbox", budget=Budget(), created_at=0.0)


@contextmanager
def fresh(make_store: StoreFactory) -> Iterator[Store]:
    """A store from the factory, closed when the block ends."""
    store = make_store()
    try:
        yield store
    finally:
        store.close()


def seed(store: Store, *records: Task | Attempt | Intent) -> None:
    """Insert records in one committed transaction, in order."""
    with store.transaction() as tx:
        for record in records:
            {Task: tx.insert_task, Attempt: tx.insert_attempt, Intent: tx.insert_intent}[type(record)](record)


def _same_record(read: object, written: object, what: str) -> None:
    """Equal field by field, each field's type kept (a bool stays a bool, None stays None, a Budget a Budget)."""
    expect(read is not None, f"{what}: the store has no record of it")
    expect_equal(type(read), type(written), f"{what}: record type")
    for field in fields(written):  # type: ignore[arg-type]
        got, wanted = getattr(read, field.name), getattr(written, field.name)
        expect_equal(got, wanted, f"{what}: field {field.name}")
        if wanted is None or isinstance(wanted, bool | str | Budget | Plan):
            expect_equal(type(got), type(wanted), f"{what}: type of field {field.name}")


# ---- round trips


@_check
def task_round_trips_every_field(make_store: StoreFactory) -> None:
    """A Task comes back equal field by field, its Budget as a Budget."""
    with fresh(make_store) as store:
        seed(store, make_task())
        _same_record(store.get_task("task-1"), make_task(), "task-1")


@_check
def task_with_defaults_round_trips(make_store: StoreFactory) -> None:
    """None and default values survive as themselves, not as empty strings or zeros."""
    with fresh(make_store) as store:
        seed(store, minimal_task("t"))
        _same_record(store.get_task("t"), minimal_task("t"), "task t with defaults")


@_check
def attempt_round_trips_every_field(make_store: StoreFactory) -> None:
    """An Attempt comes back equal, its Plan as a Plan and its flag as a real bool."""
    with fresh(make_store) as store:
        second = make_attempt("attempt-2", number=2, previous_attempt_id="attempt-1", state="queued")
        seed(store, make_task(), make_attempt(), second)
        _same_record(store.get_attempt("attempt-1"), make_attempt(), "attempt-1")
        _same_record(store.get_attempt("attempt-2"), second, "attempt-2, which names attempt-1 as its predecessor")


@_check
def attempt_with_defaults_round_trips(make_store: StoreFactory) -> None:
    """An Attempt with no plan and a false flag comes back with None and False."""
    with fresh(make_store) as store:
        seed(store, make_task(), minimal_attempt("attempt-1"))
        _same_record(store.get_attempt("attempt-1"), minimal_attempt("attempt-1"), "attempt-1 with defaults")


@_check
def intent_round_trips_every_field(make_store: StoreFactory) -> None:
    """An Intent comes back equal, by key and among its Attempt's intents; an unknown key reads as None."""
    with fresh(make_store) as store:
        seed(store, make_task(), make_attempt(), make_intent())
        _same_record(store.get_intent(make_intent().key), make_intent(), "the intent")
        expect_equal(store.get_intents("attempt-1"), [make_intent()], "the intents of attempt-1")
        expect_equal(store.get_intent("no-such-key"), None, "an unknown intent key")
        minimal = Intent("k-min", "task-1", "attempt-1", "push", "sha", "", 1.0)
        seed(store, minimal)
        _same_record(store.get_intent("k-min"), minimal, "an intent with defaults")


@_check
def event_round_trips_every_field_with_assigned_seq(make_store: StoreFactory) -> None:
    """append_event returns the Event with its seq, and the history holds the same Event, None fields and a false flag included."""
    with fresh(make_store) as store:
        with store.transaction() as tx:
            appended = tx.append_event(**event_fields())
            bare = tx.append_event(at=31.0, actor="operator", kind="create", task_id="task-1", attempt_id=None, accepted=True, reason="r")
        expect_equal(appended, Event(seq=appended.seq, **event_fields()), "the Event append_event returned")
        history = store.events()
        expect_equal(history, [appended, bare], "the history")
        _same_record(history[0], appended, "the first event")
        _same_record(history[1], bare, "an event with defaults")


@_check
def awkward_text_round_trips_exactly(make_store: StoreFactory) -> None:
    """Every text field holds quotes, SQL, NUL, line separators, both forms of é, RTL, emoji and 100k characters exactly."""
    with fresh(make_store) as store:
        for index, text in enumerate(AWKWARD_TEXT):
            short = text[:40]
            task_id = f"task-{index}-{short}"
            attempt_id = f"{task_id}#1"
            task = make_task(task_id, objective=text, scope=text, workspace=short, decision=text, decision_reason=text)
            attempt = make_attempt(attempt_id, task_id, hypothesis=text, reason=text, checkpoint=text, result=text, evidence=text)
            attempt = replace(attempt, plan=Plan(hypothesis=text, base_sha=short), failure_signature=text, cancel_reason=text)
            intent = make_intent(
                f"key-{index}-{short}", attempt_id, task_id=task_id, identity=text, request=text, receipt=text, result=text
            )
            seed(store, task, attempt, intent)
            with store.transaction() as tx:
                event = tx.append_event(**event_fields(task_id, attempt_id=attempt_id, reason=text, detail=text, actor=short))
            what = f"text #{index} {short!r}"
            _same_record(store.get_task(task_id), task, f"{what} in a Task")
            _same_record(store.get_attempt(attempt_id), attempt, f"{what} in an Attempt")
            _same_record(store.get_intent(intent.key), intent, f"{what} in an Intent")
            expect_equal(store.events(task_id=task_id), [event], f"{what} in an Event")


@_check
def numbers_round_trip_exactly(make_store: StoreFactory) -> None:
    """Floats keep every bit of their value and integers their whole range (up to 2**62), negative ones included."""
    awkward = {"created_at": 0.1 + 0.2, "cost_usd": 1e-300, "elapsed_s": 1.7976931348623157e308, "deadline_at": 2.0**53 + 1.0}
    with fresh(make_store) as store:
        task = make_task(tokens=2**62, priority=-1_000_000, interruptions=0, **awkward)
        attempt = make_attempt(generation=2**62, tokens=0, number=1, backoff_s=5e-324, timeout_budget_s=1e15)
        seed(store, task, attempt)
        _same_record(store.get_task("task-1"), task, "a task with awkward numbers")
        _same_record(store.get_attempt("attempt-1"), attempt, "an attempt with awkward numbers")


@_check
def unencodable_text_is_kept_exactly_or_refused_with_input_error(make_store: StoreFactory) -> None:
    """A lone surrogate is held exactly, or refused with InputError and nothing kept: never another error, never mangled."""
    with fresh(make_store) as store:
        for index, text in enumerate(UNENCODABLE_TEXT):
            task = make_task(f"task-{index}", objective=text)
            try:
                seed(store, task)
            except InputError:
                expect_equal(store.get_task(task.task_id), None, f"a task refused for text {text!r}")
                continue
            except Exception as error:
                expect(False, f"text {text!r}: a store keeps it or raises InputError, but it raised {type(error).__name__}: {error}")
            _same_record(store.get_task(task.task_id), task, f"text {text!r}")


@_check
def reads_of_missing_records_are_empty(make_store: StoreFactory) -> None:
    """Unknown ids read as None or empty lists, never an error; an empty history is an empty list."""
    with fresh(make_store) as store:
        with store.transaction() as tx:
            expect(tx.task("nope") is None and tx.attempt("nope") is None and tx.intent("nope") is None, "unknown ids read as None")
            expect_equal(tx.attempts_of("nope"), [], "attempts_of an unknown task")
            expect_equal(tx.intents_of("nope"), [], "intents_of an unknown attempt")
            expect_equal(tx.attempts_in(["running"]), [], "attempts_in of an empty store")
        expect_equal(store.events(), [], "the history of an empty store")
        expect_equal(store.get_attempts("nope"), [], "get_attempts of an unknown task")


# ---- guarded writes


@_check
def update_bumps_version_in_store_and_on_the_passed_record(make_store: StoreFactory) -> None:
    """A guarded write applies its changes and bumps the version on both the stored row and the caller's object."""
    with fresh(make_store) as store:
        seed(store, make_task(), make_attempt(state="running"), make_intent())
        with store.transaction() as tx:
            task = tx.task("task-1")
            tx.update_task(task, state="in_progress", budget=Budget(attempts_max=9), decision=None)
            attempt = tx.attempt("attempt-1")
            tx.update_attempt(attempt, state="verifying", cancel_requested=False, plan=None)
            intent = tx.intent(make_intent().key)
            tx.update_intent(intent, receipt="pr-18")
            tx.update_intent(intent, result=None)
        expect_equal((task.version, task.state, task.budget.attempts_max), (1, "in_progress", 9), "the written Task object")
        expect_equal((attempt.version, attempt.state, attempt.cancel_requested), (1, "verifying", False), "the written Attempt object")
        expect_equal(intent.version, 2, "the written Intent object's version after two writes")
        stored_task, stored_attempt = store.get_task("task-1"), store.get_attempt("attempt-1")
        stored_intent = store.get_intent(intent.key)
        _same_record(stored_task, task, "the stored Task")
        _same_record(stored_attempt, attempt, "the stored Attempt")
        _same_record(stored_intent, intent, "the stored Intent")


@_check
def update_with_no_changes_still_bumps_the_version(make_store: StoreFactory) -> None:
    """An empty write is a version bump, so it still fences later stale writers."""
    with fresh(make_store) as store:
        seed(store, make_task())
        with store.transaction() as tx:
            task = tx.task("task-1")
            tx.update_task(task)
        expect_equal((task.version, store.get_task("task-1").version), (1, 1), "versions after an empty write")


@_check
def stale_version_write_conflicts_and_changes_nothing(make_store: StoreFactory) -> None:
    """A write guarded by an old read raises StoreConflict and leaves the newer write in place, for Tasks, Attempts and intents."""
    cases = {
        "task": ("get_task", "objective", "task-1"),
        "attempt": ("get_attempt", "checkpoint", "attempt-1"),
        "intent": ("get_intent", "receipt", make_intent().key),
    }
    for kind, (getter, field, identity) in cases.items():
        with fresh(make_store) as store:
            seed(store, make_task(), make_attempt(state="running"), make_intent())
            read = getattr(store, getter)
            stale = read(identity)
            with store.transaction() as tx:
                getattr(tx, "update_" + kind)(getattr(tx, kind)(identity), **{field: "first"})
            with expect_raises(StoreConflict, f"a stale {kind} write"), store.transaction() as tx:
                getattr(tx, "update_" + kind)(stale, **{field: "second"})
            stored = read(identity)
            expect_equal((getattr(stored, field), stored.version), ("first", 1), f"the {kind} after a stale write was refused")


@_check
def update_of_a_missing_record_conflicts(make_store: StoreFactory) -> None:
    """A write to a record that does not exist is refused with StoreConflict, not silently a no-op."""
    with fresh(make_store) as store:
        seed(store, make_task())
        writes = {
            "task": lambda tx: tx.update_task(make_task("ghost"), state="done"),
            "attempt": lambda tx: tx.update_attempt(make_attempt("ghost#1", state="running"), checkpoint="x"),
            "intent": lambda tx: tx.update_intent(make_intent("ghost-key"), receipt="pr-1"),
        }
        for kind, write in writes.items():
            with expect_raises(StoreConflict, f"an update of a missing {kind}"), store.transaction() as tx:
                write(tx)
        expect(store.get_task("ghost") is None and store.get_attempt("ghost#1") is None, "a missing record stays missing")
        expect(store.get_intent("ghost-key") is None, "a missing intent stays missing")


@_check
def terminal_attempt_is_immutable(make_store: StoreFactory) -> None:
    """Once an Attempt is terminal, no write (even with the current version) changes it, in every terminal state."""
    for terminal in TERMINAL_STATES:
        with fresh(make_store) as store:
            seed(store, make_task(), make_attempt(state="running"))
            with store.transaction() as tx:
                tx.update_attempt(tx.attempt("attempt-1"), state=terminal)
            current = store.get_attempt("attempt-1")
            with expect_raises(StoreConflict, f"a write to an attempt {terminal}"), store.transaction() as tx:
                tx.update_attempt(current, state="running", result="rewritten")
            stored = store.get_attempt("attempt-1")
            expect_equal((stored.state, stored.result, stored.version), (terminal, "tests pass", 1), f"the attempt {terminal}")


@_check
def attempt_numbers_must_run_one_to_n(make_store: StoreFactory) -> None:
    """The first Attempt is number 1 and each next one N+1; gaps and repeats conflict."""
    with fresh(make_store) as store:
        seed(store, make_task())
        for bad_number in (0, 2):
            with expect_raises(StoreConflict, f"Attempt number {bad_number} as a task's first"), store.transaction() as tx:
                tx.insert_attempt(minimal_attempt("a-bad", number=bad_number))
        seed(store, minimal_attempt("a-1", number=1))
        with expect_raises(StoreConflict, "Attempt 3 after Attempt 1"), store.transaction() as tx:
            tx.insert_attempt(minimal_attempt("a-3", number=3))
        seed(store, minimal_attempt("a-2", number=2))
        with expect_raises(StoreConflict, "a second Attempt 2"), store.transaction() as tx:
            tx.insert_attempt(minimal_attempt("a-2-again", number=2))
        expect_equal([a.attempt_id for a in store.get_attempts("task-1")], ["a-1", "a-2"], "the task's Attempts")


@_check
def attempts_of_are_by_number_and_per_task(make_store: StoreFactory) -> None:
    """attempts_of lists one task's Attempts in number order, never another task's."""
    with fresh(make_store) as store:
        seed(store, make_task("task-1"), make_task("task-2"))
        seed(store, minimal_attempt("z", number=1), minimal_attempt("y", number=2), minimal_attempt("x", number=3))
        seed(store, minimal_attempt("w", task_id="task-2", number=1))
        numbered = [(a.attempt_id, a.number) for a in store.get_attempts("task-1")]
        expect_equal(numbered, [("z", 1), ("y", 2), ("x", 3)], "task-1's Attempts")
        expect_equal([a.attempt_id for a in store.get_attempts("task-2")], ["w"], "task-2's Attempts")


@_check
def duplicate_insert_conflicts_and_keeps_the_first(make_store: StoreFactory) -> None:
    """Inserting a record whose identity exists raises StoreConflict and the first record stays."""
    duplicates = {
        "task": (make_task(), make_task(objective="a different objective"), "get_task", "task-1"),
        "attempt": (make_attempt(), make_attempt(number=2, hypothesis="different"), "get_attempt", "attempt-1"),
        "intent": (make_intent(), make_intent(operation="push"), "get_intent", make_intent().key),
    }
    for kind, (first, duplicate, getter, identity) in duplicates.items():
        with fresh(make_store) as store:
            seed(store, make_task(), make_attempt())
            if kind == "intent":
                seed(store, first)
            with expect_raises(StoreConflict, f"a duplicate {kind}"), store.transaction() as tx:
                getattr(tx, "insert_" + kind)(duplicate)
            _same_record(getattr(store, getter)(identity), first, f"the first {kind} after a duplicate was refused")


@_check
def records_must_name_existing_parents(make_store: StoreFactory) -> None:
    """An Attempt of an unknown task, or an intent of an unknown task or Attempt, is refused with NotFound and kept nowhere."""
    with fresh(make_store) as store:
        with expect_raises(NotFound, "an Attempt of an unknown task"), store.transaction() as tx:
            tx.insert_attempt(minimal_attempt("orphan", task_id="no-such-task"))
        seed(store, make_task())
        with expect_raises(NotFound, "an intent of an unknown Attempt"), store.transaction() as tx:
            tx.insert_intent(make_intent(attempt_id="no-such-attempt"))
        seed(store, make_attempt())
        with expect_raises(NotFound, "an intent of an unknown task"), store.transaction() as tx:
            tx.insert_intent(make_intent("k-orphan", task_id="no-such-task"))
        expect(store.get_attempt("orphan") is None and store.get_attempts("no-such-task") == [], "the orphan Attempt is kept nowhere")
        expect(store.get_intent(make_intent().key) is None and store.get_intent("k-orphan") is None, "orphan intents are kept nowhere")


@_check
def only_record_fields_may_be_written(make_store: StoreFactory) -> None:
    """A write naming an identity field, the version, an unknown or a crafted name is an InputError and changes nothing."""
    bad_changes = ({"state = 'done', version": 5}, {"no_such_field": 1}, {"task_id": "other"}, {"version": 7})
    with fresh(make_store) as store:
        seed(store, make_task(), make_attempt(), make_intent())
        for changes in bad_changes:
            with expect_raises(InputError, f"update_task with {sorted(changes)}"), store.transaction() as tx:
                tx.update_task(tx.task("task-1"), **changes)
        for changes in ({"attempt_id": "other"}, {"number": 2}, {"version": 1}):
            with expect_raises(InputError, f"update_attempt with {sorted(changes)}"), store.transaction() as tx:
                tx.update_attempt(tx.attempt("attempt-1"), **changes)
        for changes in ({"key": "other"}, {"task_id": "other"}):
            with expect_raises(InputError, f"update_intent with {sorted(changes)}"), store.transaction() as tx:
                tx.update_intent(tx.intent(make_intent().key), **changes)
        _same_record(store.get_task("task-1"), make_task(), "the task after refused writes")
        _same_record(store.get_attempt("attempt-1"), make_attempt(), "the attempt after refused writes")
        _same_record(store.get_intent(make_intent().key), make_intent(), "the intent after refused writes")


# ---- atomicity


@_check
def exception_rolls_back_every_write_of_the_transaction(make_store: StoreFactory) -> None:
    """A transaction that raises leaves no task, attempt, intent or event, and undoes a half-applied update."""
    with fresh(make_store) as store:
        seed(store, make_task("kept"))
        with expect_raises(RuntimeError, "the transaction's own error", match="boom"), store.transaction() as tx:
            tx.insert_task(make_task())
            tx.insert_attempt(make_attempt())
            tx.insert_intent(make_intent())
            tx.append_event(**event_fields())
            tx.update_task(tx.task("kept"), state="in_progress", tokens=999)
            raise RuntimeError("boom")
        expect_equal(store.get_task("task-1"), None, "a task inserted by a rolled-back transaction")
        expect(store.get_attempt("attempt-1") is None and store.get_attempts("task-1") == [], "an attempt of a rolled-back transaction")
        expect(
            store.get_intent(make_intent().key) is None and store.get_intents("attempt-1") == [], "an intent of a rolled-back transaction"
        )
        expect_equal(store.events(), [], "the history after a rolled-back transaction")
        kept = store.get_task("kept")
        expect_equal((kept.state, kept.tokens, kept.version), ("ready", 42, 0), "a task updated in a rolled-back transaction")


@_check
def conflict_mid_transaction_rolls_back_earlier_writes(make_store: StoreFactory) -> None:
    """A StoreConflict raised after other writes undoes those writes too (a contract cannot half-happen)."""
    with fresh(make_store) as store:
        seed(store, make_task("kept"))
        stale = store.get_task("kept")
        with store.transaction() as tx:
            tx.update_task(tx.task("kept"), state="in_progress")
        with expect_raises(StoreConflict, "a stale write at the end of a transaction"), store.transaction() as tx:
            tx.append_event(**event_fields(task_id="kept"))
            tx.insert_task(make_task("new"))
            tx.update_task(stale, state="done")
        expect(store.get_task("new") is None and store.events() == [], "the writes before the conflict are undone")
        expect_equal(store.get_task("kept").state, "in_progress", "the committed write before the conflicting transaction")


@_check
def rollback_restores_every_index(make_store: StoreFactory) -> None:
    """After a rolled-back state change, Attempt insert and intent hand-over, every scan answers as before the transaction."""
    with fresh(make_store) as store:
        seed(store, make_task(), minimal_attempt("attempt-1", state="running"), minimal_attempt("attempt-2", number=2, state="queued"))
        seed(store, make_intent("k-1", attempt_id="attempt-1"))
        with expect_raises(RuntimeError, "the transaction's own error"), store.transaction() as tx:
            tx.update_attempt(tx.attempt("attempt-1"), state="suspect")
            tx.update_intent(tx.intent("k-1"), attempt_id="attempt-2")
            tx.insert_attempt(minimal_attempt("attempt-3", number=3))
            raise RuntimeError("abandon")
        with store.transaction() as tx:
            expect_equal([a.attempt_id for a in tx.attempts_in(["running"])], ["attempt-1"], "attempts_in running after the rollback")
            expect_equal(tx.attempts_in(["suspect"]), [], "attempts_in suspect after the rollback")
            expect_equal([i.key for i in tx.intents_of("attempt-1")], ["k-1"], "intents_of attempt-1 after the rollback")
            expect_equal(tx.intents_of("attempt-2"), [], "intents_of attempt-2 after the rollback")
            expect_equal([a.attempt_id for a in tx.attempts_of("task-1")], ["attempt-1", "attempt-2"], "attempts_of after the rollback")
        seed(store, minimal_attempt("attempt-3-again", number=3))
        expect_equal(store.get_attempt("attempt-3"), None, "the rolled-back Attempt 3")


@_check
def rolled_back_events_leave_no_gap_in_sequence_numbers(make_store: StoreFactory) -> None:
    """Committed history is numbered 1..N even when a transaction that appended was rolled back."""
    with fresh(make_store) as store:
        with store.transaction() as tx:
            tx.append_event(**event_fields(kind="a"))
        with expect_raises(RuntimeError, "the transaction's own error"), store.transaction() as tx:
            tx.append_event(**event_fields(kind="lost"))
            tx.append_event(**event_fields(kind="lost too"))
            raise RuntimeError("abandon")
        with store.transaction() as tx:
            tx.append_event(**event_fields(kind="b"))
        expect_equal([(e.seq, e.kind) for e in store.events()], [(1, "a"), (2, "b")], "the history's (seq, kind)")


@_check
def returning_inside_a_transaction_commits(make_store: StoreFactory) -> None:
    """Leaving the block normally (here by `return`) commits, so helpers may return from inside."""
    with fresh(make_store) as store:

        def insert_and_return() -> str:
            with store.transaction() as tx:
                tx.insert_task(make_task())
                return "done"

        expect_equal(insert_and_return(), "done", "the helper's result")
        _same_record(store.get_task("task-1"), make_task(), "the task inserted before the return")


# ---- isolation, as the interface promises it


@_check
def transactions_do_not_nest(make_store: StoreFactory) -> None:
    """Opening a transaction inside another raises RuntimeError, the outer one rolls back, and the store stays usable."""
    with fresh(make_store) as store:
        with expect_raises(RuntimeError, "a transaction opened inside another"), store.transaction() as tx:
            tx.insert_task(make_task())
            with store.transaction():
                pass
        expect_equal(store.get_task("task-1"), None, "the outer transaction's write")
        seed(store, make_task())
        _same_record(store.get_task("task-1"), make_task(), "a task written after the refused nesting")


@_check
def a_transaction_reads_its_own_writes(make_store: StoreFactory) -> None:
    """Inside one transaction every read, lookups and scans alike, sees the writes made before it."""
    with fresh(make_store) as store, store.transaction() as tx:
        tx.insert_task(make_task())
        expect_equal(tx.task("task-1"), make_task(), "tx.task after insert_task")
        tx.update_task(tx.task("task-1"), state="in_progress")
        expect_equal(tx.task("task-1").state, "in_progress", "tx.task after update_task")
        tx.insert_attempt(minimal_attempt("attempt-1", state="running"))
        expect_equal([a.attempt_id for a in tx.attempts_of("task-1")], ["attempt-1"], "attempts_of after insert_attempt")
        expect_equal([a.attempt_id for a in tx.attempts_in(["running"])], ["attempt-1"], "attempts_in after insert_attempt")
        tx.update_attempt(tx.attempt("attempt-1"), state="suspect", checkpoint="c")
        expect_equal((tx.attempt("attempt-1").state, tx.attempt("attempt-1").checkpoint), ("suspect", "c"), "tx.attempt after an update")
        expect_equal(tx.attempts_in(["running"]), [], "attempts_in the old state after a state change")
        expect_equal([a.attempt_id for a in tx.attempts_in(["suspect"])], ["attempt-1"], "attempts_in the new state")
        tx.insert_attempt(minimal_attempt("attempt-2", number=2))
        tx.insert_intent(make_intent("k-1", attempt_id="attempt-1"))
        expect_equal(tx.intent("k-1"), make_intent("k-1", attempt_id="attempt-1"), "tx.intent after insert_intent")
        tx.update_intent(tx.intent("k-1"), attempt_id="attempt-2")
        expect_equal(tx.intents_of("attempt-1"), [], "intents_of the Attempt an intent was handed away from")
        expect_equal([i.key for i in tx.intents_of("attempt-2")], ["k-1"], "intents_of the Attempt an intent was handed to")


@_check
def reads_outside_transactions_are_copies(make_store: StoreFactory) -> None:
    """get_* and events() hand out copies: changing what they return changes nothing in the store."""
    with fresh(make_store) as store:
        seed(store, make_task(), make_attempt(), make_intent())
        with store.transaction() as tx:
            tx.append_event(**event_fields())
        store.get_task("task-1").state = "done"
        store.get_attempt("attempt-1").result = "tampered"
        store.get_attempts("task-1")[0].state = "succeeded"
        store.get_intent(make_intent().key).receipt = "forged"
        store.get_intents("attempt-1")[0].result = "forged"
        store.events().clear()
        _same_record(store.get_task("task-1"), make_task(), "the task after its copy was changed")
        _same_record(store.get_attempt("attempt-1"), make_attempt(), "the attempt after its copies were changed")
        _same_record(store.get_intent(make_intent().key), make_intent(), "the intent after its copies were changed")
        expect_equal(len(store.events()), 1, "the history's length after a copy of it was cleared")


# ---- the history


@_check
def events_are_in_seq_order_and_filter_by_task_and_seq(make_store: StoreFactory) -> None:
    """events() is the history in append order, filtered by task and by `after_seq`."""
    with fresh(make_store) as store:
        with store.transaction() as tx:
            first = tx.append_event(**event_fields(task_id="a", kind="claim"))
            second = tx.append_event(**event_fields(task_id="b", kind="claim"))
        with store.transaction() as tx:
            third = tx.append_event(**event_fields(task_id="a", kind="renew", accepted=True))
        expect(first.seq < second.seq < third.seq, f"seq numbers rise in append order: {first.seq}, {second.seq}, {third.seq}")
        expect_equal(store.events(), [first, second, third], "the history")
        expect_equal(store.events(task_id="a"), [first, third], "task a's history")
        expect_equal(store.events(after_seq=first.seq), [second, third], "the history after the first event")
        expect_equal(store.events(task_id="a", after_seq=first.seq), [third], "task a's history after the first event")
        expect(store.events(task_id="c") == [] and store.events(after_seq=third.seq) == [], "filters that match nothing")


@_check
def long_history_keeps_append_order_and_numbering(make_store: StoreFactory) -> None:
    """Sixty events over many transactions come back in append order, numbered 1..60, and every filter agrees with it."""
    kinds = ("claim", "renew", "complete", "append", "expire", "reconcile")
    with fresh(make_store) as store:
        appended = []
        for batch in range(12):
            with store.transaction() as tx:
                for index in range(5):
                    number = batch * 5 + index
                    task_id = ("task-b", "task-a", "task-c")[number % 3]
                    appended.append(tx.append_event(**event_fields(task_id, kind=kinds[number % 6], at=float(60 - number))))
        history = store.events()
        expect_equal([e.seq for e in history], list(range(1, 61)), "the seq numbers of sixty committed events")
        expect_equal(history, appended, "the history, against the events as appended")
        for task_id in ("task-a", "task-b", "task-c"):
            expect_equal(store.events(task_id=task_id), [e for e in appended if e.task_id == task_id], f"{task_id}'s history")
        expect_equal(store.events(after_seq=45), appended[45:], "the history after seq 45")


@_check
def attempts_in_spans_states_in_attempt_id_order_and_follows_updates(make_store: StoreFactory) -> None:
    """The reaper's scan finds Attempts in any of several states, by id, and sees state changes."""
    with fresh(make_store) as store:
        seed(store, make_task("task-1"), make_task("task-2"), make_task("task-3"))
        seed(
            store,
            minimal_attempt("c", task_id="task-1", state="running"),
            minimal_attempt("a", task_id="task-2", state="suspect"),
            minimal_attempt("b", task_id="task-3", state="claimed"),
            minimal_attempt("d", task_id="task-1", number=2, state="running"),
        )
        with store.transaction() as tx:
            found = [a.attempt_id for a in tx.attempts_in(["running", "suspect"])]
            expect_equal(found, ["a", "c", "d"], "attempts_in running or suspect")
            expect_equal([a.attempt_id for a in tx.attempts_in(state for state in ("claimed",))], ["b"], "attempts_in from a generator")
            expect_equal(tx.attempts_in([]), [], "attempts_in no state")
            tx.update_attempt(tx.attempt("c"), state="succeeded")
            tx.update_attempt(tx.attempt("b"), state="running")
        with store.transaction() as tx:
            found = [a.attempt_id for a in tx.attempts_in({"running", "suspect"})]
            expect_equal(found, ["a", "b", "d"], "attempts_in running or suspect after updates")
            expect_equal([(a.attempt_id, a.state) for a in tx.attempts_in(["succeeded"])], [("c", "succeeded")], "attempts_in succeeded")


@_check
def intents_of_are_by_key_and_follow_a_reassigned_attempt(make_store: StoreFactory) -> None:
    """intents_of lists an Attempt's intents by key; an intent handed to attempt N+1 moves with it."""
    with fresh(make_store) as store:
        seed(store, make_task(), minimal_attempt("attempt-1"), minimal_attempt("attempt-2", number=2))
        seed(store, make_intent("k-b"), make_intent("k-a"), make_intent("k-c", attempt_id="attempt-2"))
        expect_equal([i.key for i in store.get_intents("attempt-1")], ["k-a", "k-b"], "attempt-1's intents")
        with store.transaction() as tx:
            tx.update_intent(tx.intent("k-b"), attempt_id="attempt-2")
        expect_equal([i.key for i in store.get_intents("attempt-1")], ["k-a"], "attempt-1's intents after the hand-over")
        expect_equal([i.key for i in store.get_intents("attempt-2")], ["k-b", "k-c"], "attempt-2's intents after the hand-over")
