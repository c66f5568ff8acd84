"""Contract checks of dispatch, retry, claim, renew, complete and the reaper: who may hold authority, and when it ends."""

from __future__ import annotations

from shiftchange.core import Budget, Claim, Lease, Plan, Refused, Renewal

from .checks import Check, collector, expect, expect_equal
from .rig import (
    CHANGED_HYPOTHESIS,
    FIRST_HYPOTHESIS,
    REASON,
    WORKSPACE,
    OrchestratorFactory,
    World,
    appends,
    fence,
    refused_on,
    states_passed,
    world_of,
)

CHECKS: list[Check] = []
_check = collector(CHECKS)


# ------------------------------------------------------------------ dispatch


@_check
def dispatch_appends_attempt_one_queued_for_a_ready_task(make: OrchestratorFactory) -> None:
    """First dispatch of a ready task with no Attempt appends Attempt 1, queued, and moves the task in progress."""
    with world_of(make) as world:
        world.task()
        with appends(world.store, 2, "an accepted dispatch") as events:
            result = world.orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))
        expect(result.accepted and result.state == "in_progress", f"the first dispatch of a ready task: {result}")
        attempts = world.store.get_attempts("task-1")
        expect_equal(len(attempts), 1, "Attempts after the first dispatch")
        attempt = attempts[0]
        shape = (attempt.number, attempt.state, attempt.previous_attempt_id, attempt.hypothesis)
        expect_equal(shape, (1, "queued", None, FIRST_HYPOTHESIS), "Attempt 1's (number, state, predecessor, hypothesis)")
        expect_equal([(e.kind, e.accepted) for e in events], [("dispatch", True), ("append", True)], "the dispatch's events")


@_check
def second_dispatch_is_refused_and_appends_no_attempt(make: OrchestratorFactory) -> None:
    """A task that already has an Attempt cannot be dispatched again."""
    with world_of(make) as world:
        world.dispatched()
        with appends(world.store, 1, "a refused dispatch") as events:
            result = world.orchestrator.dispatch("task-1", Plan(CHANGED_HYPOTHESIS))
        expect(isinstance(result, Refused), f"a second dispatch was not refused: {result}")
        expect_equal(len(world.store.get_attempts("task-1")), 1, "Attempts after a refused second dispatch")
        expect(events[0].kind == "dispatch" and not events[0].accepted, f"the refused dispatch's event: {events[0]}")


@_check
def dispatch_of_an_inbox_task_is_refused(make: OrchestratorFactory) -> None:
    """A task still in the inbox was never accepted for work, so dispatch refuses it."""
    with world_of(make) as world:
        world.orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE)
        with appends(world.store, 1, "a refused dispatch") as events:
            result = world.orchestrator.dispatch("task-1", Plan(FIRST_HYPOTHESIS))
        expect(isinstance(result, Refused), f"dispatch of an inbox task was not refused: {result}")
        expect_equal(world.store.get_attempts("task-1"), [], "Attempts of an inbox task")
        expect_equal(world.store.get_task("task-1").state, "inbox", "the task's state")
        expect(not events[0].accepted, f"the refused dispatch's event: {events[0]}")


# --------------------------------------------------------------------- retry


@_check
def retry_is_refused_while_an_attempt_is_active(make: OrchestratorFactory) -> None:
    """No retry while the task's Attempt is still active."""
    with world_of(make) as world:
        world.running()
        with appends(world.store, 1, "a refused retry") as events:
            result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
        expect(refused_on(result, "no_active_attempt"), f"a retry with an active Attempt: {result}")
        expect_equal(len(world.store.get_attempts("task-1")), 1, "Attempts after the refused retry")
        expect(not events[0].accepted, f"the refused retry's event: {events[0]}")


def end_succeeded(world: World) -> str:
    lease = world.running()
    world.landed(lease)
    world.orchestrator.complete_attempt(*fence(lease), "opened the pull request", head_sha="sha-1")
    expect_equal(world.orchestrator.verify_attempt(lease.attempt_id).state, "succeeded", "verification of a landed, passing PR")
    return lease.attempt_id


def end_blocked(world: World) -> str:
    lease = world.running()
    world.orchestrator.complete_attempt(*fence(lease), "done, trust me")
    expect_equal(world.orchestrator.verify_attempt(lease.attempt_id).state, "blocked", "verification of a claim with no effect")
    return lease.attempt_id


