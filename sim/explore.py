"""Exhaustive exploration: every interleaving of a small configuration, over the real core, against every invariant.

The simulator samples: a seed reaches the interleavings it happens to reach.
`explore` enumerates them (TLC's and stateright's habit, over the reference
core itself, so no model can drift from the code). From the initial world
(`explore_world.World`: tasks dispatched, workers idle) it takes every step
any actor may take, copies the world for each, and goes on from every world
it has not seen before:

- **Visited states** are deduplicated by a digest of the store's records, the
  provider's ledger, the calls and duplicates in flight, the actors' fields,
  the control plane's agenda, the fault budgets left and the clock; never the
  history. With symmetry reduction (the default) workers are interchangeable:
  the digest is the least over every renaming of the workers, so a state and
  its mirror image count once. Tasks are not reduced: `claim_next` breaks ties
  between Attempts admitted at one instant by id and admission serves its
  queue in arrival order, so two tasks are not interchangeable to the core.
- **Every transition is judged.** Each step's entries (the core's events, the
  effects that landed, the faults) are folded into the same checkers the
  simulator uses, carried along each path; then a final read of every task's
  records (Jepsen's, as if the run ended there) is judged by the checkers
  that read final records. `no_lost_tasks` is judged only where nothing can
  happen any more: a task still in progress in a quiescent state is lost.
  A history is judged on the path that reached its state first; a second path
  into a visited state is judged for its own step, then merged.
- **Breadth-first** by default, so the first violation found is at the least
  depth any violation has: a shortest counterexample, printed as a timeline
  with its replay command. Depth-first with a bound reaches deeper into larger
  configurations with less memory.

A search completes when no unvisited state is left; a depth or state bound
that cut it short is said so, and the exit status says it too.
"""

from __future__ import annotations

import copyreg
import hashlib
import io
import itertools
import pickle
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED, Verdict, describe, invariant_rows
from shiftchange.checkers.rules import INVARIANTS
from shiftchange.core import Event
from shiftchange.core.machine import SPEC
from shiftchange.spec.coverage import Coverage, Tally

from .antipatterns import ANTIPATTERNS, AntiPattern
from .explore_world import ExploreConfig, ExploreError, StepError, World, worker_name

__all__ = [
    "EXPOSURES",
    "OUT_OF_SCOPE",
    "Counterexample",
    "Exploration",
    "ExploreConfig",
    "ExploreError",
    "Exposure",
    "Replayed",
    "explore",
    "exposing_config",
    "replay",
]

BFS, DFS = "bfs", "dfs"
LOST_TASKS = "no_lost_tasks"


# ------------------------------------------------------------ anti-patterns


@dataclass(frozen=True)
class Exposure:
    """The small configuration in which an anti-pattern's interleaving exists, and the invariant that must catch it."""

    changes: dict[str, Any]
    invariant: str
    window: str
    """The interleaving, in a line: what must happen, in what order."""


