"""Recoverability maps: over two settings, where a world recovers from a trigger, where it goes metastable, where it is overloaded.

A metastable failure is a pair of runs, not one: the world without the
trigger holds up, and the same world with it does not come back. So every
point of a map (a cell: one value of each axis, one trigger, one discipline)
is played for each seed twice, as a *control* with no placed fault and as the
*triggered* run with the trigger placed, the same seed, the same config
otherwise. Both arms are played by one job, in one process, and judged there
from their time series; the job hands back one row.

The judgement, for the dependency the trigger strikes, from its goodput
(calls answered by their deadline, per second):

- the *baseline* is the control's goodput over `baseline_s` before the
  trigger's start; the *late span* runs from `bound_s` after the trigger's
  end to the last arrival (work still arriving is what a metastable world
  fails to serve);
- the control is *stable* when its late goodput per unit of demand (the
  configured arrival rate, so a step down in demand is not a collapse) is at
  least `goodput_fraction` of its baseline's; a cell whose control is not
  stable is **overloaded**: it fails without any trigger, and says nothing
  about recovery;
- the triggered run **recovers** when its late goodput is at least
  `goodput_fraction` of the control's over the same span; its recovery time
  is from the trigger's end to the end of the first `settle_windows` windows
  in a row whose mean reaches that level;
- otherwise it is **metastable**: the trigger is gone, the same world
  without it serves the load, and this one does not.

Judging against the control's own late goodput, not the baseline, keeps a
world whose demand changes over the run (a drain, a burst) from reading as
metastable; judging a span of windows, not one, keeps one lucky minute of a
limit cycle from reading as recovery. A cycle whose swings average above the
level over the whole late span still reads as recovered (both the status
and the settle time are means): a map says whether goodput came back on
average, and the rows' series-level evidence, or `sim run --plot` of the
replay, shows whether it came back steady.

A cell's status over its seeds: overloaded when more than half of its
controls are not stable; otherwise recovers when every seed with a stable
control recovered, and metastable when any did not. Each row carries the
evidence (retries' share of the calls offered, the share of the provider's
work in progress that was abandoned, timeouts' share, the backlog, tasks
escalated or dead-lettered in each arm), whether every invariant held in both
arms, both digests and both replay commands.

Axes are dotted setting paths (`workload.arrival_rate_per_s`), or the
trigger's own fields as `trigger.for_s`, `trigger.at_s`, `trigger.factor`,
`trigger.mode` or `trigger.probability`; several triggers (`triggers`) are a
third axis. Each arrival rate gets as many tasks as arrive in `arrivals_s`
(unless `tasks` is given; a step in the rate, `workload.arrival_rate_later_per_s`,
counted), so every cell has the same span to judge.

Rows, like a sweep's, are a function of their job alone and come back in job
order: the same map on one process, a pool or a Dask cluster is the same
table. Jobs go through the lab's executors (`lab/executor.py`). A map of a spec other than the
packaged one (`spec`, `--spec`) carries the compiled `Table` in every job, as
a sweep's runs do (`lab/sweep.py` says why), and both arms' replays name it.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shiftchange.core import InputError
from shiftchange.core.table import Table
from shiftchange.sim.config import FaultSpec, SimConfig
from shiftchange.sim.scenarios import scenario_config

from .phase_job import (
    CELL_STATUSES,
    DISCIPLINES,
    JOBS_MAX,
    METASTABLE,
    NO_DISCIPLINE,
    OVERLOADED,
    RECOVERS,
    SIDE_SUSTAINING,
    TRIGGER_FIELDS,
    TRIGGER_PREFIX,
    UNJUDGED,
    Judging,
    PhaseJob,
    judge,
    peak_goodput_per_s,
    play_phase_job,
)
from .settings import PLACED_PATH, apply, format_value
from .settings import get as setting_at
from .summary import counted
from .sweep import check_seeds, resolve_table

__all__ = [
    "CELL_STATUSES",
    "DISCIPLINES",
    "FAMILY_TRIGGERS",
    "JOBS_MAX",
    "METASTABLE",
    "NO_DISCIPLINE",
    "OVERLOADED",
    "RECOVERS",
    "SIDE_SUSTAINING",
    "TRIGGER_FIELDS",
    "TRIGGER_PREFIX",
    "UNJUDGED",
    "Family",
    "Judging",
    "PhaseJob",
    "PhaseMap",
    "cells_of",
    "judge",
    "panel_trigger",
    "peak_goodput_per_s",
    "phase",
    "play_phase_job",
]

# ------------------------------------------------------------------ planning


def _parse_axis(path: str, values: Iterable[Any]) -> list[Any]:
    if not isinstance(path, str) or not path:
        raise InputError(f"an axis is a dotted setting path or trigger.FIELD, not {path!r}")
    listed = None if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable) else list(values)
    if not listed:
        raise InputError(f"the axis {path} needs a list of one or more values, not {values!r}")
    if len(set(map(str, listed))) != len(listed):
        raise InputError(f"the axis {path} names a value twice: give each value once")
    if path.startswith(TRIGGER_PREFIX):
        name = path[len(TRIGGER_PREFIX) :]
        kind = TRIGGER_FIELDS.get(name)
        if kind is None:
            raise InputError(f"a trigger axis is one of {', '.join(TRIGGER_PREFIX + n for n in TRIGGER_FIELDS)}, not {path!r}")
        try:
            return [kind(value) for value in listed]
        except (TypeError, ValueError):
            raise InputError(f"the axis {path} takes {kind.__name__} values, not {listed!r}") from None
    return listed


def _trigger(text: str | FaultSpec) -> FaultSpec:
    spec = text if isinstance(text, FaultSpec) else FaultSpec.parse(text)
    if spec.kind not in ("outage", "slowdown", "capacity_drop", "lost_responses", "revoked_credentials"):
        raise InputError(f"a map's trigger strikes a provider (outage, slowdown, capacity_drop, lost_responses, ...), not {spec.kind}")
    return spec


def panel_trigger(trigger: str, axes: Sequence[str]) -> str:
    """A panel's trigger as its title shows it: the `--trigger` text without the parameters an axis sweeps, each named
    instead by where it varies ("for= per column"), since every column (or row) of the panel plays its own value.

    The template's own value of a swept parameter is played by no cell, so a title that showed it would give every
    column one trigger duration. The first axis runs across (columns), the second up (rows).
    """
    spec = FaultSpec.parse(trigger)
    takes = {"at_s", "for_s", *spec.parameters()}
    swept: dict[str, str] = {}
    for axis, place in zip(axes, ("column", "row"), strict=False):
        name = axis.removeprefix(TRIGGER_PREFIX)
        if axis.startswith(TRIGGER_PREFIX) and name in takes:
            swept[_TRIGGER_WORDS.get(name, name)] = place
    kept = [word for word in trigger.split() if word.partition("=")[0] not in swept]
    return "; ".join([" ".join(kept), *(f"{word}= per {place}" for word, place in swept.items())])


_TRIGGER_WORDS = {"at_s": "at", "for_s": "for"}
"""A trigger field's word in the trigger's text, where it is not the field's name."""


