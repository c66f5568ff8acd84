"""Run artifacts: one folder per run with its report, config, time series, plot and whole history, like a Jepsen store directory.

    report.json     the run's record (`checkers.run`), the `--json` report with the folder's files named in its subject:
                    the faults played as records with their times, the spec the run played by label and digest
    config.toml     the run's full config; `sim run --config config.toml` with the same seed replays it
    series.csv      the recorder's rows, one per window
    series.png      the four panels of `plot.plot_series`
    history.jsonl   every history entry, one JSON object a line, in order, streamed as the run goes
    report.html     the page a person looks at (`html`): report.json's verdicts and metrics, the series
                    with the faults shaded, the faults played, and the timelines of up to `TIMELINE_TASKS_MAX` tasks

report.html is rendered from the very dict written as report.json, so the two
never disagree. The history is written as it happens (a sink on the history),
never held in memory, so a long run's folder costs disk, not RAM. Entries carry a `type`
(event, landed, fault, retired) and their fields; a lease token's digest is
replaced by "issued", as in the history digest, because tokens are secrets.
`schema_version` (the `--json` report's) changes whenever a field changes meaning.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import IO, Any

from shiftchange.checkers.history import Fault, Landed, Retired
from shiftchange.core import Event, InputError
from shiftchange.core.table import Table
from shiftchange.sim import world
from shiftchange.sim.config import SimConfig
from shiftchange.sim.world import Outcome

from .html import TimelineSink, sim_page, write_page
from .plot import plot_series, write_series
from .record import to_record

FILES = ("report.json", "config.toml", "series.csv", "series.png", "history.jsonl", "report.html")
_TYPES = {Event: "event", Landed: "landed", Fault: "fault", Retired: "retired"}


def prepare(directory: str | Path) -> Path:
    """The artifacts folder, created if missing; a path that is a file, or cannot be written, is bad input."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise InputError(f"--artifacts {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / ".write-test").touch()
        (path / ".write-test").unlink()
    except OSError as error:
        raise InputError(f"cannot write run artifacts into {path}: {error.strerror or error}") from error
    return path


def play_with_artifacts(
    config: SimConfig,
    seed: int,
    scenario: str,
    antipattern: Any,
    directory: str | Path,
    faults_kept: tuple[int, ...] | None = None,
    progress: Any = None,
    history_sink: Callable[[Any], None] | None = None,
    table: Table | None = None,
) -> Outcome:
    """Play one run, streaming its history into `directory`, then write the rest of its artifacts there.

    `history_sink`, if given, receives every history entry too, after the file and the timelines (a coverage count).
    `table` is the spec the run plays (default: the packaged one); the report records it and the replay names it.
    """
    folder = prepare(directory)
    began = time.perf_counter()
    timelines = TimelineSink(then=history_sink)
    with (folder / "history.jsonl").open("w", encoding="utf-8") as history:
        sink = _writer(history, timelines)
        outcome = world.play(config, seed, scenario, antipattern, faults_kept, progress=progress, history_sink=sink, table=table)
    write_run(outcome, folder, time.perf_counter() - began, timelines, table)
    return outcome


def write_run(
    outcome: Outcome, directory: str | Path, elapsed_s: float, timelines: TimelineSink | None = None, table: Table | None = None
) -> Path:
    """Write report.json, config.toml, series.csv, series.png and report.html of a played run (history.jsonl is written while it plays).

    `timelines` is the sink that watched the run's history; without it the page shows no task's timeline. `table` is the spec
    the run was given (None: the packaged one).
    """
    from ..settings import to_toml

    folder = prepare(directory)
    found = report(outcome, elapsed_s, table)
    (folder / "report.json").write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    (folder / "config.toml").write_text(to_toml(outcome.config), encoding="utf-8")
    write_series(outcome.series, folder / "series.csv")
    played = outcome.schedule if outcome.faults_kept is None else [outcome.schedule[i] for i in sorted(set(outcome.faults_kept))]
    title = f"{outcome.scenario}, seed {outcome.seed}, {outcome.tasks:,} tasks"
    plot_series(outcome.series, folder / "series.png", title, played)
    write_page(sim_page(found, outcome.series, timelines), folder / "report.html")
    return folder


def write_report_page(
    outcome: Outcome, elapsed_s: float, path: str | Path, timelines: TimelineSink | None, table: Table | None = None
) -> Path:
    """Write the run's report page alone to `path` (`sim run --report`): the report.html an artifacts folder would hold."""
    return write_page(sim_page(report(outcome, elapsed_s, table), outcome.series, timelines), path)


def report(outcome: Outcome, elapsed_s: float, table: Table | None = None) -> dict[str, Any]:
    """report.json: the run's record in the one JSON shape, naming the folder's files in its subject."""
    return to_record(outcome, elapsed_s, table, FILES).to_json()


def _writer(file: IO[str], then: Callable[[Any], None] | None) -> Any:
    def write(entry: Any) -> None:
        file.write(json.dumps(entry_record(entry), default=str, separators=(",", ":")))
        file.write("\n")
        if then is not None:
            then(entry)

    return write


def entry_record(entry: Any) -> dict[str, Any]:
    """One history entry as plain data, with its `type`; lease token digests become "issued"."""
    record = {"type": _TYPES[type(entry)], **_plain(entry)}
    if isinstance(entry, Retired):
        for attempt in record["attempts"]:
            if attempt.get("token_digest") is not None:
                attempt["token_digest"] = "issued"
    return record


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value
