"""A counterexample's task, drawn as the run report and `shiftchange timeline` draw one: `core.timeline`'s recovery timeline.

The explorer's path and the simulator's run each end with the records the
checkers judged; neither keeps its events in its store (they go to the
checkers as they happen). So the path is played again (the explorer's steps,
or the simulator's run with the same seed, size and kept faults, both
deterministic), the events of the task the violation names are collected as
they pass, and `build_timeline` reads them beside the task's final records
through a read-only view shaped like a store. The text is `render_timeline`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from shiftchange.checkers.history import Retired
from shiftchange.core import Event
from shiftchange.core.timeline import FinalRecords, build_timeline, render_timeline

__all__ = ["explored_timeline", "simulated_timeline", "task_named"]

_TASK = re.compile(r"\btask-\d+")


def task_named(example: Sequence[str]) -> str | None:
    """The first task id a violation's example names (`task-0000224#2` names task-0000224), else None."""
    for line in example:
        found = _TASK.search(line)
        if found:
            return found.group(0)
    return None


def explored_timeline(config: Any, steps: Sequence[str], example: Sequence[str]) -> str | None:
    """The timeline of the task the example names, at the end of the explorer's path `steps` (None: no task named)."""
    from shiftchange.explore import World
    from shiftchange.explore.exposures import pattern_of

    world = World(config, pattern_of(config))
    for label in steps:
        world.apply(label)
    task_id = task_named(example) or (world.retirements()[0].task.task_id if config.tasks == 1 else None)
    if task_id is None:
        return None
    events = [entry for entry in world.step_entries if isinstance(entry, Event)]
    with world.store.transaction() as tx:
        task = tx.task(task_id)
        if task is None:
            return None
        attempts = tx.attempts_of(task_id)
        intents = [intent for attempt in attempts for intent in tx.intents_of(attempt.attempt_id)]
        timeline = build_timeline(FinalRecords(task, attempts, intents, events), task_id)
    return render_timeline(timeline)


def simulated_timeline(play: Any, example: Sequence[str]) -> str | None:
    """The timeline of the task the example names, from a run played again by `play(history_sink)` (None: none named or retired)."""
    task_id = task_named(example)
    if task_id is None:
        return None
    events: list[Event] = []
    final: list[Retired] = []

    def sink(entry: Any) -> None:
        if isinstance(entry, Event) and entry.task_id == task_id:
            events.append(entry)
        elif isinstance(entry, Retired) and entry.task.task_id == task_id:
            final.append(entry)

    play(sink)
    if not final:
        return None
    retired = final[-1]
    return render_timeline(build_timeline(FinalRecords(retired.task, retired.attempts, retired.intents, events), task_id))
