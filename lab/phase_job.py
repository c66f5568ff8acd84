"""One job of a phase map: what it plays (`PhaseJob`: a cell's control and triggered runs for one seed) and how its two
arms are judged (`Judging`, `judge`): recovers, metastable or overloaded, with the figures and evidence that say why.
The named retry disciplines a map compares are here too. `lab.phase` plans the jobs, plays them and draws the map; it
imports these back."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.recovery import evidence, rate, recovered_after_s
from shiftchange.core import InputError
from shiftchange.core.config import require_positive, require_whole
from shiftchange.core.table import Table
from shiftchange.sim.config import FaultSpec, SimConfig, require_at_least_one
from shiftchange.sim.world import Outcome, play

from .report import replay_command

RECOVERS, METASTABLE, OVERLOADED, UNJUDGED = "recovers", "metastable", "overloaded", "unjudged"
CELL_STATUSES = (RECOVERS, METASTABLE, OVERLOADED, UNJUDGED)
TRIGGER_PREFIX = "trigger."
TRIGGER_FIELDS = {"at_s": float, "for_s": float, "factor": float, "probability": float, "mode": str}
"""The trigger's fields an axis may set, with their types."""
JOBS_MAX = 20_000
"""A map plays at most this many jobs (cells times seeds; each job plays two runs)."""
SIDE_SUSTAINING = "goodput_recovers"
"""The simulator's own one-run recovery verdict; a map judges recovery itself, from two arms, so this one is only shown."""

NO_DISCIPLINE = {
    "reliability.backoff.strategy": "none",
    "reliability.breaker": None,
    "reliability.retry_budget": None,
    "reliability.concurrency": None,
}
DISCIPLINES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "none": NO_DISCIPLINE,
    "backoff": {"reliability.breaker": None, "reliability.retry_budget": None, "reliability.concurrency": None},
    "backoff+breaker": {"reliability.retry_budget": None, "reliability.concurrency": None},
    "synchronised-breaker": {
        "reliability.concurrency": None,
        "reliability.breaker.ramp_s": 0.0,
        "agent.held_back_jitter": False,
    },
    "no-concurrency-limit": {"reliability.concurrency": None},
}
"""Named retry disciplines, each the settings it changes from the core's defaults.

`none` is the retry-storm anti-pattern's (no backoff, breaker, retry budget or concurrency limit); `backoff` adds backoff
with jitter; `backoff+breaker` the circuit breaker (with its ramp); `synchronised-breaker` is the breaker and retry budget
without the concurrency limit, the ramp or the spread release (held-back calls return together; they still wait inside
their Attempt rather than failing it, as every discipline's do now); `no-concurrency-limit` is the defaults without the
limit."""


@dataclass(frozen=True, slots=True)
class Judging:
    """How a map judges its runs (the simulator's `RecoveryConfig` fields, plus the span a recovery must hold)."""

    baseline_s: float = 300.0
    """The control's goodput over this long before the trigger starts is the level to recover to."""
    bound_s: float = 480.0
    """The late span starts this long after the trigger ends."""
    goodput_fraction: float = 0.8
    """The share of the reference goodput that counts as holding up (control) or recovered (triggered)."""
    settle_windows: int = 3
    """A recovery time ends with this many series windows in a row at the level."""
    late_windows_min: int = 3
    """A run whose late span holds fewer whole windows than this cannot be judged (make `arrivals_s` longer)."""

    def __post_init__(self) -> None:
        require_positive(self, ("baseline_s", "bound_s", "goodput_fraction"))
        if self.goodput_fraction > 1:
            raise InputError(f"Judging.goodput_fraction is a share, at most 1, not {self.goodput_fraction!r}")
        require_whole(self, ("settle_windows", "late_windows_min"))
        require_at_least_one(self, ("settle_windows", "late_windows_min"))

    @classmethod
    def of(cls, config: SimConfig) -> Judging:
        """The scenario's own recovery settings where it has them (retry-storm does), else the defaults."""
        if config.recovery is None:
            return cls()
        recovery = config.recovery
        return cls(recovery.baseline_s, recovery.bound_s, recovery.goodput_fraction)


@dataclass(frozen=True)
class PhaseJob:
    """One cell and seed of a map: the two configs it plays and what identifies it."""

    index: int
    discipline: str
    template: FaultSpec
    """The trigger as given: the map's panels are one per template."""
    trigger: FaultSpec
    """The trigger this cell plays: the template with the cell's trigger axes applied."""
    cell: tuple[tuple[str, Any], ...]
    """Each axis with its value (typed), in axis order."""
    seed: int
    scenario: str
    control: SimConfig
    triggered: SimConfig
    judging: Judging
    table: Table | None = None
    """The spec both arms play (None: the packaged one); it travels to the worker as its spec."""


# ------------------------------------------------------------------ one job


def play_phase_job(job: PhaseJob) -> dict[str, Any]:
    """Play a job's control and triggered runs and judge them; its row (module level, so pools and Dask can call it)."""
    control = play(job.control, job.seed, job.scenario, table=job.table)
    triggered = play(job.triggered, job.seed, job.scenario, table=job.table)
    row: dict[str, Any] = {"discipline": job.discipline, "trigger": str(job.template), "seed": job.seed}
    row.update(job.cell)
    row["trigger_played"] = str(job.trigger)
    row.update(judge(control, triggered, job.trigger, job.judging))
    row.update(_arm("control", control, job.table))
    row.update(_arm("triggered", triggered, job.table))
    return row


