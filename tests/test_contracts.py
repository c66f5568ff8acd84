"""The store contract suite: the chapter's contracts, run unchanged against every store.

Every test builds one `Orchestrator` over the store under test (the `store`
fixture is parametrized over the store factories, Trio's
`check_one_way_stream(maker)` habit), a `ManualClock` and a `LedgerProvider`,
drives it through the contracts the chapter names, and asserts what the
chapter says must hold. A store that passes this suite can stand in for any
other.

The history is checked as closely as the records: every contract call,
accepted or refused, appends exactly one event, except these documented
compound calls:

- `dispatch` and `retry`, when accepted: 2 (the task transition, then the
  appended Attempt);
- `reconcile_attempt` from Suspect: 2 (Suspect to Reconciling, then the
  outcome);
- `cancel_attempt` of an Attempt nobody holds: 3 (cancel, cancel_unclaimed,
  the reconciliation outcome); `acknowledge_cancel`: 2 (the acknowledgement,
  the reconciliation outcome);
- `complete_attempt` refused on a Suspect or overdue Attempt: 1, plus the
  reaper's and reconciliation's events it triggers;
- `decide`: 1, plus 1 when the decision moves the task;
- `reap`: 1 per Attempt it moves, none when nothing is due.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from shiftchange.core import (
    Attempt,
    Budget,
    Claim,
    CoreConfig,
    Decision,
    Event,
    Grant,
    InputError,
    Lease,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    NotFound,
    Orchestrator,
    Plan,
    ProviderTimeout,
    Reconciliation,
    Refused,
    Renewal,
    Store,
)
from shiftchange.core.config import BackoffConfig, ReliabilityConfig
from shiftchange.core.sqlite_store import SQLiteStore

WORKSPACE = "repo-a"
FIRST_HYPOTHESIS = "the fixture leaks a port between tests"
CHANGED_HYPOTHESIS = "the port is reused because SO_REUSEADDR is missing"
REASON = "lease lost and reconciliation found nothing"

STORES: dict[str, Callable] = {
    "memory": lambda tmp_path: MemoryStore(),
    "sqlite": lambda tmp_path: SQLiteStore(tmp_path / "store.sqlite"),
}


@pytest.fixture(params=sorted(STORES))
def store(request, tmp_path) -> Iterator[Store]:
    made = STORES[request.param](tmp_path)
    yield made
    made.close()


class World:
    """One orchestrator over the store under test, a manual clock and a ledger provider, with steps that drive Attempts."""

    def __init__(self, store: Store, supports_idempotency: bool = True, **config: float) -> None:
        self.store = store
        self.clock = ManualClock()
        self.provider = LedgerProvider(supports_idempotency=supports_idempotency, clock=self.clock)
        self.config = CoreConfig(**config)
        # No backoff here: these tests claim a retry at once; tests/test_reliability.py proves the pacing.
        reliability = ReliabilityConfig(backoff=BackoffConfig(strategy="none"))
        self.orchestrator = Orchestrator(store, self.clock, self.provider, self.config, reliability)
        self.task_ids: list[str] = []

    # ---- steps that must succeed: each asserts it did, so a broken step fails where it broke.

    def task(self, task_id: str = "task-1", budget: Budget | None = None) -> str:
        self.orchestrator.create_task(task_id, "make the flaky test pass", WORKSPACE, scope="tests/", budget=budget)
        assert self.orchestrator.accept_task(task_id).accepted
        self.task_ids.append(task_id)
        return task_id

    def dispatched(self, task_id: str = "task-1", budget: Budget | None = None) -> str:
        self.task(task_id, budget)
        assert self.orchestrator.dispatch(task_id, Plan(FIRST_HYPOTHESIS)).accepted
        return f"{task_id}#1"

    def claimed(self, attempt_id: str, worker_id: str = "worker-a") -> Lease:
        assert self.orchestrator.admit(attempt_id).state == "admitted"
        claim = self.orchestrator.claim_attempt(attempt_id.split("#")[0], worker_id, WORKSPACE)
        assert isinstance(claim, Claim), claim
        return claim.lease

    def started(self, attempt_id: str, worker_id: str = "worker-a") -> Lease:
        lease = self.claimed(attempt_id, worker_id)
        assert self.orchestrator.start_attempt(*fence(lease)).state == "running"
        return lease

    def running(self, task_id: str = "task-1", worker_id: str = "worker-a", budget: Budget | None = None) -> Lease:
        return self.started(self.dispatched(task_id, budget), worker_id)

    def retried(self, task_id: str = "task-1", hypothesis: str = FIRST_HYPOTHESIS, worker_id: str = "worker-b") -> Lease:
        attempts = self.store.get_attempts(task_id)
        assert self.orchestrator.retry(task_id, REASON, Plan(hypothesis)).accepted
        return self.started(f"{task_id}#{len(attempts) + 1}", worker_id)

    def failed(self, lease: Lease, domain: str = "executor", signature: str = "worker crashed") -> Attempt:
        """The worker reports a failure; reconciliation finds nothing landed and the Attempt ends failed."""
        assert self.orchestrator.report_failure(*fence(lease), domain, signature).state == "reconciling"
        assert self.orchestrator.reconcile_attempt(lease.attempt_id).state in ("failed", "quarantined")
        return self.attempt(lease.attempt_id)

    def expired(self, lease: Lease) -> None:
        """The worker vanishes: its lease runs out and the reaper makes the Attempt Suspect."""
        self.clock.advance(self.config.lease_ttl_s + 1)
        assert (lease.attempt_id, "suspect") in self.orchestrator.reap()

    def landed(self, lease: Lease, identity: str = "sha-1") -> tuple[Grant, str]:
        """Grant create-pr, let it land at the provider, and record the receipt."""
        grant = self.orchestrator.grant_tool(*fence(lease), "create-pr", identity, request="open the pull request")
        assert isinstance(grant, Grant), grant
        effect = self.provider.perform(grant.key, "create-pr", identity, "open the pull request")
        assert self.orchestrator.record_receipt(*fence(lease), grant.key, effect.provider_id, f"url of {effect.provider_id}").accepted
        return grant, effect.provider_id

    def attempt(self, attempt_id: str) -> Attempt:
        found = self.store.get_attempt(attempt_id)
        assert found is not None
        return found

    def snapshot(self) -> tuple:
        """Everything the store holds for the tasks of this world, plus the provider's ledger."""
        attempts = [self.store.get_attempts(t) for t in self.task_ids]
        intents = [self.store.get_intents(a.attempt_id) for group in attempts for a in group]
        tasks = [self.store.get_task(t) for t in self.task_ids]
        return self.store.events(), tasks, attempts, intents, list(self.provider.ledger)


@pytest.fixture
def world(store) -> World:
    return World(store)


def fence(lease: Lease) -> tuple[str, int, str]:
    return lease.attempt_id, lease.generation, lease.token


@contextmanager
def appends(store: Store, count: int) -> Iterator[list[Event]]:
    """The block must append exactly `count` events to the history; yields the list they are gathered into."""
    history = store.events()
    last = history[-1].seq if history else 0
    appended: list[Event] = []
    yield appended
    appended.extend(store.events(after_seq=last))
    assert len(appended) == count, [(e.kind, e.accepted, e.reason) for e in appended]


def states_passed(store: Store, attempt_id: str) -> list[str]:
    """The Attempt's path through its machine, read only from the history's accepted events."""
    path = []
    for event in store.events():
        if event.attempt_id == attempt_id and event.accepted and event.to_state is not None and event.to_state not in path[-1:]:
            path.append(event.to_state)
    return path


# ------------------------------------------------------------------ dispatch


def test_dispatch_appends_attempt_one_queued_for_a_ready_task(world):
    """First dispatch of a ready task with no Attempt appends Attempt 1, queued, and moves the task in progress."""
    world.task()
    with appends(world.store, 2) as events:
        result = world.orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))
    assert result.accepted and result.state == "in_progress"
    [attempt] = world.store.get_attempts("task-1")
    assert (attempt.number, attempt.state, attempt.previous_attempt_id, attempt.hypothesis) == (1, "queued", None, FIRST_HYPOTHESIS)
    assert [(e.kind, e.accepted) for e in events] == [("dispatch", True), ("append", True)]


