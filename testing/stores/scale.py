"""The store suite at scale and with age: every scan, batch read and history read past a backend's page, and rows
that must live for ever read again after real time has passed their times.

A paginated backend (a DynamoDB query, a REST API, a cursor with a fetch
size) answers a page at a time; a port that forgets to follow the next page
answers the first 100 or 1,000 rows and nothing says so. So the store is
seeded with `SCALE_ROWS` tasks and Attempts, and one task with
`SCALE_CHILDREN` Attempts, intents and events, and every read must answer
them all, in its promised order. And a backend with expiry (a TTL attribute,
an `EXPIRE`, a retention policy) may drop a row once a time in it has passed;
nothing the core writes may ever go, so the kit writes rows whose lease
expiries are `AGE_LEAD_S` away on the wall clock, waits until the whole second
after them has passed, and reads them all again.
"""

from __future__ import annotations

import math
import time

from shiftchange.core import Attempt, Leader, Store

from ..checks import Check, collector, expect, expect_equal
from .builders import _same_record, event_fields, fresh, make_attempt, make_intent, make_task, minimal_attempt, minimal_task, seed
from .registry import AGE_LEAD_S, AGE_MARGIN_S, AGE_PAST_S, SCALE_BATCH, SCALE_CHILDREN, SCALE_ROWS, StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

STATES = ("queued", "admitted", "running", "suspect")


def _seed_in_batches(store: Store, records: list) -> None:
    for start in range(0, len(records), SCALE_BATCH):
        seed(store, *records[start : start + SCALE_BATCH])


def _attempt(n: int) -> Attempt:
    """Attempt 1 of task n, its state by n, created in an order that is not the id order."""
    attempt = minimal_attempt(f"scale-{n:05d}#1", f"scale-{n:05d}", state=STATES[n % len(STATES)])
    attempt.created_at = float((n * 7919) % SCALE_ROWS)
    return attempt


@_check
def every_scan_and_history_read_is_whole_and_in_order_past_a_page(make_store: StoreFactory) -> None:
    """Thousands of rows: attempts_in, tasks_in, claimable, tasks(), attempts_of, intents_of and the history answer them all, in order."""
    with fresh(make_store) as store:
        tasks = [minimal_task(f"scale-{n:05d}") for n in range(SCALE_ROWS)]
        for n, task in enumerate(tasks):
            task.state, task.workspace = ("running", "repo-a") if n % 3 else ("ready", "repo-b")
        _seed_in_batches(store, tasks)
        attempts = [_attempt(n) for n in range(SCALE_ROWS)]
        _seed_in_batches(store, attempts)
        many = [minimal_attempt(f"scale-00000#{n}", "scale-00000", number=n, state="failed") for n in range(2, SCALE_CHILDREN + 2)]
        _seed_in_batches(store, many)
        intents = [make_intent(f"key-{n:05d}", "scale-00001#1", task_id="scale-00001") for n in range(SCALE_CHILDREN)]
        _seed_in_batches(store, intents)
        for start in range(0, SCALE_CHILDREN, SCALE_BATCH):
            with store.transaction() as tx:
                for n in range(start, min(start + SCALE_BATCH, SCALE_CHILDREN)):
                    tx.append_event(**event_fields("scale-00002", attempt_id=None, detail=f"event {n}"))
        with store.transaction() as tx:
            for n in range(SCALE_CHILDREN):
                tx.append_event(**event_fields(f"scale-{n:05d}", attempt_id=None, detail="one each"))

        total = len(attempts) + len(many)
        with store.transaction() as tx:
            for state in STATES:
                wanted = sorted(a.attempt_id for a in attempts if a.state == state)
                expect_equal([a.attempt_id for a in tx.attempts_in([state])], wanted, f"attempts_in([{state!r}]) of {len(wanted)}")
            every = [a.attempt_id for a in tx.attempts_in([*STATES, "failed"])]
            expect_equal(len(every), total, f"how many Attempts attempts_in of every state answers (of {total})")
            expect_equal(every, sorted(every), "attempts_in of every state, in attempt-id order")
            queue = [a.attempt_id for a in tx.claimable(["admitted", "queued"], SCALE_ROWS)]
            expected = [
                a.attempt_id for a in sorted(attempts, key=lambda a: (a.created_at, a.attempt_id)) if a.state in ("admitted", "queued")
            ]
            expect_equal(queue, expected, f"claimable of {len(expected)} Attempts, oldest first")
            mine = [a.attempt_id for a in tx.claimable(["admitted", "queued", "running", "suspect"], SCALE_ROWS, "repo-b")]
            expect_equal(len(mine), sum(1 for n in range(SCALE_ROWS) if not n % 3), "claimable in one workspace of thousands of tasks")
            if _has(tx, "tasks_in"):
                running = [t.task_id for t in tx.tasks_in(["running"])]
                expect_equal(running, sorted(t.task_id for t in tasks if t.state == "running"), f"tasks_in(['running']) of {len(running)}")
            ids = [t.task_id for t in reversed(tasks)] + ["absent"]
            expect_equal([getattr(t, "task_id", None) for t in tx.tasks(ids)], [*ids[:-1], None], f"tasks() of {len(ids)} ids")
            numbers = [a.number for a in tx.attempts_of("scale-00000")]
            expect_equal(numbers, list(range(1, SCALE_CHILDREN + 2)), f"attempts_of a task with {SCALE_CHILDREN + 1} Attempts, by number")
            keys = [i.key for i in tx.intents_of("scale-00001#1")]
            expect_equal(keys, sorted(i.key for i in intents), f"intents_of an Attempt with {SCALE_CHILDREN} intents, by key")
        history = store.events()
        expect_equal([e.seq for e in history], list(range(1, 2 * SCALE_CHILDREN + 1)), f"the numbers of a history of {2 * SCALE_CHILDREN}")
        one = store.events(task_id="scale-00002")
        expect_equal([e.detail for e in one[:SCALE_CHILDREN]], [f"event {n}" for n in range(SCALE_CHILDREN)], "one task's long history")
        expect_equal(len(store.events(after_seq=SCALE_CHILDREN)), SCALE_CHILDREN, "the history after a number in its middle")
        expect_equal([a.number for a in store.get_attempts("scale-00000")], numbers, "get_attempts of a task with many Attempts")
        expect_equal(len(store.get_intents("scale-00001#1")), SCALE_CHILDREN, "get_intents of an Attempt with many intents")


