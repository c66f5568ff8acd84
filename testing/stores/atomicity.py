"""The store suite: atomicity under interruption, and for transactions of hundreds of writes.

An exception is not the only way out of a transaction: Ctrl-C, a task
group's cancellation, `SystemExit` or a generator closed mid-way leave it with
a `BaseException`, which a port that rolls back in `except Exception:` lets
through to a commit (or leaves the connection inside the transaction). So the
kit interrupts a transaction with a `BaseException` before each of its writes
in turn (and after the last), and one contract of the reference core at each
of its writes, and each time the store must hold exactly what it held
before, and take the next transaction. And a backend whose transactions are
capped (25 or 100 items) tempts a port into committing in batches: a
transaction of `ATOMIC_WRITES` writes must commit whole or leave nothing.
A process killed in the middle of a transaction is a two-handle check (it
needs a second handle, opened in the child).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from shiftchange.core import (
    BackoffConfig,
    CoreConfig,
    LedgerProvider,
    ManualClock,
    Orchestrator,
    Plan,
    ReliabilityConfig,
    Store,
)

from ..checks import Check, Violation, collector, expect, expect_equal
from .builders import event_fields, fresh, make_attempt, make_intent, make_task, minimal_attempt, minimal_task, seed
from .history import _implements
from .registry import ATOMIC_WRITES, StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

CONTRACT_WRITES_MAX = 40
"""More writes than any one contract of the reference core makes."""
WRITES = frozenset(
    {"insert_task", "insert_attempt", "insert_intent", "update_task", "update_attempt", "update_intent", "append_event", "put_leader"}
)


class KitInterrupt(BaseException):
    """What the kit interrupts a transaction with: a BaseException, as Ctrl-C, SystemExit or a cancellation is."""


class _Interrupting:
    """A transaction whose `at`-th write (counting from 0) raises KitInterrupt instead of reaching the store."""

    def __init__(self, tx: Any, at: int | None, count: list[int]) -> None:
        self._tx, self._at, self._count = tx, at, count

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._tx, name)
        if name not in WRITES:
            return attribute

        def write(*args: Any, **kwargs: Any) -> Any:
            if self._count[0] == self._at:
                raise KitInterrupt(f"interrupted at write {self._at}")
            self._count[0] += 1
            return attribute(*args, **kwargs)

        return write


class _InterruptingStore:
    """The store under test, each transaction's `at`-th write interrupted: what the reference core is given."""

    def __init__(self, store: Store, at: int | None) -> None:
        self._store, self.at, self.count = store, at, [0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._store.transaction() as tx:
            yield _Interrupting(tx, self.at, self.count)


def _snapshot(store: Store, task_ids: tuple[str, ...], keys: tuple[str, ...], leader: bool) -> tuple:
    attempts = [store.get_attempts(task_id) for task_id in task_ids]
    intents = [store.get_intent(key) for key in keys]
    with store.transaction() as tx:
        leases = tx.leader("interrupted") if leader else None
    return store.events(), [store.get_task(task_id) for task_id in task_ids], attempts, intents, leases


def _every_write(tx: Any, leader: bool) -> None:
    """One transaction that calls every write of the protocol, inserts and updates alike."""
    tx.insert_task(make_task("new", state="ready"))
    tx.insert_attempt(make_attempt("new#1", "new", state="queued"))
    tx.insert_intent(make_intent("new-key", "new#1", task_id="new"))
    tx.update_task(tx.task("base"), tokens=77)
    tx.update_attempt(tx.attempt("base#1"), state="suspect", checkpoint="interrupted")
    tx.update_intent(tx.intent("base-key"), receipt="pr-9")
    tx.append_event(**event_fields("base", attempt_id="base#1"))
    if leader:
        tx.put_leader("interrupted", "orchestrator-1", 2, 99.5)
    tx.append_event(**event_fields("new", attempt_id="new#1"))
    tx.update_task(tx.task("new"), state="running")


def _must_take_the_next_transaction(store: Store, what: str) -> None:
    try:
        with store.transaction() as tx:
            tx.task("base")
    except Exception as error:
        raise Violation(f"{what}: the next transaction failed, {type(error).__name__}: {error}") from error


@_check
def an_interrupt_at_any_write_leaves_nothing_behind(make_store: StoreFactory) -> None:
    """A BaseException before any write of a transaction, or after its last, leaves the store as it was and ready for the next."""
    with fresh(make_store) as store:
        seed(
            store,
            minimal_task("base"),
            minimal_attempt("base#1", "base", state="running"),
            make_intent("base-key", "base#1", task_id="base"),
        )
        with store.transaction() as tx:
            leader = _implements(tx, "put_leader")
        ids, keys = ("base", "new"), ("base-key", "new-key")
        before = _snapshot(store, ids, keys, leader)
        total = 10 if leader else 9
        for at in range(total + 1):
            interrupting = _InterruptingStore(store, at)
            try:
                with interrupting.transaction() as tx:
                    _every_write(tx, leader)
                    raise KitInterrupt(f"interrupted after the last write ({total})")
            except KitInterrupt:
                pass
            what = f"a transaction interrupted by a BaseException before write {at + 1} of {total}" if at < total else (
                f"a transaction interrupted by a BaseException after its last write ({total})"
            )  # fmt: skip
            expect_equal(_snapshot(store, ids, keys, leader), before, f"what the store holds after {what}")
            _must_take_the_next_transaction(store, what)
        with store.transaction() as tx:
            _every_write(tx, leader)
        expect_equal(store.get_task("new").state, "running", "the task the same transaction wrote, once it was let commit")


def _world(store: Any) -> tuple[Orchestrator, ManualClock]:
    clock = ManualClock(100.0)
    reliability = ReliabilityConfig(backoff=BackoffConfig(strategy="none"))
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(), reliability), clock