def test_second_dispatch_is_refused_and_appends_no_attempt(world):
    """A task that already has an Attempt cannot be dispatched again."""
    world.dispatched()
    with appends(world.store, 1) as events:
        result = world.orchestrator.dispatch("task-1", Plan(CHANGED_HYPOTHESIS))
    assert isinstance(result, Refused)
    assert len(world.store.get_attempts("task-1")) == 1
    assert events[0].kind == "dispatch" and not events[0].accepted


def test_dispatch_of_an_inbox_task_is_refused(world):
    """A task still in the inbox was never accepted for work, so dispatch refuses it."""
    world.orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE)
    with appends(world.store, 1) as events:
        result = world.orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))
    assert isinstance(result, Refused)
    assert world.store.get_attempts("task-1") == []
    assert world.store.get_task("task-1").state == "inbox"
    assert not events[0].accepted


# --------------------------------------------------------------------- retry


def test_retry_is_refused_while_an_attempt_is_active(world):
    """No retry while the task's Attempt is still active."""
    world.running()
    with appends(world.store, 1) as events:
        result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
    assert isinstance(result, Refused) and "no_active_attempt" in result.reason
    assert len(world.store.get_attempts("task-1")) == 1
    assert not events[0].accepted


def end_succeeded(world: World) -> str:
    lease = world.running()
    world.landed(lease)
    world.orchestrator.complete_attempt(*fence(lease), "opened the pull request", head_sha="sha-1")
    assert world.orchestrator.verify_attempt(lease.attempt_id).state == "succeeded"
    return lease.attempt_id


def end_blocked(world: World) -> str:
    lease = world.running()
    world.orchestrator.complete_attempt(*fence(lease), "done, trust me")
    assert world.orchestrator.verify_attempt(lease.attempt_id).state == "blocked"
    return lease.attempt_id


def end_quarantined(world: World) -> str:
    world.failed(world.running(), "executor", "segfault in the sandbox")
    second = world.retried()
    assert world.failed(second, "executor", "segfault in the sandbox").state == "quarantined"
    return second.attempt_id


def end_cancelled(world: World) -> str:
    attempt_id = world.dispatched()
    assert world.orchestrator.cancel_attempt(attempt_id, "operator stops the run").state == "cancelled"
    return attempt_id


@pytest.mark.parametrize("end", [end_succeeded, end_blocked, end_quarantined, end_cancelled], ids=lambda f: f.__name__)
def test_retry_is_refused_when_the_latest_attempt_did_not_fail(world, end):
    """Retry needs the latest Attempt to have failed: success, blocked, quarantined or cancelled is no ground for one."""
    end(world)
    count = len(world.store.get_attempts("task-1"))
    with appends(world.store, 1):
        result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
    assert isinstance(result, Refused) and "latest_attempt_failed" in result.reason
    assert len(world.store.get_attempts("task-1")) == count


@pytest.mark.parametrize(
    ("reason", "accepted"), [("too short", False), ("   short    ", False), ("ten chars!", True)], ids=["nine", "padded-five", "ten"]
)
def test_retry_needs_a_reason_of_at_least_ten_characters(world, reason, accepted):
    """The recovery reason must have at least ten characters, not counting surrounding blanks."""
    world.failed(world.running())
    result = world.orchestrator.retry("task-1", reason, Plan(FIRST_HYPOTHESIS))
    assert result.accepted is accepted
    assert ("reason_given" in result.reason) if not accepted else result.state == "in_progress"
    assert len(world.store.get_attempts("task-1")) == (2 if accepted else 1)


def test_retry_after_an_authorization_failure_is_refused_by_policy(world):
    """Authorization failures stop: policy forbids an automatic retry even with a changed hypothesis."""
    world.failed(world.running(), "authorization", "403 on push")
    with appends(world.store, 1):
        result = world.orchestrator.retry("task-1", "the token was rotated meanwhile", Plan(CHANGED_HYPOTHESIS))
    assert isinstance(result, Refused) and "policy_permits_retry" in result.reason
    assert len(world.store.get_attempts("task-1")) == 1


def test_retry_after_a_validation_failure_needs_a_changed_hypothesis(world):
    """Validation failures need a changed hypothesis: repeating the plan is refused, changing it is accepted."""
    world.failed(world.running(), "validation", "test_ports fails")
    for same in (FIRST_HYPOTHESIS, f"  {FIRST_HYPOTHESIS}  "):
        refused = world.orchestrator.retry("task-1", "tests failed, trying again", Plan(same))
        assert isinstance(refused, Refused) and "policy_permits_retry" in refused.reason
    assert len(world.store.get_attempts("task-1")) == 1
    assert world.orchestrator.retry("task-1", "tests failed, new diagnosis", Plan(CHANGED_HYPOTHESIS)).accepted
    assert world.store.get_attempt("task-1#2").hypothesis == CHANGED_HYPOTHESIS


def test_retry_with_the_attempts_budget_exhausted_is_refused(world):
    """When every allowed Attempt has been used, retry is refused on the budget."""
    world.failed(world.running(budget=Budget(attempts_max=2)), "executor", "worker killed")
    world.failed(world.retried(), "executor", "sandbox out of memory")
    with appends(world.store, 1):
        result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
    assert isinstance(result, Refused) and "budget_left" in result.reason
    assert len(world.store.get_attempts("task-1")) == 2


def test_accepted_retry_appends_attempt_n_plus_one_naming_its_predecessor_and_reason(world):
    """An accepted retry appends Attempt N+1, queued, linked to Attempt N with the recorded reason."""
    world.failed(world.running())
    with appends(world.store, 2) as events:
        result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
    assert result.accepted
    first, second = world.store.get_attempts("task-1")
    assert (second.number, second.state, second.previous_attempt_id, second.reason) == (2, "queued", first.attempt_id, REASON)
    assert [(e.kind, e.accepted) for e in events] == [("retry", True), ("append", True)]
    assert events[1].attempt_id == second.attempt_id


def test_attempt_numbers_run_one_to_n_without_gaps(world):
    """Each retry appends the next number; every Attempt but the first names the one before it."""
    world.failed(world.running(), "executor", "worker killed")
    world.failed(world.retried(worker_id="worker-b"), "provider", "503 from the forge")
    world.failed(world.retried(worker_id="worker-c"), "capacity", "429 from the model")
    attempts = world.store.get_attempts("task-1")
    assert [a.number for a in attempts] == [1, 2, 3]
    assert len({a.attempt_id for a in attempts}) == 3
    assert [a.previous_attempt_id for a in attempts] == [None, attempts[0].attempt_id, attempts[1].attempt_id]


def test_failed_attempt_is_never_rewritten(world):
    """A failed Attempt is immutable evidence: retry, a new claim and every late call leave each of its fields as they were."""
    old = world.running()
    frozen = world.failed(old)
    new = world.retried()
    orchestrator = world.orchestrator
    orchestrator.renew_lease(*fence(old))
    orchestrator.complete_attempt(*fence(old), "finished late")
    orchestrator.report_failure(*fence(old), "executor", "late report")
    orchestrator.cancel_attempt(old.attempt_id, "operator tidies up")
    orchestrator.reconcile_attempt(old.attempt_id)
    orchestrator.verify_attempt(old.attempt_id)
    world.clock.advance(1000)
    orchestrator.reap()
    orchestrator.reconcile_attempt(new.attempt_id)
    assert world.attempt(old.attempt_id) == frozen


# --------------------------------------------------------------------- claim


