"""Every single-point mutant of a transition table, by kind: each one change to one row, as `spec.edits` makes it.

The kinds are what a row says (docs/design-review.md: "what an edited table
may change"), each changed at one point:

- `drop_guard`: the row no longer asks one of its guards;
- `negate_guard`: the row asks the opposite of one guard;
- `unfence`: a fenced row no longer asks the caller to prove the lease;
- `move_dest`: the row leads to another state (each state but its own);
- `drop_effect`: the row no longer applies one of its effects;
- `drop_row`: the row is gone;
- `widen_source`: the row may also leave one more state (each it does not).

A mutant is a small value (kind, machine, row number, the guard, effect or
state it names) that makes its spec from the base with `apply`, so a pool or
a Dask worker is sent the mutant and the base, never a spec per mutant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shiftchange.spec import edits
from shiftchange.spec.model import STAY, Row, Spec

__all__ = ["KINDS", "Mutant", "MutantError", "mutants_of"]

KINDS = ("drop_guard", "negate_guard", "unfence", "move_dest", "drop_effect", "drop_row", "widen_source")


class MutantError(ValueError):
    """A kind no mutant has, or a mutant that does not fit the spec it is applied to: one line."""


@dataclass(frozen=True)
class Mutant:
    """One change to one row of the base table."""

    kind: str
    machine: str
    row: int
    """The row's number, from 1, as the review page and `spec diff` number rows."""
    argument: str
    """The guard, effect or state the change names ("" for unfence and drop_row)."""
    trigger: str
    where: str
    """The base row's file and line."""
    row_text: str
    """The base row as `spec diff` writes one: trigger, sources -> dest, guards."""

    @property
    def id(self) -> str:
        """A name fit for a folder: attempt-14-drop_guard-lease_current."""
        tail = f"-{self.argument.replace('!', 'not-')}" if self.argument else ""
        return f"{self.machine}-{self.row}-{self.kind}{tail}"

    @property
    def change(self) -> str:
        """The change in words: "drop guard lease_current"."""
        argument = self.argument
        return {
            "drop_guard": f"drop guard {argument}",
            "negate_guard": f"negate guard {argument}",
            "unfence": "unfence",
            "move_dest": f"lead to {argument}",
            "drop_effect": f"drop effect {argument}",
            "drop_row": "drop the row",
            "widen_source": f"also leave {argument}",
        }[self.kind]

    def apply(self, spec: Spec) -> Spec:
        """The base `spec` with this one change; a mutant that does not fit it (another table) is a `MutantError`."""
        try:
            if self.kind == "drop_guard":
                return edits.drop_guard(spec, self.trigger, self.argument.removeprefix("!"), self.machine, row=self.row)
            if self.kind == "negate_guard":
                return edits.negate_guard(spec, self.machine, self.row, self.argument.removeprefix("!"))
            if self.kind == "unfence":
                return edits.unfence(spec, self.trigger, machine=self.machine, row=self.row)
            if self.kind == "move_dest":
                return edits.move_dest(spec, self.trigger, self.argument, self.machine, row=self.row)
            if self.kind == "drop_effect":
                return edits.drop_effect(spec, self.trigger, self.argument, self.machine, row=self.row)
            if self.kind == "drop_row":
                return edits.drop_row(spec, self.machine, self.row)
            if self.kind == "widen_source":
                return edits.widen_source(spec, self.machine, self.row, self.argument)
        except ValueError as error:
            raise MutantError(f"mutant {self.id} does not fit this spec: {error}") from None
        raise MutantError(f"unknown kind {self.kind!r}; use one of {', '.join(KINDS)}")

    def reading(self) -> str:
        """What it means that no check killed this mutant, in one line: a redundancy in the table, or a hole in the checks."""
        row = f"{self.trigger} ({self.machine} row {self.row})"
        argument = self.argument
        return {
            "drop_guard": f"nothing needs {row} to ask {argument}: redundant there, or no check reaches the state where it decides",
            "negate_guard": f"{row} asks the opposite of {argument} and nothing breaks: the guard never decides this row in any check run",
            "unfence": f"a stale {self.trigger} is accepted and no check sees it: no run delivers one late on this row",
            "move_dest": f"{row} leads to {argument} and nothing breaks: no check reaches this row, or what follows it does not tell",
            "drop_effect": f"{row} never applies {argument} and nothing breaks: no invariant reads what it writes on this path",
            "drop_row": f"{row} is never needed: unreached at this scale, or another row does its work",
            "widen_source": f"{row} is allowed from {argument} too and nothing breaks: no caller asks {self.trigger} there",
        }[self.kind]

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "kind": self.kind,
            "machine": self.machine,
            "row": self.row,
            "argument": self.argument,
            "trigger": self.trigger,
            "where": self.where,
            "row_text": self.row_text,
            "change": self.change,
        }


def _row_text(row: Row) -> str:
    guards = f" [{', '.join(row.guards)}]" if row.guards else ""
    fenced = " fenced" if row.fenced else ""
    return f"{row.trigger}: {', '.join(row.sources)} -> {row.dest}{guards}{fenced}"


def _stays(row: Row) -> tuple[str, ...]:
    """A row that leaves its one source where it was: moving it to that source changes nothing."""
    return row.sources if row.dest == STAY and len(row.sources) == 1 else ()


def check_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """The kinds asked for, each known, in KINDS' order (none asked: every kind)."""
    asked = tuple(kinds)
    unknown = [kind for kind in asked if kind not in KINDS]
    if unknown:
        raise MutantError(f"unknown mutant kind {unknown[0]!r}; use one of {', '.join(KINDS)}")
    return tuple(kind for kind in KINDS if kind in asked) if asked else KINDS


def mutants_of(spec: Spec, kinds: Sequence[str] = KINDS) -> list[Mutant]:
    """Every single-point mutant of `spec`'s rows, of these kinds: machine by machine, row by row, kind by kind."""
    chosen = check_kinds(kinds)
    found: list[Mutant] = []
    for name, machine in spec.machines.items():
        states = list(machine.states)
        for position, row in enumerate(machine.rows, 1):

            def make(kind: str, argument: str = "", row: Row = row, position: int = position, name: str = name) -> Mutant:
                return Mutant(kind, name, position, argument, row.trigger, str(row.where), _row_text(row))

            by_kind = {
                "drop_guard": [make("drop_guard", guard) for guard in row.guards],
                "negate_guard": [make("negate_guard", guard) for guard in row.guards],
                "unfence": [make("unfence")] if row.fenced else [],
                "move_dest": [make("move_dest", state) for state in states if state != row.dest and (state,) != _stays(row)],
                "drop_effect": [make("drop_effect", effect) for effect in dict.fromkeys(row.effects)],
                "drop_row": [make("drop_row")] if len(machine.rows) > 1 else [],
                "widen_source": [make("widen_source", state) for state in states if state not in row.sources],
            }
            for kind in chosen:
                found.extend(by_kind[kind])
    return found
