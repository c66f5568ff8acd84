"""Backoff: how long to wait between a classified transient failure and the next claim.

The five strategies are the ones Marc Brooker compares in the AWS Architecture
Blog article "Exponential Backoff And Jitter" (2015), with his formulas, where
`attempt` is the retry number counted from 0 for the first retry:

- none: 0;
- exponential: min(cap, base * 2**attempt);
- full jitter: uniform(0, min(cap, base * 2**attempt));
- equal jitter: temp = min(cap, base * 2**attempt); temp / 2 + uniform(0, temp / 2);
- decorrelated jitter: min(cap, uniform(base, previous * 3)), previous starting at base.

Why jitter at all: workers that fail together in one outage and wait the same
deterministic time retry together and knock the dependency over again (the
chapter's retry storm). In Brooker's simulations full jitter does the least
work, decorrelated jitter finishes slightly sooner for a little more work, and
equal jitter loses to both; exponential without jitter is kept here as the
retry storm's baseline, and none for tests.

Decorrelated jitter is the one strategy with memory: each wait depends on the
previous one, so a `Backoff` object is the state of one retry sequence (one
Task's retries), never something shared between Tasks. Retry number 0 always
starts a fresh sequence; `reset()` does the same explicitly.

`bounds_s` is the pure half: the interval each strategy draws from, so a
caller or a test can check any delay without knowing the random draws.
"""

from __future__ import annotations

import math
import random

from .config import BackoffConfig
from .errors import InputError


def bounds_s(config: BackoffConfig, retry_number: int, previous_s: float | None = None) -> tuple[float, float]:
    """The (low, high) interval the strategy's delay for this retry lies in.

    `previous_s` matters only to decorrelated jitter: the delay before this one
    in the same sequence, or None (meaning base_s) for the first retry.
    """
    _check_config(config)
    _check_retry_number(retry_number)
    if config.strategy == "none":
        return (0.0, 0.0)
    ceiling_s = _exponential_s(config, retry_number)
    if config.strategy == "exponential":
        return (ceiling_s, ceiling_s)
    if config.strategy == "full_jitter":
        return (0.0, ceiling_s)
    if config.strategy == "equal_jitter":
        return (ceiling_s / 2, ceiling_s)
    previous_s = _check_previous(config, previous_s)
    return (config.base_s, min(config.cap_s, previous_s * 3))


class Backoff:
    """The delays of one retry sequence, drawn from the passed `random.Random`."""

    __slots__ = ("_config", "_previous_s", "_random")

    def __init__(self, config: BackoffConfig, rng: random.Random) -> None:
        _check_config(config)
        if not isinstance(rng, random.Random):
            raise InputError("Backoff needs a random.Random instance (random.Random(seed)), not the random module or another object")
        self._config = config
        self._random = rng
        self._previous_s = config.base_s

    @property
    def previous_s(self) -> float:
        """The delay this object returned last (base_s before the first): decorrelated jitter's memory."""
        return self._previous_s

    def reset(self) -> None:
        """Start a new sequence: decorrelated jitter forgets its previous delay."""
        self._previous_s = self._config.base_s

    def restore(self, previous_s: float) -> None:
        """Continue a sequence whose last delay was recorded (on the previous Attempt): decorrelated jitter's memory."""
        self._previous_s = _check_previous(self._config, previous_s)

    def delay_s(self, retry_number: int) -> float:
        """Seconds to wait before retry `retry_number` (0 for the first retry)."""
        _check_retry_number(retry_number)
        if retry_number == 0:
            self.reset()
        delay_s = self._draw_s(retry_number)
        self._previous_s = delay_s
        return delay_s

    def _draw_s(self, retry_number: int) -> float:
        config = self._config
        if config.strategy == "none":
            return 0.0
        ceiling_s = _exponential_s(config, retry_number)
        if config.strategy == "exponential":
            return ceiling_s
        if config.strategy == "full_jitter":
            return self._random.uniform(0.0, ceiling_s)
        if config.strategy == "equal_jitter":
            half_s = ceiling_s / 2
            return half_s + self._random.uniform(0.0, half_s)
        # uniform(a, b) computes a + (b - a) * random(); float rounding can land it
        # a hair past b, so b joins the min to keep the documented bound exact.
        high_s = self._previous_s * 3
        return min(config.cap_s, high_s, self._random.uniform(config.base_s, high_s))


def _exponential_s(config: BackoffConfig, retry_number: int) -> float:
    """min(cap, base * 2**retry_number), without ever forming 2**retry_number for a large retry number."""
    # Once retry_number reaches log2(cap / base) the cap is the answer; checking
    # that first keeps the exponent small, so a retry number of 10**6 cannot
    # overflow a float. ldexp multiplies by a power of two exactly.
    if retry_number >= math.log2(config.cap_s) - math.log2(config.base_s):
        return config.cap_s
    return min(config.cap_s, math.ldexp(config.base_s, retry_number))


def _check_config(config: BackoffConfig) -> None:
    if not isinstance(config, BackoffConfig):
        raise InputError(f"expected a BackoffConfig, not {type(config).__name__}")
    if not math.isfinite(config.cap_s):
        raise InputError(f"BackoffConfig.cap_s must be finite, not {config.cap_s!r}: a backoff without a cap never ends")


def _check_retry_number(retry_number: int) -> None:
    if isinstance(retry_number, bool) or not isinstance(retry_number, int) or retry_number < 0:
        raise InputError(f"retry_number must be an integer counted from 0 for the first retry, not {retry_number!r}")


def _check_previous(config: BackoffConfig, previous_s: float | None) -> float:
    """Decorrelated jitter's previous delay: base_s when None, and always within [base_s, cap_s]."""
    if previous_s is None:
        return config.base_s
    if isinstance(previous_s, bool) or not isinstance(previous_s, int | float) or not config.base_s <= previous_s <= config.cap_s:
        raise InputError(f"previous_s must lie in [base_s, cap_s] = [{config.base_s}, {config.cap_s}], not {previous_s!r}")
    return float(previous_s)
