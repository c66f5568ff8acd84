"""What a proposed change does to the spec: the rows, states and tables it edits, and the verdicts it moves.

A design review is usually about a change, so `diff_specs(old, new)` compares
two loaded specs the way a reviewer reads them: per machine, the transition
rows added, removed and changed field by field; states, vocabulary and the
machine header; failure domains and invariants; then which structural
properties the change breaks or fixes, and which invariants it touches.

Why not a text diff of the TOML: a moved row would read as a removal plus an
addition, a reflowed list as a change, and a one-word edit would not say which
row it sits in. Rows have no ids, so they are matched instead, much as git
pairs renamed files by similarity: identical rows pair first, in table order;
the rest pair greedily by the count of equal fields, ties broken by table
order, so the same two specs always give the same answer. A pair must share
the trigger and a source or the dest; anything less is a removal and an
addition, not an edit. Sources and guards compare as sets (a row leaves any of
its sources and needs all of its guards, so their order means nothing);
effects compare in order, because the store writes them in order. A row that
only moved keeps its content and is listed as renumbered, not changed.

An invariant is touched when its statement or its list of triggers changed, or
when a row of a trigger it lists (`Invariant.triggers`, old or new) was added,
removed or changed.
Which anti-patterns those invariants catch is the simulator's knowledge; the
spec layer takes it as `caught_by`, so nothing here imports `sim`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .checker import Property, check_spec
from .diagram import Marks
from .model import Machine, Row, Spec

__all__ = [
    "Changed",
    "FieldChange",
    "MachineDiff",
    "RowDiff",
    "RowPair",
    "SpecDiff",
    "TableDiff",
    "Touched",
    "VerdictChange",
    "diff_specs",
    "marks_for",
    "render_text",
    "to_json",
]

ROW_FIELDS = ("source", "dest", "actor", "guards", "effects", "fenced")
"""A row's fields as the TOML spells them, but the trigger: rows are paired by trigger, so it never changes within a pair."""
_SET_FIELDS = frozenset({"source", "guards"})
STATE_FIELDS = ("terminal", "dispatchable", "resting", "description")
TERM_FIELDS = ("description", "material")
DOMAIN_FIELDS = ("response", "retries_max", "changed_hypothesis_required", "blast_radius", "description", "examples")
INVARIANT_FIELDS = ("statement", "triggers")
LIST_ITEMS_SHOWN_MAX = 4
"""In the text report a changed list longer than this shows what it gained (+) and lost (-), not both whole lists."""

CaughtBy = Mapping[str, Sequence[tuple[str, str]]]
"""Invariant name to the (anti-pattern, failure mode) pairs it catches."""


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: Any
    new: Any


