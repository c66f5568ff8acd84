"""Partial-order reduction: steps declared independent commute and keep each other enabled, and the reduced search finds
the same states, the same quiescent states and the same violations as the full search (independence.py's claims)."""

from __future__ import annotations

import pytest

from shiftchange.explore import EXPOSURES, ExploreConfig, World, explore, exposing_config, replay
from shiftchange.explore.digest import fingerprint
from shiftchange.explore.exposures import pattern_of
from shiftchange.explore.independence import EVERYTHING, footprint, independent
from shiftchange.explore.judge import judge
from shiftchange.explore.levels import Partition
from shiftchange.explore.snapshots import Snapshots

SMALL = {
    "two tasks": ExploreConfig(tasks=2),
    "two tasks, a crash and a pause": ExploreConfig(tasks=2, crashes=1, pauses=1, retries=0),
    "two tasks, a lost answer and a refusal": ExploreConfig(tasks=2, lost_responses=1, refusals=1),
    "two tasks, a cancellation": ExploreConfig(tasks=2, cancels=1),
    "two tasks, duplicates": ExploreConfig(tasks=2, duplicates=1),
    "a crash and a pause": ExploreConfig(crashes=1, pauses=1),
    "two tasks, three workers": ExploreConfig(tasks=2, workers=3),
}


def _states(config: ExploreConfig, count: int):
    """Worlds of `config` (as bytes, with their snapshots) in breadth-first order, up to `count`."""
    root = World(config, pattern_of(config))
    root.step_entries.clear()
    snapshots = Snapshots(root)
    queue, seen, found = [snapshots.dumps(root)], {fingerprint(root, False)}, []
    while queue and len(found) < count:
        data = queue.pop(0)
        found.append(data)
        for label in snapshots.loads(data).actions():
            child = snapshots.loads(data)
            child.apply(label, checked=False)
            child.step_entries.clear()
            key = fingerprint(child, False)
            if key not in seen:
                seen.add(key)
                queue.append(snapshots.dumps(child))
    return snapshots, found


def _after(snapshots, data, *labels):
    world = snapshots.loads(data)
    for label in labels:
        assert label in world.actions(), f"{label} is not enabled after {labels[: labels.index(label)]}"
        world.apply(label, checked=False)
    return world


@pytest.mark.parametrize("config", SMALL.values(), ids=SMALL.keys())
def test_independent_steps_commute_keep_each_other_enabled_and_are_judged_alike(config):
    """Claims (1)-(3): for every pair declared independent in the first states, both orders are enabled throughout, reach
    one state, and every checker gives the same verdict on the two histories."""
    snapshots, states = _states(config, 600)
    pairs = 0
    for data in states[::4]:  # every fourth of the first 600, to reach states where faults have struck
        world = snapshots.loads(data)
        labels = world.actions()
        prints = {label: footprint(world, label) for label in labels}
        for position, first in enumerate(labels):
            for second in labels[position + 1 :]:
                if not independent(prints[first], prints[second]):
                    continue
                pairs += 1
                one, other = _after(snapshots, data, first, second), _after(snapshots, data, second, first)
                assert fingerprint(one, False) == fingerprint(other, False), (first, second)
                quiescent = not one.actions()
                assert judge(one, quiescent) == judge(other, quiescent), (first, second)
    assert pairs > 20  # the reduction has something to work with


def test_steps_that_read_everything_are_independent_of_nothing():
    world = World(ExploreConfig(tasks=2))
    admit = footprint(world, "control:admit")
    assert admit == {EVERYTHING} and not independent(admit, frozenset({"worker:worker-1"}))
    world.apply("control:admit")
    claims = [footprint(world, label) for label in ("worker-1:claim:task-1", "worker-2:claim:task-2", "worker-2:claim:task-1")]
    assert independent(claims[0], claims[1])  # two workers, two tasks
    assert not independent(claims[0], claims[2])  # the same task
    assert footprint(world, "worker-1:claim-next") == {EVERYTHING}


def _visited(monkeypatch, config, **options):
    """The search's result, with every state it visited (fingerprint -> whether it may take no step)."""
    visited = {}
    original = Partition._visit

    def recording(self, key, depth, actions):
        visited[key] = not actions
        return original(self, key, depth, actions)

    monkeypatch.setattr(Partition, "_visit", recording)
    result = explore(config, **options)
    monkeypatch.setattr(Partition, "_visit", original)
    return result, visited


EQUIVALENT = {
    "two tasks": (ExploreConfig(tasks=2), []),
    "two tasks, three workers": (ExploreConfig(tasks=2, workers=3), []),
    "two tasks, a refusal": (ExploreConfig(tasks=2, refusals=1), [pytest.mark.slow]),  # 1,870 states
    "two tasks, a lost answer": (ExploreConfig(tasks=2, lost_responses=1), [pytest.mark.slow]),  # 2,778 states
    "two tasks, a CI failure": (ExploreConfig(tasks=2, ci_failures=1), [pytest.mark.slow]),  # 1,896 states
}


@pytest.mark.parametrize("config", [pytest.param(config, marks=marks) for config, marks in EQUIVALENT.values()], ids=EQUIVALENT.keys())
def test_the_reduced_search_visits_the_same_states_and_quiescent_states(monkeypatch, config):
    full, every = _visited(monkeypatch, config)
    reduced, kept = _visited(monkeypatch, config, por=True)
    assert full.complete and reduced.complete and full.ok and reduced.ok
    assert kept == every  # the same states, and the same ones where nothing can happen
    assert (reduced.states, reduced.quiescent, reduced.depth) == (full.states, full.quiescent, full.depth)
    assert reduced.pruned > 0 and reduced.transitions + reduced.pruned >= full.transitions - reduced.pruned
    assert reduced.transitions < full.transitions


@pytest.mark.parametrize("name", EXPOSURES)
def test_the_reduced_search_finds_each_anti_pattern_at_the_same_least_depth(name):
    config = exposing_config(name)
    full, reduced = explore(config).counterexample, explore(config, por=True).counterexample
    assert reduced is not None and reduced.invariant == full.invariant
    assert len(reduced.steps) == len(full.steps)  # still a shortest counterexample
    played = replay(config, reduced.steps)
    assert played.violation is not None and played.violation.invariant == reduced.invariant


def test_a_reduced_search_over_several_processes_finds_what_one_process_finds():
    config = ExploreConfig(tasks=2, workers=3)
    alone, spread = explore(config, por=True), explore(config, por=True, processes=2)
    assert alone.pruned > 0
    for name in ("states", "explored", "transitions", "pruned", "quiescent", "depth"):
        assert getattr(spread, name) == getattr(alone, name), name