def _arm(name: str, outcome: Outcome, table: Table | None = None) -> dict[str, Any]:
    states = outcome.metrics.get("final_states", {})
    broken = sorted(verdict for verdict, found in outcome.verdicts.items() if verdict != SIDE_SUSTAINING and not found.ok)
    return {
        f"{name}.tasks": outcome.tasks,
        f"{name}.done": states.get("done", 0),
        f"{name}.escalated": states.get("escalated", 0),
        f"{name}.quarantined": states.get("quarantined", 0),
        f"{name}.spend_usd": round(outcome.metrics.get("spend_usd", 0.0), 6),
        f"{name}.false_expiries": outcome.metrics.get("false_expiries", 0),
        f"{name}.invariants_ok": not broken,
        f"{name}.invariants_broken": ",".join(broken),
        f"{name}.digest": outcome.digest,
        f"{name}.replay": replay_command(outcome, table=table),
    }


def judge(control: Outcome, triggered: Outcome, trigger: FaultSpec, judging: Judging) -> dict[str, Any]:
    """One seed's verdict on a cell, with its figures and evidence."""
    dependency = trigger.target
    answered = f"{dependency}.answered"
    start_s, end_s = trigger.at_s, trigger.until_s
    late_from_s = end_s + judging.bound_s
    arrivals_end_s = max((row["t_s"] + row["window_s"] for row in control.series if row["arrivals"] > 0), default=0.0)
    before = [row for row in control.series if row["t_s"] >= start_s - judging.baseline_s and row["t_s"] + row["window_s"] <= start_s]
    control_late = _late(control.series, late_from_s, arrivals_end_s)
    triggered_late = _late(triggered.series, late_from_s, arrivals_end_s)
    baseline = rate(before, answered)
    control_level = rate(control_late, answered)
    triggered_level = rate(triggered_late, answered)
    peak = peak_goodput_per_s(getattr(control.config, dependency, None))
    figures: dict[str, Any] = {
        "status": UNJUDGED,
        "why": "",
        "baseline_per_s": _round(baseline),
        "baseline_share_of_peak": None if baseline is None or peak is None else round(baseline / peak, 6),
        "control_late_per_s": _round(control_level),
        "triggered_late_per_s": _round(triggered_level),
        "late_ratio": None,
        "recovery_s": None,
    }
    if len(control_late) < judging.late_windows_min or len(triggered_late) < judging.late_windows_min:
        figures["why"] = f"fewer than {judging.late_windows_min} windows between the bound and the last arrival: make arrivals_s longer"
    elif baseline is None or baseline <= 0:
        figures["why"] = "no goodput before the trigger"
    elif control_level is None or control_level / _demand(control, control_late) < judging.goodput_fraction * baseline / _demand(
        control, before
    ):
        figures.update(
            status=OVERLOADED, why=f"without the trigger goodput fell from {baseline:.3g}/s to {control_level or 0:.3g}/s, for its demand"
        )
    else:
        ratio = (triggered_level or 0.0) / control_level
        figures["late_ratio"] = round(ratio, 6)
        level_per_s = judging.goodput_fraction * control_level
        figures["recovery_s"] = recovered_after_s(triggered.series, answered, end_s, level_per_s, judging.settle_windows)
        if ratio >= judging.goodput_fraction:
            figures["status"] = RECOVERS
        else:
            figures.update(status=METASTABLE, why=f"late goodput {ratio:.0%} of the control's, which held up without the trigger")
    figures.update(evidence(triggered.series, dependency, end_s, arrivals_end_s))
    return figures


def peak_goodput_per_s(provider: Any) -> float | None:
    """The most calls per second the simulated provider answers, at its best load (`sim/provider.py`'s processor sharing).

    With n calls in progress, x = n / overload_in_flight, each progresses at 1 / (1 + x + c x^2) seconds of work per
    second, so it answers n / ((1 + x + c x^2) latency_s) per second: with contention c > 0 that peaks at x = 1/sqrt(c),
    at overload_in_flight / ((2 sqrt(c) + 1) latency_s); with c = 0 it rises toward overload_in_flight / latency_s.
    None for a config that is not a simulated provider's.
    """
    try:
        overload, latency_s, contention = provider.overload_in_flight, provider.latency_s, provider.contention
    except AttributeError:
        return None
    return overload / ((2 * math.sqrt(contention) + 1) * latency_s) if contention > 0 else overload / latency_s


def _demand(outcome: Any, rows: Sequence[dict[str, Any]]) -> float:
    """The configured arrival rate over these windows (their mean, windows weighted by length)."""
    workload = outcome.config.workload
    span_s = sum(row["window_s"] for row in rows)
    return sum(workload.rate_per_s(row["t_s"] + row["window_s"] / 2) * row["window_s"] for row in rows) / span_s


def _late(series: Sequence[dict[str, Any]], from_s: float, to_s: float) -> list[dict[str, Any]]:
    return [row for row in series if row["t_s"] >= from_s and row["t_s"] + row["window_s"] <= to_s]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