@dataclass(frozen=True)
class Changed:
    """A named record present in both specs, with the fields that differ."""

    name: str
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True)
class TableDiff:
    """A table of named records (states, one vocabulary, failure domains, invariants) compared field by field."""

    fields: tuple[str, ...]
    added: tuple[Any, ...] = ()
    """Records of the new spec only."""
    removed: tuple[Any, ...] = ()
    """Records of the old spec only."""
    changed: tuple[Changed, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass(frozen=True)
class RowPair:
    """An old row and the new row matched to it; `fields` is empty when only its number moved."""

    old: Row
    new: Row
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True)
class RowDiff:
    added: tuple[Row, ...] = ()
    removed: tuple[Row, ...] = ()
    changed: tuple[RowPair, ...] = ()
    renumbered: tuple[RowPair, ...] = ()
    """Same content under another row number: not a change, listed so a reader can follow the numbers."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def triggers(self) -> frozenset[str]:
        """The triggers of every added, removed or changed row."""
        rows = [*self.added, *self.removed, *(pair.new for pair in self.changed)]
        return frozenset(row.trigger for row in rows)


@dataclass(frozen=True)
class MachineDiff:
    name: str
    old: Machine = field(repr=False)
    new: Machine = field(repr=False)
    header: tuple[FieldChange, ...]
    """The initial state, the description, and each `roles.<role>`."""
    states: TableDiff
    triggers: TableDiff
    guards: TableDiff
    effects: TableDiff
    rows: RowDiff

    def __bool__(self) -> bool:
        return bool(self.header or self.states or self.triggers or self.guards or self.effects or self.rows)


@dataclass(frozen=True)
class VerdictChange:
    """A structural property whose verdict is not PASS in both specs, or that only one spec has."""

    name: str
    old: Property | None
    new: Property | None

    @property
    def kind(self) -> str:
        """broken (PASS to FAIL), fixed (FAIL to PASS), still_failing, added (new only) or removed (old only)."""
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        if self.old.ok:
            return "broken"
        return "fixed" if self.new.ok else "still_failing"

    @property
    def breaks(self) -> bool:
        """The new spec fails it and the old one did not."""
        return self.new is not None and not self.new.ok and (self.old is None or self.old.ok)


@dataclass(frozen=True)
class Touched:
    """An invariant the change touches, and how."""

    name: str
    statement: str | None
    """"changed", "added" or "removed" when the statement itself moved, "judges other triggers" when only its list of
    triggers did; None when only its rows did."""
    triggers: tuple[str, ...]
    """Its triggers ("machine.trigger") that an added, removed or changed row has."""


@dataclass(frozen=True)
class SpecDiff:
    old: str
    """How the old spec was named (a folder, or REV:path)."""
    new: str
    machines: dict[str, MachineDiff]
    domains: TableDiff
    invariants: TableDiff
    verdicts: tuple[VerdictChange, ...]
    touched: tuple[Touched, ...]
    held: tuple[int, int]
    """Properties of the new spec that hold, and how many it has."""

    @property
    def equal(self) -> bool:
        return not (any(self.machines.values()) or self.domains or self.invariants)

    @property
    def broken(self) -> tuple[VerdictChange, ...]:
        """The properties the change breaks: exit status 1 when there is any."""
        return tuple(verdict for verdict in self.verdicts if verdict.breaks)


# ----------------------------------------------------------------- compare


def diff_specs(old: Spec, new: Spec, old_label: str | None = None, new_label: str | None = None) -> SpecDiff:
    """Compare two loaded specs; the labels name them in the report (default: their folders)."""
    old_label = old.directory if old_label is None else old_label
    new_label = new.directory if new_label is None else new_label
    machines = {name: _machine_diff(old.machines[name], machine) for name, machine in new.machines.items()}
    invariants = _table_diff(old.invariants, new.invariants, INVARIANT_FIELDS)
    new_results = check_spec(new)
    return SpecDiff(
        old_label,
        new_label,
        machines,
        _table_diff(old.domains, new.domains, DOMAIN_FIELDS),
        invariants,
        _verdicts(check_spec(old), new_results, (old.directory, old_label), (new.directory, new_label)),
        _touched(old, new, machines, invariants),
        (sum(result.ok for result in new_results), len(new_results)),
    )


def _machine_diff(old: Machine, new: Machine) -> MachineDiff:
    header = [FieldChange(name, getattr(old, name), getattr(new, name)) for name in ("initial", "description")]
    for role in dict.fromkeys([*new.roles, *old.roles]):
        header.append(FieldChange(f"roles.{role}", old.roles.get(role), new.roles.get(role)))
    return MachineDiff(
        new.name,
        old,
        new,
        tuple(change for change in header if change.old != change.new),
        _table_diff(old.states, new.states, STATE_FIELDS),
        _table_diff(old.triggers, new.triggers, ("description",)),
        _table_diff(old.guards, new.guards, ("description",)),
        _table_diff(old.effects, new.effects, TERM_FIELDS),
        _match_rows(old.rows, new.rows),
    )


def _table_diff(old: Mapping[str, Any], new: Mapping[str, Any], fields: tuple[str, ...]) -> TableDiff:
    changed = []
    for name, record in new.items():
        if name in old:
            changes = tuple(
                FieldChange(f, getattr(old[name], f), getattr(record, f)) for f in fields if getattr(old[name], f) != getattr(record, f)
            )
            if changes:
                changed.append(Changed(name, changes))
    return TableDiff(
        fields,
        tuple(record for name, record in new.items() if name not in old),
        tuple(record for name, record in old.items() if name not in new),
        tuple(changed),
    )


def _value(row: Row, name: str) -> Any:
    return row.sources if name == "source" else getattr(row, name)


def _same(name: str, old: Any, new: Any) -> bool:
    return set(old) == set(new) if name in _SET_FIELDS else old == new


def _identical(old: Row, new: Row) -> bool:
    return old.trigger == new.trigger and all(_same(name, _value(old, name), _value(new, name)) for name in ROW_FIELDS)


def _similarity(old: Row, new: Row) -> int:
    return sum(_same(name, _value(old, name), _value(new, name)) for name in ROW_FIELDS)


def _pairable(old: Row, new: Row) -> bool:
    return old.trigger == new.trigger and (bool(set(old.sources) & set(new.sources)) or old.dest == new.dest)


def _match_rows(old_rows: Sequence[Row], new_rows: Sequence[Row]) -> RowDiff:
    """Identical rows first, in table order; then the rest pairwise by similarity; what is left was added or removed."""
    free_new = list(new_rows)
    free_old = []
    renumbered = []
    for row in old_rows:
        twin = next((candidate for candidate in free_new if _identical(row, candidate)), None)
        if twin is None:
            free_old.append(row)
            continue
        free_new.remove(twin)
        if twin.index != row.index:
            renumbered.append(RowPair(row, twin))
    candidates = sorted(
        ((old, new) for old in free_old for new in free_new if _pairable(old, new)),
        key=lambda pair: (-_similarity(*pair), pair[0].index, pair[1].index),
    )
    changed = []
    taken_old: set[int] = set()
    taken_new: set[int] = set()
    for old, new in candidates:
        if old.index in taken_old or new.index in taken_new:
            continue
        taken_old.add(old.index)
        taken_new.add(new.index)
        fields = tuple(
            FieldChange(name, _value(old, name), _value(new, name))
            for name in ROW_FIELDS
            if not _same(name, _value(old, name), _value(new, name))
        )
        changed.append(RowPair(old, new, fields))
    return RowDiff(
        tuple(row for row in free_new if row.index not in taken_new),
        tuple(row for row in free_old if row.index not in taken_old),
        tuple(sorted(changed, key=lambda pair: pair.new.index)),
        tuple(sorted(renumbered, key=lambda pair: pair.new.index)),
    )


def _verdicts(
    old_results: list[Property], new_results: list[Property], old_place: tuple[str, str], new_place: tuple[str, str]
) -> tuple[VerdictChange, ...]:
    old_by_name = {result.name: _relabelled(result, *old_place) for result in old_results}
    new_by_name = {result.name: _relabelled(result, *new_place) for result in new_results}
    verdicts = []
    for name in dict.fromkeys([*new_by_name, *old_by_name]):
        old, new = old_by_name.get(name), new_by_name.get(name)
        if not (old is not None and new is not None and old.ok and new.ok):
            verdicts.append(VerdictChange(name, old, new))
    return tuple(verdicts)


def _relabelled(result: Property, directory: str, label: str) -> Property:
    """Witnesses name the file they point at; a spec read from git sits in a temporary folder, so name it by its label."""
    if directory == label:
        return result
    prefix = str(Path(directory)) + "/"
    return replace(result, witness=tuple(line.replace(prefix, label.rstrip("/") + "/") for line in result.witness))


def _touched(old: Spec, new: Spec, machines: dict[str, MachineDiff], invariants: TableDiff) -> tuple[Touched, ...]:
    moved = {f"{name}.{trigger}" for name, machine in machines.items() for trigger in machine.rows.triggers()}
    statement = {record.name: "added" for record in invariants.added}
    statement |= {record.name: "removed" for record in invariants.removed}
    statement |= {change.name: "changed" for change in invariants.changed if any(f.field == "statement" for f in change.fields)}
    for change in invariants.changed:
        if change.name not in statement and any(f.field == "triggers" for f in change.fields):
            statement[change.name] = "judges other triggers"  # what it covers moved, so what it guards did
    touched = []
    for name in dict.fromkeys([*new.invariants, *old.invariants]):
        listed = [*(new.invariants[name].triggers if name in new.invariants else ())]
        listed += [*(old.invariants[name].triggers if name in old.invariants else ())]
        triggers = tuple(trigger for trigger in dict.fromkeys(listed) if trigger in moved)
        if name in statement or triggers:
            touched.append(Touched(name, statement.get(name), triggers))
    return tuple(touched)


def marks_for(diff: SpecDiff, machine: str) -> Marks:
    """What `--diagram` highlights on the new `machine`: its added and changed rows, the old rows and old states it lost."""
    change = diff.machines[machine]
    return Marks(
        added=frozenset(row.index for row in change.rows.added),
        changed=frozenset(pair.new.index for pair in change.rows.changed),
        removed=change.rows.removed,
        removed_states=tuple(change.states.removed),
    )


# ------------------------------------------------------------------ report


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(none)"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, str) and " " in value:
        return json.dumps(value)
    return str(value)


def _change_text(change: FieldChange) -> str:
    old, new = change.old, change.new
    if isinstance(old, tuple) and isinstance(new, tuple) and max(len(old), len(new)) > LIST_ITEMS_SHOWN_MAX and set(old) != set(new):
        moved = [f"+{item}" for item in new if item not in old] + [f"-{item}" for item in old if item not in new]
        return f"{change.field}: {', '.join(moved)}"
    return f"{change.field}: {_show(old)} -> {_show(new)}"


def _row_text(row: Row) -> str:
    text = f"{row.trigger}: {','.join(row.sources)} -> {row.dest}, by {row.actor}"
    if row.guards:
        text += f", guards {_show(row.guards)}"
    if row.effects:
        text += f", effects {_show(row.effects)}"
    return text + (", fenced" if row.fenced else "") + f" ({Path(row.where.file).name}:{row.where.line})"


def _rows_text(rows: RowDiff) -> list[str]:
    lines = []
    for pair in rows.changed:
        was = "" if pair.old.index == pair.new.index else f" (was row {pair.old.index + 1})"
        lines.append(f"  row {pair.new.index + 1} changed{was}: {_row_text(pair.new)}")
        lines += [f"      {_change_text(change)}" for change in pair.fields]
    lines += [f"  row {row.index + 1} added: {_row_text(row)}" for row in rows.added]
    lines += [f"  old row {row.index + 1} removed: {_row_text(row)}" for row in rows.removed]
    if rows.renumbered:
        lines.append(f"  renumbered, content unchanged: {_runs(rows.renumbered)}")
    return lines


def _runs(pairs: Sequence[RowPair]) -> str:
    """Renumbered rows as runs that moved together: `18-32 -> 17-31, 5 -> 9`."""
    runs: list[list[RowPair]] = []
    for pair in pairs:
        last = runs[-1][-1] if runs else None
        if last is not None and (pair.old.index, pair.new.index) == (last.old.index + 1, last.new.index + 1):
            runs[-1].append(pair)
        else:
            runs.append([pair])

    def span(first: int, last: int) -> str:
        return str(first + 1) if first == last else f"{first + 1}-{last + 1}"

    return ", ".join(f"{span(run[0].old.index, run[-1].old.index)} -> {span(run[0].new.index, run[-1].new.index)}" for run in runs)


def _record_fields(record: Any, fields: tuple[str, ...]) -> str:
    """An added record's fields, leaving out false flags and empty lists (the defaults)."""
    values = {name: getattr(record, name) for name in fields}
    return "; ".join(f"{name}: {_show(value)}" for name, value in values.items() if value is not False and value != ())


