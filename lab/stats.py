"""Exact binomial intervals: what k events in n trials say about the rate behind them.

Sweeps, the tuner and the recoverability maps all report rates from counts
(false expiries per lease, recovered runs per seed), and a rate from a few
hundred trials is a range, not a number. The Clopper-Pearson interval is the
exact one: its bounds are the rates at which seeing k or more (k or fewer)
events has probability (1 - confidence) / 2. It never covers less than it
claims, which is why it is used here rather than a normal approximation, which
says nothing useful at k = 0 (the case a tuner cares about most: "none in
3,594 leases"). At k = 0 its upper bound is 1 - ((1 - confidence) / 2)^(1/n),
about 3.7/n at 95%, close to the rule of three's 3/n for a one-sided 95%.

The bounds are found by bisection on the binomial tail, each tail summed from
its end nearest the mean outward until the terms no longer count, so n in the
millions takes well under a second. No
sampling, no wall clock: the same counts give the same interval everywhere.
"""

from __future__ import annotations

import math

from shiftchange.core import InputError

__all__ = ["binomial_interval", "binomial_tail_ge", "binomial_tail_le"]

_BISECTIONS = 60
"""Halvings of [0, 1]: 2^-60 is far below any digit a report prints."""


def _check(k: int, n: int, confidence: float) -> None:
    for name, value in (("k", k), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{name} must be a whole number, not negative, not {value!r}")
    if k > n:
        raise InputError(f"k ({k}) cannot exceed n ({n}): there are no more events than trials")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise InputError(f"confidence must be a number between 0 and 1, not {confidence!r}")


def _log_pmf(i: int, n: int, p: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)


_NEGLIGIBLE = 1e-20
"""A term this much smaller than the sum so far ends a tail's sum: every later one is smaller still."""


def _tail_from(start: int, step: int, stop: int, n: int, p: float) -> float:
    """The sum of pmf(i) from `start` away from the mean (step -1 below it, +1 above), terms falling all the way."""
    total = 0.0
    term = math.exp(_log_pmf(start, n, p))
    i = start
    while True:
        total += term
        if i == stop or term < _NEGLIGIBLE * total:
            return total
        # pmf(i - 1) / pmf(i) = i / (n - i + 1) * (1 - p) / p, and its inverse going up
        term *= i / (n - i + 1) * (1 - p) / p if step < 0 else (n - i) / (i + 1) * p / (1 - p)
        i += step


def binomial_tail_le(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0 or k >= n:
        return 1.0
    if p >= 1 or k < 0:
        return 0.0
    if k < n * p:  # below the mean the terms fall as i falls: sum them down from k
        return min(1.0, _tail_from(k, -1, 0, n, p))
    return max(0.0, 1.0 - _tail_from(k + 1, 1, n, n, p))


def binomial_tail_ge(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return 1.0 if k <= 0 else 1.0 - binomial_tail_le(k - 1, n, p)


def binomial_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for the rate behind k events in n trials; n = 0 says nothing: (0, 1)."""
    _check(k, n, confidence)
    if n == 0:
        return 0.0, 1.0
    alpha = (1 - confidence) / 2
    lower = 0.0 if k == 0 else _bisect(lambda p: binomial_tail_ge(k, n, p) < alpha)
    upper = 1.0 if k == n else _bisect(lambda p: binomial_tail_le(k, n, p) > alpha)
    return lower, upper


def _bisect(below: object) -> float:
    """The p in [0, 1] where `below(p)` turns from True to False."""
    low, high = 0.0, 1.0
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if below(middle):  # type: ignore[operator]
            low = middle
        else:
            high = middle
    return (low + high) / 2
