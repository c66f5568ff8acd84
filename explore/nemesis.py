"""What breaks: the faults the world may still spend, and the nemesis's steps on a worker (crash, pause, wake).

Every fault is a budget from the configuration, and each one spent is a step
of its own, so the search places every fault at every point. The nemesis
spends crashes, pauses and stalls; the provider and the network spend the others
(`network.py`), the control plane the cancellations (`control.py`).

A crashed worker restarts at once with empty memory (a new agent); its calls
already sent still land. A paused worker is frozen: it takes no step and
sends no renewal until it wakes, then carries on where it stopped with what
reached it meanwhile (`workers.py`); the pause is recorded in the history
when it ends, with its span. A stalled worker is slow, not frozen: for one
lease's length it takes no step of its own, but its heartbeat renews on
cadence as the clock passes, so its lease outlives the stall (a holder that
renews while it sets up, or while one step runs long).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.history import Fault

from .config import ExploreConfig
from .workers import Worker

CRASH, PAUSE, WAKE, STALL = "crash", "pause", "wake", "stall"


@dataclass(slots=True)
class Budgets:
    """The faults the world may still spend."""

    crashes: int
    pauses: int
    stalls: int
    lost_requests: int
    lost_responses: int
    duplicates: int
    cancels: int
    operator_calls: int
    ci_failures: int
    refusals: int
    deletions: int

    @classmethod
    def of(cls, config: ExploreConfig) -> Budgets:
        return cls(
            config.crashes, config.pauses, config.stalls, config.lost_requests, config.lost_responses, config.duplicates, config.cancels,
            config.operator_calls, config.ci_failures, config.refusals, config.deletions,
        )  # fmt: skip

    def row(self) -> tuple:
        return (
            self.crashes, self.pauses, self.stalls, self.lost_requests, self.lost_responses, self.duplicates, self.cancels,
            self.operator_calls, self.ci_failures, self.refusals, self.deletions,
        )  # fmt: skip


def nemesis_steps(worker: Worker, budgets: Budgets) -> list[str]:
    """What the nemesis may do to this worker now."""
    steps = []
    if worker.paused:
        steps.append(WAKE)
    elif worker.holding and budgets.pauses:
        steps.append(PAUSE)
    if budgets.stalls and worker.holding and not worker.paused and worker.stalled_until is None:
        steps.append(STALL)
    if budgets.crashes and worker.busy:
        steps.append(CRASH)
    return steps


def strike(world: Any, worker: Worker, step: str) -> None:
    """Take one nemesis step on `worker`, recording it in the history."""
    now = world.clock.now()
    if step == WAKE:
        worker.paused = False
        world.append(Fault(worker.paused_at, "pause", worker.worker_id, now, "frozen, it carries on where it stopped"))
    elif step == PAUSE:
        world.budgets.pauses -= 1
        worker.paused, worker.paused_at = True, now
    elif step == STALL:
        world.budgets.stalls -= 1
        worker.stalled_until = until = now + world.config.lease_ttl_s
        world.append(Fault(now, "stall", worker.worker_id, until, "slow: it takes no step, its heartbeat keeps renewing"))
    else:
        world.budgets.crashes -= 1
        world.append(Fault(now, "crash", worker.worker_id, now, "it restarts at once, its memory gone"))
        worker.restart()
