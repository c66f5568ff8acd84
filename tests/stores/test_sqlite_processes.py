"""The contracts over one SQLite file shared by real OS processes: racing claimers, and a driver SIGKILLed mid-run.

`tests/stores/test_transactions.py` already proves the store alone: no lost update
across processes, and a kill inside one transaction leaves the last commit.
These tests go one layer up, through the Orchestrator, where the promises
are the chapter's: one winner per claim however many workers race for it,
and after a crash at any instant the file still satisfies every invariant of
DESIGN.md that can be read from what is stored, and the next orchestrator
carries on (the reaper, reconciliation and new claims work).

Processes start with the "spawn" method, so each child imports the code
afresh and owns its own connection, as separate workers would. Every wait is
on a Barrier, a pipe or a process sentinel, each with a timeout; no sleep is
used to synchronize.
"""

from __future__ import annotations

import hashlib
import itertools
import multiprocessing
import random
import signal
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

import pytest

from shiftchange.core import Claim, CoreConfig, LedgerProvider, ManualClock, Orchestrator, Plan, ProviderTimeout, Reconciliation
from shiftchange.core.config import AdmissionConfig, ReliabilityConfig
from shiftchange.core.machine import ATTEMPT_TERMINAL, EXPIRABLE, LEASED, SPEC
from shiftchange.core.records import Attempt, Event, Intent, Lease, Task
from shiftchange.stores.sqlite import SQLiteStore

SPAWN = multiprocessing.get_context("spawn")
WORKSPACE = "acme/web"
CONFIG = CoreConfig()
RELIABILITY = ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=10_000))
"""Every task shares one workspace here; the bulkhead is not what these tests are about."""
WAIT_TIMEOUT_S = 60.0
"""The longest any parent or child waits on another process; only a broken run ever reaches it."""

FENCED_TRIGGERS = frozenset(row.trigger for row in SPEC.attempt.rows if row.fenced)


def open_orchestrator(path: str | Path, clock: ManualClock, provider: LedgerProvider | None = None) -> Orchestrator:
    return Orchestrator(SQLiteStore(path), clock, provider or LedgerProvider(clock=clock), CONFIG, RELIABILITY)


def latest_time_s(path: str | Path) -> float:
    """The latest moment the history records, so a restarted process's clock never runs backwards."""
    connection = sqlite3.connect(path)
    try:
        (latest,) = connection.execute("SELECT max(at) FROM events").fetchone()
    finally:
        connection.close()
    return latest or 0.0


def prepare_task(orchestrator: Orchestrator, task_id: str) -> str:
    """Create, accept, dispatch and admit one task; returns its Attempt 1's id."""
    orchestrator.create_task(task_id, "make the login redirect test pass", WORKSPACE)
    orchestrator.accept_task(task_id)
    assert orchestrator.dispatch(task_id, Plan("await the cache write")).accepted
    attempt_id = f"{task_id}#1"
    assert orchestrator.admit(attempt_id).accepted
    return attempt_id


# ------------------------------------------------------------------ the claim race

RACERS = 6
RACE_ROUNDS = 10
RACE_CLOCK_S = 5_000.0


def race_claims(path: str, worker_id: str, task_ids: list[str], clock_s: float, barrier, results) -> None:
    """A racing worker: its own store and orchestrator; at each barrier it claims the round's task at once with every other."""
    orchestrator = open_orchestrator(path, ManualClock(clock_s))
    try:
        for task_id in task_ids:
            barrier.wait(timeout=WAIT_TIMEOUT_S)
            outcome = orchestrator.claim_attempt(task_id, worker_id, WORKSPACE)
            if isinstance(outcome, Claim):
                lease = outcome.lease
                results.put((task_id, worker_id, True, lease.attempt_id, lease.generation, lease.token, lease.expires_at))
            else:
                results.put((task_id, worker_id, False, outcome.reason, None, None, None))
    finally:
        orchestrator.store.close()


