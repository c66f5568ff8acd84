"""`tune_calls`: the call-protection settings (breaker, concurrency limit, retry budget, backoff) for a world and an objective.

The question a user brings: "my provider behaves like this; which breaker
cool-down, concurrency limit and retry budget bring it back from an outage
within N seconds, at the least spend?" The answer is found the only honest
way a simulator can give it: every candidate setting is played as a
discipline of a recoverability map (`lab/phase.py`) over the triggers and
durations asked about, each cell a control and a triggered run per seed, and
judged there.

A candidate *meets* the objective when, in every cell whose control holds up,
the triggered run recovers, its slowest recovery (over seeds) is within
`recovery_max_s`, and every invariant held in both arms. Among those that
meet it the answer is the one with the fastest worst recovery, then the
least spend per triggered run, then the fewest tasks escalated; a candidate
that does not meet it is shown with why. The candidates are a grid over named
settings (`CANDIDATE_GRID`, or any grid given), the core's defaults among
them, so the answer is never worse than doing nothing new.

It is a search over a handful of candidates, not an optimiser: a setting
between two grid values is not tried, and the answer holds for the worlds
played, which the result names, with each cell's replay commands.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shiftchange.core import InputError
from shiftchange.core.table import Table

from .phase import OVERLOADED, RECOVERS, PhaseMap, phase
from .report import spec_words
from .settings import format_value
from .sweep import resolve_table

__all__ = ["CANDIDATE_GRID", "CallTuning", "Candidate", "tune_calls"]

CANDIDATE_GRID: dict[str, tuple[Any, ...]] = {
    "reliability.breaker.cool_down_s": (10.0, 30.0, 60.0),
    "reliability.concurrency.decrease_factor": (0.5, 0.9),
}
"""What is tried by default: how long an open circuit waits, and how hard a failure cuts the concurrency limit."""
TRIGGERS_DEFAULT = ("outage model_provider at=400 for=60 mode=hang", "slowdown model_provider at=400 for=60 factor=4")
DURATIONS_DEFAULT_S = (15.0, 60.0, 120.0)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate's settings and how it did across the cells."""

    name: str
    settings: tuple[tuple[str, Any], ...]
    cells: int
    cells_stable: int
    """Cells whose control held up: the ones the objective judges."""
    cells_recovered: int
    recovery_s_max: float | None
    """The slowest recovery over every recovered cell and seed (None if none recovered)."""
    spend_usd_mean: float
    """Mean spend of a triggered run."""
    escalated_mean: float
    """Mean tasks escalated in a triggered run."""
    false_expiries: int
    """False lease expiries over every run of the candidate."""
    invariants_ok: bool
    meets: bool
    why: str
    """Why it does not meet the objective (empty when it does)."""


@dataclass(frozen=True)
class CallTuning:
    """The answer, the candidates behind it, and the map they were played on."""

    answer: Candidate | None
    """The chosen candidate, or None when none met the objective."""
    candidates: tuple[Candidate, ...]
    recovery_max_s: float
    map: PhaseMap
    command: str
    """The `shiftchange sim phase` command that plays the answer's map again."""
    replays: tuple[str, ...]
    """The answer's slowest cell, control and triggered run: their `sim run` commands."""


def _grid(grid: Mapping[str, Iterable[Any]] | None) -> dict[str, tuple[Any, ...]]:
    chosen = dict(CANDIDATE_GRID if grid is None else grid)
    if not chosen:
        raise InputError("the candidate grid needs at least one setting")
    out = {}
    for path, values in chosen.items():
        listed = None if isinstance(values, str | bytes) or not isinstance(values, Iterable) else tuple(values)
        if not listed:
            raise InputError(f"the candidate grid's {path} needs one or more values, not {values!r}")
        out[path] = listed
    return out


def _name(settings: tuple[tuple[str, Any], ...]) -> str:
    return ",".join(f"{path.rsplit('.', 1)[-1]}={format_value(value)}" for path, value in settings)


