"""Recovery, judged in one place with one meaning: after a trigger ends, a dependency's goodput comes back to a level.

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
judged on a run's time series (rows of windows, `t_s` and `window_s`, with a
`DEPENDENCY.answered` count of calls answered by their deadline), not by a
fold over the history. What "recovered" means, everywhere it is asked:

- `recovered_after_s`: from the trigger's end to the end of the first
  `settle_windows` series windows in a row whose goodput (answered calls per
  second over those windows) reaches the level asked for. The
  `goodput_recovers` verdict asks for one window; a phase map
  (`lab.phase`) for several, so a limit cycle that touches the level once
  does not read as recovered;
- `evidence`: what sustained a bad state over a span after the trigger:
  retries' share of the calls offered (retry amplification), the share of the
  provider's work in progress whose callers had given up (abandoned work),
  timeouts' share of calls, and the queue at the trigger's end and late.

The `goodput_recovers` verdict (`judge`): for each placed provider fault
(the triggers, `--fault`), the provider's goodput over `baseline_s` before
the trigger is the level to recover to; it is violated when the goodput is
not back at `goodput_fraction` of it within `bound_s` while tasks were still
arriving, and unknown when the run cannot tell (no goodput before the
trigger, or arrivals stopped or the run ended before the bound). A violation
names the sustaining effects the evidence shows over the bound.

The simulator runs the verdict only when `SimConfig.recovery` is set (the
retry-storm scenario sets it); its result joins the run's verdicts as
`goodput_recovers` and its figures join the metrics (`recovery_s`, the
longest recovery; `goodput_before_per_s`, `goodput_after_per_s`). The time a
*task* takes to be claimed again after a fault hit its holder is another
measure, `crash_recover_s` (`measures`): a task's recovery, not the world's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .history import OK, UNKNOWN, VIOLATED, Fault, Verdict

NAME = "goodput_recovers"
TRIGGERS = ("outage", "slowdown", "capacity_drop", "lost_responses", "revoked_credentials")
"""The placed faults of a provider that count as triggers."""
EFFECT_SHARE_MIN = 0.2
"""A sustaining effect is named when it accounts for at least this share of what it is measured against."""
VERDICT_SETTLE_WINDOWS = 1
"""`goodput_recovers` counts a dependency back at the end of the first window at the level."""


class Bounds(Protocol):
    """What the verdict is stated against (the simulator's `RecoveryConfig`): the level's span, the fraction, the bound."""

    baseline_s: float
    goodput_fraction: float
    bound_s: float


def rate(rows: Sequence[dict[str, Any]], column: str) -> float | None:
    """`column` per second over these windows (None over no time)."""
    span_s = sum(row["window_s"] for row in rows)
    return None if span_s <= 0 else sum(row[column] for row in rows) / span_s


def share(rows: Sequence[dict[str, Any]], part: str, whole: str) -> float | None:
    """`part` as a share of `whole` over these windows, to a millionth (None when `whole` is zero)."""
    total = sum(row[whole] for row in rows)
    return None if total <= 0 else round(sum(row[part] for row in rows) / total, 6)


def recovered_after_s(rows: Sequence[dict[str, Any]], answered: str, end_s: float, level_per_s: float, settle_windows: int) -> float | None:
    """From the trigger's end (`end_s`) to the end of the first `settle_windows` windows in a row whose goodput reaches
    `level_per_s`; None if it never does in these rows. The one meaning of "recovered" (see the module docstring)."""
    after = [row for row in rows if row["t_s"] >= end_s and row["window_s"] > 0]
    for first in range(len(after) - settle_windows + 1):
        span = after[first : first + settle_windows]
        if (rate(span, answered) or 0.0) >= level_per_s:
            return round(span[-1]["t_s"] + span[-1]["window_s"] - end_s, 6)
    return None


def evidence(rows: Sequence[dict[str, Any]], dependency: str, end_s: float, until_s: float) -> dict[str, Any]:
    """What sustained a bad state (or did not), over the whole windows from the trigger's end to `until_s`: the shares of
    retries, abandoned work and timeouts, and the queue at the trigger's end and at the span's last window."""
    after = [row for row in rows if row["t_s"] >= end_s and row["t_s"] + row["window_s"] <= max(until_s, end_s)]
    before = next((row for row in reversed(rows) if row["t_s"] < end_s), None)
    return {
        "retry_share": share(after, f"{dependency}.retried", f"{dependency}.offered"),
        "abandoned_share": share(after, f"{dependency}.abandoned", f"{dependency}.working"),
        "timeout_share": share(after, f"{dependency}.timed_out", f"{dependency}.offered"),
        "queue_depth_at_trigger_end": before["queue_depth"] if before else 0,
        "queue_depth_late": after[-1]["queue_depth"] if after else None,
    }


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


def judge(rows: Sequence[dict[str, Any]], faults: Sequence[Fault], config: Bounds) -> tuple[Verdict, list[TriggerRecovery]]:
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


def _one(rows: Sequence[dict[str, Any]], fault: Fault, config: Bounds, arrivals_end_s: float) -> TriggerRecovery:
    dependency = fault.target
    answered = f"{dependency}.answered"
    before_rows = [row for row in rows if row["t_s"] >= fault.at - config.baseline_s and row["t_s"] + row["window_s"] <= fault.at]
    after_rows = [row for row in rows if row["t_s"] >= fault.until and row["t_s"] < fault.until + config.bound_s]
    before = rate(before_rows, answered)
    after = rate(after_rows, answered)
    name = f"{fault.kind} {fault.target} at={fault.at:g} for={fault.until - fault.at:g}"
    back_s = None
    if before is not None and before > 0:
        back_s = recovered_after_s(rows, answered, fault.until, config.goodput_fraction * before, VERDICT_SETTLE_WINDOWS)
    covered = rows[-1]["t_s"] + rows[-1]["window_s"] >= fault.until + config.bound_s and arrivals_end_s >= fault.until + config.bound_s
    if before is None or before <= 0:
        status = UNKNOWN
    elif back_s is not None and back_s <= config.bound_s:
        status = OK
    else:
        status = VIOLATED if covered else UNKNOWN
    span_end_s = after_rows[-1]["t_s"] + after_rows[-1]["window_s"] if after_rows else fault.until
    sustaining = _sustaining(evidence(rows, dependency, fault.until, span_end_s)) if status != OK else ()
    return TriggerRecovery(name, dependency, fault.until, _round(before), _round(after), back_s, status, sustaining)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _sustaining(found: dict[str, Any]) -> tuple[str, ...]:
    """The sustaining effects `evidence` found over the bound, in words, strongest evidence first."""
    effects = []
    if (found["retry_share"] or 0.0) >= EFFECT_SHARE_MIN:
        effects.append(f"retries were {found['retry_share']:.0%} of the calls offered (retry amplification)")
    if (found["abandoned_share"] or 0.0) >= EFFECT_SHARE_MIN:
        effects.append(
            f"{found['abandoned_share']:.0%} of the provider's work in progress was for callers that had given up (abandoned work)"
        )
    if (found["timeout_share"] or 0.0) >= EFFECT_SHARE_MIN:
        effects.append(f"{found['timeout_share']:.0%} of the calls timed out")
    depth_then, depth_late = found["queue_depth_at_trigger_end"], found["queue_depth_late"]
    if depth_late is not None and depth_late > max(10, 2 * depth_then):
        effects.append(f"the queue grew from {depth_then} to {depth_late} (backlog)")
    return tuple(effects)
