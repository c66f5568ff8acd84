"""The store suite: the store's own clock, which leases are judged by when processes on several machines share a store.

A store whose `clock()` is None (memory, SQLite: one machine) leaves the time
to the caller's clock, and these checks are skipped, saying so. A store that
has a clock (a server's) is read as the core reads it: seconds, on the Unix
epoch (or ahead of it by the store's declared `clock_epoch_offset_s`) within
`CLOCK_EPOCH_TOLERANCE_S` of the kit's wall clock; advancing as real time
does over `CLOCK_WATCH_S`; never backwards, inside transactions and outside.
A clock in milliseconds, frozen at a cached reading, or stepping back makes
every lease late or early, or no dead worker ever reaped. That two handles
read the same clock is checked with the two-handle checks.
"""

from __future__ import annotations

import math
import time
from typing import Any

from shiftchange.core import Store

from ..checks import Check, collector, expect, skip
from .builders import fresh
from .registry import CLOCK_EPOCH_TOLERANCE_S, CLOCK_JITTER_S, CLOCK_RATE_TOLERANCE, CLOCK_WATCH_S, StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)


def store_clock(store: Store) -> Any:
    """The store's own clock; the check is skipped when it has none (the caller's clock is then the time)."""
    clock = store.clock()
    if clock is None:
        skip("the store has no clock of its own (clock() is None): leases are judged by the caller's clock, on one machine")
    return clock


def reading(clock: Any, what: str) -> float:
    """One reading of the clock, which must be a finite number of seconds."""
    value = clock.now()
    expect(
        not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value),
        f"{what}: the store's clock read {value!r}, not a finite number of seconds",
    )
    return float(value)


@_check
def store_clock_reads_seconds_on_the_shared_epoch(make_store: StoreFactory) -> None:
    """The store's clock reads seconds on the Unix epoch (or its declared offset from it), within a second of the kit's wall clock."""
    with fresh(make_store) as store:
        clock = store_clock(store)
        offset = float(getattr(store, "clock_epoch_offset_s", 0.0))
        before = time.time()
        read = reading(clock, "a reading")
        after = time.time()
        off = max(0.0, before - (read - offset), (read - offset) - after)
        expect(
            off <= CLOCK_EPOCH_TOLERANCE_S,
            f"the store's clock read {read:.3f}, the kit's wall clock {after:.3f} (declared offset {offset:g} s): {off:.3f} s apart, more"
            f" than {CLOCK_EPOCH_TOLERANCE_S:g} s; leases written on it expire at the wrong time (a clock in milliseconds, on another"
            " epoch, or on a machine whose clock is wrong)",
        )


@_check
def store_clock_advances_with_real_time(make_store: StoreFactory) -> None:
    """Over half a second of real time, the store's clock advances by as much (within a tenth, and a round trip)."""
    with fresh(make_store) as store:
        clock = store_clock(store)
        start, started = reading(clock, "the first reading"), time.monotonic()
        time.sleep(CLOCK_WATCH_S)
        end, ended = reading(clock, "the last reading"), time.monotonic()
        real, advanced = ended - started, end - start
        allowed = CLOCK_RATE_TOLERANCE * real + 2 * CLOCK_JITTER_S
        expect(
            abs(advanced - real) <= allowed,
            f"over {real:.3f} s of real time the store's clock advanced {advanced:.3f} s (allowed {real:.3f} +- {allowed:.3f}):"
            " a lease on it lasts the wrong time (a frozen or cached reading, or another unit)",
        )


@_check
def store_clock_never_goes_backwards(make_store: StoreFactory) -> None:
    """Readings of the store's clock, inside transactions and out, never go backwards."""
    with fresh(make_store) as store:
        clock = store_clock(store)
        last, deadline = reading(clock, "the first reading"), time.monotonic() + CLOCK_WATCH_S
        readings = 1
        while time.monotonic() < deadline:
            if readings % 2:
                with store.transaction():
                    now = reading(clock, "a reading inside a transaction")
            else:
                now = reading(clock, "a reading outside a transaction")
            expect(now >= last, f"the store's clock went backwards by {last - now:.6f} s after {readings} readings: {last!r}, then {now!r}")
            last, readings = now, readings + 1