def test_claim_returns_a_fenced_lease_and_the_frozen_manifest(world):
    """A claim issues a lease (owner, generation, unguessable token, expiry now + lease_ttl_s) and the manifest the Attempt recorded."""
    attempt_id = world.dispatched()
    world.orchestrator.admit(attempt_id)
    world.clock.advance(5)
    with appends(world.store, 1) as events:
        claim = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
    assert isinstance(claim, Claim)
    lease = claim.lease
    assert (lease.attempt_id, lease.owner, lease.generation) == (attempt_id, "worker-a", 1)
    assert lease.expires_at == 5 + world.config.lease_ttl_s
    assert len(lease.token) >= 32
    stored = world.attempt(attempt_id)
    assert (stored.state, stored.worker_id, stored.generation, stored.expires_at) == ("claimed", "worker-a", 1, lease.expires_at)
    assert claim.manifest.digest() == stored.manifest_digest
    assert (claim.manifest.attempt_number, claim.manifest.hypothesis, claim.manifest.workspace) == (1, FIRST_HYPOTHESIS, WORKSPACE)
    assert lease.token not in repr(stored), "the store keeps only the token's digest"
    assert events[0].accepted and events[0].generation == 1


def test_two_claims_get_different_unguessable_tokens(world):
    """Tokens are long and never repeat, so no worker can guess another's fence."""
    first = world.claimed(world.dispatched("task-1"), "worker-a")
    second = world.claimed(world.dispatched("task-2"), "worker-b")
    assert first.token != second.token
    assert min(len(first.token), len(second.token)) >= 32


def test_second_claimer_is_refused_and_gets_no_lease(world):
    """Claim is atomic: a second caller is refused, receives no lease, and the holder's lease stands."""
    held = world.claimed(world.dispatched(), "worker-a")
    before = world.attempt(held.attempt_id)
    with appends(world.store, 1) as events:
        result = world.orchestrator.claim_attempt("task-1", "worker-b", WORKSPACE)
    assert isinstance(result, Refused) and not hasattr(result, "lease")
    assert world.attempt(held.attempt_id) == before
    assert not events[0].accepted
    assert world.orchestrator.renew_lease(*fence(held)).accepted


def test_claim_events_name_the_claiming_worker(world):
    """The history says which worker asked for a claim, whether it was granted or refused."""
    world.claimed(world.dispatched(), "worker-a")
    world.orchestrator.claim_attempt("task-1", "worker-b", WORKSPACE)
    claims = [e for e in world.store.events() if e.kind == "claim"]
    assert [(e.accepted, e.worker_id) for e in claims] == [(True, "worker-a"), (False, "worker-b")]


@pytest.mark.parametrize(
    ("workspace", "healthy", "guard"),
    [("repo-b", True, "workspace_matches"), (WORKSPACE, False, "worker_healthy")],
    ids=["other-workspace", "unhealthy"],
)
def test_claim_by_a_foreign_or_unhealthy_worker_is_refused(world, workspace, healthy, guard):
    """Only a healthy worker serving the task's workspace may claim."""
    attempt_id = world.dispatched()
    world.orchestrator.admit(attempt_id)
    before = world.attempt(attempt_id)
    with appends(world.store, 1):
        result = world.orchestrator.claim_attempt("task-1", "worker-x", workspace, healthy=healthy)
    assert isinstance(result, Refused) and guard in result.reason
    assert world.attempt(attempt_id) == before


def test_queued_attempt_cannot_be_claimed(world):
    """An Attempt must pass admission before any worker can claim it."""
    attempt_id = world.dispatched()
    with appends(world.store, 1):
        result = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
    assert isinstance(result, Refused)
    assert world.attempt(attempt_id).state == "queued" and world.attempt(attempt_id).token_digest is None


def test_generation_increases_across_attempts_of_one_task(world):
    """Each new lease of a task carries a higher generation than every lease before it."""
    first = world.running()
    world.failed(first)
    second = world.retried()
    world.failed(second, "provider", "503 from the forge")
    third = world.retried(worker_id="worker-c")
    assert first.generation < second.generation < third.generation


# --------------------------------------------------------------------- renew


def test_renew_with_the_current_fence_extends_expiry(world):
    """A heartbeat under the current generation and token moves expiry to now + lease_ttl_s."""
    lease = world.running()
    world.clock.advance(20)
    with appends(world.store, 1):
        renewal = world.orchestrator.renew_lease(*fence(lease))
    assert isinstance(renewal, Renewal) and not renewal.cancel_requested
    assert renewal.expires_at == 20 + world.config.lease_ttl_s == world.attempt(lease.attempt_id).expires_at
    world.clock.advance(world.config.lease_ttl_s - 1)
    assert world.orchestrator.reap() == []


def forged_fences(world: World) -> dict[str, tuple[str, int, str]]:
    """Fences that must not renew task-1's current Attempt (generation 2): stale, forged, and another worker's own."""
    world.failed(world.running("task-1", "worker-a"))
    current = world.retried("task-1", worker_id="worker-b")
    world.failed(world.running("task-2", "worker-c"))
    other = world.retried("task-2", worker_id="worker-d")
    assert other.generation == current.generation
    return {
        "current": fence(current),
        "stale generation": (current.attempt_id, current.generation - 1, current.token),
        "forged token": (current.attempt_id, current.generation, "f" * 43),
        "someone else's attempt": (current.attempt_id, other.generation, other.token),
    }


@pytest.mark.parametrize("forgery", ["stale generation", "forged token", "someone else's attempt"])
def test_renew_without_the_current_fence_is_refused_and_recorded(world, forgery):
    """Stale, forged or borrowed fences are refused, kept as refused events with the generation they presented, and change nothing."""
    fences = forged_fences(world)
    attempt_id, generation, token = fences[forgery]
    before = world.attempt(attempt_id)
    with appends(world.store, 1) as events:
        result = world.orchestrator.renew_lease(attempt_id, generation, token)
    assert isinstance(result, Refused)
    assert world.attempt(attempt_id) == before
    [event] = events
    assert (event.kind, event.accepted, event.generation, event.attempt_id) == ("renew", False, generation, attempt_id)
    assert world.orchestrator.renew_lease(*fences["current"]).accepted


def test_renew_tells_the_worker_that_cancellation_was_requested(world):
    """After cancel_attempt, the holder learns of the request from its next heartbeat."""
    lease = world.running()
    assert world.orchestrator.renew_lease(*fence(lease)).cancel_requested is False
    world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
    renewal = world.orchestrator.renew_lease(*fence(lease))
    assert isinstance(renewal, Renewal) and renewal.cancel_requested is True


def test_renew_after_the_lease_expired_is_refused(world):
    """Once the expiry has passed, the lease is gone even before the reaper runs: renewal cannot revive it."""
    lease = world.running()
    expires_at = lease.expires_at
    world.clock.set(expires_at)
    with appends(world.store, 1) as events:
        result = world.orchestrator.renew_lease(*fence(lease))
    assert isinstance(result, Refused) and "lease_current" in result.reason
    assert world.attempt(lease.attempt_id).expires_at == expires_at
    assert not events[0].accepted and events[0].generation == lease.generation


# ------------------------------------------------------------------ complete


def test_complete_with_the_current_fence_moves_to_verifying(world):
    """The holder's completion is accepted as a claim to verify, never as success."""
    lease = world.running()
    world.clock.advance(12)
    with appends(world.store, 1) as events:
        result = world.orchestrator.complete_attempt(*fence(lease), "opened the pull request", head_sha="sha-1")
    assert result.accepted and result.state == "verifying"
    stored = world.attempt(lease.attempt_id)
    assert (stored.state, stored.result, stored.head_sha, stored.elapsed_s) == ("verifying", "opened the pull request", "sha-1", 12)
    assert events[0].generation == lease.generation


def superseded(world: World) -> tuple[Lease, Lease]:
    """The old worker's lease expired; it was reaped and reconciled, the task retried, and a new worker claimed."""
    old = world.running("task-1", "worker-a")
    world.expired(old)
    assert world.orchestrator.reconcile_attempt(old.attempt_id).state == "failed"
    new = world.retried(worker_id="worker-b")
    return old, new


def test_stale_completion_after_takeover_is_refused_and_changes_nothing(world):
    """The old worker's completion, on its own Attempt or the new one, is refused and leaves both Attempts and the task as they were."""
    old, new = superseded(world)
    before = world.snapshot()[1:]
    for attempt_id in (old.attempt_id, new.attempt_id):
        with appends(world.store, 1) as events:
            result = world.orchestrator.complete_attempt(attempt_id, old.generation, old.token, "done, trust me")
        assert isinstance(result, Refused)
        assert (events[0].kind, events[0].accepted, events[0].generation) == ("complete", False, old.generation)
    assert world.snapshot()[1:] == before
    assert world.orchestrator.renew_lease(*fence(new)).accepted


