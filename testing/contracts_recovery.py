"""Contract checks of reconciliation, idempotency, cancellation and verification: what happened outside, found before any verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from shiftchange.core import Decision, Grant, LedgerProvider, ManualClock, ProviderTimeout, Reconciliation, Refused

from .checks import Check, collector, expect, expect_equal, expect_raises
from .contracts_lease import end_blocked, end_cancelled, end_succeeded
from .rig import CHANGED_HYPOTHESIS, WORKSPACE, OrchestratorFactory, appends, fence, refused_on, states_passed, world_of

CHECKS: list[Check] = []
_check = collector(CHECKS)


# ----------------------------------------------------------------- reconcile


@_check
def reconcile_finds_a_landed_effect_records_its_receipt_and_ends_failed(make: OrchestratorFactory) -> None:
    """An effect found without a reported result is recorded on the intent, and the Attempt ends failed (executor), never verifying."""
    with world_of(make) as world:
        lease = world.running()
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        effect = world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
        world.expired(lease)
        with appends(world.store, 2, "a reconciliation from suspect"):
            result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        expect(isinstance(result, Reconciliation), f"reconciliation of a suspect Attempt: {result}")
        expect_equal((result.outcome, result.state), ("landed", "failed"), "the reconciliation's (outcome, state)")
        expect_equal(world.store.get_intent(grant.key).receipt, effect.provider_id, "the receipt reconciliation recorded")
        expect_equal(states_passed(world.store, lease.attempt_id)[-3:], ["suspect", "reconciling", "failed"], "the Attempt's last states")
        failed = world.attempt(lease.attempt_id)
        expect_equal((failed.reconciliation, failed.failure_domain), ("landed", "executor"), "the failed Attempt's findings and domain")
        expect_equal(failed.failure_signature, "executor:lease lost after effects landed", "the failed Attempt's signature")


@_check
def reconcile_with_nothing_landed_at_an_idempotent_provider_fails_with_domain_executor(make: OrchestratorFactory) -> None:
    """An idempotent provider's answer is authoritative: nothing under the key means nothing landed."""
    with world_of(make) as world:
        lease = world.running()
        world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", call_deadline_s=600)
        world.expired(lease)
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        expect_equal((result.outcome, result.state), ("absent", "failed"), "the reconciliation's (outcome, state)")
        expect_equal(world.attempt(lease.attempt_id).failure_domain, "executor", "the failed Attempt's domain")


@_check
def reconcile_waits_for_in_flight_calls_at_a_provider_without_idempotency(make: OrchestratorFactory) -> None:
    """Without idempotency, absence proves nothing until the call's deadline passed: pending first, then failed."""
    with world_of(make, supports_idempotency=False) as world:
        lease = world.running()
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", call_deadline_s=60)
        world.expired(lease)
        for _ in range(2):
            result = world.orchestrator.reconcile_attempt(lease.attempt_id)
            expect_equal((result.outcome, result.state), ("pending", "reconciling"), "reconciliation before the call's deadline")
            expect_equal(world.attempt(lease.attempt_id).state, "reconciling", "the Attempt while its call may land")
        world.clock.set(grant.deadline_at)
        with appends(world.store, 1, "the reconciliation at the call's deadline"):
            result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        expect_equal((result.outcome, result.state), ("absent", "failed"), "reconciliation at the call's deadline")
        expect_equal(world.attempt(lease.attempt_id).failure_domain, "executor", "the failed Attempt's domain")


@_check
def two_effects_for_one_key_end_blocked_with_contradictory_evidence(make: OrchestratorFactory) -> None:
    """Two effects for one logical operation cannot both be right: the Attempt ends Blocked with its evidence, never succeeded."""
    with world_of(make, supports_idempotency=False) as world:
        lease = world.running()
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        for _ in range(2):
            world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
        world.expired(lease)
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        expect_equal((result.outcome, result.state), ("contradictory", "blocked"), "the reconciliation's (outcome, state)")
        blocked = world.attempt(lease.attempt_id)
        expect(blocked.failure_domain == "contradictory_evidence", f"the blocked Attempt's domain: {blocked.failure_domain}")
        expect(grant.key in (blocked.evidence or ""), f"the evidence names the key {grant.key}: {blocked.evidence!r}")


