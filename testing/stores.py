"""`check_store(make_store, reopen=...)`: the transactional contract of a `Store`, one suite for every implementation.

What the suite holds a store to is what `shiftchange.core.store` promises
and every contract of the core relies on: a transaction commits whole on
success and leaves nothing on any exception (records, indexes and history
alike); writes are guarded by the version they read and refused for a
terminal Attempt; a transaction reads its own writes; transactions do not
nest; the history is numbered 1..N in commit order with no gap left by a
rolled-back transaction; reads outside transactions are copies; and every
record comes back exactly as it was written, after an insert and after an
update, field by field, type by type, awkward text included. Every method
of the protocol is called: the claim queue (`claimable`, and the reference
core's `claim_next` over it), the control plane's `tasks_in`, the leader
leases (`leader`, `put_leader`, and the runtime's `Leadership` over them),
each promised order (code-point order of ids, as Python's `sorted` gives),
and ids that differ by a prefix, by case or by Unicode normalisation, which
must never alias.

`make_store()` must return a fresh, empty store on every call; the suite
closes each store it made. The first check proves that, and when it fails the
report holds that check alone (every other check would fail for the same
reason). Error messages are not part of the contract, only the error types
(`StoreConflict`, `NotFound`, `InputError`). A store whose Transaction leaves
out the optional `tasks_in` or the leader leases (a port the runtime does not
run on) has those checks skipped, not failed.

Two handles: a store that several processes share is given a second
callable, `reopen(store)`, which opens another handle on the very data
`store` holds (another connection, as another process would). Then the
suite also checks isolation between the two (a transaction's writes are
invisible to the other handle until it commits, a rolled-back one never
visible), that a writer on one handle waits for the other's write
transaction instead of failing, and that two claimers, one per handle, side
by side, never take the same Attempt. The second handle is opened, used and
closed on a thread of its own (an SQLite connection belongs to the thread
that opened it). Without `reopen` those checks are skipped. Each wait for
the other handle is bounded (`SETTLE_S` to see that it has not failed yet,
`DONE_WAIT_S` for it to finish), so a broken store fails, never hangs.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

from shiftchange.core import (
    Attempt,
    BackoffConfig,
    Budget,
    Claim,
    CoreConfig,
    Event,
    InputError,
    Intent,
    Leader,
    LedgerProvider,
    ManualClock,
    NotFound,
    Orchestrator,
    Plan,
    ReliabilityConfig,
    Store,
    StoreConflict,
    StoreRetryable,
    Task,
    Transaction,
)
from shiftchange.core.leadership import Leadership, NotLeader
from shiftchange.core.store import WRITABLE

from .checks import Check, CheckResult, Report, Violation, collector, expect, expect_equal, expect_raises, run_checks, skip
from .rig import reference_orchestrator

__all__ = ["AWKWARD_TEXT", "SharedStore", "check_store", "shared_store_checks", "store_checks"]

StoreFactory = Callable[[], Store]
Reopen = Callable[[Store], Store]
"""Opens a second handle on the data a store holds (another connection to its file, schema or server), as another process would."""

SETTLE_S = 0.2
"""How long a check lets the other handle run before it looks whether that handle has failed (it must not have)."""
DONE_WAIT_S = 10.0
"""The most a check waits for the other handle to finish once nothing holds it up: reached only by a store that hangs."""
CLAIMERS_TASKS = 8
"""How many admitted Attempts two concurrent claimers share out."""

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
_SHARED_CHECKS: list[Check] = []
_shared_check = collector(_SHARED_CHECKS)


@dataclass(frozen=True, slots=True)
class SharedStore:
    """What the two-handle checks are functions of: the factory of fresh stores, and how to open a second handle on one."""

    make_store: StoreFactory
    reopen: Reopen


def store_checks() -> tuple[Check, ...]:
    """Every check of the store contract through one handle, in the suite's order (each is a function of `make_store`)."""
    return tuple(_CHECKS)


def shared_store_checks() -> tuple[Check, ...]:
    """The checks through two handles on one store, in the suite's order (each is a function of a `SharedStore`)."""
    return tuple(_SHARED_CHECKS)


def check_store(make_store: StoreFactory, *, reopen: Reopen | None = None) -> Report:
    """Run the whole store contract against stores from `make_store` (a fresh, empty store per call).

    `reopen(store)`, for a store several processes share, opens a second
    handle on the data `store` holds; with it the isolation checks run too,
    without it they are skipped. A factory that does not make fresh stores is
    reported by its one check alone, and a `reopen` whose handle does not share
    the store by its one check, the other two-handle checks skipped.
    """
    first = run_checks("store", _CHECKS[:1], make_store)
    if not first.ok:
        return first
    results = first.results + run_checks("store", _CHECKS[1:], make_store).results
    if reopen is None:
        why = "needs a second handle on the store: check_store(make_store, reopen=...) for a store several processes share"
        return Report("store", results + _skipped(_SHARED_CHECKS, why))
    shared = SharedStore(make_store, reopen)
    opening = run_checks("store", _SHARED_CHECKS[:1], shared)
    if not opening.ok:
        why = f"the second handle does not share the store ({_SHARED_CHECKS[0].name} failed)"
        return Report("store", results + opening.results + _skipped(_SHARED_CHECKS[1:], why))
    return Report("store", results + opening.results + run_checks("store", _SHARED_CHECKS[1:], shared).results)