EXPOSURES: dict[str, Exposure] = {
    "no-fencing": Exposure(
        {"pauses": 1}, "fenced_writes", "a worker paused after its claim wakes past its lease's expiry, and its write is taken anyway"
    ),
    "timestamp-keys": Exposure(
        {"lost_responses": 1},
        "one_effect_per_operation",
        "a call lands and its answer is lost; asked again later, the gateway mints a new key and the provider lands it anew",
    ),
    "db-only-dedup": Exposure(
        {"lost_responses": 1, "idempotent_provider": False},
        "one_effect_per_operation",
        "a call lands and its answer is lost; the gateway finds no receipt, asks no provider, and grants it again",
    ),
    "worker-minted-keys": Exposure(
        {"crashes": 1},
        "one_effect_per_operation",
        "a worker crashes between an effect landing and its receipt; its replacement's own key does not find the effect",
    ),
    "restart-from-scratch": Exposure(
        {"crashes": 1},
        "one_effect_per_operation",
        "a worker crashes after an effect landed; Attempt 2 reruns from step one under keys of its own",
    ),
    "cancel-as-flag": Exposure(
        {"cancels": 1},
        "cancel_is_final",
        "a task is cancelled, and its queued Attempt is admitted all the same: the flag prevents nothing",
    ),
    "conflated-task-attempt": Exposure(
        {"ci_failures": 1}, "append_only_attempts", "CI fails, the loop corrects, and the retry rewrites the ended Attempt"
    ),
    "unrecorded-effects": Exposure(
        {"operations": ("push", "create-pr")}, "complete_audit", "the worker pushes without asking the gateway: an effect with no intent"
    ),  # the anti-pattern bypasses the gateway for "push" only, so the workflow pushes first
    "context-as-state": Exposure(
        {}, "complete_audit", "an effect lands whose intent the durable record does not list (only the transcript knew)"
    ),
    "blind-retry": Exposure(
        {"ci_failures": 1},
        "classified_retry",
        "CI fails and the blind loop retries the same hypothesis without a decision",
    ),
}
"""The anti-patterns that are a matter of interleaving, each with the configuration that exposes it."""

OUT_OF_SCOPE: dict[str, str] = {
    "retry-storm": "a matter of rates: many workers retrying one outage together overload it again; a few calls in every order do not"
    " (`sim run --antipattern retry-storm` measures goodput)",
    "silent-queue-growth": "a matter of load: queue age climbs past deadlines under sustained arrivals, which a configuration of"
    " a few tasks cannot hold (`sim run --antipattern silent-queue-growth`)",
    "budget-burn": "a matter of sums: spend drains a budget over many calls; every interleaving of a few cheap calls stays inside"
    " it (`sim run --antipattern budget-burn`)",
}
"""The anti-patterns that are quantitative by nature, with the reason exhaustive exploration is not the tool for them."""

if set(EXPOSURES) | set(OUT_OF_SCOPE) != set(ANTIPATTERNS) or set(EXPOSURES) & set(OUT_OF_SCOPE):
    raise RuntimeError("sim/explore.py must say of every anti-pattern whether exploration exposes it (EXPOSURES) or not (OUT_OF_SCOPE)")


def _in_scope(name: str) -> AntiPattern:
    """The anti-pattern named, if exploration exposes it; an unknown or out-of-scope name is an ExploreError."""
    if name in OUT_OF_SCOPE:
        raise ExploreError(f"{name} is out of scope for exploration: {OUT_OF_SCOPE[name]}")
    if name not in EXPOSURES:
        raise ExploreError(f"unknown anti-pattern {name!r}; use one of {', '.join(ANTIPATTERNS)}")
    return ANTIPATTERNS[name]


def exposing_config(name: str, **overrides: Any) -> ExploreConfig:
    """The configuration that exposes anti-pattern `name`, with `overrides` on top; an out-of-scope one is refused."""
    _in_scope(name)
    return ExploreConfig(**{**EXPOSURES[name].changes, **overrides, "antipattern": name})


def _pattern(config: ExploreConfig) -> AntiPattern | None:
    return None if config.antipattern is None else _in_scope(config.antipattern)


# ------------------------------------------------------------------ results


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


@dataclass(frozen=True)
class Replayed:
    """A path played again in a fresh world: its timeline, and the first violation on it, if any."""

    steps: tuple[str, ...]
    timeline: tuple[str, ...]
    violation: Finding | None
    """The first step's finding (invariant, example, status), or None."""


# ------------------------------------------------------------------- digest

_NAMES = re.compile(r"worker-\d+")


def _digest(world: World, symmetry: bool) -> bytes:
    """The state's identity: the least text over every renaming of the workers (with symmetry), hashed."""
    ordered, bags, rows = world.digest_parts()
    names = [worker_name(i) for i in range(len(rows))]
    orders = itertools.permutations(names) if symmetry and len(rows) > 1 else [names]
    best = None
    for order in orders:
        mapping = dict(zip(names, order, strict=True))

        def rename(part: str, mapping: dict[str, str] = mapping) -> str:
            return _NAMES.sub(lambda match: mapping[match.group(0)], part)

        candidate = "|".join(
            [rename(ordered), *("/".join(sorted(rename(row) for row in bag)) for bag in bags), *sorted(rename(row) for row in rows)]
        )
        if best is None or candidate < best:
            best = candidate
    text = best
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


