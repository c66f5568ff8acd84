"""The recorder: a run's time series, one row per window of simulated time (`SeriesConfig.window_s`).

Counters (arrivals, admissions, sheds, tasks done, retirements by final
state (a task retires a grace period after it comes to rest), provider
calls offered, retried (a key called with before), answered in time (the
provider's goodput), landed, timed out and refused, renewals sent, unanswered and
accepted, expiries true and false, spend and tokens) are added up over each
window from the same feed the metrics read; gauges (queue depth and age,
leases held, and at each provider the calls open (callers waiting), the
calls being worked on and those of them abandoned by their callers, and its
breaker's state) are sampled
as the window closes. Provider latency is the p50 and p99 of the calls
answered within the window. A SimPy process closes each window on time, so
a quiet window is a row of zeros, not a gap, and one event per window is all
the recording costs the simulation itself.

Why rows of plain dicts: they go to a CSV, a pandas DataFrame or a plot as
they are, and their columns are the same in every window of every run of one
config, so a sweep's series line up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import Any

from shiftchange.checkers.history import Landed, Retired
from shiftchange.core import Event
from shiftchange.core.states import TASK_AT_REST

RETIRED_STATES = (*sorted(TASK_AT_REST), "lost")
"""The final states a retired task is counted under; a task still live when the run ended counts as lost."""
_CALL_FATES = ("offered", "retried", "answered", "landed", "timed_out", "refused")


class Recorder:
    """Adds up one window at a time and closes each into a row; `rows` holds every closed window."""

    def __init__(
        self,
        env: Any,
        window_s: float,
        dependencies: tuple[str, ...],
        gauges: Callable[[float], dict[str, Any]],
        leased: frozenset[str],
    ) -> None:
        self.env = env
        self.window_s = window_s
        self.dependencies = dependencies
        self._gauges = gauges
        self._leased_states = leased
        """The Attempt states a lease is held in: those the run's table lets a renewal leave (`Table.leased`)."""
        self.rows: list[dict[str, Any]] = []
        self._leased: set[str] = set()
        self._spent: dict[str, float] = {}
        self._opened_at = 0.0
        self._open()

    def _open(self) -> None:
        counts: dict[str, float] = dict.fromkeys(
            (
                "arrivals",
                "admissions",
                "sheds",
                "tasks_done",
                "renewals_sent",
                "renewals_unanswered",
                "renewals_accepted",
                "renewals_refused",
            ),
            0,
        )
        counts.update(dict.fromkeys(("expiries", "false_expiries", "spend_usd", "tokens"), 0))
        counts.update({f"retired.{state}": 0 for state in RETIRED_STATES})
        counts.update({f"{dependency}.{fate}": 0 for dependency in self.dependencies for fate in _CALL_FATES})
        self._counts = counts
        self._latencies: dict[str, list[float]] = {dependency: [] for dependency in self.dependencies}

    # ----------------------------------------------------------- the feed

    def event(self, event: Event, spend: Callable[[str], tuple[float, int]]) -> None:
        """One committed event; `spend(attempt_id)` reads an Attempt's spend so far, for a grant's charge."""
        if not event.accepted:
            return
        counts, kind = self._counts, event.kind
        if event.attempt_id is None and event.to_state == "done" and event.from_state != "done":
            counts["tasks_done"] += 1
        if kind == "create":
            counts["arrivals"] += 1
        elif kind == "shed":
            counts["sheds"] += 1
        elif kind == "admit":
            counts["admissions"] += 1
        elif kind == "claim":
            self._leased.add(event.attempt_id)
        elif kind == "grant_tool":
            cost_usd, tokens = spend(event.attempt_id)
            before_usd, before_tokens = self._spent.get(event.attempt_id, (0.0, 0))
            counts["spend_usd"] += cost_usd - before_usd
            counts["tokens"] += tokens - before_tokens
            self._spent[event.attempt_id] = (cost_usd, tokens)
        if event.attempt_id in self._leased and event.to_state not in self._leased_states:
            self._leased.discard(event.attempt_id)
            self._spent.pop(event.attempt_id, None)

    def landed(self, landed: Landed) -> None:
        self._counts[f"{landed.dependency}.landed"] += 1

    def retired(self, retired: Retired) -> None:
        state = retired.task.state
        self._counts[f"retired.{state if state in TASK_AT_REST else 'lost'}"] += 1

    def renewal(self, outcome: str) -> None:
        self._counts[f"renewals_{outcome}"] += 1

    def expiry(self, false: bool) -> None:
        self._counts["expiries"] += 1
        self._counts["false_expiries"] += false

    def call_offered(self, dependency: str) -> None:
        self._counts[f"{dependency}.offered"] += 1

    def call_retried(self, dependency: str) -> None:
        self._counts[f"{dependency}.retried"] += 1

    def call_answered(self, dependency: str, latency_s: float) -> None:
        self._counts[f"{dependency}.answered"] += 1
        self._latencies[dependency].append(latency_s)

    def call_timed_out(self, dependency: str) -> None:
        self._counts[f"{dependency}.timed_out"] += 1

    def call_refused(self, dependency: str, domain: str) -> None:
        self._counts[f"{dependency}.refused"] += 1

    # ------------------------------------------------------------ windows

    def run(self) -> Generator[Any, Any, None]:
        """The recorder's process: close a window every `window_s`."""
        while True:
            yield self.env.timeout(self._opened_at + self.window_s - self.env.now)
            self.close()

    def close(self) -> None:
        """Close the open window at the current instant (the last one may be shorter) and open the next."""
        now = self.env.now
        if now <= self._opened_at and self.rows:
            return
        row: dict[str, Any] = {"t_s": round(self._opened_at, 6), "window_s": round(now - self._opened_at, 6)}
        row.update((name, round(value, 6) if isinstance(value, float) else value) for name, value in self._counts.items())
        for dependency, latencies in self._latencies.items():
            row[f"{dependency}.latency_s_p50"] = _percentile(latencies, 0.50)
            row[f"{dependency}.latency_s_p99"] = _percentile(latencies, 0.99)
        row["leases_held"] = len(self._leased)
        row.update(self._gauges(now))
        self.rows.append(row)
        self._opened_at = now
        self._open()


def _percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile; None for a window with no answered call (no latency to report, not zero)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)], 6)
