"""Coverage of the transition tables by simulated runs: each run's events counted as its history streams past.

The world's store keeps no history (`MemoryStore(keep_events=False)`), so
there is nothing to count after the run: a `CoverageSink` is handed to the
run as its history sink (`play(..., history_sink=sink)`) and counts every
core `Event` as it is appended, against the spec the run plays (`--spec`; the
packaged one when none is given), read when the sink is made, never at import.

`SPEC`, the spec a sink counts against when it is given none, is the packaged
one, read on first use (a module attribute a caller may still name or
replace; naming it compiles nothing until it is asked for).
"""

from __future__ import annotations

from typing import Any

from shiftchange.core import Event
from shiftchange.core.table import packaged
from shiftchange.spec.coverage import Tally
from shiftchange.spec.model import Spec

__all__ = ["CoverageSink"]


def __getattr__(name: str) -> Any:
    if name == "SPEC":
        return packaged().spec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _default_spec() -> Spec:
    """`SPEC` as this module holds it now: the packaged spec, unless a caller set another in its place."""
    replaced = globals().get("SPEC")
    return packaged().spec if replaced is None else replaced


class CoverageSink:
    """A history sink counting one run's events into a `Tally` of its spec (default: the packaged one); other entries pass by uncounted."""

    __slots__ = ("tally",)

    def __init__(self, spec: Spec | None = None) -> None:
        self.tally = Tally(_default_spec() if spec is None else spec)

    def __call__(self, entry: Any) -> None:
        if type(entry) is Event:
            self.tally.add(entry)