@_check
def reconcile_finds_an_effect_whose_response_was_lost_and_ends_failed_with_its_receipt(make: OrchestratorFactory) -> None:
    """The provider accepted the call but the response was lost: reconciliation finds the effect by its key, records it, and fails."""
    with world_of(make) as world:
        lease = world.running()
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        world.provider.lose_responses(1)
        with expect_raises(ProviderTimeout, "the call whose response is lost"):
            world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
        expect_equal(world.store.get_intent(grant.key).receipt, None, "the receipt before reconciliation")
        world.expired(lease)
        result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        expect_equal((result.outcome, result.state), ("landed", "failed"), "the reconciliation's (outcome, state)")
        expect_equal(world.store.get_intent(grant.key).receipt, world.provider.ledger[0].provider_id, "the receipt reconciliation found")
        expect_equal(len(world.provider.ledger), 1, "effects at the provider")


@_check
def recovery_resumes_from_a_landed_pr_whose_response_was_lost(make: OrchestratorFactory) -> None:
    """Attempt 1's PR lands unseen and its lease expires: it fails (landed), Attempt 2's grant replays that PR, completes and succeeds."""
    for idempotent in (True, False):
        how = "idempotent provider" if idempotent else "provider without idempotency"
        with world_of(make, supports_idempotency=idempotent) as world:
            first = world.running()
            grant = world.orchestrator.grant_tool(*fence(first), "create-pr", "sha-1", request="open the pull request")
            world.provider.lose_responses(1)
            with expect_raises(ProviderTimeout, "the call whose response is lost"):
                world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
            world.expired(first)
            result = world.orchestrator.reconcile_attempt(first.attempt_id)
            expect_equal((result.outcome, result.state), ("landed", "failed"), f"Attempt 1's reconciliation ({how})")
            effect = world.provider.ledger[0]
            ended = world.attempt(first.attempt_id)
            expect_equal((ended.state, ended.reconciliation, ended.failure_domain), ("failed", "landed", "executor"), f"Attempt 1 ({how})")
            expect_equal(ended.failure_signature, "executor:lease lost after effects landed", f"Attempt 1's signature ({how})")
            expect_equal(world.store.get_intent(grant.key).receipt, effect.provider_id, f"the receipt found ({how})")
            decision = world.orchestrator.decide("task-1")
            expect(isinstance(decision, Decision) and decision.kind == "retry", f"the decision after Attempt 1 ({how}): {decision}")
            second = world.retried()
            expect_equal(world.attempt(second.attempt_id).previous_attempt_id, first.attempt_id, f"Attempt 2's predecessor ({how})")
            replay = world.orchestrator.grant_tool(*fence(second), "create-pr", "sha-1", request="open the pull request")
            expect(isinstance(replay, Grant), f"Attempt 2's grant of the same PR ({how}): {replay}")
            expect_equal((replay.key, replay.replay), (grant.key, effect.provider_id), f"Attempt 2's grant replays the PR ({how})")
            expect_equal(world.provider.effects_for("create-pr", "sha-1"), [effect], f"effects of the PR ({how})")
            expect_equal(world.store.get_intent(grant.key).attempt_id, second.attempt_id, f"the intent's Attempt after the replay ({how})")
            completed = world.orchestrator.complete_attempt(*fence(second), "opened the pull request", head_sha="sha-1")
            expect_equal(completed.state, "verifying", f"Attempt 2's completion ({how})")
            expect_equal(world.orchestrator.verify_attempt(second.attempt_id).state, "succeeded", f"Attempt 2's verification ({how})")
            expect(effect.provider_id in (world.attempt(second.attempt_id).evidence or ""), f"Attempt 2's evidence names the PR ({how})")
            expect_equal(world.orchestrator.decide("task-1").kind, "verify", f"the decision after Attempt 2 ({how})")
            expect_equal([a.state for a in world.store.get_attempts("task-1")], ["failed", "succeeded"], f"the Attempts' states ({how})")
            expect_equal(len(world.provider.ledger), 1, f"effects at the provider ({how})")


