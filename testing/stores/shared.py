"""The store suite through two handles on one store (with `reopen`): isolation, a waiting writer, concurrent claimers."""

from __future__ import annotations

import functools
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any

from shiftchange.core import (
    Event,
    Leader,
    ManualClock,
    Orchestrator,
    Store,
    StoreRetryable,
    Task,
)
from shiftchange.core.leadership import Leadership

from ..checks import Check, Violation, collector, expect, expect_equal, expect_raises, skip
from .builders import event_fields, fresh, make_attempt, make_intent, make_task, minimal_attempt, minimal_task, seed
from .clock import reading
from .history import _admitted, _claimed_id, _implements, _orchestrator, _require, _stored_attempt
from .registry import (
    CLAIMERS_TASKS,
    CLOCK_AGREEMENT_S,
    DONE_WAIT_S,
    KILLED_WRITES,
    LOCK_TIMEOUT_SLACK_S,
    SETTLE_S,
    Reopen,
    SharedStore,
)

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
        lost: StoreRetryable | None = None
        for _ in range(retries_max):
            try:
                with handle.transaction() as tx:
                    task = tx.task(task_id)
                    tx.update_task(task, tokens=task.tokens + tokens)
                    return task.tokens
            except StoreRetryable as error:
                lost = error
        raise StoreRetryable(f"lost the race {retries_max} times, the last: {lost}")

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


# ---- the clock, the leader leases and the scans across handles


@_shared_check
def both_handles_read_the_same_store_clock(make: SharedStore) -> None:
    """Two handles on one store read its clock alike: readings taken together agree within a round trip."""
    with _two_handles(make) as (store, other):
        clock = store.clock()
        if clock is None:
            skip("the store has no clock of its own (clock() is None): each process's caller passes the time")
        for n in range(5):
            before = reading(clock, "this handle's reading")
            there = other.run(lambda handle: reading(handle.clock(), "the other handle's reading"), "the other handle's clock")
            after = reading(clock, "this handle's reading")
            expect(
                before - CLOCK_AGREEMENT_S <= there <= after + CLOCK_AGREEMENT_S,
                f"reading {n + 1}: the other handle's clock read {there:.3f} between this handle's {before:.3f} and {after:.3f}"
                f" (allowed {CLOCK_AGREEMENT_S:g} s either side): processes sharing the store judge leases by different times",
            )


@_shared_check
def leader_leases_are_one_across_handles(make: SharedStore) -> None:
    """A leader lease one handle takes is the one the other reads: refused to it while held, taken by it once expired."""
    clock = ManualClock(500.25)
    with _two_handles(make) as (store, other):
        with store.transaction() as tx:
            _require(tx, "leader", "put_leader")
        here = Leadership(store, "admission", "orchestrator-here", 2.5, clock)
        expect(here.hold(), "orchestrator-here could not take a leader lease nobody held")
        seen = other.run(lambda handle: _leader_of(handle, "admission"), "the other handle's read of the lease")
        expect_equal(seen, Leader("admission", "orchestrator-here", 1, 502.75), "the lease the other handle reads")
        there = other.run(lambda handle: Leadership(handle, "admission", "orchestrator-there", 2.5, clock), "a Leadership there")
        clock.set(502.5)
        expect(not other.run(lambda _handle: there.hold(), "the other handle's attempt"), "the other handle took a lease held until 502.75")
        clock.set(503.0)
        expect(other.run(lambda _handle: there.hold(), "the other handle's takeover"), "the other handle could not take an expired lease")
        expect(not here.hold(), "orchestrator-here took back the lease the other handle has just taken")
        expect_equal(_leader_of(store, "admission"), Leader("admission", "orchestrator-there", 2, 505.5), "the lease after the takeover")


def _leader_of(handle: Store, name: str) -> Leader | None:
    with handle.transaction() as tx:
        return tx.leader(name)


def _scans(handle: Store) -> dict[str, Any]:
    """What every scan of the protocol answers on `handle` about the scan-* records."""
    with handle.transaction() as tx:
        found: dict[str, Any] = {
            "attempts_in": [(a.attempt_id, a.state) for a in tx.attempts_in(["queued", "admitted", "running", "suspect"])],
            "claimable": [a.attempt_id for a in tx.claimable(["admitted"], 100, "repo-scan")],
            "attempts_of": [(a.attempt_id, a.state) for a in tx.attempts_of("scan-1")],
            "intents_of": [(i.key, i.receipt) for i in tx.intents_of("scan-1#1")],
            "tasks": [getattr(t, "state", None) for t in tx.tasks(["scan-1", "scan-2", "scan-3"])],
        }
        if _implements(tx, "tasks_in"):
            found["tasks_in"] = [(t.task_id, t.state) for t in tx.tasks_in(["ready", "running", "done"])]
    found["events"] = [(e.task_id, e.kind) for e in handle.events(task_id="scan-1")]
    return found