def test_stale_completion_after_takeover_is_kept_as_a_late_event(world):
    """A completion presenting a generation older than the task's current lease is kept in the history as late."""
    old, new = superseded(world)
    for attempt_id in (new.attempt_id, old.attempt_id):
        with appends(world.store, 1) as events:
            world.orchestrator.complete_attempt(attempt_id, old.generation, old.token, "done, trust me")
        assert events[0].reason.startswith("late"), events[0].reason


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "not-yet-reaped"])
def test_late_completion_on_an_expired_attempt_triggers_reconciliation(world, reaped):
    """A late completion is evidence that effects may exist: it is refused and the Attempt leaves Suspect through reconciliation."""
    lease = world.running()
    if reaped:
        world.expired(lease)
    else:
        world.clock.advance(world.config.lease_ttl_s + 1)
    with appends(world.store, 3 if reaped else 4) as events:
        result = world.orchestrator.complete_attempt(*fence(lease), "finished, a bit late")
    assert isinstance(result, Refused)
    assert events[0].kind == "complete" and not events[0].accepted
    assert world.attempt(lease.attempt_id).state == "failed"
    assert states_passed(world.store, lease.attempt_id)[-3:] == ["suspect", "reconciling", "failed"]


# -------------------------------------------------------------------- reaper


def test_reaper_makes_expired_attempts_suspect_and_leaves_live_ones(world):
    """Expiry makes an Attempt Suspect, never Failed; a renewed lease is not touched."""
    quiet = world.running("task-1", "worker-a")
    busy = world.running("task-2", "worker-b")
    world.clock.advance(world.config.lease_ttl_s - 5)
    world.orchestrator.renew_lease(*fence(busy))
    world.clock.advance(10)
    before = world.attempt(busy.attempt_id)
    with appends(world.store, 1) as events:
        moved = world.orchestrator.reap()
    assert moved == [(quiet.attempt_id, "suspect")]
    suspect = world.attempt(quiet.attempt_id)
    assert (suspect.state, suspect.failure_domain) == ("suspect", None)
    assert world.attempt(busy.attempt_id) == before
    assert (events[0].kind, events[0].actor, events[0].to_state) == ("expire", "reaper", "suspect")
    with appends(world.store, 0):
        assert world.orchestrator.reap() == []


# ----------------------------------------------------------------- reconcile


def test_reconcile_finds_a_landed_effect_records_its_receipt_and_ends_failed(world):
    """An effect found without a reported result is recorded on the intent, and the Attempt ends failed (executor), never verifying."""
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    effect = world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
    world.expired(lease)
    with appends(world.store, 2):
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert isinstance(result, Reconciliation) and (result.outcome, result.state) == ("landed", "failed")
    assert world.store.get_intent(grant.key).receipt == effect.provider_id
    assert states_passed(world.store, lease.attempt_id)[-3:] == ["suspect", "reconciling", "failed"]
    failed = world.attempt(lease.attempt_id)
    assert (failed.reconciliation, failed.failure_domain) == ("landed", "executor")
    assert failed.failure_signature == "executor:lease lost after effects landed"


def test_reconcile_with_nothing_landed_at_an_idempotent_provider_fails_with_domain_executor(world):
    """An idempotent provider's answer is authoritative: nothing under the key means nothing landed."""
    lease = world.running()
    world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", call_deadline_s=600)
    world.expired(lease)
    result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert (result.outcome, result.state) == ("absent", "failed")
    assert world.attempt(lease.attempt_id).failure_domain == "executor"


def test_reconcile_waits_for_in_flight_calls_at_a_provider_without_idempotency(store):
    """Without idempotency, absence proves nothing until the call's deadline passed: pending first, then failed."""
    world = World(store, supports_idempotency=False)
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", call_deadline_s=60)
    world.expired(lease)
    for _ in range(2):
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        assert (result.outcome, result.state) == ("pending", "reconciling")
        assert world.attempt(lease.attempt_id).state == "reconciling"
    world.clock.set(grant.deadline_at)
    with appends(world.store, 1):
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert (result.outcome, result.state) == ("absent", "failed")
    assert world.attempt(lease.attempt_id).failure_domain == "executor"


def test_two_effects_for_one_key_end_blocked_with_contradictory_evidence(store):
    """Two effects for one logical operation cannot both be right: the Attempt ends Blocked with its evidence, never succeeded."""
    world = World(store, supports_idempotency=False)
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    for _ in range(2):
        world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
    world.expired(lease)
    result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert (result.outcome, result.state) == ("contradictory", "blocked")
    blocked = world.attempt(lease.attempt_id)
    assert blocked.failure_domain == "contradictory_evidence" and grant.key in blocked.evidence


def test_reconcile_finds_an_effect_whose_response_was_lost_and_ends_failed_with_its_receipt(world):
    """The provider accepted the call but the response was lost: reconciliation finds the effect by its key, records it, and fails."""
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    world.provider.lose_responses(1)
    with pytest.raises(ProviderTimeout):
        world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
    assert world.store.get_intent(grant.key).receipt is None
    world.expired(lease)
    result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert (result.outcome, result.state) == ("landed", "failed")
    assert world.store.get_intent(grant.key).receipt == world.provider.ledger[0].provider_id
    assert len(world.provider.ledger) == 1


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent-provider", "no-idempotency"])
def test_recovery_resumes_from_a_landed_pr_whose_response_was_lost(store, idempotent):
    """Attempt 1's PR lands unseen and its lease expires: it fails (landed), Attempt 2's grant replays that PR, completes and succeeds."""
    world = World(store, supports_idempotency=idempotent)
    first = world.running()
    grant = world.orchestrator.grant_tool(*fence(first), "create-pr", "sha-1", request="open the pull request")
    world.provider.lose_responses(1)
    with pytest.raises(ProviderTimeout):
        world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
    world.expired(first)
    result = world.orchestrator.reconcile_attempt(first.attempt_id)
    assert (result.outcome, result.state) == ("landed", "failed")
    [effect] = world.provider.ledger
    ended = world.attempt(first.attempt_id)
    assert (ended.state, ended.reconciliation, ended.failure_domain) == ("failed", "landed", "executor")
    assert ended.failure_signature == "executor:lease lost after effects landed"
    assert world.store.get_intent(grant.key).receipt == effect.provider_id

    decision = world.orchestrator.decide("task-1")
    assert isinstance(decision, Decision) and decision.kind == "retry"
    second = world.retried()
    assert world.attempt(second.attempt_id).previous_attempt_id == first.attempt_id
    replay = world.orchestrator.grant_tool(*fence(second), "create-pr", "sha-1", request="open the pull request")
    assert isinstance(replay, Grant)
    assert (replay.key, replay.replay) == (grant.key, effect.provider_id)
    assert world.provider.effects_for("create-pr", "sha-1") == [effect]
    assert len(world.provider.ledger) == 1
    assert world.store.get_intent(grant.key).attempt_id == second.attempt_id

    assert world.orchestrator.complete_attempt(*fence(second), "opened the pull request", head_sha="sha-1").state == "verifying"
    assert world.orchestrator.verify_attempt(second.attempt_id).state == "succeeded"
    assert effect.provider_id in world.attempt(second.attempt_id).evidence
    assert world.orchestrator.decide("task-1").kind == "verify"
    assert [a.state for a in world.store.get_attempts("task-1")] == ["failed", "succeeded"]
    assert len(world.provider.ledger) == 1


