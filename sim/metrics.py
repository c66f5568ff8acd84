"""What a run measured: outcomes, attempts, false expiries, crash detection and recovery, stale writes, queue age, spend.

Metrics are observations, not verdicts (those are the checkers'). They are
gathered from the same stream, plus the one thing only the simulator knows:
ground truth about workers. An expiry is false when the worker that held the
lease was still alive and still working on that Attempt (slow, paused or cut
off, but not dead, and not a worker that gave up on a claim it never heard
back about); a crash's
time to detect runs from the crash to its Attempt becoming Suspect, and its
time to recover from the crash to the task's next claim. Per-task state is
dropped at retirement; queue waits are kept as an array of doubles, eight
bytes per Attempt.
"""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING, Any

from shiftchange.core import Event
from shiftchange.core.machine import ATTEMPT_TERMINAL as _TERMINAL
from shiftchange.core.machine import TASK_RESTING, TASK_TERMINAL

from .history import Landed, Retired

if TYPE_CHECKING:
    from .world import World

_AT_REST = TASK_TERMINAL | TASK_RESTING


class Metrics:
    """Counters and distributions of one run."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.final_states: dict[str, int] = {}
        self.attempts = 0
        self.attempts_max = 0
        self.tasks_retired = 0
        self.spend_usd = 0.0
        self.tokens = 0
        self.expiries = 0
        self.false_expiries = 0
        self.stale_writes_refused = 0
        self.effects = 0
        self.duplicate_effects = 0
        self.detect_s = array("d")
        self.recover_s = array("d")
        self.queue_waits_s = array("d")
        self._holder: dict[str, str] = {}
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
            self._holder[event.attempt_id] = event.worker_id
            crashed = self._crashed.pop(event.task_id, None)
            if crashed is not None:
                self.recover_s.append(event.at - crashed[1])
        elif kind == "expire":
            self.expiries += 1
            worker_id = self._holder.get(event.attempt_id)
            worker = self.world.worker(worker_id) if worker_id is not None else None
            if worker is not None and worker.alive and worker.holding == event.attempt_id:
                self.false_expiries += 1  # its worker was alive and still working on it: slow, paused or cut off, not dead
            crashed = self._crashed.get(event.task_id)
            if crashed is not None and crashed[0] == event.attempt_id:
                self.detect_s.append(event.at - crashed[1])
        if event.attempt_id is not None and event.to_state in _TERMINAL:
            self._holder.pop(event.attempt_id, None)
            self._since.pop(event.attempt_id, None)  # shed or cancelled while it waited: it never reached admission

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

    # ------------------------------------------------------ world hooks

    def crashed(self, worker: Any, at: float) -> None:
        """A worker crashed while it believed it held an Attempt: start the detect and recover clocks."""
        if worker.holding is not None:
            task_id = worker.holding.rsplit("#", 1)[0]
            self._crashed[task_id] = (worker.holding, at)

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
            "expiries": self.expiries,
            "false_expiries": self.false_expiries,
            "crash_detect_s_mean": _mean(self.detect_s),
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