def end_quarantined(world: World) -> str:
    world.failed(world.running(), "executor", "segfault in the sandbox")
    second = world.retried()
    expect_equal(world.failed(second, "executor", "segfault in the sandbox").state, "quarantined", "a repeated failure signature")
    return second.attempt_id


def end_cancelled(world: World) -> str:
    attempt_id = world.dispatched()
    expect_equal(world.orchestrator.cancel_attempt(attempt_id, "operator stops the run").state, "cancelled", "cancel of a queued Attempt")
    return attempt_id


ENDS = (end_succeeded, end_blocked, end_quarantined, end_cancelled)


@_check
def retry_is_refused_when_the_latest_attempt_did_not_fail(make: OrchestratorFactory) -> None:
    """Retry needs the latest Attempt to have failed: success, blocked, quarantined or cancelled is no ground for one."""
    for end in ENDS:
        with world_of(make) as world:
            end(world)
            count = len(world.store.get_attempts("task-1"))
            with appends(world.store, 1, f"a refused retry after {end.__name__}"):
                result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
            expect(refused_on(result, "latest_attempt_failed"), f"retry after {end.__name__}: {result}")
            expect_equal(len(world.store.get_attempts("task-1")), count, f"Attempts after the refused retry ({end.__name__})")


@_check
def retry_needs_a_reason_of_at_least_ten_characters(make: OrchestratorFactory) -> None:
    """The recovery reason must have at least ten characters, not counting surrounding blanks."""
    for reason, accepted in (("too short", False), ("   short    ", False), ("ten chars!", True)):
        with world_of(make) as world:
            world.failed(world.running())
            result = world.orchestrator.retry("task-1", reason, Plan(FIRST_HYPOTHESIS))
            expect_equal(result.accepted, accepted, f"a retry with the reason {reason!r} accepted")
            if accepted:
                expect_equal(result.state, "in_progress", "the task after the retry")
            else:
                expect(refused_on(result, "reason_given"), f"the refusal names the reason_given guard: {result}")
            expect_equal(len(world.store.get_attempts("task-1")), 2 if accepted else 1, f"Attempts after retry with {reason!r}")


@_check
def retry_after_an_authorization_failure_is_refused_by_policy(make: OrchestratorFactory) -> None:
    """Authorization failures stop: policy forbids an automatic retry even with a changed hypothesis."""
    with world_of(make) as world:
        world.failed(world.running(), "authorization", "403 on push")
        with appends(world.store, 1, "a refused retry"):
            result = world.orchestrator.retry("task-1", "the token was rotated meanwhile", Plan(CHANGED_HYPOTHESIS))
        expect(refused_on(result, "policy_permits_retry"), f"a retry after an authorization failure: {result}")
        expect_equal(len(world.store.get_attempts("task-1")), 1, "Attempts after the refused retry")


@_check
def retry_after_a_validation_failure_needs_a_changed_hypothesis(make: OrchestratorFactory) -> None:
    """Validation failures need a changed hypothesis: repeating the plan is refused, changing it is accepted."""
    with world_of(make) as world:
        world.failed(world.running(), "validation", "test_ports fails")
        for same in (FIRST_HYPOTHESIS, f"  {FIRST_HYPOTHESIS}  "):
            refused = world.orchestrator.retry("task-1", "tests failed, trying again", Plan(same))
            expect(refused_on(refused, "policy_permits_retry"), f"a retry repeating {same!r}: {refused}")
        expect_equal(len(world.store.get_attempts("task-1")), 1, "Attempts after the refused retries")
        expect(world.orchestrator.retry("task-1", "tests failed, new diagnosis", Plan(CHANGED_HYPOTHESIS)).accepted, "a changed hypothesis")
        expect_equal(world.store.get_attempt("task-1#2").hypothesis, CHANGED_HYPOTHESIS, "Attempt 2's hypothesis")


@_check
def retry_with_the_attempts_budget_exhausted_is_refused(make: OrchestratorFactory) -> None:
    """When every allowed Attempt has been used, retry is refused on the budget."""
    with world_of(make) as world:
        world.failed(world.running(budget=Budget(attempts_max=2)), "executor", "worker killed")
        world.failed(world.retried(), "executor", "sandbox out of memory")
        with appends(world.store, 1, "a refused retry"):
            result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
        expect(refused_on(result, "budget_left"), f"a retry past attempts_max: {result}")
        expect_equal(len(world.store.get_attempts("task-1")), 2, "Attempts after the refused retry")