def _skipped(checks: Iterable[Check], why: str) -> tuple[CheckResult, ...]:
    return tuple(CheckResult(check.name, check.goal, True, why, skipped=True) for check in checks)


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
        first, second, third = _numbered(store, [first, second, third], 1)
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
        appended = _numbered(store, appended, 1)
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


# ---- the claim queue: Transaction.claimable, and the reference core's claim_next over it


def _queued(attempt_id: str, created_at: float, state: str = "admitted", workspace: str = "repo-a") -> tuple[Task, Attempt]:
    """An Attempt waiting in `state`, the first of a task of its own in `workspace`."""
    task = replace(minimal_task(f"task-of-{attempt_id}"), workspace=workspace, state="in_progress")
    return task, replace(minimal_attempt(attempt_id, task.task_id, state=state), created_at=created_at)


def _seed_queue(store: Store, *entries: tuple[Task, Attempt]) -> None:
    seed(store, *(record for entry in entries for record in entry))


def _ids(records: Iterable[Attempt | Task]) -> list[str]:
    """The ids of Attempts or Tasks, in the order given."""
    return [record.attempt_id if isinstance(record, Attempt) else record.task_id for record in records]


_attempt_ids = _ids


@_check
def claimable_is_oldest_first_by_created_at_then_attempt_id(make_store: StoreFactory) -> None:
    """The claim queue offers the oldest Attempt first: by created_at, a tie broken by attempt id, whatever the insertion order."""
    ages = {"q-c": 5.0, "q-a": 7.5, "q-d": 1.0, "q-b": 5.0, "q-e": 3.25}
    oldest_first = ["q-d", "q-e", "q-b", "q-c", "q-a"]
    with fresh(make_store) as store:
        _seed_queue(store, *(_queued(attempt_id, at) for attempt_id, at in ages.items()))
        with store.transaction() as tx:
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10)), oldest_first, "claimable(['admitted'], 10), oldest first")
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 2)), oldest_first[:2], "claimable(['admitted'], 2): the two oldest")


@_check
def claimable_offers_only_attempts_in_the_asked_states(make_store: StoreFactory) -> None:
    """Only Attempts in an asked state are offered: a leased (claimed, running) or queued one never, unless its state is asked for."""
    with fresh(make_store) as store:
        _seed_queue(
            store,
            _queued("leased-claimed", 1.0, "claimed"),
            _queued("leased-running", 2.0, "running"),
            _queued("waiting", 0.5, "queued"),
            _queued("admitted-1", 4.0),
            _queued("suspect", 3.0, "suspect"),
            _queued("admitted-2", 6.0),
        )
        with store.transaction() as tx:
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10)), ["admitted-1", "admitted-2"], "claimable(['admitted'], 10)")
            both = _attempt_ids(tx.claimable(("admitted", "queued"), 10))
            expect_equal(both, ["waiting", "admitted-1", "admitted-2"], "claimable(('admitted', 'queued'), 10)")
            expect_equal(tx.claimable([], 10), [], "claimable of no state")
            tx.update_attempt(tx.attempt("admitted-1"), state="claimed", worker_id="worker-1")
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10)), ["admitted-2"], "claimable(['admitted']) after a claim, same tx")
        with store.transaction() as tx:
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10)), ["admitted-2"], "claimable(['admitted']) after a committed claim")


@_check
def claimable_honours_the_workspace_filter(make_store: StoreFactory) -> None:
    """With a workspace, only Attempts of that workspace's tasks are offered, oldest first; without one, every workspace's."""
    workspaces = {"a-1": "repo-a", "b-1": "repo-b", "a2-1": "repo-a2", "A-1": "Repo-a", "a-2": "repo-a", "b-2": "repo-b"}
    with fresh(make_store) as store:
        _seed_queue(store, *(_queued(attempt_id, float(n), workspace=w) for n, (attempt_id, w) in enumerate(workspaces.items())))
        with store.transaction() as tx:
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10, "repo-a")), ["a-1", "a-2"], "claimable in workspace 'repo-a'")
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10, "repo-b")), ["b-1", "b-2"], "claimable in workspace 'repo-b'")
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 1, "repo-b")), ["b-1"], "claimable(limit 1) in workspace 'repo-b'")
            expect_equal(tx.claimable(["admitted"], 10, "repo-c"), [], "claimable in a workspace with no task")
            expect_equal(_attempt_ids(tx.claimable(["admitted"], 10)), list(workspaces), "claimable in every workspace (no filter)")