def _table_text(table: TableDiff, noun: str, indent: str = "  ") -> list[str]:
    lines = [f"{indent}{noun} added: {record.name} ({_record_fields(record, table.fields)})" for record in table.added]
    lines += [f"{indent}{noun} removed: {record.name}" for record in table.removed]
    for change in table.changed:
        lines.append(f"{indent}{noun} changed: {change.name}")
        lines += [f"{indent}    {_change_text(each)}" for each in change.fields]
    return lines


def _machine_text(change: MachineDiff) -> list[str]:
    lines = [f"{change.name} machine"]
    lines += [f"  {_change_text(each)}" for each in change.header]
    lines += _rows_text(change.rows)
    lines += _table_text(change.states, "state")
    for noun, table in (("trigger", change.triggers), ("guard", change.guards), ("effect", change.effects)):
        lines += _table_text(table, noun)
    return lines


def _verdict_text(diff: SpecDiff) -> list[str]:
    lines = ["structural properties"]
    held, total = diff.held
    titles = {
        "broken": "broken (PASS -> FAIL)",
        "added": "new property",
        "fixed": "fixed (FAIL -> PASS)",
        "removed": "gone (only the old spec has it)",
        "still_failing": "still failing (FAIL before and after)",
    }
    for kind, title in titles.items():
        for verdict in diff.verdicts:
            if verdict.kind != kind:
                continue
            shown = verdict.new if verdict.new is not None else verdict.old
            verdict_word = "" if kind not in ("added", "removed") else (" PASS" if shown.ok else " FAIL")
            lines.append(f"  {title}: {verdict.name}{verdict_word}: {shown.summary}")
            if kind in ("broken", "added") and verdict.new is not None:
                lines += [f"      witness: {witness}" for witness in verdict.new.witness]
    if len(lines) == 1:
        lines.append(f"  every verdict is unchanged ({held} of {total} hold)")
    return lines