# ---------------------------------------------------------------- snapshots

_SHARED: dict[int, Any] = {}
"""The objects every snapshot of the running searches refers to instead of holding: id -> object (kept alive here)."""


def _shared(ident: int) -> Any:
    return _SHARED[ident]


def _by_reference(obj: Any) -> Any:
    if id(obj) in _SHARED:
        return (_shared, (id(obj),))
    return obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


class _Snapshots:
    """Worlds as bytes (pickle), the tables, configuration and rules they share referred to, not copied.

    A search keeps every world it has yet to expand; as bytes a world is about
    ten kilobytes. Measured on one world of a few steps: about 240 µs to load
    and 210 µs to store, against about 920 µs for `copy.deepcopy`. The shared objects' types are looked up in a
    dispatch table, so every other object pickles at the C pickler's speed.
    """

    def __init__(self, shared: list[Any]) -> None:
        mine = [obj for obj in shared if obj is not None]
        self._added = [obj for obj in mine if id(obj) not in _SHARED]
        table = copyreg.dispatch_table.copy()
        for obj in mine:
            _SHARED[id(obj)] = obj
            table[type(obj)] = _by_reference
        self._table = table

    def dumps(self, world: World) -> bytes:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = self._table
        pickler.dump(world)
        return buffer.getvalue()

    def loads(self, data: bytes) -> World:
        return pickle.loads(data)

    def close(self) -> None:
        for obj in self._added:
            _SHARED.pop(id(obj), None)


# ------------------------------------------------------------------ judging


def _final_readers(world: World) -> list[Any]:
    """The checkers that judge final records."""
    return [checker for checker in world.history.checkers if checker.reads_final_records()]


class Finding(NamedTuple):
    """What stopped a search: an invariant violated, or a checker that crashed and so could not tell (status unknown)."""

    invariant: str
    example: tuple[str, ...]
    status: str = VIOLATED


def _judge(world: World, quiescent: bool) -> Finding | None:
    """The first invariant this world's history violates, with its example: folded so far, then on a final read."""
    for name, verdict in world.history.verdicts().items():
        if verdict.status == VIOLATED:
            return Finding(name, verdict.example)
        if name in world.history.crashed:
            return Finding(name, verdict.example, UNKNOWN)  # a checker that crashes judges nothing: never read that as a pass
    retirements = world.retirements()
    for checker in _final_readers(world):
        if checker.name == LOST_TASKS and not quiescent:
            continue
        verdict = checker.verdict_if_retired(retirements)
        if verdict.status == VIOLATED:
            return Finding(checker.name, verdict.example)
    return None


# ------------------------------------------------------------------- search