def _has(tx: object, name: str) -> bool:
    from .history import _implements

    return _implements(tx, name)  # type: ignore[arg-type]


@_check
def rows_live_on_after_real_time_passes_their_times(make_store: StoreFactory) -> None:
    """Records whose lease expiries and deadlines real time overtakes are all still there, unchanged, after it has."""
    with fresh(make_store) as store:
        soon = time.time() + AGE_LEAD_S
        task = make_task("aged", created_at=soon - 30, deadline_at=soon)
        attempt = make_attempt("aged#1", "aged", expires_at=soon, heartbeat_at=soon - 10, cancel_deadline_at=soon, eligible_at=soon)
        intent = make_intent("aged-key", "aged#1", task_id="aged", deadline_at=soon)
        done = make_attempt("aged#2", "aged", number=2, state="succeeded", expires_at=soon - 3600, ended_at=soon - 3600)
        seed(store, task, attempt, done, intent)
        with store.transaction() as tx:
            event = tx.append_event(**event_fields("aged", attempt_id="aged#1", at=soon - 1, expires_at=soon))
            if _has(tx, "put_leader"):
                tx.put_leader("aged-leader", "orchestrator-1", 3, soon)
        past = max(math.floor(soon) + 1, soon + AGE_PAST_S) + AGE_MARGIN_S  # a whole second, and half of one, past them
        time.sleep(max(0.0, past - time.time()))
        expect(time.time() > soon, "the kit's wait ended before the rows' times")
        for read, written, what in (
            (store.get_task("aged"), task, "a task whose deadline has passed"),
            (store.get_attempt("aged#1"), attempt, "an Attempt whose lease has expired"),
            (store.get_attempt("aged#2"), done, "a terminal Attempt an hour old"),
            (store.get_intent("aged-key"), intent, "an intent whose deadline has passed"),
        ):
            _same_record(read, written, f"{what}, read after real time passed it")
        expect_equal(len(store.events(task_id="aged")), 1, "the history of a task whose times have all passed")
        expect_equal(store.events()[0].expires_at, event.expires_at, "an event whose lease expiry has passed")
        with store.transaction() as tx:
            expect_equal(
                [a.attempt_id for a in tx.attempts_in(["running"])], ["aged#1"], "attempts_in(['running']) after the lease expired"
            )
            if _has(tx, "leader"):
                expect_equal(tx.leader("aged-leader"), Leader("aged-leader", "orchestrator-1", 3, soon), "an expired leader lease")
