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

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shiftchange.core import Plan

from .provider import unit_draw

if TYPE_CHECKING:
    from .world import World


@dataclass(frozen=True, slots=True)
class Profile:
    """A task's hidden nature and its place in the factory."""

    workspace: str
    arrived_at: float
    nonconvergent: bool
    runaway: bool


def first_hypothesis(task_id: str) -> str:
    return f"hypothesis 1 for {task_id}"


def arrival_gaps(world: World) -> Generator[float, None, None]:
    """Seconds between consecutive arrivals, for the configured arrival process."""
    workload, rng = world.config.workload, world.rng_workload
    for index in range(workload.tasks):
        if workload.arrival == "steady":
            yield 0.0 if index == 0 else 1.0 / workload.arrival_rate_per_s
        elif workload.arrival == "poisson":
            yield rng.expovariate(workload.arrival_rate_per_s)
        else:
            yield workload.burst_interval_s if index and index % workload.burst_size == 0 else 0.0


def arrivals(world: World) -> Generator[Any, Any, None]:
    """The workload process: create, accept and dispatch each task as it arrives."""
    env, workload, rng = world.env, world.config.workload, world.rng_workload
    orchestrator = world.orchestrator
    for index, gap in enumerate(arrival_gaps(world)):
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
        world.profiles[task_id] = profile
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
            cancel = env.timeout(rng.expovariate(1.0 / workload.cancel_after_s))
            cancel.callbacks.append(lambda _event, task_id=task_id: world.control.cancel(task_id))
    world.arrivals_done_at = env.now


def ci_verdict(world: World, task_id: str, identity: str, landed_at: float) -> str | None:
    """CI's judgement of a code-host effect: pending until it has run, then the same answer for the same commit."""
    if world.env.now < landed_at + world.config.workload.ci_s:
        return None
    profile = world.profiles.get(task_id)
    if profile is not None and profile.nonconvergent:
        return "failed:tests fail the same way: the task cannot be done as specified"
    if unit_draw(world.seed, identity) < world.config.workload.wrong_answer_probability:
        return f"failed:tests fail for commit {identity.rsplit(':', 1)[-1]}"
    return "passed"
