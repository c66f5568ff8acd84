"""The model behind `sim tune lease`: the closed form of a lease's false expiries under lost renewals, the hold times
measured from seeded runs, the rule that turns them into a TTL, and how many leases a run must hold to confirm or
refute a rate (why each formula: `tune`'s docstring)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shiftchange.core import Event, InputError
from shiftchange.core.table import Table, packaged
from shiftchange.sim.config import SimConfig
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play

from .report import replay_command
from .settings import apply
from .stats import binomial_tail_ge, binomial_tail_le

SCENARIO = "baseline"
"""The world the lease question is asked of: no faults but the ones switched on here."""
MARGIN_S = 5.0
"""TTL = kI + MARGIN_S: far above a round trip (two one-way delays of 20 ms mean), so no renewal lands on a window's edge."""
FLIGHT_S = 1.0
"""Room for one message in flight in the detection bound: 50 mean one-way delays (an exponential tail of e^-50)."""
HOLD_SEEDS = (0, 1)
"""The lossless runs whose holds the rule works from."""
PLAN_CHANCE = 0.9
"""Planned runs give the bound this chance of reaching the target if the closed form is right."""
LEASES_PLANNED_MAX = 10_000_000
"""Planning looks no further than this many leases: a target that needs more is reported as needing more."""
RULE = "the lease-tuning closed form, the smallest k with p^k A(kI + {margin:g} s) <= {target:g} per 1,000 leases: k = {k}"


# ------------------------------------------------------------------ the closed form


def window_expiry_probability(ttl_s: float, heartbeat_s: float, loss: float, first_window: bool) -> float:
    """P(an at-risk window expires falsely): p^k when k renewals land in it, one fewer (or even odds of one fewer) on the knife edge.

    Off the knife edge (TTL not a multiple of I) k = floor(TTL / I). At TTL = nI the n-th renewal arrives a round
    trip after the first window's end, so p^(n-1) there; in later windows it beats the expiry exactly when it
    travels faster than the renewal that opened the window, even odds, so p^(n-1) (1 + p) / 2.
    """
    whole, rest_s = divmod(ttl_s, heartbeat_s)
    renewals = int(whole)
    if rest_s > 0:
        return loss**renewals
    if first_window:
        return loss ** (renewals - 1)
    return loss ** (renewals - 1) * (1 + loss) / 2


def at_risk_per_lease(ttl_s: float, heartbeat_s: float, loss: float, holds_s: Sequence[float]) -> float:
    """A(TTL) over leases held `holds_s`: the claim's window if the hold outlasts a TTL, and each later window (opened with
    probability 1 - p) it outlasts by a TTL."""
    first, later = _at_risk(ttl_s, heartbeat_s, holds_s)
    return first + (1 - loss) * later


def _at_risk(ttl_s: float, heartbeat_s: float, holds_s: Sequence[float]) -> tuple[float, float]:
    """Per lease: the claim's windows at risk, and the later windows that would be at risk were every renewal accepted."""
    if len(holds_s) == 0:  # a NumPy array of holds has no truth value
        raise InputError("the closed form needs at least one measured hold time")
    outlasting = [hold_s for hold_s in holds_s if hold_s >= ttl_s]
    later = sum(math.floor((hold_s - ttl_s) / heartbeat_s) for hold_s in outlasting)
    return len(outlasting) / len(holds_s), later / len(holds_s)


def false_expiries_per_lease(ttl_s: float, heartbeat_s: float, loss: float, holds_s: Sequence[float]) -> float:
    """The closed form's false expiries per lease at any TTL: each at-risk window times its chance, knife edges included.

    Off the knife edge this is p^k A(TTL), the rule's rate.
    """
    first, later = _at_risk(ttl_s, heartbeat_s, holds_s)
    return (
        window_expiry_probability(ttl_s, heartbeat_s, loss, True) * first
        + window_expiry_probability(ttl_s, heartbeat_s, loss, False) * (1 - loss) * later
    )