def _set_trigger(spec: FaultSpec, name: str, value: Any) -> FaultSpec:
    if name not in spec.parameters() and name not in ("at_s", "for_s"):
        return spec  # a factor axis leaves an outage alone, a mode axis a slowdown: each trigger takes what it has
    return replace(spec, **{name: value})


def build_jobs(
    axes: Mapping[str, Iterable[Any]],
    triggers: Iterable[str | FaultSpec],
    disciplines: Mapping[str, Mapping[str, Any]] | Iterable[str],
    seeds: Iterable[int],
    scenario: str,
    tasks: int | None,
    arrivals_s: float,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]],
    judging: Judging | None,
    table: Table | None = None,
) -> list[PhaseJob]:
    """Every job of the map, in job order (discipline, trigger, cell, seed), each config built and checked; nothing runs."""
    parsed = {path: _parse_axis(path, values) for path, values in dict(axes).items()}
    if not parsed:
        raise InputError("a map needs at least one axis")
    placed = [_trigger(text) for text in triggers]
    if not placed:
        raise InputError("a map needs a trigger: a placed provider fault such as 'outage model_provider at=400 for=20 mode=hang'")
    chosen = _disciplines(disciplines)
    seeds = check_seeds(seeds)
    if isinstance(arrivals_s, bool) or not isinstance(arrivals_s, int | float) or not 0 < arrivals_s < math.inf:
        raise InputError(f"arrivals_s must be a positive finite number of seconds, not {arrivals_s!r}")
    size = len(chosen) * len(placed) * len(seeds) * math.prod(len(values) for values in parsed.values())
    if size > JOBS_MAX:
        raise InputError(f"the map has {size:,} jobs (cells times seeds), more than the {JOBS_MAX:,} one map may play")
    fixed = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)
    jobs: list[PhaseJob] = []
    for name, discipline in chosen.items():
        for template in placed:
            for point in itertools.product(*parsed.values()):
                cell = tuple(zip(parsed, point, strict=True))
                for seed in seeds:
                    control, trigger = _configs(scenario, seed, tasks, arrivals_s, fixed, discipline, cell, template)
                    judged = judging or Judging.of(control)
                    typed = tuple((path, value if path.startswith(TRIGGER_PREFIX) else setting_at(control, path)) for path, value in cell)
                    triggered = replace_placed(control, trigger)
                    job = PhaseJob(len(jobs), name, template, trigger, typed, seed, scenario, control, triggered, judged, table)
                    jobs.append(job)
    return jobs


