"""Circuit breakers: tripped by a run of one failure signature, silent for the cool-down, then exactly the probe allowance."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core.breaker import CLOSED, HALF_OPEN, OPEN, RAMPING, Breaker, Breakers, Refusal
from shiftchange.core.clock import ManualClock
from shiftchange.core.config import BreakerConfig
from shiftchange.core.errors import InputError

CONFIG = BreakerConfig(failures_to_open=3, cool_down_s=30.0, probes_half_open=2, ramp_s=0.0)
"""No slow start, so a closed breaker lets everything through (the ramp has tests of its own)."""

configs = st.builds(
    BreakerConfig,
    failures_to_open=st.integers(min_value=1, max_value=6),
    cool_down_s=st.floats(min_value=0.5, max_value=100.0),
    probes_half_open=st.integers(min_value=1, max_value=5),
    ramp_s=st.just(0.0),
)
advances_s = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=20.0))


def opened(config: BreakerConfig, clock: ManualClock) -> Breaker:
    """A breaker opened at clock.now() by a run of failures_to_open identical signatures."""
    breaker = Breaker(config)
    for _ in range(config.failures_to_open):
        breaker.record_failure(clock.now(), "provider-503")
    assert breaker.state(clock.now()) == OPEN
    return breaker


def test_a_run_of_one_signature_opens_the_breaker_at_the_threshold():
    """Two identical failures leave it closed; the third opens it and the next call is refused."""
    clock = ManualClock()
    breaker = Breaker(CONFIG)
    for _ in range(2):
        breaker.record_failure(clock.now(), "provider-503")
        assert breaker.state(clock.now()) == CLOSED
        assert breaker.allow(clock.now())
    breaker.record_failure(clock.now(), "provider-503")
    assert breaker.state(clock.now()) == OPEN
    assert not breaker.allow(clock.now())


def test_a_different_signature_restarts_the_count_at_one():
    """A, A, B, B stays closed (B's run is 2); a third B opens it."""
    clock = ManualClock()
    breaker = Breaker(CONFIG)
    for signature in ("A", "A", "B", "B"):
        breaker.record_failure(clock.now(), signature)
    assert breaker.state(clock.now()) == CLOSED
    breaker.record_failure(clock.now(), "B")
    assert breaker.state(clock.now()) == OPEN


def test_a_success_resets_the_count():
    """A, A, success, A, A stays closed; one more A opens it."""
    clock = ManualClock()
    breaker = Breaker(CONFIG)
    breaker.record_failure(clock.now(), "A")
    breaker.record_failure(clock.now(), "A")
    breaker.record_success(clock.now())
    breaker.record_failure(clock.now(), "A")
    breaker.record_failure(clock.now(), "A")
    assert breaker.state(clock.now()) == CLOSED
    breaker.record_failure(clock.now(), "A")
    assert breaker.state(clock.now()) == OPEN


def test_an_open_breaker_says_until_when_it_refuses():
    """The refusal names the end of the cool-down, for the refused event on the Attempt."""
    clock = ManualClock(100.0)
    breaker = opened(CONFIG, clock)
    clock.advance(29.5)
    assert not breaker.allow(clock.now())
    assert breaker.last_refusal == Refusal(OPEN, 130.0, "circuit open until 130.0")
    clock.advance(0.5)
    assert breaker.state(clock.now()) == HALF_OPEN
    assert breaker.allow(clock.now())
    assert breaker.last_refusal is None


def test_half_open_lets_the_probe_allowance_through_then_refuses():
    """After the cool-down exactly probes_half_open calls pass; the next waits for a probe's report."""
    clock = ManualClock()
    breaker = opened(CONFIG, clock)
    clock.advance(30.0)
    assert [breaker.allow(clock.now()) for _ in range(3)] == [True, True, False]
    assert breaker.last_refusal is not None
    assert breaker.last_refusal.state == HALF_OPEN and breaker.last_refusal.until_s is None
    assert "2 probe(s)" in breaker.last_refusal.reason


def test_a_probe_success_closes_the_breaker_and_clears_the_count():
    """Closed again, it needs a full fresh run of failures to reopen."""
    clock = ManualClock()
    breaker = opened(CONFIG, clock)
    clock.advance(31.0)
    assert breaker.allow(clock.now())
    breaker.record_success(clock.now())
    assert breaker.state(clock.now()) == CLOSED
    assert all(breaker.allow(clock.now()) for _ in range(10))
    breaker.record_failure(clock.now(), "provider-503")
    breaker.record_failure(clock.now(), "provider-503")
    assert breaker.state(clock.now()) == CLOSED


def test_a_probe_failure_reopens_the_breaker_with_a_fresh_cool_down():
    """A failed probe reopens at once, whatever its signature, and the cool-down counts from the failure."""
    clock = ManualClock()
    breaker = opened(CONFIG, clock)
    clock.advance(40.0)
    assert breaker.allow(clock.now())
    breaker.record_failure(clock.now(), "a-new-signature")
    assert breaker.state(clock.now()) == OPEN
    clock.advance(29.0)
    assert not breaker.allow(clock.now())
    assert breaker.last_refusal.until_s == 70.0
    clock.advance(1.0)
    assert breaker.allow(clock.now())


def test_reports_from_calls_admitted_before_the_breaker_opened_change_nothing():
    """While open, or half-open with no probe out, a late report is not a probe's and leaves the state alone."""
    clock = ManualClock()
    breaker = opened(CONFIG, clock)
    breaker.record_success(clock.now())
    assert breaker.state(clock.now()) == OPEN
    clock.advance(30.0)
    breaker.record_failure(clock.now(), "provider-503")
    breaker.record_success(clock.now())
    assert breaker.state(clock.now()) == HALF_OPEN
    assert [breaker.allow(clock.now()) for _ in range(3)] == [True, True, False]


def test_bad_arguments_are_input_errors():
    """Time going backwards, an empty or non-string signature, fractional counts and unknown dependencies are refused."""
    breaker = Breaker(CONFIG)
    breaker.allow(10.0)
    with pytest.raises(InputError, match="backwards"):
        breaker.state(9.0)
    for signature in ("", None, 503):
        with pytest.raises(InputError):
            breaker.record_failure(10.0, signature)
    with pytest.raises(InputError):
        Breaker(BreakerConfig(failures_to_open=2.5))
    with pytest.raises(InputError):
        Breaker(BreakerConfig(probes_half_open=1.5))
    breakers = Breakers({"model": CONFIG})
    with pytest.raises(InputError, match="configured: model"):
        breakers.allow("github", 0.0)


def test_the_registry_keeps_one_breaker_per_dependency():
    """Opening the code host's breaker leaves the model provider's closed."""
    clock = ManualClock()
    breakers = Breakers({"model": CONFIG, "github": BreakerConfig(failures_to_open=1, cool_down_s=5.0)})
    breakers.record_failure("github", clock.now(), "github-502")
    assert breakers.state("github", clock.now()) == OPEN
    assert not breakers.allow("github", clock.now())
    assert breakers.last_refusal("github") == Refusal(OPEN, 5.0, "circuit open until 5.0")
    assert breakers.state("model", clock.now()) == CLOSED
    assert breakers.allow("model", clock.now())
    assert breakers.last_refusal("model") is None
    breakers.record_success("model", clock.now())
    assert breakers.breaker("github").state(clock.now()) == OPEN


@given(config=configs, calls=st.lists(advances_s, min_size=1, max_size=60))
def test_an_open_breaker_admits_nothing_before_its_cool_down_and_exactly_the_probe_allowance_after(config, calls):
    """Over any sequence of (advance, allow) with no report, admissions are min(probes, calls after the cool-down), all after it."""
    clock = ManualClock(1000.0)
    breaker = opened(config, clock)
    probes_from_s = clock.now() + config.cool_down_s
    admitted = 0
    calls_after_cool_down = 0
    for advance_s in calls:
        clock.advance(advance_s)
        allowed = breaker.allow(clock.now())
        if clock.now() < probes_from_s:
            assert not allowed
            assert breaker.last_refusal.until_s == probes_from_s
        else:
            calls_after_cool_down += 1
        admitted += allowed
    assert admitted == min(config.probes_half_open, calls_after_cool_down)


@given(config=configs, before=st.lists(advances_s, max_size=10), outcome_after_s=advances_s, success=st.booleans())
def test_a_probe_report_decides_success_closes_failure_reopens(config, before, outcome_after_s, success):
    """Once a probe is out, its success closes the breaker; its failure reopens it for a full cool-down from the report."""
    clock = ManualClock()
    breaker = opened(config, clock)
    clock.advance(config.cool_down_s)
    for advance_s in before:
        clock.advance(advance_s)
    assert breaker.allow(clock.now())
    clock.advance(outcome_after_s)
    if success:
        breaker.record_success(clock.now())
        assert breaker.state(clock.now()) == CLOSED
        assert all(breaker.allow(clock.now()) for _ in range(config.probes_half_open + 1))
        return
    breaker.record_failure(clock.now(), "probe-failed")
    reopened_s = clock.now()
    assert breaker.state(clock.now()) == OPEN
    assert not breaker.allow(clock.now())
    assert breaker.last_refusal.until_s == reopened_s + config.cool_down_s
    clock.set(reopened_s + config.cool_down_s)
    assert breaker.state(clock.now()) == HALF_OPEN


@given(
    failures_to_open=st.integers(min_value=2, max_value=6),
    runs=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=30),
    signatures=st.lists(st.sampled_from(["A", "B", "C"]), min_size=30, max_size=30),
)
def test_failures_that_change_signature_before_the_threshold_never_open_it(failures_to_open, runs, signatures):
    """Runs of one signature each shorter than failures_to_open, adjacent runs differing, keep the breaker closed."""
    clock = ManualClock()
    breaker = Breaker(BreakerConfig(failures_to_open=failures_to_open))
    previous = None
    for length, signature in zip(runs, signatures, strict=False):
        if signature == previous:
            signature = {"A": "B", "B": "C", "C": "A"}[signature]
        for _ in range(min(length, failures_to_open - 1)):
            clock.advance(1.0)
            breaker.record_failure(clock.now(), signature)
            assert breaker.state(clock.now()) == CLOSED
            assert breaker.allow(clock.now())
        previous = signature
    breaker.record_failure(clock.now(), previous)  # one more of the last signature: its run grows, and may now reach the threshold
    assert breaker.state(clock.now()) == (OPEN if min(runs[-1], failures_to_open - 1) + 1 >= failures_to_open else CLOSED)


