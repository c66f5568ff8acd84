"""Coverage of the transition tables: which rows a history fired, how often, and which it never fired.

Every accepted contract call leaves one event naming its trigger and the
states it left and entered, and no two rows of a machine share a source, a
trigger and a dest (the checker's `rows_traceable`), so an accepted event
names exactly the row that fired, with nothing to guess. A row no run ever
fires reads in a design review like any other; counting the rows from the
history the checkers already read shows which rows the simulator reaches and
which are dead letters, untested or unreachable in practice.

Which machine an event belongs to: one with an `attempt_id` is the Attempt
machine's, one without is the Task machine's. One exception, found in the
core's emitters: a `claim` refused before the task had any Attempt carries no
`attempt_id`, yet it is a refused call of the Attempt machine's trigger, so a
kind that only the other machine declares counts there. Kinds neither machine
declares (`create`, `append`, `decide`, `verify`, ...) are records of other
things; they are counted by kind, so a reader sees that nothing was dropped.
An accepted event of a trigger whose move matches no row is `unmatched` and
reported with an example reason, never folded into a row (the core records an
accepted `reconcile` that stays in Reconciling while calls are in flight).

A coverage file counts rows by number, so it names the rows it was counted
against (number, trigger, sources, dest). Read against a spec whose rows
differ, it is refused with the first difference, rather than shown with a
warning per row: after a renumbering every count would sit beside the wrong
row, and the review page is the one document that must not drift from the
table. Guards and effects are not part of a row's identity: changing them
does not change which row an event matched. Recording again is one `sim run`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import Spec

FORMAT = "shiftchange-coverage"
FORMAT_VERSION = 1
"""Bumped whenever a field of the file changes meaning; a file of another version is refused, not guessed at."""
EXAMPLE_LENGTH_MAX = 200
"""An unmatched move keeps at most this many characters of one event's reason as its example."""


class CoverageError(Exception):
    """A coverage that cannot be counted, read, written or shown against this spec: one line saying why."""


@dataclass(frozen=True)
class RowKey:
    """What identifies a row for counting: its number (`Row.index + 1`, the diagrams' "#N"), trigger, sources and dest."""

    number: int
    trigger: str
    sources: tuple[str, ...]
    dest: str

    def __str__(self) -> str:
        return f"#{self.number} {self.trigger}: {', '.join(self.sources)} -> {self.dest}"


@dataclass(frozen=True)
class Unmatched:
    """Accepted events of one machine's trigger whose move (from, to) is no row of that machine."""

    machine: str
    trigger: str
    from_state: str | None
    to_state: str | None
    events: int
    example: str
    """The reason one such event was recorded with: a run's first; in a merge the smallest, so a sum does not depend on order."""


def identity_of(spec: Spec) -> dict[str, tuple[RowKey, ...]]:
    """Each machine's rows as counting identifies them, in table order."""
    return {
        name: tuple(RowKey(row.index + 1, row.trigger, row.sources, row.dest) for row in machine.rows)
        for name, machine in spec.machines.items()
    }