def _touched_text(diff: SpecDiff, caught_by: CaughtBy) -> list[str]:
    lines = ["invariants touched"]
    for touched in diff.touched:
        why = [] if not touched.statement else [touched.statement if " " in touched.statement else f"statement {touched.statement}"]
        if touched.triggers:
            why.append("rows of " + ", ".join(touched.triggers))
        lines.append(f"  {touched.name}: {'; '.join(why)}")
        lines += [f"      anti-pattern {name}: {failure_mode}" for name, failure_mode in caught_by.get(touched.name, ())]
    return lines if diff.touched else [*lines, "  none"]


def render_text(diff: SpecDiff, caught_by: CaughtBy | None = None) -> str:
    """The report a reviewer reads: one section per thing that changed, then verdicts, touched invariants and anti-patterns."""
    caught_by = caught_by or {}
    lines = [f"shiftchange spec diff: {diff.old} -> {diff.new}", ""]
    if diff.equal:
        lines.append("no change")
        lines += [line for machine in diff.machines.values() for line in _rows_text(machine.rows)]
        return "\n".join(lines) + "\n"
    for machine in diff.machines.values():
        lines += [*_machine_text(machine), ""] if machine else [f"{machine.name} machine: no change", ""]
    for title, table, noun in (("failure domains", diff.domains, "domain"), ("invariants", diff.invariants, "invariant")):
        if table:
            lines += [title, *_table_text(table, noun), ""]
    lines += [*_verdict_text(diff), ""]
    lines += [*_touched_text(diff, caught_by), ""]
    if diff.broken:
        names = ", ".join(verdict.name for verdict in diff.broken)
        lines.append(f"the change breaks {len(diff.broken)} {'property' if len(diff.broken) == 1 else 'properties'}: {names}")
    else:
        lines.append("the change breaks no property")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------- JSON


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _fields_json(changes: Sequence[FieldChange]) -> dict[str, Any]:
    return {change.field: {"old": _json_value(change.old), "new": _json_value(change.new)} for change in changes}


