"""The spec as the core runs it: a value, compiled once, with the state sets its rows imply and its vocabulary checked.

Why a value and not a module constant: a design review must be able to run a
proposed table through the same core, and so must every driver (`--spec`).
So nothing compiles a spec at import: `packaged()` compiles the installed one
on first use and keeps it, `table_for(source)` compiles the one a folder or a
git revision holds (once per process per source), and the `Orchestrator`,
the simulator, the explorer and the runtime each take the `Table` they run.

What a table may change, and what it may not. Rows are the design: their
sources, destinations, guards, fences and effects, and which rows exist. The
vocabulary is the implementation: each guard and effect a table names has
exactly one implementation in `core.vocabulary` (with its meaning, and for an
effect whether it is material), and a table whose vocabulary names one the
core does not implement, implements one it does not name, or calls an
effect material that is not (or the reverse) is refused when it is compiled,
naming the file and line. The states are the core's too: a table may not add
or drop one. The invariants are not the table's at all: the checkers judge by
the catalogue and the vocabulary's meanings, so an edit cannot narrow its own
check (docs/design-review.md).
"""

from __future__ import annotations

import functools
from pathlib import Path

from shiftchange.spec.compiled import CompiledMachine
from shiftchange.spec.loader import SpecError, packaged_spec
from shiftchange.spec.model import Spec, Where

from .errors import InputError

__all__ = ["Table", "packaged", "table_for"]


class Table:
    """A spec compiled for the core: its two machines, the state sets derived from its rows, its digest and where it came from."""

    __slots__ = (
        "active",
        "attempt",
        "attempt_terminal",
        "digest",
        "expirable",
        "label",
        "leased",
        "spec",
        "task",
        "task_dispatchable",
        "task_resting",
        "task_terminal",
    )

    def __init__(self, spec: Spec, label: str | None = None) -> None:
        if not isinstance(spec, Spec):
            raise InputError(f"a Table is compiled from a spec.Spec, not {spec!r:.60}")
        from . import vocabulary  # the registry is filled as the contracts' modules are imported

        vocabulary.check(spec)
        self.spec = spec
        self.label = label if label is not None else spec.directory
        self.digest = spec.digest
        self.attempt = CompiledMachine(spec.attempt)
        self.task = CompiledMachine(spec.task)
        self.attempt.bind(vocabulary.GUARDS["attempt"])
        self.task.bind(vocabulary.GUARDS["task"])
        self.attempt_terminal = self.attempt.terminal
        self.task_terminal = self.task.terminal
        self.task_resting = frozenset(s.name for s in spec.task.states.values() if s.resting)
        self.task_dispatchable = frozenset(s.name for s in spec.task.states.values() if s.dispatchable)
        self.leased = frozenset(source for source, _dest, row in spec.attempt.edges() if row.trigger == "renew")
        """States in which a lease is honoured: exactly those a renewal may leave."""
        self.expirable = frozenset(source for source, _dest, row in spec.attempt.edges() if row.trigger == "expire")
        """States the reaper turns Suspect when the lease expires."""
        self.active = frozenset(spec.attempt.states) - self.attempt_terminal
        """Non-terminal Attempt states: an Attempt here blocks a retry of its task."""

    def fences(self, trigger: str) -> bool:
        """Whether a worker's call of `trigger` is addressed and proved by the fence (some row of it is fenced)."""
        return trigger in self.attempt.fenced_triggers

    def __repr__(self) -> str:
        return f"Table({self.label!r}, digest {self.digest})"

    def __reduce__(self) -> tuple:
        # Pickled as its spec (a sweep sends configs and tables to other processes); compiled again on arrival.
        return (Table, (self.spec, self.label))


@functools.cache
def packaged() -> Table:
    """The installed spec's table, compiled on first use and kept for the process."""
    return Table(packaged_spec(), "the packaged spec")


@functools.cache
def _read(source: str) -> Table:
    from shiftchange.spec.source import read_spec

    read = read_spec(source)
    return Table(read.spec, read.label)


def table_for(source: str | Path | Spec | Table | None) -> Table:
    """The table a driver runs: the packaged one for None, else a `Table`, a `Spec`, or a folder or git revision naming a spec.

    A folder or revision is read as `shiftchange spec check` reads one
    (`shiftchange.spec.source`) and compiled once per process; a bad name is a
    `spec.source.SpecSourceError`, a malformed file a `SpecError` naming its line.
    """
    if source is None:
        return packaged()
    if isinstance(source, Table):
        return source
    if isinstance(source, Spec):
        return Table(source)
    return _read(str(source))


def vocabulary_error(where: Where, problem: str, fix: str) -> SpecError:
    return SpecError(where, problem, fix)
