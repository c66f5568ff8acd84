"""How a simulated run is reported: the text a person reads, the JSON object a script reads, and the command that replays it.

Wording is held to the checkers' three answers: a verdict that is unknown is
printed UNKNOWN with the checker's reason beneath it, never folded into PASS,
and the closing line says a run with any unknown is not a pass. Every metric
carries its unit; one that has nothing to measure (no crash hit a held
Attempt) says so instead of printing zero.

A run of a spec other than the packaged one (`--spec`, a `Table` handed to
`play`) is reported with that table: the JSON report records its label and
digest (the packaged spec's when none was given), and the replay command
names it again with `--spec LABEL`, the folder or `REV:folder` it was read
from, so the command plays the same table.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from shiftchange.antipatterns import antipattern
from shiftchange.checkers.history import invariant_rows, tally
from shiftchange.checkers.run import Run
from shiftchange.core.table import Table, packaged
from shiftchange.sim.config import SimConfig
from shiftchange.sim.scenarios import SCENARIOS, scenario_config

from .settings import PLACED_PATH, diff, format_value
from .summary import counted

if TYPE_CHECKING:
    from shiftchange.sim.world import Outcome

__all__ = [
    "faults_played",
    "render_minimal",
    "render_text",
    "replay_command",
    "rounded_times",
    "spec_given",
    "spec_record",
    "spec_words",
    "to_json",
    "to_record",
]


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
    history entries counted, the schedule's size, and the artifacts folder's files (`files`) when it has one.
    `spec` is the table the run was given (`table`; the packaged one when None), by label and digest.
    """
    kept = None if outcome.faults_kept is None else set(outcome.faults_kept)
    faults = tuple({"index": index, **fault.as_record()} for index, fault in enumerate(outcome.schedule) if kept is None or index in kept)
    subject = {
        "digest": outcome.digest,
        "events_processed": outcome.events_processed,
        "history_entries": outcome.history_entries,
        "schedule_faults": len(outcome.schedule),
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


def render_text(outcome: Outcome, replay: str, elapsed_s: float, table: Table | None = None) -> str:
    """The report a person reads: what ran (and the spec, when one was given), each verdict, what was measured, how to replay a failure."""
    lines = [_header(outcome, elapsed_s, table), "", "invariants", *invariant_rows(outcome.verdicts), tally(outcome.verdicts)]
    lines += ["", "metrics", *_metric_rows(outcome)]
    if not outcome.ok:
        lines += ["", f"replay: {replay}"]
    return rounded_times("\n".join(lines) + "\n")


def render_minimal(minimal: dict[str, Any]) -> str:
    """The shrinker's answer (the `minimal` object of the JSON report): the smallest failing run found, its timeline, its replay."""
    faults = len(minimal["faults_kept"])
    noun = "fault" if faults == 1 else "faults"
    lines = [f"shortest counterexample found: {minimal['tasks']} tasks, {faults} {noun} (after {minimal['runs']} runs)"]
    lines += [f"  {line}" for line in minimal["timeline"]]
    lines.append(f"replay: {minimal['replay']}")
    return rounded_times("\n".join(lines) + "\n")


RAW_TIME = re.compile(r"\b(until|by|at) (\d+\.\d{3,})(?![\w.])")
"""A simulated time as the core words it in a reason, the clock's float unrounded ("circuit open until 238.7556096241188")."""


def rounded_times(text: str) -> str:
    """`text` with each unrounded simulated time a recorded reason holds after "until", "by" or "at" written `t=238.76 s`.

    The core words its refusals with the clock's number as it is (it cannot tell a simulated clock from a Unix one);
    the `--json` report keeps the words as recorded, and the text a person reads rounds them as the rest of it does."""
    return RAW_TIME.sub(lambda found: f"{found.group(1)} t={float(found.group(2)):.2f} s", text)


def _header(outcome: Outcome, elapsed_s: float, table: Table | None = None) -> str:
    antipattern = f", anti-pattern {outcome.antipattern}" if outcome.antipattern is not None else ""
    spec = f", spec {table.label} (digest {table.digest})" if spec_given(table) else ""
    changed = len(diff(_base_config(outcome), outcome.config))
    settings = f" with {changed} setting{'' if changed == 1 else 's'} changed" if changed else ""
    scenario = outcome.scenario if outcome.scenario in SCENARIOS else f"baseline (a {outcome.scenario} config)"
    return (
        f"shiftchange sim run: scenario {scenario}{settings}, seed {outcome.seed}, {outcome.tasks:,} tasks{antipattern}{spec}; "
        f"{counted(faults_played(outcome), 'fault')} injected, {outcome.events_processed:,} SimPy events, {elapsed_s:.1f} s wall"
    )


def _metric_rows(outcome: Outcome) -> list[str]:
    metrics = outcome.metrics
    states = ", ".join(f"{state} {count:,}" for state, count in metrics["final_states"].items()) or "none"
    calls = ", ".join(f"{name} {count:,}" for name, count in metrics["provider_calls"].items()) or "none"
    sim_time_s = metrics["sim_time_s"]
    rows = [
        ("tasks done", f"{metrics['tasks_done']:,} of {outcome.tasks:,}"),
        ("final states", states),
        ("attempts per task", f"mean {metrics['attempts_per_task']:.2f}, max {metrics['attempts_per_task_max']}"),
        ("leases", f"{metrics['leases']:,} granted, {metrics['lease_windows']:,} lease windows"),
        ("renewals", _renewals(metrics)),
        ("lease expiries", _expiries(metrics)),
        ("crash detect", _detect(metrics)),
        ("crash recover", _recover(metrics)),
        ("stale writes refused", f"{metrics['stale_writes_refused']:,}"),
        ("effects", f"{metrics['effects']:,} ({metrics['duplicate_effects']:,} duplicate)"),
        ("queue age", f"max {metrics['queue_age_s_max']:,.1f} s, p99 {metrics['queue_age_s_p99']:,.1f} s"),
        ("throughput", f"{metrics['throughput_tasks_per_h']:,.1f} tasks/h"),
        ("provider calls", calls),
        ("spend", f"${metrics['spend_usd']:,.2f}, {metrics['tokens']:,} tokens"),
        ("sim time", f"{sim_time_s:,.1f} s ({sim_time_s / 3600.0:.2f} h)"),
    ]
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


def _renewals(metrics: dict[str, Any]) -> str:
    return (
        f"{metrics['renewals_sent']:,} sent: {metrics['renewals_accepted']:,} accepted, {metrics['renewals_refused']:,} refused,"
        f" {metrics['renewals_unanswered']:,} unanswered (lost on the way, either way, or late)"
    )


def _expiries(metrics: dict[str, Any]) -> str:
    return (
        f"{metrics['expiries']:,}, of which {metrics['false_expiries']:,} false (the holder was alive, unpaused and renewing"
        f" when it ran out; {metrics['false_expiries_per_1000_leases']:g} per 1,000 leases)"
    )


def _crashes(metrics: dict[str, Any]) -> str:
    held = metrics["crashes_holding"]
    return f"{metrics['crashes']:,} crash{'' if metrics['crashes'] == 1 else 'es'}, {held:,} of a worker holding an Attempt"


def _detect(metrics: dict[str, Any]) -> str:
    count = metrics["crash_detect_count"]
    if count == 0:
        return f"none measured ({_crashes(metrics)}; none of their leases was seen to expire)"
    return f"mean {metrics['crash_detect_s_mean']:,.1f} s over {count:,} ({_crashes(metrics)})"


def _recover(metrics: dict[str, Any]) -> str:
    count = metrics["crash_recover_count"]
    if count == 0:
        return "none measured (no task whose Attempt a crash hit was claimed again)"
    return f"mean {metrics['crash_recover_s_mean']:,.1f} s, max {metrics['crash_recover_s_max']:,.1f} s over {count:,}"