@pytest.mark.heavy
def test_racing_claimers_in_separate_processes_yield_exactly_one_lease_every_time(tmp_path):
    """Goal: N processes claiming one admitted Attempt at the same instant get one lease and N-1 refusals, round after round.

    The store then holds that Attempt claimed at generation 1 under the winner's
    token, and the history holds one accepted claim and N-1 refused ones.
    """
    path = tmp_path / "race.sqlite"
    task_ids = [f"race-{number}" for number in range(RACE_ROUNDS)]
    setup = open_orchestrator(path, ManualClock(RACE_CLOCK_S))
    for task_id in task_ids:
        prepare_task(setup, task_id)
    setup.store.close()

    barrier, results = SPAWN.Barrier(RACERS), SPAWN.Queue()
    workers = [f"worker-{number}" for number in range(RACERS)]
    racers = [
        SPAWN.Process(target=race_claims, args=(str(path), worker, task_ids, RACE_CLOCK_S, barrier, results), daemon=True)
        for worker in workers
    ]
    for racer in racers:
        racer.start()
    try:
        outcomes = [results.get(timeout=WAIT_TIMEOUT_S) for _ in range(RACERS * RACE_ROUNDS)]
        for racer in racers:
            racer.join(timeout=WAIT_TIMEOUT_S)
        assert [racer.exitcode for racer in racers] == [0] * RACERS
    finally:
        for racer in racers:
            if racer.is_alive():
                racer.kill()
                racer.join()

    by_task = defaultdict(list)
    for outcome in outcomes:
        by_task[outcome[0]].append(outcome)
    with SQLiteStore(path) as store:
        for task_id in task_ids:
            assert sorted(worker for _task, worker, *_rest in by_task[task_id]) == workers, task_id
            winners = [outcome for outcome in by_task[task_id] if outcome[2]]
            assert len(winners) == 1, (task_id, by_task[task_id])
            (_task, winner, _accepted, attempt_id, generation, token, expires_at) = winners[0]
            assert (attempt_id, generation, expires_at) == (f"{task_id}#1", 1, RACE_CLOCK_S + CONFIG.lease_ttl_s)
            [attempt] = store.get_attempts(task_id)
            assert (attempt.state, attempt.generation, attempt.worker_id) == ("claimed", 1, winner)
            assert attempt.token_digest == hashlib.sha256(token.encode()).hexdigest()
            claims = [event for event in store.events(task_id) if event.kind == "claim"]
            assert len(claims) == RACERS
            assert [event.worker_id for event in claims if event.accepted] == [winner]
            assert all(event.to_state == event.from_state == "claimed" for event in claims if not event.accepted)


# ------------------------------------------------------------------ the crash


@dataclass
class ChildRun:
    """One child's view: its orchestrator, its seeded choices, and the leases only it knows (lost with it)."""

    orchestrator: Orchestrator
    clock: ManualClock
    provider: LedgerProvider
    random: random.Random
    run: int
    leases: dict[str, Lease]
    stale: list[Lease]
    active: list[str]
    created: int = 0


ACTIVE_TASKS = 8
STEPS_MAX = 100_000
"""A bound on the child's loop, so a child the parent failed to kill still ends."""


def make_world(path: str | Path, run: int, seed: int) -> ChildRun:
    """A driver that resumes what the file holds: its clock starts after the history, and it adopts every unfinished task."""
    clock = ManualClock(latest_time_s(path) + 1.0)
    provider = LedgerProvider(supports_idempotency=run % 2 == 0, clock=clock)
    orchestrator = open_orchestrator(path, clock, provider)
    return ChildRun(orchestrator, clock, provider, random.Random(seed), run, {}, [], unfinished_tasks(path))


