"""The clocks the runtime's processes read, and how a driver waits on them (and a stepping clock for tests of a driver).

The core compares and adds the numbers its clock gives; it never reads time
itself. Workers, orchestrators and the provider run in separate processes,
and their events and ledger entries are judged as one history ordered by
time, so every process must judge leases by one clock. Which one is the
store's to say (`lease_clock`):

- PostgreSQL has a clock of its own, the server's (`store.clock()`, a
  `ServerClock`): every lease is stamped and judged on it, so a process
  whose own clock is minutes off claims, renews, reaps and is fenced exactly
  as one whose clock is right. No NTP is asked of the machines that run
  workers and orchestrators.
- SQLite and the memory store have none (`store.clock()` is None): one
  machine, one clock, this process's `WallClock`. A process whose clock is
  off there would break leases, which is why the chaos harness skews clocks
  only on PostgreSQL.

`WallClock` is `time.time()` shifted by this process's skew,
`SHIFTCHANGE_CLOCK_SKEW_S` (seconds, default 0): how a test or the chaos
harness (its `skew` fault) starts a process whose clock is minutes ahead or
behind. Every wall-clock read of the runtime goes through this module, so
the skew reaches everything that reads this process's clock, and nothing
that reads the server's.

A worker's sleeps go through its clock too (`wait`: until an event is set or
the time has passed). The waits are real (`Event.wait`) on every clock here,
measured on the clock the agent decides by: `Waits` gives a clock that has
no `wait` of its own (a `ServerClock`) the real one. A test can hand a worker
a `SteppingClock`, on which every wait passes at once and moves the time on:
the worker runs a whole Attempt's waits, tool calls and commits without
sleeping (Trio's MockClock is the model).
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

from shiftchange.core import Clock, InputError, ManualClock

__all__ = ["SKEW_VARIABLE", "SteppingClock", "Waits", "WallClock", "judged_by", "lease_clock", "process_skew_s", "waiting"]

SKEW_VARIABLE = "SHIFTCHANGE_CLOCK_SKEW_S"
"""The environment variable that shifts this process's wall clock, in seconds (+300: five minutes ahead)."""
SKEW_MAX_S = 86_400.0
"""The largest skew a process may be given either way: a day; more is a typo, not a test."""


def process_skew_s(environ: Any = None) -> float:
    """This process's clock skew from SHIFTCHANGE_CLOCK_SKEW_S (0 when unset or empty); InputError for anything not seconds."""
    text = (os.environ if environ is None else environ).get(SKEW_VARIABLE, "").strip()
    if not text:
        return 0.0
    try:
        skew_s = float(text)
    except ValueError:
        skew_s = math.nan
    if not (math.isfinite(skew_s) and abs(skew_s) <= SKEW_MAX_S):
        raise InputError(f"{SKEW_VARIABLE} must be seconds from -{SKEW_MAX_S:g} to {SKEW_MAX_S:g} (e.g. 300 or -300), not {text!r}")
    return skew_s


class WallClock:
    """`now()` is `time.time()` plus this process's skew (SHIFTCHANGE_CLOCK_SKEW_S unless `skew_s` is given): the core's Clock
    protocol on the real clock."""

    __slots__ = ("skew_s",)

    def __init__(self, skew_s: float | None = None) -> None:
        if skew_s is None:
            skew_s = process_skew_s()
        elif isinstance(skew_s, bool) or not isinstance(skew_s, int | float) or not math.isfinite(skew_s):
            raise InputError(f"skew_s must be a finite number of seconds, not {skew_s!r}")
        self.skew_s = float(skew_s)

    def now(self) -> float:
        return time.time() + self.skew_s

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Block until `event` is set or `seconds` have passed; whether it was set."""
        return event.wait(max(0.0, seconds))

    def __repr__(self) -> str:
        return f"WallClock(skew_s={self.skew_s:g})" if self.skew_s else "WallClock()"


class Waits:
    """A clock that has only `now()` (the store's), with the real wait beside it: what a worker sleeps on."""

    __slots__ = ("clock",)

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def now(self) -> float:
        return self.clock.now()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Block until `event` is set or `seconds` have passed, real seconds (the store's clock runs at their rate)."""
        return event.wait(max(0.0, seconds))

    def __repr__(self) -> str:
        return f"Waits({self.clock!r})"


def lease_clock(store: Any) -> Clock:
    """The clock leases over `store` are judged by: the store's own (a server's) when it has one, else this process's WallClock.

    The process's skew is checked either way, so a bad SHIFTCHANGE_CLOCK_SKEW_S
    is an InputError on every store, not only where the wall clock is read.
    A store's clock is read once here: a server's first reading is a round
    trip, and a process that cannot make it should fail at its start, not
    later outside any error handling.
    """
    wall = WallClock()
    own = store.clock() if callable(getattr(store, "clock", None)) else None
    if own is None:
        return wall
    own.now()
    return own


def judged_by(clock: Clock) -> str:
    """Whose clock judges this process's leases, and its own clock's skew: for a process's first log line."""
    skew_s = process_skew_s()
    own = f"this process's clock ({skew_s:+g} s)" if skew_s else "this process's clock"
    if isinstance(clock, WallClock):
        return f"leases judged on {own}"
    return f"leases judged on {clock!r}, not on {own}"


def waiting(clock: Clock) -> Any:
    """`clock` itself if it can `wait`, else `clock` with the real wait (`Waits`)."""
    return clock if callable(getattr(clock, "wait", None)) else Waits(clock)


class SteppingClock(ManualClock):
    """A manual clock whose waits pass at once: a wait on an event not set moves the time on by the whole wait."""

    __slots__ = ()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        self.advance(max(0.0, seconds))
        return False
