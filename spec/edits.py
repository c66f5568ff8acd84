"""Named edits of a transition table: the design choices a review proposes, and the chapter's failure modes that are one.

Each edit takes a `Spec` and returns a new one (specs are frozen values); the
rows it changes keep their place and their line, so a witness still points at
the row that was edited. An edit that names a trigger, guard or effect no row
of the machine has is a `ValueError`: an edit that changes nothing would pass
every check for the wrong reason.

These are the table-level failure modes of the chapter (an unfenced write, a
retry row without its guards, a cancellation that is only a flag), run
through the same core as the shipped table (`core.table.Table`), and the
vocabulary a mutation analysis of the table is made of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .model import STAY, Machine, Row, Spec

__all__ = ["drop_effect", "drop_guard", "move_dest", "unfence"]


def _edited(spec: Spec, machine: str, change: Callable[[Row], Row | None], what: str) -> Spec:
    table: Machine = spec.machines[machine]
    rows: list[Row] = []
    changed = False
    for row in table.rows:
        edited = change(row)
        changed |= edited is not row
        if edited is not None:
            rows.append(edited)
    if not changed:
        raise ValueError(f"{what}: no row of the {machine} machine changes")
    return replace(spec, **{machine: replace(table, rows=tuple(rows))})


def unfence(spec: Spec, *triggers: str, machine: str = "attempt") -> Spec:
    """Every row of these triggers (every fenced row, when none is named) no longer asks the caller to prove the lease."""
    names = set(triggers)
    return _edited(
        spec,
        machine,
        lambda row: replace(row, fenced=False) if row.fenced and (not names or row.trigger in names) else row,
        f"unfence {', '.join(triggers) or 'every fenced row'}",
    )


def drop_guard(spec: Spec, trigger: str, guard: str, machine: str = "attempt") -> Spec:
    """The rows of `trigger` no longer ask `guard` (required, or negated as "!guard")."""

    def change(row: Row) -> Row:
        if row.trigger != trigger or not ({guard, f"!{guard}"} & set(row.guards)):
            return row
        return replace(row, guards=tuple(g for g in row.guards if g not in (guard, f"!{guard}")))

    return _edited(spec, machine, change, f"drop guard {guard} from {trigger}")


def drop_effect(spec: Spec, trigger: str, effect: str, machine: str = "attempt") -> Spec:
    """The rows of `trigger` no longer apply `effect`."""

    def change(row: Row) -> Row:
        if row.trigger != trigger or effect not in row.effects:
            return row
        return replace(row, effects=tuple(e for e in row.effects if e != effect))

    return _edited(spec, machine, change, f"drop effect {effect} from {trigger}")


def move_dest(spec: Spec, trigger: str, dest: str, machine: str = "attempt", source: str | None = None) -> Spec:
    """The rows of `trigger` (those leaving `source`, when given) lead to `dest` instead (`STAY`: each stays where it was)."""
    if dest != STAY and dest not in spec.machines[machine].states:
        raise ValueError(f"move {trigger} to {dest}: the {machine} machine has no such state")

    def change(row: Row) -> Row:
        if row.trigger != trigger or (source is not None and source not in row.sources) or row.dest == dest:
            return row
        return replace(row, dest=dest)

    return _edited(spec, machine, change, f"move {trigger} to {dest}")