@_check
def accepted_retry_appends_attempt_n_plus_one_naming_its_predecessor_and_reason(make: OrchestratorFactory) -> None:
    """An accepted retry appends Attempt N+1, queued, linked to Attempt N with the recorded reason."""
    with world_of(make) as world:
        world.failed(world.running())
        with appends(world.store, 2, "an accepted retry") as events:
            result = world.orchestrator.retry("task-1", REASON, Plan(CHANGED_HYPOTHESIS))
        expect(result.accepted, f"a retry after a failed Attempt: {result}")
        first, second = world.store.get_attempts("task-1")
        shape = (second.number, second.state, second.previous_attempt_id, second.reason)
        expect_equal(shape, (2, "queued", first.attempt_id, REASON), "Attempt 2's (number, state, predecessor, reason)")
        expect_equal([(e.kind, e.accepted) for e in events], [("retry", True), ("append", True)], "the retry's events")
        expect_equal(events[1].attempt_id, second.attempt_id, "the append event's Attempt")


@_check
def attempt_numbers_run_one_to_n_without_gaps(make: OrchestratorFactory) -> None:
    """Each retry appends the next number; every Attempt but the first names the one before it."""
    with world_of(make) as world:
        world.failed(world.running(), "executor", "worker killed")
        world.failed(world.retried(worker_id="worker-b"), "provider", "503 from the forge")
        world.failed(world.retried(worker_id="worker-c"), "capacity", "429 from the model")
        attempts = world.store.get_attempts("task-1")
        expect_equal([a.number for a in attempts], [1, 2, 3], "Attempt numbers")
        expect_equal(len({a.attempt_id for a in attempts}), 3, "distinct Attempt ids")
        links = [a.previous_attempt_id for a in attempts]
        expect_equal(links, [None, attempts[0].attempt_id, attempts[1].attempt_id], "each Attempt's predecessor")


@_check
def failed_attempt_is_never_rewritten(make: OrchestratorFactory) -> None:
    """A failed Attempt is immutable evidence: retry, a new claim and every late call leave each of its fields as they were."""
    with world_of(make) as world:
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
        expect_equal(world.attempt(old.attempt_id), frozen, "the failed Attempt after late calls")


# --------------------------------------------------------------------- claim


@_check
def claim_returns_a_fenced_lease_and_the_frozen_manifest(make: OrchestratorFactory) -> None:
    """A claim issues a lease (owner, generation, unguessable token, expiry now + lease_ttl_s) and the manifest the Attempt recorded."""
    with world_of(make) as world:
        attempt_id = world.dispatched()
        world.orchestrator.admit(attempt_id)
        world.clock.advance(5)
        with appends(world.store, 1, "a claim") as events:
            claim = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
        expect(isinstance(claim, Claim), f"a claim of an admitted Attempt: {claim}")
        lease = claim.lease
        expect_equal(
            (lease.attempt_id, lease.owner, lease.generation), (attempt_id, "worker-a", 1), "the lease's (attempt, owner, generation)"
        )
        expect_equal(lease.expires_at, 5 + world.config.lease_ttl_s, "the lease's expiry")
        expect(len(lease.token) >= 32, f"a lease token is at least 32 characters, not {len(lease.token)}")
        stored = world.attempt(attempt_id)
        shape = (stored.state, stored.worker_id, stored.generation, stored.expires_at)
        expect_equal(shape, ("claimed", "worker-a", 1, lease.expires_at), "the claimed Attempt's (state, worker, generation, expiry)")
        expect_equal(claim.manifest.digest(), stored.manifest_digest, "the manifest's digest, against the Attempt's")
        frozen = (claim.manifest.attempt_number, claim.manifest.hypothesis, claim.manifest.workspace)
        expect_equal(frozen, (1, FIRST_HYPOTHESIS, WORKSPACE), "the manifest's (number, hypothesis, workspace)")
        expect(lease.token not in repr(stored), "the store keeps only the token's digest, never the token")
        expect(events[0].accepted and events[0].generation == 1, f"the claim's event: {events[0]}")


@_check
def two_claims_get_different_unguessable_tokens(make: OrchestratorFactory) -> None:
    """Tokens are long and never repeat, so no worker can guess another's fence."""
    with world_of(make) as world:
        first = world.claimed(world.dispatched("task-1"), "worker-a")
        second = world.claimed(world.dispatched("task-2"), "worker-b")
        expect(first.token != second.token, "two leases got the same token")
        expect(min(len(first.token), len(second.token)) >= 32, "a lease token is at least 32 characters")


