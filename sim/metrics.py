"""What a run measured: outcomes, attempts, leases and their expiries, crash detection and recovery, stale writes, queue age, spend.

Metrics are observations, not verdicts (those are the checkers'). They are
gathered from the same stream, plus the one thing only the simulator knows:
ground truth about workers, which the workers report as it happens (what
each holds and when it lets go, its pauses, its crashes, how each renewal
fared).

A lease expiry is judged at the instant the lease ran out (its last grant
plus `lease_ttl_s`), whatever the reaper does next and however late it
runs: the expiry is false when, at that instant, the worker holding the
lease was alive, not paused, and still working on that Attempt (so still
renewing: its heartbeat runs exactly as long as it holds the Attempt). A
worker that gave up on a claim it never heard back about never held it. A
renewal that arrives after the expiry but before the reap is refused and
stops the worker; judged at the instant, that expiry is still false.

A lease window opens with every accepted claim or renewal and lasts
`lease_ttl_s`; the next accepted renewal closes it, or it expires. A crash's
time to detect runs from the crash to its Attempt becoming Suspect, and its
time to recover from the crash to the task's next claim; each mean stands
beside the count it is a mean of. Per-task state is dropped at retirement;
queue waits are kept as an array of doubles, eight bytes per Attempt.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

from shiftchange.core import Event
from shiftchange.core.machine import ATTEMPT_TERMINAL as _TERMINAL
from shiftchange.core.machine import TASK_RESTING, TASK_TERMINAL

from .history import Landed, Retired

_AT_REST = TASK_TERMINAL | TASK_RESTING
RENEWAL_OUTCOMES = ("sent", "unanswered", "accepted", "refused")


class _Holding:
    """One worker's hold on one Attempt, as the worker lived it."""

    __slots__ = ("released_at", "since", "worker_id")

    def __init__(self, worker_id: str, since: float) -> None:
        self.worker_id = worker_id
        self.since = since
        self.released_at: float | None = None