def lease_ttl_for(
    target_per_lease: float, loss: float, heartbeat_s: float, holds_s: Sequence[float], margin_s: float = MARGIN_S
) -> tuple[float, int, float]:
    """The shortest TTL = kI + margin whose closed-form false expiries per lease, p^k A(TTL), are at most the target: (TTL, k, rate).

    It always ends: a TTL longer than every measured hold has no window at risk (which is why `tune_lease` flags an
    answer that rests on few holds longer than its TTL).
    """
    renewals = 1
    while True:
        ttl_s = renewals * heartbeat_s + margin_s
        rate = loss**renewals * at_risk_per_lease(ttl_s, heartbeat_s, loss, holds_s)
        if rate <= target_per_lease:
            return ttl_s, renewals, rate
        renewals += 1


def detect_bound_s(ttl_s: float, reap_interval_s: float) -> float:
    """The longest a crash can take to be detected: the lease runs out a TTL after its last grant, which came at most a
    message's flight after the crash, and the reaper finds it within one cadence."""
    return ttl_s + reap_interval_s + FLIGHT_S


# ------------------------------------------------------------------ the hold times


@dataclass(frozen=True)
class Holds:
    """How long leases are held in lossless runs of a workload: what the rule's A(TTL) works from."""

    holds_s: tuple[float, ...]
    """Each lease's hold, from its claim to the moment it stopped being expirable, in run order."""
    runs: int
    leases_per_run: float
    invariants_held: bool
    replays: tuple[str, ...]
    """The `shiftchange sim run` command of each run measured."""

    @property
    def hold_s_mean(self) -> float:
        """The mean hold."""
        return sum(self.holds_s) / len(self.holds_s)


class _HoldClock:
    """A history sink that times each lease from its accepted claim until it leaves the expirable states."""

    def __init__(self, ttl_s: float, expirable: frozenset[str]) -> None:
        self.ttl_s = ttl_s
        self.expirable = expirable
        """The states the reaper turns Suspect, as the run's table has them."""
        self.grants: dict[str, tuple[float, float]] = {}
        """Per held Attempt: (claimed at, last granted at)."""
        self.holds_s: list[float] = []

    def __call__(self, entry: Any) -> None:
        if not isinstance(entry, Event) or not entry.accepted or entry.attempt_id is None:
            return
        if entry.kind == "claim":
            self.grants[entry.attempt_id] = (entry.at, entry.at)
            return
        grant = self.grants.get(entry.attempt_id)
        if grant is None:
            return
        if entry.kind == "renew":
            self.grants[entry.attempt_id] = (grant[0], entry.at)
        elif entry.from_state in self.expirable and entry.to_state not in self.expirable:
            del self.grants[entry.attempt_id]
            ended_s = grant[1] + self.ttl_s if entry.kind == "expire" else entry.at  # an expiry ended when the lease ran out
            self.holds_s.append(ended_s - grant[0])


def measure_holds(config: SimConfig, seeds: Iterable[int] = HOLD_SEEDS, table: Table | None = None) -> Holds:
    """Play `config` without loss on each seed, here in this process, and time every lease (nothing but counts is kept).

    `table` is the spec the runs play (None: the packaged one); a lease ends when it leaves that table's expirable states.
    """
    lossless = apply(config, {"network.loss_probability": 0.0})
    expirable = (packaged() if table is None else table).expirable
    holds_s: list[float] = []
    leases, replays, held = 0, [], True
    seeds = list(seeds)
    for seed in seeds:
        clock = _HoldClock(lossless.core.lease_ttl_s, expirable)
        outcome = play(lossless, seed, SCENARIO, series=False, history_sink=clock, table=table)
        holds_s += clock.holds_s
        leases += outcome.metrics["leases"]
        held = held and outcome.ok
        replays.append(replay_command(outcome, table=table))
    if not holds_s:
        raise InputError(f"no lease ended in {len(seeds)} lossless runs of {lossless.workload.tasks} tasks: give more tasks")
    return Holds(tuple(holds_s), len(seeds), leases / len(seeds), held, tuple(replays))


# ------------------------------------------------------------------ the rule


