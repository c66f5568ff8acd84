"""The store suite: the history, the claim queue (`claimable`, `claim_candidate`, the core's `claim_next` over them),
and what the runtime's control plane needs besides the contracts (`tasks_in`, the leader leases)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from shiftchange.core import (
    Attempt,
    BackoffConfig,
    Claim,
    CoreConfig,
    InputError,
    Leader,
    LedgerProvider,
    ManualClock,
    Orchestrator,
    Plan,
    ReliabilityConfig,
    Store,
    Task,
    Transaction,
)
from shiftchange.core.leadership import Leadership, NotLeader

from ..checks import Check, collector, expect, expect_equal, expect_raises, skip
from ..rig import reference_orchestrator
from .builders import event_fields, fresh, make_intent, make_task, minimal_attempt, minimal_task, seed
from .records import _numbered
from .registry import StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

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