def closed_again(ramp_s: float, clock: ManualClock) -> Breaker:
    """A breaker that opened, let its probe through and closed on the probe's success, at clock.now()."""
    breaker = opened(BreakerConfig(failures_to_open=1, cool_down_s=10.0, ramp_s=ramp_s), clock)
    clock.advance(10.0)
    assert breaker.allow(clock.now())
    breaker.record_success(clock.now())
    assert breaker.state(clock.now()) == CLOSED
    return breaker


@given(ramp_s=st.floats(min_value=0.5, max_value=300.0), asks=st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=200))
def test_a_closing_breaker_lets_calls_back_in_along_its_ramp_and_all_of_them_after(ramp_s, asks):
    """Each ask during the ramp earns the share of calls let through at that instant; what is let through tracks their sum."""
    clock = ManualClock(100.0)
    breaker = closed_again(ramp_s, clock)
    closed_s = clock.now()
    earned = let_through = 0
    for advance_s in asks:
        clock.advance(advance_s)
        allowed = breaker.allow(clock.now())
        if clock.now() >= closed_s + ramp_s:
            assert allowed, "after the ramp every call is let through"
            continue
        earned += (clock.now() - closed_s) / ramp_s
        let_through += allowed
        assert 0 <= earned - let_through < 1 + 1e-9, (earned, let_through)
        if not allowed:
            assert breaker.last_refusal.state == RAMPING and breaker.state(clock.now()) == CLOSED


def test_without_a_ramp_a_closing_breaker_lets_every_call_through_at_once():
    clock = ManualClock()
    breaker = closed_again(0.0, clock)
    assert all(breaker.allow(clock.now()) for _ in range(50))


def test_half_way_up_the_ramp_half_the_calls_asked_for_are_let_through():
    clock = ManualClock()
    breaker = closed_again(30.0, clock)
    assert not breaker.allow(clock.now())  # at the instant it closed, none
    clock.advance(15.0)
    assert sum(breaker.allow(clock.now()) for _ in range(40)) == 20