@dataclass(slots=True)
class _Node:
    """A state waiting to be expanded: its world as bytes, the steps that built that world, and the steps it may take."""

    world: bytes
    shape: bytes
    """The state's digest with workers interchangeable: what "a step changed nothing" is judged by."""
    path: tuple[str, ...]
    actions: list[str]

    @property
    def depth(self) -> int:
        return len(self.path)


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
    pattern = _pattern(config)
    result = Exploration(config, strategy, symmetry, depth_max, states_max)
    began = time.perf_counter()
    shown = began
    root = World(config, pattern)
    snapshots = _Snapshots(root.shared)
    stuck: set[bytes] = set()
    """States whose every step leads back to them, judged once each (depth-first search may expand one again)."""
    seen: dict[bytes, int] = {}
    """digest -> the least depth it was reached at (depth-first search expands a state again when it finds a shorter way in)."""

    def found(steps: tuple[str, ...], violation: Finding) -> Exploration:
        # The steps are the very ones that built the violating world (its history is theirs), so the replay shows it.
        played = replay(config, steps)
        result.counterexample = Counterexample(violation.invariant, violation.example, steps, played.timeline, violation.status)
        result.stopped_by = "violation"
        return result

    try:
        for entry in root.step_entries:
            if type(entry) is Event:
                result.tally.add(entry)
        root.step_entries.clear()
        root_digest = _digest(root, symmetry)
        root_shape = root_digest if symmetry else _digest(root, True)
        seen[root_digest] = 0
        result.states = 1
        root_actions = root.actions()
        violation = _judge(root, not root_actions)
        if violation is not None:
            return found((), violation)
        result.quiescent += not root_actions
        pending: deque[_Node] = deque([_Node(snapshots.dumps(root), root_shape, (), root_actions)])
        take = pending.popleft if strategy == BFS else pending.pop
        while pending:
            node = take()
            if depth_max is not None and node.depth >= depth_max:
                result.cut += 1 if node.actions else 0
                continue
            result.explored += 1
            moved = False
            for label in node.actions:
                child = snapshots.loads(node.world)
                child.apply(label, checked=False)
                result.transitions += 1
                for entry in child.step_entries:
                    if type(entry) is Event:
                        result.tally.add(entry)
                child.step_entries.clear()
                actions = child.actions()
                violation = _judge(child, not actions)
                path = (*node.path, label)
                if violation is not None:
                    result.depth = max(result.depth, len(path))
                    return found(path, violation)
                key = _digest(child, symmetry)
                shape = key if symmetry else _digest(child, True)
                moved = moved or shape != node.shape
                known = seen.get(key)
                if known is not None and (strategy == BFS or known <= len(path)):
                    continue
                if known is None:
                    result.states += 1
                    result.quiescent += not actions
                    if states_max is not None and result.states > states_max:
                        result.states -= 1
                        result.stopped_by = "states"
                        return result
                seen[key] = len(path)
                result.depth = max(result.depth, len(path))
                pending.append(_Node(snapshots.dumps(child), shape, path, actions))
            if node.actions and not moved and node.shape not in stuck:
                # Every step it may take leaves it as it is (a refusal asked again, a renewal at the same instant):
                # nothing can change any more, so it is judged as a state where the run has ended.
                stuck.add(node.shape)
                result.quiescent += 1
                violation = _judge(snapshots.loads(node.world), True)
                if violation is not None:
                    return found(node.path, violation)
            if progress is not None and time.perf_counter() - shown >= progress_every_s:
                shown = time.perf_counter()
                result.elapsed_s = shown - began
                progress(result)
        if result.cut:
            result.stopped_by = "depth"
        return result
    except KeyboardInterrupt:
        result.stopped_by = "interrupted"
        return result
    finally:
        result.elapsed_s = time.perf_counter() - began
        snapshots.close()


def _ended(world: World, snapshots: _Snapshots) -> bool:
    """Whether nothing can change any more: no step is enabled, or every one leads back to this state (workers interchangeable)."""
    actions = world.actions()
    if not actions:
        return True
    shape = _digest(world, True)
    data = snapshots.dumps(world)
    for label in actions:
        copy = snapshots.loads(data)
        copy.apply(label, checked=False)
        if _digest(copy, True) != shape:
            return False
    return True


def replay(config: ExploreConfig, steps: tuple[str, ...] | list[str]) -> Replayed:
    """Play `steps` in a fresh world of `config`, judging each one as the search did; a step that does not fit is an ExploreError."""
    world = World(config, _pattern(config))
    snapshots = _Snapshots(world.shared)
    timeline = ["setup     the tasks are created, accepted and dispatched"]
    timeline += [f"          {describe(entry)}" for entry in world.step_entries]
    world.step_entries.clear()
    try:
        violation = _judge(world, _ended(world, snapshots))
        for number, label in enumerate(steps, 1):
            try:
                world.apply(label)
            except StepError as error:
                raise ExploreError(f"step {number} of the replay does not fit: {error}") from None
            timeline.append(f"step {number:>3}  {label}")
            timeline += [f"          {describe(entry)}" for entry in world.step_entries]
            world.step_entries.clear()
            if violation is None:
                violation = _judge(world, _ended(world, snapshots))
    finally:
        snapshots.close()
    return Replayed(tuple(steps), tuple(timeline), violation)