def replace_placed(config: SimConfig, trigger: FaultSpec) -> SimConfig:
    """The config with the trigger as its only placed fault."""
    return apply(config, {PLACED_PATH: (trigger,)})


def _configs(
    scenario: str,
    seed: int,
    tasks: int | None,
    arrivals_s: float,
    fixed: list,
    discipline: Mapping[str, Any],
    cell: tuple[tuple[str, Any], ...],
    template: FaultSpec,
) -> tuple[SimConfig, FaultSpec]:
    """The control's config (no placed fault) and the cell's trigger."""
    trigger = template
    settings = []
    for path, value in cell:
        if path.startswith(TRIGGER_PREFIX):
            trigger = _set_trigger(trigger, path[len(TRIGGER_PREFIX) :], value)
        else:
            settings.append((path, value))
    where = ", ".join(f"{path}={format_value(value)}" for path, value in cell)
    try:
        config = apply(scenario_config(scenario, seed), [*discipline.items(), *fixed, *settings, (PLACED_PATH, ())])
        count = tasks if tasks is not None else config.workload.tasks_in(arrivals_s)
        return config.with_tasks(count), trigger
    except InputError as error:
        raise InputError(f"cell {where}: {error}") from None


def _disciplines(disciplines: Mapping[str, Mapping[str, Any]] | Iterable[str]) -> dict[str, dict[str, Any]]:
    if isinstance(disciplines, Mapping):
        chosen = {str(name): dict(settings) for name, settings in disciplines.items()}
    else:
        names = [disciplines] if isinstance(disciplines, str) else list(disciplines)
        unknown = [name for name in names if name not in DISCIPLINES]
        if unknown:
            raise InputError(f"unknown discipline {unknown[0]!r}; use any of {', '.join(DISCIPLINES)}")
        chosen = {name: dict(DISCIPLINES[name]) for name in names}
    if not chosen:
        raise InputError("a map needs at least one discipline")
    return chosen


# ------------------------------------------------------------------ the family the defaults are held to


FAMILY_TRIGGERS = (
    "outage model_provider at=400 for=60 mode=hang",
    "outage model_provider at=400 for=60 mode=fail",
    "slowdown model_provider at=400 for=60 factor=4",
    "capacity_drop model_provider at=400 for=60 factor=0.25",
)
"""Each kind of trigger a provider can pull: calls that hang to their deadline, calls refused at once (503), every call
four times the work, and a quarter of the capacity; `trigger.for_s` sets how long."""