@_check
def a_crash_after_a_partial_workflow_does_not_end_succeeded(make: OrchestratorFactory) -> None:
    """The push landed but the PR was never opened and no result was reported: the Attempt fails with the push recorded, never succeeds."""
    reported = {
        "lease-expired": ("executor", "executor:lease lost after effects landed"),
        "failure-reported": ("provider", "503 from the code host"),
    }
    for crash, (domain, signature) in reported.items():
        with world_of(make) as world:
            lease = world.running()
            push = world.orchestrator.grant_tool(*fence(lease), "push", "sha-1", spans_attempts=False)
            pushed = world.provider.perform(push.key, "push", "sha-1", "push the branch")
            world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
            if crash == "lease-expired":
                world.expired(lease)
            else:
                failure = world.orchestrator.report_failure(*fence(lease), "provider", "503 from the code host")
                expect_equal(failure.state, "reconciling", "the reported failure")
            result = world.orchestrator.reconcile_attempt(lease.attempt_id)
            expect_equal((result.outcome, result.state), ("landed", "failed"), f"the reconciliation after {crash}")
            ended = world.attempt(lease.attempt_id)
            shape = (ended.failure_domain, ended.failure_signature, ended.reconciliation)
            expect_equal(shape, (domain, signature, "landed"), f"the failed Attempt after {crash}")
            expect_equal(world.store.get_intent(push.key).receipt, pushed.provider_id, f"the push's receipt after {crash}")
            expect(isinstance(world.orchestrator.verify_attempt(lease.attempt_id), Refused), f"verifying a failed Attempt ({crash})")
            expect_equal(world.attempt(lease.attempt_id).state, "failed", f"the Attempt after a refused verification ({crash})")
            expect("verifying" not in states_passed(world.store, lease.attempt_id), f"the Attempt never verified ({crash})")
            expect_equal(world.orchestrator.decide("task-1").kind, "retry", f"the decision after {crash}")


@_check
def landed_effects_with_a_repeated_signature_end_quarantined(make: OrchestratorFactory) -> None:
    """Two Attempts in a row lose their lease after effects landed: the repeated signature is poison, so the second is quarantined."""
    with world_of(make) as world:
        for number, identity in ((1, "sha-1"), (2, "sha-2")):
            lease = world.running() if number == 1 else world.retried()
            grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", identity)
            world.provider.perform(grant.key, "create-pr", identity, "open the pull request")
            world.expired(lease)
            expect_equal(world.orchestrator.reconcile_attempt(lease.attempt_id).outcome, "landed", f"Attempt {number}'s reconciliation")
        first, second = world.store.get_attempts("task-1")
        expect_equal((first.state, second.state), ("failed", "quarantined"), "the two Attempts' states")
        signature = "executor:lease lost after effects landed"
        expect_equal((first.failure_signature, second.failure_signature), (signature, signature), "the two Attempts' signatures")
        expect_equal(world.orchestrator.decide("task-1").kind, "escalate", "the decision after a quarantined Attempt")


@_check
def cancelled_attempt_whose_effect_landed_ends_cancelled_with_the_receipt(make: OrchestratorFactory) -> None:
    """Cancellation still ends cancelled when reconciliation finds a landed effect: recorded, unclassified, not failed."""
    with world_of(make) as world:
        lease = world.running()
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        effect = world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
        world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
        result = world.orchestrator.acknowledge_cancel(*fence(lease))
        expect_equal((result.outcome, result.state), ("landed", "cancelled"), "the acknowledged cancellation's reconciliation")
        cancelled = world.attempt(lease.attempt_id)
        shape = (cancelled.reconciliation, cancelled.failure_domain, cancelled.failure_signature)
        expect_equal(shape, ("landed", None, None), "the cancelled Attempt's (findings, domain, signature)")
        expect_equal(world.store.get_intent(grant.key).receipt, effect.provider_id, "the receipt of the landed effect")


