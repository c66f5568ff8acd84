"""Tuning questions answered with evidence: a closed form proposes the setting, seeded runs confirm it, with intervals.

The lease question (`tune_lease`, `shiftchange sim tune lease`): given how long
the tool calls run, how often a renewal is lost and a target (false expiries
per 1,000 leases at a confidence, and optionally a bound on the time to detect
a crash), which lease TTL and heartbeat interval?

**The tool calls.** The simulator plays one distribution of tool-call
duration: each call's local work is exponential around `workload.tool_call_s`
(`sim/workload.py`, `Workbench.tool_time_s`), `workflow.tool_calls` of them
per Attempt. So the question takes that mean and that count. What the rule
needs from them is how long a lease is held (the tool calls plus the rest of
the Attempt: model calls, commit, push, pull request), and that is measured:
a few lossless runs of the same workload, each lease's hold read from the
history as it streams (claim to the moment it stopped being expirable).
Tool calls longer than the scenario's slow the arrivals in proportion, so the
workers are no busier than in the scenario itself.

**The rule** (notebooks/lease-tuning.py, "A rule for choosing the TTL",
which imports it from here). A lease window opens at each grant and lasts one
TTL; the worker's heartbeat sends a renewal every I from the claim, so
k = floor(TTL / I) renewals land in a window when TTL clears kI by more than a
round trip, and a window expires falsely exactly when all k are lost:
p^k for renewal loss p. A window is at risk only if the lease is still held
when it would run out, so per lease the false expiries are p^k A(TTL), with
A(TTL) = S(TTL) + (1 - p) sum_j S(TTL + jI) over the measured holds' survival
S. The rule takes the smallest k with p^k A(kI + margin) at or below the
target, TTL = kI + `MARGIN_S`: the margin keeps the TTL off the knife edge
TTL = nI, where the n-th renewal arrives too late in the first window and in
time only half the time in later ones (`window_expiry_probability`).

**The heartbeat.** Given, or the scenario's when there is no detection bound.
With a bound D and no heartbeat given: renewal traffic is 3600 / I per held
hour whatever the TTL, so the fewest renewals is the longest I; the rule
takes the longest whole-second I whose TTL is detected within D in the worst
case, TTL + the reaper's cadence + `FLIGHT_S` (a crash just before a
renewal would have landed, found by the reaper one cadence late).

**The confirmation.** The rule's TTL and the TTL one heartbeat shorter are
played through `sweep.sweep_rows` (local processes or Dask; rows do not
depend on which) on seeds the hold measurement did not use, renewal loss on
`renew_lease` alone, one crash placed on a busy worker mid-run so each run
measures one detection exactly. False expiries are pooled per TTL over
leases, a lease expiring at most once, with the exact binomial interval
(`stats.binomial_interval`, two-sided at the confidence, so its upper end is
a one-sided bound at (1 + confidence) / 2: conservative, never generous).
The answer is confirmed when the rule's TTL has that upper end at or below
the target, its crashes were detected within the bound (measured, and the
closed form's worst case), and every run held every invariant. With no seeds
given, the number of runs is planned from the closed form: enough leases
that, if the closed form is right, the bound reaches the target nine times in
ten. When that needs more runs than the default scale plays, or the seeds
given are too few, the result says so and how many leases it would take; it
never claims a bound the counts do not give.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from shiftchange.core import InputError
from shiftchange.core.table import Table
from shiftchange.sim.config import SimConfig
from shiftchange.sim.scenarios import scenario_config

from .lease_model import (
    FLIGHT_S,
    LEASES_PLANNED_MAX,
    MARGIN_S,
    SCENARIO,
    Holds,
    LeaseRule,
    _number,
    at_risk_per_lease,
    detect_bound_s,
    false_expiries_per_lease,
    lease_rule,
    lease_ttl_for,
    leases_to_confirm,
    leases_to_refute,
    measure_holds,
    window_expiry_probability,
)
from .settings import apply, diff
from .stats import binomial_interval
from .sweep import EXECUTORS, resolve_table, sweep_rows

__all__ = [
    "FLIGHT_S",
    "MARGIN_S",
    "Holds",
    "LeaseRule",
    "LeaseTuning",
    "TtlCheck",
    "at_risk_per_lease",
    "detect_bound_s",
    "false_expiries_per_lease",
    "lease_rule",
    "lease_ttl_for",
    "leases_to_confirm",
    "leases_to_refute",
    "measure_holds",
    "tune_lease",
    "window_expiry_probability",
]


RENEWALS = "renew_lease"
"""The one contract call the renewal loss falls on."""
TASKS_DEFAULT = 300
SEED_FIRST = 100
"""With no seeds given the confirmation plays seeds from here up: never the hold runs' seeds."""
RUNS_MAX = 120
"""With no seeds given, the rule's TTL is played on at most this many runs (the default scale: under two minutes on two cores)."""
SHORTER_RUNS_MAX = 30
"""And the TTL one heartbeat shorter, which only shows the rule is tight, on at most this many."""
CRASH_RESTART_S = 30.0
"""The placed crash's worker comes back after this long (the workers' own default restart)."""
HOLDS_THIN = 10
"""A closed form resting on fewer measured holds longer than the TTL than this is flagged: the runs, not it, are the evidence."""


