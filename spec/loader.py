"""Load the spec's TOML files and validate them into `model` records.

Why TOML read by the standard library's `tomllib`: comments are allowed, so
the table reads as a document; no dependency is added; and its parse errors
carry line numbers. `tomllib` does not report where a parsed value sat, so a
small index of table headers recovers the line of each state, domain and
transition row for the messages below.

Every malformed spec raises `SpecError` naming the file, the line where it can,
what is wrong and how to fix it. Validation stops at the first problem: one
clear message beats a wall of consequences.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

from .model import (
    ACTORS,
    RESPONSES,
    STAY,
    FailureDomain,
    Invariant,
    Machine,
    Row,
    Spec,
    State,
    Term,
    Where,
)

DEFAULT_DIRECTORY = Path(__file__).resolve().parent
FILES = {
    "attempt": "attempt.toml",
    "task": "task.toml",
    "domains": "failure_domains.toml",
    "invariants": "invariants.toml",
}

_STATE_KEYS = {"description", "terminal", "dispatchable", "resting"}
_ROW_KEYS = {"trigger", "source", "dest", "actor", "guards", "effects", "fenced"}
_DOMAIN_KEYS = {
    "response",
    "retries_max",
    "changed_hypothesis_required",
    "blast_radius",
    "description",
    "examples",
}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class SpecError(Exception):
    """A spec file is malformed: where, what is wrong, and how to fix it."""

    def __init__(self, where: Where, problem: str, fix: str) -> None:
        self.where = where
        self.problem = problem
        self.fix = fix
        super().__init__(f"{where}: {problem}; fix: {fix}")


class _Lines:
    """Finds the line of a table header in a TOML text."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self._lines = text.splitlines()

    def of_table(self, *dotted: str) -> Where:
        pattern = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(map(re.escape, dotted)) + r"\s*\]")
        return self._first(pattern)

    def of_row(self, array: str, index: int) -> Where:
        pattern = re.compile(r"^\s*\[\[\s*" + re.escape(array) + r"\s*\]\]")
        hits = [n for n, line in enumerate(self._lines, 1) if pattern.match(line)]
        return Where(self.file, hits[index] if index < len(hits) else None)

    def of_key(self, table: Where, key: str) -> Where:
        """The line of `key = ...` inside the table that starts at `table`, else the table's own line."""
        if table.line is None:
            return table
        pattern = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        for number in range(table.line, len(self._lines)):
            line = self._lines[number]
            if line.lstrip().startswith("["):
                break
            if pattern.match(line):
                return Where(self.file, number + 1)
        return table

    def of_text(self, table: Where, key: str, text: str) -> Where:
        """The line inside `key = ...` of the table at `table` that holds `text` (a list may span lines), else the key's line."""
        start = self.of_key(table, key)
        if start.line is None:
            return start
        for number in range(start.line - 1, len(self._lines)):
            line = self._lines[number]
            if number >= start.line and (line.lstrip().startswith("[") or re.match(r"^\s*[a-z_]+\s*=", line)):
                break
            if text in line:
                return Where(self.file, number + 1)
        return start

    def _first(self, pattern: re.Pattern[str]) -> Where:
        for number, line in enumerate(self._lines, 1):
            if pattern.match(line):
                return Where(self.file, number)
        return Where(self.file)


CHECKOUT_FOLDER = "spec"
"""The folder, beside the current directory, that the spec commands read when it holds every spec file (a checkout's)."""


def editing_directory(cwd: str | Path | None = None) -> Path | None:
    """`spec/` under `cwd` (default: the current directory) when it holds every spec file, the spec being edited; else None."""
    folder = Path(CHECKOUT_FOLDER) if cwd is None else Path(cwd) / CHECKOUT_FOLDER  # relative: messages name spec/attempt.toml
    return folder if all((folder / name).is_file() for name in FILES.values()) else None