@_check
def claimable_honours_its_limit(make_store: StoreFactory) -> None:
    """At most `limit` Attempts are offered, the oldest; limit 0 offers none; a negative, fractional or boolean limit is an InputError."""
    with fresh(make_store) as store:
        _seed_queue(store, *(_queued(f"q-{n}", float(n)) for n in range(5)))
        with store.transaction() as tx:
            for limit in (0, 1, 3, 5, 50):
                expect_equal(len(tx.claimable(["admitted"], limit)), min(limit, 5), f"how many claimable(['admitted'], {limit}) offers")
        for limit in (-1, 1.5, True):
            with expect_raises(InputError, f"claimable with limit {limit!r}"), store.transaction() as tx:
                tx.claimable(["admitted"], limit)  # type: ignore[arg-type]


@_check
def claim_candidate_is_the_oldest_claimable_with_its_task_and_the_tasks_attempts(make_store: StoreFactory) -> None:
    """claim_candidate gives what claimable(limit 1), task and attempts_of give, workspace filter included; None when none is claimable."""
    with fresh(make_store) as store:
        seed(store, minimal_task("t-many"), minimal_attempt("t-many#1", "t-many", 1, "failed"))
        seed(store, replace(minimal_attempt("t-many#2", "t-many", 2, "admitted"), created_at=9.0))
        _seed_queue(store, _queued("q-old", 4.0, workspace="repo-b"), _queued("q-new", 12.0, workspace="repo-a"))
        with store.transaction() as tx:
            expect_equal(tx.claim_candidate(["running"]), None, "claim_candidate of a state nothing is in")
            attempt, task, attempts = tx.claim_candidate(["admitted"])
            expect_equal(
                (attempt.attempt_id, task.task_id, _ids(attempts)), ("q-old", "task-of-q-old", ["q-old"]), "the oldest's candidate"
            )
            attempt, task, attempts = tx.claim_candidate(["admitted"], "repo-a")
            expect_equal((attempt.attempt_id, task.workspace), ("q-new", "repo-a"), "the oldest candidate of workspace repo-a")
            attempt, task, attempts = tx.claim_candidate(("admitted",), "w")
            expect_equal((attempt.attempt_id, task.task_id), ("t-many#2", "t-many"), "a candidate whose task has two Attempts")
            expect_equal(_ids(attempts), ["t-many#1", "t-many#2"], "the task's Attempts, by number")
            expect_equal(attempts[-1], attempt, "the candidate among its task's Attempts")
            expect_equal(tx.claim_candidate(["admitted"], "repo-none"), None, "claim_candidate in a workspace with nothing claimable")


def _orchestrator(store: Store, clock: ManualClock) -> Orchestrator:
    """The reference core over `store`, as a worker process of the runtime builds it (no backoff between claims)."""
    reliability = ReliabilityConfig(backoff=BackoffConfig(strategy="none"))
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(), reliability)


def _admitted(orchestrator: Orchestrator, clock: ManualClock, task_id: str, workspace: str) -> str:
    """A task created, accepted, dispatched and its Attempt 1 admitted, a second after the previous one; the Attempt's id."""
    clock.advance(1.0)
    orchestrator.create_task(task_id, "make the flaky test pass", workspace, scope="tests/")
    expect(orchestrator.accept_task(task_id).accepted, f"accept_task({task_id!r}) of a task in the inbox was refused")
    dispatched = orchestrator.dispatch(task_id, Plan("the fixture leaks a port"))
    expect(dispatched.accepted, f"the first dispatch of {task_id} was refused: {dispatched}")
    attempt_id = _only_attempt_id(orchestrator.store, task_id)
    admitted = orchestrator.admit(attempt_id)
    expect(getattr(admitted, "state", None) == "admitted", f"admit({attempt_id!r}) of a queued Attempt did not admit it: {admitted}")
    return attempt_id


def _only_attempt_id(store: Store, task_id: str) -> str:
    attempts = store.get_attempts(task_id)
    expect(len(attempts) == 1, f"a dispatched task {task_id} has one Attempt, not {len(attempts)}")
    return attempts[0].attempt_id


@contextmanager
def _reference(make_store: StoreFactory) -> Iterator[tuple[Orchestrator, ManualClock]]:
    """The reference core over a fresh store from the factory (`rig.reference_orchestrator`), and its clock."""
    clock = ManualClock()
    reliability = ReliabilityConfig(backoff=BackoffConfig(strategy="none"))
    orchestrator = reference_orchestrator(make_store)(
        clock=clock, provider=LedgerProvider(clock=clock), config=CoreConfig(), reliability=reliability
    )
    try:
        yield orchestrator, clock
    finally:
        orchestrator.store.close()


def _claimed_id(result: object, what: str) -> str:
    expect(isinstance(result, Claim), f"{what}: expected a Claim, got {result!r}")
    return result.lease.attempt_id  # type: ignore[union-attr]


