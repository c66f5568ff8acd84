"""The runtime's tasks: the simulator's small agent workflow, submitted for real.

A task is created, accepted and dispatched with its first hypothesis, as the
simulator's workload does; a worker then runs the workflow of each Attempt
(`runtime/worker.py`). The commit an Attempt makes is the same function of
its task and hypothesis as in the simulator, so a retry with an unchanged
plan pushes the same head SHA and a provider can recognise the pull request.
"""

from __future__ import annotations

from shiftchange.core import Orchestrator, Plan

from .config import RuntimeConfig

__all__ = ["first_hypothesis", "submit"]


def first_hypothesis(task_id: str) -> str:
    return f"hypothesis 1 for {task_id}"


def submit(orchestrator: Orchestrator, task_id: str, config: RuntimeConfig) -> None:
    """Create, accept and dispatch one task in the run's workspace with the run's budget."""
    orchestrator.create_task(task_id, f"open a pull request for {task_id}", config.workspace, budget=config.budget)
    orchestrator.accept_task(task_id)
    orchestrator.dispatch(task_id, Plan(first_hypothesis(task_id)))
