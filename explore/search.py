"""Exhaustive exploration: every interleaving of a small configuration, over the real core, against every invariant.

The simulator samples: a seed reaches the interleavings it happens to reach.
`explore` enumerates them (TLC's and stateright's habit, over the reference
core and the reference agent themselves, so no model can drift from the
code). From the initial world (`world.World`: tasks dispatched, workers
idle) it takes every step any actor may take, copies the world for each, and
goes on from every world it has not seen before. The loop is four concerns:

- **the frontier**: the worlds still to expand, as bytes (`snapshots.py`),
  each with the steps that built it and the steps it may take;
- **deduplication**: a visited state is known by its digest (`digest.py`),
  with symmetry reduction the least over every renaming of the workers;
- **judging**: each step's entries are folded into the very checkers the
  simulator uses, carried along each path, then a final read of every
  record is judged (`judge.py`). A history is judged on the path that
  reached its state first; a second path into a visited state is judged for
  its own step, then merged. A state whose every step leads back to itself
  is judged as one where the run has ended;
- **the counterexample**: the first violation stops the search, and its
  path is played again in a fresh world for its timeline (`replay.py`).

Breadth-first by default, so the first violation found is at the least
depth any violation has: a shortest counterexample. Depth-first with a bound
reaches deeper into larger configurations with less memory. A search
completes when no unvisited state is left; a depth or state bound that cut
it short is said so, and the exit status says it too.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from shiftchange.checkers.history import VIOLATED
from shiftchange.core import Event
from shiftchange.core.machine import SPEC
from shiftchange.spec.coverage import Coverage, Tally

from .config import ExploreConfig, ExploreError
from .digest import digest
from .exposures import pattern_of
from .flags import steps_flags
from .judge import Finding, judge
from .replay import replay
from .snapshots import Snapshots
from .world import World

BFS, DFS = "bfs", "dfs"


@dataclass(frozen=True)
class Counterexample:
    """The first violation the search found: the invariant, what it saw, the steps that reach it, and their timeline."""

    invariant: str
    example: tuple[str, ...]
    steps: tuple[str, ...]
    timeline: tuple[str, ...]
    status: str = VIOLATED
    """Violated, or unknown when the checker crashed on this path (a failure all the same: nothing was judged)."""


@dataclass
class Exploration:
    """What a search did and found."""

    config: ExploreConfig
    strategy: str
    symmetry: bool
    depth_bound: int | None
    states_bound: int | None
    states: int = 0
    """Distinct states (after symmetry reduction)."""
    explored: int = 0
    """States whose steps were all taken."""
    transitions: int = 0
    """Steps taken, each one judged (into a new state or a visited one)."""
    depth: int = 0
    """The greatest depth reached."""
    quiescent: int = 0
    """Distinct states where nothing can happen any more (each judged for lost tasks)."""
    cut: int = 0
    """States the depth bound left unexpanded."""
    stopped_by: str | None = None
    """None when the search completed; else "violation", "depth", "states" or "interrupted"."""
    counterexample: Counterexample | None = None
    elapsed_s: float = 0.0
    tally: Tally = field(default_factory=lambda: Tally(SPEC))

    @property
    def complete(self) -> bool:
        return self.stopped_by is None

    @property
    def ok(self) -> bool:
        return self.counterexample is None

    @property
    def states_per_s(self) -> float:
        return self.states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def coverage(self) -> Coverage:
        return self.tally.coverage((f"shiftchange explore {steps_flags(self.config)}",))


@dataclass(slots=True)
class _Node:
    """A state waiting to be expanded: its world as bytes (none when it may take no step), the steps that built it, and its steps."""

    world: bytes
    shape: bytes
    """The state's digest with workers interchangeable: what "a step changed nothing" is judged by."""
    path: tuple[str, ...]
    actions: list[str]

    @property
    def depth(self) -> int:
        return len(self.path)


class _Found(Exception):
    """A violation on the path `steps`: the search stops there."""

    def __init__(self, steps: tuple[str, ...], finding: Finding) -> None:
        super().__init__(finding.invariant)
        self.steps, self.finding = steps, finding


class _Bounded(Exception):
    """The state bound was reached."""


Progress = Callable[[Exploration], None]


