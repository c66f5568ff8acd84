"""Playing one path again in a fresh world, judging each step as the search did: a counterexample's timeline.

The search records only the labels of the steps that built a world; the
replay rebuilds it from the configuration, takes those steps one by one,
and prints every entry each step appended to the history. Each state on the
way is judged the way the search judged it, including as ended when every
step it may take leads back to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shiftchange.checkers.history import describe

from .config import ExploreConfig, ExploreError, StepError
from .digest import digest
from .exposures import pattern_of
from .judge import Finding, judge
from .snapshots import Snapshots
from .world import World


@dataclass(frozen=True)
class Replayed:
    """A path played again in a fresh world: its timeline, and the first violation on it, if any."""

    steps: tuple[str, ...]
    timeline: tuple[str, ...]
    violation: Finding | None
    """The first step's finding (invariant, example, status), or None."""


def ended(world: World, snapshots: Snapshots) -> bool:
    """Whether nothing can change any more: no step is enabled, or every one leads back to this state (workers interchangeable)."""
    actions = world.actions()
    if not actions:
        return True
    shape = digest(world, True)
    data = snapshots.dumps(world)
    for label in actions:
        copy = snapshots.loads(data)
        copy.apply(label, checked=False)
        if digest(copy, True) != shape:
            return False
    return True


def replay(config: ExploreConfig, steps: tuple[str, ...] | list[str]) -> Replayed:
    """Play `steps` in a fresh world of `config` on the concrete clock, judging each one as the search did (a state is
    judged as ended by its concrete text: every step it may take leads back to it, times and all); a step that does not
    fit is an ExploreError."""
    config = config.concrete()
    world = World(config, pattern_of(config))
    snapshots = Snapshots(world)
    timeline = ["setup     the tasks are created, accepted and dispatched", *_entries(world)]
    violation = judge(world, ended(world, snapshots))
    for number, label in enumerate(steps, 1):
        try:
            world.apply(label)
        except StepError as error:
            raise ExploreError(f"step {number} of the replay does not fit: {error}") from None
        timeline += [f"step {number:>3}  {label}", *_entries(world)]
        if violation is None:
            violation = judge(world, ended(world, snapshots))
    return Replayed(tuple(steps), tuple(timeline), violation)


def _entries(world: World) -> list[str]:
    """What the last step appended to the history, one line each (and forgotten, so the next step's stand alone)."""
    lines = [f"          {describe(entry)}" for entry in world.step_entries]
    world.step_entries.clear()
    return lines
