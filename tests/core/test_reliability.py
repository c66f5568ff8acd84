"""The reliability controls, proven through the Orchestrator on every store.

The control modules have their own unit and property tests (test_backoff,
test_rate_limit, test_breaker, test_admission). This suite proves each control
is wired: configured by a `ReliabilityConfig` built per test, applied by the
contracts the chapter names (admission, claim, the tool gateway, receipts,
reconciliation, retry, decide), driven only by a `ManualClock` and a seeded
`random.Random`, and visible in the one history: every refusal is an event
whose reason names the guard that refused it.

Every test runs against every store (the `store` fixture: memory, SQLite,
PostgreSQL), so a control that lived only in one store's code would fail here.
The world is the kit's (`shiftchange.testing.rig.World`) over that store.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from shiftchange.core import (
    AdmissionConfig,
    Attempt,
    BackoffConfig,
    BreakerConfig,
    Budget,
    Claim,
    ConcurrencyLimitConfig,
    CoreConfig,
    Fallback,
    Grant,
    InputError,
    Lease,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    ProviderTimeout,
    RateLimitConfig,
    Refused,
    ReliabilityConfig,
    RetryBudgetConfig,
    Store,
    mint_key,
)
from shiftchange.core.backoff import bounds_s
from shiftchange.testing.rig import CHANGED_HYPOTHESIS, FIRST_HYPOTHESIS, WORKSPACE, World, fence

OTHER_WORKSPACE = "repo-b"
REASON = "the forge answered 503; transient, retry after backoff"
SIGNATURE = "503 from the code host"
NO_BACKOFF = BackoffConfig(strategy="none")
BREAKER = BreakerConfig(failures_to_open=3, cool_down_s=10.0, probes_half_open=2, ramp_s=0.0)
LIMITS = {"code_host": RateLimitConfig(), "model_provider": RateLimitConfig(), "small_model": RateLimitConfig()}
FALLBACK = Fallback(
    dependency="model_provider",
    substitute="small_model",
    semantic_equivalence="same API, smaller model: plans, no refactors",
    cost_factor=0.2,
    latency_factor=0.5,
    quality="lower on long contexts",
    autonomy_ceiling="draft PR only",
)


def key(identity: str, task_id: str = "task-1", operation: str = "model-call") -> str:
    """The key the gateway mints for a call that spans attempts (the default)."""
    return mint_key(operation, task_id, "", identity, spans_attempts=True)


def open_circuit(world: World, lease: Lease, dependency: str = "code_host", signature: str = SIGNATURE) -> None:
    """Grant and fail calls with one signature until the dependency's circuit opens (the reference core's breakers say so)."""
    for number in range(world.reliability.breaker.failures_to_open):
        grant = world.grant(lease, f"{dependency}-call-{number}", dependency=dependency)
        assert isinstance(grant, Grant), grant
        assert world.orchestrator.report_call_failure(*fence(lease), grant.key, signature).accepted
    assert world.orchestrator.breakers.state(dependency, world.clock.now()) == "open"


def states(results: dict) -> dict[str, str]:
    return {attempt_id: result.state for attempt_id, result in results.items()}


# ------------------------------------------------------------ timeout budget


def test_timeout_budget_is_set_at_claim_and_a_call_that_would_overrun_it_is_refused(store):
    """The claim sets the Attempt's timeout budget; each grant sees less of it left, and a call longer than what is left never starts."""
    world = World.over(store, ReliabilityConfig(), timeout_budget_s=100.0)
    attempt_id = world.dispatched()
    assert world.attempt(attempt_id).timeout_budget_s == 0.0
    lease = world.started(attempt_id)
    assert world.attempt(attempt_id).timeout_budget_s == 100.0
    seen = []
    for identity in ("plan-1", "plan-2", "plan-3"):
        grant = world.grant(lease, identity, call_deadline_s=10.0)
        assert isinstance(grant, Grant), grant
        seen.append(grant.timeout_left_s)
        world.clock.advance(25.0)
        world.renewed(lease)
    assert seen == [100.0, 75.0, 50.0]
    assert world.grant(lease, "exact-fit", call_deadline_s=25.0).accepted
    result = world.grant(lease, "overrun", call_deadline_s=25.5)
    assert isinstance(result, Refused) and "timeout_budget_left" in result.reason
    world.refused("grant_tool", "timeout_budget_left", attempt_id)
    assert world.store.get_intent(key("overrun")) is None
    assert sorted(i.identity for i in world.store.get_intents(attempt_id)) == ["exact-fit", "plan-1", "plan-2", "plan-3"]


# ------------------------------------------------------------------ backoff


@pytest.mark.parametrize("strategy", ["exponential", "full_jitter", "equal_jitter", "decorrelated_jitter"])
def test_transient_failure_delays_the_next_claim_by_a_backoff_within_its_bounds(store, strategy):
    """After a transient failure, attempt N+1 is claimable only from now + backoff_s, and backoff_s lies in the strategy's bounds."""
    config = BackoffConfig(strategy=strategy, base_s=2.0, cap_s=30.0)
    world = World.over(store, ReliabilityConfig(backoff=config), seed=3)
    world.failed(world.running(), "provider", SIGNATURE)
    world.clock.advance(5.0)
    second = world.requeued()
    low_s, high_s = bounds_s(config, 0)
    assert second.backoff_s > 0 and low_s <= second.backoff_s <= high_s
    assert second.eligible_at == 5.0 + second.backoff_s
    # While it waits out its backoff it is not even queued for admission, so it holds no bulkhead slot.
    waiting = world.orchestrator.admit(second.attempt_id)
    assert isinstance(waiting, Refused) and "backoff" in waiting.reason
    assert world.orchestrator.admission.status(second.attempt_id) == "gone"
    early = world.orchestrator.claim_attempt("task-1", "worker-b", WORKSPACE)
    assert isinstance(early, Refused) and world.attempt(second.attempt_id).state == "queued"
    world.clock.set(second.eligible_at)
    assert world.orchestrator.admit(second.attempt_id).state == "admitted"
    assert isinstance(world.orchestrator.claim_attempt("task-1", "worker-b", WORKSPACE), Claim)


def test_validation_failure_with_a_changed_hypothesis_gets_no_backoff(store):
    """Backoff paces only transient failures: a new Attempt with a changed hypothesis is claimable at once."""
    world = World.over(store, ReliabilityConfig(backoff=BackoffConfig(strategy="exponential", base_s=5.0)))
    world.failed(world.running(), "validation", "test_ports fails")
    second = world.requeued(hypothesis=CHANGED_HYPOTHESIS)
    assert (second.backoff_s, second.eligible_at) == (0.0, None)
    world.claimed(second.attempt_id, "worker-b")


def test_strategy_none_leaves_a_transient_retry_claimable_at_once(store):
    """With strategy none a transient failure still permits the retry, and attempt N+1 has no eligible_at."""
    world = World.over(store, ReliabilityConfig(backoff=NO_BACKOFF))
    world.failed(world.running(), "provider", SIGNATURE)
    second = world.requeued()
    assert (second.backoff_s, second.eligible_at) == (0.0, None)
    world.claimed(second.attempt_id, "worker-b")


