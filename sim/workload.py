"""What arrives: tasks on a steady, Poisson or bursty schedule, each with its budget, priority, deadline and hidden nature.

Each task's nature is drawn when it arrives and is hidden from the core: a
nonconvergent task fails CI the same way whatever the hypothesis (the loop
must stop or escalate, not burn its budget); a runaway task is a hostile
input whose agent keeps calling the model (budgets must stop it). Whether a
given hypothesis is wrong is a deterministic function of the seed, the task
and the commit, so CI judges the same commit the same way every time it is
asked. Some tasks are cancelled by an operator a while after they arrive.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from shiftchange.core import Plan

from .config import WorkloadConfig
from .provider import unit_draw
from .windows import Windows


@dataclass(frozen=True, slots=True)
class Profile:
    """A task's hidden nature and its place in the factory."""

    workspace: str
    arrived_at: float
    nonconvergent: bool
    runaway: bool


class Workbench:
    """The live tasks' hidden natures, and the local work an Attempt does: slow tool calls and commits.

    The workload fills it as tasks arrive; workers read a task's nature and
    draw their local work from it; the control plane reads a task's
    workspace; retirement forgets a task. A slow-tool tail (`slow`) is a
    fault that strikes here: tool calls take `factor` times longer until it ends.
    """

    def __init__(self, env: Any, workload: WorkloadConfig, rng: random.Random) -> None:
        self.env = env
        self.workload = workload
        self.rng = rng
        self.profiles: dict[str, Profile] = {}
        self.arrivals_done_at: float | None = None
        self._slow = Windows()

    def profile(self, task_id: str) -> Profile:
        return self.profiles[task_id]

    def slow(self, until: float, factor: float) -> None:
        """A slow-tool tail: until `until`, every tool call's local work takes `factor` times longer."""
        self._slow.add(self.env.now, until, factor)

    def tool_time_s(self) -> float:
        """One slow tool call's local work; a slow-tool tail multiplies it."""
        work_s = self.rng.expovariate(1.0 / self.workload.tool_call_s)
        return work_s * (self._slow.at(self.env.now) or 1.0)

    def commit_time_s(self) -> float:
        return self.rng.expovariate(1.0 / self.workload.commit_s)

    def forget(self, task_id: str) -> None:
        self.profiles.pop(task_id, None)

    def all_retired(self) -> bool:
        return self.arrivals_done_at is not None and not self.profiles


def first_hypothesis(task_id: str) -> str:
    return f"hypothesis 1 for {task_id}"


def arrival_gaps(workload: WorkloadConfig, rng: random.Random) -> Generator[float, None, None]:
    """Seconds between consecutive arrivals, for the configured arrival process (with its step in rate, if it has one).

    A Poisson gap that would cross the step is drawn again from the step at the new rate: arrivals have no memory, so
    that is exactly a Poisson process whose rate changes there. Without a step, one draw per arrival, as before.
    """
    elapsed_s = 0.0
    step_s = workload.arrival_rate_changes_at_s if workload.arrival_rate_later_per_s is not None else None
    for index in range(workload.tasks):
        if workload.arrival == "steady":
            gap_s = 0.0 if index == 0 else 1.0 / workload.rate_per_s(elapsed_s)
        elif workload.arrival == "poisson":
            gap_s = rng.expovariate(workload.rate_per_s(elapsed_s))
            if step_s is not None and elapsed_s < step_s < elapsed_s + gap_s:
                gap_s = step_s - elapsed_s + rng.expovariate(workload.rate_per_s(step_s))
        else:
            gap_s = workload.burst_interval_s if index and index % workload.burst_size == 0 else 0.0
        elapsed_s += gap_s
        yield gap_s


def arrivals(bench: Workbench, orchestrator: Any, rng: random.Random, cancel: Callable[[str], None]) -> Generator[Any, Any, None]:
    """The workload process: create, accept and dispatch each task as it arrives; an operator cancels some later."""
    env, workload = bench.env, bench.workload
    for index, gap in enumerate(arrival_gaps(workload, rng)):
        if gap:
            yield env.timeout(gap)
        task_id = f"task-{index:07d}"
        workspace = f"repo-{index % workload.workspaces}"
        profile = Profile(
            workspace=workspace,
            arrived_at=env.now,
            nonconvergent=rng.random() < workload.nonconvergent_probability,
            runaway=rng.random() < workload.runaway_probability,
        )
        bench.profiles[task_id] = profile
        orchestrator.create_task(
            task_id,
            f"agent task {index}",
            workspace,
            budget=workload.budget,
            priority=rng.randrange(workload.priorities),
            deadline_at=env.now + workload.deadline_s,
        )
        orchestrator.accept_task(task_id)
        orchestrator.dispatch(task_id, Plan(first_hypothesis(task_id)))
        if rng.random() < workload.cancel_probability:
            timer = env.timeout(rng.expovariate(1.0 / workload.cancel_after_s))
            timer.callbacks.append(lambda _event, task_id=task_id: cancel(task_id))
    bench.arrivals_done_at = env.now


def ci_verdict(bench: Workbench, seed: int, task_id: str, identity: str, landed_at: float) -> str | None:
    """CI's judgement of a code-host effect: pending until it has run, then the same answer for the same commit."""
    if bench.env.now < landed_at + bench.workload.ci_s:
        return None
    profile = bench.profiles.get(task_id)
    if profile is not None and profile.nonconvergent:
        return "failed:tests fail the same way: the task cannot be done as specified"
    if unit_draw(seed, identity) < bench.workload.wrong_answer_probability:
        return f"failed:tests fail for commit {identity.rsplit(':', 1)[-1]}"
    return "passed"
