"""What a run measured: outcomes, attempts, leases and their expiries, crash detection and recovery, stale writes, queues, deadlines, spend.

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
time to detect (to its Attempt becoming Suspect), its time to recover (to the
task's next claim) and the duplicate effects are the fold every driver
shares (`shiftchange.checkers.measures`), fed the crashes the workers report;
each mean stands beside the count it is a mean of. Per-task state is dropped
at retirement; queue waits are kept as an array of doubles, eight bytes per
Attempt.

A task's deadline, in the core, is the last moment its work may start: an
Attempt still queued when the deadline passes is shed, never admitted (see
`core/admission.py`). So a task misses its deadline when the deadline
passes with the task still wanted and not started: no Attempt of it was
admitted by then (each was shed, or admitted late, or still waiting when the
run ended), and no operator had cancelled it before then. Goodput counts the tasks
that finished done having started by their deadline, per hour of the arrival
span (first arrival to last): in a steady state the work the span leaves in
flight at its end stands in for the work that was not yet flowing at its
start.

Little's law, L = λW, is measured on one boundary, the Attempt state
`queued` (waiting to be admitted, a backoff included), over the arrival
span, by three separate instruments: L is the time average of how many
Attempts are queued (integrated exactly at every change), λ the Attempts
that entered it per second, W the mean time in it of the Attempts that left
it within the span. The queue starts empty, so L equals λW but for the
edges: the Attempts still queued when the span ends (their age counts in L,
their wait not in W). In a steady state that edge is a few Attempts against
a whole span; in a queue that keeps growing it never becomes small.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

from shiftchange.checkers.history import Landed, Retired
from shiftchange.checkers.measures import Measures
from shiftchange.core import Event
from shiftchange.core.states import ATTEMPT_TERMINAL as _TERMINAL
from shiftchange.core.states import TASK_AT_REST as _AT_REST

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
        self.stale_writes_refused = 0
        self.effects = 0
        self.measures = Measures()
        """Time to detect and to recover a crash, and duplicate effects: the fold chaos reports too."""
        self.queue_waits_s = array("d")
        self._held: dict[str, _Holding] = {}
        self._expires_at: dict[str, tuple[float, bool]] = {}
        """Per leased Attempt: when its lease runs out, and whether that window is still the first (no renewal yet)."""
        self._pauses: dict[str, list[tuple[float, float]]] = {}
        self._since: dict[str, float] = {}
        self.tasks_by_priority: dict[int, int] = {}
        self.deadline_misses: dict[int, int] = {}
        self.tasks_done_in_time = 0
        self._settled_at: dict[str, float] = {}
        """Per live task: when it stopped waiting to start (its first admission, or its cancellation before any)."""
        self._queue = _QueueArea()

    # ----------------------------------------------------------- the feed

    def event(self, event: Event) -> None:
        self.measures.event(event)
        if not event.accepted:
            if event.late:
                self.stale_writes_refused += 1
            return
        kind = event.kind
        if event.attempt_id is not None and (event.to_state == "queued") != (event.from_state == "queued"):
            self._queue.moved(event.attempt_id, event.at, entered=event.to_state == "queued")
        if kind == "create" and event.attempt_id is None:
            self._queue.arrival(event.at)
        elif (event.to_state == "admitted" and event.from_state == "queued") or (kind == "cancel" and event.attempt_id is None):
            self._settled_at.setdefault(event.task_id, event.at)
        if kind == "claim":
            self.leases += 1
            self.lease_windows += 1
            self._expires_at[event.attempt_id] = (event.at + self.lease_ttl_s, True)
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

    def _alive_and_renewing(self, attempt_id: str, at: float) -> bool:
        """Whether, at instant `at`, a live, unpaused worker held the Attempt (its heartbeat runs exactly while it holds)."""
        held = self._held.get(attempt_id)
        if held is None or held.since > at or (held.released_at is not None and held.released_at <= at):
            return False
        return not any(start <= at < until for start, until in self._pauses.get(held.worker_id, ()))

    def landed(self, landed: Landed) -> None:
        self.effects += 1
        self.measures.landed(landed)

    def retired(self, retired: Retired) -> None:
        task = retired.task
        state = task.state if not retired.drained or task.state in _AT_REST else f"lost ({task.state})"
        self.final_states[state] = self.final_states.get(state, 0) + 1
        self.tasks_retired += 1
        self.attempts += len(retired.attempts)
        self.attempts_max = max(self.attempts_max, len(retired.attempts))
        self.spend_usd += task.cost_usd
        self.tokens += task.tokens
        self.measures.retired(retired)
        self._judge_deadline(task, self._settled_at.pop(task.task_id, None))

    def _judge_deadline(self, task: Any, settled_at: float | None) -> None:
        """Count the task under its priority, and as a miss unless it started, or was cancelled, by its deadline."""
        self.tasks_by_priority[task.priority] = self.tasks_by_priority.get(task.priority, 0) + 1
        deadline_at = task.deadline_at
        missed = deadline_at is not None and (settled_at is None or settled_at > deadline_at)
        if missed:
            self.deadline_misses[task.priority] = self.deadline_misses.get(task.priority, 0) + 1
        elif task.state == "done":
            self.tasks_done_in_time += 1

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
            self.measures.struck(attempt_id.rsplit("#", 1)[0], attempt_id, at)

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
        span_s = self._queue.span_s()
        measured = self.measures.summary()
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
            "crashes_holding": measured["strikes"],
            # The shared measures, under the names lab/report/text.py, the notebooks and tests/sim/test_tuning.py read.
            "crash_detect_count": measured["detect_count"],
            "crash_detect_s_mean": measured["detect_s_mean"],
            "crash_recover_count": measured["recover_count"],
            "crash_recover_s_mean": measured["recover_s_mean"],
            "crash_recover_s_max": measured["recover_s_max"],
            "stale_writes_refused": self.stale_writes_refused,
            "effects": self.effects,
            "duplicate_effects": measured["duplicate_effects"],
            "queue_age_s_max": round(max(self.queue_waits_s), 1) if self.queue_waits_s else 0.0,
            "queue_age_s_p99": _percentile(self.queue_waits_s, 0.99),
            "throughput_tasks_per_h": round(done / sim_time_s * 3600.0, 1) if sim_time_s > 0 else 0.0,
            "tasks_by_priority": {str(priority): count for priority, count in sorted(self.tasks_by_priority.items())},
            "deadline_misses": {str(priority): self.deadline_misses.get(priority, 0) for priority in sorted(self.tasks_by_priority)},
            "tasks_done_in_time": self.tasks_done_in_time,
            "goodput_tasks_per_h": round(self.tasks_done_in_time / span_s * 3600.0, 1) if span_s > 0 else 0.0,
            **self._queue.summary(),
            "provider_calls": calls,
            "spend_usd": round(self.spend_usd, 2),
            "tokens": self.tokens,
            "sim_time_s": round(sim_time_s, 1),
        }


class _QueueArea:
    """Little's law's three instruments on the Attempt state `queued`, read over the arrival span (see the module docstring).

    Cheap and exact: a running count and its time integral, updated at every
    move in or out, and one snapshot of the sums at every arrival, so the
    span's figures are the snapshot taken at the last arrival.
    """

    __slots__ = ("_area", "_changed_at", "_entered_at", "_entries", "_exits", "_first_arrival_at", "_snapshot", "_waited_s")

    def __init__(self) -> None:
        self._entered_at: dict[str, float] = {}
        self._area = 0.0
        self._changed_at = 0.0
        self._entries = 0
        self._exits = 0
        self._waited_s = 0.0
        self._first_arrival_at: float | None = None
        self._snapshot = (0.0, 0.0, 0, 0, 0.0)
        """At the latest arrival: (its time, the area, entries, exits, their summed waits)."""

    def _advance(self, at: float) -> None:
        self._area += len(self._entered_at) * (at - self._changed_at)
        self._changed_at = at

    def moved(self, attempt_id: str, at: float, entered: bool) -> None:
        """An Attempt entered the state queued, or left it (admitted, shed, cancelled)."""
        self._advance(at)
        if entered:
            self._entered_at[attempt_id] = at
            self._entries += 1
            return
        since = self._entered_at.pop(attempt_id, None)
        if since is not None:
            self._exits += 1
            self._waited_s += at - since

    def arrival(self, at: float) -> None:
        """A task arrived: the span runs from the first arrival to this one, so far."""
        self._advance(at)
        if self._first_arrival_at is None:
            self._first_arrival_at = at
        self._snapshot = (at, self._area, self._entries, self._exits, self._waited_s)

    def span_s(self) -> float:
        return 0.0 if self._first_arrival_at is None else self._snapshot[0] - self._first_arrival_at

    def summary(self) -> dict[str, float | None]:
        span_s = self.span_s()
        _at, area, entries, exits, waited_s = self._snapshot
        return {
            "arrival_span_s": round(span_s, 3),
            "queue_length_mean": round(area / span_s, 6) if span_s > 0 else None,
            "queue_entries_per_s": round(entries / span_s, 6) if span_s > 0 else None,
            "queue_wait_s_mean": round(waited_s / exits, 6) if exits else None,
        }


def _percentile(values: array, fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)], 1)