@_check
def second_claimer_is_refused_and_gets_no_lease(make: OrchestratorFactory) -> None:
    """Claim is atomic: a second caller is refused, receives no lease, and the holder's lease stands."""
    with world_of(make) as world:
        held = world.claimed(world.dispatched(), "worker-a")
        before = world.attempt(held.attempt_id)
        with appends(world.store, 1, "a refused claim") as events:
            result = world.orchestrator.claim_attempt("task-1", "worker-b", WORKSPACE)
        expect(isinstance(result, Refused) and not hasattr(result, "lease"), f"a second claim: {result}")
        expect_equal(world.attempt(held.attempt_id), before, "the held Attempt after a second claim")
        expect(not events[0].accepted, f"the second claim's event: {events[0]}")
        expect(world.orchestrator.renew_lease(*fence(held)).accepted, "the first holder's renewal after the refused claim")


@_check
def claim_events_name_the_claiming_worker(make: OrchestratorFactory) -> None:
    """The history says which worker asked for a claim, whether it was granted or refused."""
    with world_of(make) as world:
        world.claimed(world.dispatched(), "worker-a")
        world.orchestrator.claim_attempt("task-1", "worker-b", WORKSPACE)
        claims = [(e.accepted, e.worker_id) for e in world.store.events() if e.kind == "claim"]
        expect_equal(claims, [(True, "worker-a"), (False, "worker-b")], "the claim events' (accepted, worker)")


@_check
def claim_by_a_foreign_or_unhealthy_worker_is_refused(make: OrchestratorFactory) -> None:
    """Only a healthy worker serving the task's workspace may claim."""
    for workspace, healthy, guard in (("repo-b", True, "workspace_matches"), (WORKSPACE, False, "worker_healthy")):
        with world_of(make) as world:
            attempt_id = world.dispatched()
            world.orchestrator.admit(attempt_id)
            before = world.attempt(attempt_id)
            with appends(world.store, 1, "a refused claim"):
                result = world.orchestrator.claim_attempt("task-1", "worker-x", workspace, healthy=healthy)
            expect(refused_on(result, guard), f"a claim failing {guard}: {result}")
            expect_equal(world.attempt(attempt_id), before, f"the Attempt after a claim failing {guard}")


@_check
def queued_attempt_cannot_be_claimed(make: OrchestratorFactory) -> None:
    """An Attempt must pass admission before any worker can claim it."""
    with world_of(make) as world:
        attempt_id = world.dispatched()
        with appends(world.store, 1, "a refused claim"):
            result = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
        expect(isinstance(result, Refused), f"a claim of a queued Attempt: {result}")
        stored = world.attempt(attempt_id)
        expect(stored.state == "queued" and stored.token_digest is None, f"the queued Attempt got a lease: {stored}")


@_check
def generation_increases_across_attempts_of_one_task(make: OrchestratorFactory) -> None:
    """Each new lease of a task carries a higher generation than every lease before it."""
    with world_of(make) as world:
        first = world.running()
        world.failed(first)
        second = world.retried()
        world.failed(second, "provider", "503 from the forge")
        third = world.retried(worker_id="worker-c")
        generations = (first.generation, second.generation, third.generation)
        expect(generations[0] < generations[1] < generations[2], f"generations of three leases of one task: {generations}")


# --------------------------------------------------------------------- renew


@_check
def renew_with_the_current_fence_extends_expiry(make: OrchestratorFactory) -> None:
    """A heartbeat under the current generation and token moves expiry to now + lease_ttl_s."""
    with world_of(make) as world:
        lease = world.running()
        world.clock.advance(20)
        with appends(world.store, 1, "a renewal"):
            renewal = world.orchestrator.renew_lease(*fence(lease))
        expect(isinstance(renewal, Renewal) and not renewal.cancel_requested, f"a renewal under the current fence: {renewal}")
        expect_equal(renewal.expires_at, 20 + world.config.lease_ttl_s, "the renewed expiry")
        expect_equal(world.attempt(lease.attempt_id).expires_at, renewal.expires_at, "the stored expiry")
        world.clock.advance(world.config.lease_ttl_s - 1)
        expect_equal(world.orchestrator.reap(), [], "the reaper's moves while the renewed lease holds")


