"""The store suite through two handles on one store (with `reopen`): isolation, a waiting writer, concurrent claimers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any

from shiftchange.core import (
    Event,
    ManualClock,
    Orchestrator,
    Store,
    StoreRetryable,
    Task,
)

from ..checks import Check, Violation, collector, expect, expect_equal, expect_raises
from .builders import event_fields, fresh, make_task, minimal_task, seed
from .history import _admitted, _claimed_id, _orchestrator, _stored_attempt
from .registry import CLAIMERS_TASKS, DONE_WAIT_S, SETTLE_S, Reopen, SharedStore

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_shared_check = collector(CHECKS)

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