def backoffs_drawn(world: World, failures: int) -> list[float]:
    """Fail `failures` Attempts in a row with the provider domain (distinct signatures), returning each retry's backoff_s."""
    lease = world.running()
    drawn = []
    for number in range(failures):
        world.failed(lease, "provider", f"503 from the forge, call {number}")
        attempt = world.requeued()
        drawn.append(attempt.backoff_s)
        if number + 1 < failures:
            lease = world.started_when_eligible(attempt)
    return drawn


def test_the_same_seed_draws_the_same_backoff(make_store):
    """Backoff jitter comes only from the orchestrator's seeded Random: one seed, one sequence, whatever the global random state."""
    runs = []
    for seed, global_seed in ((7, 1), (7, 2), (8, 1)):
        random.seed(global_seed)
        runs.append(backoffs_drawn(World.over(make_store(), ReliabilityConfig(), seed=seed), 2))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_consecutive_transient_failures_grow_the_exponential_backoff_up_to_its_cap(store):
    """Each further failure of one domain doubles the wait up to cap_s; a failure of another domain starts over at base_s."""
    world = World.over(store, ReliabilityConfig(backoff=BackoffConfig(strategy="exponential", base_s=2.0, cap_s=5.0)))
    assert backoffs_drawn(world, 3) == [2.0, 4.0, 5.0]
    world.failed(world.started_when_eligible(world.store.get_attempts("task-1")[-1]), "executor", "sandbox out of memory")
    assert world.requeued().backoff_s == 2.0


# ---------------------------------------------------------------- rate limits


def test_gateway_rate_limit_refuses_calls_beyond_the_bucket_until_it_refills(store):
    """With rate 1/s and burst 2, the third immediate grant is refused on rate_allows; refusals take no token; a second buys one call."""
    limits = {**LIMITS, "code_host": RateLimitConfig(rate_per_s=1.0, burst=2)}
    world = World.over(store, ReliabilityConfig(rate_limits=limits))
    lease = world.running()
    assert [world.grant(lease, f"call-{n}", dependency="code_host").accepted for n in range(2)] == [True, True]
    for n in range(3):
        result = world.grant(lease, f"denied-{n}", dependency="code_host")
        assert isinstance(result, Refused) and "rate_allows" in result.reason
        world.refused("grant_tool", "rate_allows", lease.attempt_id)
        assert world.store.get_intent(key(f"denied-{n}")) is None
    assert world.grant(lease, "other-dependency", dependency="model_provider").accepted
    world.clock.advance(1.0)
    assert world.grant(lease, "refilled", dependency="code_host").accepted
    assert not world.grant(lease, "too-soon", dependency="code_host").accepted
    world.clock.advance(0.5)
    assert not world.grant(lease, "half-a-token", dependency="code_host").accepted
    world.clock.advance(0.5)
    assert world.grant(lease, "a-second-later", dependency="code_host").accepted


def test_a_grant_refused_by_another_guard_takes_no_rate_token(store):
    """Only an accepted grant takes a token: a call refused for its spend leaves the bucket as it was."""
    limits = {**LIMITS, "code_host": RateLimitConfig(rate_per_s=1.0, burst=2)}
    world = World.over(store, ReliabilityConfig(rate_limits=limits, attempt_spend_max_usd=1.0))
    lease = world.running()
    assert world.grant(lease, "first", cost_usd=0.5).accepted
    for identity in ("too-dear-1", "too-dear-2"):
        assert not world.grant(lease, identity, cost_usd=2.0).accepted
        world.refused("grant_tool", "spend_within_budget", lease.attempt_id)
    assert world.grant(lease, "second", cost_usd=0.5).accepted
    assert not world.grant(lease, "third").accepted
    world.refused("grant_tool", "rate_allows", lease.attempt_id)


def test_grant_to_an_unconfigured_dependency_is_bad_input_and_changes_nothing(store):
    """A call to a dependency with no rate limit is a caller's mistake: InputError, no event, no intent."""
    world = World.over(store, ReliabilityConfig())
    lease = world.running()
    before = world.store.events()
    with pytest.raises(InputError, match="unknown dependency"):
        world.grant(lease, "plan-1", dependency="pager")
    assert world.store.events() == before
    assert world.store.get_intents(lease.attempt_id) == []


def test_admission_rate_limit_defers_in_queue_order_and_admits_as_tokens_refill(store):
    """An admission bucket defers admissions beyond it (still queued, one recorded capacity deferral), then admits them in order."""
    world = World.over(store, ReliabilityConfig(admission_rate=RateLimitConfig(rate_per_s=1.0, burst=2)))
    attempt_ids = [world.dispatched(f"task-{n}") for n in range(1, 5)]
    first = world.orchestrator.run_admission()
    assert states(first) == dict(zip(attempt_ids, ["admitted", "admitted", "queued", "queued"], strict=True))
    for attempt_id in attempt_ids[2:]:
        assert world.attempt(attempt_id).state == "queued"
        deferral = world.last_event("defer", attempt_id)
        assert deferral.accepted and "admission rate limit" in deferral.detail
    world.clock.advance(1.0)
    # The one still held keeps its place and is not deferred again: its cause has not changed.
    assert states(world.orchestrator.run_admission()) == {attempt_ids[2]: "admitted"}
    assert world.attempt(attempt_ids[3]).state == "queued"
    world.clock.advance(1.0)
    assert states(world.orchestrator.run_admission()) == {attempt_ids[3]: "admitted"}


def test_the_admission_rate_limit_does_not_let_the_queue_grow_past_its_depth(store):
    """When the admission bucket holds attempts back, the queue still keeps to queue_depth_max by shedding the lowest priority."""
    rate = RateLimitConfig(rate_per_s=0.01, burst=1)
    world = World.over(store, ReliabilityConfig(admission_rate=rate, admission=AdmissionConfig(queue_depth_max=1)))
    assert world.orchestrator.admit(world.dispatched("first")).state == "admitted"
    for name, priority in (("low", 0), ("high", 9), ("mid", 5)):
        world.dispatched(name, priority=priority)
    world.orchestrator.run_admission()
    queued = [a.attempt_id for name in ("low", "high", "mid") for a in world.store.get_attempts(name) if a.state == "queued"]
    assert queued == ["high#1"]


# ----------------------------------------------------------- circuit breaker


def test_consecutive_failures_with_one_signature_open_the_circuit(store):
    """failures_to_open reported failures with one signature open the circuit; the next grant is refused until the cool-down ends."""
    world = World.over(store, ReliabilityConfig(breaker=BREAKER))
    lease = world.running()
    keys = [world.grant(lease, f"call-{n}").key for n in range(3)]
    for call_key in keys[:2]:
        assert world.orchestrator.report_call_failure(*fence(lease), call_key, SIGNATURE).accepted
    assert world.grant(lease, "still-closed").accepted
    assert world.orchestrator.report_call_failure(*fence(lease), keys[2], SIGNATURE).accepted
    result = world.grant(lease, "refused")
    assert isinstance(result, Refused) and "circuit_allows" in result.reason
    assert "circuit open until 10.0" in world.refused("grant_tool", "circuit_allows", lease.attempt_id).detail
    assert world.store.get_intent(key("refused")) is None


