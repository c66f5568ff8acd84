"""The text a person reads of a simulated run: what ran, each verdict (unknown printed UNKNOWN with its reason), what was
measured with its unit, how to replay a failure, and the shrinker's shortest counterexample."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from shiftchange.checkers.history import invariant_rows, tally
from shiftchange.core.table import Table
from shiftchange.sim.scenarios import SCENARIOS

from ..settings import diff
from ..summary import counted

if TYPE_CHECKING:
    from shiftchange.sim.world import Outcome

from .record import _base_config, faults_played, spec_given

__all__ = ["render_minimal", "render_text", "rounded_times"]


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
