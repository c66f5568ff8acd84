"""goodput_recovers: after a trigger ends, a dependency's goodput comes back; a world that stays down is metastable.

A metastable failure (Bronson et al., "Metastable Failures in Distributed
Systems", HotOS 2021; Huang et al., "Metastable Failures in the Wild", OSDI
2022) has three parts: a trigger (an outage, a slowdown, a capacity drop)
pushes a system past capacity; an amplifier makes the overload feed itself;
and a sustaining effect keeps it overloaded after the trigger is gone, so
goodput stays low though the cause has passed. Retries are the usual
sustaining effect: calls time out, are retried, and the provider keeps
working on the calls whose callers gave up, so every new call is slow enough
to time out too.

This is a property of the world, not of one history's records, so it is
judged on the run's time series, not by a fold over the history: for each
placed provider fault (the triggers, `--fault`), the provider's goodput
(calls answered by their deadline, per second) over `baseline_s` before the
trigger is the level to recover to. It has recovered at the end of the
first series window, after the trigger ended, whose goodput is at least
`goodput_fraction` of that level; the verdict is violated when that does not
happen within `bound_s` while tasks were still arriving, and unknown when
the run cannot tell (no goodput before the trigger, or arrivals stopped or
the run ended before the bound). A violation names the sustaining effects
the series shows over the bound: retries' share of the calls offered
(retry amplification), the share of the provider's work in progress whose
callers had given up (abandoned work), timeouts' share of calls, and how the
queue grew (backlog).

The check runs only when `SimConfig.recovery` is set (the retry-storm
scenario sets it); its result joins the run's verdicts as `goodput_recovers`
and its figures join the metrics (`recovery_s`, the longest recovery;
`goodput_before_per_s`, `goodput_after_per_s`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED, Fault, Verdict

from .config import RecoveryConfig

NAME = "goodput_recovers"
TRIGGERS = ("outage", "slowdown", "capacity_drop", "lost_responses", "revoked_credentials")
"""The placed faults of a provider that count as triggers."""
EFFECT_SHARE_MIN = 0.2
"""A sustaining effect is named when it accounts for at least this share of what it is measured against."""


@dataclass(frozen=True, slots=True)
class TriggerRecovery:
    """How one dependency came back (or did not) after one trigger."""

    trigger: str
    """The fault, as its `--fault` text would name it."""
    dependency: str
    ended_at_s: float
    goodput_before_per_s: float | None
    """Calls answered in time per second over the baseline before the trigger; None if the series has no window there."""
    goodput_after_per_s: float | None
    """The same over the bound after the trigger ended (or what of it the run covered)."""
    recovered_after_s: float | None
    """From the trigger's end to the end of the first window back at the level; None if it never came back."""
    status: str
    sustaining: tuple[str, ...]
    """The sustaining effects the series shows after the trigger, each with its figure."""

    def line(self) -> str:
        before = "none" if self.goodput_before_per_s is None else f"{self.goodput_before_per_s:.3g}/s"
        after = "none" if self.goodput_after_per_s is None else f"{self.goodput_after_per_s:.3g}/s"
        back = "not back" if self.recovered_after_s is None else f"back after {self.recovered_after_s:g} s"
        text = f"{self.trigger} (ended t={self.ended_at_s:g}): {self.dependency} goodput {before} before, {after} after, {back}"
        return text + (f"; sustaining: {'; '.join(self.sustaining)}" if self.sustaining else "")


def judge(rows: Sequence[dict[str, Any]], faults: Sequence[Fault], config: RecoveryConfig) -> tuple[Verdict, list[TriggerRecovery]]:
    """The goodput_recovers verdict of a run from its series rows and the faults it played."""
    triggers = [fault for fault in faults if fault.placed and fault.kind in TRIGGERS]
    if not rows or not triggers:
        return Verdict(NAME, UNKNOWN, 0, ("no placed provider fault to recover from, or no series",)), []
    arrivals_end_s = max((row["t_s"] + row["window_s"] for row in rows if row["arrivals"] > 0), default=0.0)
    judged = [_one(rows, fault, config, arrivals_end_s) for fault in triggers]
    violated = [item for item in judged if item.status == VIOLATED]
    if violated:
        example = tuple(item.line() for item in violated[:4])
        return Verdict(NAME, VIOLATED, len(violated), example), judged
    if any(item.status == UNKNOWN for item in judged):
        return Verdict(NAME, UNKNOWN, 0, tuple(item.line() for item in judged if item.status == UNKNOWN)[:4]), judged
    return Verdict(NAME, OK, 0, ()), judged


