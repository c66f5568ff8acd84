"""The spec's records: machines, states, transition rows, failure domains, invariants.

These are plain frozen values built by the loader; nothing here reads files.
Every record keeps the file and line it came from, so a checker's witness and
a design review can point at the exact row.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

ACTORS = ("orchestrator", "worker", "reaper", "operator", "provider")
"""Who may fire a row. `provider` is a provider callback (CI verdict, webhook)."""

RESPONSES = (
    "back_off_and_retry",
    "new_attempt_changed_hypothesis",
    "reconcile",
    "stop",
    "escalate",
    "quarantine",
)
"""The permitted responses of a failure domain, from the chapter."""

STAY = "=source"
"""A row's `dest` spelled this way leaves each source state where it was."""


@dataclass(frozen=True)
class Where:
    """A place in a spec file, for error messages and witnesses."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class State:
    name: str
    description: str
    where: Where
    terminal: bool = False
    dispatchable: bool = False
    resting: bool = False


@dataclass(frozen=True)
class Term:
    """A declared trigger, guard or effect: a name with its meaning."""

    name: str
    description: str
    where: Where
    material: bool = False


@dataclass(frozen=True)
class Row:
    """One transition row: a trigger moves each source state to dest."""

    index: int
    trigger: str
    sources: tuple[str, ...]
    dest: str
    actor: str
    guards: tuple[str, ...]
    effects: tuple[str, ...]
    fenced: bool
    where: Where

    def dest_from(self, source: str) -> str:
        return source if self.dest == STAY else self.dest

    @property
    def required(self) -> frozenset[str]:
        return frozenset(g for g in self.guards if not g.startswith("!"))

    @property
    def forbidden(self) -> frozenset[str]:
        return frozenset(g[1:] for g in self.guards if g.startswith("!"))

    def excludes(self, other: Row) -> bool:
        """True when no guard valuation can enable both rows at once."""
        return bool(self.required & other.forbidden or self.forbidden & other.required)

    def label(self) -> str:
        sources = ",".join(self.sources)
        guards = f" [{', '.join(self.guards)}]" if self.guards else ""
        return f"{self.trigger}: {sources} -> {self.dest}{guards} ({self.where})"


@dataclass(frozen=True)
class Machine:
    name: str
    initial: str
    description: str
    states: dict[str, State]
    triggers: dict[str, Term]
    guards: dict[str, Term]
    effects: dict[str, Term]
    rows: tuple[Row, ...]
    roles: dict[str, str]
    where: Where

    @property
    def terminal_states(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.states.values() if s.terminal)

    def edges(self) -> list[tuple[str, str, Row]]:
        """Every (source, dest, row) the rows allow, one per source state."""
        return [(s, row.dest_from(s), row) for row in self.rows for s in row.sources]


@dataclass(frozen=True)
class FailureDomain:
    name: str
    response: str
    retries_max: int
    changed_hypothesis_required: bool
    blast_radius: str
    description: str
    examples: tuple[str, ...]
    where: Where


@dataclass(frozen=True)
class Invariant:
    name: str
    statement: str
    where: Where
    triggers: tuple[str, ...] = ()
    """The rows it judges, as "machine.trigger": a change to one of them touches this invariant."""


@dataclass(frozen=True)
class Spec:
    directory: str
    attempt: Machine
    task: Machine
    domains: dict[str, FailureDomain]
    invariants: dict[str, Invariant]
    machines: dict[str, Machine] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "machines", {"attempt": self.attempt, "task": self.task})

    @functools.cached_property
    def digest(self) -> str:
        """A SHA-256 of what the spec decides, 16 hex digits: states, vocabulary, rows, roles, domains, invariants.

        Descriptions, comments and line numbers are left out: two specs with
        one digest drive the core alike. Computed from the value, not the
        files, so a spec edited in Python (an anti-pattern's, a mutant) has
        its own digest.
        """
        parts: list[object] = []
        for machine in (self.attempt, self.task):
            states = [(s.name, s.terminal, s.dispatchable, s.resting) for s in machine.states.values()]
            vocabulary = [sorted(machine.triggers), sorted((t.name, t.material) for t in machine.guards.values())]
            vocabulary.append(sorted((t.name, t.material) for t in machine.effects.values()))
            rows = [(r.trigger, r.sources, r.dest, r.actor, r.guards, r.effects, r.fenced) for r in machine.rows]
            parts.append((machine.name, machine.initial, states, vocabulary, rows, sorted(machine.roles.items())))
        domains = [(d.name, d.response, d.retries_max, d.changed_hypothesis_required, d.blast_radius) for d in self.domains.values()]
        invariants = [(i.name, i.statement, i.triggers) for i in self.invariants.values()]
        parts.extend((domains, invariants))
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
