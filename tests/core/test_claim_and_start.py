"""`claim_next_and_start`: the claim and the start in one store transaction are the two calls one after the other, on every store."""

from __future__ import annotations

from shiftchange.core import AdmissionConfig, Claim, CoreConfig, LedgerProvider, ManualClock, Orchestrator, Plan, ReliabilityConfig


def _orchestrator(store, clock):
    limits = AdmissionConfig(queue_depth_max=1000, queue_age_max_s=1e6, partition_concurrency_max=1000)
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(), ReliabilityConfig(admission=limits))


def _admitted(orchestrator, clock, count):
    for number in range(count):
        task_id = f"task-{number}"
        orchestrator.create_task(task_id, "claim and start", "repo-a")
        orchestrator.accept_task(task_id)
        orchestrator.dispatch(task_id, Plan("first hypothesis"))
        clock.advance(1.0)
    orchestrator.run_admission()


def _history(store):
    return [(e.kind, e.task_id, e.attempt_id, e.accepted, e.from_state, e.to_state, e.generation, e.worker_id) for e in store.events()]


def test_claim_next_and_start_is_the_two_calls_in_one_transaction(make_store):
    """Goal: same records and same history as claim_next then start_attempt; the second claimer gets the next task; None when dry."""
    one, two = make_store(), make_store()
    clock_one, clock_two = ManualClock(100.0), ManualClock(100.0)
    together, apart = _orchestrator(one, clock_one), _orchestrator(two, clock_two)
    _admitted(together, clock_one, 2)
    _admitted(apart, clock_two, 2)
    for _ in range(2):
        claimed = together.claim_next_and_start("worker-1", "repo-a")
        assert isinstance(claimed, tuple), claimed
        claim, started = claimed
        assert isinstance(claim, Claim) and started.accepted and started.state == "running"
        lease = apart.claim_next("worker-1", "repo-a").lease
        assert apart.start_attempt(lease.attempt_id, lease.generation, "wrong token").code == "forged"  # the fence is still asked
        assert apart.start_attempt(lease.attempt_id, lease.generation, lease.token).accepted
        assert (lease.attempt_id, lease.generation) == (claim.lease.attempt_id, claim.lease.generation)
    assert together.claim_next_and_start("worker-1", "repo-a") is None
    forged_refusal = [e for e in _history(two) if not e[3]]
    assert len(forged_refusal) == 2
    assert _history(one) == [e for e in _history(two) if e[3]]
    for task in ("task-0", "task-1"):
        (mine,), (theirs,) = one.get_attempts(task), two.get_attempts(task)
        assert (mine.state, mine.worker_id, mine.generation, mine.started_at, mine.claimed_at) == (
            theirs.state,
            theirs.worker_id,
            theirs.generation,
            theirs.started_at,
            theirs.claimed_at,
        )
