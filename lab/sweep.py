"""Sweeps: many seeded runs over a grid of settings, one row per run in a tidy table.

A sweep is the product of a grid (each swept path's values, in the order the
paths were given) with the seeds; each point is a scenario's config with the
fixed overrides and then the point's values applied (`settings.apply`), played
and judged exactly as `sim run` plays one run. Every config is built before
anything runs, so a bad value is one error naming its path and value and no
run, and no file, is started for nothing.

Rows are a function of their run alone: identity (scenario, tasks,
anti-pattern, seed, the digests of its config and of its spec), the swept
values, the metrics flattened with dots, each invariant's verdict, the
history digest and the replay command. Nothing in a row depends on the wall
clock, the executor or the job count, and rows are kept in run order, not
completion order, so the same sweep on one process, a pool or a Dask cluster
gives the same table, and a table can be compared by its digests alone.

A row is keyed by (scenario, tasks, anti-pattern, seed, config digest, spec
digest, swept values), the values compared as formatted text
(`settings.format_value`): that is exactly what makes one run differ from
another in a sweep, it survives a CSV, which keeps only text, and it does
not depend on how the value was spelled on the command line (`1` and `1.0`
are the same drain). The key is what resuming matches: a run whose row is
already in `out` is not played again, and the final file holds the old rows
and the new in run order. A table written with other fixed settings or
another spec (`spec`, `--spec`) holds no row of this sweep, and is refused
rather than resumed.

A sweep of a spec other than the packaged one carries the compiled `Table`
in every `Run`: it is resolved once, before any run, so a bad folder or
revision is one error and no run; a `Table` pickles as its spec, so a pool's
worker or a Dask worker on another machine plays the very spec the sweep
read, needing neither the folder nor the git repository it came from, and
an edit to the folder while the sweep runs changes no run.

The output file is rewritten whole, to a temporary file beside it then
`os.replace`d over it, at most once a second as runs complete and once at
the end: a reader (or an interrupted sweep) only ever sees a complete table,
never half a row, and an interrupted sweep keeps every row it finished.
Appending would be cheaper but could tear the last line and cannot keep run
order; a sweep's table is small beside the runs that fill it.

With a coverage file, each run counts its own events per transition row as
its history streams (`lab/report/coverage.py`) and hands back only the counts, in
its row under `COVERAGE_KEY`; the sweep takes them out before the row is kept,
sums them, and writes the file once, whole, after the last run. Rows resumed
from `out` were not played and cannot be counted, so coverage refuses them.

Local processes are spawned, not forked: a fork of a process that holds
threads (a progress bar's, a Dask client's) can deadlock, and spawned workers
behave the same on every platform.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shiftchange.antipatterns import antipattern as antipattern_named
from shiftchange.core import InputError
from shiftchange.core.table import Table, packaged, table_for
from shiftchange.sim.config import FaultSpec, SimConfig
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import Outcome, play
from shiftchange.spec.coverage import Coverage, CoverageError, check_writable, from_counts, write_coverage
from shiftchange.spec.loader import SpecError
from shiftchange.spec.source import SpecSourceError

from .executor import EXECUTORS, check_executor, check_jobs, execute, progress_bar
from .report import replay_command, spec_given, spec_words
from .report.artifacts import play_with_artifacts, prepare
from .report.coverage import CoverageSink
from .settings import PLACED_PATH, apply, diff, format_value, to_toml
from .settings import get as setting_at
from .summary import counted
from .table import IDENTITY, _cell, _complete, _Output, columns

__all__ = [
    "EXECUTORS",
    "IDENTITY",
    "RUNS_MAX",
    "Run",
    "build_runs",
    "check_executor",
    "check_jobs",
    "check_seeds",
    "columns",
    "execute",
    "play_run",
    "progress_bar",
    "resolve_table",
    "spec_digest",
    "sweep",
    "sweep_rows",
]

RUNS_MAX = 100_000
"""A sweep plays at most this many runs (grid points times seeds); every config is built before the first run."""
COVERAGE_KEY = "coverage"
"""A run asked for coverage hands its counts back inside its row under this key; the sweep takes them out before the row is kept."""


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its place in run order, what identifies it, and the config it plays."""

    index: int
    scenario: str
    seed: int
    antipattern: str | None
    swept: tuple[tuple[str, Any], ...]
    """Each swept path with its typed value, read back from the built config (so `1` and `1.0` agree), in grid order."""
    config: SimConfig
    artifacts: str | None = None
    """The directory this run's artifacts go to, or None for no artifacts."""
    coverage: bool = False
    """Count the run's events per transition row and return the counts with its row (`COVERAGE_KEY`)."""
    table: Table | None = None
    """The spec the run plays (`--spec`), compiled; None for the packaged one. It travels to the worker as its spec."""

    def key(self) -> tuple[str, ...]:
        config = self.config
        identity = (self.scenario, _cell(config.workload.tasks), _cell(self.antipattern), _cell(self.seed), config_digest(config))
        return (*identity, spec_digest(self.table), *(format_value(value) for _, value in self.swept))


