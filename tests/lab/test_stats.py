"""`shiftchange.lab.stats`: the exact (Clopper-Pearson) binomial interval against brute-force binomial sums, its edges, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shiftchange.core import InputError
from shiftchange.lab.stats import binomial_interval, binomial_tail_ge, binomial_tail_le


def tail_le(k: int, n: int, p: float) -> float:
    """P(X <= k), summed term by term with exact binomial coefficients."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def tail_ge(k: int, n: int, p: float) -> float:
    """P(X >= k), summed term by term with exact binomial coefficients."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def bound_by_bisection(k: int, n: int, confidence: float, upper: bool) -> float:
    """The Clopper-Pearson bound found the plain way: bisect on the brute-force tail for the p where it equals alpha/2."""
    alpha = (1 - confidence) / 2
    low, high = 0.0, 1.0
    for _ in range(50):
        middle = (low + high) / 2
        # the upper bound: P(X <= k) falls as p grows; the lower: P(X >= k) rises as p grows
        if (tail_le(k, n, middle) > alpha) if upper else (tail_ge(k, n, middle) < alpha):
            low = middle
        else:
            high = middle
    return (low + high) / 2


@pytest.mark.parametrize("n", [1, 2, 5, 12])
@pytest.mark.parametrize("p", [0.03, 0.3, 0.5, 0.81])
def test_the_tails_are_the_brute_force_sums(n, p):
    """Both tails equal the sums of math.comb(n, i) p^i (1-p)^(n-i), for every k from below 0 to above n."""
    for k in range(-1, n + 2):
        assert binomial_tail_le(k, n, p) == pytest.approx(tail_le(min(k, n), n, p) if k >= 0 else 0.0, abs=1e-12)
        assert binomial_tail_ge(k, n, p) == pytest.approx(tail_ge(max(k, 0), n, p) if k <= n else 0.0, abs=1e-12)


@pytest.mark.parametrize(("k", "n"), [(1, 3), (2, 7), (3, 10), (5, 12), (9, 10), (4, 40)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_the_bounds_are_where_the_brute_force_tails_cross_alpha_over_two(k, n, confidence):
    """Each bound agrees with a bisection on the brute-force tails, and the brute-force tail there is alpha/2."""
    lower, upper = binomial_interval(k, n, confidence)
    alpha = (1 - confidence) / 2
    assert lower == pytest.approx(bound_by_bisection(k, n, confidence, upper=False), abs=1e-9)
    assert upper == pytest.approx(bound_by_bisection(k, n, confidence, upper=True), abs=1e-9)
    assert tail_ge(k, n, lower) == pytest.approx(alpha, rel=1e-9)
    assert tail_le(k, n, upper) == pytest.approx(alpha, rel=1e-9)


@pytest.mark.parametrize("n", [1, 3, 10, 3594])
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_no_events_bound_the_rate_by_the_closed_form(n, confidence):
    """At k = 0 the lower bound is 0 and the upper 1 - (alpha/2)^(1/n); at 95% and n = 3,594 that is 1.03 per 1,000."""
    lower, upper = binomial_interval(0, n, confidence)
    assert lower == 0.0
    assert upper == pytest.approx(1 - ((1 - confidence) / 2) ** (1 / n), rel=1e-12)
    if (n, confidence) == (3594, 0.95):
        assert round(1000 * upper, 2) == 1.03


@pytest.mark.parametrize("n", [1, 3, 10, 3594])
def test_all_events_mirror_no_events(n):
    """At k = n the upper bound is 1 and the lower (alpha/2)^(1/n): the k = 0 interval seen from the other side."""
    lower, upper = binomial_interval(n, n, 0.95)
    assert upper == 1.0
    assert lower == pytest.approx(0.025 ** (1 / n), rel=1e-12)
    _, zero_high = binomial_interval(0, n, 0.95)
    assert lower == pytest.approx(1 - zero_high, abs=1e-12)


def test_no_trials_say_nothing():
    """n = 0: the interval is the whole of [0, 1]."""
    assert binomial_interval(0, 0, 0.95) == (0.0, 1.0)


def test_more_confidence_widens_the_interval():
    """At 99% the interval holds the 90% one."""
    narrow, wide = binomial_interval(3, 3597, 0.90), binomial_interval(3, 3597, 0.99)
    assert wide[0] < narrow[0] < 3 / 3597 < narrow[1] < wide[1]


@pytest.mark.parametrize(
    ("k", "n", "confidence", "named"),
    [
        (-1, 5, 0.95, "k must be"),
        (1, -5, 0.95, "n must be"),
        (1.0, 5, 0.95, "k must be"),
        (True, 5, 0.95, "k must be"),
        (6, 5, 0.95, "cannot exceed n"),
        (1, 5, 0.0, "confidence"),
        (1, 5, 1.0, "confidence"),
        (1, 5, 95, "confidence"),
        (1, 5, "0.95", "confidence"),
        (1, 5, True, "confidence"),
    ],
)
def test_bad_input_is_an_input_error_naming_what_is_wrong(k, n, confidence, named):
    """Counts that are not whole, not counts of one set of trials, or a confidence outside (0, 1): one line naming it."""
    with pytest.raises(InputError, match=named) as caught:
        binomial_interval(k, n, confidence)
    assert "\n" not in str(caught.value)


@given(
    n=st.integers(min_value=1, max_value=5_000),
    fraction=st.fractions(min_value=0, max_value=1),
    confidence=st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99, 0.999]),
)
def test_the_interval_holds_the_observed_rate(n, fraction, confidence):
    """Whatever k of n: 0 <= lower <= k/n <= upper <= 1, strictly inside unless k is 0 or n."""
    k = int(Fraction(fraction) * n)
    lower, upper = binomial_interval(k, n, confidence)
    assert 0.0 <= lower <= k / n <= upper <= 1.0
    assert (lower < k / n) == (k > 0)
    assert (k / n < upper) == (k < n)