@_check
def a_contract_interrupted_at_any_write_leaves_nothing_behind(make_store: StoreFactory) -> None:
    """The reference core's dispatch, admit and claim, each interrupted by a BaseException at each of its writes, leave nothing behind."""
    steps: list[tuple[str, Callable[[Orchestrator], Any]]] = [
        ("dispatch", lambda orchestrator: orchestrator.dispatch("task-1", Plan("the fixture leaks a port"))),
        ("admit", lambda orchestrator: orchestrator.admit("task-1#1")),
        ("claim_next", lambda orchestrator: orchestrator.claim_next("worker-a", "repo-a", True)),
    ]
    with fresh(make_store) as store:
        orchestrator, _clock = _world(store)
        orchestrator.create_task("task-1", "make the flaky test pass", "repo-a", scope="tests/")
        expect(orchestrator.accept_task("task-1").accepted, "accept_task of a task in the inbox was refused")
        for name, call in steps:
            before = _snapshot(store, ("task-1",), (), False)
            for at in range(CONTRACT_WRITES_MAX + 1):
                interrupted, _ = _world(_InterruptingStore(store, at))
                try:
                    result = call(interrupted)
                except KitInterrupt:
                    what = f"{name} interrupted by a BaseException at its write {at + 1}"
                    expect_equal(_snapshot(store, ("task-1",), (), False), before, f"what the store holds after {what}")
                    _must_take_the_next_transaction(store, what)
                    continue
                expect(at > 0, f"{name} through the reference core made no write")
                accepted = result is not None and getattr(result, "accepted", True)
                expect(accepted, f"{name}, let run whole after {at} interrupted runs, was refused: {result}")
                break
            else:
                raise Violation(f"{name} made more than {CONTRACT_WRITES_MAX} writes")


@_check
def hundreds_of_writes_commit_whole_or_not_at_all(make_store: StoreFactory) -> None:
    """A transaction of hundreds of writes that raises leaves none of them; the same transaction let commit leaves them all."""
    third = ATOMIC_WRITES // 3
    with fresh(make_store) as store:

        def write_all(tx: Any) -> None:
            for n in range(third):
                tx.insert_task(minimal_task(f"bulk-{n:04d}"))
                tx.insert_attempt(minimal_attempt(f"bulk-{n:04d}#1", f"bulk-{n:04d}"))
                tx.append_event(**event_fields(f"bulk-{n:04d}", attempt_id=None))

        try:
            with store.transaction() as tx:
                write_all(tx)
                raise RuntimeError("abandon after the last write")
        except RuntimeError:
            pass
        left = [n for n in range(third) if store.get_task(f"bulk-{n:04d}") is not None]
        expect_equal(len(left), 0, f"tasks left by a rolled-back transaction of {ATOMIC_WRITES} writes (the first were {left[:3]})")
        expect_equal(store.events(), [], f"the history after a rolled-back transaction of {ATOMIC_WRITES} writes")
        with store.transaction() as tx:
            write_all(tx)
        with store.transaction() as tx:
            found = tx.attempts_in(["queued"])
        expect_equal(len(found), third, f"Attempts after a committed transaction of {ATOMIC_WRITES} writes")
        expect_equal([e.seq for e in store.events()], list(range(1, third + 1)), f"the history after {ATOMIC_WRITES} writes committed")