def _row_json(row: Row) -> dict[str, Any]:
    body = {"row": row.index + 1, "trigger": row.trigger}
    body |= {name: _json_value(_value(row, name)) for name in ROW_FIELDS}
    return body | {"line": row.where.line}


def _table_json(table: TableDiff) -> dict[str, Any]:
    def records(items: tuple[Any, ...]) -> dict[str, Any]:
        return {record.name: {name: _json_value(getattr(record, name)) for name in table.fields} for record in items}

    return {
        "added": records(table.added),
        "removed": records(table.removed),
        "changed": {change.name: _fields_json(change.fields) for change in table.changed},
    }


def _machine_json(change: MachineDiff) -> dict[str, Any]:
    rows = change.rows
    return {
        "changed": bool(change),
        "header": _fields_json(change.header),
        "rows": {
            "added": [_row_json(row) for row in rows.added],
            "removed": [_row_json(row) for row in rows.removed],
            "changed": [
                {
                    "old_row": pair.old.index + 1,
                    "new_row": pair.new.index + 1,
                    "trigger": pair.new.trigger,
                    "fields": _fields_json(pair.fields),
                }
                for pair in rows.changed
            ],
            "renumbered": [
                {"old_row": pair.old.index + 1, "new_row": pair.new.index + 1, "trigger": pair.new.trigger} for pair in rows.renumbered
            ],
        },
        "states": _table_json(change.states),
        "triggers": _table_json(change.triggers),
        "guards": _table_json(change.guards),
        "effects": _table_json(change.effects),
    }


def _verdict_json(verdict: VerdictChange) -> dict[str, Any]:
    shown = verdict.new if verdict.new is not None else verdict.old
    return {
        "name": verdict.name,
        "summary": shown.summary,
        "old": None if verdict.old is None else ("PASS" if verdict.old.ok else "FAIL"),
        "new": None if verdict.new is None else ("PASS" if verdict.new.ok else "FAIL"),
        "witness": list(shown.witness),
    }


def to_json(diff: SpecDiff, caught_by: CaughtBy | None = None) -> dict[str, Any]:
    """The report as one JSON-ready object, the same facts as `render_text`, keys in a fixed order."""
    caught_by = caught_by or {}
    kinds = ("broken", "fixed", "added", "removed", "still_failing")
    return {
        "old": diff.old,
        "new": diff.new,
        "equal": diff.equal,
        "breaks": bool(diff.broken),
        "machines": {name: _machine_json(change) for name, change in diff.machines.items()},
        "failure_domains": _table_json(diff.domains),
        "invariants": _table_json(diff.invariants),
        "properties": {
            "held": diff.held[0],
            "total": diff.held[1],
            **{kind: [_verdict_json(v) for v in diff.verdicts if v.kind == kind] for kind in kinds},
        },
        "touched_invariants": [
            {
                "name": touched.name,
                "statement": touched.statement,
                "triggers": list(touched.triggers),
                "antipatterns": [{"name": name, "failure_mode": mode} for name, mode in caught_by.get(touched.name, ())],
            }
            for touched in diff.touched
        ],
    }
