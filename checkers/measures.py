"""The measures every driver reports beside the verdicts: time to detect, time to recover, duplicate effects, one fold for all.

Observations, not verdicts (those are the rules'). The simulator's metrics
and a chaos run's figures both report them, so they are computed once, here,
under one name each, and a number read off a simulated run means what the
same number read off real processes means:

- `detect_s`: from a fault that struck a worker holding a lease (a crash, a
  kill, a pause past the lease) to that Attempt's accepted `expire`, the
  moment the orchestrator found it Suspect;
- `recover_s`: from that fault to the next accepted claim of another Attempt
  of the task, the moment its work went on;
- `duplicate_effects`: effects that landed beyond the first of one logical
  operation (task, dependency, operation, identity), counted by distinct
  provider id, so a provider that answers a repeated key with the effect it
  already has lands no duplicate. The rule `one_effect_per_operation` judges
  the same thing; this is how many.

What a fault struck is the driver's to say (`struck`): the simulator knows it
as ground truth (the worker reports what it held when it crashed), chaos
reads it off the history (the worker's last claim not yet ended). A strike
may come as it happens or ahead of the events (a run read back afterwards):
only events at or after its instant count for it, in the order they come.
The fold keeps per task only the strikes not yet recovered and the effects
seen so far, and drops both when the task retires, so its memory follows the
live tasks; the durations are kept as arrays of doubles.
"""

from __future__ import annotations

import statistics
from array import array
from dataclasses import dataclass

from shiftchange.core import Event

from .history import Landed, Retired

__all__ = ["Measures", "Strike"]


@dataclass(slots=True)
class Strike:
    """A fault that struck the worker holding `attempt_id` at `at`; its detection and recovery once the history shows them."""

    task_id: str
    attempt_id: str
    at: float
    detect_s: float | None = None
    recover_s: float | None = None


class Measures:
    """The fold: `struck` for each fault that hit a lease holder, then every `event`, `landed` and `retired` entry."""

    def __init__(self) -> None:
        self.strikes = 0
        self.detect_s = array("d")
        self.recover_s = array("d")
        self.duplicate_effects = 0
        self._open: dict[str, list[Strike]] = {}
        """Per task: the strikes whose recovery the history has not shown yet."""
        self._effects: dict[str, dict[tuple[str, str, str], set[str]]] = {}
        """Per task: the provider ids that landed for each logical operation (dependency, operation, identity)."""

    def live(self) -> int:
        """How many tasks the fold still keeps something of (it forgets a task when it retires)."""
        return len(self._open.keys() | self._effects.keys())

    def struck(self, task_id: str, attempt_id: str, at: float) -> Strike:
        """A fault struck the worker holding `attempt_id` of `task_id` at `at`; the returned strike fills in as the history goes on."""
        strike = Strike(task_id, attempt_id, at)
        self.strikes += 1
        self._open.setdefault(task_id, []).append(strike)
        return strike

    def event(self, event: Event) -> None:
        if not event.accepted or event.kind not in ("expire", "claim"):
            return
        strikes = self._open.get(event.task_id)
        if not strikes:
            return
        if event.kind == "expire":
            for strike in strikes:
                if strike.attempt_id == event.attempt_id and strike.detect_s is None and event.at >= strike.at:
                    strike.detect_s = event.at - strike.at
                    self.detect_s.append(strike.detect_s)
            return
        waiting = []
        for strike in strikes:
            if strike.attempt_id == event.attempt_id or event.at < strike.at:
                waiting.append(strike)
                continue
            strike.recover_s = event.at - strike.at
            self.recover_s.append(strike.recover_s)
        if waiting:
            self._open[event.task_id] = waiting
        else:
            del self._open[event.task_id]

    def landed(self, landed: Landed) -> None:
        effects = self._effects.setdefault(landed.task_id, {})
        seen = effects.setdefault((landed.dependency, landed.operation, landed.identity), set())
        if seen and landed.provider_id not in seen:
            self.duplicate_effects += 1
        seen.add(landed.provider_id)

    def retired(self, retired: Retired) -> None:
        task_id = retired.task.task_id
        self._open.pop(task_id, None)
        self._effects.pop(task_id, None)

    def summary(self) -> dict[str, float | int | None]:
        """Each measure under its one name: counts, then mean, median and maximum seconds (None with nothing measured)."""
        return {
            "strikes": self.strikes,
            **_seconds("detect", self.detect_s),
            **_seconds("recover", self.recover_s),
            "duplicate_effects": self.duplicate_effects,
        }


def _seconds(name: str, values: array) -> dict[str, float | int | None]:
    if not values:
        return {f"{name}_count": 0, f"{name}_s_mean": None, f"{name}_s_p50": None, f"{name}_s_max": None}
    return {
        f"{name}_count": len(values),
        f"{name}_s_mean": round(statistics.fmean(values), 3),
        f"{name}_s_p50": round(statistics.median(values), 3),
        f"{name}_s_max": round(max(values), 3),
    }
