"""A simulated run's record (`checkers.run.Run`, the one JSON shape of every driver's run), and the command that replays it.

A run of a spec other than the packaged one (`--spec`, a `Table` handed to
`play`) is recorded with that table: the record holds its label and digest
(the packaged spec's when none was given), and the replay command names it
again with `--spec LABEL`, the folder or `REV:folder` it was read from, so the
command plays the same table.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from shiftchange.antipatterns import antipattern
from shiftchange.checkers.run import Run
from shiftchange.core.table import Table, packaged
from shiftchange.sim.config import SimConfig
from shiftchange.sim.scenarios import SCENARIOS, scenario_config

from ..settings import PLACED_PATH, diff, format_value

if TYPE_CHECKING:
    from shiftchange.sim.world import Outcome

__all__ = ["faults_played", "replay_command", "spec_given", "spec_record", "spec_words", "to_json", "to_record"]


def faults_played(outcome: Outcome) -> int:
    """How many faults of the seed's schedule the run was given (all of them, or those `--faults` kept)."""
    return len(outcome.schedule) if outcome.faults_kept is None else len(set(outcome.faults_kept))


def spec_given(table: Table | None) -> bool:
    """Whether `table` is a spec the run was given (`--spec`), not the packaged one a run plays by default."""
    return table is not None and table.label != packaged().label


def spec_words(table: Table | None) -> list[str]:
    """`--spec LABEL` for a run of a given spec (its folder, or `REV:folder`, as it was read); nothing for the packaged one."""
    return ["--spec", table.label] if spec_given(table) else []


def spec_record(table: Table | None) -> dict[str, str]:
    """The spec a run played, as its report records it: its label and its digest (the packaged one's when `table` is None)."""
    played = packaged() if table is None else table
    return {"label": played.label, "digest": played.digest}


def replay_command(outcome: Outcome, faults_kept: tuple[int, ...] | None = None, table: Table | None = None) -> str:
    """The `shiftchange sim run` command that plays this run again, exactly (the outcome's own kept faults unless given).

    `--faults` appears only when some fault of the seed's schedule was left out; `--faults none` when all were.
    Each setting the run's config changed from its scenario's follows as `--set PATH=VALUE`, and each fault
    it placed that the scenario does not as `--fault TEXT`. A run of a config no scenario names (play's
    "custom") replays as baseline with those settings. `table`, the spec the run was given, follows as
    `--spec LABEL` (nothing for None or the packaged spec).
    """
    kept = faults_kept if faults_kept is not None else outcome.faults_kept
    if kept is not None and set(kept) == set(range(len(outcome.schedule))):
        kept = None
    scenario = outcome.scenario if outcome.scenario in SCENARIOS else "baseline"
    words = ["shiftchange", "sim", "run", "--scenario", scenario, "--seed", str(outcome.seed), "--tasks", str(outcome.tasks)]
    if outcome.antipattern is not None:
        words += ["--antipattern", outcome.antipattern]
    if kept is not None:
        words += ["--faults", ",".join(str(index) for index in sorted(set(kept))) or "none"]
    return shlex.join(words + spec_words(table) + _setting_words(outcome))


def _setting_words(outcome: Outcome) -> list[str]:
    """`--set` for each leaf the run's config changed from its base config's, `--fault` for each fault it placed that the base does not.

    A run that dropped one of its scenario's placed faults (a recoverability map's control arm has none) starts from an
    empty list, `--set nemesis.placed=`, and places its own faults after it: adding alone could never remove one.
    """
    base = _base_config(outcome)
    words = []
    for path, value in diff(base, outcome.config).items():
        if path == PLACED_PATH:
            kept = base.nemesis.placed if all(spec in value for spec in base.nemesis.placed) else ()
            if kept != base.nemesis.placed:
                words += ["--set", f"{PLACED_PATH}="]
            words += [word for spec in value if spec not in kept for word in ("--fault", str(spec))]
        else:
            words += ["--set", f"{path}={format_value(value)}"]
    return words


def _base_config(outcome: Outcome) -> SimConfig:
    """The config the replay's own words give: its scenario's (the defaults for one no scenario names), tuned by its anti-pattern."""
    if outcome.scenario in SCENARIOS:
        base = scenario_config(outcome.scenario, outcome.seed, outcome.tasks)
    else:
        base = SimConfig().with_tasks(outcome.tasks)
    return base if outcome.antipattern is None else antipattern(outcome.antipattern).configure(base)


def to_record(outcome: Outcome, elapsed_s: float, table: Table | None = None, files: tuple[str, ...] = ()) -> Run:
    """A simulated run as the one record every driver's run is (`checkers.run.Run`).

    Its faults are those the run played, each with its index in the seed's schedule (what `--faults` keeps); its subject
    holds what identifies a simulated run beside its scenario, seed and tasks: the history's digest, the SimPy events and
    history entries counted, the schedule's size, the settings its config changed from its scenario's (dotted paths),
    and the artifacts folder's files (`files`) when it has one.
    `spec` is the table the run was given (`table`; the packaged one when None), by label and digest.
    """
    kept = None if outcome.faults_kept is None else set(outcome.faults_kept)
    faults = tuple({"index": index, **fault.as_record()} for index, fault in enumerate(outcome.schedule) if kept is None or index in kept)
    subject = {
        "digest": outcome.digest,
        "events_processed": outcome.events_processed,
        "history_entries": outcome.history_entries,
        "schedule_faults": len(outcome.schedule),
        "settings_changed": sorted(diff(_base_config(outcome), outcome.config)),
    }
    if files:
        subject["files"] = list(files)
    return Run(
        driver="sim",
        ok=outcome.ok,
        config=outcome.config.as_dict(),
        spec=spec_record(table),
        verdicts=outcome.verdicts,
        metrics=outcome.metrics,
        replay=replay_command(outcome, table=table),
        scenario=outcome.scenario,
        seed=outcome.seed,
        tasks=outcome.tasks,
        antipattern=outcome.antipattern,
        faults=faults,
        series_windows=len(outcome.series),
        wall_s=elapsed_s,
        subject=subject,
    )


def to_json(outcome: Outcome, elapsed_s: float, table: Table | None = None) -> dict[str, Any]:
    """The `--json` report of a simulated run: its record's one JSON shape (`checkers.run.Run.to_json`)."""
    return to_record(outcome, elapsed_s, table).to_json()