def test_failures_with_different_signatures_do_not_open_the_circuit(store):
    """The counter is per signature: assorted failures restart it, so the dependency is not condemned."""
    world = World.over(store, ReliabilityConfig(breaker=BREAKER))
    lease = world.running()
    for n in range(6):
        grant = world.grant(lease, f"call-{n}")
        assert isinstance(grant, Grant), grant
        world.orchestrator.report_call_failure(*fence(lease), grant.key, f"failure number {n % 2}")
    assert world.grant(lease, "after-assorted-failures").accepted


def test_after_the_cool_down_exactly_the_probe_allowance_passes_and_a_receipt_closes_the_circuit(store):
    """Half-open lets probes_half_open grants through and refuses the next; a probe's receipt closes the circuit."""
    world = World.over(store, ReliabilityConfig(breaker=BREAKER))
    lease = world.running()
    open_circuit(world, lease)
    world.clock.advance(9.5)
    assert not world.grant(lease, "during-cool-down").accepted
    assert "circuit open until 10.0" in world.refused("grant_tool", "circuit_allows").detail
    world.clock.advance(0.5)
    probes = [world.grant(lease, f"probe-{n}") for n in range(BREAKER.probes_half_open)]
    assert all(isinstance(p, Grant) for p in probes), probes
    assert not world.grant(lease, "one-probe-too-many").accepted
    assert "half-open" in world.refused("grant_tool", "circuit_allows").detail
    effect = world.provider.perform(probes[0].key, "model-call", "probe-0", "")
    assert world.orchestrator.record_receipt(*fence(lease), probes[0].key, effect.provider_id).accepted
    assert [world.grant(lease, f"closed-{n}").accepted for n in range(3)] == [True, True, True]


def test_a_failed_probe_reopens_the_circuit_for_a_fresh_cool_down(store):
    """A probe that fails reopens the circuit at once, with a new cool-down counted from the failure."""
    world = World.over(store, ReliabilityConfig(breaker=BREAKER))
    lease = world.running()
    open_circuit(world, lease)
    world.clock.advance(12.0)
    probe = world.grant(lease, "probe")
    assert world.orchestrator.report_call_failure(*fence(lease), probe.key, SIGNATURE).accepted
    assert not world.grant(lease, "after-failed-probe").accepted
    assert "circuit open until 22.0" in world.refused("grant_tool", "circuit_allows").detail


@pytest.mark.parametrize("landed", [False, True], ids=["never-landed", "landed"])
def test_reconciling_an_expired_attempt_teaches_the_breaker_what_its_probe_did(store, landed):
    """A probe whose worker vanished still reports through reconciliation: absent reopens the circuit, landed closes it."""
    breaker = BreakerConfig(failures_to_open=2, cool_down_s=10.0, ramp_s=0.0)
    world = World.over(store, ReliabilityConfig(backoff=NO_BACKOFF, breaker=breaker))
    open_circuit(world, world.running("task-0", "worker-z"))
    world.clock.advance(10.0)
    lease = world.running("task-1", "worker-a")
    probe = world.grant(lease, "probe")
    assert isinstance(probe, Grant), probe
    if landed:
        world.provider.lose_responses(1)
        with pytest.raises(ProviderTimeout):
            world.provider.perform(probe.key, "model-call", "probe", "")
    world.clock.advance(world.config.lease_ttl_s + 1)
    assert (lease.attempt_id, "suspect") in world.orchestrator.reap()
    assert world.orchestrator.reconcile_attempt(lease.attempt_id).outcome == ("landed" if landed else "absent")
    other = world.running("task-2", "worker-b")
    result = world.grant(other, "after-reconciliation")
    assert result.accepted is landed
    if not landed:
        assert "circuit open until 51.0" in world.refused("grant_tool", "circuit_allows", other.attempt_id).detail


@pytest.mark.parametrize("call", ["refused-by-the-table", "replay"])
def test_a_grant_that_calls_no_dependency_spends_no_half_open_probe(store, call):
    """A grant the table refuses, or a replay of a receipted key, reaches no dependency, so the next real call still gets the probe."""
    world = World.over(store, ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, cool_down_s=10.0, probes_half_open=1)))
    lease = world.running()
    receipted = world.grant(lease, "sha-1", operation="create-pr")
    effect = world.provider.perform(receipted.key, "create-pr", "sha-1", "open the pull request")
    assert world.orchestrator.record_receipt(*fence(lease), receipted.key, effect.provider_id).accepted
    open_circuit(world, lease)
    world.clock.advance(10.0)
    world.renewed(lease)
    if call == "replay":
        replay = world.grant(lease, "sha-1", operation="create-pr")
        assert isinstance(replay, Grant) and replay.replay == effect.provider_id
    else:
        assert world.orchestrator.cancel_attempt(lease.attempt_id, "operator stops the run").state == "cancelling"
        assert not world.grant(lease, "while-cancelling").accepted
    other = world.running("task-2", "worker-b")
    assert world.grant(other, "the-probe").accepted


def test_call_failures_reported_by_successive_attempts_open_the_circuit(store):
    """The same call failure reported by consecutive Attempts, each then failing and reconciled, opens the circuit."""
    world = World.over(store, ReliabilityConfig(backoff=NO_BACKOFF, breaker=BreakerConfig(failures_to_open=2, cool_down_s=10.0)))
    for number in (1, 2):
        lease = world.running(f"task-{number}", f"worker-{number}")
        grant = world.grant(lease, f"sha-{number}", operation="create-pr")
        assert isinstance(grant, Grant), grant
        assert world.orchestrator.report_call_failure(*fence(lease), grant.key, SIGNATURE).accepted
        world.failed(lease, "provider", SIGNATURE)
    third = world.running("task-3", "worker-3")
    assert not world.grant(third, "sha-3", operation="create-pr").accepted


# ------------------------------------------------------------------ fallback


def test_an_open_circuit_routes_to_the_declared_fallback_and_records_the_switch(store):
    """While model_provider's circuit is open its calls go to small_model, under its own rate limit, as grant, intent and Attempt say."""
    limits = {**LIMITS, "small_model": RateLimitConfig(rate_per_s=1.0, burst=1)}
    world = World.over(store, ReliabilityConfig(rate_limits=limits, breaker=BREAKER, fallbacks=(FALLBACK,)))
    lease = world.running()
    assert world.grant(lease, "before", dependency="model_provider").dependency == "model_provider"
    assert world.attempt(lease.attempt_id).fallback is None
    open_circuit(world, lease, "model_provider")
    grant = world.grant(lease, "plan-1", dependency="model_provider")
    assert isinstance(grant, Grant), grant
    assert grant.dependency == "small_model"
    assert world.store.get_intent(grant.key).dependency == "small_model"
    assert world.attempt(lease.attempt_id).fallback == "model_provider -> small_model"
    assert world.last_event("grant_tool").accepted
    assert not world.grant(lease, "plan-2", dependency="model_provider").accepted
    world.refused("grant_tool", "rate_allows", lease.attempt_id)
    assert world.grant(lease, "unaffected", dependency="code_host").dependency == "code_host"
    world.clock.advance(BREAKER.cool_down_s)
    assert world.grant(lease, "probe", dependency="model_provider").dependency == "model_provider"