class Metrics:
    """Counters and distributions of one run."""

    def __init__(self, lease_ttl_s: float, series: Any = None) -> None:
        self.lease_ttl_s = lease_ttl_s
        self.series = series
        """The recorder, told of each expiry's verdict and each renewal's fate (None: no time series)."""
        self.final_states: dict[str, int] = {}
        self.attempts = 0
        self.attempts_max = 0
        self.tasks_retired = 0
        self.spend_usd = 0.0
        self.tokens = 0
        self.leases = 0
        self.lease_windows = 0
        self.expiries = 0
        self.false_expiries = 0
        self.first_window_expiries = 0
        self.renewals = dict.fromkeys(RENEWAL_OUTCOMES, 0)
        self.crashes = 0
        self.crashes_holding = 0
        self.stale_writes_refused = 0
        self.effects = 0
        self.duplicate_effects = 0
        self.detect_s = array("d")
        self.recover_s = array("d")
        self.queue_waits_s = array("d")
        self._held: dict[str, _Holding] = {}
        self._expires_at: dict[str, tuple[float, bool]] = {}
        """Per leased Attempt: when its lease runs out, and whether that window is still the first (no renewal yet)."""
        self._pauses: dict[str, list[tuple[float, float]]] = {}
        self._since: dict[str, float] = {}
        self._crashed: dict[str, tuple[str, float]] = {}
        self._operations: dict[str, dict[tuple[str, str, str], int]] = {}

    # ----------------------------------------------------------- the feed

    def event(self, event: Event) -> None:
        if not event.accepted:
            if event.reason.startswith("late"):
                self.stale_writes_refused += 1
            return
        kind = event.kind
        if kind == "claim":
            self.leases += 1
            self.lease_windows += 1
            self._expires_at[event.attempt_id] = (event.at + self.lease_ttl_s, True)
            crashed = self._crashed.pop(event.task_id, None)
            if crashed is not None:
                self.recover_s.append(event.at - crashed[1])
        elif kind == "renew":
            self.lease_windows += 1
            self._expires_at[event.attempt_id] = (event.at + self.lease_ttl_s, False)
        elif kind == "expire":
            self._expired(event)
        if event.attempt_id is not None and event.to_state in _TERMINAL:
            self._held.pop(event.attempt_id, None)
            self._expires_at.pop(event.attempt_id, None)
            self._since.pop(event.attempt_id, None)  # shed or cancelled while it waited: it never reached admission

    def _expired(self, event: Event) -> None:
        self.expiries += 1
        expires_at, first = self._expires_at.pop(event.attempt_id, (event.at, False))
        self.first_window_expiries += first
        false = self._alive_and_renewing(event.attempt_id, expires_at)
        self.false_expiries += false
        if self.series is not None:
            self.series.expiry(false)
        crashed = self._crashed.get(event.task_id)
        if crashed is not None and crashed[0] == event.attempt_id:
            self.detect_s.append(event.at - crashed[1])

    def _alive_and_renewing(self, attempt_id: str, at: float) -> bool:
        """Whether, at instant `at`, a live, unpaused worker held the Attempt (its heartbeat runs exactly while it holds)."""
        held = self._held.get(attempt_id)
        if held is None or held.since > at or (held.released_at is not None and held.released_at <= at):
            return False
        return not any(start <= at < until for start, until in self._pauses.get(held.worker_id, ()))

    def landed(self, landed: Landed) -> None:
        self.effects += 1
        seen = self._operations.setdefault(landed.task_id, {})
        operation = (landed.dependency, landed.operation, landed.identity)
        seen[operation] = seen.get(operation, 0) + 1
        if seen[operation] > 1:
            self.duplicate_effects += 1

    def retired(self, retired: Retired) -> None:
        task = retired.task
        state = task.state if not retired.drained or task.state in _AT_REST else f"lost ({task.state})"
        self.final_states[state] = self.final_states.get(state, 0) + 1
        self.tasks_retired += 1
        self.attempts += len(retired.attempts)
        self.attempts_max = max(self.attempts_max, len(retired.attempts))
        self.spend_usd += task.cost_usd
        self.tokens += task.tokens
        self._operations.pop(task.task_id, None)
        self._crashed.pop(task.task_id, None)

    # ---------------------------------------------- the workers' ground truth

    def holding(self, worker_id: str, attempt_id: str, at: float) -> None:
        """The worker heard its claim accepted: it holds the Attempt, and its heartbeat starts."""
        self._held[attempt_id] = _Holding(worker_id, at)

    def released(self, worker_id: str, attempt_id: str, at: float) -> None:
        """The worker stopped working on the Attempt (finished, refused, cancelled, crashed, gave up): its heartbeat stops."""
        held = self._held.get(attempt_id)
        if held is not None and held.worker_id == worker_id and held.released_at is None:
            held.released_at = at

    def paused(self, worker_id: str, at: float, until: float) -> None:
        self._pauses.setdefault(worker_id, []).append((at, until))

    def crashed(self, worker_id: str, attempt_id: str | None, at: float) -> None:
        """A worker crashed; if it held an Attempt, start the detect and recover clocks."""
        self.crashes += 1
        if attempt_id is not None:
            self.crashes_holding += 1
            self._crashed[attempt_id.rsplit("#", 1)[0]] = (attempt_id, at)

    def renewal(self, outcome: str) -> None:
        self.renewals[outcome] += 1
        if self.series is not None:
            self.series.renewal(outcome)

    def queued(self, attempt_id: str, attempt: Any, at: float) -> None:
        eligible_at = attempt.eligible_at if attempt is not None and attempt.eligible_at is not None else at
        self._since[attempt_id] = eligible_at

    def admitted(self, attempt_id: str, at: float) -> None:
        since = self._since.pop(attempt_id, None)
        if since is not None:
            self.queue_waits_s.append(max(0.0, at - since))

    # ----------------------------------------------------------- summary

    def summary(self, sim_time_s: float, calls: dict[str, int]) -> dict[str, Any]:
        tasks = max(1, self.tasks_retired)
        done = self.final_states.get("done", 0)
        return {
            "tasks_done": done,
            "final_states": dict(sorted(self.final_states.items())),
            "attempts_per_task": round(self.attempts / tasks, 3),
            "attempts_per_task_max": self.attempts_max,
            "leases": self.leases,
            "lease_windows": self.lease_windows,
            "expiries": self.expiries,
            "false_expiries": self.false_expiries,
            "false_expiries_per_1000_leases": round(1000.0 * self.false_expiries / self.leases, 3) if self.leases else 0.0,
            "first_window_expiries": self.first_window_expiries,
            **{f"renewals_{outcome}": count for outcome, count in self.renewals.items()},
            "crashes": self.crashes,
            "crashes_holding": self.crashes_holding,
            "crash_detect_count": len(self.detect_s),
            "crash_detect_s_mean": _mean(self.detect_s),
            "crash_recover_count": len(self.recover_s),
            "crash_recover_s_mean": _mean(self.recover_s),
            "crash_recover_s_max": round(max(self.recover_s), 1) if self.recover_s else None,
            "stale_writes_refused": self.stale_writes_refused,
            "effects": self.effects,
            "duplicate_effects": self.duplicate_effects,
            "queue_age_s_max": round(max(self.queue_waits_s), 1) if self.queue_waits_s else 0.0,
            "queue_age_s_p99": _percentile(self.queue_waits_s, 0.99),
            "throughput_tasks_per_h": round(done / sim_time_s * 3600.0, 1) if sim_time_s > 0 else 0.0,
            "provider_calls": calls,
            "spend_usd": round(self.spend_usd, 2),
            "tokens": self.tokens,
            "sim_time_s": round(sim_time_s, 1),
        }


def _mean(values: array) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _percentile(values: array, fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)], 1)