@pytest.mark.parametrize("crash", ["lease-expired", "failure-reported"])
def test_a_crash_after_a_partial_workflow_does_not_end_succeeded(world, crash):
    """The push landed but the PR was never opened and no result was reported: the Attempt fails with the push recorded, never succeeds."""
    lease = world.running()
    push = world.orchestrator.grant_tool(*fence(lease), "push", "sha-1", spans_attempts=False)
    pushed = world.provider.perform(push.key, "push", "sha-1", "push the branch")
    world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    if crash == "lease-expired":
        world.expired(lease)
    else:
        assert world.orchestrator.report_failure(*fence(lease), "provider", "503 from the code host").state == "reconciling"
    result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert (result.outcome, result.state) == ("landed", "failed")
    ended = world.attempt(lease.attempt_id)
    reported = {
        "lease-expired": ("executor", "executor:lease lost after effects landed"),
        "failure-reported": ("provider", "503 from the code host"),
    }
    assert (ended.failure_domain, ended.failure_signature, ended.reconciliation) == (*reported[crash], "landed")
    assert world.store.get_intent(push.key).receipt == pushed.provider_id
    assert isinstance(world.orchestrator.verify_attempt(lease.attempt_id), Refused)
    assert world.attempt(lease.attempt_id).state == "failed"
    assert "verifying" not in states_passed(world.store, lease.attempt_id)
    assert world.orchestrator.decide("task-1").kind == "retry"


def test_landed_effects_with_a_repeated_signature_end_quarantined(world):
    """Two Attempts in a row lose their lease after effects landed: the repeated signature is poison, so the second is quarantined."""
    for number, identity in ((1, "sha-1"), (2, "sha-2")):
        lease = world.running() if number == 1 else world.retried()
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", identity)
        world.provider.perform(grant.key, "create-pr", identity, "open the pull request")
        world.expired(lease)
        assert world.orchestrator.reconcile_attempt(lease.attempt_id).outcome == "landed"
    first, second = world.store.get_attempts("task-1")
    assert (first.state, second.state) == ("failed", "quarantined")
    assert first.failure_signature == second.failure_signature == "executor:lease lost after effects landed"
    assert world.orchestrator.decide("task-1").kind == "escalate"


def test_cancelled_attempt_whose_effect_landed_ends_cancelled_with_the_receipt(world):
    """Cancellation still ends cancelled when reconciliation finds a landed effect: recorded, unclassified, not failed."""
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    effect = world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
    world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
    result = world.orchestrator.acknowledge_cancel(*fence(lease))
    assert (result.outcome, result.state) == ("landed", "cancelled")
    cancelled = world.attempt(lease.attempt_id)
    assert (cancelled.reconciliation, cancelled.failure_domain, cancelled.failure_signature) == ("landed", None, None)
    assert world.store.get_intent(grant.key).receipt == effect.provider_id


def test_reconcile_of_a_running_attempt_is_refused(world):
    """Reconciliation starts only from Suspect or Reconciling; a live Attempt is not second-guessed."""
    lease = world.running()
    before = world.attempt(lease.attempt_id)
    with appends(world.store, 1) as events:
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
    assert isinstance(result, Refused) and not events[0].accepted
    assert world.attempt(lease.attempt_id) == before


class RacingProvider(LedgerProvider):
    """A provider whose first lookup lets a concurrent caller act, as another process would while the lookup is in flight."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=clock)
        self.race: Callable[[], object] | None = None

    def find(self, key: str, operation: str, identity: str) -> list:
        race, self.race = self.race, None
        if race is not None:
            race()
        return super().find(key, operation, identity)


@pytest.mark.parametrize("contract", ["reconcile_attempt", "verify_attempt"])
def test_a_contract_that_loses_a_race_is_refused_and_recorded(store, contract):
    """A reconciliation or verification whose Attempt changed during its provider lookup is refused, and the refusal is in the history."""
    world = World(store)
    world.provider = world.orchestrator.provider = RacingProvider(world.clock)
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    if contract == "verify_attempt":
        world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
        world.orchestrator.complete_attempt(*fence(lease), "opened the pull request")
    else:
        world.orchestrator.report_failure(*fence(lease), "executor", "worker crashed")
    raced: dict[str, object] = {}

    def race() -> None:
        world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
        raced["attempt"], raced["seq"] = world.attempt(lease.attempt_id), world.store.events()[-1].seq

    world.provider.race = race
    result = getattr(world.orchestrator, contract)(lease.attempt_id)
    assert isinstance(result, Refused), result
    [own] = world.store.events(after_seq=raced["seq"])
    assert (own.kind, own.accepted, own.reason) == (contract.removesuffix("_attempt"), False, result.reason)
    assert world.attempt(lease.attempt_id) == raced["attempt"]


# --------------------------------------------------------------- idempotency


def test_key_is_minted_from_the_logical_operation_never_the_clock(world):
    """The key names the operation (task and content when it spans attempts, the Attempt otherwise), the same at any time."""
    lease = world.running()
    spanning, owned = [], []
    for at in (3, 27.5):
        world.clock.set(at)
        spanning.append(world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1").key)
        owned.append(world.orchestrator.grant_tool(*fence(lease), "push", "sha-1", spans_attempts=False).key)
    assert spanning == ["create-pr:task-1:sha-1"] * 2
    assert owned == [f"push:{lease.attempt_id}:sha-1"] * 2


def test_intent_is_persisted_before_the_grant_returns(world):
    """When the worker holds a grant, its intent is already durable, naming the operation, the Attempt and the deadline."""
    lease = world.running()
    world.clock.advance(4)
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", request="open it", call_deadline_s=90)
    intent = world.store.get_intent(grant.key)
    assert intent is not None
    assert (intent.attempt_id, intent.operation, intent.identity, intent.request) == (lease.attempt_id, "create-pr", "sha-1", "open it")
    assert (intent.minted_at, intent.deadline_at, intent.receipt) == (4, 94, None)
    assert grant.deadline_at == 94 and grant.replay is None
    assert [i.key for i in world.store.get_intents(lease.attempt_id)] == [grant.key]


def test_worker_presenting_its_own_key_is_refused(world):
    """Keys belong to the orchestrator: a worker-minted key is refused and no intent is recorded for it."""
    lease = world.running()
    with appends(world.store, 1) as events:
        result = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", key="create-pr:1718000000.123")
    assert isinstance(result, Refused) and "key_minted" in result.reason
    assert world.store.get_intents(lease.attempt_id) == []
    assert world.store.get_intent("create-pr:1718000000.123") is None
    assert not events[0].accepted
    assert world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", key="create-pr:task-1:sha-1").accepted


def test_grant_after_a_receipt_replays_the_recorded_result(world):
    """A second delivery of the same operation gets the recorded result back instead of a second effect."""
    lease = world.running()
    grant, provider_id = world.landed(lease)
    replay = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    assert isinstance(replay, Grant)
    assert (replay.key, replay.replay) == (grant.key, f"url of {provider_id}")
    assert len(world.provider.ledger) == 1


def test_next_attempt_finds_the_previous_attempts_effect_instead_of_a_second(world):
    """Attempt N+1 granted the operation Attempt N completed gets N's receipt (a replay), so the provider holds one effect."""
    first = world.running()
    grant, provider_id = world.landed(first)
    world.provider.set_verdict(provider_id, "failed:test_ports")
    world.orchestrator.complete_attempt(*fence(first), "opened the pull request", head_sha="sha-1")
    assert world.orchestrator.verify_attempt(first.attempt_id).state == "failed"
    second = world.retried(hypothesis=CHANGED_HYPOTHESIS)
    replay = world.orchestrator.grant_tool(*fence(second), "create-pr", "sha-1")
    assert isinstance(replay, Grant)
    assert (replay.key, replay.replay) == (grant.key, f"url of {provider_id}")
    assert len(world.provider.effects_for("create-pr", "sha-1")) == 1


def test_subclasses_replace_key_minting_and_the_retry_policy_through_their_seams(store):
    """grant_tool mints only through `_mint_key` and retry asks only `_retry_refusal`, so a subclass can swap either one."""

    class Overridden(Orchestrator):
        def _mint_key(self, operation, task_id, attempt_id, identity, spans_attempts):
            return f"{operation}:at:{self.clock.now():g}"

        def _retry_refusal(self, task, attempts, plan):
            return "this subclass forbids every retry"

    world = World(store)
    world.orchestrator = Overridden(store, world.clock, world.provider, world.config, world.orchestrator.reliability)
    lease = world.running()
    world.clock.set(7)
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    assert isinstance(grant, Grant) and grant.key == "create-pr:at:7"
    assert world.store.get_intent("create-pr:at:7").attempt_id == lease.attempt_id
    world.failed(lease)
    with appends(world.store, 1) as events:
        refused = world.orchestrator.retry("task-1", REASON, Plan(FIRST_HYPOTHESIS))
    assert isinstance(refused, Refused) and "policy_permits_retry" in refused.reason
    assert events[0].detail == "policy: this subclass forbids every retry"