def config_digest(config: SimConfig) -> str:
    """A short SHA-256 of the whole config as TOML: two rows with one digest ran the same settings, fixed ones included."""
    return hashlib.sha256(to_toml(config).encode()).hexdigest()[:16]


def spec_digest(table: Table | None) -> str:
    """The digest of what the run's spec decides (`Table.digest`); the packaged spec's for None."""
    return (packaged() if table is None else table).digest


def resolve_table(spec: str | os.PathLike[str] | Table | None) -> Table | None:
    """The table a sweep (or map, or tuning) plays: None stays None (the packaged one), else `core.table.table_for(spec)`.

    A folder or revision that names no spec, or a malformed one, is an `InputError` here, before anything runs.
    """
    if spec is None:
        return None
    try:
        return table_for(spec)
    except (SpecSourceError, SpecError) as error:
        raise InputError(str(error)) from None


# ------------------------------------------------------------------ planning


def build_runs(
    grid: Mapping[str, Iterable[Any]],
    seeds: Iterable[int],
    scenario: str,
    tasks: int | None,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]],
    antipattern: str | None,
    artifacts: str | os.PathLike[str] | None = None,
    faults: tuple[FaultSpec, ...] = (),
    table: Table | None = None,
) -> list[Run]:
    """Every run of the sweep, in run order, each config built and validated; nothing runs.

    `faults` are placed in every run beside those the overrides place (a config file's `[[fault]]` tables); every run
    plays `table` (None: the packaged spec).
    """
    seeds = check_seeds(seeds)
    grid = {path: _values(path, values) for path, values in grid.items()}
    _check_size(grid, seeds)
    fixed = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)
    pattern = antipattern_named(antipattern) if antipattern is not None else None
    _config(scenario, seeds[0], tasks, fixed, [], faults, pattern, blame="the fixed settings")
    _check_values(grid, scenario, seeds[0], tasks, fixed, faults, pattern)
    runs = []
    for point in itertools.product(*grid.values()):
        assignments = list(zip(grid, point, strict=True))
        for seed in seeds:
            config = _config(scenario, seed, tasks, fixed, assignments, faults, pattern)
            swept = tuple((path, setting_at(config, path)) for path in grid)
            runs.append(Run(len(runs), scenario, seed, antipattern, swept, config, table=table))
    if artifacts is not None:
        folder = prepare(artifacts)
        runs = [_with_artifacts(run, folder) for run in runs]
    _check_distinct(runs)
    return runs


def check_seeds(seeds: Iterable[int]) -> list[int]:
    """The seeds as a list: at least one, each a whole number from 0, none twice (else InputError)."""
    listed = list(seeds)
    if not listed:
        raise InputError("a sweep needs at least one seed")
    for seed in listed:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"a seed must be a whole number, not negative, not {seed!r}")
    if len(set(listed)) != len(listed):
        repeated = next(seed for seed in listed if listed.count(seed) > 1)
        raise InputError(f"seed {repeated} is given twice")
    return listed


def _values(path: str, values: Iterable[Any]) -> list[Any]:
    listed = None if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable) else list(values)
    if not listed:
        raise InputError(f"the grid's {path} needs a list of one or more values, not {values!r}")
    return listed