def test_a_fallback_call_is_charged_at_the_fallbacks_declared_cost_factor(store):
    """The substitute's declared cost_factor scales what a call routed to it spends, on the Attempt and the task alike."""
    world = World.over(store, ReliabilityConfig(rate_limits=LIMITS, breaker=BREAKER, fallbacks=(FALLBACK,)))
    lease = world.running()
    open_circuit(world, lease, "model_provider")
    before = (world.attempt(lease.attempt_id).cost_usd, world.store.get_task("task-1").cost_usd)
    assert world.grant(lease, "plan-1", dependency="model_provider", cost_usd=1.0).dependency == "small_model"
    after = (world.attempt(lease.attempt_id).cost_usd, world.store.get_task("task-1").cost_usd)
    assert after == pytest.approx((before[0] + FALLBACK.cost_factor, before[1] + FALLBACK.cost_factor))


def test_an_open_circuit_without_a_declared_fallback_refuses_the_call(store):
    """No fallback is improvised: without one declared, an open circuit refuses the grant and the Attempt keeps its dependency."""
    world = World.over(store, ReliabilityConfig(rate_limits=LIMITS, breaker=BREAKER))
    lease = world.running()
    open_circuit(world, lease, "model_provider")
    result = world.grant(lease, "plan-1", dependency="model_provider")
    assert isinstance(result, Refused) and "circuit_allows" in result.reason
    assert "circuit open until" in world.refused("grant_tool", "circuit_allows").detail
    assert world.attempt(lease.attempt_id).fallback is None
    assert world.store.get_intent(key("plan-1")) is None


# ------------------------------------------------------------------ bulkheads


def end_cancelled(world: World, attempt_id: str) -> None:
    assert world.orchestrator.cancel_attempt(attempt_id, "operator stops the run").state == "cancelled"


def end_failed(world: World, attempt_id: str) -> None:
    assert world.failed(world.started(attempt_id), "provider", SIGNATURE).state == "failed"


@pytest.mark.parametrize("end", [end_cancelled, end_failed], ids=["cancelled", "failed"])
def test_a_full_bulkhead_defers_its_partition_only_and_frees_a_slot_when_an_attempt_ends(store, end):
    """Two in flight fill repo-a's bulkhead, repo-b is still admitted, and repo-a's third waits until one of its two ends."""
    world = World.over(store, ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=2)))
    a1, a2, a3 = (world.dispatched(f"a{n}") for n in (1, 2, 3))
    b1 = world.dispatched("b1", workspace=OTHER_WORKSPACE)
    assert states(world.orchestrator.run_admission()) == {a1: "admitted", a2: "admitted", b1: "admitted", a3: "queued"}
    deferral = world.last_event("defer", a3)
    assert deferral.accepted and "bulkhead" in deferral.detail
    assert world.orchestrator.run_admission() == {}
    end(world, a1)
    assert states(world.orchestrator.run_admission()) == {a3: "admitted"}


def test_a_restarted_orchestrator_counts_admitted_attempts_against_the_bulkhead(store):
    """The bulkhead is rebuilt from the store: after a restart, attempts already admitted still hold their partition's slots."""
    reliability = ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=1))
    world = World.over(store, reliability)
    first = world.dispatched("a1")
    assert world.orchestrator.admit(first).state == "admitted"
    world.orchestrator = Orchestrator(store, world.clock, world.provider, world.config, reliability, random.Random(0))
    second = world.dispatched("a2")
    assert states(world.orchestrator.run_admission()) == {second: "queued"}
    end_cancelled(world, first)
    assert states(world.orchestrator.run_admission()) == {second: "admitted"}


# ------------------------------------------------------ backpressure, shedding


def saturated(store: Store, queue_depth_max: int = 2) -> World:
    """One admission slot in all, already taken, so every new Attempt waits in a queue of at most queue_depth_max."""
    world = World.over(store, ReliabilityConfig(admission=AdmissionConfig(queue_depth_max=queue_depth_max)), admitted_max=1)
    assert world.orchestrator.admit(world.dispatched("busy")).state == "admitted"
    return world


def test_load_shedding_drops_the_lowest_priority_waiting_attempt_as_a_capacity_failure(store):
    """With capacity taken and the queue over its depth, the lowest priority goes: failed, domain capacity, retryable."""
    world = saturated(store)
    low, mid, high = (world.dispatched(name, priority=priority) for name, priority in (("low", 0), ("mid", 5), ("high", 9)))
    assert states(world.orchestrator.run_admission()) == {low: "failed", mid: "queued", high: "queued"}
    shed = world.attempt(low)
    assert (shed.failure_domain, shed.failure_signature) == ("capacity", "capacity:shed")
    event = world.last_event("shed", low)
    assert event.accepted and event.to_state == "failed" and "lowest priority" in event.detail
    assert world.orchestrator.decide("low").kind == "retry"


def test_an_attempt_whose_deadline_passed_is_shed_before_a_lower_priority_one(store):
    """A passed deadline outranks priority: that Attempt is shed, whatever the depth, and the lower-priority ones keep waiting."""
    world = saturated(store)
    late = world.dispatched("late", priority=9, deadline_at=5.0)
    low = world.dispatched("low", priority=0)
    mid = world.dispatched("mid", priority=5)
    world.clock.advance(10.0)
    assert states(world.orchestrator.run_admission()) == {late: "failed", low: "queued", mid: "queued"}
    assert "deadline" in world.last_event("shed", late).detail
    assert world.attempt(late).failure_domain == "capacity"


def test_a_queued_attempt_whose_deadline_passed_is_shed_though_capacity_is_free(store):
    """Silent queue growth is refused: with every slot free, an Attempt past its task's deadline is shed (capacity), not admitted late."""
    world = World.over(store, ReliabilityConfig())
    deadline_at = world.clock.now() + 30.0
    late = world.dispatched("late", priority=9, deadline_at=deadline_at)
    on_time = world.dispatched("on-time", priority=0, deadline_at=deadline_at + 300.0)
    world.clock.advance(31.0)
    assert states(world.orchestrator.run_admission()) == {late: "failed", on_time: "admitted"}
    shed = world.attempt(late)
    assert (shed.failure_domain, shed.failure_signature) == ("capacity", "capacity:shed")
    event = world.last_event("shed", late)
    assert event.accepted and event.to_state == "failed"
    assert event.detail == f"shed: its deadline {deadline_at:g} s passed at {world.clock.now():g} s; the work is no longer worth doing"
    assert (world.orchestrator.admission.queue_depth(), world.orchestrator.admission.in_flight()) == (0, 1)


def test_cancelling_a_queued_attempt_succeeds_under_full_load(store):
    """Cancellation never waits for capacity: a queued Attempt under full load is cancelled at once and never admitted."""
    world = saturated(store, queue_depth_max=1)
    waiting = world.dispatched("waiting")
    assert states(world.orchestrator.run_admission()) == {waiting: "queued"}
    assert world.orchestrator.admission.queue_depth() == 1
    end_cancelled(world, waiting)
    assert world.orchestrator.admission.queue_depth() == 0
    end_cancelled(world, "busy#1")
    assert world.orchestrator.run_admission() == {}
    assert world.attempt(waiting).state == "cancelled"


def test_an_old_queue_slows_admissions_to_one_per_step(store):
    """Backpressure: once the oldest waiting Attempt is older than queue_age_max_s, a step admits one and defers the rest."""
    world = World.over(store, ReliabilityConfig(admission=AdmissionConfig(queue_age_max_s=5.0)))
    first, second, third = (world.dispatched(f"task-{n}") for n in (1, 2, 3))
    world.clock.advance(6.0)
    assert states(world.orchestrator.run_admission()) == {first: "admitted", second: "queued", third: "queued"}
    assert "backpressure" in world.last_event("defer", second).detail
    assert states(world.orchestrator.run_admission()) == {second: "admitted"}