# -------------------------------------------------------------------- cancel


@pytest.mark.parametrize("admitted", [False, True], ids=["queued", "admitted"])
def test_cancel_of_an_unclaimed_attempt_reconciles_then_cancels(world, admitted):
    """With nobody to signal, cancellation still runs the protocol through Reconciling before Cancelled."""
    attempt_id = world.dispatched()
    if admitted:
        world.orchestrator.admit(attempt_id)
    with appends(world.store, 3):
        result = world.orchestrator.cancel_attempt(attempt_id, "operator stops the run")
    assert result.state == "cancelled"
    assert states_passed(world.store, attempt_id)[-3:] == ["cancelling", "reconciling", "cancelled"]
    assert isinstance(world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE), Refused)


def test_cancel_of_a_running_attempt_signals_refuses_grants_and_ends_on_acknowledgement(world):
    """Running: the holder learns of the request, gets no new tool grants, and its acknowledgement leads to Reconciling, then Cancelled."""
    lease = world.running()
    with appends(world.store, 1):
        assert world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run").state == "cancelling"
    assert world.orchestrator.renew_lease(*fence(lease)).cancel_requested
    with appends(world.store, 1) as events:
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    assert isinstance(grant, Refused) and not events[0].accepted
    assert world.store.get_intents(lease.attempt_id) == []
    with appends(world.store, 2):
        result = world.orchestrator.acknowledge_cancel(*fence(lease))
    assert result.state == "cancelled"
    assert states_passed(world.store, lease.attempt_id)[-3:] == ["cancelling", "reconciling", "cancelled"]


def test_unacknowledged_cancel_times_out_through_reconciling_to_cancelled(store):
    """An executor that never acknowledges is timed out by the reaper after cancel_ack_timeout_s; reconciliation then cancels."""
    world = World(store, cancel_ack_timeout_s=20)
    lease = world.running()
    world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
    world.clock.advance(19)
    assert world.orchestrator.reap() == []
    world.clock.advance(1)
    with appends(world.store, 1) as events:
        assert world.orchestrator.reap() == [(lease.attempt_id, "reconciling")]
    assert (events[0].kind, events[0].actor) == ("cancel_timed_out", "reaper")
    assert world.orchestrator.reconcile_attempt(lease.attempt_id).state == "cancelled"
    assert states_passed(world.store, lease.attempt_id)[-3:] == ["cancelling", "reconciling", "cancelled"]


def test_late_completion_after_cancellation_is_refused_and_reopens_nothing(world):
    """Late events stay in the history but cannot reopen a cancelled Attempt or its task."""
    lease = world.running()
    world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
    world.orchestrator.acknowledge_cancel(*fence(lease))
    before = world.snapshot()[1:]
    with appends(world.store, 1) as events:
        result = world.orchestrator.complete_attempt(*fence(lease), "finished anyway")
    assert isinstance(result, Refused)
    assert (events[0].kind, events[0].accepted, events[0].generation) == ("complete", False, lease.generation)
    for late in (world.orchestrator.renew_lease, world.orchestrator.start_attempt):
        assert isinstance(late(*fence(lease)), Refused)
    assert isinstance(world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1"), Refused)
    assert world.snapshot()[1:] == before


def test_duplicate_cancel_changes_nothing(world):
    """A second cancellation request keeps the first request's reason and deadline and the Attempt's state."""
    lease = world.running()
    world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
    before = world.attempt(lease.attempt_id)
    world.clock.advance(10)
    with appends(world.store, 1):
        result = world.orchestrator.cancel_attempt(lease.attempt_id, "operator really means it")
    assert result.state == "cancelling"
    assert replace(world.attempt(lease.attempt_id), version=0) == replace(before, version=0)


@pytest.mark.parametrize("end", [end_cancelled, end_succeeded, end_blocked], ids=lambda f: f.__name__)
def test_cancelling_a_terminal_attempt_is_refused(world, end):
    """A terminal Attempt is immutable: cancelling it is refused, recorded, and changes nothing."""
    attempt_id = end(world)
    before = world.attempt(attempt_id)
    with appends(world.store, 1) as events:
        result = world.orchestrator.cancel_attempt(attempt_id, "operator tidies up")
    assert isinstance(result, Refused) and not events[0].accepted
    assert world.attempt(attempt_id) == before


# -------------------------------------------------------------- verification


def test_verified_effect_ends_succeeded(world):
    """An effect found at the provider with a passing verdict is independent evidence: the Attempt succeeds."""
    attempt_id = end_succeeded(world)
    assert "passed" in world.attempt(attempt_id).evidence


def test_completion_with_no_recorded_effects_ends_blocked_never_succeeded(world):
    """The worker's claim alone is not evidence: with no effect to check, verification ends Blocked."""
    lease = world.running()
    world.orchestrator.complete_attempt(*fence(lease), "all tests pass, trust me")
    with appends(world.store, 1):
        result = world.orchestrator.verify_attempt(lease.attempt_id)
    assert result.state == "blocked"
    assert world.attempt(lease.attempt_id).failure_domain == "contradictory_evidence"


def test_failing_provider_verdict_fails_with_domain_validation(world):
    """A failing CI verdict refutes the worker's claim: failed, classified as validation, with the verdict as signature."""
    lease = world.running()
    _grant, provider_id = world.landed(lease)
    world.provider.set_verdict(provider_id, "failed:tests")
    world.orchestrator.complete_attempt(*fence(lease), "opened the pull request")
    result = world.orchestrator.verify_attempt(lease.attempt_id)
    assert result.state == "failed"
    failed = world.attempt(lease.attempt_id)
    assert (failed.failure_domain, failed.failure_signature) == ("validation", "tests")


def test_pending_verdict_leaves_the_attempt_verifying(world):
    """While the provider has no verdict, verification waits: no success, no failure."""
    lease = world.running()
    _grant, provider_id = world.landed(lease)
    world.provider.set_verdict(provider_id, None)
    world.orchestrator.complete_attempt(*fence(lease), "opened the pull request")
    before = world.attempt(lease.attempt_id)
    with appends(world.store, 1):
        world.orchestrator.verify_attempt(lease.attempt_id)
    assert world.attempt(lease.attempt_id) == before
    world.provider.set_verdict(provider_id, "passed")
    assert world.orchestrator.verify_attempt(lease.attempt_id).state == "succeeded"


# -------------------------------------------------------------------- policy


def end_failed_in(domain: str) -> Callable[[World], str]:
    def end(world: World) -> str:
        return world.failed(world.running(), domain, f"{domain} trouble").attempt_id

    end.__name__ = f"end_failed_{domain}"
    return end


DECISIONS = [
    (end_succeeded, "verify", "review"),
    (end_blocked, "escalate", "blocked"),
    (end_quarantined, "escalate", "quarantined"),
    (end_failed_in("executor"), "retry", "in_progress"),
    (end_failed_in("validation"), "correct", "in_progress"),
    (end_failed_in("authorization"), "stop", "escalated"),
]


@pytest.mark.parametrize(("end", "kind", "task_state"), DECISIONS, ids=lambda v: getattr(v, "__name__", v))
def test_each_ended_attempt_gets_exactly_one_decision_with_its_reason(world, end, kind, task_state):
    """After an Attempt ends, decide makes one of verify, correct, retry, stop, escalate, records it with its reason, and moves the task."""
    attempt_id = end(world)
    moves = task_state != "in_progress"
    with appends(world.store, 2 if moves else 1):
        decision = world.orchestrator.decide("task-1")
    assert isinstance(decision, Decision) and decision.kind == kind and decision.reason
    task = world.store.get_task("task-1")
    assert (task.state, task.decision, task.decision_reason) == (task_state, kind, decision.reason)
    decided = [e for e in world.store.events() if e.kind == "decide" and e.attempt_id == attempt_id]
    assert [(e.accepted, e.reason, e.detail) for e in decided] == [(True, kind, decision.reason)]
    again = world.orchestrator.decide("task-1")
    assert (again.kind, world.store.get_task("task-1").state) == (kind, task_state)


def test_decide_on_an_active_attempt_is_refused(world):
    """No decision while the latest Attempt is still running."""
    world.running()
    with appends(world.store, 1) as events:
        result = world.orchestrator.decide("task-1")
    assert isinstance(result, Refused) and not events[0].accepted
    assert world.store.get_task("task-1").decision is None


def test_stop_after_a_cancelled_attempt_takes_the_task_out_of_progress(world):
    """A stop decision stops the task: it does not stay in progress with nothing active and no way to retry."""
    end_cancelled(world)
    decision = world.orchestrator.decide("task-1")
    assert decision.kind == "stop"
    assert world.store.get_task("task-1").state != "in_progress"


def test_repeated_failure_signature_is_quarantined_and_escalated(world):
    """The same failure signature on consecutive Attempts is a poison item: dead-lettered, and the loop escalates."""
    world.failed(world.running(), "validation", "test_ports fails")
    second = world.retried(hypothesis=CHANGED_HYPOTHESIS)
    assert world.failed(second, "validation", "test_ports fails").state == "quarantined"
    decision = world.orchestrator.decide("task-1")
    assert decision.kind == "escalate" and "test_ports fails" in decision.reason
    assert world.store.get_task("task-1").state == "quarantined"
    assert isinstance(world.orchestrator.retry("task-1", REASON, Plan("a third idea entirely")), Refused)


def test_repeated_signatures_max_sets_how_long_a_run_of_one_signature_may_grow_before_it_is_poison(world):
    """With repeated_signatures_max=2 the second identical failure is retried, and only the third is dead-lettered."""
    budget = Budget(repeated_signatures_max=2, attempts_max=5)
    world.failed(world.running(budget=budget), "validation", "test_ports fails")
    second = world.retried(hypothesis=CHANGED_HYPOTHESIS)
    assert world.failed(second, "validation", "test_ports fails").state == "failed"
    third = world.retried(hypothesis="a third idea entirely")
    assert world.failed(third, "validation", "test_ports fails").state == "quarantined"


def test_grant_beyond_the_cost_budget_is_refused(world):
    """A tool call whose cost would pass cost_max_usd is refused before it starts, and nothing is charged for it."""
    lease = world.running(budget=Budget(cost_max_usd=1.0))
    assert world.orchestrator.grant_tool(*fence(lease), "model-call", "plan-1", cost_usd=0.6).accepted
    with appends(world.store, 1):
        result = world.orchestrator.grant_tool(*fence(lease), "model-call", "plan-2", cost_usd=0.6)
    assert isinstance(result, Refused) and "spend_within_budget" in result.reason
    assert world.store.get_task("task-1").cost_usd == 0.6 == world.attempt(lease.attempt_id).cost_usd
    assert world.store.get_intent("model-call:task-1:plan-2") is None


def test_nothing_a_worker_sends_raises_the_budget(world):
    """A worker cannot buy room with negative spend, and whatever it sends leaves the task's budget as it was."""
    lease = world.running(budget=Budget(cost_max_usd=1.0, tokens_max=100))
    budget = world.store.get_task("task-1").budget
    for bad in ({"cost_usd": -5.0}, {"tokens": -100}, {"cost_usd": float("nan")}):
        with pytest.raises(InputError):
            world.orchestrator.grant_tool(*fence(lease), "model-call", "plan-1", **bad)
    assert world.store.get_task("task-1").budget == budget
    assert world.store.get_task("task-1").cost_usd == 0


def test_records_handed_out_by_contracts_are_not_live(world):
    """Editing the Task create_task returned changes nothing in the store, and a manifest's budget cannot be edited at all."""
    task = world.orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE, budget=Budget(cost_max_usd=1.0))
    world.task_ids.append("task-1")
    world.orchestrator.accept_task("task-1")
    world.orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))
    world.orchestrator.admit("task-1#1")
    claim = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
    before = world.snapshot()
    task.state = "done"
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.manifest.budget.cost_max_usd = 1e6
    assert world.snapshot() == before


