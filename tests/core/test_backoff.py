"""Backoff: every delay lies within its strategy's bounds and follows Brooker's formulas, with seeded randomness only."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core.backoff import Backoff, bounds_s
from shiftchange.core.config import BACKOFF_STRATEGIES, BackoffConfig
from shiftchange.core.errors import InputError


class ScriptedRandom(random.Random):
    """A Random whose random() returns the given fractions in turn, so uniform(a, b) is a + (b - a) * fraction."""

    def __init__(self, fractions: list[float]) -> None:
        super().__init__(0)
        self.fractions = list(fractions)

    def random(self) -> float:
        return self.fractions.pop(0)


configs = st.builds(
    lambda strategy, base_s, ratio: BackoffConfig(strategy=strategy, base_s=base_s, cap_s=base_s * ratio),
    st.sampled_from(BACKOFF_STRATEGIES),
    st.floats(min_value=1e-3, max_value=1e3),
    st.floats(min_value=1.0, max_value=1e6),
)


def test_none_waits_zero_before_every_retry():
    """Strategy none never waits."""
    backoff = Backoff(BackoffConfig(strategy="none"), random.Random(1))
    assert [backoff.delay_s(n) for n in range(5)] == [0.0] * 5


def test_exponential_doubles_from_base_until_the_cap():
    """Exponential is min(cap, base * 2**retry_number), retry 0 waiting exactly base."""
    backoff = Backoff(BackoffConfig(strategy="exponential", base_s=1.0, cap_s=60.0), random.Random(1))
    assert [backoff.delay_s(n) for n in range(9)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


def test_equal_jitter_waits_half_the_ceiling_plus_a_uniform_half():
    """Equal jitter is temp/2 + uniform(0, temp/2), temp being the capped exponential."""
    config = BackoffConfig(strategy="equal_jitter", base_s=2.0, cap_s=100.0)
    backoff = Backoff(config, ScriptedRandom([0.0, 0.5, 0.25]))
    # temp: 2, then 16, then min(100, 2048); each delay adds its draw's share of temp/2.
    assert [backoff.delay_s(n) for n in (0, 3, 10)] == [1.0, 8.0 + 4.0, 50.0 + 12.5]


def test_decorrelated_jitter_draws_from_base_to_three_times_the_previous_delay():
    """Decorrelated jitter is min(cap, uniform(base, 3 * previous)), previous starting at base; retry 0 starts over."""
    config = BackoffConfig(strategy="decorrelated_jitter", base_s=1.0, cap_s=100.0)
    almost_one = 1.0 - 2**-53
    backoff = Backoff(config, ScriptedRandom([0.5] * 4 + [almost_one] * 3 + [0.5]))
    delays = [backoff.delay_s(n) for n in range(7)]
    # Halfway each time: 1 + (3 - 1)/2 = 2, 1 + (6 - 1)/2 = 3.5, 1 + (10.5 - 1)/2 = 5.75, 1 + (17.25 - 1)/2 = 9.125;
    # then at the top of each interval: 3 * 9.125, 3 * 27.375, and 3 * 82.125 capped at 100.
    assert delays[:4] == [2.0, 3.5, 5.75, 9.125]
    assert delays[4:6] == [pytest.approx(27.375), pytest.approx(82.125)]
    assert delays[6] == 100.0 == backoff.previous_s
    assert backoff.delay_s(0) == 2.0  # a new sequence draws from [base, 3 * base] again, not from [base, 300]


def test_reset_makes_decorrelated_jitter_forget_its_previous_delay():
    """reset() starts a new sequence: the next draw's high end is 3 * base again."""
    config = BackoffConfig(strategy="decorrelated_jitter", base_s=1.0, cap_s=100.0)
    backoff = Backoff(config, ScriptedRandom([1.0 - 2**-53, 1.0 - 2**-53, 0.5]))
    backoff.delay_s(0)
    backoff.delay_s(1)
    assert backoff.previous_s > 8.0
    backoff.reset()
    assert backoff.previous_s == 1.0
    assert backoff.delay_s(1) == 2.0


@given(config=configs, rng=st.randoms(use_true_random=False), length=st.integers(min_value=1, max_value=40))
def test_every_delay_lies_within_its_strategy_bounds(config, rng, length):
    """Each delay of a sequence lies in bounds_s given the previous delay; exponential and none hit the bound exactly."""
    backoff = Backoff(config, rng)
    previous_s = None
    for retry_number in range(length):
        delay_s = backoff.delay_s(retry_number)
        low_s, high_s = bounds_s(config, retry_number, previous_s)
        assert 0.0 <= low_s <= delay_s <= high_s <= config.cap_s
        if config.strategy in ("none", "exponential"):
            assert delay_s == low_s == high_s
        previous_s = delay_s


