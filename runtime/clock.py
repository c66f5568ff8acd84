"""The wall clock the runtime's processes share: seconds since the epoch, as every process on one machine reads them.

The core compares and adds the numbers its clock gives; it never reads time
itself. Workers, orchestrators and the provider run in separate processes,
and their events and ledger entries are judged as one history ordered by
time, so all of them must read one clock: on one machine, `time.time()`;
across machines, clocks kept within a small fraction of a lease of each
other (NTP), which a lease TTL of seconds tolerates.
"""

from __future__ import annotations

import time

__all__ = ["WallClock"]


class WallClock:
    """`now()` is `time.time()`: the core's Clock protocol on the real clock."""

    __slots__ = ()

    def now(self) -> float:
        return time.time()