@_shared_check
def every_scan_sees_the_other_handles_commits(make: SharedStore) -> None:
    """attempts_in, claimable, attempts_of, intents_of, tasks, tasks_in and the history on one handle follow the other's commits."""
    with _two_handles(make) as (store, other):
        tasks = [make_task(f"scan-{n}", workspace="repo-scan", state="running") for n in (1, 2, 3)]
        attempts = [make_attempt(f"scan-{n}#1", f"scan-{n}", state="admitted", created_at=float(n)) for n in (1, 2, 3)]
        seed(store, *tasks, *attempts, make_intent("scan-key", "scan-1#1", task_id="scan-1", receipt=None))
        with store.transaction() as tx:
            tx.append_event(**event_fields("scan-1", kind="claim"))
        here = _scans(store)
        expect_equal(other.run(_scans, "the other handle's scans"), here, "every scan on the other handle, after this handle's commits")
        with store.transaction() as tx:
            tx.update_attempt(tx.attempt("scan-1#1"), state="running")
            tx.update_attempt(tx.attempt("scan-2#1"), state="suspect")
            tx.update_task(tx.task("scan-3"), state="done")
            tx.update_intent(tx.intent("scan-key"), receipt="pr-1")
            tx.insert_attempt(minimal_attempt("scan-3#2", "scan-3", number=2, state="admitted"))
            tx.append_event(**event_fields("scan-1", kind="complete"))
        changed = _scans(store)
        expect(changed != here, "the scans on this handle did not follow its own commit")
        expect_equal(
            other.run(_scans, "the other handle's scans"), changed, "every scan on the other handle, after this handle changed them"
        )


# ---- a lock held past the stated timeout, claimers side by side, a writer killed


@_shared_check
def a_writer_blocked_past_the_lock_timeout_gets_a_retryable_error_in_time(make: SharedStore) -> None:
    """A writer blocked longer than the store's stated lock_timeout_s gets StoreRetryable within it and half again, plus a second."""
    with _two_handles(make) as (store, other):
        timeout = getattr(other.handle, "lock_timeout_s", None)
        expect(
            timeout is not None,
            "the store states no lock timeout (lock_timeout_s is None): a writer blocked by another process may wait without bound",
        )
        bound = 1.5 * float(timeout) + LOCK_TIMEOUT_SLACK_S
        seed(store, minimal_task("locked"))
        with store.transaction() as tx:
            tx.update_task(tx.task("locked"), tokens=1)
            started = time.monotonic()
            blocked = other.submit(_write_once("locked"))
            try:
                error = blocked.exception(timeout=bound)
            except FutureTimeout:
                error = None
            waited = time.monotonic() - started
            finished = blocked.done()
        expect(
            finished, f"a writer blocked by another handle's transaction had no answer after {waited:.2f} s (lock_timeout_s={timeout:g})"
        )
        result = _result_or_error(blocked)
        expect(
            isinstance(error, StoreRetryable),
            f"a writer blocked past lock_timeout_s={timeout:g} must get StoreRetryable, but after {waited:.2f} s it got {result}",
        )
        expect(waited <= bound, f"a writer blocked past lock_timeout_s={timeout:g} got its error after {waited:.2f} s (bound {bound:g} s)")


def _write_once(task_id: str) -> Callable[[Store], int]:
    def write(handle: Store) -> int:
        with handle.transaction() as tx:
            task = tx.task(task_id)
            tx.update_task(task, tokens=task.tokens + 10)
            return task.tokens

    return write


def _result_or_error(pending: Future) -> str:
    error = pending.exception()
    return f"{type(error).__name__}: {error}" if error is not None else f"no error (it wrote, returning {pending.result()!r})"