@dataclass(frozen=True)
class LeaseRule:
    """What the closed form proposes, before any run checks it."""

    lease_ttl_s: float
    heartbeat_interval_s: float
    renewals_per_window: int
    """k: renewals that land in a window when none is lost."""
    closed_form_per_1000_leases: float
    shorter_ttl_s: float | None
    """One heartbeat shorter, the TTL the rule rejected (None when that would be no longer than the heartbeat)."""
    shorter_closed_form_per_1000_leases: float | None
    detect_bound_s: float
    """The rule's TTL's worst-case time to detect a crash (`detect_bound_s`)."""
    rule: str
    heartbeat_rule: str
    detect_feasible: bool
    """False when a detection bound was given and no heartbeat's TTL meets it (then the heartbeat detects soonest)."""


def lease_rule(
    target_per_1000_leases: float,
    renewal_loss: float,
    holds_s: Sequence[float],
    heartbeat_s: float | None = None,
    detect_max_s: float | None = None,
    reap_interval_s: float | None = None,
) -> LeaseRule:
    """The rule's TTL and heartbeat for a target over leases held `holds_s` (arithmetic only; see the module docstring).

    `heartbeat_s` fixes the interval; else, with `detect_max_s`, the longest whole-second interval whose TTL is detected
    within it; else the baseline scenario's (whose reaper cadence is also `reap_interval_s`'s default).
    """
    baseline = scenario_config(SCENARIO, 0)
    reap_interval_s = baseline.control.reap_interval_s if reap_interval_s is None else reap_interval_s
    target = target_per_1000_leases / 1000
    feasible = True
    if heartbeat_s is not None:
        heartbeat_rule = "given"
    elif detect_max_s is None:
        heartbeat_s = baseline.core.heartbeat_interval_s
        heartbeat_rule = f"the {SCENARIO} scenario's (no detection bound given)"
    else:
        heartbeat_s, feasible = _longest_heartbeat(target, renewal_loss, holds_s, detect_max_s, reap_interval_s)
        heartbeat_rule = (
            f"the longest whole-second interval whose TTL is detected within {detect_max_s:g} s"
            f" (TTL + reaper {reap_interval_s:g} s + {FLIGHT_S:g} s in flight): the fewest renewals"
            if feasible
            else f"none meets the {detect_max_s:g} s detection bound, so the one detected soonest"
        )
    ttl_s, renewals, rate = lease_ttl_for(target, renewal_loss, heartbeat_s, holds_s)
    rule = RULE.format(margin=MARGIN_S, target=target_per_1000_leases, k=renewals)
    shorter_s = ttl_s - heartbeat_s if renewals > 1 else None
    shorter_rate = None if shorter_s is None else false_expiries_per_lease(shorter_s, heartbeat_s, renewal_loss, holds_s)
    bound_s = detect_bound_s(ttl_s, reap_interval_s)
    if detect_max_s is not None and bound_s > detect_max_s:
        feasible = False
    return LeaseRule(
        lease_ttl_s=ttl_s,
        heartbeat_interval_s=heartbeat_s,
        renewals_per_window=renewals,
        closed_form_per_1000_leases=1000 * rate,
        shorter_ttl_s=shorter_s,
        shorter_closed_form_per_1000_leases=None if shorter_rate is None else 1000 * shorter_rate,
        detect_bound_s=bound_s,
        rule=rule,
        heartbeat_rule=heartbeat_rule,
        detect_feasible=feasible,
    )


def _longest_heartbeat(
    target: float, loss: float, holds_s: Sequence[float], detect_max_s: float, reap_interval_s: float
) -> tuple[float, bool]:
    """The longest whole-second heartbeat whose rule TTL meets the detection bound, and True; else the soonest detected, and False."""
    longest_ttl_s = detect_max_s - reap_interval_s - FLIGHT_S
    soonest: tuple[float, float] | None = None
    for heartbeat_s in range(max(1, math.floor(longest_ttl_s - MARGIN_S)), 0, -1):
        ttl_s = lease_ttl_for(target, loss, float(heartbeat_s), holds_s)[0]
        if ttl_s <= longest_ttl_s:
            return float(heartbeat_s), True
        if soonest is None or ttl_s < soonest[0]:
            soonest = (ttl_s, float(heartbeat_s))
    assert soonest is not None
    return soonest[1], False


