"""What breaks: the faults the world may still spend, and the nemesis's steps on a worker (crash, pause, wake).

Every fault is a budget from the configuration, and each one spent is a step
of its own, so the search places every fault at every point. The nemesis
spends crashes and pauses; the provider and the network spend the others
(`network.py`), the control plane the cancellations (`control.py`).

A crashed worker restarts at once with empty memory (a new agent); its calls
already sent still land. A paused worker is frozen: it takes no step and
sends no renewal until it wakes, then carries on where it stopped with what
reached it meanwhile (`workers.py`); the pause is recorded in the history
when it ends, with its span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.history import Fault

from .config import ExploreConfig
from .workers import Worker

CRASH, PAUSE, WAKE = "crash", "pause", "wake"


@dataclass(slots=True)
class Budgets:
    """The faults the world may still spend."""

    crashes: int
    pauses: int
    lost_requests: int
    lost_responses: int
    duplicates: int
    cancels: int
    ci_failures: int
    refusals: int

    @classmethod
    def of(cls, config: ExploreConfig) -> Budgets:
        return cls(
            config.crashes, config.pauses, config.lost_requests, config.lost_responses, config.duplicates, config.cancels,
            config.ci_failures, config.refusals,
        )  # fmt: skip

    def row(self) -> tuple:
        return (
            self.crashes, self.pauses, self.lost_requests, self.lost_responses, self.duplicates, self.cancels, self.ci_failures,
            self.refusals,
        )  # fmt: skip


def nemesis_steps(worker: Worker, budgets: Budgets) -> list[str]:
    """What the nemesis may do to this worker now."""
    steps = []
    if worker.paused:
        steps.append(WAKE)
    elif worker.holding and budgets.pauses:
        steps.append(PAUSE)
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
    else:
        world.budgets.crashes -= 1
        world.append(Fault(now, "crash", worker.worker_id, now, "it restarts at once, its memory gone"))
        worker.restart()