def metrics(judged: Sequence[TriggerRecovery]) -> dict[str, Any]:
    """The figures a sweep tabulates: the longest recovery (None if any trigger was not recovered from), goodput around it."""
    if not judged:
        return {}
    recovered = [item.recovered_after_s for item in judged]
    befores = [item.goodput_before_per_s for item in judged if item.goodput_before_per_s is not None]
    afters = [item.goodput_after_per_s for item in judged if item.goodput_after_per_s is not None]
    return {
        "recovery_s": None if any(value is None for value in recovered) else max(recovered),
        "goodput_before_per_s": round(min(befores), 6) if befores else None,
        "goodput_after_per_s": round(min(afters), 6) if afters else None,
    }


def _rate(rows: Sequence[dict[str, Any]], column: str) -> float | None:
    span_s = sum(row["window_s"] for row in rows)
    return None if span_s <= 0 else sum(row[column] for row in rows) / span_s


def _one(rows: Sequence[dict[str, Any]], fault: Fault, config: RecoveryConfig, arrivals_end_s: float) -> TriggerRecovery:
    dependency = fault.target
    answered = f"{dependency}.answered"
    before_rows = [row for row in rows if row["t_s"] >= fault.at - config.baseline_s and row["t_s"] + row["window_s"] <= fault.at]
    after_rows = [row for row in rows if row["t_s"] >= fault.until and row["t_s"] < fault.until + config.bound_s]
    before = _rate(before_rows, answered)
    after = _rate(after_rows, answered)
    name = f"{fault.kind} {fault.target} at={fault.at:g} for={fault.until - fault.at:g}"
    recovered_after_s = None
    if before is not None and before > 0:
        for row in rows:
            if row["t_s"] >= fault.until and row["window_s"] > 0 and row[answered] / row["window_s"] >= config.goodput_fraction * before:
                recovered_after_s = round(row["t_s"] + row["window_s"] - fault.until, 6)
                break
    covered = rows[-1]["t_s"] + rows[-1]["window_s"] >= fault.until + config.bound_s and arrivals_end_s >= fault.until + config.bound_s
    if before is None or before <= 0:
        status = UNKNOWN
    elif recovered_after_s is not None and recovered_after_s <= config.bound_s:
        status = OK
    else:
        status = VIOLATED if covered else UNKNOWN
    sustaining = _sustaining(after_rows, dependency, rows, fault) if status != OK else ()
    return TriggerRecovery(name, dependency, fault.until, _round(before), _round(after), recovered_after_s, status, sustaining)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _sustaining(after: Sequence[dict[str, Any]], dependency: str, rows: Sequence[dict[str, Any]], fault: Fault) -> tuple[str, ...]:
    """The sustaining effects visible after the trigger, strongest evidence first."""
    if not after:
        return ()
    offered = sum(row[f"{dependency}.offered"] for row in after)
    effects = []
    if offered:
        retried = sum(row[f"{dependency}.retried"] for row in after) / offered
        if retried >= EFFECT_SHARE_MIN:
            effects.append(f"retries were {retried:.0%} of the calls offered (retry amplification)")
    working = sum(row[f"{dependency}.working"] for row in after)
    if working:
        abandoned = sum(row[f"{dependency}.abandoned"] for row in after) / working
        if abandoned >= EFFECT_SHARE_MIN:
            effects.append(f"{abandoned:.0%} of the provider's work in progress was for callers that had given up (abandoned work)")
    if offered:
        timed_out = sum(row[f"{dependency}.timed_out"] for row in after) / offered
        if timed_out >= EFFECT_SHARE_MIN:
            effects.append(f"{timed_out:.0%} of the calls timed out")
    at_end = next((row for row in reversed(rows) if row["t_s"] < fault.until), None)
    depth_then = at_end["queue_depth"] if at_end is not None else 0
    depth_after = after[-1]["queue_depth"]
    if depth_after > max(10, 2 * depth_then):
        effects.append(f"the queue grew from {depth_then} to {depth_after} (backlog)")
    return tuple(effects)