def _check_values(
    grid: dict[str, list[Any]], scenario: str, seed: int, tasks: int | None, fixed: list, faults: tuple, pattern: Any
) -> None:
    """Each grid value on its own (after the fixed overrides, already checked), so an error names the one bad value."""
    for path, values in grid.items():
        for value in values:
            _config(scenario, seed, tasks, fixed, [(path, value)], faults, pattern, blame=f"grid value {path}={value}")


def _check_size(grid: dict[str, list[Any]], seeds: list[int]) -> None:
    size = len(seeds)
    for values in grid.values():
        size *= len(values)
    if size > RUNS_MAX:
        raise InputError(f"the sweep has {size:,} runs (grid points times seeds), more than the {RUNS_MAX:,} one sweep may play")


def _config(
    scenario: str,
    seed: int,
    tasks: int | None,
    fixed: list,
    assignments: list,
    faults: tuple,
    pattern: Any,
    blame: str | None = None,
) -> SimConfig:
    """One run's config; a setting the anti-pattern overrides itself is refused (the row would name a value the run never used)."""
    base = scenario_config(scenario, seed, tasks)
    try:
        config = apply(base, [*fixed, *assignments])
        if faults:
            config = apply(config, {PLACED_PATH: config.nemesis.placed + faults})
        if pattern is not None:
            overridden = sorted(set(diff(config, pattern.configure(config))) & {path for path, _ in [*fixed, *assignments]})
            if overridden:
                raise InputError(f"the anti-pattern {pattern.name} sets {overridden[0]} itself, so sweeping or setting it measures nothing")
        return config
    except InputError as error:
        where = blame or "grid point " + ", ".join(f"{path}={value}" for path, value in assignments)
        raise InputError(f"{where}: {error}") from None


def _check_distinct(runs: list[Run]) -> None:
    """Two runs with one key would be one row: a grid value given twice (`1` and `1.0`) is bad input."""
    seen: dict[tuple[str, ...], Run] = {}
    for run in runs:
        earlier = seen.setdefault(run.key(), run)
        if earlier is not run:
            values = ", ".join(f"{path}={format_value(value)}" for path, value in run.swept)
            raise InputError(f"the grid names the same run twice ({values}, seed {run.seed}): give each value once")


def _with_artifacts(run: Run, directory: Path) -> Run:
    """Each run's artifacts in their own directory, named for the run's key so a person can find it.

    The name ends in the config's digest (and a given spec's), so two sweeps with other fixed settings, or of another
    spec, never write into one folder.
    """
    words = [run.scenario, *([run.antipattern] if run.antipattern else []), f"seed{run.seed}"]
    words += [f"{path}={format_value(value)}" for path, value in run.swept]
    words.append(config_digest(run.config)[:8])
    if spec_given(run.table):
        words.append(f"spec{spec_digest(run.table)[:8]}")
    name = re.sub(r"[^A-Za-z0-9._=-]", "_", "-".join(words))
    return replace(run, artifacts=str(directory / name))


# ------------------------------------------------------------------ one run


def play_run(run: Run) -> dict[str, Any]:
    """Play one run of a sweep and return its row (module level, so pools and Dask workers can call it by name).

    With `run.coverage` the row also holds, under `COVERAGE_KEY`, the run's counts per transition row: a few
    dozen numbers, so the run's history never leaves the process that played it.
    """
    pattern = antipattern_named(run.antipattern) if run.antipattern is not None else None
    counted = CoverageSink(None if run.table is None else run.table.spec) if run.coverage else None
    if run.artifacts is None:
        outcome = play(run.config, run.seed, run.scenario, pattern, history_sink=counted, table=run.table)
    else:
        directory = Path(run.artifacts)
        outcome = play_with_artifacts(run.config, run.seed, run.scenario, pattern, directory, history_sink=counted, table=run.table)
    row = _row(run, outcome)
    if counted is not None:
        row[COVERAGE_KEY] = counted.tally.counts()
    return row