# ------------------------------------------------------------------ the answer


@dataclass(frozen=True)
class TtlCheck:
    """The runs at one TTL: pooled false expiries over leases with their exact interval, and the crashes' detection."""

    lease_ttl_s: float
    renewals_per_window: int
    closed_form_per_1000_leases: float
    runs: int
    seeds: tuple[int, ...]
    invariants_held: bool
    leases: int
    false_expiries: int
    false_expiries_per_1000_leases: float
    interval_low_per_1000_leases: float
    interval_high_per_1000_leases: float
    """The exact binomial interval at the tuning's confidence (two-sided), per 1,000 leases."""
    closed_form_inside: bool
    """Whether the closed form's rate lies inside the interval."""
    crashes_detected: int
    detect_s_mean: float | None
    detect_s_max: float | None
    detect_bound_s: float
    replays: tuple[str, ...]
    """The `shiftchange sim run` command of each run, in seed order."""
    failed_replays: tuple[str, ...]
    """Those of the runs that violated an invariant or could not judge one."""


@dataclass(frozen=True)
class LeaseTuning:
    """The lease question's answer, the rule behind it, the runs that check it and whether each target holds."""

    lease_ttl_s: float
    heartbeat_interval_s: float
    rule: str
    heartbeat_rule: str
    renewals_per_window: int
    closed_form_per_1000_leases: float
    tool_call_s: float
    tool_calls: int
    arrival_rate_per_s: float
    renewal_loss_probability: float
    target_per_1000_leases: float
    confidence: float
    detect_max_s: float | None
    reap_interval_s: float
    detect_bound_s: float
    holds_measured: int
    hold_s_mean: float
    hold_s_max: float
    hold_replays: tuple[str, ...]
    checks: tuple[TtlCheck, ...]
    """The rule's TTL first, then the TTL one heartbeat shorter (when there is one)."""
    false_expiry_target_met: bool
    detect_target_met: bool | None
    """None when no detection bound was given."""
    invariants_held: bool
    confirmed: bool
    leases_needed: int | None
    """When the target was not confirmed: about how many leases would confirm it at the closed form's rate (None: none would)."""
    notes: tuple[str, ...]

    @property
    def answer(self) -> str:
        """The one-line answer: "lease TTL X s, heartbeat Y s (rule: ...)"."""
        return (
            f"lease TTL {self.lease_ttl_s:g} s, heartbeat {self.heartbeat_interval_s:g} s"
            f" (rule: {self.rule}; heartbeat: {self.heartbeat_rule})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready values, the answer line included."""
        return {"answer": self.answer, **asdict(self)}


def tune_lease(
    tool_call_s: float,
    renewal_loss: float,
    target_per_1000_leases: float,
    confidence: float = 0.95,
    detect_max_s: float | None = None,
    heartbeat_s: float | None = None,
    tool_calls: int | None = None,
    seeds: Iterable[int] | None = None,
    tasks: int = TASKS_DEFAULT,
    jobs: int | None = None,
    executor: str = "processes",
    progress: bool = False,
    spec: str | Table | None = None,
) -> LeaseTuning:
    """Choose the lease TTL and heartbeat for a target, and confirm them in simulation (see the module docstring).

    `tool_call_s` is the mean of the tool calls' exponential duration, `tool_calls` how many an Attempt makes (default:
    the baseline's); `renewal_loss` the probability a renewal is lost; the target is false expiries per 1,000 leases at
    `confidence`, and optionally crashes detected within `detect_max_s`. `heartbeat_s` fixes the interval. `seeds` and
    `tasks` set the scale (no seeds: planned from the closed form, at most `RUNS_MAX` runs); `jobs` and `executor`
    ("processes" or "dask") where the runs play. `spec` is the transition table every run plays (a spec folder, a git
    revision or a `Table`; default: the packaged spec). Bad input raises `InputError` before anything runs.
    """
    _check(tool_call_s, renewal_loss, target_per_1000_leases, confidence, detect_max_s, heartbeat_s, tool_calls, tasks, jobs, executor)
    table = resolve_table(spec)
    listed = _listed_seeds(seeds)
    config = _config(tool_call_s, tool_calls, tasks, heartbeat_s)
    holds = measure_holds(config, table=table)
    reap_interval_s = config.control.reap_interval_s
    rule = lease_rule(target_per_1000_leases, renewal_loss, holds.holds_s, heartbeat_s, detect_max_s, reap_interval_s)
    target = target_per_1000_leases / 1000
    notes = [] if holds.invariants_held else ["a lossless run measuring the holds violated an invariant: replay it"]
    plans = [(rule.lease_ttl_s, rule.closed_form_per_1000_leases / 1000, True)]
    if rule.shorter_ttl_s is not None:
        plans.append((rule.shorter_ttl_s, rule.shorter_closed_form_per_1000_leases / 1000, False))
    needed = leases_to_confirm(plans[0][1], target, confidence)
    checks = []
    for ttl_s, rate, candidate in plans:
        played = listed
        if played is None:
            planned = needed if candidate else leases_to_refute(rate, target, confidence)
            most = RUNS_MAX if candidate else SHORTER_RUNS_MAX
            runs = most if planned is None else min(most, max(1, math.ceil(planned / holds.leases_per_run)))
            played = list(range(SEED_FIRST, SEED_FIRST + runs))
        checks.append(_check_ttl(config, rule, ttl_s, renewal_loss, played, confidence, holds, jobs, executor, progress, table))
    best = checks[0]
    met = best.interval_high_per_1000_leases <= target_per_1000_leases
    detect_met = None
    if detect_max_s is not None:
        detect_met = rule.detect_bound_s <= detect_max_s and best.detect_s_max is not None and best.detect_s_max <= detect_max_s
    held = holds.invariants_held and all(check.invariants_held for check in checks)
    notes += _notes(rule, holds, checks, met, needed, target_per_1000_leases, detect_max_s, listed is None)
    return LeaseTuning(
        lease_ttl_s=rule.lease_ttl_s,
        heartbeat_interval_s=rule.heartbeat_interval_s,
        rule=rule.rule,
        heartbeat_rule=rule.heartbeat_rule,
        renewals_per_window=rule.renewals_per_window,
        closed_form_per_1000_leases=rule.closed_form_per_1000_leases,
        tool_call_s=float(tool_call_s),
        tool_calls=config.workflow.tool_calls,
        arrival_rate_per_s=config.workload.arrival_rate_per_s,
        renewal_loss_probability=float(renewal_loss),
        target_per_1000_leases=float(target_per_1000_leases),
        confidence=float(confidence),
        detect_max_s=None if detect_max_s is None else float(detect_max_s),
        reap_interval_s=reap_interval_s,
        detect_bound_s=rule.detect_bound_s,
        holds_measured=len(holds.holds_s),
        hold_s_mean=holds.hold_s_mean,
        hold_s_max=max(holds.holds_s),
        hold_replays=holds.replays,
        checks=tuple(checks),
        false_expiry_target_met=met,
        detect_target_met=detect_met,
        invariants_held=held,
        confirmed=met and detect_met is not False and held,
        leases_needed=None if met else needed,
        notes=tuple(notes),
    )


def _config(tool_call_s: float, tool_calls: int | None, tasks: int, heartbeat_s: float | None) -> SimConfig:
    """The scenario with the question's tool calls (arrivals slowed in proportion to longer ones) and renewal-only loss."""
    base = scenario_config(SCENARIO, 0, tasks)
    workload = base.workload
    calls = base.workflow.tool_calls if tool_calls is None else tool_calls
    slower = (base.workflow.tool_calls * workload.tool_call_s) / (calls * tool_call_s)
    changes: dict[str, Any] = {
        "workload.tool_call_s": float(tool_call_s),
        "workflow.tool_calls": calls,
        "workload.arrival_rate_per_s": workload.arrival_rate_per_s * min(1.0, slower),
        "network.lossy_calls": RENEWALS,
    }
    if heartbeat_s is not None:
        changes["core.heartbeat_interval_s"] = float(heartbeat_s)
        changes["core.lease_ttl_s"] = max(base.core.lease_ttl_s, float(heartbeat_s) + MARGIN_S)
    return apply(base, changes)


def _check_ttl(
    config: SimConfig,
    rule: LeaseRule,
    ttl_s: float,
    loss: float,
    seeds: list[int],
    confidence: float,
    holds: Holds,
    jobs: int | None,
    executor: str,
    progress: bool,
    table: Table | None = None,
) -> TtlCheck:
    """Play one TTL on the seeds through the sweep, a crash placed mid-run in each, and pool what the runs counted."""
    crash_at_s = round(config.workload.arrival_span_s() / 2)
    overrides = {
        **_changed(config),
        "network.loss_probability": loss,
        "core.heartbeat_interval_s": rule.heartbeat_interval_s,
        "core.lease_ttl_s": ttl_s,
    }
    rows = sweep_rows(
        {},
        seeds,
        SCENARIO,
        config.workload.tasks,
        overrides,
        jobs=jobs,
        executor=executor,
        progress=progress,
        faults=[f"crash busy at={crash_at_s} for={CRASH_RESTART_S:g}"],
        spec=table,
    )
    leases = sum(row["leases"] for row in rows)
    false = sum(row["false_expiries"] for row in rows)
    low, high = binomial_interval(false, leases, confidence)
    detections = [row["crash_detect_s_mean"] for row in rows if row["crash_detect_count"] == 1]
    closed_form = 1000 * false_expiries_per_lease(ttl_s, rule.heartbeat_interval_s, loss, holds.holds_s)
    return TtlCheck(
        lease_ttl_s=ttl_s,
        renewals_per_window=int(ttl_s // rule.heartbeat_interval_s) - (ttl_s % rule.heartbeat_interval_s == 0),
        closed_form_per_1000_leases=closed_form,
        runs=len(rows),
        seeds=tuple(seeds),
        invariants_held=all(row["ok"] for row in rows),
        leases=leases,
        false_expiries=false,
        false_expiries_per_1000_leases=1000 * false / leases if leases else 0.0,
        interval_low_per_1000_leases=1000 * low,
        interval_high_per_1000_leases=1000 * high,
        closed_form_inside=1000 * low <= closed_form <= 1000 * high,
        crashes_detected=len(detections),
        detect_s_mean=sum(detections) / len(detections) if detections else None,
        detect_s_max=max(detections) if detections else None,
        detect_bound_s=detect_bound_s(ttl_s, config.control.reap_interval_s),
        replays=tuple(row["replay"] for row in rows),
        failed_replays=tuple(row["replay"] for row in rows if not row["ok"]),
    )


def _changed(config: SimConfig) -> dict[str, Any]:
    """The settings `_config` changed from the scenario, as sweep overrides."""
    return diff(scenario_config(SCENARIO, 0, config.workload.tasks), config)


def _notes(
    rule: LeaseRule,
    holds: Holds,
    checks: list[TtlCheck],
    met: bool,
    needed: int | None,
    target_per_1000: float,
    detect_max_s: float | None,
    planned: bool,
) -> list[str]:
    """What the reader should know beside the verdicts: thin evidence, an unconfirmed bound and why, a rule not shown tight."""
    notes = []
    best = checks[0]
    outlasting = sum(hold_s >= rule.lease_ttl_s for hold_s in holds.holds_s)
    if outlasting < HOLDS_THIN:
        notes.append(
            f"only {outlasting} of {len(holds.holds_s)} measured holds outlast the TTL: the closed form rests on the holds' thin tail"
        )
    if not met:
        if best.interval_low_per_1000_leases > target_per_1000:
            notes.append(
                f"the simulated rate at TTL {best.lease_ttl_s:g} s is above the target (lower bound"
                f" {best.interval_low_per_1000_leases:.3g} per 1,000): the closed form is not confirmed,"
                " and more leases will not confirm it"
            )
        elif needed is None:
            notes.append(
                f"{best.leases:,} leases bound the rate only below {best.interval_high_per_1000_leases:.3g} per 1,000, and at the"
                f" closed form's rate confirming {target_per_1000:g} per 1,000 would take more than {LEASES_PLANNED_MAX:,} leases"
            )
        else:
            scale = "the default scale plays at most" if planned else "the seeds given play"
            notes.append(
                f"{best.leases:,} leases bound the rate only below {best.interval_high_per_1000_leases:.3g} per 1,000;"
                f" confirming {target_per_1000:g} per 1,000 takes about {needed:,} leases"
                f" ({math.ceil(needed / holds.leases_per_run):,} runs of about {holds.leases_per_run:.0f} leases; {scale}"
                f" {best.runs:,}): give more --seeds"
            )
    if len(checks) > 1 and checks[1].interval_low_per_1000_leases <= target_per_1000:
        notes.append(
            f"one heartbeat shorter (TTL {checks[1].lease_ttl_s:g} s) was not shown to miss the target"
            f" (lower bound {checks[1].interval_low_per_1000_leases:.3g} per 1,000): the rule may not be tight here"
        )
    if detect_max_s is not None and not rule.detect_feasible:
        notes.append(f"no heartbeat's TTL is detected within {detect_max_s:g} s in the worst case at this target: the targets conflict")
    if detect_max_s is not None and best.crashes_detected == 0:
        notes.append("no placed crash struck a held lease, so detection was not measured")
    return notes


# ------------------------------------------------------------------ input


def _check(
    tool_call_s: Any,
    renewal_loss: Any,
    target_per_1000_leases: Any,
    confidence: Any,
    detect_max_s: Any,
    heartbeat_s: Any,
    tool_calls: Any,
    tasks: Any,
    jobs: Any,
    executor: Any,
) -> None:
    """Every argument on its own, then what the reaper makes impossible: bad input is one line before any run."""
    _number("the tool-call mean (s)", tool_call_s, 0, math.inf)
    _number("the renewal loss probability", renewal_loss, 0, 1, low_open=False)
    _number("the target (false expiries per 1,000 leases)", target_per_1000_leases, 0, 1000)
    _number("the confidence", confidence, 0, 1)
    if heartbeat_s is not None:
        _number("the heartbeat interval (s)", heartbeat_s, 0, math.inf)
    for name, value in (("tool calls per Attempt", tool_calls), ("tasks", tasks), ("jobs", jobs)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{name} must be a whole number, at least 1, not {value!r}")
    if executor not in EXECUTORS:
        raise InputError(f"the executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if executor == "dask" and importlib.util.find_spec("distributed") is None:
        raise InputError("the dask executor needs Dask: pip install 'shiftchange[dask]'")
    if detect_max_s is not None:
        _number("the detection bound (s)", detect_max_s, 0, math.inf)
        reap_interval_s = scenario_config(SCENARIO, 0).control.reap_interval_s
        shortest_s = detect_bound_s((heartbeat_s or 1.0) + MARGIN_S, reap_interval_s)
        if detect_max_s < shortest_s:
            every = f"a {heartbeat_s:g} s" if heartbeat_s is not None else "even a 1 s"
            raise InputError(
                f"no lease is detected within {detect_max_s:g} s: {every} heartbeat's shortest TTL is detected up to {shortest_s:g} s"
                f" after a crash (TTL + reaper {reap_interval_s:g} s + {FLIGHT_S:g} s in flight)"
            )


def _listed_seeds(seeds: Iterable[int] | None) -> list[int] | None:
    if seeds is None:
        return None
    listed = list(seeds)
    if not listed:
        raise InputError("the confirmation needs at least one seed")
    for seed in listed:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"a seed must be a whole number, not negative, not {seed!r}")
    if len(set(listed)) != len(listed):
        raise InputError(f"seed {next(seed for seed in listed if listed.count(seed) > 1)} is given twice")
    return listed