def unfinished_tasks(path: str | Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT task_id FROM tasks WHERE state IN ('inbox', 'ready', 'in_progress', 'review') ORDER BY task_id")
        return [task_id for (task_id,) in rows]
    finally:
        connection.close()


def drive(path: str, run: int, seed: int, signal_after_steps: int, progress: Connection) -> None:
    """The crash child: take seeded steps over many tasks; after `signal_after_steps` tell the parent how far it got, and go on."""
    world = make_world(path, run, seed)
    for step in range(1, STEPS_MAX + 1):
        take_step(world)
        if step == signal_after_steps:
            # The newest committed event at this instant: it must survive the kill that follows.
            progress.send(world.orchestrator.store.events()[-1].seq)
            progress.close()


def take_step(world: ChildRun) -> None:
    """Advance the clock a little, then move one seeded task one step, or make a late call with a stale fence."""
    world.clock.advance(world.random.uniform(0.0, 2.0))
    if world.stale and world.random.random() < 0.05:
        late_call(world, world.random.choice(world.stale))
        return
    if len(world.active) < ACTIVE_TASKS:
        world.active.append(create(world))
        return
    task_id = world.random.choice(world.active)
    attempts = world.orchestrator.store.get_attempts(task_id)
    latest = attempts[-1] if attempts else None
    if latest is None:
        begin(world, task_id)
    elif latest.state in ATTEMPT_TERMINAL:
        conclude(world, task_id, latest)
    else:
        ATTEMPT_STEPS[latest.state](world, latest)


def create(world: ChildRun) -> str:
    world.created += 1
    task_id = f"run{world.run}-task-{world.created}"
    world.orchestrator.create_task(task_id, "make the login redirect test pass", WORKSPACE)
    begin(world, task_id)
    return task_id


def begin(world: ChildRun, task_id: str) -> None:
    """Accept and first-dispatch a task, from wherever a crash left it."""
    if world.orchestrator.store.get_task(task_id).state == "inbox":
        world.orchestrator.accept_task(task_id)
    world.orchestrator.dispatch(task_id, Plan("hypothesis 1"))


def late_call(world: ChildRun, lease: Lease) -> None:
    """A worker that lost its lease wakes up: every call it makes must be refused and kept as a late event."""
    orchestrator, fence = world.orchestrator, (lease.attempt_id, lease.generation, lease.token)
    call = world.random.choice(("renew", "complete", "grant"))
    if call == "renew":
        orchestrator.renew_lease(*fence)
    elif call == "complete":
        orchestrator.complete_attempt(*fence, "late result", head_sha="late-sha")
    else:
        orchestrator.grant_tool(*fence, "push", "late-sha")


def admit(world: ChildRun, attempt: Attempt) -> None:
    world.orchestrator.admit(attempt.attempt_id)


def claim(world: ChildRun, attempt: Attempt) -> None:
    workspace = WORKSPACE if world.random.random() < 0.9 else "someone/else"
    outcome = world.orchestrator.claim_attempt(attempt.task_id, f"worker-{world.run}-{world.random.randrange(4)}", workspace)
    if isinstance(outcome, Claim):
        world.leases[attempt.attempt_id] = outcome.lease


def go_silent(world: ChildRun, attempt: Attempt) -> None:
    """The worker stops heartbeating (or died with the last crash): let the lease, or the cancel deadline, run out."""
    lease = world.leases.pop(attempt.attempt_id, None)
    if lease is not None:
        world.stale.append(lease)
    world.clock.advance(max(CONFIG.lease_ttl_s, CONFIG.cancel_ack_timeout_s) + 1.0)
    world.orchestrator.reap()


def claimed(world: ChildRun, attempt: Attempt) -> None:
    lease = world.leases.get(attempt.attempt_id)
    if lease is None:
        go_silent(world, attempt)
    elif world.random.random() < 0.8:
        world.orchestrator.start_attempt(attempt.attempt_id, lease.generation, lease.token)
    else:
        world.orchestrator.renew_lease(attempt.attempt_id, lease.generation, lease.token)


def running(world: ChildRun, attempt: Attempt) -> None:
    lease = world.leases.get(attempt.attempt_id)
    if lease is None:
        go_silent(world, attempt)
        return
    fence = (attempt.attempt_id, lease.generation, lease.token)
    orchestrator, choice = world.orchestrator, world.random.random()
    if choice < 0.25:
        orchestrator.renew_lease(*fence)
    elif choice < 0.50:
        call_tool(world, attempt, lease)
    elif choice < 0.58:
        orchestrator.checkpoint(*fence, f"step-{world.random.randrange(100)}")
    elif choice < 0.78:
        orchestrator.complete_attempt(*fence, "PR opened", head_sha=head_sha(world, attempt))
    elif choice < 0.86:
        domain = world.random.choice(("executor", "validation", "provider"))
        orchestrator.report_failure(*fence, domain, f"{domain}:signature-{world.random.randrange(2)}")
    elif choice < 0.94:
        go_silent(world, attempt)
    else:
        orchestrator.cancel_attempt(attempt.attempt_id, "operator changed the plan")


def head_sha(world: ChildRun, attempt: Attempt) -> str:
    """Two candidate commits per task, so a later Attempt sometimes pushes the same content and finds the earlier effect."""
    return f"sha-{attempt.task_id}-{world.random.randrange(2)}"


def call_tool(world: ChildRun, attempt: Attempt, lease: Lease) -> None:
    """Through the gateway: grant, call the provider (whose response is sometimes lost), record the receipt."""
    fence = (attempt.attempt_id, lease.generation, lease.token)
    identity = head_sha(world, attempt)
    grant = world.orchestrator.grant_tool(*fence, "create-pr", identity, call_deadline_s=20.0, cost_usd=0.01, tokens=100)
    if not grant.accepted or grant.replay is not None:
        return
    if world.random.random() < 0.2:
        world.provider.lose_responses(1)
    try:
        effect = world.provider.perform(grant.key, "create-pr", identity, "open the PR")
    except ProviderTimeout:
        return
    if world.random.random() < 0.3:
        world.provider.set_verdict(effect.provider_id, f"failed:test-{world.random.randrange(2)}")
    world.orchestrator.record_receipt(*fence, grant.key, effect.provider_id)


def suspect(world: ChildRun, attempt: Attempt) -> None:
    world.orchestrator.reconcile_attempt(attempt.attempt_id)


def reconciling(world: ChildRun, attempt: Attempt) -> None:
    if world.random.random() < 0.5:
        world.clock.advance(CONFIG.call_deadline_max_s)  # let in-flight calls pass their deadlines
    world.orchestrator.reconcile_attempt(attempt.attempt_id)


def verifying(world: ChildRun, attempt: Attempt) -> None:
    world.orchestrator.verify_attempt(attempt.attempt_id)


def cancelling(world: ChildRun, attempt: Attempt) -> None:
    lease = world.leases.get(attempt.attempt_id)
    if lease is None or world.random.random() < 0.3:
        go_silent(world, attempt)
    else:
        world.orchestrator.acknowledge_cancel(attempt.attempt_id, lease.generation, lease.token)


ATTEMPT_STEPS = {
    "queued": admit,
    "admitted": claim,
    "claimed": claimed,
    "running": running,
    "suspect": suspect,
    "reconciling": reconciling,
    "verifying": verifying,
    "cancelling": cancelling,
}
assert set(ATTEMPT_STEPS) == set(SPEC.attempt.states) - ATTEMPT_TERMINAL, "the crash driver must step every active state"


def conclude(world: ChildRun, task_id: str, latest: Attempt) -> None:
    """The loop decision, then what it asks for: a retry (sometimes with too short a reason), approval, or rest."""
    orchestrator = world.orchestrator
    decision = orchestrator.decide(task_id)
    if decision.kind in ("retry", "correct"):
        reason = f"{latest.failure_domain} failure, trying a new hypothesis" if world.random.random() < 0.9 else "short"
        orchestrator.retry(task_id, reason, Plan(f"hypothesis {latest.number + 1}"))
        return
    if decision.kind == "verify":
        orchestrator.approve(task_id)
    world.active.remove(task_id)


# ---------------------------------------------------------------- what is stored


@dataclass
class Stored:
    tasks: dict[str, Task]
    attempts: dict[str, list[Attempt]]
    intents: list[Intent]
    events: list[Event]
    integrity: list[tuple]


def read_stored(path: Path) -> Stored:
    """Everything on the file, read by a process that did not write it (a second connection)."""
    connection = sqlite3.connect(path)
    try:
        integrity = connection.execute("PRAGMA integrity_check").fetchall()
        task_ids = [row[0] for row in connection.execute("SELECT task_id FROM tasks ORDER BY task_id")]
        keys = [row[0] for row in connection.execute("SELECT key FROM intents ORDER BY key")]
    finally:
        connection.close()
    with SQLiteStore(path, busy_timeout_s=5.0) as store:
        return Stored(
            tasks={task_id: store.get_task(task_id) for task_id in task_ids},
            attempts={task_id: store.get_attempts(task_id) for task_id in task_ids},
            intents=[store.get_intent(key) for key in keys],
            events=store.events(),
            integrity=integrity,
        )


def state_changes(events: list[Event]) -> list[Event]:
    return [event for event in events if event.accepted and event.from_state != event.to_state]


def violations(stored: Stored, before: Stored | None, acknowledged_seq: int = 0) -> list[str]:
    """Every invariant of DESIGN.md that what is stored can show, checked; returns one line per violation."""
    found = [] if stored.integrity == [("ok",)] else [f"integrity_check: {stored.integrity}"]
    seqs = [event.seq for event in stored.events]
    if seqs != list(range(1, len(seqs) + 1)):
        found.append("complete_audit: the history's sequence numbers have gaps or repeats")
    if len(seqs) < acknowledged_seq:
        found.append(f"durability: event {acknowledged_seq} was committed before the kill, the file ends at {len(seqs)}")
    by_attempt: dict[str | None, list[Event]] = defaultdict(list)
    task_events: dict[str, list[Event]] = defaultdict(list)
    for event in stored.events:
        by_attempt[event.attempt_id].append(event)
        if event.attempt_id is None:
            task_events[event.task_id].append(event)
    for task_id, attempts in stored.attempts.items():
        found += attempt_violations(task_id, attempts, by_attempt)
        found += chain_violations(task_id, stored.tasks[task_id].state, task_events[task_id])
    found += intent_violations(stored, by_attempt)
    if before is not None:
        found += history_violations(stored, before)
    return found


def attempt_violations(task_id: str, attempts: list[Attempt], by_attempt: dict) -> list[str]:
    found = []
    if [attempt.number for attempt in attempts] != list(range(1, len(attempts) + 1)):
        found.append(f"append_only_attempts: {task_id} numbers {[attempt.number for attempt in attempts]}")
    for previous, attempt in itertools.pairwise(attempts):
        if attempt.previous_attempt_id != previous.attempt_id or len((attempt.reason or "").strip()) < CONFIG.reason_length_min:
            found.append(f"append_only_attempts: {attempt.attempt_id} names {attempt.previous_attempt_id!r}, reason {attempt.reason!r}")
    if sum(attempt.state in LEASED for attempt in attempts) > 1 or any(a.state not in ATTEMPT_TERMINAL for a in attempts[:-1]):
        found.append(f"single_owner: {task_id} attempts in {[attempt.state for attempt in attempts]}")
    claimed = [attempt.generation for attempt in attempts if attempt.generation]
    if claimed != sorted(set(claimed)):
        found.append(f"fenced_writes: {task_id} generations {claimed} do not increase")
    for attempt in attempts:
        events = by_attempt[attempt.attempt_id]
        found += fence_violations(attempt, events)
        found += chain_violations(attempt.attempt_id, attempt.state, events)
        found += expiry_violations(attempt, events)
    return found


def fence_violations(attempt: Attempt, events: list[Event]) -> list[str]:
    """No accepted fenced worker write, and no accepted claim, under any generation but the Attempt's own."""
    return [
        f"fenced_writes: event {event.seq} {event.kind} accepted at generation {event.generation}, the Attempt's is {attempt.generation}"
        for event in events
        if event.accepted and event.actor == "worker" and (event.kind in FENCED_TRIGGERS or event.kind == "claim")
        if event.generation != attempt.generation
    ]


def chain_violations(name: str, state: str, events: list[Event]) -> list[str]:
    """complete_audit: the accepted state changes run unbroken from creation to the stored state, so no change lacks its event."""
    path = [None]
    for event in state_changes(events):
        if event.from_state != path[-1]:
            return [f"complete_audit: {name} event {event.seq} leaves {event.from_state!r}, but the history had it in {path[-1]!r}"]
        path.append(event.to_state)
    if path[-1] != state:
        return [f"complete_audit: {name} is stored {state!r}, its history ends in {path[-1]!r} ({path})"]
    return []


def expiry_violations(attempt: Attempt, events: list[Event]) -> list[str]:
    """suspect_then_reconcile: after an accepted expiry, Suspect then Reconciling come before any terminal state."""
    expiries = [event for event in events if event.accepted and event.kind == "expire"]
    if not expiries:
        return []
    after = [event.to_state for event in state_changes(events) if event.seq >= expiries[0].seq]
    until_terminal = after[: next((i for i, state in enumerate(after) if state in ATTEMPT_TERMINAL), len(after)) + 1]
    if after[0] != "suspect" or (attempt.state in ATTEMPT_TERMINAL and "reconciling" not in until_terminal):
        return [f"suspect_then_reconcile: {attempt.attempt_id} went {after} after its lease expired"]
    return []


def intent_violations(stored: Stored, by_attempt: dict) -> list[str]:
    """complete_audit: every persisted intent has the accepted grant that minted or re-granted it to its Attempt."""
    return [
        f"complete_audit: intent {intent.key} of {intent.attempt_id} has no accepted grant event"
        for intent in stored.intents
        if not any(event.accepted and event.kind == "grant_tool" and event.detail == intent.key for event in by_attempt[intent.attempt_id])
    ]


def history_violations(stored: Stored, before: Stored) -> list[str]:
    """Across a crash: the history only grew, and every Attempt that was terminal is unchanged."""
    found = []
    if stored.events[: len(before.events)] != before.events:
        found.append("append_only: the history before the crash is not a prefix of the history after it")
    for task_id, attempts in before.attempts.items():
        for old, new in zip(attempts, stored.attempts[task_id], strict=False):
            if old.state in ATTEMPT_TERMINAL and old != new:
                found.append(f"append_only_attempts: terminal {old.attempt_id} changed from {old} to {new}")
    return found


# ---------------------------------------------------------------- after the crash

KILLS = 8
CRASH_SEED = 20240611


def recover_and_carry_on(path: Path, run: int) -> None:
    """A fresh orchestrator on the crashed file: the reaper frees every dead lease, reconciliation ends each, a new claim works."""
    clock = ManualClock(latest_time_s(path) + max(CONFIG.lease_ttl_s, CONFIG.cancel_ack_timeout_s) + 1.0)
    orchestrator = open_orchestrator(path, clock)
    store = orchestrator.store
    try:
        held = {a.attempt_id for task in read_stored(path).attempts.values() for a in task if a.state in (*EXPIRABLE, "cancelling")}
        moved = orchestrator.reap()
        assert {attempt_id for attempt_id, _state in moved} == held
        with store.transaction() as tx:
            unsettled = [a.attempt_id for a in tx.attempts_in(("suspect", "reconciling"))]
            assert tx.attempts_in(EXPIRABLE) == []
        for attempt_id in unsettled:
            outcome = orchestrator.reconcile_attempt(attempt_id)
            assert isinstance(outcome, Reconciliation) and outcome.state not in ("suspect", "reconciling"), (attempt_id, outcome)
        attempt_id = prepare_task(orchestrator, f"after-crash-{run}")
        outcome = orchestrator.claim_attempt(f"after-crash-{run}", "worker-after", WORKSPACE)
        assert isinstance(outcome, Claim) and outcome.lease.generation == 1
        fence = (attempt_id, outcome.lease.generation, outcome.lease.token)
        assert orchestrator.start_attempt(*fence).accepted
        assert orchestrator.renew_lease(*fence).accepted
        assert orchestrator.complete_attempt(*fence, "done", head_sha="sha-after").state == "verifying"
    finally:
        store.close()


def kill_at_a_seeded_moment(path: Path, run: int, chooser: random.Random) -> int:
    """Start the driver, wait until it has taken a seeded number of steps, SIGKILL it; returns the last event it saw committed."""
    signal_after_steps = chooser.randrange(30, 200)
    receiver, sender = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=drive, args=(str(path), run, chooser.randrange(2**32), signal_after_steps, sender), daemon=True)
    child.start()
    sender.close()
    try:
        ready = wait([receiver, child.sentinel], timeout=WAIT_TIMEOUT_S)
        assert ready, f"run {run}: the driver made no progress in {WAIT_TIMEOUT_S} s"
        try:
            acknowledged_seq = receiver.recv()
        except EOFError:
            child.join(timeout=WAIT_TIMEOUT_S)
            raise AssertionError(f"run {run}: the driver died before step {signal_after_steps}, exit code {child.exitcode}") from None
        child.kill()
        child.join(timeout=WAIT_TIMEOUT_S)
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        receiver.close()
    assert child.exitcode == -signal.SIGKILL, f"run {run}: the driver ended by itself (exit code {child.exitcode}) before the kill"
    return acknowledged_seq