def _row(run: Run, outcome: Outcome) -> dict[str, Any]:
    row: dict[str, Any] = {
        "scenario": run.scenario,
        "tasks": outcome.tasks,
        "antipattern": outcome.antipattern,
        "seed": run.seed,
        "config_digest": config_digest(run.config),
        "spec_digest": spec_digest(run.table),
    }
    row.update(run.swept)
    row.update(_flatten(outcome.metrics))
    for name, verdict in outcome.verdicts.items():
        row[f"invariant.{name}"] = verdict.status
        row[f"violations.{name}"] = verdict.violations
    row.update(ok=outcome.ok, digest=outcome.digest, replay=replay_command(outcome, table=run.table))
    return row


def _flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in metrics.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


# ------------------------------------------------------------------ the sweep


def sweep_rows(
    grid: Mapping[str, Iterable[Any]] | None = None,
    seeds: Iterable[int] = range(1),
    scenario: str = "mixed",
    tasks: int | None = None,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    antipattern: str | None = None,
    jobs: int | None = None,
    executor: str = "processes",
    scheduler: str | None = None,
    out: str | os.PathLike[str] | None = None,
    artifacts: str | os.PathLike[str] | None = None,
    progress: bool = False,
    faults: Iterable[str | FaultSpec] = (),
    log: Callable[[str], None] | None = None,
    coverage: str | os.PathLike[str] | None = None,
    spec: str | os.PathLike[str] | Table | None = None,
) -> list[dict[str, Any]]:
    """Run the sweep (see `sweep`) and return its rows as dicts, in run order, every row with every column.

    `log`, if given, is told once how many runs the sweep has, how many `out` already held, and how many it plays.
    `coverage`, if given, is a JSON file written once every run has played: the sum of the runs' transition coverage.
    """
    grid = dict(grid or {})
    jobs = check_jobs(jobs)
    check_executor(executor, scheduler)
    table = resolve_table(spec)
    placed = tuple(fault if isinstance(fault, FaultSpec) else FaultSpec.parse(fault) for fault in faults)
    runs = build_runs(grid, seeds, scenario, tasks, overrides, antipattern, artifacts, placed, table)
    output = _Output(Path(out), list(grid)) if out is not None else None
    done = output.resume(runs) if output is not None else {}
    counting = _Counting(coverage, runs, done, output, table) if coverage is not None else None
    pending = [run if counting is None else replace(run, coverage=True) for run in runs if run.index not in done]
    if log is not None:
        held = f", {len(done):,} of them already in {output.path}" if done else ""
        log(f"{counted(len(runs), 'run')}{held}; playing {len(pending):,}")
    bar = progress_bar(len(runs), len(done), progress)
    try:
        for index, row in execute(pending, jobs, executor, scheduler, play_run):
            counts = row.pop(COVERAGE_KEY, None)
            if counting is not None:
                counting.add(counts)
            done[index] = row
            bar.update()
            if output is not None:
                output.flush(done)
    finally:
        bar.close()
        if output is not None:
            output.flush(done, force=True)
    if counting is not None:
        counting.write(_sweep_command(scenario, tasks, antipattern, runs, overrides, placed, table))
    rows = [done[index] for index in sorted(done)]
    return _complete(rows, columns(rows, list(grid)))


class _Counting:
    """The sweep's coverage: each run's counts summed as it completes, written once, whole, when every run has played."""

    def __init__(
        self, path: str | os.PathLike[str], runs: list[Run], done: Mapping[int, Any], output: _Output | None, table: Table | None
    ) -> None:
        try:
            check_writable(path)
            sink = CoverageSink(None if table is None else table.spec)  # refuses, here and not in a worker, rows no event tells apart
        except CoverageError as error:
            raise InputError(str(error)) from None
        if done:
            raise InputError(
                f"{len(done):,} of the sweep's {counted(len(runs), 'run')} {'is' if len(done) == 1 else 'are'} already in"
                f" {output.path if output else 'the table'} and would not"
                " be played, so --coverage could not count them: choose another --out, or give no --coverage"
            )
        self.path = path
        self.identity = sink.tally.identity
        self.total: Coverage | None = None

    def add(self, counts: Mapping[str, Any] | None) -> None:
        assert counts is not None, "a run asked for coverage returned its row without counts"
        try:
            one = from_counts(self.identity, counts)
        except CoverageError as error:
            raise InputError(str(error)) from None
        self.total = one if self.total is None else self.total.merge(one)

    def write(self, recorded_by: str) -> None:
        if self.total is None:
            raise InputError(f"no run was played, so there is no coverage to write to {self.path}")
        try:
            write_coverage(self.total.relabelled([recorded_by]), self.path)
        except CoverageError as error:
            raise InputError(str(error)) from None