@_check
def claim_next_takes_the_oldest_admitted_attempt_of_its_workspace(make_store: StoreFactory) -> None:
    """Through the reference core, claim_next takes the oldest admitted Attempt of the claimer's workspace; None when none is left."""
    with _reference(make_store) as (orchestrator, clock):
        made = {task_id: _admitted(orchestrator, clock, task_id, w) for task_id, w in (("task-z", "repo-a"), ("task-y", "repo-b"))}
        made |= {task_id: _admitted(orchestrator, clock, task_id, w) for task_id, w in (("task-x", "repo-a"), ("task-w", "repo-b"))}
        for worker, workspace, task_id in (("b-1", "repo-b", "task-y"), ("a-1", "repo-a", "task-z"), ("a-2", "repo-a", "task-x")):
            what = f"claim_next({worker!r}, {workspace!r}), whose oldest admitted Attempt is {made[task_id]}"
            expect_equal(_claimed_id(orchestrator.claim_next(worker, workspace, True), what), made[task_id], what)
        expect_equal(orchestrator.claim_next("c-1", "repo-c", True), None, "claim_next in a workspace with no task")
        expect_equal(orchestrator.claim_next("a-3", "repo-a", True), None, "claim_next in a workspace whose Attempts are all claimed")
        what = "claim_next('b-2', 'repo-b'), the last admitted Attempt"
        expect_equal(_claimed_id(orchestrator.claim_next("b-2", "repo-b", True), what), made["task-w"], what)


@_check
def claim_next_never_hands_one_attempt_to_two_claimers(make_store: StoreFactory) -> None:
    """Claimers one after another each get a different Attempt until none is left, and every admitted Attempt is claimed once."""
    with _reference(make_store) as (orchestrator, clock):
        admitted = [_admitted(orchestrator, clock, f"task-{n}", "repo-a") for n in range(4)]
        claimed = []
        for n in range(len(admitted) + 1):
            result = orchestrator.claim_next(f"worker-{n}", "repo-a", True)
            if result is None:
                break
            claimed.append(_claimed_id(result, f"claim {n + 1} of {len(admitted)} admitted Attempts, by worker-{n}"))
        expect_equal(claimed, admitted, "the Attempts successive claimers took (each once, oldest first)")
        for n, attempt_id in enumerate(admitted):
            stored = _stored_attempt(orchestrator.store, attempt_id)
            expect_equal((stored.state, stored.worker_id), ("claimed", f"worker-{n}"), f"{attempt_id} after its claim")


def _stored_attempt(store: Store, attempt_id: str) -> Attempt:
    found = store.get_attempt(attempt_id)
    expect(found is not None, f"the store has no Attempt {attempt_id}")
    return found  # type: ignore[return-value]


# ---- what the runtime's control plane needs besides the contracts: tasks_in and the leader leases


def _implements(tx: Transaction, name: str) -> bool:
    """Whether the store's Transaction has its own `name`, not the protocol's default that says it has none."""
    return getattr(type(tx), name) is not getattr(Transaction, name)


def _require(tx: Transaction, *names: str) -> None:
    """Skip the check when the store's Transaction leaves out these optional methods (the protocol allows it)."""
    missing = [name for name in names if not _implements(tx, name)]
    if missing:
        skip(
            f"the store's Transaction leaves out {', '.join(missing)}: optional in the protocol, but the runtime's control plane"
            " needs it, so only a store the runtime never runs on may leave it out"
        )


@_check
def tasks_in_answers_from_current_state_in_task_id_order(make_store: StoreFactory) -> None:
    """tasks_in lists the Tasks now in an asked state, by task id, following every update (in the transaction and after) and a rollback."""
    states = {"t-c": "inbox", "t-a": "ready", "t-d": "in_progress", "t-b": "in_progress"}
    with fresh(make_store) as store:
        seed(store, *(replace(minimal_task(task_id), state=state) for task_id, state in states.items()))
        with store.transaction() as tx:
            _require(tx, "tasks_in")
            expect_equal(_ids(tx.tasks_in(["in_progress"])), ["t-b", "t-d"], "tasks_in(['in_progress'])")
            expect_equal(_ids(tx.tasks_in(("ready", "in_progress"))), ["t-a", "t-b", "t-d"], "tasks_in(('ready', 'in_progress'))")
            expect_equal(tx.tasks_in([]), [], "tasks_in of no state")
            tx.update_task(tx.task("t-a"), state="in_progress")
            tx.update_task(tx.task("t-b"), state="review")
            expect_equal(_ids(tx.tasks_in(["in_progress"])), ["t-a", "t-d"], "tasks_in(['in_progress']) after updates, same tx")
        with store.transaction() as tx:
            found = tx.tasks_in(["in_progress", "review"])
            expect_equal(
                [(t.task_id, t.state, t.version) for t in found],
                [("t-a", "in_progress", 1), ("t-b", "review", 1), ("t-d", "in_progress", 0)],
                "tasks_in(['in_progress', 'review']) after a commit: ids, states, versions",
            )
        with expect_raises(RuntimeError, "the transaction's own error"), store.transaction() as tx:
            tx.update_task(tx.task("t-d"), state="done")
            raise RuntimeError("abandon")
        with store.transaction() as tx:
            expect_equal(_ids(tx.tasks_in(["in_progress"])), ["t-a", "t-d"], "tasks_in(['in_progress']) after a rolled-back update")
            expect_equal(tx.tasks_in(["done"]), [], "tasks_in(['done']) after a rolled-back update")


