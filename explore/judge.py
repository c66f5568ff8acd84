"""Judging a world by the checkers: its history folded so far, then a final read of every record as if the run ended.

The checkers are the simulator's and the runtime's own (`shiftchange.checkers`),
carried along each path in the world's `History`. A checker that crashed
judges nothing, so its verdict is unknown, never a pass. `no_lost_tasks` is
judged only where nothing can happen any more (a quiescent state): a task
still in progress there is lost.
"""

from __future__ import annotations

from typing import NamedTuple

from shiftchange.checkers.history import UNKNOWN, VIOLATED

from .world import World

LOST_TASKS = "no_lost_tasks"


class Finding(NamedTuple):
    """What stopped a search: an invariant violated, or a checker that crashed and so could not tell (status unknown)."""

    invariant: str
    example: tuple[str, ...]
    status: str = VIOLATED


def judge(world: World, quiescent: bool) -> Finding | None:
    """The first invariant this world's history violates, with its example: folded so far, then on a final read."""
    for name, verdict in world.history.verdicts().items():
        if verdict.status == VIOLATED:
            return Finding(name, verdict.example)
        if name in world.history.crashed:
            return Finding(name, verdict.example, UNKNOWN)  # a checker that crashes judges nothing: never read that as a pass
    retirements = world.retirements()
    for checker in world.history.checkers:
        if not checker.reads_final_records() or (checker.name == LOST_TASKS and not quiescent):
            continue
        verdict = checker.verdict_if_retired(retirements)
        if verdict.status == VIOLATED:
            return Finding(checker.name, verdict.example)
    return None