def test_shedding_never_drops_a_higher_priority_attempt_while_a_lower_one_of_its_partition_is_admitted(store):
    """Over a seeded run of arrivals and endings, no admission step sheds an Attempt that outranks one it admits in its partition."""
    world = World.over(store, ReliabilityConfig(admission=AdmissionConfig(queue_depth_max=2, partition_concurrency_max=2)), admitted_max=3)
    rng = random.Random(5)
    priority: dict[str, tuple[int, str]] = {}
    shed_total = admitted_total = 0
    for step in range(10):
        for n in range(rng.randint(1, 3)):
            workspace = rng.choice((WORKSPACE, OTHER_WORKSPACE))
            rank = rng.randint(0, 9)
            attempt_id = world.dispatched(f"t{step}-{n}", workspace=workspace, priority=rank)
            priority[attempt_id] = (rank, workspace)
        result = states(world.orchestrator.run_admission())
        admitted = [a for a, state in result.items() if state == "admitted"]
        shed = [a for a, state in result.items() if state == "failed"]
        for victim in shed:
            rank, workspace = priority[victim]
            assert all(priority[a][0] >= rank for a in admitted if priority[a][1] == workspace), (victim, admitted)
        shed_total += len(shed)
        admitted_total += len(admitted)
        for attempt_id in admitted:
            if rng.random() < 0.5:
                end_cancelled(world, attempt_id)
    assert shed_total > 0 and admitted_total > 0


# ----------------------------------------------------------------- dead letter


def fail_by_report(world: World, lease: Lease, identity: str) -> Attempt:
    return world.failed(lease, "provider", SIGNATURE)


def fail_by_verdict(world: World, lease: Lease, identity: str) -> Attempt:
    """The pull request lands, but the provider's CI refutes it with the same failing test every time."""
    grant = world.grant(lease, identity, operation="create-pr")
    effect = world.provider.perform(grant.key, "create-pr", identity, "open the pull request")
    world.provider.set_verdict(effect.provider_id, "failed:test_ports fails")
    assert world.orchestrator.record_receipt(*fence(lease), grant.key, effect.provider_id).accepted
    assert world.orchestrator.complete_attempt(*fence(lease), "opened the pull request", head_sha=identity).accepted
    assert world.orchestrator.verify_attempt(lease.attempt_id).state in ("failed", "quarantined")
    return world.attempt(lease.attempt_id)


@pytest.mark.parametrize("fail", [fail_by_report, fail_by_verdict], ids=["reported", "verified"])
def test_a_repeated_failure_signature_is_dead_lettered_and_never_retried(store, fail):
    """The same signature on consecutive Attempts quarantines the second as poison; decide escalates; no automatic retry follows."""
    world = World.over(store, ReliabilityConfig(backoff=NO_BACKOFF))
    first = fail(world, world.running(), "sha-1")
    assert first.state == "failed"
    second = world.requeued(hypothesis=CHANGED_HYPOTHESIS)
    poisoned = fail(world, world.started(second.attempt_id, "worker-b"), "sha-2")
    assert poisoned.state == "quarantined" and poisoned.failure_signature == first.failure_signature
    ending = world.last_event("effects_absent" if fail is fail_by_report else "verification_failed", poisoned.attempt_id)
    assert ending.accepted and ending.to_state == "quarantined"
    assert isinstance(world.orchestrator.retry("task-1", REASON, Plan("a third idea entirely")), Refused)
    decision = world.orchestrator.decide("task-1")
    assert decision.kind == "escalate" and "dead-lettered" in decision.reason
    assert world.store.get_task("task-1").state == "quarantined"
    assert isinstance(world.orchestrator.retry("task-1", REASON, Plan("a fourth idea entirely")), Refused)
    assert len(world.store.get_attempts("task-1")) == 2


# -------------------------------------------------------------- health probes


def test_a_failed_health_probe_refuses_claims_until_a_fresh_passing_one(store):
    """Health probes gate claims: after a failing probe the worker is refused on worker_healthy, after a passing one it may claim."""
    world = World.over(store, ReliabilityConfig())
    attempt_id = world.dispatched()
    assert world.orchestrator.admit(attempt_id).state == "admitted"
    world.orchestrator.record_health_probe("worker-a", False)
    result = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
    assert isinstance(result, Refused) and "worker_healthy" in result.reason
    world.refused("claim", "worker_healthy", attempt_id)
    world.clock.advance(1.0)
    world.orchestrator.record_health_probe("worker-a", True)
    assert isinstance(world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE), Claim)


def test_a_passing_probe_older_than_its_limit_refuses_claims(store):
    """A passing probe counts for health_probe_max_age_s: at that age it still allows the claim, a moment later it refuses."""
    world = World.over(store, ReliabilityConfig(health_probe_max_age_s=20.0))
    assert world.orchestrator.admit(world.dispatched("task-1")).state == "admitted"
    assert world.orchestrator.admit(world.dispatched("task-2")).state == "admitted"
    world.orchestrator.record_health_probe("worker-a", True)
    world.clock.advance(20.0)
    assert isinstance(world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE), Claim)
    world.clock.advance(0.5)
    assert not world.orchestrator.claim_attempt("task-2", "worker-a", WORKSPACE).accepted
    world.refused("claim", "worker_healthy", "task-2#1")
    world.orchestrator.record_health_probe("worker-a", True)
    assert isinstance(world.orchestrator.claim_attempt("task-2", "worker-a", WORKSPACE), Claim)


def test_renewals_ignore_health_probes_and_only_heartbeats_gate_them(store):
    """A failing probe does not stop a lease holder's renewals; a passing probe does not revive an expired lease."""
    world = World.over(store, ReliabilityConfig())
    lease = world.running()
    world.orchestrator.record_health_probe("worker-a", False)
    world.clock.advance(10.0)
    world.renewed(lease)
    world.clock.advance(world.config.lease_ttl_s + 1)
    world.orchestrator.record_health_probe("worker-a", True)
    assert not world.orchestrator.renew_lease(*fence(lease)).accepted
    world.refused("renew", "lease_current", lease.attempt_id)


# ----------------------------------------------------------- denial of wallet


def test_a_grant_past_the_attempt_spend_ceiling_is_refused_though_the_task_has_room(store):
    """attempt_spend_max_usd caps one Attempt whatever its task's budget has left; the next Attempt starts a fresh ceiling."""
    world = World.over(store, ReliabilityConfig(backoff=NO_BACKOFF, attempt_spend_max_usd=1.0))
    lease = world.running(budget=Budget(cost_max_usd=20.0))
    assert world.grant(lease, "plan-1", cost_usd=0.6).accepted
    result = world.grant(lease, "plan-2", cost_usd=0.6)
    assert isinstance(result, Refused) and "spend_within_budget" in result.reason
    world.refused("grant_tool", "spend_within_budget", lease.attempt_id)
    assert world.store.get_task("task-1").cost_usd == 0.6 == world.attempt(lease.attempt_id).cost_usd
    assert world.store.get_intent(key("plan-2")) is None
    world.failed(lease, "provider", SIGNATURE)
    second = world.started(world.requeued().attempt_id, "worker-b")
    assert world.grant(second, "plan-3", cost_usd=0.6).accepted
    assert world.store.get_task("task-1").cost_usd == pytest.approx(1.2)