@_check
def leader_lease_round_trips_and_put_leader_overwrites(make_store: StoreFactory) -> None:
    """put_leader writes the named lease exactly and a later put overwrites it; names never alias; a rolled-back put leaves the last one."""
    first, second = Leader("admission", "orchestrator-1", 1, 12.75), Leader("admission", "orchestrator-2", 2**40, 1e9 + 0.125)
    with fresh(make_store) as store:
        with store.transaction() as tx:
            _require(tx, "leader", "put_leader")
            expect_equal(tx.leader("admission"), None, "the leader lease nobody ever took")
            tx.put_leader(*_fields_of(first))
            expect_equal(tx.leader("admission"), first, "the leader lease after put_leader, same tx")
        for written in (first, second, replace(second, expires_at=2e9 + 0.5)):
            with store.transaction() as tx:
                tx.put_leader(*_fields_of(written))
            with store.transaction() as tx:
                read = tx.leader("admission")
                expect_equal(read, written, "the leader lease after a put over an existing one")
                kinds = (type(read.generation), type(read.expires_at), type(read.holder))  # type: ignore[union-attr]
                expect_equal(kinds, (int, float, str), "the types of a leader lease's generation, expiry and holder")
        last = replace(second, expires_at=2e9 + 0.5)
        with store.transaction() as tx:
            tx.put_leader("admission-2", "orchestrator-3", 7, 5.5)
            for alias in ("admission-", "Admission", "ADMISSION"):
                expect_equal(tx.leader(alias), None, f"the leader lease named {alias!r}, which nobody took")
        with expect_raises(RuntimeError, "the transaction's own error"), store.transaction() as tx:
            tx.put_leader("admission", "orchestrator-4", 99, 99.0)
            raise RuntimeError("abandon")
        with store.transaction() as tx:
            expect_equal(tx.leader("admission"), last, "the leader lease after a rolled-back put")
            expect_equal(tx.leader("admission-2"), Leader("admission-2", "orchestrator-3", 7, 5.5), "another name's lease")


def _fields_of(leader: Leader) -> tuple[str, str, int, float]:
    return leader.name, leader.holder, leader.generation, leader.expires_at


@_check
def a_held_leader_lease_cannot_be_taken_until_it_expires(make_store: StoreFactory) -> None:
    """Through the runtime's Leadership: a held lease is refused to another holder, renewed by its holder, and taken once expired."""
    clock = ManualClock(100.25)
    with fresh(make_store) as store:
        with store.transaction() as tx:
            _require(tx, "leader", "put_leader")
        holder = Leadership(store, "admission", "orchestrator-a", 2.5, clock)
        rival = Leadership(store, "admission", "orchestrator-b", 2.5, clock)
        expect(holder.hold(), "orchestrator-a could not take a leader lease nobody held")
        clock.set(102.25)
        expect(not rival.hold(), "orchestrator-b took the lease orchestrator-a holds until 102.75, at 102.25")
        expect(holder.hold(), "orchestrator-a could not renew the lease it holds, at 102.25")
        clock.set(104.5)
        expect(not rival.hold(), "orchestrator-b took the lease orchestrator-a renewed until 104.75, at 104.5")
        with store.transaction() as tx:
            holder.check(tx)
        expect_equal(holder.generation, 1, "the generation of a lease its holder renewed")
        clock.set(104.75)
        expect(rival.hold(), "orchestrator-b could not take the lease that expired at 104.75, at 104.75")
        expect_equal(rival.generation, 2, "the generation of a lease taken over")
        expect(not holder.hold(), "orchestrator-a took back the lease orchestrator-b has just taken")
        with expect_raises(NotLeader, "the old holder's check once its lease was taken"), store.transaction() as tx:
            holder.check(tx)


# ---- every field the core writes by update comes back, not only those an insert wrote


def _away_from_defaults() -> dict[type, dict[str, Any]]:
    """For each record type, a value for every field `store.WRITABLE` lets an update write, none of them the seeded record's."""
    task, attempt, intent = make_task(), make_attempt(previous_attempt_id="attempt-1"), make_intent(attempt_id="attempt-2")
    return {
        kind: {name: getattr(record, name) for name in WRITABLE[kind]}
        for kind, record in ((Task, task), (Attempt, attempt), (Intent, intent))
    }


def _update_seeds() -> tuple[Task, Attempt, Attempt, Intent]:
    """The records the update check seeds: defaults everywhere (an intent of Attempt 1, Attempt 2 to hand it to)."""
    minimal_intent = Intent("k-1", "task-1", "attempt-1", "push", "sha", "", 1.0)
    return minimal_task("task-1"), minimal_attempt("attempt-1"), minimal_attempt("attempt-2", number=2), minimal_intent


@_check
def every_writable_field_round_trips_after_an_update(make_store: StoreFactory) -> None:
    """Every field the core writes by update (store.WRITABLE) comes back after an update, exactly, away from its default, its type kept."""
    values = _away_from_defaults()
    targets = ((Task, "task", "task-1"), (Attempt, "attempt", "attempt-2"), (Intent, "intent", "k-1"))
    with fresh(make_store) as store:
        seed(store, *_update_seeds())
        with store.transaction() as tx:
            for kind, name, identity in targets:
                getattr(tx, "update_" + name)(getattr(tx, name)(identity), **values[kind])
                _same_fields(getattr(tx, name)(identity), values[kind], f"the {name} read in the updating transaction")
        readers = {"task": store.get_task, "attempt": store.get_attempt, "intent": store.get_intent}
        for kind, name, identity in targets:
            _same_fields(readers[name](identity), values[kind], f"the {name} after an update of every writable field")