def test_exhausted_attempts_budget_stops_and_escalates_the_task(world):
    """When the attempts budget is used up, decide says stop and the task is escalated to a human."""
    world.failed(world.running(budget=Budget(attempts_max=1)))
    decision = world.orchestrator.decide("task-1")
    assert decision.kind == "stop" and "attempts" in decision.reason
    assert world.store.get_task("task-1").state == "escalated"
    assert isinstance(world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS)), Refused)


def test_release_by_an_operator_may_extend_the_budget(world):
    """Only a human decision extends a budget: after release with a larger budget, the retry is accepted."""
    world.failed(world.running(budget=Budget(attempts_max=1)))
    world.orchestrator.decide("task-1")
    with appends(world.store, 1):
        released = world.orchestrator.release("task-1", "one more try, it was a flaky runner", Budget(attempts_max=2))
    assert released.state == "ready"
    task = world.store.get_task("task-1")
    assert (task.budget.attempts_max, task.interruptions) == (2, 1)
    assert world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS)).accepted
    assert len(world.store.get_attempts("task-1")) == 2


# ----------------------------------------------------------------- bad input


def unknown_id_calls(lease: Lease) -> dict[str, Callable[[Orchestrator], object]]:
    token = lease.token
    return {
        "accept_task": lambda o: o.accept_task("task-9"),
        "dispatch": lambda o: o.dispatch("task-9", Plan(FIRST_HYPOTHESIS)),
        "retry": lambda o: o.retry("task-9", REASON, Plan(CHANGED_HYPOTHESIS)),
        "admit": lambda o: o.admit("task-9#1"),
        "claim_attempt": lambda o: o.claim_attempt("task-9", "worker-a", WORKSPACE),
        "start_attempt": lambda o: o.start_attempt("task-9#1", 1, token),
        "renew_lease": lambda o: o.renew_lease("task-1#9", 1, token),
        "grant_tool": lambda o: o.grant_tool("task-9#1", 1, token, "create-pr", "sha-1"),
        "record_receipt": lambda o: o.record_receipt(lease.attempt_id, lease.generation, token, "create-pr:task-1:sha-9", "pr-1"),
        "checkpoint": lambda o: o.checkpoint("task-9#1", 1, token, "step 3"),
        "complete_attempt": lambda o: o.complete_attempt("task-9#1", 1, token, "done"),
        "report_failure": lambda o: o.report_failure("task-9#1", 1, token, "executor", "crash"),
        "reconcile_attempt": lambda o: o.reconcile_attempt("task-9#1"),
        "verify_attempt": lambda o: o.verify_attempt("task-9#1"),
        "cancel_attempt": lambda o: o.cancel_attempt("task-9#1", "operator stops it"),
        "acknowledge_cancel": lambda o: o.acknowledge_cancel("task-9#1", 1, token),
        "decide": lambda o: o.decide("task-9"),
        "release": lambda o: o.release("task-9", "operator releases it"),
        "cancel_task": lambda o: o.cancel_task("task-9", "operator stops it"),
    }


UNKNOWN_ID_CALLS = sorted(unknown_id_calls(Lease("", "", "", 0, "", 0)))


@pytest.mark.parametrize("call", UNKNOWN_ID_CALLS)
def test_unknown_ids_raise_not_found_and_change_nothing(world, call):
    """An id that names no record is NotFound, and the store, its history and the provider are as they were."""
    lease = world.running()
    before = world.snapshot()
    with pytest.raises(NotFound):
        unknown_id_calls(lease)[call](world.orchestrator)
    assert world.snapshot() == before


HUGE = "x" * 1_000_001


