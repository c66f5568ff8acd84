"""Named edits of a transition table: the design choices a review proposes, and the chapter's failure modes that are one.

Each edit takes a `Spec` and returns a new one (specs are frozen values); the
rows it changes keep their place and their line, so a witness still points at
the row that was edited. An edit that names a trigger, guard or effect no row
of the machine has is a `ValueError`: an edit that changes nothing would pass
every check for the wrong reason.

These are the table-level failure modes of the chapter (an unfenced write, a
retry row without its guards, a cancellation that is only a flag), run
through the same core as the shipped table (`core.table.Table`), and the
vocabulary a mutation analysis of the table is made of (`shiftchange.lab`).

Each edit that names a trigger changes every row of it, unless `row` names
one: the row's number as the review page and `spec diff` number them (from
1), which is how a mutant changes one point of the table. `negate_guard`,
`drop_row` and `widen_source` change one row and always take its number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .model import STAY, Machine, Row, Spec

__all__ = ["drop_effect", "drop_guard", "drop_row", "move_dest", "negate_guard", "unfence", "widen_source"]


def _edited(spec: Spec, machine: str, change: Callable[[Row], Row | None], what: str, row: int | None = None) -> Spec:
    """`spec` with `change` applied to each row of `machine` (to the row numbered `row` only, when given); None drops a row.

    A dropped row's successors are numbered again (their `index`), keeping their line: what counts rows by position
    (coverage) finds each where it is, and a witness still names the line it was written on.
    """
    if machine not in spec.machines:
        raise ValueError(f"{what}: no machine {machine!r}; use one of {', '.join(spec.machines)}")
    table: Machine = spec.machines[machine]
    if row is not None and (isinstance(row, bool) or not isinstance(row, int) or not 1 <= row <= len(table.rows)):
        raise ValueError(f"{what}: the {machine} machine has rows 1 to {len(table.rows)}, not {row!r}")
    rows: list[Row] = []
    changed = False
    for each in table.rows:
        edited = change(each) if row is None or each.index + 1 == row else each
        changed |= edited is not each
        if edited is not None:
            rows.append(edited if edited.index == len(rows) else replace(edited, index=len(rows)))
    if not changed:
        raise ValueError(f"{what}: no row of the {machine} machine changes")
    if not rows:
        raise ValueError(f"{what}: the {machine} machine would have no row left")
    return replace(spec, **{machine: replace(table, rows=tuple(rows))})


def unfence(spec: Spec, *triggers: str, machine: str = "attempt", row: int | None = None) -> Spec:
    """Every row of these triggers (every fenced row, when none is named) no longer asks the caller to prove the lease."""
    names = set(triggers)
    return _edited(
        spec,
        machine,
        lambda each: replace(each, fenced=False) if each.fenced and (not names or each.trigger in names) else each,
        f"unfence {', '.join(triggers) or 'every fenced row'}",
        row,
    )


def drop_guard(spec: Spec, trigger: str, guard: str, machine: str = "attempt", row: int | None = None) -> Spec:
    """The rows of `trigger` no longer ask `guard` (required, or negated as "!guard")."""

    def change(each: Row) -> Row:
        if each.trigger != trigger or not ({guard, f"!{guard}"} & set(each.guards)):
            return each
        return replace(each, guards=tuple(g for g in each.guards if g not in (guard, f"!{guard}")))

    return _edited(spec, machine, change, f"drop guard {guard} from {trigger}", row)


def drop_effect(spec: Spec, trigger: str, effect: str, machine: str = "attempt", row: int | None = None) -> Spec:
    """The rows of `trigger` no longer apply `effect`."""

    def change(each: Row) -> Row:
        if each.trigger != trigger or effect not in each.effects:
            return each
        return replace(each, effects=tuple(e for e in each.effects if e != effect))

    return _edited(spec, machine, change, f"drop effect {effect} from {trigger}", row)


def move_dest(spec: Spec, trigger: str, dest: str, machine: str = "attempt", source: str | None = None, row: int | None = None) -> Spec:
    """The rows of `trigger` (those leaving `source`, when given) lead to `dest` instead (`STAY`: each stays where it was)."""
    if machine in spec.machines and dest != STAY and dest not in spec.machines[machine].states:
        raise ValueError(f"move {trigger} to {dest}: the {machine} machine has no such state")

    def change(each: Row) -> Row:
        if each.trigger != trigger or (source is not None and source not in each.sources) or each.dest == dest:
            return each
        return replace(each, dest=dest)

    return _edited(spec, machine, change, f"move {trigger} to {dest}", row)


def negate_guard(spec: Spec, machine: str, row: int, guard: str) -> Spec:
    """Row `row` asks the opposite of `guard`: a required guard becomes negated ("!guard"), a negated one required."""

    def change(each: Row) -> Row:
        if guard in each.guards:
            flipped = f"!{guard}"
        elif f"!{guard}" in each.guards:
            flipped = guard
        else:
            return each
        return replace(each, guards=tuple(flipped if g in (guard, f"!{guard}") else g for g in each.guards))

    return _edited(spec, machine, change, f"negate guard {guard} of {machine} row {row}", row)


def drop_row(spec: Spec, machine: str, row: int) -> Spec:
    """Row `row` is gone: what it allowed is refused."""
    return _edited(spec, machine, lambda _each: None, f"drop {machine} row {row}", row)


def widen_source(spec: Spec, machine: str, row: int, state: str) -> Spec:
    """Row `row` may also leave `state`."""
    if machine in spec.machines and state not in spec.machines[machine].states:
        raise ValueError(f"widen {machine} row {row} by {state}: the {machine} machine has no such state")

    def change(each: Row) -> Row:
        return each if state in each.sources else replace(each, sources=(*each.sources, state))

    return _edited(spec, machine, change, f"widen {machine} row {row} by {state}", row)