@dataclass(frozen=True)
class Family:
    """A stated family of worlds, as a map's axes: where the core's defaults are claimed to recover from every trigger.

    The world is the retry-storm scenario's: open-loop arrivals of tasks that call a model provider whose goodput peaks
    at 12 calls in progress (1 call/s) and falls beyond. Across it: offered load (the arrival rate; at 0.11 tasks/s the
    provider answers about half its peak before the trigger), each kind of trigger for 15 s to 2 min, call deadlines
    from short (12 s, three times the mean call) to long (60 s), and a provider that does or does not keep working for
    callers that gave up. The claim is judged with the scenario's bound: recovered 480 s after the trigger ends, and
    holding through the end of the arrivals (`Judging`).
    """

    arrival_rates_per_s: tuple[float, ...] = (0.05, 0.08, 0.11)
    trigger_durations_s: tuple[float, ...] = (15.0, 60.0, 120.0)
    call_deadlines_s: tuple[float, ...] = (12.0, 30.0, 60.0)
    works_past_deadline: tuple[bool, ...] = (True, False)
    triggers: tuple[str, ...] = FAMILY_TRIGGERS
    seeds: tuple[int, ...] = (0, 1)
    scenario: str = "retry-storm"

    def axes(self) -> dict[str, tuple[Any, ...]]:
        return {
            "workload.arrival_rate_per_s": self.arrival_rates_per_s,
            "trigger.for_s": self.trigger_durations_s,
            "agent.call_deadline_s": self.call_deadlines_s,
            "model_provider.works_past_deadline": self.works_past_deadline,
        }

    def map(self, disciplines: Iterable[str] = ("defaults",), **options: Any) -> PhaseMap:
        """Play the family (`phase` with its axes, triggers, seeds and scenario; `options` are phase's jobs, executor, ...)."""
        return phase(self.axes(), self.triggers, disciplines, self.seeds, self.scenario, **options)


# ------------------------------------------------------------------ the map