def bad_input_calls(lease: Lease) -> dict[str, Callable[[Orchestrator], object]]:
    attempt_id, generation, token = fence(lease)

    def grant(orchestrator: Orchestrator, **changes: object) -> object:
        arguments = {"operation": "create-pr", "identity": "sha-1", **changes}
        return orchestrator.grant_tool(attempt_id, generation, token, **arguments)

    return {
        "create_task non-str id": lambda o: o.create_task(7, "objective", WORKSPACE),
        "create_task huge objective": lambda o: o.create_task("task-2", HUGE, WORKSPACE),
        "create_task negative cost budget": lambda o: o.create_task("task-2", "objective", WORKSPACE, budget=Budget(cost_max_usd=-1.0)),
        "create_task NaN elapsed budget": lambda o: o.create_task(
            "task-2", "objective", WORKSPACE, budget=Budget(elapsed_max_s=float("nan"))
        ),
        "create_task bool attempts budget": lambda o: o.create_task("task-2", "objective", WORKSPACE, budget=Budget(attempts_max=True)),
        "create_task no attempts budget": lambda o: o.create_task("task-2", "objective", WORKSPACE, budget=Budget(attempts_max=0)),
        "dispatch plan not a Plan": lambda o: o.dispatch("task-1", FIRST_HYPOTHESIS),
        "dispatch huge hypothesis": lambda o: o.dispatch("task-1", Plan(HUGE)),
        "retry non-str reason": lambda o: o.retry("task-1", 1234567890, Plan(CHANGED_HYPOTHESIS)),
        "retry huge reason": lambda o: o.retry("task-1", HUGE, Plan(CHANGED_HYPOTHESIS)),
        "retry non-str base sha": lambda o: o.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS, base_sha=0)),
        "claim non-str worker": lambda o: o.claim_attempt("task-1", 42, WORKSPACE),
        "claim non-bool health": lambda o: o.claim_attempt("task-1", "worker-b", WORKSPACE, healthy="yes"),
        "renew non-str attempt id": lambda o: o.renew_lease(123, generation, token),
        "renew bool generation": lambda o: o.renew_lease(attempt_id, True, token),
        "renew negative generation": lambda o: o.renew_lease(attempt_id, -1, token),
        "renew float generation": lambda o: o.renew_lease(attempt_id, 1.0, token),
        "renew huge generation": lambda o: o.renew_lease(attempt_id, 2**70, token),
        "renew non-str token": lambda o: o.renew_lease(attempt_id, generation, None),
        "renew huge token": lambda o: o.renew_lease(attempt_id, generation, HUGE),
        "grant negative cost": lambda o: grant(o, cost_usd=-0.01),
        "grant NaN cost": lambda o: grant(o, cost_usd=float("nan")),
        "grant infinite cost": lambda o: grant(o, cost_usd=float("inf")),
        "grant negative tokens": lambda o: grant(o, tokens=-1),
        "grant float tokens": lambda o: grant(o, tokens=1.5),
        "grant absurd deadline": lambda o: grant(o, call_deadline_s=1e9),
        "grant huge request": lambda o: grant(o, request=HUGE),
        "grant empty operation": lambda o: grant(o, operation=""),
        "grant non-str key": lambda o: grant(o, key=12345),
        "grant huge key": lambda o: grant(o, key=HUGE),
        "grant non-bool spans_attempts": lambda o: grant(o, spans_attempts="no"),
        "receipt empty provider id": lambda o: o.record_receipt(attempt_id, generation, token, "create-pr:task-1:sha-1", ""),
        "receipt non-str key": lambda o: o.record_receipt(attempt_id, generation, token, None, "pr-1"),
        "checkpoint empty": lambda o: o.checkpoint(attempt_id, generation, token, ""),
        "complete huge result": lambda o: o.complete_attempt(attempt_id, generation, token, HUGE),
        "complete non-str result": lambda o: o.complete_attempt(attempt_id, generation, token, 42),
        "complete non-str head sha": lambda o: o.complete_attempt(attempt_id, generation, token, "done", head_sha=42),
        "complete bool generation": lambda o: o.complete_attempt(attempt_id, False, token, "done"),
        "report unknown domain": lambda o: o.report_failure(attempt_id, generation, token, "martian", "crash"),
        "report empty signature": lambda o: o.report_failure(attempt_id, generation, token, "executor", ""),
        "cancel empty reason": lambda o: o.cancel_attempt(attempt_id, ""),
        "cancel non-str reason": lambda o: o.cancel_attempt(attempt_id, 5),
        "acknowledge str generation": lambda o: o.acknowledge_cancel(attempt_id, "1", token),
        "reconcile non-str id": lambda o: o.reconcile_attempt(["task-1#1"]),
        "decide non-str id": lambda o: o.decide(None),
        "release negative budget": lambda o: o.release("task-1", "operator releases it", Budget(attempts_max=-1)),
    }


BAD_INPUT_CALLS = sorted(bad_input_calls(Lease("", "", "", 0, "", 0)))


@pytest.mark.parametrize("call", BAD_INPUT_CALLS)
def test_bad_input_raises_input_error_and_changes_nothing(world, call):
    """Wrong types and absurd values are InputError, and the store, its history and the provider are as they were."""
    lease = world.running()
    before = world.snapshot()
    with pytest.raises(InputError):
        bad_input_calls(lease)[call](world.orchestrator)
    assert world.snapshot() == before


# ------------------------------------------------------------------- history


def test_every_contract_call_appends_its_documented_events(world):
    """Walking an Attempt through every contract, accepted and refused, each call appends exactly its documented events."""
    orchestrator, store = world.orchestrator, world.store
    steps: list[tuple[int, Callable[[], object]]] = [
        (1, lambda: orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE)),
        (1, lambda: orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))),
        (1, lambda: orchestrator.accept_task("task-1")),
        (2, lambda: orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))),
        (1, lambda: orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)),
        (1, lambda: orchestrator.admit("task-1#1")),
    ]
    for count, step in steps:
        with appends(store, count):
            step()
    with appends(store, 1):
        lease = orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE).lease
    forged = (lease.attempt_id, lease.generation, "f" * 43)
    fenced: list[tuple[int, Callable[[], object]]] = [
        (1, lambda: orchestrator.start_attempt(*forged)),
        (1, lambda: orchestrator.start_attempt(*fence(lease))),
        (1, lambda: orchestrator.renew_lease(*forged)),
        (1, lambda: orchestrator.renew_lease(*fence(lease))),
        (1, lambda: orchestrator.grant_tool(*forged, "create-pr", "sha-1")),
        (1, lambda: orchestrator.checkpoint(*fence(lease), "tests written")),
        (1, lambda: orchestrator.checkpoint(*forged, "tests written")),
        (1, lambda: orchestrator.reconcile_attempt(lease.attempt_id)),
        (1, lambda: orchestrator.verify_attempt(lease.attempt_id)),
        (1, lambda: orchestrator.decide("task-1")),
        (1, lambda: orchestrator.complete_attempt(*forged, "done")),
        (1, lambda: orchestrator.acknowledge_cancel(*fence(lease))),
    ]
    for count, step in fenced:
        with appends(store, count):
            step()
    with appends(store, 1):
        grant = orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
    effect = world.provider.perform(grant.key, "create-pr", "sha-1", "open it")
    closing: list[tuple[int, Callable[[], object]]] = [
        (1, lambda: orchestrator.record_receipt(*fence(lease), grant.key, effect.provider_id)),
        (1, lambda: orchestrator.complete_attempt(*fence(lease), "opened the pull request")),
        (1, lambda: orchestrator.complete_attempt(*fence(lease), "opened the pull request")),
        (1, lambda: orchestrator.verify_attempt(lease.attempt_id)),
        (2, lambda: orchestrator.decide("task-1")),
        (1, lambda: orchestrator.cancel_attempt(lease.attempt_id, "operator tidies up")),
        (1, lambda: orchestrator.approve("task-1")),
    ]
    for count, step in closing:
        with appends(store, count):
            step()
    assert store.get_task("task-1").state == "done"
    history = store.events()
    assert [e.seq for e in history] == sorted({e.seq for e in history})
    assert all(isinstance(e.reason, str) and e.reason for e in history)
