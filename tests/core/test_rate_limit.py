"""Rate limiting: a token bucket never admits more than rate * window + burst, and a denial is capacity, not a defect."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core.clock import ManualClock
from shiftchange.core.config import RateLimitConfig
from shiftchange.core.errors import InputError
from shiftchange.core.policy import DOMAINS
from shiftchange.core.rate_limit import DENIAL_DOMAIN, RateLimiter, TokenBucket

CONFIG = RateLimitConfig(rate_per_s=2.0, burst=5)


def test_a_fresh_bucket_admits_its_burst_then_denies():
    """A bucket starts full: burst calls pass at once, the next is denied."""
    clock = ManualClock(100.0)
    bucket = TokenBucket(CONFIG, clock.now())
    assert [bucket.try_acquire(clock.now()) for _ in range(6)] == [True] * 5 + [False]
    assert bucket.available(clock.now()) == 0.0


def test_tokens_return_at_the_configured_rate():
    """After an empty bucket waits 1/rate seconds, exactly one more call passes."""
    clock = ManualClock()
    bucket = TokenBucket(CONFIG, clock.now())
    assert bucket.try_acquire(clock.now(), tokens=5)
    clock.advance(0.25)
    assert not bucket.try_acquire(clock.now())
    clock.advance(0.25)
    assert bucket.try_acquire(clock.now())
    assert not bucket.try_acquire(clock.now())


def test_a_quiet_spell_refills_no_further_than_the_burst():
    """However long the bucket stays idle, it holds at most burst tokens."""
    clock = ManualClock()
    bucket = TokenBucket(CONFIG, clock.now())
    bucket.try_acquire(clock.now(), tokens=3)
    clock.advance(3600.0)
    assert bucket.available(clock.now()) == 5.0
    assert bucket.try_acquire(clock.now(), tokens=5)
    assert not bucket.try_acquire(clock.now())


def test_a_denial_takes_nothing():
    """A request larger than what is left is denied whole and leaves the tokens in place."""
    clock = ManualClock()
    bucket = TokenBucket(CONFIG, clock.now())
    bucket.try_acquire(clock.now(), tokens=3)
    assert not bucket.try_acquire(clock.now(), tokens=3)
    assert bucket.available(clock.now()) == 2.0
    assert bucket.try_acquire(clock.now(), tokens=2)


def test_time_going_backwards_is_an_input_error():
    """A now_s before the last one seen is refused, by try_acquire and by available alike."""
    bucket = TokenBucket(CONFIG, 10.0)
    assert bucket.try_acquire(12.0)
    with pytest.raises(InputError, match="backwards"):
        bucket.try_acquire(11.0)
    with pytest.raises(InputError, match="backwards"):
        bucket.available(11.9)
    assert bucket.available(12.0) == 4.0  # the refused calls changed nothing


def test_bad_requests_and_configs_are_input_errors():
    """Zero, negative, boolean or larger-than-burst requests, a non-finite time or rate, and a wrong config are refused."""
    bucket = TokenBucket(CONFIG, 0.0)
    for tokens in (0, -1, True, 6, float("nan")):
        with pytest.raises(InputError):
            bucket.try_acquire(1.0, tokens=tokens)
    for now_s in (float("nan"), float("inf"), "2"):
        with pytest.raises(InputError):
            bucket.available(now_s)
    with pytest.raises(InputError):
        TokenBucket(RateLimitConfig(rate_per_s=float("inf")), 0.0)
    with pytest.raises(InputError):
        TokenBucket({"rate_per_s": 1.0, "burst": 1}, 0.0)


def test_the_limiter_keeps_one_bucket_per_dependency():
    """Exhausting the model provider's bucket leaves the code host's untouched; an unknown dependency is bad input."""
    clock = ManualClock()
    limiter = RateLimiter(
        {"model": RateLimitConfig(rate_per_s=1.0, burst=2), "github": RateLimitConfig(rate_per_s=5.0, burst=3)}, clock.now()
    )
    assert limiter.try_acquire("model", clock.now(), tokens=2)
    assert not limiter.try_acquire("model", clock.now())
    assert limiter.available("github", clock.now()) == 3.0
    assert [limiter.try_acquire("github", clock.now()) for _ in range(4)] == [True, True, True, False]
    clock.advance(1.0)
    assert limiter.available("model", clock.now()) == 1.0
    with pytest.raises(InputError, match="configured: github, model"):
        limiter.try_acquire("gitlab", clock.now())
    with pytest.raises(InputError):
        RateLimiter({"": CONFIG}, 0.0)


def test_a_denial_is_classified_as_capacity_which_backs_off_rather_than_blaming_anyone():
    """DENIAL_DOMAIN names the spec's capacity domain, whose response is to back off and retry."""
    assert DENIAL_DOMAIN == "capacity"
    assert DOMAINS[DENIAL_DOMAIN].response == "back_off_and_retry"


@st.composite
def traces(draw):
    """A bucket's config and a sequence of (seconds to advance, tokens requested)."""
    rate_per_s = draw(st.floats(min_value=0.1, max_value=100.0))
    burst = draw(st.integers(min_value=1, max_value=30))
    advances_s = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=2.0), st.floats(min_value=0.0, max_value=0.05))
    requests = st.one_of(st.just(1), st.integers(min_value=1, max_value=burst), st.floats(min_value=0.01, max_value=float(burst)))
    steps = draw(st.lists(st.tuples(advances_s, requests), min_size=1, max_size=120))
    return RateLimitConfig(rate_per_s=rate_per_s, burst=burst), steps


@given(trace=traces())
def test_a_bucket_never_admits_more_than_rate_times_window_plus_burst_over_any_window(trace):
    """For every window [t_i, t_j] of the trace, the tokens admitted in it are at most rate * (t_j - t_i) + burst.

    Admissions happen only at the trace's instants, so the windows that start
    and end on those instants include the worst one. A request is denied only
    when the bucket holds fewer tokens than it asks for.
    """
    config, steps = trace
    clock = ManualClock(50.0)
    bucket = TokenBucket(config, clock.now())
    times_s: list[float] = []
    admitted: list[float] = []
    for advance_s, tokens in steps:
        clock.advance(advance_s)
        before = bucket.available(clock.now())
        granted = bucket.try_acquire(clock.now(), tokens)
        assert granted == (before >= tokens)
        times_s.append(clock.now())
        admitted.append(tokens if granted else 0.0)
    prefix = [0.0]
    for amount in admitted:
        prefix.append(prefix[-1] + amount)
    for i in range(len(times_s)):
        for j in range(i, len(times_s)):
            limit = config.rate_per_s * (times_s[j] - times_s[i]) + config.burst
            assert prefix[j + 1] - prefix[i] <= limit * (1 + 1e-9), (i, j)