# ------------------------------------------------------------------ planning the runs


def _quantile(n: int, rate: float, chance: float, upper: bool) -> int:
    """The count K ~ Binomial(n, rate) stays at or below with `chance` (upper: the least such k), or at or above (the most).

    Searched within twelve standard deviations of the mean: a tail summed from much farther out starts where the terms
    underflow, and would be summed term by term to the end.
    """
    spread = 12 * math.sqrt(n * rate * (1 - rate)) + 12
    floor_k, ceiling_k = max(0, math.floor(n * rate - spread)), min(n, math.ceil(n * rate + spread))
    if upper:  # the least k with P(K <= k) >= chance
        low, high = floor_k - 1, ceiling_k
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if binomial_tail_le(middle, n, rate) >= chance else (middle, high)
        return high
    low, high = floor_k, ceiling_k + 1  # the most k with P(K >= k) >= chance
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if binomial_tail_ge(middle, n, rate) >= chance else (low, middle)
    return low


def _fewest(meets: Callable[[int], bool], start: int, leases_max: int) -> int | None:
    """The smallest n in [start, leases_max] where `meets(n)` (assumed to hold from some n on), or None: by doubling then halving."""
    low, high = start - 1, start
    while not meets(high):
        if high >= leases_max:
            return None
        low, high = high, min(2 * high, leases_max)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high


def leases_to_confirm(
    rate_per_lease: float, target_per_lease: float, confidence: float, leases_max: int = LEASES_PLANNED_MAX
) -> int | None:
    """The fewest leases at which, with false expiries at `rate_per_lease`, the interval's upper end reaches the target
    with chance `PLAN_CHANCE`; None if no number up to `leases_max` does (a rate at or above the target never does).

    The interval is `stats.binomial_interval`'s: its upper end for k events in n is at or below the target exactly when
    seeing k or fewer at the target's rate has probability at most (1 - confidence) / 2, so one tail decides each n.
    """
    _plannable(rate_per_lease, target_per_lease, confidence)
    if rate_per_lease >= target_per_lease:
        return None
    tail = (1 - confidence) / 2

    def meets(n: int) -> bool:
        return binomial_tail_le(_quantile(n, rate_per_lease, PLAN_CHANCE, True), n, target_per_lease) <= tail

    fewest_s = math.log(tail) / math.log1p(-target_per_lease)  # even no event needs this many leases to bound the rate
    return _fewest(meets, max(1, math.floor(fewest_s)), leases_max)


def leases_to_refute(rate_per_lease: float, target_per_lease: float, confidence: float, leases_max: int = LEASES_PLANNED_MAX) -> int | None:
    """The fewest leases at which, with false expiries at `rate_per_lease`, the interval's lower end clears the target with
    chance `PLAN_CHANCE`; None if no number up to `leases_max` does (a rate at or below the target never does)."""
    _plannable(rate_per_lease, target_per_lease, confidence)
    if rate_per_lease <= target_per_lease:
        return None
    tail = (1 - confidence) / 2

    def meets(n: int) -> bool:
        return binomial_tail_ge(_quantile(n, rate_per_lease, PLAN_CHANCE, False), n, target_per_lease) < tail

    return _fewest(meets, 1, leases_max)


def _plannable(rate_per_lease: float, target_per_lease: float, confidence: float) -> None:
    _number("a rate per lease", rate_per_lease, 0, 1, low_open=False, high_open=False)
    _number("a target per lease", target_per_lease, 0, 1)
    _number("the confidence", confidence, 0, 1)


def _number(name: str, value: Any, low: float, high: float, low_open: bool = True, high_open: bool = True) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        raise InputError(f"{name} must be a number in {left}{low:g}, {high:g}{right}, not {value!r}")
