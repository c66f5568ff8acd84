"""Time as an object passed in: the core never reads the wall clock.

`ManualClock` is the clock tests and the simulator advance by hand (Trio's
MockClock habit). A deployment passes any object with `now() -> float`
seconds; the core only compares and adds such numbers.
"""

from __future__ import annotations

import math
from typing import Protocol

from .errors import InputError


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on this clock's own scale; only differences matter."""
        ...


class ManualClock:
    """A clock that moves only when told to, forwards, by finite amounts (anything else is an InputError)."""

    __slots__ = ("_now",)

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = _finite(start_s, "start_s")

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if _finite(seconds, "seconds") < 0:
            raise InputError(f"a clock does not go backwards: cannot advance by {seconds!r}")
        self._now += seconds
        return self._now

    def set(self, now_s: float) -> None:
        if _finite(now_s, "now_s") < self._now:
            raise InputError(f"a clock does not go backwards: {now_s!r} is before {self._now!r}")
        self._now = float(now_s)


def _finite(value: object, name: str) -> float:
    """A reading or a step of a clock: a real, finite number of seconds (NaN would stop every lease from expiring)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number of seconds, not {value!r}")
    return float(value)
