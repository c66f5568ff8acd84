"""The store suite, first part: the factory itself (checked first, and alone when it fails), round trips of every
record, and guarded writes."""

from __future__ import annotations

from dataclasses import replace

from shiftchange.core import (
    Budget,
    Event,
    InputError,
    Intent,
    NotFound,
    Plan,
    Store,
    StoreConflict,
    StoreRetryable,
)

from ..checks import Check, Violation, collector, expect, expect_equal, expect_raises
from .builders import (
    _same_record,
    event_fields,
    fresh,
    limits_of,
    make_attempt,
    make_intent,
    make_task,
    minimal_attempt,
    minimal_task,
    seed,
)
from .registry import AWKWARD_TEXT, TERMINAL_STATES, UNENCODABLE_TEXT, StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

# ---- the factory itself: checked first, and alone when it fails (every other check would fail for the same reason)


@_check
def factory_makes_a_fresh_empty_store_each_call(make_store: StoreFactory) -> None:
    """Each call of the factory makes a new, empty store that shares nothing with the others it made."""
    first = make_store()
    try:
        second = make_store()
        try:
            expect(
                second is not first,
                "the factory returned the same store object twice: make_store() must build a new, empty store on every call"
                " (a new file, schema or database each time)",
            )
            for store, which in ((first, "first"), (second, "second")):
                expect(
                    store.get_task("task-1") is None and store.events() == [],
                    f"the {which} store the factory made is not empty: make_store() must return an empty store on every call",
                )
            seed(first, make_task())
            with first.transaction() as tx:
                tx.append_event(**event_fields())
            expect(
                second.get_task("task-1") is None and second.events() == [],
                "two stores the factory made share their data (a task and an event written to one show in the other):"
                " make_store() must give each store a file, schema or database of its own",
            )
        finally:
            if second is not first:
                second.close()
    finally:
        first.close()


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


def _numbered(store: Store, appended: list[Event], first: int) -> list[Event]:
    """The events as the history will number them, `appended` in commit order from seq `first`.

    A store that numbers on append returned those numbers already (checked
    here); one that numbers after commit (`Store.numbers_on_append` False)
    returned seq 0 for every event, and its readers must then see exactly
    these numbers.
    """
    expected = [replace(event, seq=first + index) for index, event in enumerate(appended)]
    if store.numbers_on_append:
        expect_equal(appended, expected, "the events as append_event returned them, numbered on append")
        return appended
    expect_equal(
        [event.seq for event in appended], [0] * len(appended), "the seq append_event returns on a store that numbers after commit"
    )
    return expected


@_check
def event_round_trips_every_field_with_assigned_seq(make_store: StoreFactory) -> None:
    """append_event returns the Event with its seq, and the history holds the same Event, None fields and a false flag included."""
    with fresh(make_store) as store:
        with store.transaction() as tx:
            appended = tx.append_event(**event_fields())
            bare = tx.append_event(at=31.0, actor="operator", kind="create", task_id="task-1", attempt_id=None, accepted=True, reason="r")
        appended, bare = _numbered(store, [appended, bare], 1)
        expect_equal(appended, Event(seq=appended.seq, **event_fields()), "the Event append_event returned")
        history = store.events()
        expect_equal(history, [appended, bare], "the history")
        _same_record(history[0], appended, "the first event")
        _same_record(history[1], bare, "an event with defaults")


@_check
def awkward_text_round_trips_exactly(make_store: StoreFactory) -> None:
    """Every text field holds quotes, SQL, NUL, line separators, both forms of é, RTL, emoji and 100k characters exactly."""
    with fresh(make_store) as store:
        limits = limits_of(store)  # a port that declares narrower limits is held to its declaration
        for index, text in enumerate(AWKWARD_TEXT):
            text = text[: limits.text_chars_max]
            short = text[:40]
            task_id = f"task-{index}-{short}"[: limits.task_id_chars_max]
            attempt_id = f"{task_id}#1"
            task = make_task(task_id, objective=text, scope=text, workspace=short, decision=text, decision_reason=text)
            attempt = make_attempt(attempt_id, task_id, hypothesis=text, reason=text, checkpoint=text, result=text, evidence=text)
            attempt = replace(attempt, plan=Plan(hypothesis=text, base_sha=short), failure_signature=text, cancel_reason=text)
            intent = make_intent(
                f"key-{index}-{short}",
                attempt_id,
                task_id=task_id,
                identity=text[: limits.id_chars_max],
                request=text,
                receipt=text,
                result=text,
            )
            seed(store, task, attempt, intent)
            with store.transaction() as tx:
                event = tx.append_event(**event_fields(task_id, attempt_id=attempt_id, reason=text, detail=text, actor=short))
            (event,) = _numbered(store, [event], index + 1)
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
def updates_of_one_record_in_one_transaction_all_land_and_a_terminal_one_is_final(make_store: StoreFactory) -> None:
    """Several updates of a stored record in one transaction (a claim, then its start) all land, one version each; an Attempt
    made terminal stays so: a later write in the same transaction conflicts and the whole transaction is rolled back."""
    with fresh(make_store) as store:
        seed(store, make_task(), make_attempt(state="admitted"))
        with store.transaction() as tx:
            tx.update_attempt(tx.attempt("attempt-1"), state="claimed", worker_id="worker-2", generation=4)
            tx.update_attempt(tx.attempt("attempt-1"), state="running", started_at=12.5)
            tx.update_attempt(tx.attempt("attempt-1"), heartbeat_at=13.0)
        stored = store.get_attempt("attempt-1")
        got = (stored.state, stored.worker_id, stored.generation, stored.started_at, stored.heartbeat_at, stored.version)
        expect_equal(got, ("running", "worker-2", 4, 12.5, 13.0, 3), "the Attempt after three updates in one transaction")
        for terminal in TERMINAL_STATES:
            after = f"a write after the Attempt was made {terminal} in the same transaction"
            try:
                with store.transaction() as tx:
                    tx.update_attempt(tx.attempt("attempt-1"), state=terminal)
                    tx.update_attempt(tx.attempt("attempt-1"), state="running", result="rewritten")
            except StoreRetryable as error:
                raise Violation(f"{after}: raised StoreRetryable ({error}); a terminal Attempt is no race to run again") from error
            except StoreConflict:
                pass
            else:
                raise Violation(f"{after}: expected StoreConflict, but nothing was raised")
            stored = store.get_attempt("attempt-1")
            expect_equal((stored.state, stored.version), ("running", 3), f"the Attempt after the refused transaction ({terminal})")
        stale = store.get_task("task-1")
        before = (stale.objective, stale.priority, stale.version)
        copied = "a write from a copy read before another write of the same transaction"
        with expect_raises(StoreConflict, copied), store.transaction() as tx:
            tx.update_task(tx.task("task-1"), objective="written first")
            tx.update_task(stale, priority=5)
        stored = store.get_task("task-1")
        expect_equal((stored.objective, stored.priority, stored.version), before, "the task after the refused transaction: neither write")
        with expect_raises(StoreConflict, "one task id inserted twice in one transaction"), store.transaction() as tx:
            tx.insert_task(make_task("twice"))
            tx.insert_task(make_task("twice", objective="the second"))
        expect(store.get_task("twice") is None, "a task inserted twice in a refused transaction is kept nowhere")


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