def _same_fields(record: object, values: dict[str, Any], what: str) -> None:
    expect(record is not None, f"{what}: the store has no record of it")
    for name, wanted in sorted(values.items()):
        got = getattr(record, name)
        expect_equal(got, wanted, f"{what}: field {name}")
        expect_equal(type(got), type(wanted), f"{what}: type of field {name}")


# ---- ids: no two alias, and every promised order is code-point order

ALIASING_IDS = ("task-1", "task-10", "task-1 ", "task", "Task-1", "TASK-1", "caf\u00e9", "cafe\u0301", "CAF\u00c9")
"""Ids a store must keep apart: prefixes of one another, case variants, and café in NFC and NFD (equal once normalised)."""
assert unicodedata.normalize("NFC", ALIASING_IDS[7]) == ALIASING_IDS[6], "the NFD café must normalise to the NFC one"

ORDERED_IDS = (
    "a", "B", "b", "\x00", "a\x00", "a\x00b", "a\x01", "\x01", "\ufdd0", "\ufdd0x", "\uffff", "\U0001f600",
    "caf\u00e9", "cafe\u0301", "\u00e9", "Z", " ", "~", "a\U0010ffff", "a\ufffd",
)  # fmt: skip
"""Ids in no particular order; a store lists them as Python's `sorted` does (NUL, U+0001, U+FDD0, U+FFFF, astral characters)."""


@_check
def ids_that_differ_by_a_prefix_case_or_normalisation_never_alias(make_store: StoreFactory) -> None:
    """Ids that are prefixes of one another, differ by case, or by Unicode normalisation name different records in every read."""
    with fresh(make_store) as store:
        for n, task_id in enumerate(ALIASING_IDS):
            task = replace(minimal_task(task_id), objective=f"objective {n}", workspace=task_id)
            attempt = replace(minimal_attempt("a:" + task_id, task_id, state="admitted"), created_at=float(n))
            seed(store, task, attempt, Intent("k:" + task_id, task_id, "a:" + task_id, "push", str(n), "", 1.0))
            with store.transaction() as tx:
                tx.append_event(**event_fields(task_id, attempt_id="a:" + task_id, detail=str(n)))
        for n, task_id in enumerate(ALIASING_IDS):
            what = f"id {task_id!r}"
            expect_equal(getattr(store.get_task(task_id), "objective", None), f"objective {n}", f"get_task of {what}: its objective")
            expect_equal(
                getattr(store.get_attempt("a:" + task_id), "task_id", None), task_id, f"get_attempt of {'a:' + task_id!r}: its task"
            )
            expect_equal(_ids(store.get_attempts(task_id)), ["a:" + task_id], f"attempts_of {what}")
            expect_equal([i.key for i in store.get_intents("a:" + task_id)], ["k:" + task_id], f"intents_of {'a:' + task_id!r}")
            expect_equal(getattr(store.get_intent("k:" + task_id), "identity", None), str(n), f"get_intent of {'k:' + task_id!r}")
            expect_equal([e.detail for e in store.events(task_id=task_id)], [str(n)], f"events(task_id={task_id!r})")
            with store.transaction() as tx:
                expect_equal(_ids(tx.claimable(["admitted"], 50, task_id)), ["a:" + task_id], f"claimable in workspace {task_id!r}")


@_check
def every_promised_order_is_code_point_order(make_store: StoreFactory) -> None:
    """attempts_in, tasks_in, intents_of and claimable's ties go by code point, as Python's sorted (NUL, U+FDD0); attempts_of by number."""
    ordered = sorted(ORDERED_IDS)
    with fresh(make_store) as store:
        seed(store, *(replace(minimal_task(task_id), state="ready") for task_id in ORDERED_IDS))
        seed(store, *(replace(minimal_attempt(task_id, task_id, state="admitted"), created_at=5.0) for task_id in ORDERED_IDS))
        seed(store, *(Intent(task_id, ORDERED_IDS[0], ORDERED_IDS[0], "push", "sha", "", 1.0) for task_id in ORDERED_IDS))
        seed(store, minimal_task("numbered"), *(minimal_attempt(f"n-{13 - n:02d}", "numbered", n) for n in range(1, 13)))
        with store.transaction() as tx:
            expect_equal(_ids(tx.attempts_in(["admitted"])), ordered, "attempts_in(['admitted']), by attempt id")
            expect_equal(_ids(tx.claimable(["admitted"], 50)), ordered, "claimable(['admitted']) with created_at tied, by attempt id")
            expect_equal([i.key for i in tx.intents_of(ORDERED_IDS[0])], ordered, "intents_of, by key")
            expect_equal([a.number for a in tx.attempts_of("numbered")], list(range(1, 13)), "attempts_of, by number (1..12)")
            if _implements(tx, "tasks_in"):
                expect_equal(_ids(tx.tasks_in(["ready"])), ordered, "tasks_in(['ready']), by task id")


