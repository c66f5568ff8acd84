"""Play one simulated run with every output it was asked for, and make its record: what `sim run` does, without the arguments.

`Outputs` names the files a run writes (the series as CSV, its plot, an
artifacts folder, the report page, the coverage of the table's rows);
`Outputs.check` refuses, before anything is played, any that cannot be
written, so a typo costs nothing. `play_run` plays the run with the sinks
those outputs need watching its history (timelines for the page, the rows it
fired for the coverage), writes them, and returns a `Played`: the world's
`Outcome`, the wall seconds, the run's record (`checkers.run.Run`, what
`--json` prints and report.json holds) and the line that says where the
coverage went. `shrink_run` searches a failed run for its shortest
counterexample. Every refusal is an `InputError` with one line saying why;
the command line turns it into exit status 2.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shiftchange.checkers.run import Run
from shiftchange.core import InputError
from shiftchange.core.table import Table
from shiftchange.sim import world
from shiftchange.sim.config import SimConfig
from shiftchange.sim.world import Outcome

from .report import replay_command, to_record
from .report.artifacts import play_with_artifacts, write_report_page
from .report.coverage import CoverageSink
from .report.html import TimelineSink, check_report_path
from .report.plot import check_figure_path, plot_series, write_series

__all__ = ["Outputs", "Played", "play_run", "shrink_run"]

# The world's `play` is looked up when a run is played (`world.play`), not bound at import, so a study (or a test) that
# replaces it sees its replacement used, whenever this module was first imported.


@dataclass(frozen=True)
class Outputs:
    """The files one run writes beside its report; None for each it was not asked for."""

    series: str | None = None
    """The recorder's rows as CSV."""
    plot: str | None = None
    """The series' four panels as an image."""
    artifacts: str | None = None
    """A folder for report.json, config.toml, the series, the whole history and the page."""
    report: str | None = None
    """The report page (one HTML file)."""
    coverage: str | None = None
    """The rows of the table the run fired (for `spec review --coverage`)."""

    def check(self, table: Table | None = None) -> None:
        """Every output can be written: a file into a folder that exists and can be written, the page an .html file, the
        artifacts folder under a writable one, and the coverage counted against `table`'s rows (a spec whose rows an event
        cannot tell apart is refused); else an `InputError` naming the first that cannot."""
        from shiftchange.spec.coverage import CoverageError, check_writable

        if self.report is not None:
            check_report_path(self.report)
        series = None if self.series is None else Path(self.series)
        if series is not None and (series.is_dir() or not series.parent.is_dir() or not os.access(series.parent, os.W_OK)):
            raise InputError(f"cannot write {series}: it must be a file in a writable folder that exists")
        if self.plot is not None:
            check_figure_path(self.plot)
        if self.artifacts is not None:
            path = Path(self.artifacts)
            existing = next(parent for parent in (path, *path.parents) if parent.exists())
            if not existing.is_dir() or not os.access(existing, os.W_OK):
                raise InputError(f"cannot write run artifacts into {path}: {existing} is not a writable folder")
        if self.coverage is not None:
            try:
                check_writable(self.coverage)
            except CoverageError as error:
                raise InputError(str(error)) from error
            _coverage_sink(self.coverage, table)


@dataclass(frozen=True)
class Played:
    """One run as played and written: the world's outcome, its wall seconds, its record, and where its coverage went."""

    outcome: Outcome
    elapsed_s: float
    record: Run
    covered: str | None = None
    """The line that says which rows the run fired and where that was written (None without `Outputs.coverage`)."""