def forged_fences(world: World) -> dict[str, tuple[str, int, str]]:
    """Fences that must not renew task-1's current Attempt (generation 2): stale, forged, and another worker's own."""
    world.failed(world.running("task-1", "worker-a"))
    current = world.retried("task-1", worker_id="worker-b")
    world.failed(world.running("task-2", "worker-c"))
    other = world.retried("task-2", worker_id="worker-d")
    expect_equal(other.generation, current.generation, "the two tasks' current generations")
    return {
        "current": fence(current),
        "stale generation": (current.attempt_id, current.generation - 1, current.token),
        "forged token": (current.attempt_id, current.generation, "f" * 43),
        "someone else's attempt": (current.attempt_id, other.generation, other.token),
    }


@_check
def renew_without_the_current_fence_is_refused_and_recorded(make: OrchestratorFactory) -> None:
    """Stale, forged or borrowed fences are refused, kept as refused events with the generation they presented, and change nothing."""
    for forgery in ("stale generation", "forged token", "someone else's attempt"):
        with world_of(make) as world:
            fences = forged_fences(world)
            attempt_id, generation, token = fences[forgery]
            before = world.attempt(attempt_id)
            with appends(world.store, 1, f"a renewal with a {forgery}") as events:
                result = world.orchestrator.renew_lease(attempt_id, generation, token)
            expect(isinstance(result, Refused), f"a renewal with a {forgery}: {result}")
            expect_equal(world.attempt(attempt_id), before, f"the Attempt after a renewal with a {forgery}")
            event = events[0]
            shape = (event.kind, event.accepted, event.generation, event.attempt_id)
            expect_equal(shape, ("renew", False, generation, attempt_id), f"the event of a renewal with a {forgery}")
            expect(world.orchestrator.renew_lease(*fences["current"]).accepted, f"the holder's renewal after a {forgery}")


@_check
def renew_tells_the_worker_that_cancellation_was_requested(make: OrchestratorFactory) -> None:
    """After cancel_attempt, the holder learns of the request from its next heartbeat."""
    with world_of(make) as world:
        lease = world.running()
        expect_equal(world.orchestrator.renew_lease(*fence(lease)).cancel_requested, False, "cancel_requested before any cancel")
        world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
        renewal = world.orchestrator.renew_lease(*fence(lease))
        expect(isinstance(renewal, Renewal) and renewal.cancel_requested is True, f"the renewal after a cancel: {renewal}")


@_check
def renew_after_the_lease_expired_is_refused(make: OrchestratorFactory) -> None:
    """Once the expiry has passed, the lease is gone even before the reaper runs: renewal cannot revive it."""
    with world_of(make) as world:
        lease = world.running()
        expires_at = lease.expires_at
        world.clock.set(expires_at)
        with appends(world.store, 1, "a late renewal") as events:
            result = world.orchestrator.renew_lease(*fence(lease))
        expect(refused_on(result, "lease_current"), f"a renewal at the expiry instant: {result}")
        expect_equal(world.attempt(lease.attempt_id).expires_at, expires_at, "the expiry after a refused renewal")
        expect(not events[0].accepted and events[0].generation == lease.generation, f"the late renewal's event: {events[0]}")


# ------------------------------------------------------------------ complete


@_check
def complete_with_the_current_fence_moves_to_verifying(make: OrchestratorFactory) -> None:
    """The holder's completion is accepted as a claim to verify, never as success."""
    with world_of(make) as world:
        lease = world.running()
        world.clock.advance(12)
        with appends(world.store, 1, "a completion") as events:
            result = world.orchestrator.complete_attempt(*fence(lease), "opened the pull request", head_sha="sha-1")
        expect(result.accepted and result.state == "verifying", f"a completion under the current fence: {result}")
        stored = world.attempt(lease.attempt_id)
        shape = (stored.state, stored.result, stored.head_sha, stored.elapsed_s)
        expect_equal(shape, ("verifying", "opened the pull request", "sha-1", 12), "the completed Attempt's (state, result, head, elapsed)")
        expect_equal(events[0].generation, lease.generation, "the generation the completion's event records")


def superseded(world: World) -> tuple[Lease, Lease]:
    """The old worker's lease expired; it was reaped and reconciled, the task retried, and a new worker claimed."""
    old = world.running("task-1", "worker-a")
    world.expired(old)
    expect_equal(world.orchestrator.reconcile_attempt(old.attempt_id).state, "failed", "reconciling the expired Attempt")
    new = world.retried(worker_id="worker-b")
    return old, new


