"""Fault windows: the spans of simulated time in which a role is struck, which may overlap, each with its own parameter.

A role that can be struck (a provider in an outage, the network losing
messages, the workbench in a slow-tool tail) keeps one `Windows` per kind of
fault. Two faults of one kind may overlap, a drawn one and a placed one
say; each keeps its own end, so a short fault that starts inside a long one
never ends the long one early. While several are open, the one that began
last sets the parameter (a hanging outage inside a failing one hangs).
"""

from __future__ import annotations

from typing import Any


class Windows:
    """Open spans [start, until) with a parameter each; `at(now)` is the parameter in force, or None."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: list[tuple[float, float, Any]] = []

    def add(self, start: float, until: float, parameter: Any = True) -> None:
        self._open.append((start, until, parameter))

    def at(self, now: float) -> Any:
        """The parameter of the latest-begun window open at `now` (None when none is); closed windows are dropped."""
        if not self._open:
            return None
        self._open = [window for window in self._open if window[1] > now]
        found = None
        for start, _until, parameter in self._open:
            if start <= now:
                found = parameter
        return found
