"""The adaptive concurrency limit: calls in flight stay under it, failures lower it, answers raise it while it is used."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core import ConcurrencyLimit, ConcurrencyLimitConfig, ConcurrencyLimits, InputError
from shiftchange.core.concurrency import OVERDUE_KEEP_S

configs = st.builds(
    ConcurrencyLimitConfig,
    initial_calls=st.integers(min_value=1, max_value=20),
    min_calls=st.just(1),
    max_calls=st.integers(min_value=20, max_value=60),
    increase_calls=st.floats(min_value=0.1, max_value=3.0),
    decrease_factor=st.floats(min_value=0.1, max_value=0.99),
)
steps = st.lists(st.tuples(st.sampled_from(["grant", "answer", "fail", "advance"]), st.integers(min_value=0, max_value=30)), max_size=150)


@given(config=configs, script=steps)
def test_calls_in_flight_never_pass_the_limit_and_the_limit_stays_in_its_bounds(config, script):
    """Over any sequence of grants, answers, failures and time: a grant is allowed exactly while in flight < floor(limit)."""
    limit = ConcurrencyLimit(config)
    now_s, deadline_s, keys, serial = 0.0, 20.0, [], 0
    for action, number in script:
        if action == "advance":
            now_s += number
            continue
        if action == "grant":
            in_flight = limit.in_flight(now_s)
            allowed = limit.allows(now_s)
            assert allowed == (in_flight < max(config.min_calls, math.floor(limit.limit)))
            if allowed:
                serial += 1
                keys.append(f"call-{serial}")
                limit.start(keys[-1], now_s + deadline_s)
                assert limit.in_flight(now_s) == in_flight + 1
            continue
        if not keys:
            continue
        key = keys.pop(number % len(keys))
        before = limit.limit
        live = limit.in_flight(now_s)
        was_live = key in limit._in_flight  # whether the call had passed its deadline decides what the answer may do
        was_overdue = key in limit._overdue
        if action == "answer":
            limit.succeeded(key, now_s)
            if was_live and 2 * live >= before:
                assert limit.limit == min(config.max_calls, before + config.increase_calls)
            else:
                assert limit.limit == before
        else:
            limit.failed(key, now_s)
            expected = max(config.min_calls, before * config.decrease_factor) if was_live or was_overdue else before
            assert limit.limit == pytest.approx(expected)
        assert config.min_calls <= limit.limit <= config.max_calls


def test_a_call_nobody_answers_counts_until_its_deadline():
    """A crashed worker's call is never answered; it holds its place until the deadline the grant set, no longer."""
    limit = ConcurrencyLimit(ConcurrencyLimitConfig(initial_calls=2))
    limit.start("a", 10.0)
    limit.start("b", 15.0)
    assert not limit.allows(9.0)
    assert limit.allows(10.0) and limit.in_flight(10.0) == 1
    assert limit.in_flight(15.0) == 0


def test_a_timeout_reported_just_past_the_deadline_lowers_the_limit_and_one_reported_much_later_does_not():
    """A timeout is heard after the deadline, when the call no longer counts in flight: it is still the signal that matters."""
    limit = ConcurrencyLimit(ConcurrencyLimitConfig(initial_calls=10))
    limit.start("timed-out", 30.0)
    assert limit.in_flight(30.0) == 0  # past its deadline, it no longer holds a place
    limit.failed("timed-out", 30.05)
    assert limit.limit == 9.0
    limit.start("forgotten", 30.0)
    limit.failed("forgotten", 30.0 + OVERDUE_KEEP_S + 1.0)
    assert limit.limit == 9.0


def test_a_limit_nobody_uses_does_not_grow():
    """Answers while under half the limit is in use say nothing about the dependency: the limit stays."""
    limit = ConcurrencyLimit(ConcurrencyLimitConfig(initial_calls=10))
    for n in range(50):
        limit.start(f"call-{n}", 100.0)
        limit.succeeded(f"call-{n}", 1.0)
    assert limit.limit == 10


def test_a_rolled_back_grant_gives_its_place_back_and_an_unknown_answer_changes_nothing():
    limit = ConcurrencyLimit(ConcurrencyLimitConfig(initial_calls=1))
    limit.start("rolled-back", 50.0)
    limit.forget("rolled-back")
    assert limit.allows(0.0)
    limit.failed("never-granted", 0.0)
    limit.succeeded("never-granted", 0.0)
    assert limit.limit == 1


def test_switched_off_every_call_may_start():
    limits = ConcurrencyLimits(["model_provider"], None)
    for n in range(1000):
        limits.limit("model_provider").start(f"call-{n}", 100.0)
    assert limits.allows("model_provider", 0.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ConcurrencyLimitConfig(decrease_factor=1.0),
        lambda: ConcurrencyLimitConfig(initial_calls=0),
        lambda: ConcurrencyLimitConfig(min_calls=5, initial_calls=4),
        lambda: ConcurrencyLimitConfig(max_calls=2, initial_calls=4),
        lambda: ConcurrencyLimitConfig(increase_calls=float("nan")),
        lambda: ConcurrencyLimitConfig(initial_calls=2.5),
        lambda: ConcurrencyLimits("model_provider", ConcurrencyLimitConfig()),
        lambda: ConcurrencyLimits(["model_provider"], ConcurrencyLimitConfig()).limit("code_host"),
        lambda: ConcurrencyLimit(ConcurrencyLimitConfig()).allows(float("inf")),
    ],
)
def test_bad_input_is_refused_with_a_typed_error(make):
    with pytest.raises(InputError):
        make()