def explore(
    config: ExploreConfig,
    strategy: str = BFS,
    depth_max: int | None = None,
    states_max: int | None = None,
    symmetry: bool = True,
    progress: Progress | None = None,
    progress_every_s: float = 1.0,
) -> Exploration:
    """Enumerate every interleaving of `config` (to the bounds given); stop at the first violation."""
    if strategy not in (BFS, DFS):
        raise ExploreError(f"strategy must be {BFS} or {DFS}, not {strategy!r}")
    if strategy == DFS and depth_max is None:
        raise ExploreError("a depth-first search needs a depth bound (--depth N)")
    for name, bound in (("depth_max", depth_max), ("states_max", states_max)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise ExploreError(f"{name} must be a whole number of at least 1, not {bound!r}")
    return _Search(Exploration(config, strategy, symmetry, depth_max, states_max), progress, progress_every_s).run()


class _Search:
    """One search's frontier, visited states and result."""

    def __init__(self, result: Exploration, progress: Progress | None, progress_every_s: float) -> None:
        self.result = result
        self.progress, self.progress_every_s = progress, progress_every_s
        self.seen: dict[bytes, int] = {}
        """digest -> the least depth it was reached at (depth-first search expands a state again when it finds a shorter way in)."""
        self.ended: set[bytes] = set()
        """States where no step is enabled: a step into one that merges is judged as ending the run without asking again."""
        self.stuck: set[bytes] = set()
        """States whose every step leads back to them, judged once each (depth-first search may expand one again)."""
        self.pattern = pattern_of(result.config)
        self.snapshots: Snapshots | None = None
        self.began = self.shown = 0.0
        """When the search began, and when it last reported its progress (`time.perf_counter`)."""

    def run(self) -> Exploration:
        result = self.result
        began = self.began = self.shown = time.perf_counter()
        root = World(result.config, self.pattern)
        self.snapshots = Snapshots(root)
        try:
            self._search(root)
            if result.cut:
                result.stopped_by = "depth"
        except _Found as found:
            played = replay(result.config, found.steps)  # the very steps that built the violating world: its history is theirs
            finding = found.finding
            result.counterexample = Counterexample(finding.invariant, finding.example, found.steps, played.timeline, finding.status)
            result.stopped_by = "violation"
        except _Bounded:
            result.stopped_by = "states"
        except KeyboardInterrupt:
            result.stopped_by = "interrupted"
        finally:
            result.elapsed_s = time.perf_counter() - began
        return result

    # ------------------------------------------------------------ frontier

    def _search(self, root: World) -> None:
        pending = deque([self._root(root)])
        take = pending.popleft if self.result.strategy == BFS else pending.pop
        depth_max = self.result.depth_bound
        while pending:
            node = take()
            if depth_max is not None and node.depth >= depth_max:
                self.result.cut += 1 if node.actions else 0
                continue
            self._expand(node, pending)
            self._report_progress()

    def _root(self, root: World) -> _Node:
        self._tally(root)
        key, shape = self._keys(root)
        self.seen[key] = 0
        self.result.states = 1
        actions = root.actions()
        if not actions:
            self.ended.add(key)
        self._judge(root, (), not actions)
        self.result.quiescent += not actions
        return _Node(self.snapshots.dumps(root), shape, (), actions)

    def _expand(self, node: _Node, pending: deque[_Node]) -> None:
        """Take every step `node` may take; queue each new state; judge `node` as ended if no step moved it."""
        self.result.explored += 1
        if not node.actions:
            return
        moved = False
        for label in node.actions:
            child = self.snapshots.loads(node.world)
            child.apply(label, checked=False)
            self.result.transitions += 1
            self._tally(child)
            path = (*node.path, label)
            key, shape = self._keys(child)
            if self._merges(key, path):  # its steps are known already: only whether it has any is asked
                actions, quiescent = None, key in self.ended
            else:
                actions = child.actions()
                quiescent = not actions
            self._judge(child, path, quiescent)
            moved = moved or shape != node.shape
            if actions is not None and self._visit(key, path, actions):
                world = self.snapshots.dumps(child) if actions else b""  # a state with no step is never loaded again
                pending.append(_Node(world, shape, path, actions))
        if not moved and node.shape not in self.stuck:
            # Every step it may take leaves it as it is (a refusal asked again, a renewal at the same instant):
            # nothing can change any more, so it is judged as a state where the run has ended.
            self.stuck.add(node.shape)
            self.result.quiescent += 1
            self._judge(self.snapshots.loads(node.world), node.path, True)

    def _report_progress(self) -> None:
        if self.progress is not None and time.perf_counter() - self.shown >= self.progress_every_s:
            self.shown = time.perf_counter()
            self.result.elapsed_s = self.shown - self.began
            self.progress(self.result)

    # ------------------------------------------------------- deduplication

    def _keys(self, world: World) -> tuple[bytes, bytes]:
        """The state's digest under this search's symmetry, and with workers interchangeable (its shape)."""
        key = digest(world, self.result.symmetry)
        return key, key if self.result.symmetry else digest(world, True)

    def _merges(self, key: bytes, path: tuple[str, ...]) -> bool:
        """Whether the state reached by `path` is visited already and is not to be expanded again."""
        known = self.seen.get(key)
        return known is not None and (self.result.strategy == BFS or known <= len(path))

    def _visit(self, key: bytes, path: tuple[str, ...], actions: list[str]) -> bool:
        """Whether the state reached by `path` is to be expanded: new, or (depth-first) reached by a shorter way in."""
        result = self.result
        known = self.seen.get(key)
        if known is not None and (result.strategy == BFS or known <= len(path)):
            return False
        if known is None:
            if result.states_bound is not None and result.states >= result.states_bound:
                raise _Bounded
            result.states += 1
            result.quiescent += not actions
            if not actions:
                self.ended.add(key)
        self.seen[key] = len(path)
        result.depth = max(result.depth, len(path))
        return True

    # ------------------------------------------------------------- judging

    def _judge(self, world: World, path: tuple[str, ...], quiescent: bool) -> None:
        finding = judge(world, quiescent)
        if finding is not None:
            self.result.depth = max(self.result.depth, len(path))
            raise _Found(path, finding)

    def _tally(self, world: World) -> None:
        """Count the rows this step fired, for coverage; the step's entries are then forgotten."""
        for entry in world.step_entries:
            if type(entry) is Event:
                self.result.tally.add(entry)
        world.step_entries.clear()