def parse_steps(text: str) -> tuple[str, ...]:
    """A replay's steps as the command prints them: labels separated by commas (spaces around them ignored)."""
    steps = tuple(part.strip() for part in text.split(",") if part.strip())
    if not steps:
        raise ExploreError("--replay needs the steps of a path, separated by commas")
    return steps


# --------------------------------------------------------------- reporting

_FLAGS = (
    ("workers", "--workers"),
    ("tasks", "--tasks"),
    ("crashes", "--crashes"),
    ("pauses", "--pauses"),
    ("lost_requests", "--lost-requests"),
    ("lost_responses", "--lost-responses"),
    ("duplicates", "--duplicates"),
    ("cancels", "--cancels"),
    ("ci_failures", "--ci-failures"),
    ("refusals", "--refusals"),
    ("retries", "--retries"),
)


TIMING_FLAGS = (
    ("gateway_retries_max", "--gateway-retries"),
    ("lease_ttl_s", "--lease-ttl"),
    ("heartbeat_interval_s", "--heartbeat"),
    ("call_deadline_s", "--call-deadline"),
    ("cancel_ack_timeout_s", "--cancel-ack-timeout"),
    ("backoff_base_s", "--backoff-base"),
    ("backoff_cap_s", "--backoff-cap"),
)
"""The timings (seconds) and the worker's gateway retries, spelt out in a command only where they differ from the defaults."""


def steps_flags(config: ExploreConfig) -> str:
    """The command-line flags that give `config`: every count spelt out, timings where they are not the defaults."""
    parts = [f"{flag} {getattr(config, name)}" for name, flag in _FLAGS]
    parts.append(f"--operations {','.join(config.operations)}")
    defaults = ExploreConfig()
    parts += [f"{flag} {getattr(config, name)!r}" for name, flag in TIMING_FLAGS if getattr(config, name) != getattr(defaults, name)]
    if not config.idempotent_provider:
        parts.append("--no-idempotency")
    if config.antipattern is not None:
        parts.append(f"--antipattern {config.antipattern}")
    return " ".join(parts)


def replay_command(config: ExploreConfig, steps: tuple[str, ...]) -> str:
    return f"shiftchange explore {steps_flags(config)} --replay '{','.join(steps)}'"


def summary_lines(result: Exploration) -> list[str]:
    """The honest summary: what was searched, how far, how fast, and whether it completed."""
    config = result.config
    how = "breadth-first" if result.strategy == BFS else f"depth-first to depth {result.depth_bound}"
    reduction = "workers interchangeable" if result.symmetry else "no symmetry reduction"
    lines = [
        f"explore {steps_flags(config)}",
        f"  {how}, {reduction}"
        + (f", depth bound {result.depth_bound}" if result.depth_bound is not None and result.strategy == BFS else "")
        + (f", state bound {result.states_bound:,}" if result.states_bound is not None else ""),
        f"  {result.states:,} distinct states, {result.explored:,} explored, {result.transitions:,} transitions,"
        f" maximum depth {result.depth}, {result.quiescent:,} quiescent",
        f"  {result.elapsed_s:.1f} s, {result.states_per_s:,.0f} distinct states per second",
    ]
    if result.stopped_by is None:
        lines.append("  the search completed: every reachable state was visited")
    elif result.stopped_by == "violation":
        lines.append("  the search stopped at the first violation")
    elif result.stopped_by == "depth":
        lines.append(f"  INCOMPLETE: the depth bound left {result.cut:,} states unexpanded")
    elif result.stopped_by == "states":
        lines.append(f"  INCOMPLETE: the state bound of {result.states_bound:,} was reached")
    else:
        lines.append("  INCOMPLETE: interrupted")
    return lines


