"""Coverage of the transition tables by simulated runs: each run's events counted as its history streams past.

The world's store keeps no history (`MemoryStore(keep_events=False)`), so
there is nothing to count after the run: a `CoverageSink` is handed to the
run as its history sink (`play(..., history_sink=sink)`) and counts every
core `Event` as it is appended, against the spec the core itself runs.
"""

from __future__ import annotations

from typing import Any

from shiftchange.core import Event
from shiftchange.core.machine import SPEC
from shiftchange.spec.coverage import Tally

__all__ = ["CoverageSink"]


class CoverageSink:
    """A history sink counting one run's events into a `Tally` of the packaged spec; other entries pass by uncounted."""

    __slots__ = ("tally",)

    def __init__(self) -> None:
        self.tally = Tally(SPEC)

    def __call__(self, entry: Any) -> None:
        if type(entry) is Event:
            self.tally.add(entry)