@_check
def reconcile_of_a_running_attempt_is_refused(make: OrchestratorFactory) -> None:
    """Reconciliation starts only from Suspect or Reconciling; a live Attempt is not second-guessed."""
    with world_of(make) as world:
        lease = world.running()
        before = world.attempt(lease.attempt_id)
        with appends(world.store, 1, "a refused reconciliation") as events:
            result = world.orchestrator.reconcile_attempt(lease.attempt_id)
        expect(isinstance(result, Refused) and not events[0].accepted, f"reconciliation of a running Attempt: {result}")
        expect_equal(world.attempt(lease.attempt_id), before, "the running Attempt after a refused reconciliation")


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


@_check
def a_contract_that_loses_a_race_is_refused_and_recorded(make: OrchestratorFactory) -> None:
    """A reconciliation or verification whose Attempt changed during its provider lookup is refused, and the refusal is in the history."""
    for contract in ("reconcile_attempt", "verify_attempt"):
        with world_of(make, provider=RacingProvider) as world:
            lease = world.running()
            grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
            if contract == "verify_attempt":
                world.provider.perform(grant.key, "create-pr", "sha-1", "open the pull request")
                world.orchestrator.complete_attempt(*fence(lease), "opened the pull request")
            else:
                world.orchestrator.report_failure(*fence(lease), "executor", "worker crashed")
            raced: dict[str, object] = {}

            def race(world=world, raced=raced, lease=lease) -> None:
                world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
                raced["attempt"], raced["seq"] = world.attempt(lease.attempt_id), world.store.events()[-1].seq

            world.provider.race = race
            result = getattr(world.orchestrator, contract)(lease.attempt_id)
            expect(isinstance(result, Refused), f"{contract} that lost a race: {result}")
            own = world.store.events(after_seq=raced["seq"])
            expect_equal(len(own), 1, f"events of {contract} after the race")
            shape = (own[0].kind, own[0].accepted, own[0].reason)
            expect_equal(shape, (contract.removesuffix("_attempt"), False, result.reason), f"the refused {contract}'s event")
            expect_equal(world.attempt(lease.attempt_id), raced["attempt"], f"the Attempt after {contract} lost the race")


# --------------------------------------------------------------- idempotency