def digest_of(identity: Mapping[str, tuple[RowKey, ...]]) -> str:
    """A short SHA-256 of the rows' identity: two coverages with one digest counted the same rows."""
    plain = {name: [[key.number, key.trigger, list(key.sources), key.dest] for key in keys] for name, keys in sorted(identity.items())}
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Coverage:
    """Counts over one or more histories: accepted events per row, refused calls per trigger, and everything else seen."""

    identity: dict[str, tuple[RowKey, ...]]
    fired: dict[str, tuple[int, ...]]
    """Per machine, the accepted events of each row, in row order (position = row number - 1)."""
    refused: dict[str, dict[str, int]]
    """Per machine, refused calls by trigger."""
    unmatched: tuple[Unmatched, ...]
    other: dict[str, int]
    """Events whose kind is no trigger of either machine, by kind."""
    events: int
    """Every event counted, of any kind."""
    runs: int
    recorded_by: tuple[str, ...] = ()
    """What recorded it: each run's replay command, or the sweep's."""
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        assert set(self.fired) == set(self.identity), "fired counts are per machine of the identity"
        for name, keys in self.identity.items():
            assert len(self.fired[name]) == len(keys), f"{name}: one count per row"
        object.__setattr__(self, "digest", digest_of(self.identity))
        # One order whatever order the runs completed in, so a sweep's file does not depend on its executor.
        object.__setattr__(
            self, "unmatched", tuple(sorted(self.unmatched, key=lambda u: (u.machine, u.trigger, str(u.from_state), str(u.to_state))))
        )

    def count(self, machine: str, number: int) -> int:
        return self.fired[machine][number - 1]

    def never_fired(self, machine: str) -> tuple[RowKey, ...]:
        return tuple(key for key, count in zip(self.identity[machine], self.fired[machine], strict=True) if not count)

    def rows_fired(self, machine: str) -> int:
        return sum(1 for count in self.fired[machine] if count)

    def check_against(self, spec: Spec, source: str = "the coverage") -> None:
        """Refuse, naming the first difference, when this coverage counted other rows than `spec` has."""
        here = identity_of(spec)
        if here == self.identity:
            return
        for name in sorted(set(here) | set(self.identity)):
            theirs, ours = self.identity.get(name), here.get(name)
            if theirs is None or ours is None:
                raise CoverageError(f"{source} was recorded against another spec: the {name} machine is in only one of them")
            for old, new in zip(theirs, ours, strict=False):
                if old != new:
                    raise CoverageError(f"{source} was recorded against another spec: {name} row {old} there, {new} here; record it again")
            if len(theirs) != len(ours):
                raise CoverageError(
                    f"{source} was recorded against another spec: the {name} machine has {len(theirs)} rows there, {len(ours)} here;"
                    " record it again"
                )

    def merge(self, other: Coverage) -> Coverage:
        """The sum of two coverages of the same rows (a sweep's runs); recorded_by keeps both."""
        if other.identity != self.identity:
            raise CoverageError(f"cannot merge coverages of different specs (rows digest {self.digest} and {other.digest})")
        unmatched: dict[tuple, Unmatched] = {}
        for entry in (*self.unmatched, *other.unmatched):
            key = (entry.machine, entry.trigger, entry.from_state, entry.to_state)
            earlier = unmatched.get(key)
            # The smaller example, not the first: a merge must not depend on which run completed first.
            example = entry.example if earlier is None else min(earlier.example, entry.example)
            unmatched[key] = Unmatched(*key, entry.events + (earlier.events if earlier else 0), example)
        return Coverage(
            self.identity,
            {name: tuple(a + b for a, b in zip(counts, other.fired[name], strict=True)) for name, counts in self.fired.items()},
            {name: _summed(self.refused.get(name, {}), other.refused.get(name, {})) for name in self.identity},
            tuple(unmatched.values()),
            _summed(self.other, other.other),
            self.events + other.events,
            self.runs + other.runs,
            (*self.recorded_by, *other.recorded_by),
        )

    def relabelled(self, recorded_by: Iterable[str]) -> Coverage:
        """The same counts, recorded by something else (a sweep names itself, not each of its runs)."""
        return Coverage(self.identity, self.fired, self.refused, self.unmatched, self.other, self.events, self.runs, tuple(recorded_by))

    # ------------------------------------------------------------ the file

    def to_json(self) -> dict[str, Any]:
        machines = {}
        for name, keys in self.identity.items():
            rows = [
                {"row": key.number, "trigger": key.trigger, "sources": list(key.sources), "dest": key.dest, "fired": count}
                for key, count in zip(keys, self.fired[name], strict=True)
            ]
            unmatched = [
                {"trigger": u.trigger, "from": u.from_state, "to": u.to_state, "events": u.events, "example": u.example}
                for u in self.unmatched
                if u.machine == name
            ]
            machines[name] = {"rows": rows, "refused": dict(sorted(self.refused.get(name, {}).items())), "unmatched": unmatched}
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "spec_digest": self.digest,
            "recorded_by": list(self.recorded_by),
            "runs": self.runs,
            "events": self.events,
            "machines": machines,
            "other_events": dict(sorted(self.other.items())),
        }

    @classmethod
    def from_json(cls, data: Any, source: str = "the coverage") -> Coverage:
        """A coverage from its file's object; anything but this format and version is refused with one line."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CoverageError(f'{source} is not a shiftchange coverage file (no "format": "{FORMAT}")')
        if data.get("version") != FORMAT_VERSION:
            raise CoverageError(
                f"{source} is coverage format version {data.get('version')!r}; this shiftchange reads version {FORMAT_VERSION}:"
                " record it again"
            )
        try:
            identity, fired, refused, unmatched = {}, {}, {}, []
            for name, machine in data["machines"].items():
                rows = machine["rows"]
                identity[name] = tuple(
                    RowKey(_whole(r["row"]), str(r["trigger"]), tuple(map(str, r["sources"])), str(r["dest"])) for r in rows
                )
                fired[name] = tuple(_whole(r["fired"]) for r in rows)
                refused[name] = {str(trigger): _whole(n) for trigger, n in machine["refused"].items()}
                unmatched += [
                    Unmatched(name, str(u["trigger"]), u["from"], u["to"], _whole(u["events"]), str(u["example"]))
                    for u in machine["unmatched"]
                ]
            other = {str(kind): _whole(n) for kind, n in data["other_events"].items()}
            recorded_by = tuple(map(str, data["recorded_by"]))
            coverage = cls(identity, fired, refused, tuple(unmatched), other, _whole(data["events"]), _whole(data["runs"]), recorded_by)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CoverageError(f"{source} is malformed: {type(error).__name__} {error}") from None
        if data.get("spec_digest") != coverage.digest:
            raise CoverageError(f"{source} is malformed: its spec_digest does not match the rows it lists")
        return coverage


def _summed(first: Mapping[str, int], second: Mapping[str, int]) -> dict[str, int]:
    total = dict(first)
    for key, count in second.items():
        total[key] = total.get(key, 0) + count
    return total


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def write_coverage(coverage: Coverage, path: str | os.PathLike[str]) -> Path:
    """Write the coverage as JSON, to a temporary file beside `path` renamed over it: a reader never sees half a file."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        temporary.write_text(_dumps(coverage.to_json()), encoding="utf-8")
        os.replace(temporary, target)
    except OSError as error:
        raise CoverageError(f"cannot write {target}: {error.strerror or error}") from None
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _dumps(data: dict[str, Any]) -> str:
    """Indented JSON with each row and each unmatched move on one line, so two coverage files diff row by row."""
    lines: dict[str, str] = {}
    for machine in data["machines"].values():
        for group in ("rows", "unmatched"):
            for position, entry in enumerate(machine[group]):
                token = f"@@{len(lines)}@@"
                lines[json.dumps(token)] = json.dumps(entry)
                machine[group][position] = token
    text = json.dumps(data, indent=2)
    for token, line in lines.items():
        text = text.replace(token, line, 1)
    return text + "\n"