def shown_directory(directory: str | Path) -> str:
    """A spec directory as a person reads it: relative to the current directory when under it, "the packaged spec" for the
    installed one, else the path given (never an installed package's absolute path)."""
    root = Path(directory)
    try:
        if root.resolve() == DEFAULT_DIRECTORY:
            return "the packaged spec (shiftchange.spec)"
        return str(root.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(directory)


@functools.cache
def packaged_spec() -> Spec:
    """The installed spec, read once a process: the core compiles it and the checkers read its catalogue, each its own way."""
    return load_spec(DEFAULT_DIRECTORY)


def load_spec(directory: str | Path | None = None) -> Spec:
    """Load and validate every spec file in `directory` (default: the packaged spec)."""
    root = Path(directory) if directory is not None else DEFAULT_DIRECTORY
    if not root.is_dir():
        raise SpecError(Where(str(root)), "spec directory not found", "pass --spec a directory holding " + ", ".join(FILES.values()))
    attempt = _load_machine(root / FILES["attempt"])
    task = _load_machine(root / FILES["task"])
    domains = _load_domains(root / FILES["domains"])
    invariants = _load_invariants(root / FILES["invariants"], {"attempt": attempt, "task": task})
    return Spec(str(root), attempt, task, domains, invariants)


def _read(path: Path) -> tuple[dict, _Lines]:
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(Where(name), "file not found", "restore it from the packaged spec") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(Where(name), f"cannot read: {error}", "make it a readable UTF-8 file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"line (\d+)", str(error))
        line = int(match.group(1)) if match else None
        raise SpecError(Where(name, line), f"bad TOML: {error}", "correct the syntax at that line") from None
    return data, _Lines(name, text)


def _table(data: dict, key: str, where: Where, fix: str) -> dict:
    value = data.get(key)
    if not isinstance(value, dict) or not value:
        raise SpecError(where, f"missing or empty [{key}] table", fix)
    return value


def _text(value: object, where: Where, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(where, f"{what} must be a non-empty string", f"write {what} as a quoted string")
    return value.strip()


def _flag(value: object, where: Where, what: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(where, f"{what} must be true or false, not {value!r}", f"write {what} = true or {what} = false")
    return value


def _names(value: object, where: Where, what: str) -> tuple[str, ...]:
    """A string or a list of strings, as a tuple."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise SpecError(where, f"{what} must be a name or a list of names", f'write {what} = ["name", ...]')
    return tuple(items)


def _unknown_keys(table: dict, allowed: set[str], where: Where, what: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise SpecError(where, f"unknown key {extra[0]!r} in {what}", "use one of " + ", ".join(sorted(allowed)))


def _one_of(name: str, known: dict | tuple, where: Where, what: str) -> None:
    if name not in known:
        raise SpecError(where, f"unknown {what} {name!r}", f"use one of {', '.join(sorted(known))} or declare it")


def _load_machine(path: Path) -> Machine:
    data, lines = _read(path)
    header_where = lines.of_table("machine")
    header = _table(data, "machine", Where(str(path), 1), "add a [machine] table with name and initial")
    name = _text(header.get("name"), header_where, "machine name")
    description = _text(header.get("description"), header_where, "machine description")
    states = _load_states(data, lines)
    if "initial" not in header:
        raise SpecError(header_where, "no initial state", 'add initial = "<state>" to [machine]')
    initial = _text(header["initial"], header_where, "initial")
    _one_of(initial, states, header_where, "initial state")
    if states[initial].terminal:
        raise SpecError(header_where, f"initial state {initial!r} is terminal", "start the machine in a non-terminal state")
    triggers = _load_terms(data, "triggers", lines)
    guards = _load_terms(data, "guards", lines)
    effects = _load_terms(data, "effects", lines)
    rows = _load_rows(data, lines, states, triggers, guards, effects)
    roles = _load_roles(header, lines, states, triggers, effects)
    return Machine(name, initial, description, states, triggers, guards, effects, rows, roles, Where(str(path)))


def _load_states(data: dict, lines: _Lines) -> dict[str, State]:
    table = _table(data, "states", lines.of_table("machine"), "declare each state as [states.<name>]")
    states = {}
    for name, body in table.items():
        where = lines.of_table("states", name)
        if not _NAME.match(name) or not isinstance(body, dict):
            raise SpecError(where, f"bad state {name!r}", "name states in lower_snake_case, each as a [states.<name>] table")
        _unknown_keys(body, _STATE_KEYS, where, f"state {name!r}")
        flags = {key: _flag(body.get(key, False), where, key) for key in ("terminal", "dispatchable", "resting")}
        if flags["terminal"] and (flags["dispatchable"] or flags["resting"]):
            raise SpecError(where, f"terminal state {name!r} is also dispatchable or resting", "a terminal state is neither")
        states[name] = State(name, _text(body.get("description"), where, "description"), where, **flags)
    return states


def _load_terms(data: dict, kind: str, lines: _Lines) -> dict[str, Term]:
    terms = {}
    for name, body in data.get(kind, {}).items():
        where = lines.of_table(kind, name)
        if not _NAME.match(name) or not isinstance(body, dict):
            raise SpecError(where, f"bad {kind[:-1]} {name!r}", f"declare it as [{kind}.<lower_snake_name>] with a description")
        allowed = {"description", "material"} if kind == "effects" else {"description"}
        _unknown_keys(body, allowed, where, f"{kind[:-1]} {name!r}")
        material = _flag(body.get("material", False), where, "material")
        terms[name] = Term(name, _text(body.get("description"), where, "description"), where, material)
    return terms


def _load_rows(data, lines, states, triggers, guards, effects) -> tuple[Row, ...]:
    table = data.get("transition")
    if not isinstance(table, list) or not table:
        raise SpecError(Where(lines.file), "no [[transition]] rows", "add at least one [[transition]] row")
    rows: list[Row] = []
    for index, body in enumerate(table):
        row = _load_row(index, body, lines.of_row("transition", index), lines, states, triggers, guards, effects)
        for earlier in rows:
            shared = set(earlier.sources) & set(row.sources)
            if earlier.trigger == row.trigger and shared and set(earlier.guards) == set(row.guards):
                raise SpecError(
                    row.where,
                    f"duplicate row: trigger {row.trigger!r} from {sorted(shared)[0]!r} with the same guards as the row at {earlier.where}",
                    "delete one, or tell them apart with a guard one row requires and the other negates (!name)",
                )
        rows.append(row)
    return tuple(rows)


def _load_row(index, body, where, lines, states, triggers, guards, effects) -> Row:
    if not isinstance(body, dict):
        raise SpecError(where, "a transition row must be a table", "write it as [[transition]] with key = value lines")
    _unknown_keys(body, _ROW_KEYS, where, "transition row")
    if "trigger" not in body:
        raise SpecError(where, "row has no trigger", 'add trigger = "<name>" naming a declared trigger')
    trigger = _text(body["trigger"], lines.of_key(where, "trigger"), "trigger")
    _one_of(trigger, triggers, lines.of_key(where, "trigger"), "trigger")
    for key in ("source", "dest", "actor"):
        if key not in body:
            raise SpecError(where, f"row {trigger!r} has no {key}", f"add {key} = ... to the row")
    at = {key: lines.of_key(where, key) for key in _ROW_KEYS}
    sources = _names(body["source"], at["source"], "source")
    if not sources:
        raise SpecError(at["source"], f"row {trigger!r} has an empty source list", "name at least one source state")
    for source in sources:
        _one_of(source, states, at["source"], "state")
    dest = _text(body["dest"], at["dest"], "dest")
    if dest != STAY:
        _one_of(dest, states, at["dest"], "state")
    actor = _text(body["actor"], at["actor"], "actor")
    _one_of(actor, ACTORS, at["actor"], "actor")
    row_guards = _names(body.get("guards", []), at["guards"], "guards")
    for guard in row_guards:
        _one_of(guard.removeprefix("!"), guards, at["guards"], "guard")
    positive = {g for g in row_guards if not g.startswith("!")}
    clash = positive & {g[1:] for g in row_guards if g.startswith("!")}
    if clash:
        raise SpecError(at["guards"], f"row {trigger!r} both requires and negates guard {sorted(clash)[0]!r}", "keep one of the two")
    row_effects = _names(body.get("effects", []), at["effects"], "effects")
    for effect in row_effects:
        _one_of(effect, effects, at["effects"], "effect")
    fenced = _flag(body.get("fenced", False), at["fenced"], "fenced")
    return Row(index, trigger, sources, dest, actor, row_guards, row_effects, fenced, where)


def _load_roles(header, lines, states, triggers, effects) -> dict[str, str]:
    where = lines.of_table("machine", "roles")
    roles = header.get("roles", {})
    if not isinstance(roles, dict):
        raise SpecError(where, "[machine.roles] must be a table", 'write role = "name" lines under [machine.roles]')
    known = {
        "suspect": states,
        "reconciling": states,
        "lease_expiry_trigger": triggers,
        "cancel_trigger": triggers,
        "dispatch_effect": effects,
        "issue_fence_effect": effects,
    }
    for role, value in roles.items():
        _one_of(role, tuple(known), where, "role")
        _one_of(_text(value, where, role), known[role], where, f"name for role {role!r}:")
    return dict(roles)


def _load_domains(path: Path) -> dict[str, FailureDomain]:
    data, lines = _read(path)
    table = _table(data, "domains", Where(str(path), 1), "declare each failure domain as [domains.<name>]")
    domains = {}
    for name, body in table.items():
        where = lines.of_table("domains", name)
        if not _NAME.match(name) or not isinstance(body, dict):
            raise SpecError(where, f"bad failure domain {name!r}", "declare it as [domains.<lower_snake_name>]")
        _unknown_keys(body, _DOMAIN_KEYS, where, f"domain {name!r}")
        if "response" not in body:
            raise SpecError(where, f"domain {name!r} has no response", "add response = one of " + ", ".join(RESPONSES))
        response = _text(body["response"], where, "response")
        _one_of(response, RESPONSES, where, "response")
        retries = body.get("retries_max")
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise SpecError(where, f"domain {name!r} needs retries_max, an integer from 0 to 100", "add retries_max = <n>")
        domains[name] = FailureDomain(
            name,
            response,
            retries,
            _flag(body.get("changed_hypothesis_required"), where, "changed_hypothesis_required"),
            _text(body.get("blast_radius"), where, "blast_radius"),
            _text(body.get("description"), where, "description"),
            _names(body.get("examples", []), where, "examples"),
            where,
        )
    return domains


def _load_invariants(path: Path, machines: dict[str, Machine]) -> dict[str, Invariant]:
    data, lines = _read(path)
    table = _table(data, "invariants", Where(str(path), 1), "declare each invariant as [invariants.<name>]")
    invariants = {}
    for name, body in table.items():
        where = lines.of_table("invariants", name)
        if not _NAME.match(name) or not isinstance(body, dict):
            raise SpecError(where, f"bad invariant {name!r}", "declare it as [invariants.<lower_snake_name>]")
        _unknown_keys(body, {"statement", "triggers"}, where, f"invariant {name!r}")
        statement = _text(body.get("statement"), where, "statement")
        triggers = _invariant_triggers(body.get("triggers", []), where, lines, machines)
        invariants[name] = Invariant(name, statement, where, triggers)
    return invariants


def _invariant_triggers(value: object, table: Where, lines: _Lines, machines: dict[str, Machine]) -> tuple[str, ...]:
    """An invariant's `triggers`: each "machine.trigger" names a trigger that machine declares, once."""
    names = _names(value, lines.of_key(table, "triggers"), "triggers")
    for index, name in enumerate(names):
        where = lines.of_text(table, "triggers", f'"{name}"')
        machine, dot, trigger = name.partition(".")
        if not dot or not trigger:
            raise SpecError(
                where, f"bad trigger {name!r}: not machine.trigger", "write each as " + " or ".join(f'"{m}.<trigger>"' for m in machines)
            )
        if machine not in machines:
            raise SpecError(where, f"unknown machine {machine!r} in trigger {name!r}", "name one of " + ", ".join(machines))
        _one_of(trigger, machines[machine].triggers, where, f"{machine} trigger")
        if name in names[:index]:
            raise SpecError(where, f"trigger {name!r} is listed twice", "list each trigger once")
    return names