def tune_calls(
    scenario: str = "retry-storm",
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    triggers: Iterable[str] = TRIGGERS_DEFAULT,
    durations_s: Iterable[float] = DURATIONS_DEFAULT_S,
    recovery_max_s: float = 480.0,
    grid: Mapping[str, Iterable[Any]] | None = None,
    seeds: Iterable[int] = (0, 1),
    arrivals_s: float = 2400.0,
    jobs: int | None = None,
    executor: str = "processes",
    scheduler: str | None = None,
    progress: bool = False,
    spec: str | Table | None = None,
) -> CallTuning:
    """Play every candidate of `grid` over `triggers` x `durations_s` in the world (`scenario` plus `overrides`) and choose.

    `spec` is the transition table every run plays (a spec folder, a git revision or a `Table`; default: the packaged
    spec). Bad input raises `InputError` before anything runs (the map checks every config first).
    """
    if isinstance(recovery_max_s, bool) or not isinstance(recovery_max_s, int | float) or not 0 < recovery_max_s < float("inf"):
        raise InputError(f"recovery_max_s must be a positive finite number of seconds, not {recovery_max_s!r}")
    candidates_grid = _grid(grid)
    fixed = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)
    settings = [tuple(zip(candidates_grid, point, strict=True)) for point in itertools.product(*candidates_grid.values())]
    disciplines = {_name(point): dict(point) for point in settings}
    if len(disciplines) != len(settings):
        raise InputError("the candidate grid names the same candidate twice (a value given twice): give each value once")
    triggers = list(triggers)
    durations = list(durations_s)
    table = resolve_table(spec)
    played = phase(
        {"trigger.for_s": durations},
        triggers,
        disciplines,
        seeds,
        scenario,
        arrivals_s=arrivals_s,
        overrides=fixed,
        jobs=jobs,
        executor=executor,
        scheduler=scheduler,
        progress=progress,
        spec=table,
    )
    judged = tuple(_judge(name, point, played, recovery_max_s) for name, point in zip(disciplines, settings, strict=True))
    meeting = [candidate for candidate in judged if candidate.meets]
    # a candidate whose recoveries were judged from the late span but never settled for three windows in a row has no
    # measured recovery time: it ranks after every candidate that has one
    answer = min(meeting, key=lambda c: (_slowest(c), c.spend_usd_mean, c.escalated_mean)) if meeting else None
    command = _command(scenario, fixed, triggers, durations, seeds, arrivals_s, answer, table)
    return CallTuning(answer, judged, float(recovery_max_s), played, command, _replays(played, answer))


def _slowest(candidate: Candidate) -> float:
    return float("inf") if candidate.recovery_s_max is None else candidate.recovery_s_max


def _judge(name: str, point: tuple[tuple[str, Any], ...], played: PhaseMap, recovery_max_s: float) -> Candidate:
    cells = [cell for cell in played.cells if cell["discipline"] == name]
    rows = [row for row in played.rows if row["discipline"] == name]
    stable = [cell for cell in cells if cell["status"] != OVERLOADED]
    recovered = [cell for cell in stable if cell["status"] == RECOVERS]
    times = [cell["recovery_s_max"] for cell in recovered if cell["recovery_s_max"] is not None]
    slowest = max(times) if times else None
    invariants_ok = all(cell["invariants_ok"] for cell in cells)
    why = []
    if len(recovered) < len(stable):
        why.append(f"{len(stable) - len(recovered)} of {len(stable)} cells do not recover")
    if slowest is not None and slowest > recovery_max_s:
        why.append(f"slowest recovery {slowest:g} s > {recovery_max_s:g} s")
    if not stable:
        why.append("every cell's control fell: the world is overloaded without a trigger")
    if not invariants_ok:
        why.append("an invariant was violated")
    return Candidate(
        name,
        point,
        len(cells),
        len(stable),
        len(recovered),
        slowest,
        round(sum(row["triggered.spend_usd"] for row in rows) / len(rows), 6),
        round(sum(row["triggered.escalated"] for row in rows) / len(rows), 6),
        sum(row["triggered.false_expiries"] + row["control.false_expiries"] for row in rows),
        invariants_ok,
        not why,
        "; ".join(why),
    )


def _command(
    scenario: str,
    fixed: list,
    triggers: list[str],
    durations: list[float],
    seeds: Iterable[int],
    arrivals_s: float,
    answer: Candidate | None,
    table: Table | None = None,
) -> str:
    words = ["shiftchange", "sim", "phase", "--scenario", scenario, "--axis", "trigger.for_s=" + ",".join(f"{d:g}" for d in durations)]
    words += spec_words(table)
    words += ["--seeds", ",".join(str(seed) for seed in seeds), "--arrivals-s", f"{arrivals_s:g}"]
    words += [word for trigger in triggers for word in ("--trigger", trigger)]
    for path, value in [*fixed, *(answer.settings if answer else ())]:
        words += ["--set", f"{path}={format_value(value)}"]
    return shlex.join(words)


def _replays(played: PhaseMap, answer: Candidate | None) -> tuple[str, ...]:
    if answer is None:
        return ()
    rows = [row for row in played.rows if row["discipline"] == answer.name and row["recovery_s"] is not None]
    if not rows:
        return ()
    slowest = max(rows, key=lambda row: row["recovery_s"])
    return slowest["control.replay"], slowest["triggered.replay"]