@pytest.mark.heavy
def test_sigkilled_driver_leaves_every_invariant_and_a_store_the_next_orchestrator_can_use(tmp_path):
    """Goal: SIGKILL at seeded moments of a run of every contract leaves a file that satisfies every stored invariant.

    After each kill: the file passes integrity_check; no acknowledged commit is
    lost; attempts run 1..N with reasons; one owner per task; no accepted write
    under a foreign fence; each state change has its event and each event its
    change; expiries went Suspect then Reconciling; each intent has its grant;
    the history only grew and terminal Attempts never changed. Then a new
    orchestrator reaps, reconciles and claims on the same file, and the
    invariants hold again. Replay: the seed is CRASH_SEED.
    """
    path = tmp_path / "crash.sqlite"
    SQLiteStore(path).close()
    chooser = random.Random(CRASH_SEED)
    recovered = None
    for run in range(KILLS):
        acknowledged_seq = kill_at_a_seeded_moment(path, run, chooser)
        crashed = read_stored(path)
        assert violations(crashed, recovered, acknowledged_seq) == [], f"run {run}, seed {CRASH_SEED}"
        recover_and_carry_on(path, run)
        recovered = read_stored(path)
        assert violations(recovered, crashed) == [], f"run {run} after recovery, seed {CRASH_SEED}"
    # The run must have exercised what the invariants are about, or passing them proves little.
    kinds = {event.kind for event in recovered.events if event.accepted}
    assert {"claim", "start", "renew", "grant_tool", "complete", "expire", "reconcile", "verified", "retry", "cancel"} <= kinds, kinds
    late = [e for e in recovered.events if not e.accepted and e.kind in FENCED_TRIGGERS and e.reason.startswith("late")]
    assert late, "no late worker call was exercised"


