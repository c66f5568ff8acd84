"""Snapshots: a world stored and loaded again is the same state, holds the very objects every world shares, and keeps
folding its history; a loaded world stores and loads again as the same state."""

from __future__ import annotations

import pickle

from shiftchange.explore import ExploreConfig, World
from shiftchange.explore.digest import digest
from shiftchange.explore.snapshots import Snapshots


def _worlds(config: ExploreConfig, count: int) -> tuple[Snapshots, list[World]]:
    """The first `count` worlds a breadth-first walk of `config` reaches (every step taken from each)."""
    root = World(config)
    root.step_entries.clear()
    snapshots = Snapshots(root)
    worlds, queue = [root], [snapshots.dumps(root)]
    while queue and len(worlds) < count:
        data = queue.pop(0)
        for label in snapshots.loads(data).actions():
            child = snapshots.loads(data)
            child.apply(label, checked=False)
            child.step_entries.clear()
            worlds.append(child)
            queue.append(snapshots.dumps(child))
    return snapshots, worlds


def test_a_stored_world_loads_as_the_same_state_with_the_same_steps():
    snapshots, worlds = _worlds(ExploreConfig(crashes=1, pauses=1, lost_responses=1, duplicates=1), 150)
    for world in worlds:
        data = snapshots.dumps(world)
        loaded = snapshots.loads(data)
        assert digest(loaded, False) == digest(world, False)
        assert loaded.actions() == world.actions()
        again = snapshots.loads(snapshots.dumps(loaded))  # a loaded world stores and loads again as the same state
        assert digest(again, False) == digest(world, False) and again.actions() == world.actions()
        assert loaded.workers[0].agent is not world.workers[0].agent  # a copy, not the same world


def test_shared_objects_are_referred_to_not_copied():
    snapshots, (root, *_rest) = _worlds(ExploreConfig(), 1)
    loaded = snapshots.loads(snapshots.dumps(root))
    for mine, theirs in zip(root.shared, loaded.shared, strict=True):
        assert mine is theirs
    assert len(snapshots.dumps(root)) < len(pickle.dumps(root)) / 2  # the primed memo makes a snapshot small


def test_a_loaded_world_keeps_folding_its_history_into_its_checkers():
    """The history is stored as its checkers: a loaded world's steps still reach every checker, and a violation shows."""
    snapshots, (root, *_rest) = _worlds(ExploreConfig(pauses=1), 1)
    world = snapshots.loads(snapshots.dumps(root))
    before = [checker._entries for checker in world.history.checkers]
    world.apply("control:admit")
    after = [checker._entries for checker in world.history.checkers]
    assert all(later > earlier for earlier, later in zip(before, after, strict=True))
    assert world.history.count == root.history.count + len(world.step_entries)


def test_a_history_whose_checker_crashed_is_stored_whole():
    """A crashed checker is dropped from the fold; a snapshot must keep it dropped (and say why), not rebuild it."""
    snapshots, (root, *_rest) = _worlds(ExploreConfig(), 1)
    world = snapshots.loads(snapshots.dumps(root))
    fenced = next(checker for checker in world.history.checkers if checker.name == "fenced_writes")
    fenced._on_event = None  # calling it raises TypeError: the checker crashes on the next accepted event
    world.apply("control:admit")
    assert "fenced_writes" in world.history.crashed
    fenced.__dict__.pop("_on_event")  # pickle cannot store the broken hook; the crash record is what must survive
    loaded = snapshots.loads(snapshots.dumps(world))
    assert loaded.history.crashed == world.history.crashed
    assert all(name != "fenced_writes" for name, _fold in loaded.history._folds[type(world.step_entries[0])])