@given(config=configs, rng=st.randoms(use_true_random=False), retry_number=st.integers(min_value=0, max_value=10**6))
def test_the_cap_holds_for_any_retry_number_up_to_a_million(config, rng, retry_number):
    """No strategy exceeds the cap or overflows, however late the retry; past log2(cap/base) the ceiling is the cap."""
    backoff = Backoff(config, rng)
    assert 0.0 <= backoff.delay_s(retry_number) <= config.cap_s
    _, high_s = bounds_s(config, retry_number)
    if config.strategy in ("exponential", "full_jitter", "equal_jitter") and retry_number >= 20:  # cap / base <= 1e6 < 2**20
        assert high_s == config.cap_s


def test_extreme_ratios_of_cap_to_base_do_not_overflow():
    """With base 1e-300 and cap 1e300, 2**retry_number would overflow a float long before the cap is reached."""
    config = BackoffConfig(strategy="exponential", base_s=1e-300, cap_s=1e300)
    backoff = Backoff(config, random.Random(1))
    assert backoff.delay_s(10) == 1e-300 * 1024
    assert 1e299 < backoff.delay_s(1990) < 1e300  # 2**1990 alone is past the largest float
    assert backoff.delay_s(2000) == 1e300
    assert backoff.delay_s(10**6) == 1e300


def test_bounds_follow_each_strategy_formula():
    """The intervals are Brooker's: [0,0], [e,e], [0,e], [e/2,e] and [base, min(cap, 3 * previous)]."""
    expected = {
        "none": (0.0, 0.0),
        "exponential": (8.0, 8.0),
        "full_jitter": (0.0, 8.0),
        "equal_jitter": (4.0, 8.0),
        "decorrelated_jitter": (1.0, 15.0),
    }
    for strategy, interval in expected.items():
        config = BackoffConfig(strategy=strategy, base_s=1.0, cap_s=20.0)
        assert bounds_s(config, 3, previous_s=5.0) == interval, strategy
    decorrelated = BackoffConfig(strategy="decorrelated_jitter", base_s=1.0, cap_s=20.0)
    assert bounds_s(decorrelated, 3, previous_s=9.0) == (1.0, 20.0)
    assert bounds_s(decorrelated, 0) == (1.0, 3.0)


@pytest.mark.parametrize("strategy", ["full_jitter", "equal_jitter", "decorrelated_jitter"])
def test_the_same_seed_gives_the_same_sequence(strategy):
    """A run is a function of its seed: two Backoffs on equal seeds agree, and another seed differs."""
    config = BackoffConfig(strategy=strategy, base_s=0.5, cap_s=30.0)

    def sequence(seed: int) -> list[float]:
        backoff = Backoff(config, random.Random(seed))
        return [backoff.delay_s(n) for n in range(12)]

    first = sequence(7)
    assert sequence(7) == first
    assert sequence(8) != first


def test_full_jitter_mean_is_half_its_ceiling():
    """Full jitter is uniform over [0, ceiling]: over many draws the mean sits near ceiling / 2."""
    config = BackoffConfig(strategy="full_jitter", base_s=1.0, cap_s=60.0)
    backoff = Backoff(config, random.Random(2015))
    draws = [backoff.delay_s(4) for _ in range(20_000)]
    mean_s = sum(draws) / len(draws)
    assert abs(mean_s - 8.0) < 0.1  # the standard error is 16 / sqrt(12 * 20000), about 0.033
    assert min(draws) < 0.1 and max(draws) > 15.9


def test_bad_arguments_are_input_errors():
    """Negative, fractional or boolean retry numbers, an infinite cap and the unseeded random module are refused."""
    config = BackoffConfig(strategy="decorrelated_jitter", base_s=1.0, cap_s=10.0)
    backoff = Backoff(config, random.Random(1))
    for retry_number in (-1, 1.5, True):
        with pytest.raises(InputError):
            backoff.delay_s(retry_number)
        with pytest.raises(InputError):
            bounds_s(config, retry_number)
    with pytest.raises(InputError):
        bounds_s(config, 1, previous_s=11.0)
    with pytest.raises(InputError):
        Backoff(BackoffConfig(cap_s=float("inf")), random.Random(1))
    with pytest.raises(InputError, match=r"random\.Random"):
        Backoff(config, random)