@_shared_check
def concurrent_claimers_on_two_handles_both_make_progress(make: SharedStore) -> None:
    """Two claimers, one per handle, claiming in rounds side by side: each gets an Attempt every round while two are left."""
    clock = ManualClock()
    with _two_handles(make) as (store, other):
        orchestrator = _orchestrator(store, clock)
        admitted = [_admitted(orchestrator, clock, f"task-{n}", "repo-a") for n in range(CLAIMERS_TASKS)]
        there_orchestrator = other.run(lambda handle: _orchestrator(handle, clock), "the reference core on the other handle")
        taken: list[str] = []
        for round_number in range(CLAIMERS_TASKS // 2):
            start = threading.Barrier(2, timeout=DONE_WAIT_S)
            there = other.submit(functools.partial(_claim_on, there_orchestrator, "worker-there", start))
            here = _claim_once(orchestrator, "worker-here", start)
            there_result = _result(there, "the claimer on the other handle")
            before = len(taken)
            for worker, result in (("worker-here", here), ("worker-there", there_result)):
                expect(
                    result is not None,
                    f"round {round_number + 1}: {worker} found nothing to claim while {CLAIMERS_TASKS - before} Attempts were admitted"
                    " and unclaimed at the round's start: one claimer starves",
                )
                taken.append(_claimed_id(result, f"round {round_number + 1}: {worker}'s claim"))
        expect_equal(sorted(taken), sorted(admitted), "the Attempts two claimers took in rounds (each exactly once)")


def _claim_on(orchestrator: Orchestrator, worker_id: str, start: threading.Barrier, _handle: Store) -> Any:
    return _claim_once(orchestrator, worker_id, start)


def _claim_once(orchestrator: Orchestrator, worker_id: str, start: threading.Barrier) -> Any:
    start.wait()
    return orchestrator.claim_next(worker_id, "repo-a", True)


def _child_writes(store: Store, reopen: Reopen, to_parent: int, from_parent: int) -> None:
    """In the forked child: a handle of its own and a marker committed; then, once told, a transaction of many writes, left
    open until the child is killed. It tells the parent "m" (marker committed) and "x" (in the middle of the transaction)."""
    handle = reopen(store)
    seed(handle, minimal_task("written-by-the-child"))
    os.write(to_parent, b"m")
    if os.read(from_parent, 1) != b"g":
        return
    with handle.transaction() as tx:
        for n in range(KILLED_WRITES // 3):
            tx.insert_task(minimal_task(f"killed-{n:04d}"))
            tx.insert_attempt(minimal_attempt(f"killed-{n:04d}#1", f"killed-{n:04d}"))
            tx.append_event(**event_fields(f"killed-{n:04d}", attempt_id=None))
        tx.update_task(tx.task("before-the-kill"), tokens=99)
        os.write(to_parent, b"x")
        time.sleep(DONE_WAIT_S * 6)  # killed long before this ends


def _forked_child(store: Store, reopen: Reopen) -> tuple[int, int, int]:
    """Fork the child that writes; (its pid, the end it speaks on, the end it listens on). It never returns into the kit."""
    parent_hears, child_speaks = os.pipe()  # (read end, write end)
    child_hears, parent_speaks = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for end in (parent_hears, child_speaks, child_hears, parent_speaks):
            os.close(end)
        raise
    if pid == 0:
        code = 1
        try:
            os.close(parent_hears)
            os.close(parent_speaks)
            try:
                _child_writes(store, reopen, child_speaks, child_hears)
                code = 0
            except BaseException as error:  # told to the parent, which reports it: a child's traceback would go nowhere
                os.write(child_speaks, b"E" + f"{type(error).__name__}: {error}".encode(errors="replace")[:2000])
        finally:
            os._exit(code)
    os.close(child_speaks)
    os.close(child_hears)
    return pid, parent_hears, parent_speaks


def _heard(channel: int, wanted: bytes, what: str) -> None:
    """Wait (at most 3 x DONE_WAIT_S) for the child to say `wanted`; its failure, or its silence, is a Violation."""
    ready = select.select([channel], [], [], DONE_WAIT_S * 3)[0]
    said = os.read(channel, 4096) if ready else b""
    if said.startswith(b"E"):
        raise Violation(f"the child process failed before {what}: {said[1:].decode(errors='replace')}")
    expect(said == wanted, f"the child process did not reach {what} within {DONE_WAIT_S * 3:g} s (it said {said!r})")


@_shared_check
def a_writer_killed_mid_transaction_leaves_nothing_visible(make: SharedStore) -> None:
    """A process killed in the middle of a transaction of hundreds of writes leaves none of them visible, its rows not locked, and
    what it committed before kept."""
    if not hasattr(os, "fork"):
        skip("needs os.fork, to kill a child process in the middle of a transaction")
    with fresh(make.make_store) as store:
        seed(store, minimal_task("before-the-kill"))
        before = store.events()
        pid, hears, speaks = _forked_child(store, make.reopen)
        try:
            _heard(hears, b"m", "its first commit, through a handle reopen() opened in it")
            if store.get_task("written-by-the-child") is None:
                skip("a handle opened by reopen() in another process does not share this store (a row it committed is not visible here)")
            try:
                os.write(speaks, b"g")
            except BrokenPipeError:
                raise Violation("the child process died after its first commit, before its transaction began") from None
            _heard(hears, b"x", "the middle of its transaction")
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(hears)
            os.close(speaks)
        expect(store.get_task("written-by-the-child") is not None, "a row the child committed vanished when the child was killed")
        left = [n for n in range(KILLED_WRITES // 3) if store.get_task(f"killed-{n:04d}") is not None]
        expect(not left, f"{len(left)} tasks written by a transaction whose process was killed are visible (the first {left[:3]})")
        expect_equal(store.get_task("before-the-kill").tokens, 0, "a task the killed transaction changed")
        expect_equal(store.events(), before, "the history after a writer was killed mid-transaction")
        other = _OtherHandle(store, make.reopen)
        try:
            seen = other.run(lambda handle: handle.get_task(f"killed-{0:04d}"), "a fresh handle's read after the kill")
            expect(seen is None, "a handle opened after the kill sees a task the killed transaction wrote")
        finally:
            other.close()
        try:
            _write_once("before-the-kill")(store)  # the very row the killed transaction had written: its lock must be gone
            seed(store, minimal_task("after-the-kill"))
        except Exception as error:
            raise Violation(f"a write after a writer was killed mid-transaction failed: {type(error).__name__}: {error}") from error
        expect_equal(store.get_task("before-the-kill").tokens, 10, "the row the killed transaction had written, written again")