# ---- two handles on one store (with `reopen`): isolation, a waiting writer, concurrent claimers


class _OtherHandle:
    """A second handle on a store, opened, used and closed on a thread of its own, as another process would use it.

    An SQLite connection belongs to the thread that opened it, so every call
    on this handle runs on the one thread that opened it. `submit` hands it a
    function of the handle and returns at once with a Future.
    """

    def __init__(self, store: Store, reopen: Reopen) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="check-store-second-handle")
        try:
            self.handle: Store = self._thread.submit(reopen, store).result(timeout=DONE_WAIT_S)
        except BaseException:
            self._thread.shutdown(wait=False)
            raise

    def submit(self, function: Callable[[Store], Any]) -> Future:
        return self._thread.submit(function, self.handle)

    def run(self, function: Callable[[Store], Any], what: str) -> Any:
        """Run `function` on the other handle and wait for its answer (at most DONE_WAIT_S)."""
        return _result(self.submit(function), what)

    def close(self) -> None:
        try:
            self._thread.submit(self.handle.close).result(timeout=DONE_WAIT_S)
        finally:
            self._thread.shutdown(wait=False)


def _result(pending: Future, what: str) -> Any:
    """The other handle's answer, waited for at most DONE_WAIT_S; its exception is a Violation naming `what`."""
    try:
        return pending.result(timeout=DONE_WAIT_S)
    except FutureTimeout:
        raise Violation(f"{what}: the other handle did not finish within {DONE_WAIT_S:g} s once nothing held it up") from None
    except Exception as error:
        raise Violation(f"{what}: the other handle raised {type(error).__name__}: {error}") from error


@contextmanager
def _two_handles(shared: SharedStore) -> Iterator[tuple[Store, _OtherHandle]]:
    """A fresh store from the factory and a second handle on it; both closed when the block ends."""
    with fresh(shared.make_store) as store:
        other = _OtherHandle(store, shared.reopen)
        try:
            yield store, other
        finally:
            other.close()


def _settled(pending: Future) -> bool:
    """Whether the other handle's call has finished after SETTLE_S (a call that is waiting for a lock has not)."""
    try:
        pending.exception(timeout=SETTLE_S)
    except FutureTimeout:
        return False
    return True


@_shared_check
def second_handle_shares_the_first_handles_store(shared: SharedStore) -> None:
    """reopen(store) is another handle on the same data: each handle sees what the other committed."""
    with _two_handles(shared) as (store, other):
        expect(
            other.handle is not store,
            "reopen(store) returned the same object: it must open a second handle (a new connection) on the data store holds",
        )
        seed(store, make_task("written-by-the-first"))
        seen = other.run(lambda handle: handle.get_task("written-by-the-first"), "the second handle's get_task")
        expect(seen is not None, "a task the first handle committed is not visible to the second: reopen(store) must open the same store")
        other.run(lambda handle: seed(handle, make_task("written-by-the-second")), "a write through the second handle")
        expect(store.get_task("written-by-the-second") is not None, "a task the second handle committed is not visible to the first")


def _reads(task_id: str) -> Callable[[Store], tuple[list[Event], Task | None]]:
    def read(handle: Store) -> tuple[list[Event], Task | None]:
        return handle.events(task_id=task_id), handle.get_task(task_id)

    return read


@_shared_check
def uncommitted_writes_are_invisible_to_the_other_handle(make: SharedStore) -> None:
    """A transaction's writes (records and history) are invisible to the other handle until it commits; a rolled-back one's, ever."""
    with _two_handles(make) as (store, other):
        with store.transaction() as tx:
            tx.insert_task(make_task("pending"))
            tx.append_event(**event_fields("pending"))
            early = other.submit(_reads("pending"))
            if _settled(early):
                events, task = _result(early, "the other handle's read during an open transaction")
                expect(task is None, "the other handle read a task inserted by a transaction not yet committed")
                expect_equal(events, [], "the history the other handle read while a transaction that appended was open")
        events, task = other.run(_reads("pending"), "the other handle's read after the commit")
        expect(
            task is not None and len(events) == 1,
            f"the other handle after the commit: expected the task and 1 event, got {task!r}, {events!r}",
        )
        with expect_raises(RuntimeError, "the transaction's own error"), store.transaction() as tx:
            tx.insert_task(make_task("abandoned"))
            tx.append_event(**event_fields("abandoned"))
            during = other.submit(_reads("abandoned"))
            _settled(during)
            raise RuntimeError("abandon")
        for pending, when in ((during, "while it was open"), (other.submit(_reads("abandoned")), "after it rolled back")):
            events, task = _result(pending, f"the other handle's read of a rolled-back transaction {when}")
            expect(task is None and events == [], f"the other handle saw the writes of a rolled-back transaction {when}")


def _append_one(task_id: str) -> Callable[[Store], None]:
    def append(handle: Store) -> None:
        with handle.transaction() as tx:
            tx.append_event(**event_fields(task_id))

    return append