def _sweep_command(
    scenario: str,
    tasks: int | None,
    antipattern: str | None,
    runs: list[Run],
    overrides: Any,
    faults: tuple[FaultSpec, ...],
    table: Table | None = None,
) -> str:
    """A `shiftchange sim sweep` command for what a coverage file counted: the scenario, seeds, grid, spec, fixed settings, faults."""
    words = ["shiftchange", "sim", "sweep", "--scenario", scenario]
    words += ["--tasks", str(tasks)] if tasks is not None else []
    words += ["--antipattern", antipattern] if antipattern is not None else []
    words += spec_words(table)
    words += ["--seeds", _seed_ranges(sorted({run.seed for run in runs}))]
    for path in dict(runs[0].swept):
        values = dict.fromkeys(format_value(dict(run.swept)[path]) for run in runs)
        words += ["--grid", f"{path}={','.join(values)}"]
    fixed = overrides.items() if isinstance(overrides, Mapping) else overrides
    words += [word for path, value in fixed for word in ("--set", f"{path}={format_value(value)}")]
    words += [word for fault in faults for word in ("--fault", str(fault))]
    return shlex.join(words)


def _seed_ranges(seeds: list[int]) -> str:
    """Sorted seeds as `--seeds` takes them: runs of consecutive seeds as A-B, the rest listed."""
    parts: list[str] = []
    for _, group in itertools.groupby(enumerate(seeds), key=lambda pair: pair[1] - pair[0]):
        members = [seed for _, seed in group]
        parts.append(str(members[0]) if len(members) == 1 else f"{members[0]}-{members[-1]}")
    return ",".join(parts)


def sweep(
    grid: Mapping[str, Iterable[Any]] | None = None,
    seeds: Iterable[int] = range(1),
    scenario: str = "mixed",
    tasks: int | None = None,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    antipattern: str | None = None,
    jobs: int | None = None,
    executor: str = "processes",
    scheduler: str | None = None,
    out: str | os.PathLike[str] | None = None,
    artifacts: str | os.PathLike[str] | None = None,
    progress: bool = False,
    faults: Iterable[str | FaultSpec] = (),
    coverage: str | os.PathLike[str] | None = None,
    spec: str | os.PathLike[str] | Table | None = None,
) -> Any:
    """Play every run of a grid of settings times the seeds; one row per run, in run order.

    `grid` maps dotted setting paths to the values to try (typed, or text parsed by the field's type);
    `overrides` are fixed settings applied first (a config file's: `settings.read_overrides(path)`); `faults` are placed in
    every run (`FaultSpec`s or their text, "outage model_provider at=600 for=120"). `jobs` local processes (default: every CPU; 1 runs
    here, in this process) or `executor="dask"` on a `LocalCluster` of `jobs` workers, or on the
    scheduler at `scheduler`. `out` (.csv or .parquet) is rewritten as runs complete and resumed
    from: rows already in it are not run again. `coverage` is a JSON file written at the end with the sum
    of every run's transition coverage (`shiftchange spec review --coverage` shows it); it needs every run
    played, so an `out` that already holds rows is refused. `spec` is the transition table every run plays: a spec
    folder, a git revision (`REV` or `REV:folder`, read as `shiftchange spec check` reads one), a `Spec` or a `Table`
    (default: the packaged spec); rows carry its digest, and replays name it. Returns a pandas DataFrame when pandas is
    importable, else a list of dicts. Bad input raises `InputError` before anything runs.
    """
    rows = sweep_rows(
        grid, seeds, scenario, tasks, overrides, antipattern, jobs, executor, scheduler, out, artifacts, progress, faults, None, coverage,
        spec,
    )  # fmt: skip
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        return rows
    return pandas.DataFrame(rows)