def test_a_queued_attempt_whose_budget_ran_out_fails_at_admission_instead_of_waiting(store):
    """Denial of wallet at admission: a queued Attempt whose task budget is exhausted fails via exceed_budget, classified capacity."""
    world = World.over(store, ReliabilityConfig())
    attempt_id = world.dispatched(budget=Budget(cost_max_usd=1.0))
    # No contract spends a task's budget while its only Attempt is queued (spend is granted to running Attempts), so this
    # write stands in for spend booked by another orchestrator process sharing the store.
    with store.transaction() as tx:
        tx.update_task(tx.task("task-1"), cost_usd=1.0)
    assert states(world.orchestrator.run_admission()) == {attempt_id: "failed"}
    failed = world.attempt(attempt_id)
    assert failed.failure_domain == "capacity" and "budget" in failed.failure_signature
    event = world.last_event("exceed_budget", attempt_id)
    assert event.accepted and event.to_state == "failed"
    assert (world.orchestrator.admission.queue_depth(), world.orchestrator.admission.in_flight()) == (0, 0)
    decision = world.orchestrator.decide("task-1")
    assert decision.kind == "stop" and "cost" in decision.reason


def test_nothing_a_worker_sends_lifts_a_spend_stop_and_only_a_release_extends_the_budget(store):
    """Once the task's cost budget is spent, no worker call reopens spending; an operator's release with a new Budget does."""
    world = World.over(store, ReliabilityConfig(backoff=NO_BACKOFF))
    lease = world.running(budget=Budget(cost_max_usd=1.0))
    grant = world.grant(lease, "plan-1", cost_usd=1.0)
    assert isinstance(grant, Grant), grant
    budget = world.store.get_task("task-1").budget
    world.renewed(lease)
    assert world.orchestrator.checkpoint(*fence(lease), "halfway there").accepted
    assert world.orchestrator.report_call_failure(*fence(lease), grant.key, "the model answered 500").accepted
    for bad in ({"cost_usd": -1.0}, {"tokens": -1}, {"cost_usd": float("inf")}):
        with pytest.raises(InputError):
            world.grant(lease, "refund", **bad)
    assert not world.grant(lease, "plan-2", cost_usd=0.01).accepted
    world.refused("grant_tool", "spend_within_budget", lease.attempt_id)
    assert world.store.get_task("task-1").budget == budget
    world.failed(lease, "provider", SIGNATURE)
    assert world.orchestrator.decide("task-1").kind == "stop"
    assert isinstance(world.orchestrator.retry("task-1", REASON, Plan(FIRST_HYPOTHESIS)), Refused)
    assert world.orchestrator.release("task-1", "the operator approves one more dollar", Budget(cost_max_usd=2.0)).accepted
    second = world.started(world.requeued().attempt_id, "worker-b")
    assert world.grant(second, "plan-2", cost_usd=0.5).accepted


# ------------------------------------------------------------- configuration


def first_backoff_s(world: World) -> float:
    return backoffs_drawn(world, 1)[0]


def second_backoff_s(world: World) -> float:
    return backoffs_drawn(world, 2)[1]


def grants_until_refused(world: World, lease: Lease, prefix: str) -> int:
    for count in range(100):
        if not world.grant(lease, f"{prefix}-{count}").accepted:
            return count
    raise AssertionError("no grant was refused")


def grants_in_a_burst(world: World) -> int:
    return grants_until_refused(world, world.running(), "burst")


def grants_one_second_after_the_burst(world: World) -> int:
    lease = world.running()
    grants_until_refused(world, lease, "burst")
    world.clock.advance(1.0)
    return grants_until_refused(world, lease, "refill")


def failures_that_open_the_circuit(world: World) -> int:
    lease = world.running()
    for count in range(1, 20):
        grant = world.grant(lease, f"failing-{count}")
        world.orchestrator.report_call_failure(*fence(lease), grant.key, SIGNATURE)
        if world.orchestrator.breakers.state("code_host", world.clock.now()) == "open":
            return count
    raise AssertionError("the circuit never opened")


def grant_five_seconds_after_opening(world: World) -> bool:
    lease = world.running()
    open_circuit(world, lease)
    world.clock.advance(5.0)
    return world.grant(lease, "after-five-seconds").accepted


def probes_let_through(world: World) -> int:
    lease = world.running()
    open_circuit(world, lease)
    world.clock.advance(world.reliability.breaker.cool_down_s - 1.0)
    world.renewed(lease)
    world.clock.advance(1.0)
    return grants_until_refused(world, lease, "probe")


WIDE_OPEN = {**LIMITS, "code_host": RateLimitConfig(rate_per_s=1000.0, burst=1000)}
"""A code host whose rate limit never binds, so only the retry budget refuses."""


def retries_until_refused(world: World, lease: Lease, identity: str) -> int:
    """Grant `identity` again (a retry: granted before, never receipted) until the gateway refuses."""
    for count in range(1000):
        if not world.grant(lease, identity).accepted:
            world.refused("grant_tool", "retry_budget_allows", lease.attempt_id)
            return count
    raise AssertionError("no retry was refused")


def retries_at_once(world: World) -> int:
    lease = world.running()
    assert world.grant(lease, "first").accepted
    return retries_until_refused(world, lease, "first")


def retries_earned_by_twenty_calls(world: World) -> int:
    lease = world.running()
    assert world.grant(lease, "first").accepted
    retries_until_refused(world, lease, "first")
    for count in range(20):
        assert world.grant(lease, f"call-{count}").accepted
    return retries_until_refused(world, lease, "first")


def grants_of_ten_asks_half_way_up_the_ramp(world: World) -> int:
    """Open the circuit, close it with a probe's receipt, and ask ten times at once, 15 s later."""
    lease = world.running()
    open_circuit(world, lease)
    world.clock.advance(world.reliability.breaker.cool_down_s)
    world.renewed(lease)
    probe = world.grant(lease, "probe")
    effect = world.provider.perform(probe.key, "model-call", "probe", "")
    assert world.orchestrator.record_receipt(*fence(lease), probe.key, effect.provider_id).accepted
    world.clock.advance(15.0)
    world.renewed(lease)
    return sum(world.grant(lease, f"after-{n}").accepted for n in range(10))


def burst_after(world: World, answer: str, calls: int) -> int:
    """Grant `calls` calls, answer every one (`receipt` or `failure`), then count the calls granted at once."""
    lease = world.running()
    grants = [world.grant(lease, f"first-{n}") for n in range(calls)]
    for grant in grants:
        assert isinstance(grant, Grant), grant
        if answer == "receipt":
            effect = world.provider.perform(grant.key, "model-call", grant.key, "")
            assert world.orchestrator.record_receipt(*fence(lease), grant.key, effect.provider_id).accepted
        else:
            assert world.orchestrator.report_call_failure(*fence(lease), grant.key, SIGNATURE).accepted
    return grants_until_refused(world, lease, "burst")


def burst_after_four_answered(world: World) -> int:
    return burst_after(world, "receipt", 4)