# ---------------------------------------------------------------- the checks themselves

PLANTED = {
    "a state change without its event": (
        "complete_audit",
        "UPDATE attempts SET state = CASE state WHEN 'failed' THEN 'blocked' ELSE 'failed' END"
        " WHERE attempt_id = (SELECT min(attempt_id) FROM attempts)",
    ),
    "an intent without its grant": (
        "complete_audit: intent",
        "DELETE FROM events WHERE kind = 'grant_tool' AND accepted = 1 AND detail = (SELECT min(key) FROM intents)",
    ),
    "a write accepted under a foreign fence": (
        "fenced_writes",
        "UPDATE events SET generation = generation + 100 WHERE seq = (SELECT min(seq) FROM events WHERE kind = 'start' AND accepted = 1)",
    ),
    "a retry without its reason": ("append_only_attempts", "UPDATE attempts SET reason = 'short' WHERE number = 2"),
    "a gap in the attempt numbers": ("append_only_attempts", "UPDATE attempts SET number = 7 WHERE number = 2"),
    "two owners": (
        "single_owner",
        "UPDATE attempts SET state = 'running' WHERE number <= 2 AND task_id IN (SELECT task_id FROM attempts WHERE number = 2)",
    ),
    "an expiry that skipped Suspect": (
        "suspect_then_reconcile",
        "UPDATE events SET to_state = 'failed' WHERE seq = (SELECT min(seq) FROM events WHERE kind = 'expire' AND accepted = 1)",
    ),
    "a rewritten terminal attempt": (
        "terminal",
        "UPDATE attempts SET result = 'rewritten' WHERE attempt_id = (SELECT min(attempt_id) FROM attempts WHERE state = 'failed')",
    ),
    "a lost history entry": ("not a prefix", "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)"),
}