def cells_of(rows: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> list[dict[str, Any]]:
    """One row per cell (discipline, trigger, axis values), in first-seen order: its status over the seeds and the figures behind it."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (row["discipline"], row["trigger"], *(format_value(row[path]) for path in axes))
        groups.setdefault(key, []).append(row)
    cells = []
    for members in groups.values():
        first = members[0]
        statuses = [member["status"] for member in members]
        stable = [member for member in members if member["status"] in (RECOVERS, METASTABLE)]
        recovered = [member for member in stable if member["status"] == RECOVERS]
        if statuses.count(UNJUDGED) * 2 > len(members):
            status = UNJUDGED
        elif statuses.count(OVERLOADED) * 2 > len(members):
            status = OVERLOADED
        elif len(recovered) == len(stable):
            status = RECOVERS if stable else UNJUDGED
        else:
            status = METASTABLE
        times = [member["recovery_s"] for member in recovered if member["recovery_s"] is not None]
        ratios = [member["late_ratio"] for member in stable if member["late_ratio"] is not None]
        cells.append(
            {
                "discipline": first["discipline"],
                "trigger": first["trigger"],
                **{path: first[path] for path in axes},
                "status": status,
                "seeds": len(members),
                "recovered": len(recovered),
                "metastable": statuses.count(METASTABLE),
                "overloaded": statuses.count(OVERLOADED),
                "unjudged": statuses.count(UNJUDGED),
                "recovery_s_max": max(times) if times else None,
                "late_ratio_min": min(ratios) if ratios else None,
                "retry_share_mean": _mean(member["retry_share"] for member in members),
                "abandoned_share_mean": _mean(member["abandoned_share"] for member in members),
                "escalated_triggered_mean": _mean(member["triggered.escalated"] for member in members),
                "escalated_control_mean": _mean(member["control.escalated"] for member in members),
                "invariants_ok": all(member["control.invariants_ok"] and member["triggered.invariants_ok"] for member in members),
            }
        )
    return cells


def _mean(values: Iterable[Any]) -> float | None:
    present = [value for value in values if value is not None]
    return round(sum(present) / len(present), 6) if present else None


@dataclass
class PhaseMap:
    """A played map: its rows (one per cell and seed, job order), its cells, and the axes they are laid out on."""

    axes: tuple[str, ...]
    rows: list[dict[str, Any]]
    cells: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.cells:
            self.cells = cells_of(self.rows, self.axes)

    def status(self, discipline: str | None = None, trigger: str | None = None) -> dict[tuple[Any, ...], str]:
        """Each cell's status by its axis values, for one discipline and trigger (the first of each when not given)."""
        discipline = discipline or self.cells[0]["discipline"]
        trigger = trigger or self.cells[0]["trigger"]
        return {
            tuple(cell[path] for path in self.axes): cell["status"]
            for cell in self.cells
            if cell["discipline"] == discipline and cell["trigger"] == trigger
        }

    def all_invariants_held(self) -> bool:
        return all(cell["invariants_ok"] for cell in self.cells)

    def plot(self, path: str | os.PathLike[str]) -> None:
        """A heatmap per discipline and trigger (`lab/report/plot.py`), the boundary between statuses drawn."""
        from .report.plot import plot_phase  # matplotlib only when a plot is asked for

        plot_phase(self, path)

    def figure(self, discipline: str | None = None) -> Any:
        """The same heatmaps as a matplotlib Figure (for a notebook's `display`), for one discipline or all."""
        from .report.plot import draw_phase

        return draw_phase(self, discipline)

    def where(self, fixed: Mapping[str, Any]) -> PhaseMap:
        """The cells and rows where each named axis has the given value, those axes dropped: a family drawn two axes at a time."""
        unknown = [path for path in fixed if path not in self.axes]
        if unknown:
            raise InputError(f"the map has no axis {unknown[0]!r}; its axes are {', '.join(self.axes)}")
        keep = tuple(path for path in self.axes if path not in fixed)

        def matches(item: Mapping[str, Any]) -> bool:
            return all(item[path] == value for path, value in fixed.items())

        return PhaseMap(keep, [row for row in self.rows if matches(row)], [cell for cell in self.cells if matches(cell)])


def phase(
    axes: Mapping[str, Iterable[Any]],
    triggers: Iterable[str | FaultSpec],
    disciplines: Mapping[str, Mapping[str, Any]] | Iterable[str] = ("defaults",),
    seeds: Iterable[int] = range(3),
    scenario: str = "retry-storm",
    tasks: int | None = None,
    arrivals_s: float = 2400.0,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    judging: Judging | None = None,
    jobs: int | None = None,
    executor: str = "processes",
    scheduler: str | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    spec: str | os.PathLike[str] | Table | None = None,
) -> PhaseMap:
    """Play a recoverability map: every cell of `axes` (one or two, or more) times `triggers` times `disciplines`, per seed.

    `axes` maps dotted setting paths, or `trigger.FIELD`, to their values; `triggers` are placed provider faults
    (text or `FaultSpec`) whose fields the trigger axes override; `disciplines` are names from `DISCIPLINES` or a
    mapping of name to settings. `jobs` local processes (default: every CPU) or `executor="dask"` (a local cluster,
    or `scheduler`). `out` (.csv) receives the rows. `spec` is the transition table both arms play (a spec folder, a git
    revision, a `Spec` or a `Table`; default: the packaged spec), named by every replay. Bad input raises `InputError`
    before anything runs.
    """
    from .executor import check_executor, check_jobs, execute, progress_bar

    table = resolve_table(spec)
    planned = build_jobs(axes, triggers, disciplines, seeds, scenario, tasks, arrivals_s, overrides, judging, table)
    jobs_count = check_jobs(jobs)
    check_executor(executor, scheduler)
    target = _writable(out) if out is not None else None
    if log is not None:
        log(f"{counted(len(planned), 'job')} ({2 * len(planned):,} runs: a control and a triggered run per cell and seed)")
    done: dict[int, dict[str, Any]] = {}
    bar = progress_bar(len(planned), 0, progress)
    try:
        for index, row in execute(planned, jobs_count, executor, scheduler, play_phase_job):
            done[index] = row
            bar.update()
    finally:
        bar.close()
    rows = [done[index] for index in sorted(done)]
    result = PhaseMap(tuple(dict(axes)), rows)
    if target is not None:
        write_rows(target, rows)
    return result


def _writable(out: str | os.PathLike[str]) -> Path:
    path = Path(out)
    if path.suffix != ".csv":
        raise InputError(f"a map's rows are written to a .csv file, not {path.name!r}")
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: no directory {path.parent}")
    return path


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """The rows as CSV, every column of every row, written beside the file and renamed over it."""
    order = list(dict.fromkeys(column for row in rows for column in row))
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with temporary.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=order)
            writer.writeheader()
            writer.writerows({column: "" if row.get(column) is None else row.get(column) for column in order} for row in rows)
        os.replace(temporary, path)
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        temporary.unlink(missing_ok=True)