def burst_after_four_failed(world: World) -> int:
    return burst_after(world, "failure", 4)


def outcomes_of_one_step(world: World, workspaces: tuple[str, ...], wait_s: float = 0.0) -> tuple[str, ...]:
    attempt_ids = [world.dispatched(f"task-{n}", workspace=workspace) for n, workspace in enumerate(workspaces)]
    world.clock.advance(wait_s)
    result = states(world.orchestrator.run_admission())
    return tuple(result.get(a, "queued") for a in attempt_ids)


def shed_in_one_step(world: World) -> int:
    return outcomes_of_one_step(world, (WORKSPACE,) * 4).count("failed")


def admitted_after_ten_seconds(world: World) -> int:
    return outcomes_of_one_step(world, (WORKSPACE,) * 3, wait_s=10.0).count("admitted")


def admitted_in_one_partition(world: World) -> int:
    return outcomes_of_one_step(world, (WORKSPACE,) * 3).count("admitted")


def state_after_its_deadline(world: World) -> str:
    late = world.dispatched("late", deadline_at=world.clock.now() + 5.0)
    world.clock.advance(10.0)
    return states(world.orchestrator.run_admission()).get(late, "queued")


def admitted_across_partitions(world: World) -> int:
    return outcomes_of_one_step(world, ("repo-1", "repo-2", "repo-3")).count("admitted")


def model_call_goes_to(world: World) -> str:
    lease = world.running()
    open_circuit(world, lease, "model_provider")
    result = world.grant(lease, "plan", dependency="model_provider")
    return result.dependency if isinstance(result, Grant) else "refused"


def two_dollar_call_granted(world: World) -> bool:
    return world.grant(world.running(), "dear", cost_usd=2.0).accepted


def claim_thirty_seconds_after_a_probe(world: World) -> bool:
    assert world.orchestrator.admit(world.dispatched()).state == "admitted"
    world.orchestrator.record_health_probe("worker-a", True)
    world.clock.advance(30.0)
    return world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE).accepted


def four_hundred_second_call_granted(world: World) -> bool:
    return world.grant(world.running(), "long", call_deadline_s=400.0).accepted


@dataclass(frozen=True)
class FieldCase:
    """One configured field: a probe run under a baseline and under a change of that field alone, with both outcomes expected."""

    probe: Callable[[World], object]
    baseline: ReliabilityConfig
    changed: ReliabilityConfig
    expected: tuple[object, object]
    core_changed: dict = field(default_factory=dict)


def exponential(**changes) -> BackoffConfig:
    return BackoffConfig(strategy="exponential", **changes)


OPENS_AT_ONCE = BreakerConfig(failures_to_open=1)
ONE_PER_PARTITION = AdmissionConfig(partition_concurrency_max=1)
FIELD_CASES = {
    "backoff.strategy": FieldCase(
        first_backoff_s, ReliabilityConfig(), ReliabilityConfig(backoff=exponential()), (random.Random(0).uniform(0.0, 1.0), 1.0)
    ),
    "backoff.base_s": FieldCase(
        first_backoff_s, ReliabilityConfig(backoff=exponential()), ReliabilityConfig(backoff=exponential(base_s=3.0)), (1.0, 3.0)
    ),
    "backoff.cap_s": FieldCase(
        second_backoff_s, ReliabilityConfig(backoff=exponential()), ReliabilityConfig(backoff=exponential(cap_s=1.5)), (2.0, 1.5)
    ),
    "rate_limits.rate_per_s": FieldCase(
        grants_one_second_after_the_burst,
        ReliabilityConfig(concurrency=None),
        ReliabilityConfig(rate_limits={**LIMITS, "code_host": RateLimitConfig(rate_per_s=2.0)}, concurrency=None),
        (10, 2),
    ),
    "rate_limits.burst": FieldCase(
        grants_in_a_burst,
        ReliabilityConfig(concurrency=None),
        ReliabilityConfig(rate_limits={**LIMITS, "code_host": RateLimitConfig(burst=3)}, concurrency=None),
        (20, 3),
    ),
    "breaker.failures_to_open": FieldCase(
        failures_that_open_the_circuit, ReliabilityConfig(), ReliabilityConfig(breaker=BreakerConfig(failures_to_open=2)), (5, 2)
    ),
    "breaker.cool_down_s": FieldCase(
        grant_five_seconds_after_opening,
        ReliabilityConfig(breaker=OPENS_AT_ONCE),
        ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, cool_down_s=5.0)),
        (False, True),
    ),
    "breaker.probes_half_open": FieldCase(
        probes_let_through,
        ReliabilityConfig(breaker=OPENS_AT_ONCE),
        ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, probes_half_open=3)),
        (1, 3),
    ),
    "retry_budget.burst": FieldCase(
        retries_at_once,
        ReliabilityConfig(rate_limits=WIDE_OPEN),
        ReliabilityConfig(rate_limits=WIDE_OPEN, retry_budget=RetryBudgetConfig(burst=3)),
        (10, 3),
    ),
    "retry_budget.ratio": FieldCase(
        retries_earned_by_twenty_calls,
        ReliabilityConfig(rate_limits=WIDE_OPEN, concurrency=None),
        ReliabilityConfig(rate_limits=WIDE_OPEN, retry_budget=RetryBudgetConfig(ratio=0.5), concurrency=None),
        (2, 10),
    ),
    "breaker.ramp_s": FieldCase(
        grants_of_ten_asks_half_way_up_the_ramp,
        ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, cool_down_s=10.0)),
        ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, cool_down_s=10.0, ramp_s=0.0)),
        (5, 10),
    ),
    "concurrency.initial_calls": FieldCase(
        grants_in_a_burst,
        ReliabilityConfig(rate_limits=WIDE_OPEN),
        ReliabilityConfig(rate_limits=WIDE_OPEN, concurrency=ConcurrencyLimitConfig(initial_calls=4)),
        (16, 4),
    ),
    "concurrency.max_calls": FieldCase(
        burst_after_four_answered,
        ReliabilityConfig(rate_limits=WIDE_OPEN, concurrency=ConcurrencyLimitConfig(initial_calls=4)),
        ReliabilityConfig(rate_limits=WIDE_OPEN, concurrency=ConcurrencyLimitConfig(initial_calls=4, max_calls=4)),
        (6, 4),  # answered at 4, 3 and 2 in flight: the first two raise the limit, the third finds it less than half used
    ),
    "concurrency.increase_calls": FieldCase(
        burst_after_four_answered,
        ReliabilityConfig(rate_limits=WIDE_OPEN, concurrency=ConcurrencyLimitConfig(initial_calls=4)),
        ReliabilityConfig(rate_limits=WIDE_OPEN, concurrency=ConcurrencyLimitConfig(initial_calls=4, increase_calls=2.0)),
        (6, 8),
    ),
    "concurrency.decrease_factor": FieldCase(
        burst_after_four_failed,
        ReliabilityConfig(rate_limits=WIDE_OPEN, breaker=None, concurrency=ConcurrencyLimitConfig(initial_calls=4)),
        ReliabilityConfig(rate_limits=WIDE_OPEN, breaker=None, concurrency=ConcurrencyLimitConfig(initial_calls=4, decrease_factor=0.5)),
        (2, 1),  # 4 x 0.9^4 = 2.6 and 4 x 0.5^4 = 0.25, held at min_calls
    ),
    "concurrency.min_calls": FieldCase(
        burst_after_four_failed,
        ReliabilityConfig(rate_limits=WIDE_OPEN, breaker=None, concurrency=ConcurrencyLimitConfig(initial_calls=4, decrease_factor=0.5)),
        ReliabilityConfig(
            rate_limits=WIDE_OPEN, breaker=None, concurrency=ConcurrencyLimitConfig(initial_calls=4, decrease_factor=0.5, min_calls=2)
        ),
        (1, 2),
    ),
    "admission.queue_depth_max": FieldCase(
        shed_in_one_step,
        ReliabilityConfig(admission=ONE_PER_PARTITION),
        ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=1, queue_depth_max=1)),
        (0, 2),
    ),
    "admission.queue_age_max_s": FieldCase(
        admitted_after_ten_seconds, ReliabilityConfig(), ReliabilityConfig(admission=AdmissionConfig(queue_age_max_s=5.0)), (3, 1)
    ),
    "admission.partition_concurrency_max": FieldCase(
        admitted_in_one_partition, ReliabilityConfig(), ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=2)), (3, 2)
    ),
    "admission.shed_past_deadline": FieldCase(
        state_after_its_deadline,
        ReliabilityConfig(),
        ReliabilityConfig(admission=AdmissionConfig(shed_past_deadline=False)),
        ("failed", "admitted"),
    ),
    "fallbacks": FieldCase(
        model_call_goes_to,
        ReliabilityConfig(rate_limits=LIMITS, breaker=OPENS_AT_ONCE),
        ReliabilityConfig(rate_limits=LIMITS, breaker=OPENS_AT_ONCE, fallbacks=(FALLBACK,)),
        ("refused", "small_model"),
    ),
    "attempt_spend_max_usd": FieldCase(
        two_dollar_call_granted, ReliabilityConfig(), ReliabilityConfig(attempt_spend_max_usd=1.0), (True, False)
    ),
    "health_probe_max_age_s": FieldCase(
        claim_thirty_seconds_after_a_probe, ReliabilityConfig(), ReliabilityConfig(health_probe_max_age_s=10.0), (True, False)
    ),
    "CoreConfig.timeout_budget_s": FieldCase(
        four_hundred_second_call_granted, ReliabilityConfig(), ReliabilityConfig(), (True, False), {"timeout_budget_s": 300.0}
    ),
    "admission_rate": FieldCase(
        admitted_across_partitions, ReliabilityConfig(), ReliabilityConfig(admission_rate=RateLimitConfig(burst=1)), (3, 1)
    ),
    "CoreConfig.admitted_max": FieldCase(admitted_across_partitions, ReliabilityConfig(), ReliabilityConfig(), (3, 2), {"admitted_max": 2}),
}


