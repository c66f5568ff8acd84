"""The store suite: atomicity (nothing left by an exception or a conflict) and isolation as the interface promises it."""

from __future__ import annotations

import threading

from shiftchange.core import (
    Store,
    StoreConflict,
)

from ..checks import Check, Violation, collector, expect, expect_equal, expect_raises
from .builders import _same_record, event_fields, fresh, make_attempt, make_intent, make_task, minimal_attempt, seed
from .registry import HISTORY_WAIT_S, StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

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
def the_history_can_be_read_inside_an_open_transaction(make_store: StoreFactory) -> None:
    """store.events() called while the same handle's transaction is open answers (the core's timeline does it), every commit in it."""
    outcome: list[BaseException | None] = []

    def body() -> None:  # a store of its own, on a thread of its own: a store that waits for itself fails, never hangs the kit
        try:
            with fresh(make_store) as store:
                _history_inside(store)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=body, name="check-store-history-inside", daemon=True)
    thread.start()
    thread.join(HISTORY_WAIT_S)
    expect(
        not thread.is_alive(),
        f"store.events() inside this handle's open transaction had not answered after {HISTORY_WAIT_S:g} s: it waits for itself",
    )
    if outcome and outcome[0] is not None:
        raise outcome[0]


def _history_inside(store: Store) -> None:
    with store.transaction() as tx:
        committed = [tx.append_event(**event_fields("task-1")), tx.append_event(**event_fields("task-2"))]
    history = store.events()
    with store.transaction() as tx:
        tx.append_event(**event_fields("task-3"))
        try:
            inside = store.events()
        except Exception as error:
            raise Violation(
                f"store.events() inside this handle's open transaction raised {type(error).__name__}: {error}"
                " (a lock the transaction holds, taken again by the read?)"
            ) from error
    expect_equal(len(history), len(committed), "the history after two committed appends")
    expect_equal(inside[: len(history)], history, "the history read inside an open transaction, up to what was committed")
    expect_equal(len(store.events()), len(committed) + 1, "the history once the transaction committed")


@_check
def tasks_reads_many_as_task_reads_each(make_store: StoreFactory) -> None:
    """tasks(ids) is task(id) for each id, in the order asked (repeats and missing ids included), own writes seen; [] for none."""
    with fresh(make_store) as store:
        seed(store, make_task("t-a"), make_task("t-c", objective="the other"))
        with store.transaction() as tx:
            expect_equal(tx.tasks([]), [], "tasks of no ids")
            asked = ["t-c", "t-missing", "t-a", "t-c"]
            found = tx.tasks(asked)
            expect_equal(found, [tx.task(task_id) for task_id in asked], "tasks(ids) against task(id) for each")
            expect_equal([None if task is None else task.objective for task in found][:2], ["the other", None], "what was found")
            tx.insert_task(make_task("t-b", objective="inserted here"))
            tx.update_task(tx.task("t-a"), objective="changed here")
            changed = [task.objective for task in tx.tasks(("t-b", "t-a"))]
            expect_equal(changed, ["inserted here", "changed here"], "tasks(ids) after this transaction's writes")


@_check
def records_inserted_and_changed_in_one_transaction_are_stored_as_last_changed(make_store: StoreFactory) -> None:
    """Many tasks and Attempts inserted and then changed in one transaction (a bulk intake) are stored as last changed.

    Each with the version its changes gave it, as the same changes in
    transactions of their own would leave them; and an Attempt out of number
    for a task inserted in the same transaction still conflicts.
    """
    count = 12
    with fresh(make_store) as store:
        with store.transaction() as tx:
            for index in range(count):
                tx.insert_task(make_task(f"bulk-{index}"))
                tx.update_task(tx.task(f"bulk-{index}"), state="ready")
                tx.update_task(tx.task(f"bulk-{index}"), state="in_progress", priority=index)
                tx.insert_attempt(minimal_attempt(f"bulk-{index}#1", f"bulk-{index}"))
                tx.update_attempt(tx.attempt(f"bulk-{index}#1"), state="admitted")
                tx.append_event(**event_fields(f"bulk-{index}", kind="dispatch"))
        for index in (0, count - 1):
            task, attempt = store.get_task(f"bulk-{index}"), store.get_attempt(f"bulk-{index}#1")
            expect_equal((task.state, task.priority, task.version), ("in_progress", index, 2), f"bulk-{index} as last changed")
            expect_equal((attempt.state, attempt.version), ("admitted", 1), f"bulk-{index}#1 as last changed")
        expect_equal(sum(1 for event in store.events() if event.kind == "dispatch"), count, "the transaction's events")
        gap = "Attempt 3 of a task inserted with only Attempt 1 in the same transaction"
        with expect_raises(StoreConflict, gap), store.transaction() as tx:
            tx.insert_task(make_task("bulk-gap"))
            tx.insert_attempt(minimal_attempt("bulk-gap#1", "bulk-gap"))
            tx.insert_attempt(minimal_attempt("bulk-gap#3", "bulk-gap", number=3))
        expect(store.get_task("bulk-gap") is None, "the task of the refused transaction is kept nowhere")


@_check
def a_duplicate_among_many_inserts_conflicts_and_writes_none_of_them(make_store: StoreFactory) -> None:
    """One id that exists, among many tasks inserted in one transaction, is a StoreConflict; none of them, no event is kept."""
    with fresh(make_store) as store:
        seed(store, make_task("many-5", objective="the first"), make_task("many-8", objective="the first"))
        before = len(store.events())
        with expect_raises(StoreConflict, "two stored task ids among twelve inserted together"), store.transaction() as tx:
            for index in range(12):
                tx.insert_task(make_task(f"many-{index}"))
                tx.insert_attempt(minimal_attempt(f"many-{index}#1", f"many-{index}"))
                tx.append_event(**event_fields(f"many-{index}", kind="create"))
        expect_equal(store.get_task("many-5").objective, "the first", "the stored task")
        expect(store.get_task("many-0") is None and store.get_task("many-11") is None, "the batch's other tasks are kept nowhere")
        expect_equal(len(store.events()), before, "events after the refused transaction")


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
