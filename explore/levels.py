"""One share of a breadth-first search, level by level: the states it owns, the worlds of its frontier, its findings.

Why levels. A breadth-first search expands every state of depth d before any
of depth d+1, so the first violation is at the least depth. Kept as a single
queue, the order within a level is the order states were first reached in; a
search spread over processes cannot keep that queue, so every order the
result depends on is made explicit instead, and the result is the same
whatever the number of partitions:

- **a state's rank**: the indices, step by step, of the steps on the path
  that reached it, compared as a sequence. A single queue first reaches
  each state by its least-ranked path, and expands in rank order; here each
  state keeps the world of its least-ranked arrival (whose history the
  checkers carry on from), wherever the arrivals were made;
- **the finding**: the level where the first violation shows is expanded to
  its end, and the least-ranked finding of it is the counterexample (a step
  into a violation ranks as its path; a state judged as ended ranks after
  every step taken from it, as a single queue would meet it). The counts are
  those at the end of that level;
- **ownership**: a state belongs to the partition its shape fingerprint
  (workers interchangeable) names, so a state and its mirror images are
  deduplicated, and judged as ended, in one place.

With one partition everything is merged as it is reached (the owner is
here), so a step into a visited state is known at once and its world is
never stored; with several, a partition stores each world it reaches first
at this level (or by a lower rank than before) and sends it to its owner,
which keeps the least-ranked one at the level's end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shiftchange.core import Event
from shiftchange.core.table import packaged
from shiftchange.spec.coverage import Tally
from shiftchange.spec.model import Spec

from .digest import fingerprint
from .frontier import MEMORY_MAX_BYTES, Frontier, Spilled
from .independence import footprint, independent
from .judge import Finding, judge
from .seen import SharedSeen
from .snapshots import Snapshots
from .world import World

DONE = "done"
"""The Task state in which its work is finished: reviewed and accepted (`spec/task.toml`)."""

ENDED_RANK = b"\xff\xff"
"""A state judged as ended ranks after every step taken from it: one more step index, greater than any."""
Record = tuple[bytes, int, int, bytes, tuple[str, ...], tuple[str, ...] | None, frozenset[str]]
"""A state waiting to be expanded: its world (none when it may take no step), key, shape, rank, path, steps (None: an
arrival that only brings its sleep set), and the steps asleep in it (partial-order reduction, `independence.py`)."""
AWAKE: frozenset[str] = frozenset()


class Bounded(Exception):
    """The state bound was reached."""


@dataclass
class Counts:
    """What a partition did: every count of `Exploration` it adds to, and its findings."""

    states: int = 0
    explored: int = 0
    transitions: int = 0
    depth: int = 0
    quiescent: int = 0
    cut: int = 0
    spilled: int = 0
    pruned: int = 0
    finished: int = 0
    """Nonzero once a state where nothing can happen any more had every task done (`Exploration.finishes`); counting
    stops at the first, since only whether there is one is asked."""
    findings: list[tuple[bytes, tuple[str, ...], Finding]] = field(default_factory=list)

    def add(self, other: Counts) -> None:
        self.states += other.states
        self.explored += other.explored
        self.transitions += other.transitions
        self.depth = max(self.depth, other.depth)
        self.quiescent += other.quiescent
        self.cut += other.cut
        self.spilled += other.spilled
        self.pruned += other.pruned
        self.finished += other.finished
        self.findings += other.findings


def finished(world: World) -> bool:
    """Whether every task of this world is done: the work finished (asked only where nothing can happen any more)."""
    return all(retired.task.state == DONE for retired in world.retirements())


class Partition:
    """The states one process owns (`index` of `partitions`), its current level, and what it sends to the others."""

    def __init__(
        self,
        snapshots: Snapshots,
        symmetry: bool,
        index: int = 0,
        partitions: int = 1,
        memory_max_bytes: int = MEMORY_MAX_BYTES,
        directory: str | None = None,
        por: bool = False,
        spec: Spec | None = None,
    ) -> None:
        """`spec`: the spec whose rows the tally counts (the configuration's; default the packaged one)."""
        self.snapshots, self.symmetry, self.por = snapshots, symmetry, por
        self.index, self.partitions = index, partitions
        self.memory_max_bytes, self.directory = memory_max_bytes, directory
        self.seen: set[int] = set()
        """The fingerprints of the states this partition owns, at every level."""
        self.ended: set[int] = set()
        """Owned states where no step is enabled: a step into one that merges is judged as ending the run without asking again."""
        self.stuck: set[int] = set()
        """Shapes judged as ended because every step they may take leads back to them."""
        self.current = self._frontier()
        self.next = self._frontier()
        """The next level's own states (one partition: merged as they are reached)."""
        self.outgoing = [self._frontier() for _ in range(partitions)] if partitions > 1 else []
        self.sent_before: set[int] = set()
        """Fingerprints sent at earlier levels: their owners have them as visited already."""
        self.sent_now: dict[int, bytes] = {}
        """Fingerprints sent at this level, with the least rank sent."""
        self.sleep_now: dict[int, frozenset[str]] = {}
        self.sleep_next: dict[int, frozenset[str]] = {}
        """One partition: the sleep set of each state of this level and the next, the intersection of its arrivals'."""
        self.shared: SharedSeen | None = None
        """Several partitions: every owner's visited fingerprints, readable here (`seen.py`)."""
        self.counts = Counts()
        self.tally = Tally(spec if spec is not None else packaged().spec)
        self.states_max: int | None = None
        self.states_before = 0
        """States the other partitions had at the start of this level (the bound counts them too)."""

    def _frontier(self) -> Frontier:
        return Frontier(self.memory_max_bytes, self.directory)

    def owns(self, shape: int) -> bool:
        return shape % self.partitions == self.index

    # ------------------------------------------------------------------ the root

    def add_root(self, world: World) -> Finding | None:
        """Judge the initial world and, if this partition owns it, make it the first level; its finding, if any."""
        self._tally(world)
        key = fingerprint(world, self.symmetry)
        shape = key if self.symmetry else fingerprint(world, True)
        actions = tuple(world.actions())
        if not actions:
            self._ended(world)
        finding = judge(world, not actions)
        if self.owns(shape):
            self.seen.add(key)
            if self.shared is not None:
                self.shared.add(self.index, key, not actions)
            self.counts.states += 1
            if not actions:
                self.ended.add(key)
                self.counts.quiescent += 1
            self.current.append((self.snapshots.dumps(world), key, shape, b"", (), actions, AWAKE))
        return finding

    # --------------------------------------------------------------- expanding

    def expand_level(self, depth_max: int | None, after_each: Callable[[], None] = lambda: None) -> None:
        """Take every step of every state of this level; the new states go to the next level (or to their owners)."""
        for record in self.current.drain():
            self._expand(record, depth_max)
            after_each()
        self.sent_before.update(self.sent_now)
        self.sent_now = {}

    def _expand(self, record: Record, depth_max: int | None) -> None:
        data, key, shape, rank, path, actions, sleep = record
        counts = self.counts
        if self.partitions == 1:
            sleep = self.sleep_now.pop(key, sleep)
        if depth_max is not None and len(path) >= depth_max:
            counts.cut += 1 if actions else 0
            return
        counts.explored += 1
        if not actions:
            return
        asleep = sleep.intersection(actions)
        footprints: dict[str, frozenset[str]] = {}
        taken: list[str] = []
        moved = False
        for index, label in enumerate(actions):
            if label in asleep:  # its other order was taken: the state it leads to is reached that way
                counts.pruned += 1
                continue
            child = self.snapshots.loads(data)
            child_sleep = AWAKE
            if self.por:
                if not footprints:  # read from the state itself, before any step is taken on the copy
                    footprints = {name: footprint(child, name) for name in actions}
                mine = footprints[label]
                child_sleep = frozenset(other for other in (*asleep, *taken) if independent(footprints[other], mine))
                taken.append(label)
            now = child.clock.now()
            child.apply(label, checked=False)
            counts.transitions += 1
            unchanged = not child.step_entries and child.clock.now() == now
            self._tally(child)
            child_shape = self._step(child, rank + index.to_bytes(2, "big"), (*path, label), child_sleep, unchanged)
            moved = moved or child_shape != shape
        if not moved and asleep:
            moved = self._any_moves(data, shape, asleep)
        if not moved and shape not in self.stuck:
            # Every step it may take leaves it as it is (a refusal asked again, a renewal at the same instant):
            # nothing can change any more, so it is judged as a state where the run has ended.
            self.stuck.add(shape)
            counts.quiescent += 1
            ended = self.snapshots.loads(data)
            self._ended(ended)
            finding = judge(ended, True)
            if finding is not None:
                counts.findings.append((rank + ENDED_RANK, path, finding))

    def _ended(self, world: World) -> None:
        """A state where nothing can happen any more: whether the work finished there, until one is found."""
        if not self.counts.finished:
            self.counts.finished += finished(world)

    def _any_moves(self, data: bytes, shape: int, asleep: frozenset[str]) -> bool:
        """Whether one of the steps asleep in a state whose every step taken leads back to it leads elsewhere."""
        for label in sorted(asleep):
            child = self.snapshots.loads(data)
            child.apply(label, checked=False)
            child.step_entries.clear()
            if fingerprint(child, True) != shape:
                return True
        return False

    def _step(self, child: World, rank: bytes, path: tuple[str, ...], sleep: frozenset[str], unchanged: bool) -> int:
        """Judge the world one step made, and keep it if it is new; its shape.

        `unchanged`: the step entered nothing into the history and did not move the clock, so the checkers and the
        records (written only by contracts, each of which enters an event) are the state's own, which was judged clean
        when it was reached (only a clean state is kept): the verdict is the same unless the run ends here.
        """
        key = fingerprint(child, self.symmetry)
        shape = key if self.symmetry else fingerprint(child, True)
        mine = self.owns(shape)
        if mine and key in self.seen:  # its steps are known already: only whether it has any is asked
            actions, quiescent = None, key in self.ended
            if key in self.sleep_next:  # another arrival at the next level's least depth: only what both let sleep stays asleep
                self.sleep_next[key] &= sleep
        elif not mine and self.shared is not None and (ended := self.shared.get(shape % self.partitions, key)) is not None:
            actions, quiescent = None, ended  # its owner visited it at an earlier level: a merge, as in one process
        else:
            actions = tuple(child.actions())
            quiescent = not actions
        if quiescent:
            self._ended(child)
        finding = None if unchanged and not quiescent else judge(child, quiescent)
        if finding is not None:
            self.counts.findings.append((rank, path, finding))
        elif actions is not None:
            self._keep(child, key, shape, rank, path, actions, sleep)
        return shape

    def _keep(
        self, child: World, key: int, shape: int, rank: bytes, path: tuple[str, ...], actions: tuple[str, ...], sleep: frozenset[str]
    ) -> None:
        if self.partitions == 1:
            self._visit(key, len(path), actions)
            if self.por:
                self.sleep_next[key] = sleep
            self.next.append((self.snapshots.dumps(child) if actions else b"", key, shape, rank, path, actions, sleep))
            return
        if key in self.sent_before:
            return  # its owner had it at an earlier level: this longer way in changes nothing
        outgoing = self.outgoing[shape % self.partitions]
        least = self.sent_now.get(key)
        if least is not None and least <= rank:
            if self.por:
                outgoing.append((b"", key, shape, rank, path, None, sleep))  # only its sleep set: the world went already
            return
        self.sent_now[key] = rank
        outgoing.append((self.snapshots.dumps(child) if actions else b"", key, shape, rank, path, actions, sleep))

    def _visit(self, key: int, depth: int, actions: tuple[str, ...]) -> None:
        counts = self.counts
        if self.states_max is not None and self.states_before + counts.states >= self.states_max:
            raise Bounded
        self.seen.add(key)
        counts.states += 1
        counts.depth = max(counts.depth, depth)
        if not actions:
            self.ended.add(key)
            counts.quiescent += 1

    def _tally(self, world: World) -> None:
        """Count the rows this step fired, for coverage; the step's entries are then forgotten."""
        tally = self.tally
        for entry in world.step_entries:
            if type(entry) is Event:
                tally.add(entry)
        world.step_entries.clear()

    # ----------------------------------------------------------------- merging

    def next_level(self) -> None:
        """One partition: the states reached become the level to expand."""
        self.counts.spilled += self.next.spilled
        self.current, self.next = self.next, self._frontier()
        self.sleep_now, self.sleep_next = self.sleep_next, {}

    def begin_level(self, level: int) -> None:
        """Several partitions: this level's states for each owner go to a file of their own in the shared directory."""
        self.outgoing = [Frontier(path=self.outgoing_path(level, self.index, owner)) for owner in range(self.partitions)]

    def outgoing_path(self, level: int, sender: int, owner: int) -> str:
        return f"{self.directory}/level-{level}-from-{sender}-to-{owner}"

    def end_level(self) -> None:
        for frontier in self.outgoing:
            frontier.finish()
            frontier.close()

    def merge_level(self, level: int) -> None:
        """Several partitions: read what every partition sent here at `level` and keep each new state once."""
        self.merge([Spilled(self.outgoing_path(level, sender, self.index)) for sender in range(self.partitions)])

    def merge(self, incoming: list[Spilled]) -> None:
        """Several partitions: the states sent here this level, each kept once, from its least-ranked arrival."""
        least: dict[int, bytes] = {}
        sleeps: dict[int, frozenset[str]] = {}
        for frontier in incoming:
            for _data, key, _shape, rank, _path, actions, sleep in frontier.records():
                if key in self.seen:
                    continue
                sleeps[key] = sleeps[key] & sleep if key in sleeps else sleep
                if actions is not None and (key not in least or rank < least[key]):
                    least[key] = rank
        for frontier in incoming:
            for record in frontier.drain():
                key, rank = record[1], record[3]
                if record[5] is not None and least.get(key) == rank:
                    del least[key]  # the first of equal ranks (one partition sends a state at most once per rank)
                    self._visit(key, len(record[4]), record[5])
                    if self.shared is not None:
                        self.shared.add(self.index, key, not record[5])
                    self.current.append((*record[:6], sleeps[key]))
        self.counts.spilled += self.current.spilled
