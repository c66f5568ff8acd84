"""Bulk intake, `Orchestrator.submit_many`: create, accept and first dispatch of many tasks in one store transaction.

What it must be: the three calls one by one for every entry (the same
records, the same history but for sequence numbers, the same refusals), a
refusal of one entry touching no other, one transaction (an exception rolls
every entry back, admission hears of nothing), a lost race running the whole
batch again, and bad input changing nothing. The equivalence and the
rollback run on every store (memory, SQLite, PostgreSQL when reachable).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import fields

import pytest

from shiftchange.core import (
    SUBMISSIONS_MAX,
    Accepted,
    Budget,
    CoreConfig,
    Event,
    InputError,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    Refused,
    ReliabilityConfig,
    Seams,
    Store,
    StoreContention,
    StoreRetryable,
    Submission,
)
from shiftchange.core.seams import append_attempt

PLAN = Plan("the fixture leaks a port between tests")
HISTORY_FIELDS = tuple(f.name for f in fields(Event) if f.name != "seq")


def _orchestrator(store: Store, seams: Seams | None = None, **config: int) -> Orchestrator:
    clock = ManualClock(1_000.0)
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(**config), ReliabilityConfig(), seams=seams)


def _history(store: Store) -> list[tuple]:
    """The history without its sequence numbers (the two runs number alike, but a server store numbers after commit)."""
    return [tuple(getattr(event, name) for name in HISTORY_FIELDS) for event in store.events()]


def _records(store: Store, task_ids: list[str]) -> list:
    return [(store.get_task(task_id), store.get_attempts(task_id)) for task_id in task_ids]


def _admission(orchestrator: Orchestrator, task_ids: list[str]) -> tuple:
    statuses = [orchestrator.admission_status(f"{task_id}#1") for task_id in task_ids]
    return statuses, orchestrator.admission.queue_depth(), orchestrator.admission.in_flight()


def _one_by_one(orchestrator: Orchestrator, entries: list[Submission]) -> list[Refused | Accepted | None]:
    """What a caller of the single contracts does: create, accept, and dispatch once accepted; None where create raised."""
    results: list[Refused | Accepted | None] = []
    for e in entries:
        try:
            orchestrator.create_task(e.task_id, e.objective, e.workspace, e.scope, e.budget, e.priority, e.deadline_at)
        except InputError:
            results.append(None)
            continue
        result = orchestrator.accept_task(e.task_id)
        if result.accepted:
            result = orchestrator.dispatch(e.task_id, e.plan)
        results.append(result)
    return results


def _entries() -> list[Submission]:
    """Every kind of entry: plain, with scope, priority and deadline, a spent budget, an id already stored, an id twice."""
    return [
        Submission("t-1", "make the flaky test pass", "repo-a", PLAN),
        Submission("t-2", "speed up the build", "repo-b", Plan("cache the wheels"), scope="ci/", priority=5, deadline_at=5_000.0),
        Submission("t-3", "no money left", "repo-a", PLAN, budget=Budget(cost_max_usd=0.0)),
        Submission("old", "already there", "repo-a", PLAN),
        Submission("t-4", "fix the docs", "repo-c", PLAN, budget=Budget(attempts_max=2), priority=-3),
        Submission("t-1", "the same id again", "repo-b", PLAN),
        Submission("t-5", "the last one", "repo-a", PLAN),
    ]


def test_submit_many_is_create_accept_dispatch_one_by_one(make_store):
    """Goal: the same records, history (but seq), results and admission queue as the three calls per entry; then admission alike."""
    batch_store, single_store = make_store(), make_store()
    batch, single = _orchestrator(batch_store), _orchestrator(single_store)
    for orchestrator in (batch, single):  # a task stored before the batch, the same on both
        assert _one_by_one(orchestrator, [Submission("old", "stored before", "repo-a", PLAN)])[0].accepted
    entries = _entries()
    got = batch.submit_many(entries)
    expected = _one_by_one(single, entries)
    assert len(got) == len(entries)
    for entry, mine, theirs in zip(entries, got, expected, strict=True):
        if theirs is None:  # create_task raised "already exists": the batch refuses that entry alone
            assert isinstance(mine, Refused) and mine.code == "no_row" and mine.state == "in_progress", (entry, mine)
            assert "already exists" in mine.reason
        else:
            assert mine == theirs, entry
    assert [r.accepted for r in got] == [True, True, False, False, True, False, True]
    assert got[2].code == "budget" and got[2].guards == ("budget_left",)
    assert _history(batch_store) == _history(single_store)
    task_ids = sorted({e.task_id for e in entries})
    assert _records(batch_store, task_ids) == _records(single_store, task_ids)
    assert _admission(batch, task_ids) == _admission(single, task_ids)
    assert batch_store.get_task("t-1").objective == "make the flaky test pass"  # the duplicate changed nothing
    assert batch.run_admission() == single.run_admission()
    assert _history(batch_store) == _history(single_store)


def test_a_refused_entry_leaves_the_others_alone():
    """Goal: an id already stored, an id twice in the batch and a spent budget are refused each alone; the rest are dispatched."""
    store = MemoryStore()
    orchestrator = _orchestrator(store)
    orchestrator.create_task("old", "stored before", "repo-a")
    before = _history(store)
    results = orchestrator.submit_many(
        [
            Submission("a", "first", "repo-a", PLAN),
            Submission("old", "clash with the stored task", "repo-b", PLAN),
            Submission("b", "second", "repo-a", PLAN),
            Submission("a", "clash within the batch", "repo-b", PLAN),
            Submission("c", "budget spent", "repo-a", PLAN, budget=Budget(tokens_max=0)),
            Submission("d", "third", "repo-a", PLAN),
        ]
    )
    assert [(r.accepted, getattr(r, "code", None), r.state) for r in results] == [
        (True, None, "in_progress"),
        (False, "no_row", "inbox"),  # still in the inbox: the batch neither accepted nor dispatched it
        (True, None, "in_progress"),
        (False, "no_row", "in_progress"),
        (False, "budget", "ready"),
        (True, None, "in_progress"),
    ]
    assert store.get_task("old").state == "inbox" and store.get_attempts("old") == []
    assert _history(store)[: len(before)] == before
    assert not any(e.task_id == "old" for e in store.events()[len(before) :])  # a refused duplicate writes no event
    assert store.get_task("a").objective == "first" and store.get_task("a").workspace == "repo-a"
    assert store.get_task("c").state == "ready" and store.get_attempts("c") == []
    assert [orchestrator.admission_status(f"{t}#1") for t in ("a", "b", "c", "d")] == ["waiting", "waiting", "gone", "waiting"]
    refused = [(e.kind, e.task_id, e.code) for e in store.events() if not e.accepted]
    assert refused == [("dispatch", "c", "budget")]


def _failing_recovery(attempt_id: str):
    """A recovery seam that raises when it is asked to record `attempt_id`: an exception in the middle of the batch."""

    def recovery(tx, attempt, previous):
        if attempt.attempt_id == attempt_id:
            raise RuntimeError(f"planted failure recording {attempt_id}")
        return append_attempt(tx, attempt, previous)

    return recovery


def test_an_exception_rolls_the_whole_batch_back(make_store):
    """Goal: one transaction: an exception at the third entry leaves no task, Attempt or event of any, and admission empty."""
    store = make_store()
    broken = _orchestrator(store, Seams(recovery=_failing_recovery("t-3#1")))
    broken.create_task("old", "stored before", "repo-a")
    before, task_ids = store.events(), ["t-1", "t-2", "t-3", "t-4"]
    entries = [Submission(task_id, "objective", "repo-a", PLAN) for task_id in task_ids]
    with pytest.raises(RuntimeError, match="planted failure"):
        broken.submit_many(entries)
    assert store.events() == before
    assert [store.get_task(task_id) for task_id in task_ids] == [None] * 4
    assert _admission(broken, task_ids) == (["gone"] * 4, 0, 0)
    healthy = _orchestrator(store)  # the same batch again commits whole
    assert [r.accepted for r in healthy.submit_many(entries)] == [True] * 4
    assert [store.get_task(task_id).state for task_id in task_ids] == ["in_progress"] * 4
    assert _admission(healthy, task_ids) == (["waiting"] * 4, 4, 0)


class _Racing(MemoryStore):
    """A memory store whose transactions may lose a race: the next `losses` that wrote raise StoreRetryable at commit."""

    races = True

    def __init__(self, losses: int) -> None:
        super().__init__()
        self.losses = losses

    def transaction(self):
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


def test_a_lost_race_runs_the_whole_batch_again():
    """Goal: as @contract does for one contract: the whole batch again, once recorded, its events saying it ran again, queued once."""
    racing, calm = _Racing(losses=2), MemoryStore()
    lost, clean = _orchestrator(racing), _orchestrator(calm)
    entries = _entries()[:3]
    assert lost.submit_many(entries) == clean.submit_many(entries)
    assert {e.retries for e in racing.events()} == {2}
    assert [e[:-1] for e in _history(racing)] == [e[:-1] for e in _history(calm)]  # all but `retries`, the last field
    task_ids = [e.task_id for e in entries]
    assert _records(racing, task_ids) == _records(calm, task_ids)
    assert _admission(lost, task_ids) == _admission(clean, task_ids) == (["waiting", "waiting", "gone"], 2, 0)


def test_a_batch_that_keeps_losing_raises_store_contention_and_records_nothing():
    store = _Racing(losses=3)
    orchestrator = _orchestrator(store, store_retries_max=2)
    with pytest.raises(StoreContention, match="3 times in a row"):
        orchestrator.submit_many(_entries()[:2])
    assert store.events() == [] and store.get_task("t-1") is None
    assert _admission(orchestrator, ["t-1", "t-2"]) == (["gone", "gone"], 0, 0)


GOOD = Submission("fine", "objective", "repo-a", PLAN)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        pytest.param((GOOD for _ in range(2)), "list or tuple of Submission, not generator", id="generator"),
        pytest.param({"fine": GOOD}, "list or tuple of Submission, not dict", id="dict"),
        pytest.param(GOOD, "list or tuple of Submission, not Submission", id="one-entry-bare"),
        pytest.param(None, "not NoneType", id="none"),
        pytest.param([GOOD, ("t", "objective", "repo-a", PLAN)], "submission 1 must be a Submission, not tuple", id="tuple-entry"),
        pytest.param([GOOD] * (SUBMISSIONS_MAX + 1), f"at most {SUBMISSIONS_MAX:,} submissions per call, not 1,001", id="too-many"),
        pytest.param([GOOD, Submission("", "objective", "repo-a", PLAN)], "submission 1 (''): task_id must be", id="blank-id"),
        pytest.param([GOOD, Submission("t", "objective", "repo-a", "plan")], "submission 1 ('t'): plan must be a Plan", id="plan"),
        pytest.param([Submission("t", "x", "repo-a", Plan(" "))], "submission 0 ('t'): hypothesis must be", id="hypothesis"),
        pytest.param([GOOD, Submission("t", "x", "repo-a", PLAN, priority=True)], "submission 1 ('t'): priority must be", id="priority"),
        pytest.param([GOOD, Submission("t", "x", "r", PLAN, deadline_at=-1.0)], "submission 1 ('t'): deadline_at must be", id="deadline"),
        pytest.param(
            [GOOD, Submission("t", "x", "r", PLAN, budget=Budget(attempts_max=0))], "attempts_max must be at least 1", id="budget"
        ),
        pytest.param([GOOD, Submission("t", "half a pair: \ud800", "r", PLAN)], "objective must be Unicode text", id="surrogate"),
        pytest.param([GOOD, Submission("t", "x", "r", PLAN, scope=7)], "submission 1 ('t'): scope must be", id="scope"),
    ],
)
def test_bad_input_changes_nothing(entries, message):
    """Goal: any bad entry, even after good ones, is an InputError naming it, before anything is written; the queue is as it was."""
    store = MemoryStore()
    orchestrator = _orchestrator(store)
    orchestrator.submit_many([Submission("old", "stored before", "repo-a", PLAN)])
    before = (store.events(), _records(store, ["old", "fine", "t"]), _admission(orchestrator, ["old", "fine", "t"]))
    with pytest.raises(InputError, match=re.escape(message)):
        orchestrator.submit_many(entries)
    assert (store.events(), _records(store, ["old", "fine", "t"]), _admission(orchestrator, ["old", "fine", "t"])) == before


def test_an_empty_batch_writes_nothing_and_the_largest_is_taken():
    """Goal: [] answers [] with no event; SUBMISSIONS_MAX entries (the limit itself) are one batch, every task dispatched."""
    store = MemoryStore()
    orchestrator = _orchestrator(store)
    assert orchestrator.submit_many([]) == [] and orchestrator.submit_many(()) == []
    assert store.events() == []
    entries = tuple(Submission(f"t-{n}", "objective", f"repo-{n % 7}", PLAN) for n in range(SUBMISSIONS_MAX))
    results = orchestrator.submit_many(entries)
    assert len(results) == SUBMISSIONS_MAX and all(r.accepted for r in results)
    assert len(store.events()) == 4 * SUBMISSIONS_MAX  # create, accept, dispatch, append for each
    assert orchestrator.admission.queue_depth() == SUBMISSIONS_MAX