def plant(clean: Path, copy: Path, statement: str) -> int:
    """Copy the clean file and run one rewriting statement on the copy, bypassing the store; returns the rows it changed."""
    source, target = sqlite3.connect(clean), sqlite3.connect(copy, isolation_level=None)
    try:
        source.backup(target)
        return target.execute(statement).rowcount
    finally:
        source.close()
        target.close()


def test_the_stored_invariant_checks_catch_each_planted_violation(tmp_path):
    """Goal: the checks the crash test relies on are not vacuous: each planted violation on a copy of a clean run is named.

    The clean run is the crash driver in this process, with no kill; it passes
    first, then each copy has one fact rewritten behind the store's back.
    """
    clean = tmp_path / "clean.sqlite"
    SQLiteStore(clean).close()
    world = make_world(clean, run=0, seed=CRASH_SEED)
    for _ in range(400):
        take_step(world)
    world.orchestrator.store.close()
    reference = read_stored(clean)
    assert violations(reference, None) == []
    for name, (expected, statement) in PLANTED.items():
        copy = tmp_path / (name.replace(" ", "-") + ".sqlite")
        assert plant(clean, copy, statement) >= 1, f"{name}: the clean run has nothing to plant it on"
        found = violations(read_stored(copy), reference)
        assert any(expected in line for line in found), (name, found)