def verdicts(result: Exploration) -> dict[str, Verdict]:
    """Each invariant's verdict over the search: held in every reachable state, violated, or unknown (not searched to the end)."""
    example = result.counterexample
    judged = {}
    for name in INVARIANTS:
        if example is not None and name == example.invariant:
            judged[name] = Verdict(name, example.status, int(example.status == VIOLATED), example.example)
        elif result.complete:
            judged[name] = Verdict(name, OK, 0, ())
        else:
            if example is not None:
                why = "the search stopped at a violation"
            elif result.stopped_by == "interrupted":
                why = "the search was interrupted"
            else:
                why = f"the search stopped at its {result.stopped_by} bound"
            judged[name] = Verdict(name, UNKNOWN, 0, (f"held in the {result.states:,} states visited; {why}",))
    return judged


def verdict_lines(result: Exploration) -> list[str]:
    """The invariant table, as `sim run` prints it; then, for a violation, its timeline and replay command."""
    judged = verdicts(result)
    unknown = [v for v in judged.values() if v.status == UNKNOWN]
    lines = invariant_rows({name: v if v.status != UNKNOWN else Verdict(name, UNKNOWN, 0, ()) for name, v in judged.items()})
    if unknown:
        lines.append(f"  ({len(unknown)} could not tell: {unknown[0].example[0]})")
    example = result.counterexample
    if example is None:
        if result.complete:
            return [*lines, "no invariant is violated in any reachable state"]
        return [*lines, "no invariant is violated in any state visited (the search did not complete, so this is not a proof)"]
    shortest = " (a shortest path)" if result.strategy == BFS else ""
    lines += ["", f"{example.invariant} is violated after {len(example.steps)} steps{shortest}"]
    lines += ["", "timeline:", *list(example.timeline)]
    lines += ["", "replay:", f"  {replay_command(result.config, example.steps)}"]
    return lines


def coverage_lines(result: Exploration) -> list[str]:
    coverage = result.coverage()
    lines = []
    for machine in ("attempt", "task"):
        rows = len(coverage.identity[machine])
        never = coverage.never_fired(machine)
        lines.append(f"{machine} rows fired: {coverage.rows_fired(machine)} of {rows}")
        lines += [f"  never reached: {row}" for row in never]
    return lines


def as_json(result: Exploration) -> dict[str, Any]:
    config = result.config
    example = result.counterexample
    coverage = result.coverage()
    return {
        "command": "explore",
        "config": {name: getattr(config, name) for name in ExploreConfig.__dataclass_fields__} | {"operations": list(config.operations)},
        "antipattern": config.antipattern,
        "strategy": result.strategy,
        "symmetry": result.symmetry,
        "depth_bound": result.depth_bound,
        "states_bound": result.states_bound,
        "states": result.states,
        "explored": result.explored,
        "transitions": result.transitions,
        "depth": result.depth,
        "quiescent": result.quiescent,
        "complete": result.complete,
        "stopped_by": result.stopped_by,
        "elapsed_s": round(result.elapsed_s, 3),
        "states_per_s": round(result.states_per_s, 1),
        "counterexample": None
        if example is None
        else {
            "invariant": example.invariant,
            "example": list(example.example),
            "steps": list(example.steps),
            "timeline": list(example.timeline),
            "replay": replay_command(config, example.steps),
        },
        "invariants": {
            name: {"ok": {OK: True, VIOLATED: False}.get(v.status), "violations": v.violations, "example": list(v.example)}
            for name, v in verdicts(result).items()
        },
        "coverage": {
            machine: {
                "fired": coverage.rows_fired(machine),
                "rows": len(coverage.identity[machine]),
                "never_reached": [str(row) for row in coverage.never_fired(machine)],
            }
            for machine in ("attempt", "task")
        },
        "ok": result.ok,
    }