@_check
def key_is_minted_from_the_logical_operation_never_the_clock(make: OrchestratorFactory) -> None:
    """The key names the operation (task and content when it spans attempts, the Attempt otherwise), the same at any time."""
    with world_of(make) as world:
        lease = world.running()
        spanning, owned = [], []
        for at in (3, 27.5):
            world.clock.set(at)
            spanning.append(world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1").key)
            owned.append(world.orchestrator.grant_tool(*fence(lease), "push", "sha-1", spans_attempts=False).key)
        expect_equal(spanning, ["create-pr:task-1:sha-1"] * 2, "keys of an operation that spans attempts")
        expect_equal(owned, [f"push:{lease.attempt_id}:sha-1"] * 2, "keys of an operation the Attempt owns")


@_check
def intent_is_persisted_before_the_grant_returns(make: OrchestratorFactory) -> None:
    """When the worker holds a grant, its intent is already durable, naming the operation, the Attempt and the deadline."""
    with world_of(make) as world:
        lease = world.running()
        world.clock.advance(4)
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", request="open it", call_deadline_s=90)
        intent = world.store.get_intent(grant.key)
        expect(intent is not None, f"no intent is stored under the granted key {grant.key}")
        shape = (intent.attempt_id, intent.operation, intent.identity, intent.request)
        expect_equal(shape, (lease.attempt_id, "create-pr", "sha-1", "open it"), "the intent's (attempt, operation, identity, request)")
        expect_equal((intent.minted_at, intent.deadline_at, intent.receipt), (4, 94, None), "the intent's (minted, deadline, receipt)")
        expect(grant.deadline_at == 94 and grant.replay is None, f"the grant's deadline and replay: {grant}")
        expect_equal([i.key for i in world.store.get_intents(lease.attempt_id)], [grant.key], "the Attempt's intents")


@_check
def worker_presenting_its_own_key_is_refused(make: OrchestratorFactory) -> None:
    """Keys belong to the orchestrator: a worker-minted key is refused and no intent is recorded for it."""
    with world_of(make) as world:
        lease = world.running()
        with appends(world.store, 1, "a grant with a worker's key") as events:
            result = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", key="create-pr:1718000000.123")
        expect(refused_on(result, "key_minted"), f"a grant presenting a worker-minted key: {result}")
        expect_equal(world.store.get_intents(lease.attempt_id), [], "the Attempt's intents")
        expect_equal(world.store.get_intent("create-pr:1718000000.123"), None, "an intent under the worker's key")
        expect(not events[0].accepted, f"the refused grant's event: {events[0]}")
        granted = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", key="create-pr:task-1:sha-1")
        expect(granted.accepted, f"a grant presenting the key the orchestrator mints: {granted}")


@_check
def grant_after_a_receipt_replays_the_recorded_result(make: OrchestratorFactory) -> None:
    """A second delivery of the same operation gets the recorded result back instead of a second effect."""
    with world_of(make) as world:
        lease = world.running()
        grant, provider_id = world.landed(lease)
        replay = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        expect(isinstance(replay, Grant), f"a second grant of a receipted operation: {replay}")
        expect_equal((replay.key, replay.replay), (grant.key, f"url of {provider_id}"), "the replay's (key, recorded result)")
        expect_equal(len(world.provider.ledger), 1, "effects at the provider")


@_check
def next_attempt_finds_the_previous_attempts_effect_instead_of_a_second(make: OrchestratorFactory) -> None:
    """Attempt N+1 granted the operation Attempt N completed gets N's receipt (a replay), so the provider holds one effect."""
    with world_of(make) as world:
        first = world.running()
        grant, provider_id = world.landed(first)
        world.provider.set_verdict(provider_id, "failed:test_ports")
        world.orchestrator.complete_attempt(*fence(first), "opened the pull request", head_sha="sha-1")
        expect_equal(world.orchestrator.verify_attempt(first.attempt_id).state, "failed", "verification against a failing CI verdict")
        second = world.retried(hypothesis=CHANGED_HYPOTHESIS)
        replay = world.orchestrator.grant_tool(*fence(second), "create-pr", "sha-1")
        expect(isinstance(replay, Grant), f"Attempt 2's grant of Attempt 1's operation: {replay}")
        expect_equal((replay.key, replay.replay), (grant.key, f"url of {provider_id}"), "the replay's (key, recorded result)")
        expect_equal(len(world.provider.effects_for("create-pr", "sha-1")), 1, "effects of the operation")


# -------------------------------------------------------------------- cancel


@_check
def cancel_of_an_unclaimed_attempt_reconciles_then_cancels(make: OrchestratorFactory) -> None:
    """With nobody to signal, cancellation still runs the protocol through Reconciling before Cancelled."""
    for admitted in (False, True):
        how = "admitted" if admitted else "queued"
        with world_of(make) as world:
            attempt_id = world.dispatched()
            if admitted:
                world.orchestrator.admit(attempt_id)
            with appends(world.store, 3, f"a cancel of a {how} Attempt"):
                result = world.orchestrator.cancel_attempt(attempt_id, "operator stops the run")
            expect_equal(result.state, "cancelled", f"the cancel of a {how} Attempt")
            path = states_passed(world.store, attempt_id)[-3:]
            expect_equal(path, ["cancelling", "reconciling", "cancelled"], f"the {how} Attempt's last states")
            claim = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
            expect(isinstance(claim, Refused), f"a claim after the cancel of a {how} Attempt: {claim}")


@_check
def cancel_of_a_running_attempt_signals_refuses_grants_and_ends_on_acknowledgement(make: OrchestratorFactory) -> None:
    """Running: the holder learns of the request, gets no new tool grants, and its acknowledgement leads to Reconciling, then Cancelled."""
    with world_of(make) as world:
        lease = world.running()
        with appends(world.store, 1, "a cancel of a running Attempt"):
            expect_equal(world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run").state, "cancelling", "the cancel")
        expect(world.orchestrator.renew_lease(*fence(lease)).cancel_requested, "the holder's next renewal says cancellation was requested")
        with appends(world.store, 1, "a grant after the cancel") as events:
            grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        expect(isinstance(grant, Refused) and not events[0].accepted, f"a grant after the cancel: {grant}")
        expect_equal(world.store.get_intents(lease.attempt_id), [], "intents after the refused grant")
        with appends(world.store, 2, "the acknowledgement"):
            result = world.orchestrator.acknowledge_cancel(*fence(lease))
        expect_equal(result.state, "cancelled", "the acknowledged cancellation")
        path = states_passed(world.store, lease.attempt_id)[-3:]
        expect_equal(path, ["cancelling", "reconciling", "cancelled"], "the Attempt's last states")


@_check
def unacknowledged_cancel_times_out_through_reconciling_to_cancelled(make: OrchestratorFactory) -> None:
    """An executor that never acknowledges is timed out by the reaper after cancel_ack_timeout_s; reconciliation then cancels."""
    with world_of(make, cancel_ack_timeout_s=20) as world:
        lease = world.running()
        world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
        world.clock.advance(19)
        expect_equal(world.orchestrator.reap(), [], "the reaper's moves before the acknowledgement deadline")
        world.clock.advance(1)
        with appends(world.store, 1, "the reap at the acknowledgement deadline") as events:
            expect_equal(world.orchestrator.reap(), [(lease.attempt_id, "reconciling")], "the reaper's moves at the deadline")
        expect_equal((events[0].kind, events[0].actor), ("cancel_timed_out", "reaper"), "the time-out's event (kind, actor)")
        expect_equal(world.orchestrator.reconcile_attempt(lease.attempt_id).state, "cancelled", "the reconciliation after the time-out")
        path = states_passed(world.store, lease.attempt_id)[-3:]
        expect_equal(path, ["cancelling", "reconciling", "cancelled"], "the Attempt's last states")


@_check
def late_completion_after_cancellation_is_refused_and_reopens_nothing(make: OrchestratorFactory) -> None:
    """Late events stay in the history but cannot reopen a cancelled Attempt or its task."""
    with world_of(make) as world:
        lease = world.running()
        world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
        world.orchestrator.acknowledge_cancel(*fence(lease))
        before = world.snapshot()[1:]
        with appends(world.store, 1, "a late completion") as events:
            result = world.orchestrator.complete_attempt(*fence(lease), "finished anyway")
        expect(isinstance(result, Refused), f"a completion after the cancellation: {result}")
        shape = (events[0].kind, events[0].accepted, events[0].generation)
        expect_equal(shape, ("complete", False, lease.generation), "the late completion's event")
        for late in (world.orchestrator.renew_lease, world.orchestrator.start_attempt):
            expect(isinstance(late(*fence(lease)), Refused), f"{late.__name__} after the cancellation was not refused")
        late_grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        expect(isinstance(late_grant, Refused), f"a grant after the cancellation: {late_grant}")
        expect_equal(world.snapshot()[1:], before, "tasks, Attempts, intents and ledger after late calls")


@_check
def duplicate_cancel_changes_nothing(make: OrchestratorFactory) -> None:
    """A second cancellation request keeps the first request's reason and deadline and the Attempt's state."""
    with world_of(make) as world:
        lease = world.running()
        world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run")
        before = world.attempt(lease.attempt_id)
        world.clock.advance(10)
        with appends(world.store, 1, "a second cancel"):
            result = world.orchestrator.cancel_attempt(lease.attempt_id, "operator really means it")
        expect_equal(result.state, "cancelling", "the second cancel's state")
        after = replace(world.attempt(lease.attempt_id), version=0)
        expect_equal(after, replace(before, version=0), "the Attempt (but its version) after a second cancel")


@_check
def cancelling_a_terminal_attempt_is_refused(make: OrchestratorFactory) -> None:
    """A terminal Attempt is immutable: cancelling it is refused, recorded, and changes nothing."""
    for end in (end_cancelled, end_succeeded, end_blocked):
        with world_of(make) as world:
            attempt_id = end(world)
            before = world.attempt(attempt_id)
            with appends(world.store, 1, f"a cancel after {end.__name__}") as events:
                result = world.orchestrator.cancel_attempt(attempt_id, "operator tidies up")
            expect(isinstance(result, Refused) and not events[0].accepted, f"a cancel after {end.__name__}: {result}")
            expect_equal(world.attempt(attempt_id), before, f"the terminal Attempt after a cancel ({end.__name__})")


# -------------------------------------------------------------- verification


@_check
def verified_effect_ends_succeeded(make: OrchestratorFactory) -> None:
    """An effect found at the provider with a passing verdict is independent evidence: the Attempt succeeds."""
    with world_of(make) as world:
        attempt_id = end_succeeded(world)
        expect("passed" in (world.attempt(attempt_id).evidence or ""), f"the evidence of success: {world.attempt(attempt_id).evidence!r}")


@_check
def completion_with_no_recorded_effects_ends_blocked_never_succeeded(make: OrchestratorFactory) -> None:
    """The worker's claim alone is not evidence: with no effect to check, verification ends Blocked."""
    with world_of(make) as world:
        lease = world.running()
        world.orchestrator.complete_attempt(*fence(lease), "all tests pass, trust me")
        with appends(world.store, 1, "the verification"):
            result = world.orchestrator.verify_attempt(lease.attempt_id)
        expect_equal(result.state, "blocked", "verification of a claim with no effect")
        expect_equal(world.attempt(lease.attempt_id).failure_domain, "contradictory_evidence", "the blocked Attempt's domain")


@_check
def failing_provider_verdict_fails_with_domain_validation(make: OrchestratorFactory) -> None:
    """A failing CI verdict refutes the worker's claim: failed, classified as validation, with the verdict as signature."""
    with world_of(make) as world:
        lease = world.running()
        _grant, provider_id = world.landed(lease)
        world.provider.set_verdict(provider_id, "failed:tests")
        world.orchestrator.complete_attempt(*fence(lease), "opened the pull request")
        expect_equal(world.orchestrator.verify_attempt(lease.attempt_id).state, "failed", "verification against a failing verdict")
        failed = world.attempt(lease.attempt_id)
        expect_equal((failed.failure_domain, failed.failure_signature), ("validation", "tests"), "the failed Attempt's (domain, signature)")


@_check
def pending_verdict_leaves_the_attempt_verifying(make: OrchestratorFactory) -> None:
    """While the provider has no verdict, verification waits: no success, no failure."""
    with world_of(make) as world:
        lease = world.running()
        _grant, provider_id = world.landed(lease)
        world.provider.set_verdict(provider_id, None)
        world.orchestrator.complete_attempt(*fence(lease), "opened the pull request")
        before = world.attempt(lease.attempt_id)
        with appends(world.store, 1, "a verification with the verdict pending"):
            world.orchestrator.verify_attempt(lease.attempt_id)
        expect_equal(world.attempt(lease.attempt_id), before, "the Attempt while its verdict is pending")
        world.provider.set_verdict(provider_id, "passed")
        expect_equal(world.orchestrator.verify_attempt(lease.attempt_id).state, "succeeded", "verification once the verdict passed")