@_check
def stale_completion_after_takeover_is_refused_and_changes_nothing(make: OrchestratorFactory) -> None:
    """The old worker's completion, on its own Attempt or the new one, is refused and leaves both Attempts and the task as they were."""
    with world_of(make) as world:
        old, new = superseded(world)
        before = world.snapshot()[1:]
        for attempt_id in (old.attempt_id, new.attempt_id):
            with appends(world.store, 1, f"a stale completion on {attempt_id}") as events:
                result = world.orchestrator.complete_attempt(attempt_id, old.generation, old.token, "done, trust me")
            expect(isinstance(result, Refused), f"a stale completion on {attempt_id}: {result}")
            shape = (events[0].kind, events[0].accepted, events[0].generation)
            expect_equal(shape, ("complete", False, old.generation), f"the event of a stale completion on {attempt_id}")
        expect_equal(world.snapshot()[1:], before, "tasks, Attempts, intents and ledger after stale completions")
        expect(world.orchestrator.renew_lease(*fence(new)).accepted, "the new holder's renewal after stale completions")


@_check
def stale_completion_after_takeover_is_kept_as_a_late_event(make: OrchestratorFactory) -> None:
    """A completion presenting a generation older than the task's current lease is kept in the history as late."""
    with world_of(make) as world:
        old, new = superseded(world)
        for attempt_id in (new.attempt_id, old.attempt_id):
            with appends(world.store, 1, f"a stale completion on {attempt_id}") as events:
                world.orchestrator.complete_attempt(attempt_id, old.generation, old.token, "done, trust me")
            expect(events[0].late and not events[0].accepted, f"a stale completion on {attempt_id} is kept as a late event: {events[0]}")


@_check
def late_completion_on_an_expired_attempt_triggers_reconciliation(make: OrchestratorFactory) -> None:
    """A late completion is evidence that effects may exist: it is refused and the Attempt leaves Suspect through reconciliation."""
    for reaped in (True, False):
        with world_of(make) as world:
            lease = world.running()
            if reaped:
                world.expired(lease)
            else:
                world.clock.advance(world.config.lease_ttl_s + 1)
            how = "reaped" if reaped else "not yet reaped"
            with appends(world.store, 3 if reaped else 4, f"a late completion ({how})") as events:
                result = world.orchestrator.complete_attempt(*fence(lease), "finished, a bit late")
            expect(isinstance(result, Refused), f"a completion after expiry ({how}): {result}")
            expect(events[0].kind == "complete" and not events[0].accepted, f"the late completion's event ({how}): {events[0]}")
            expect_equal(world.attempt(lease.attempt_id).state, "failed", f"the Attempt after a late completion ({how})")
            path = states_passed(world.store, lease.attempt_id)[-3:]
            expect_equal(path, ["suspect", "reconciling", "failed"], f"the Attempt's last states ({how})")


# -------------------------------------------------------------------- reaper


@_check
def reaper_makes_expired_attempts_suspect_and_leaves_live_ones(make: OrchestratorFactory) -> None:
    """Expiry makes an Attempt Suspect, never Failed; a renewed lease is not touched."""
    with world_of(make) as world:
        quiet = world.running("task-1", "worker-a")
        busy = world.running("task-2", "worker-b")
        world.clock.advance(world.config.lease_ttl_s - 5)
        world.orchestrator.renew_lease(*fence(busy))
        world.clock.advance(10)
        before = world.attempt(busy.attempt_id)
        with appends(world.store, 1, "a reap of one expired lease") as events:
            moved = world.orchestrator.reap()
        expect_equal(moved, [(quiet.attempt_id, "suspect")], "the reaper's moves")
        suspect = world.attempt(quiet.attempt_id)
        expect_equal((suspect.state, suspect.failure_domain), ("suspect", None), "the expired Attempt's (state, failure domain)")
        expect_equal(world.attempt(busy.attempt_id), before, "the renewed Attempt after the reap")
        shape = (events[0].kind, events[0].actor, events[0].to_state)
        expect_equal(shape, ("expire", "reaper", "suspect"), "the reap's event (kind, actor, to_state)")
        with appends(world.store, 0, "a reap with nothing due"):
            expect_equal(world.orchestrator.reap(), [], "a second reap's moves")