def play_run(
    config: SimConfig,
    seed: int,
    scenario: str,
    pattern: Any = None,
    *,
    faults_kept: tuple[int, ...] | None = None,
    table: Table | None = None,
    outputs: Outputs = Outputs(),
    progress: Any = None,
) -> Played:
    """Play the run, write every output it was asked for, and make its record.

    Call `outputs.check()` first: this writes, it does not ask whether it can. A Ctrl-C while it plays propagates as the
    world's `Interrupted` (its `partial()` judges what was played), with nothing written but what streamed.
    """
    counted = _coverage_sink(outputs.coverage, table)
    timelines = TimelineSink(then=counted) if outputs.report is not None and outputs.artifacts is None else None
    sink = counted if timelines is None else timelines
    began = time.perf_counter()
    if outputs.artifacts is not None:
        outcome = play_with_artifacts(config, seed, scenario, pattern, outputs.artifacts, faults_kept, progress, sink, table=table)
    else:
        outcome = world.play(config, seed, scenario, pattern, faults_kept, progress=progress, history_sink=sink, table=table)
    elapsed_s = time.perf_counter() - began
    _write_series(outputs, outcome)
    covered = _write_coverage(outputs.coverage, counted, outcome, table)
    _write_report(outputs, outcome, elapsed_s, timelines, table)
    return Played(outcome, elapsed_s, to_record(outcome, elapsed_s, table), covered)


def shrink_run(
    outcome: Outcome, config: SimConfig, pattern: Any, progress: Any = None, table: Table | None = None
) -> dict[str, Any] | None:
    """Search for the shortest run that still violates; returns what the report shows of it (the `minimal` object).

    `config` is the config the run was given (scenario, file, settings), not `outcome.config`: play applies the
    anti-pattern's tuning itself. None when there is nothing to shrink: the run failed only on unknown verdicts, and the
    shrinker chases violations.
    """
    from .shrink import shrink

    if progress is not None:
        progress.show("the run failed: shrinking it to the shortest counterexample")
    shrunk = shrink(config, outcome.seed, outcome.scenario, pattern, table=table)
    if shrunk is None:
        return None
    return {
        "invariant": shrunk.invariant,
        "tasks": shrunk.tasks,
        "faults_kept": list(shrunk.faults_kept),
        "runs": shrunk.runs,
        "timeline": list(shrunk.timeline),
        "replay": replay_command(shrunk.outcome, shrunk.faults_kept, table),
    }


def _coverage_sink(path: str | None, table: Table | None) -> CoverageSink | None:
    """With a coverage file, a history sink counting the run's events per row of its table; else None."""
    from shiftchange.spec.coverage import CoverageError

    if path is None:
        return None
    try:
        return CoverageSink(None if table is None else table.spec)  # refuses a spec whose rows an event cannot tell apart
    except CoverageError as error:
        raise InputError(str(error)) from error


def _write_coverage(path: str | None, counted: CoverageSink | None, outcome: Outcome, table: Table | None) -> str | None:
    """Write the run's coverage to `path`, recorded by its replay command; returns the line the report ends with."""
    from shiftchange.spec.coverage import CoverageError, write_coverage

    if path is None or counted is None:
        return None
    try:
        coverage = counted.tally.coverage([replay_command(outcome, table=table)])
        write_coverage(coverage, path)
    except CoverageError as error:
        raise InputError(str(error)) from error
    fired = ", ".join(f"{coverage.rows_fired(name)} of {len(keys)} {name} rows" for name, keys in coverage.identity.items())
    unmatched = sum(entry.events for entry in coverage.unmatched)
    return f"coverage: {fired} fired; {unmatched:,} accepted events matched no row; written to {path}"


def _write_series(outputs: Outputs, outcome: Outcome) -> None:
    try:
        if outputs.series is not None:
            write_series(outcome.series, outputs.series)
        if outputs.plot is not None:
            played = outcome.schedule if outcome.faults_kept is None else [outcome.schedule[i] for i in sorted(set(outcome.faults_kept))]
            plot_series(outcome.series, outputs.plot, f"{outcome.scenario}, seed {outcome.seed}, {outcome.tasks:,} tasks", played)
    except (OSError, ValueError) as error:
        raise InputError(f"cannot write the series or its plot: {error}") from error


def _write_report(outputs: Outputs, outcome: Outcome, elapsed_s: float, timelines: TimelineSink | None, table: Table | None) -> None:
    """Write the report page: the artifacts folder's report.html when there is one (the same page, not drawn twice), else drawn here."""
    if outputs.report is None:
        return
    try:
        if outputs.artifacts is not None:
            shutil.copyfile(Path(outputs.artifacts) / "report.html", outputs.report)
        else:
            write_report_page(outcome, elapsed_s, outputs.report, timelines, table)
    except (OSError, InputError) as error:
        raise InputError(f"cannot write the report to {outputs.report}: {error}") from error
