"""Exhaustive exploration: every interleaving of a small configuration, over the real core, against every invariant.

The simulator samples: a seed reaches the interleavings it happens to reach.
`explore` enumerates them (TLC's and stateright's habit, over the reference
core and the reference agent themselves, so no model can drift from the
code). From the initial world (`world.World`: tasks dispatched, workers
idle) it takes every step any actor may take, copies the world for each, and
goes on from every world it has not seen before. The loop is four concerns:

- **the frontier**: the worlds still to expand, as bytes (`snapshots.py`),
  each with the steps that built it and the steps it may take, a level at a
  time, spilled to disk past a memory bound (`frontier.py`, `levels.py`);
- **deduplication**: a visited state is known by its 64-bit fingerprint
  (`digest.py`), with symmetry reduction the least text over the renamings
  of the workers; the report prints the chance that two states collided;
- **judging**: each step's entries are folded into the very checkers the
  simulator uses, carried along each path, then a final read of every
  record is judged (`judge.py`). A history is judged on the path that
  reached its state first; a second path into a visited state is judged for
  its own step, then merged. A state whose every step leads back to itself
  is judged as one where the run has ended;
- **the counterexample**: the first violation stops the search, and its
  path is played again in a fresh world for its timeline (`replay.py`).

Breadth-first by default, so the first violation found is at the least
depth any violation has: a shortest counterexample. The level where it
shows is expanded to its end and its least-ranked violation is the one
reported (`levels.py`), so the result is the same over one process or
several (`parallel.py`, `processes`; `seen.py` lets each process know
what the others visited). With `por`, partial-order reduction skips the
second order of independent steps (sleep sets, `independence.py`): the
same states, fewer steps. Depth-first with a bound reaches deeper into
larger configurations with less memory, in one process. A search completes
when no unvisited state is left; a depth, state or time bound that cut it
short is said so, and the exit status says it too.

Where the time goes, per step (CPU, one process, the benchmark
configuration): loading the world about 300 µs, its digest about 150, the
step itself (the real core and agent) about 100, judging about 100, and
listing the next steps about 40; storing a new state about 150. What would
buy the next factor is a copy of the world that shares what a step leaves
alone (a store and checkers with structural sharing), which the core and
the checkers would have to offer: see issue 25.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shiftchange.checkers.history import VIOLATED
from shiftchange.core import Event
from shiftchange.core.table import Table
from shiftchange.spec.coverage import Coverage, CoverageError, Tally

from . import parallel
from .config import ExploreConfig, ExploreError
from .digest import FINGERPRINT_BITS, collision_probability, fingerprint
from .exposures import pattern_of
from .flags import steps_flags
from .frontier import MEMORY_MAX_BYTES
from .judge import Finding, judge
from .levels import Bounded, Counts, Partition, finished
from .replay import replay
from .seen import SharedSeen
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
    replays: bool = True
    """Whether its steps, played again on the concrete clock (`replay.py`), violate the same invariant. The abstract
    clock's search takes only concrete steps, so they do unless a state was judged as ended because every step led back
    to its abstract text while its concrete one moved on; such a counterexample is labelled so, not hidden."""


def counterexample(config: ExploreConfig, steps: tuple[str, ...], finding: Finding) -> Counterexample:
    """The finding at the end of `steps`, with their timeline played again on the concrete clock, and whether it showed there."""
    played = replay(config, steps)  # the very steps that built the violating world: its history is theirs
    shown = played.violation is not None and played.violation.invariant == finding.invariant
    return Counterexample(finding.invariant, finding.example, steps, played.timeline, finding.status, shown)


@dataclass
class Exploration:
    """What a search did and found."""

    config: ExploreConfig
    strategy: str
    symmetry: bool
    depth_bound: int | None
    states_bound: int | None
    time_bound_s: float | None = None
    processes: int = 1
    por: bool = False
    """Whether partial-order reduction (sleep sets, `independence.py`) skipped the second order of independent steps."""
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
    pruned: int = 0
    """Steps partial-order reduction did not take: their other order was taken (the full search takes both)."""
    spilled: int = 0
    """States whose worlds waited on disk, not in memory, for their level (the frontier's memory bound)."""
    stopped_by: str | None = None
    """None when the search completed; else "violation", "depth", "states", "time" or "interrupted"."""
    counterexample: Counterexample | None = None
    finishes: bool = False
    """Whether some state where nothing can happen any more has every task done: the work can still be finished under
    this table (False as well when the search stopped before it found one). A safety check holds on a table that refuses
    everything; this is the one liveness question the search answers, the possibility of success (CTL's EF done)."""
    elapsed_s: float = 0.0
    table: Table | None = None
    """The transition table the core ran: the configuration's spec (`spec`), with the anti-pattern's edit, if any."""
    tally: Tally = field(init=False)
    """The rows the search fired, counted against the configuration's spec (the one a review of it reads)."""

    def __post_init__(self) -> None:
        self.tally = _tally_of(self.config)

    @property
    def complete(self) -> bool:
        return self.stopped_by is None

    @property
    def ok(self) -> bool:
        return self.counterexample is None

    @property
    def states_per_s(self) -> float:
        return self.states / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def collision_probability(self) -> float:
        """At most this chance that two distinct states shared a fingerprint (and one was never expanded)."""
        return collision_probability(self.states, self.transitions)

    @property
    def spec(self) -> Table:
        """The table the configuration names (before any anti-pattern's edit): its label and digest are the report's."""
        return self.config.table()

    @property
    def fingerprint_bits(self) -> int:
        return FINGERPRINT_BITS

    def coverage(self) -> Coverage:
        return self.tally.coverage((f"shiftchange explore {steps_flags(self.config)}",))


Progress = Callable[[Exploration], None]


def explore(
    config: ExploreConfig,
    strategy: str = BFS,
    depth_max: int | None = None,
    states_max: int | None = None,
    symmetry: bool = True,
    progress: Progress | None = None,
    progress_every_s: float = 1.0,
    *,
    processes: int = 1,
    time_limit_s: float | None = None,
    memory_max_bytes: int = MEMORY_MAX_BYTES,
    por: bool = False,
) -> Exploration:
    """Enumerate every interleaving of `config` (to the bounds given); stop at the first violation.

    `processes` > 1 spreads a breadth-first search over that many local processes, with the same result;
    `memory_max_bytes` bounds the worlds a level keeps in memory (per process), the rest wait on disk;
    `por` skips the second order of independent steps (breadth-first only), visiting the same states.
    """
    if strategy not in (BFS, DFS):
        raise ExploreError(f"strategy must be {BFS} or {DFS}, not {strategy!r}")
    if strategy == DFS and depth_max is None:
        raise ExploreError("a depth-first search needs a depth bound (--depth N)")
    for name, bound in (("depth_max", depth_max), ("states_max", states_max), ("processes", processes)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise ExploreError(f"{name} must be a whole number of at least 1, not {bound!r}")
    if processes > parallel.PROCESSES_MAX:
        raise ExploreError(f"processes must be at most {parallel.PROCESSES_MAX}, not {processes}")
    if strategy == DFS and por:
        raise ExploreError("partial-order reduction is for a breadth-first search: drop --por, or --dfs")
    if strategy == DFS and processes > 1:
        raise ExploreError("a depth-first search runs in one process: drop --processes, or search breadth-first")
    if time_limit_s is not None and (isinstance(time_limit_s, bool) or not isinstance(time_limit_s, int | float) or not time_limit_s > 0):
        raise ExploreError(f"time_limit_s must be a positive number of seconds, not {time_limit_s!r}")
    if processes > 1 and not hasattr(os, "fork"):
        raise ExploreError("--processes needs a system that forks processes (Linux, macOS); search in one process here")
    result = Exploration(config, strategy, symmetry, depth_max, states_max, time_limit_s, processes, por)
    if strategy == DFS:
        return _DepthFirst(result, progress, progress_every_s).run()
    return _BreadthFirst(result, progress, progress_every_s, memory_max_bytes).run()


class _OutOfTime(Exception):
    """The time limit passed."""


class _BreadthFirst:
    """A breadth-first search, level by level, over one partition here or several in their own processes."""

    def __init__(self, result: Exploration, progress: Progress | None, progress_every_s: float, memory_max_bytes: int) -> None:
        self.result = result
        self.progress, self.progress_every_s = progress, progress_every_s
        self.memory_max_bytes = memory_max_bytes
        self.began = self.shown = 0.0

    def run(self) -> Exploration:
        result = self.result
        self.began = self.shown = time.perf_counter()
        deadline = None if result.time_bound_s is None else time.monotonic() + result.time_bound_s
        root = World(result.config, pattern_of(result.config))
        result.table = root.table
        snapshots = Snapshots(root)
        count = result.processes
        spec = result.config.table().spec
        partitions = [
            Partition(snapshots, result.symmetry, index, count, self.memory_max_bytes, por=result.por, spec=spec) for index in range(count)
        ]
        partitions[0].tally = result.tally
        shared = SharedSeen(count) if count > 1 else None
        for partition in partitions:
            partition.shared = shared
        found = None
        for partition in partitions:
            found = partition.add_root(root) or found
        try:
            if found is not None:
                self._finish(Counts(states=1, findings=[(b"", (), found)]), None)
            elif count == 1:
                self._here(partitions[0], deadline)
            else:
                self._spread(partitions, deadline)
        finally:
            result.elapsed_s = time.perf_counter() - self.began
            if shared is not None:
                shared.close()
        return result

    def _here(self, partition: Partition, deadline: float | None) -> None:
        partition.states_max = self.result.states_bound

        def after_each() -> None:
            if deadline is not None and time.monotonic() >= deadline:
                raise _OutOfTime
            self._show(partition.counts)

        stopped_by = None
        try:
            while len(partition.current):
                partition.expand_level(self.result.depth_bound, after_each)
                if partition.counts.findings:
                    break
                partition.next_level()
        except Bounded:
            stopped_by = "states"
        except _OutOfTime:
            stopped_by = "time"
        except KeyboardInterrupt:
            stopped_by = "interrupted"
        finally:
            partition.current.close()
            partition.next.close()
        self._finish(partition.counts, stopped_by)

    def _spread(self, partitions: list[Partition], deadline: float | None) -> None:
        result = self.result
        outcome = parallel.run(partitions, result.depth_bound, result.states_bound, deadline, self._show, self.progress_every_s)
        if outcome.tallies:  # the first process's tally holds the setup's events too: it was forked with them
            result.tally = _tally_of(result.config)
            for counts in outcome.tallies:
                _add_counts(result.tally, counts)
        self._finish(outcome.counts, outcome.stopped_by if outcome.stopped_by != "violation" else None)

    def _finish(self, counts: Counts, stopped_by: str | None) -> None:
        """Copy the counts in; the least-ranked finding, if any, is the counterexample, played again for its timeline."""
        result = self.result
        for name in ("states", "explored", "transitions", "depth", "quiescent", "cut", "spilled", "pruned"):
            setattr(result, name, getattr(counts, name))
        result.stopped_by = stopped_by
        result.finishes = counts.finished > 0
        if counts.findings:
            _rank, steps, finding = min(counts.findings, key=lambda found: found[0])
            result.counterexample = counterexample(result.config, steps, finding)
            result.depth = max(result.depth, len(steps))
            result.stopped_by = "violation"
        elif stopped_by is None and result.cut:
            result.stopped_by = "depth"

    def _show(self, counts: Counts) -> None:
        if self.progress is not None and time.perf_counter() - self.shown >= self.progress_every_s:
            self.shown = time.perf_counter()
            result = self.result
            for name in ("states", "explored", "transitions", "depth", "quiescent", "spilled"):
                setattr(result, name, getattr(counts, name))
            result.elapsed_s = self.shown - self.began
            self.progress(result)


def _tally_of(config: ExploreConfig) -> Tally:
    """A tally of the rows of the spec `config` names (an anti-pattern's edit is the run's, not the spec under review)."""
    try:
        return Tally(config.table().spec)
    except CoverageError as error:
        raise ExploreError(f"the spec's rows cannot be counted for coverage: {error}") from None


def _add_counts(tally: Tally, counts: dict) -> None:
    """Add another process's `Tally.counts` into `tally` (the same rows: the processes were forked from one spec)."""
    tally.events += counts["events"]
    tally.add_presented(counts["presented"])
    for machine, fired in counts["fired"].items():
        mine = tally._fired[machine]
        for index, count in enumerate(fired):
            mine[index] += count
    for machine, refused in counts["refused"].items():
        for kind, count in refused.items():
            tally._refused[machine][kind] = tally._refused[machine].get(kind, 0) + count
    for machine, kind, source, dest, count, example in counts["unmatched"]:
        entry = tally._unmatched.setdefault((machine, kind, source, dest), [0, example])
        entry[0] += count
    for kind, count in counts["other"].items():
        tally._other[kind] = tally._other.get(kind, 0) + count


# ------------------------------------------------------------------ depth-first


@dataclass(slots=True)
class _Node:
    """A state waiting to be expanded: its world as bytes (none when it may take no step), the steps that built it, and its steps."""

    world: bytes
    shape: int
    """The state's fingerprint with workers interchangeable: what "a step changed nothing" is judged by."""
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


class _DepthFirst:
    """A depth-first search to a depth bound: its stack, visited states and result."""

    def __init__(self, result: Exploration, progress: Progress | None, progress_every_s: float) -> None:
        self.result = result
        self.progress, self.progress_every_s = progress, progress_every_s
        self.seen: dict[int, int] = {}
        """fingerprint -> the least depth it was reached at (a state is expanded again when a shorter way in is found)."""
        self.ended: set[int] = set()
        """States where no step is enabled: a step into one that merges is judged as ending the run without asking again."""
        self.stuck: set[int] = set()
        """States whose every step leads back to them, judged once each (a state may be expanded again)."""
        self.snapshots: Snapshots | None = None
        self.began = self.shown = 0.0
        self.deadline: float | None = None

    def run(self) -> Exploration:
        result = self.result
        began = self.began = self.shown = time.perf_counter()
        self.deadline = None if result.time_bound_s is None else time.monotonic() + result.time_bound_s
        root = World(result.config, pattern_of(result.config))
        result.table = root.table
        self.snapshots = Snapshots(root)
        try:
            self._search(root)
            if result.cut:
                result.stopped_by = "depth"
        except _Found as found:
            result.counterexample = counterexample(result.config, found.steps, found.finding)
            result.stopped_by = "violation"
        except Bounded:
            result.stopped_by = "states"
        except _OutOfTime:
            result.stopped_by = "time"
        except KeyboardInterrupt:
            result.stopped_by = "interrupted"
        finally:
            result.elapsed_s = time.perf_counter() - began
        return result

    def _search(self, root: World) -> None:
        pending = [self._root(root)]
        depth_max = self.result.depth_bound
        while pending:
            node = pending.pop()
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

    def _expand(self, node: _Node, pending: list[_Node]) -> None:
        """Take every step `node` may take; push each new state; judge `node` as ended if no step moved it."""
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
        now = time.perf_counter()
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _OutOfTime
        if self.progress is not None and now - self.shown >= self.progress_every_s:
            self.shown = now
            self.result.elapsed_s = now - self.began
            self.progress(self.result)

    def _keys(self, world: World) -> tuple[int, int]:
        """The state's fingerprint under this search's symmetry, and with workers interchangeable (its shape)."""
        key = fingerprint(world, self.result.symmetry)
        return key, key if self.result.symmetry else fingerprint(world, True)

    def _merges(self, key: int, path: tuple[str, ...]) -> bool:
        """Whether the state reached by `path` is visited already, by a way in no longer than this one."""
        known = self.seen.get(key)
        return known is not None and known <= len(path)

    def _visit(self, key: int, path: tuple[str, ...], actions: list[str]) -> bool:
        """Whether the state reached by `path` is to be expanded: new, or reached by a shorter way in."""
        result = self.result
        known = self.seen.get(key)
        if known is not None and known <= len(path):
            return False
        if known is None:
            if result.states_bound is not None and result.states >= result.states_bound:
                raise Bounded
            result.states += 1
            result.quiescent += not actions
            if not actions:
                self.ended.add(key)
        self.seen[key] = len(path)
        result.depth = max(result.depth, len(path))
        return True

    def _judge(self, world: World, path: tuple[str, ...], quiescent: bool) -> None:
        if quiescent and not self.result.finishes:
            self.result.finishes = finished(world)
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