def _numbers(handle: Store) -> list[tuple[int, str]]:
    return [(event.seq, event.task_id) for event in handle.events()]


@_shared_check
def no_reader_ever_sees_a_gap_in_the_history_filled_later(make: SharedStore) -> None:
    """While one transaction that appended is open, another commits: a reader then, and after, sees 1..N with nothing put before it.

    A store may make the second append wait for the first transaction (a
    lock on the numbering) or number after commit; either way, what a reader
    saw while the first was open is a prefix of the final history, numbered
    1..k, and the final history is 1..N. A store that numbers in append
    order without either (a sequence) fails: the reader sees the second
    event as number 2 with no 1, and the final history puts the first event
    before it.
    """
    with _two_handles(make) as (store, other):
        reader = _OtherHandle(store, make.reopen)
        try:
            seen: list[tuple[int, str]] = []
            with store.transaction() as tx:
                tx.append_event(**event_fields("slow"))
                fast = other.submit(_append_one("fast"))
                _settled(fast)
                during = reader.submit(_numbers)
                if _settled(during):
                    seen = _result(during, "a reader's history while a transaction that appended was open")
            _result(fast, "the other handle's append, once the first transaction committed")
            final = reader.run(_numbers, "a reader's history after both committed")
            expect_equal([seq for seq, _ in seen], list(range(1, len(seen) + 1)), "the numbers a reader saw while one transaction was open")
            expect("slow" not in {task_id for _, task_id in seen}, f"a reader saw an event of a transaction not yet committed: {seen}")
            expect_equal(sorted(task_id for _, task_id in final), ["fast", "slow"], "the tasks of the final history")
            expect_equal([seq for seq, _ in final], [1, 2], "the numbers of the final history")
            expect(
                final[: len(seen)] == seen,
                f"a reader saw {seen} while a transaction was open, then the history {final}: an event was put before one already read",
            )
        finally:
            reader.close()


def _add_tokens(task_id: str, tokens: int, retries_max: int = 8) -> Callable[[Store], int]:
    """A contract's shape: read the task, write from what was read; run again on StoreRetryable, as the core's contracts do."""

    def write(handle: Store) -> int:
        for _ in range(retries_max):
            try:
                with handle.transaction() as tx:
                    task = tx.task(task_id)
                    tx.update_task(task, tokens=task.tokens + tokens)
                    return task.tokens
            except StoreRetryable:
                continue
        raise StoreRetryable(f"lost the race {retries_max} times")

    return write


@_shared_check
def a_writer_waits_for_the_other_handles_write_transaction(make: SharedStore) -> None:
    """While one handle holds a write transaction, a writer on the other waits (never fails), then writes on top of the commit."""
    with _two_handles(make) as (store, other):
        seed(store, minimal_task("counted"))
        with store.transaction() as tx:
            tx.update_task(tx.task("counted"), tokens=1)
            waiting = other.submit(_add_tokens("counted", 10))
            if _settled(waiting):
                error = waiting.exception()
                expect(
                    error is None,
                    "a writer on the other handle failed instead of waiting for this handle's write transaction:"
                    f" {type(error).__name__}: {error}",
                )
        _result(waiting, "the waiting writer, once the first transaction committed")
        final = store.get_task("counted")
        expect_equal((final.tokens, final.version), (11, 2), "the task's (tokens, version) after both writes: neither may be lost")


@_shared_check
def concurrent_claimers_on_two_handles_never_share_an_attempt(make: SharedStore) -> None:
    """Two claimers side by side, each on its own handle through the reference core, take every admitted Attempt once between them."""
    clock = ManualClock()
    with _two_handles(make) as (store, other):
        orchestrator = _orchestrator(store, clock)
        admitted = [_admitted(orchestrator, clock, f"task-{n}", "repo-a") for n in range(CLAIMERS_TASKS)]
        start = threading.Barrier(2, timeout=DONE_WAIT_S)
        there = other.submit(lambda handle: _claim_all(_orchestrator(handle, clock), "worker-there", start))
        here = _claim_all(orchestrator, "worker-here", start)
        both = here + _result(there, "the claimer on the other handle")
        expect_equal(sorted(both), sorted(admitted), "the Attempts two concurrent claimers took between them (each exactly once)")
        for attempt_id in admitted:
            expect_equal(_stored_attempt(store, attempt_id).state, "claimed", f"{attempt_id} after the claimers ran out of work")


def _claim_all(orchestrator: Orchestrator, worker_id: str, start: threading.Barrier) -> list[str]:
    """Claim until nothing is left; the ids claimed. A refusal or an error ends the check: a claimer must get a Claim or None."""
    start.wait()
    claimed: list[str] = []
    for _ in range(CLAIMERS_TASKS + 1):
        result = orchestrator.claim_next(worker_id, "repo-a", True)
        if result is None:
            return claimed
        claimed.append(_claimed_id(result, f"claim_next by {worker_id} after it took {claimed}"))
    raise Violation(f"{worker_id} claimed more Attempts than were admitted: {claimed}")