def check_writable(path: str | os.PathLike[str]) -> None:
    """Fail before any run when the coverage file could never be written: a folder, or no writable folder to hold it."""
    target = Path(path)
    if target.is_dir() or not target.parent.is_dir() or not os.access(target.parent, os.W_OK):
        raise CoverageError(f"cannot write {target}: the coverage must be a file in a writable folder that exists")


def read_coverage(path: str | os.PathLike[str]) -> Coverage:
    """A coverage file read back; a missing file, one that is not JSON, or another format or version is one line of error."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CoverageError(f"no coverage file at {source}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CoverageError(f"cannot read {source}: {getattr(error, 'strerror', None) or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CoverageError(f"{source} is not JSON: {error.msg} at line {error.lineno}") from None
    return Coverage.from_json(data, str(source))


# ------------------------------------------------------------------ counting


class Tally:
    """Counts events one at a time, as a streamed history passes (a million-task run keeps no history to count later).

    `add` is a few dictionary lookups; `counts` is the small plain payload a
    run in another process hands back, and `from_counts` turns it into a
    `Coverage` again, refusing one counted against other rows.
    """

    __slots__ = ("_fired", "_other", "_presented", "_refused", "_rows", "_triggers", "_unmatched", "events", "identity")

    def __init__(self, spec: Spec) -> None:
        self.identity = identity_of(spec)
        rows: dict[tuple[str, str, str, str], int] = {}
        for name, machine in spec.machines.items():
            for source, dest, row in machine.edges():
                key = (name, row.trigger, source, dest)
                if key in rows:
                    raise CoverageError(
                        f"{name} rows #{rows[key] + 1} and #{row.index + 1} both move {source} -> {dest} on {row.trigger!r}:"
                        " an event cannot tell which fired (see `spec check`, rows_traceable)"
                    )
                rows[key] = row.index
        self._rows = rows
        self._triggers = {name: frozenset(machine.triggers) for name, machine in spec.machines.items()}
        self._fired = {name: [0] * len(keys) for name, keys in self.identity.items()}
        self._refused: dict[str, dict[str, int]] = {name: {} for name in self.identity}
        self._presented: dict[str, set[tuple[str, str | None]]] = {name: set() for name in self.identity}
        """Per machine, every (trigger, state) a call presented, accepted or refused: the rows that could have decided it."""
        self._unmatched: dict[tuple[str, str, str | None, str | None], list] = {}
        self._other: dict[str, int] = {}
        self.events = 0

    def add(self, event: Any) -> None:
        """Count one history event (a `core.Event`, or anything with its kind, attempt_id, accepted, from_state, to_state)."""
        self.events += 1
        kind = event.kind
        machine = "attempt" if event.attempt_id is not None else "task"
        if kind not in self._triggers[machine]:
            machine = "task" if machine == "attempt" else "attempt"
            if kind not in self._triggers[machine]:
                self._other[kind] = self._other.get(kind, 0) + 1
                return
        self._presented[machine].add((kind, event.from_state))
        if not event.accepted:
            refused = self._refused[machine]
            refused[kind] = refused.get(kind, 0) + 1
            return
        position = self._rows.get((machine, kind, event.from_state, event.to_state))
        if position is not None:
            self._fired[machine][position] += 1
            return
        entry = self._unmatched.setdefault((machine, kind, event.from_state, event.to_state), [0, str(event.reason)[:EXAMPLE_LENGTH_MAX]])
        entry[0] += 1

    def counts(self) -> dict[str, Any]:
        """The counts as plain data, with the digest of the rows they were counted against: cheap to send between processes."""
        return {
            "spec_digest": digest_of(self.identity),
            "events": self.events,
            "fired": {name: list(counts) for name, counts in self._fired.items()},
            "refused": {name: dict(counts) for name, counts in self._refused.items()},
            "unmatched": [[*key, count, example] for key, (count, example) in self._unmatched.items()],
            "other": dict(self._other),
            "presented": {name: sorted(pairs, key=str) for name, pairs in self._presented.items()},
        }

    def add_presented(self, presented: Mapping[str, Iterable[Sequence[Any]]]) -> None:
        """Add another tally's `counts()["presented"]` (another process's share of one search)."""
        for machine, pairs in presented.items():
            self._presented[machine].update((trigger, state) for trigger, state in pairs)

    def coverage(self, recorded_by: Iterable[str] = ()) -> Coverage:
        """This tally as the coverage of one run; a history with no event at all is refused, not written as zeros."""
        return from_counts(self.identity, self.counts(), recorded_by)


def from_counts(identity: dict[str, tuple[RowKey, ...]], counts: Mapping[str, Any], recorded_by: Iterable[str] = ()) -> Coverage:
    """One run's `Tally.counts` as a Coverage of those rows; counts of other rows, or of no event, are refused."""
    if counts["spec_digest"] != digest_of(identity):
        raise CoverageError(f"a run counted its events against other rows (digest {counts['spec_digest']}, not {digest_of(identity)})")
    if not counts["events"]:
        raise CoverageError(
            "the history has no events to count: the run kept none (a store with keep_events=False keeps none; count them as they stream)"
        )
    unmatched = tuple(Unmatched(*entry) for entry in counts["unmatched"])
    fired = {name: tuple(values) for name, values in counts["fired"].items()}
    return Coverage(identity, fired, counts["refused"], unmatched, counts["other"], counts["events"], 1, tuple(recorded_by))


def coverage_of(spec: Spec, events: Iterable[Any], recorded_by: Iterable[str] = ()) -> Coverage:
    """The coverage of one history: accepted events per row, refused calls per trigger, the rest by kind."""
    tally = Tally(spec)
    for event in events:
        tally.add(event)
    return tally.coverage(recorded_by)


def merged(coverages: Iterable[Coverage]) -> Coverage:
    """The sum of one or more coverages of the same rows."""
    total = None
    for coverage in coverages:
        total = coverage if total is None else total.merge(coverage)
    if total is None:
        raise CoverageError("nothing to merge: no coverage was given")
    return total