def reliability_field_names() -> set[str]:
    """Every tuning field of ReliabilityConfig, nested configs spelled section.field."""
    defaults = ReliabilityConfig()
    names = set()
    for item in dataclasses.fields(ReliabilityConfig):
        value = getattr(defaults, item.name)
        if isinstance(value, dict):
            value = next(iter(value.values()))
        if dataclasses.is_dataclass(value):
            names.update(f"{item.name}.{inner.name}" for inner in dataclasses.fields(value))
        else:
            names.add(item.name)
    return names


def test_the_field_table_names_every_reliability_field():
    """A tuning field added to ReliabilityConfig without a case below would go unproven: the table must name them all."""
    assert reliability_field_names() == {name for name in FIELD_CASES if not name.startswith("CoreConfig.")}


@pytest.mark.parametrize("name", sorted(FIELD_CASES))
def test_every_reliability_field_reaches_the_control_it_configures(make_store, name):
    """Changing one field, and only it, changes what the orchestrator does in the way that field promises."""
    case = FIELD_CASES[name]
    before = case.probe(World.over(make_store(), case.baseline))
    after = case.probe(World.over(make_store(), case.changed, **case.core_changed))
    assert (before, after) == case.expected


BAD_CONFIGS: dict[str, Callable[[], object]] = {
    "negative rate": lambda: RateLimitConfig(rate_per_s=-1.0),
    "zero burst": lambda: RateLimitConfig(burst=0),
    "not-a-number rate": lambda: RateLimitConfig(rate_per_s=float("nan")),
    "cap below base": lambda: BackoffConfig(base_s=10.0, cap_s=5.0),
    "unknown strategy": lambda: BackoffConfig(strategy="linear"),
    "negative base": lambda: BackoffConfig(base_s=-1.0),
    "fallback to an unconfigured dependency": lambda: ReliabilityConfig(fallbacks=(FALLBACK,)),
    "fallback from an unconfigured dependency": lambda: ReliabilityConfig(
        rate_limits={"small_model": RateLimitConfig()}, fallbacks=(FALLBACK,)
    ),
    "fallback to itself": lambda: dataclasses.replace(FALLBACK, substitute="model_provider"),
    "zero cool-down": lambda: BreakerConfig(cool_down_s=0.0),
    "zero bulkhead": lambda: AdmissionConfig(partition_concurrency_max=0),
    "negative spend ceiling": lambda: ReliabilityConfig(attempt_spend_max_usd=-1.0),
    "zero probe age": lambda: ReliabilityConfig(health_probe_max_age_s=0.0),
    "fractional failure count": lambda: orchestrator_over(ReliabilityConfig(breaker=BreakerConfig(failures_to_open=2.5))),
    "infinite rate": lambda: orchestrator_over(ReliabilityConfig(rate_limits={"code_host": RateLimitConfig(rate_per_s=float("inf"))})),
}


def orchestrator_over(reliability: ReliabilityConfig) -> Orchestrator:
    clock = ManualClock()
    return Orchestrator(MemoryStore(), clock, LedgerProvider(clock=clock), CoreConfig(), reliability, random.Random(0))


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_a_bad_config_raises_input_error_before_any_contract_runs(name):
    """A nonsensical tuning value fails where the config or the orchestrator is built, never halfway through a contract."""
    with pytest.raises(InputError):
        BAD_CONFIGS[name]()


def test_an_infinite_backoff_cap_is_refused_when_the_orchestrator_is_built():
    """A backoff with no finite cap is a bad config like the others: refused up front, not at the first retry."""
    with pytest.raises(InputError):
        orchestrator_over(ReliabilityConfig(backoff=BackoffConfig(cap_s=float("inf"))))


def test_cancelling_an_attempt_that_sleeps_out_its_backoff_takes_it_out_of_admission(store):
    """A retry cancelled during its backoff ends cancelled and is forgotten by admission: it never wakes into the queue."""
    world = World.over(store, ReliabilityConfig(backoff=BackoffConfig(strategy="exponential", base_s=10.0)))
    world.failed(world.running(), "provider", SIGNATURE)
    second = world.requeued()
    assert world.orchestrator.admission_status(second.attempt_id) == "sleeping"
    assert world.orchestrator.cancel_attempt(second.attempt_id, "operator changed priorities").state == "cancelled"
    assert world.orchestrator.admission_status(second.attempt_id) == "gone"
    world.clock.set(second.eligible_at)
    assert second.attempt_id not in world.orchestrator.run_admission()
    assert world.orchestrator.admission_status(second.attempt_id) == "gone"
