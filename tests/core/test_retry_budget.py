"""Retry budgets: over any window retries never exceed ratio x first calls + burst; budgets and breakers switch off by config."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core import (
    BreakerConfig,
    Budget,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    RateLimitConfig,
    ReliabilityConfig,
    RetryBudget,
    RetryBudgetConfig,
    RetryBudgets,
)
from shiftchange.core.breaker import CLOSED
from shiftchange.core.errors import InputError
from shiftchange.core.provider import LedgerProvider

configs = st.builds(RetryBudgetConfig, ratio=st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 1.0]), burst=st.integers(0, 20))
calls = st.lists(st.sampled_from(["first", "retry"]), max_size=300)


@given(configs, calls, st.data())
def test_over_any_window_retries_never_exceed_ratio_times_calls_plus_burst(config, sequence, data):
    """The budget's promise, checked on every window of a random sequence of first calls and attempted retries."""
    budget = RetryBudget(config)
    granted = []
    for kind in sequence:
        if kind == "first":
            budget.first_call()
            granted.append("first")
        elif budget.retry():
            granted.append("retry")
    start = data.draw(st.integers(0, len(granted)))
    end = data.draw(st.integers(start, len(granted)))
    window = granted[start:end]
    assert window.count("retry") <= config.ratio * window.count("first") + config.burst + 1e-9


@given(configs, calls)
def test_a_retry_is_refused_exactly_when_less_than_one_credit_is_held(config, sequence):
    """Refusals take nothing; a grant takes one credit; credit never exceeds the burst."""
    budget = RetryBudget(config)
    for kind in sequence:
        held = budget.credit
        if kind == "first":
            budget.first_call()
            assert budget.credit == min(config.burst, held + config.ratio)
        else:
            assert budget.retry() == (held >= 1)
            assert budget.credit == (held - 1 if held >= 1 else held)
        assert 0 <= budget.credit <= config.burst


def test_with_no_ratio_only_the_burst_is_ever_retried():
    budget = RetryBudget(RetryBudgetConfig(ratio=0.0, burst=2))
    for _ in range(50):
        budget.first_call()
    assert [budget.retry() for _ in range(4)] == [True, True, False, False]


@pytest.mark.parametrize("bad", [{"ratio": -0.1}, {"ratio": 1.5}, {"burst": -1}, {"burst": 2.5}, {"ratio": True}])
def test_bad_retry_budget_config_is_a_typed_error(bad):
    with pytest.raises(InputError):
        RetryBudgetConfig(**bad)


def test_an_unknown_dependency_has_no_budget():
    with pytest.raises(InputError, match="no retry budget configured for dependency 'nope'"):
        RetryBudgets(("code_host",), RetryBudgetConfig()).allows("nope")


# ------------------------------------------------------- at the gateway, switched off


WIDE_OPEN = {"code_host": RateLimitConfig(rate_per_s=1000.0, burst=1000), "model_provider": RateLimitConfig()}


def _running(reliability: ReliabilityConfig):
    clock = ManualClock()
    orchestrator = Orchestrator(MemoryStore(), clock, LedgerProvider(), reliability=reliability)
    orchestrator.create_task("task-1", "fix it", "ws", budget=Budget())
    orchestrator.accept_task("task-1")
    orchestrator.dispatch("task-1", Plan("first hypothesis"))
    orchestrator.run_admission()
    attempt_id = "task-1#1"
    claim = orchestrator.claim_attempt("task-1", "worker-a", "ws", healthy=True)
    lease = claim.lease
    assert orchestrator.start_attempt(attempt_id, lease.generation, lease.token).accepted
    return orchestrator, clock, (attempt_id, lease.generation, lease.token)


def test_without_a_retry_budget_retries_are_not_held_back():
    """retry_budget None: a hundred retries of one call are all granted (the default budget refuses the eleventh)."""
    budgeted, _, fence = _running(ReliabilityConfig(rate_limits=WIDE_OPEN))
    unbudgeted, _, other = _running(ReliabilityConfig(rate_limits=WIDE_OPEN, retry_budget=None))
    granted = {"budgeted": 0, "unbudgeted": 0}
    for name, orchestrator, lease in (("budgeted", budgeted, fence), ("unbudgeted", unbudgeted, other)):
        for _ in range(101):
            granted[name] += orchestrator.grant_tool(*lease, "push", "sha-1").accepted
    assert granted == {"budgeted": 11, "unbudgeted": 101}


def test_without_a_breaker_failures_never_open_the_circuit():
    """breaker None: fifty reports of one failure signature leave the dependency closed and every call granted."""
    orchestrator, clock, fence = _running(ReliabilityConfig(rate_limits=WIDE_OPEN, breaker=None, retry_budget=None))
    for count in range(50):
        grant = orchestrator.grant_tool(*fence, "push", f"sha-{count}")
        assert grant.accepted
        assert orchestrator.report_call_failure(*fence, grant.key, "provider:503").accepted
        assert orchestrator.breakers.state("code_host", clock.now()) == CLOSED


def test_a_lost_lease_outranks_an_open_circuit_in_a_refusal():
    """Circuit open alone: held back (provider domain, how long to wait); circuit open and lease lost: not held back."""
    reliability = ReliabilityConfig(rate_limits=WIDE_OPEN, breaker=BreakerConfig(failures_to_open=1, cool_down_s=300.0))
    orchestrator, clock, fence = _running(reliability)
    grant = orchestrator.grant_tool(*fence, "push", "sha-0")
    assert orchestrator.report_call_failure(*fence, grant.key, "provider:503").accepted
    clock.advance(10.0)
    held = orchestrator.grant_tool(*fence, "push", "sha-1")
    assert (held.accepted, held.domain, held.retry_after_s) == (False, "provider", 290.0)
    clock.advance(orchestrator.config.lease_ttl_s)
    late = orchestrator.grant_tool(*fence, "push", "sha-2")
    assert not late.accepted and "lease_current" in late.reason
    assert (late.domain, late.retry_after_s) == (None, None)


def test_budgets_take_a_collection_of_names_not_one_string():
    with pytest.raises(InputError, match="collection of dependency names"):
        RetryBudgets("code_host", RetryBudgetConfig())
