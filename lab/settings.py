"""Every setting of a driver's config by a dotted name: read one, set some, compare two configs, and write or read them as TOML.

The same paths serve every driver's config alike, each read from its own class's annotations: the simulator's
`SimConfig` (the default where a function needs one), the runtime's `RuntimeConfig` (`agent.call_deadline_s`,
`core.lease_ttl_s`), the explorer's flat `ExploreConfig` (`crashes`, `lease_ttl_s`).

Why paths, not the dataclass tree: a `SimConfig` is a tree of frozen
dataclasses, but a person tuning a run wants one setting, not a tree to
rebuild with `replace` at every level: `--set core.lease_ttl_s=90`, a TOML
file that names three fields, a scenario listed as what it changes. A path
is the field names from the root (`workload.budget.attempts_max`); a dict's
key is a segment too (`reliability.rate_limits.code_host.rate_per_s`, and a
new key starts from the entry type's defaults). An optional part is one leaf
while it is None and a group once set: setting any field under it
(`reliability.admission_rate.rate_per_s=3`) creates it from its defaults. A
tuple is one leaf, whatever it holds.

Values are typed by the field's annotation, and may come typed (from TOML,
JSON or Python) or as command-line text: `true`/`false`, numbers, names
joined by commas, `none` for None, faults as their `FaultSpec` text joined by
`;`, fallbacks as a JSON array. `format_value` writes the text that reads
back to an equal value. Overrides are applied in order to plain data and
the dataclasses are built once at the end, so every `__post_init__` judges
the finished config (a file may shorten the lease before the heartbeat), and
its error is re-worded with the path in place of the class name.

TOML has no null. A None is written as the string "none", the same word the
command line uses (`admission_rate = "none"` under `[reliability]`), so a dump
names every leaf and loading it over any base gives back an equal config; a
fault's parameters that its kind does not take are simply left out. The
nemesis's placed faults are a top-level array of tables, one `[[fault]]` per
`FaultSpec`, and an empty tuple is an empty array (`fault = []`). A file may
be partial: what it does not name keeps the base's value.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

import tomli_w

from shiftchange.core import InputError
from shiftchange.core.config import shown
from shiftchange.sim.config import SimConfig

from .settings_values import (
    NONE_TEXT,
    SettingError,
    _child_hint,
    _convert,
    _dataclass,
    _hint_at,
    _hints,
    _is_group,
    _is_instance,
    _join,
    _optional,
    _parts,
    _reword,
    _segments,
    _tree,
    format_value,
)

__all__ = [
    "NONE_TEXT",
    "PLACED_PATH",
    "SettingError",
    "apply",
    "diff",
    "format_value",
    "from_dict",
    "from_toml",
    "get",
    "load",
    "parse_assignment",
    "paths",
    "read_overrides",
    "to_toml",
]

PLACED_PATH = "nemesis.placed"
_PLACED_TABLE = "fault"
"""The placed faults' name in a TOML file: one `[[fault]]` table per FaultSpec."""
_NOT_GIVEN = object()


ConfigT = TypeVar("ConfigT")


# ------------------------------------------------------------------ reading and comparing


def paths(config: Any) -> dict[str, Any]:
    """Every leaf of the config by its dotted path, in field order."""
    return dict(_leaves(config, ""))


def get(config: Any, path: str) -> Any:
    """The value at a dotted path (a leaf, or the part of the config a shorter path names)."""
    value: Any = config
    segments = _segments(path)
    for depth, name in enumerate(segments):
        if _is_instance(value) and name in _hints(type(value)):
            value = getattr(value, name)
        elif isinstance(value, dict) and name in value:
            value = value[name]
        elif value is None and _hint_at(segments, type(config)) is not None:
            raise SettingError(f"{path} has no value: {'.'.join(segments[:depth])} is {NONE_TEXT}")
        else:
            raise _unknown(path, config)
    return value


def diff(base: Any, config: Any) -> dict[str, Any]:
    """The leaves of `config` whose values differ from `base`'s (or that `base` does not have), in field order."""
    before = paths(base)
    return {path: value for path, value in paths(config).items() if path not in before or before[path] != value}


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if _is_instance(value):
        for item in dataclasses.fields(value):
            yield from _leaves(getattr(value, item.name), _join(path, item.name))
    elif isinstance(value, dict):
        for key, entry in value.items():
            yield from _leaves(entry, _join(path, key))
    else:
        yield path, value


# ------------------------------------------------------------------ setting


def parse_assignment(text: str) -> tuple[str, str]:
    """`core.lease_ttl_s=90` as ("core.lease_ttl_s", "90"); the value may be empty (an empty list)."""
    path, equals, value = text.partition("=")
    path = path.strip()
    if not equals or not path or any(character.isspace() for character in path):
        raise SettingError(f"a setting is PATH=VALUE (e.g. core.lease_ttl_s=90), not {text!r}")
    return path, value.strip()


