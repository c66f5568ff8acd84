"""Time as an object passed in: the core never reads the wall clock.

`ManualClock` is the clock tests and the simulator advance by hand (Trio's
MockClock habit). A deployment passes any object with `now() -> float`
seconds; the core only compares and adds such numbers.
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on this clock's own scale; only differences matter."""
        ...


class ManualClock:
    """A clock that moves only when told to."""

    __slots__ = ("_now",)

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = float(start_s)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += seconds
        return self._now

    def set(self, now_s: float) -> None:
        if now_s < self._now:
            raise ValueError("a clock does not go backwards")
        self._now = float(now_s)
