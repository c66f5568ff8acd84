"""The wall clock the runtime's processes share, and how a driver waits on it (and a stepping clock for tests of a driver).

The core compares and adds the numbers its clock gives; it never reads time
itself. Workers, orchestrators and the provider run in separate processes,
and their events and ledger entries are judged as one history ordered by
time, so all of them must read one clock: on one machine, `time.time()`;
across machines, clocks kept within a small fraction of a lease of each
other (NTP), which a lease TTL of seconds tolerates.

A worker's sleeps go through its clock too (`wait`: until an event is set or
the time has passed), so a test can hand a worker a `SteppingClock`, on which
every wait passes at once and moves the time on: the worker runs a whole
Attempt's waits, tool calls and commits without sleeping (Trio's MockClock
is the model).
"""

from __future__ import annotations

import threading
import time

from shiftchange.core import ManualClock

__all__ = ["SteppingClock", "WallClock"]


class WallClock:
    """`now()` is `time.time()`: the core's Clock protocol on the real clock."""

    __slots__ = ()

    def now(self) -> float:
        return time.time()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Block until `event` is set or `seconds` have passed; whether it was set."""
        return event.wait(max(0.0, seconds))


class SteppingClock(ManualClock):
    """A manual clock whose waits pass at once: a wait on an event not set moves the time on by the whole wait."""

    __slots__ = ()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        if event.is_set():
            return True
        self.advance(max(0.0, seconds))
        return False