def apply(config: ConfigT, overrides: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> ConfigT:
    """`config` (any driver's) with each (path, value) applied in order; a later one wins. The result is validated once,
    as a whole, by its own class."""
    pairs = overrides.items() if isinstance(overrides, Mapping) else overrides
    tree = _tree(config)
    for path, value in pairs:
        _assign(tree, _segments(path), value, config)
    return _build(tree, type(config), "")


def from_dict(data: Mapping[str, Any], kind: type = SimConfig) -> Any:
    """The config of class `kind` (a `SimConfig` by default) that plain data describes (`SimConfig.as_dict()`, a report's
    `config`); what it leaves out takes the defaults."""
    if not isinstance(data, Mapping):
        raise SettingError(f"a config as plain data is a mapping of its parts, not {shown(data)}")
    return apply(kind(), [("", data)])


def _assign(tree: dict[str, Any], segments: tuple[str, ...], value: Any, config: Any) -> None:
    """Write one setting into the plain-data tree; a mapping given for a group sets its parts one by one."""
    path = ".".join(segments)
    hint = _hint_at(segments, type(config))
    if hint is None:
        raise _unknown(path, config, value)
    if _is_group(hint) and isinstance(value, Mapping):
        _node(tree, segments, type(config))
        for name, part in value.items():
            _assign(tree, (*segments, str(name)), part, config)
    elif segments:
        _node(tree, segments[:-1], type(config))[segments[-1]] = _leaf_value(value, hint, path)
    else:
        raise SettingError(f"a whole config is given as a mapping of its parts, not {shown(value)}")


def _node(tree: dict[str, Any], segments: tuple[str, ...], root: type) -> dict[str, Any]:
    """The group at `segments`, created from its type's defaults where it is None (an unset optional part, a new dict key)."""
    node, hint = tree, root
    for name in segments:
        hint = _child_hint(hint, name)
        if node.get(name) is None:
            node[name] = _tree(_dataclass(hint)())
        node = node[name]
    return node


def _leaf_value(value: Any, hint: Any, path: str) -> Any:
    if not _is_group(hint):
        return _convert(value, hint, path)
    if _optional(hint) is not None and (value is None or value == NONE_TEXT):
        return None
    raise SettingError(f"{path} is a group of settings, not one; set its parts ({_parts(hint)}), not {shown(value)}")


def _build(tree: Any, hint: Any, path: str) -> Any:
    """Plain data back into dataclasses, bottom up; a `__post_init__` refusal is re-worded with this path for its class name."""
    if tree is None or not _is_group(hint):
        return tree
    if get_origin(hint) is dict:
        return {key: _build(entry, get_args(hint)[1], _join(path, key)) for key, entry in tree.items()}
    cls = _dataclass(hint)
    parts = {name: _build(tree[name], part, _join(path, name)) for name, part in _hints(cls).items()}
    try:
        return cls(**parts)
    except InputError as error:
        raise SettingError(_reword(error, cls, path)) from None


# ------------------------------------------------------------------ TOML


def to_toml(config: Any, *, comments: bool = False) -> str:
    """The whole config as TOML, every leaf named: `from_toml` (or `--config`) reads it back to an equal config.

    With `comments`, each setting that says what it means (the docstring under
    its field) is preceded by that meaning's first sentence as a TOML comment,
    which a reader of the file sees and `from_toml` ignores.
    """
    document = _toml(config)
    if isinstance(config, SimConfig):  # the simulator's placed faults: an array of tables at the top, one per fault
        document[_PLACED_TABLE] = document["nemesis"].pop("placed")
    text = tomli_w.dumps(document)
    return _commented(text, meanings(config)) if comments else text


def meanings(config: Any) -> dict[str, str]:
    """Dotted setting path -> the first sentence of its field's docstring, for every setting of `config` that has one."""
    found: dict[str, str] = {}

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if _is_instance(value):
            documented = _field_docs(type(value))
            for item in dataclasses.fields(value):
                here = (*path, item.name)
                if item.name in documented:
                    found[".".join(here)] = documented[item.name]
                walk(getattr(value, item.name), here)
        elif isinstance(value, dict):
            for key, entry in value.items():
                walk(entry, (*path, str(key)))

    walk(config, ())
    return found


@cache
def _field_docs(cls: type) -> dict[str, str]:
    """A dataclass's fields' docstrings (the string literal right under a field), each cut to its first sentence."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for before, after in itertools.pairwise(body):
        named = isinstance(before, ast.AnnAssign) and isinstance(before.target, ast.Name)
        if named and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            words = " ".join(after.value.value.split())
            docs[before.target.id] = re.split(r"(?<=\.)\s", words, maxsplit=1)[0]
    return docs


def _commented(text: str, meaning: dict[str, str]) -> str:
    """`text` (tomli_w's output) with `# meaning` above each key that has one, under its table's header."""
    table: tuple[str, ...] = ()
    lines = []
    for line in text.splitlines():
        header = re.fullmatch(r"\[\[?([^\]]+)\]\]?", line)
        if header:
            table = tuple(part.strip().strip('"') for part in header.group(1).split("."))
        else:
            key = re.match(r"([A-Za-z0-9_]+) = ", line)
            said = meaning.get(".".join((*table, key.group(1)))) if key else None
            if said:
                lines.append(f"# {said}")
        lines.append(line)
    return "\n".join(lines) + "\n"


def from_toml(text: str, base: Any = None) -> Any:
    """`base` (default: the simulator's defaults) with every setting a TOML text names."""
    base = SimConfig() if base is None else base
    return apply(base, _overrides(text, "the TOML text", type(base)))


def load(path: str | PathLike[str], base: Any = None) -> Any:
    """`base` (default: the simulator's defaults) with every setting a TOML file names; any error names the file."""
    base = SimConfig() if base is None else base
    overrides = read_overrides(path, type(base))
    try:
        return apply(base, overrides)
    except SettingError as error:
        raise SettingError(f"{path}: {error}") from None


def read_overrides(path: str | PathLike[str], kind: type = SimConfig) -> dict[str, Any]:
    """A TOML file, possibly partial, as path -> typed value; a key that names no setting is an error naming file and path."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise SettingError(f"cannot read config file {path}: {reason}") from None
    return _overrides(text, str(path), kind)


def _toml(value: Any) -> Any:
    if _is_instance(value):
        return {item.name: _toml(getattr(value, item.name)) for item in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: _toml(entry) for key, entry in value.items()}
    if isinstance(value, tuple):
        return [_toml_record(item) for item in value]
    return NONE_TEXT if value is None else value


def _toml_record(value: Any) -> Any:
    """One record of a tuple as a table; its None fields (parameters a fault's kind does not take) are left out."""
    if not _is_instance(value):
        return value
    return {item.name: _toml(getattr(value, item.name)) for item in dataclasses.fields(value) if getattr(value, item.name) is not None}


def _overrides(text: str, source: str, root: type) -> dict[str, Any]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingError(f"{source} is not valid TOML: {error}") from None
    try:
        return _flatten(document, root)
    except SettingError as error:
        raise SettingError(f"{source}: {error}") from None


def _flatten(document: dict[str, Any], root: type) -> dict[str, Any]:
    placed = document.pop(_PLACED_TABLE, _NOT_GIVEN) if root is SimConfig else _NOT_GIVEN
    flat: dict[str, Any] = {}
    _flatten_into(flat, document, (), root)
    if placed is not _NOT_GIVEN:
        if PLACED_PATH in flat:
            raise SettingError(f"the placed faults are given twice, as [[{_PLACED_TABLE}]] tables and as {PLACED_PATH}; give it once")
        flat[PLACED_PATH] = _leaf_value(placed, _hint_at(tuple(PLACED_PATH.split(".")), root), PLACED_PATH)
    return flat


def _flatten_into(flat: dict[str, Any], table: Mapping[str, Any], segments: tuple[str, ...], root: type) -> None:
    for name, value in table.items():
        here = (*segments, name)
        path = ".".join(here)
        hint = _hint_at(here, root)
        if hint is None:
            raise _unknown(path, root(), value)
        if _is_group(hint) and isinstance(value, Mapping):
            _flatten_into(flat, value, here, root)
        else:
            flat[path] = _leaf_value(value, hint, path)


def _unknown(path: str, config: Any, value: Any = _NOT_GIVEN) -> SettingError:
    given = "" if value is _NOT_GIVEN else f" (given {shown(value)})"
    close = difflib.get_close_matches(path, _known_paths(config), n=3)
    advice = f"did you mean {' or '.join(close)}?" if close else f"a path starts with one of {', '.join(_hints(type(config)))}"
    return SettingError(f"unknown setting {path!r}{given}; {advice}")


def _known_paths(config: Any) -> list[str]:
    """Every leaf of this config, and those of its unset optional parts (which setting one of them creates)."""
    leaves = paths(config)
    known = dict.fromkeys(leaves)
    for path, value in leaves.items():
        cls = _dataclass(_hint_at(tuple(path.split(".")), type(config)))
        if value is None and cls is not None:
            known.update(dict.fromkeys(_join(path, name) for name in _hints(cls)))
    return list(known)
