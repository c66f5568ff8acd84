"""What a setting is and what it may hold: its type read from the config class's annotations (a leaf, a group, an optional
part, a dict of parts), and its value converted by that type (a flag, a whole number, a number, a text, a tuple, a record
such as a fault or a fallback), typed or as command-line text; `format_value` writes the text that reads back to an equal
value. `lab.settings`, which sets and reads settings by their dotted paths, imports these."""

from __future__ import annotations

import dataclasses
import json
import re
import types
from collections.abc import Mapping
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from shiftchange.core import InputError
from shiftchange.core.config import shown

NONE_TEXT = "none"
"""How None is written, on the command line and in TOML."""


class SettingError(InputError):
    """A setting that names nothing, or a value its setting cannot take: one line naming the path and the value."""


def _reword(error: InputError, cls: type, path: str) -> str:
    return re.sub(rf"\b{cls.__name__}\.", f"{path}." if path else "", str(error))


# ------------------------------------------------------------------ values by their annotated type


def _convert(value: Any, hint: Any, path: str) -> Any:
    inner = _optional(hint)
    if inner is not None:
        return None if value is None or value == NONE_TEXT else _convert(value, inner, path)
    if get_origin(hint) is tuple:
        return _tuple(value, get_args(hint)[0], path)
    if _dataclass(hint) is not None:
        return _record(value, hint, path)
    return _SCALARS[hint](value, path)


def _flag(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SettingError(f"{path} must be true or false, not {shown(value)}")


def _whole(value: Any, path: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise SettingError(f"{path} must be a whole number, not {shown(value)}")


def _number(value: Any, path: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise SettingError(f"{path} must be a number, not {shown(value)}")


def _text(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    raise SettingError(f"{path} must be text, not {shown(value)}")


_SCALARS = {bool: _flag, int: _whole, float: _number, str: _text}


def _tuple(value: Any, item: Any, path: str) -> tuple[Any, ...]:
    if isinstance(value, str):
        value = _split(value, item, path)
    if not isinstance(value, list | tuple):
        raise SettingError(f"{path} must be a list, not {shown(value)}")
    return tuple(_convert(entry, item, f"{path}[{index}]") for index, entry in enumerate(value))


def _split(text: str, item: Any, path: str) -> list[Any]:
    """A list on the command line: names joined by commas, records with a text form by `;`, other records as a JSON array."""
    if not text.strip():
        return []
    if item is str:
        return [part.strip() for part in text.split(",")]
    if _has_text_form(item):
        return [part.strip() for part in text.split(";") if part.strip()]
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SettingError(f"{path} must be a JSON array of {item.__name__} objects, not {text!r} ({error})") from None


def _record(value: Any, cls: type, path: str) -> Any:
    """One record of a tuple (a FaultSpec, a Fallback): itself, its text form, or a mapping of its fields."""
    if isinstance(value, cls):
        return value
    try:
        if isinstance(value, str) and _has_text_form(cls):
            return cls.parse(value)  # type: ignore[attr-defined]
        if isinstance(value, Mapping):
            return cls(**_record_fields(value, cls, path))
    except InputError as error:
        message = _reword(error, cls, path)
        raise SettingError(message if path in message else f"{path}: {message}") from None
    raise SettingError(f"{path} must be a {cls.__name__} (a table of {_parts(cls)}), not {shown(value)}")


def _record_fields(value: Mapping[str, Any], cls: type, path: str) -> dict[str, Any]:
    hints = _hints(cls)
    unknown = [name for name in value if name not in hints]
    if unknown:
        raise SettingError(f"{path} has no field {unknown[0]!r}; a {cls.__name__} has {_parts(cls)}")
    missing = [item.name for item in dataclasses.fields(cls) if _required(item) and item.name not in value]
    if missing:
        raise SettingError(f"{path} needs {', '.join(missing)} (a {cls.__name__} has {_parts(cls)})")
    return {name: _convert(entry, hints[name], f"{path}.{name}") for name, entry in value.items()}


def _required(item: dataclasses.Field[Any]) -> bool:
    return item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING


def format_value(value: Any) -> str:
    """The text `apply` reads back as an equal value: floats by repr, lists joined, None as `none`."""
    if value is None:
        return NONE_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, tuple | list):
        if all(isinstance(item, str) for item in value):
            return ",".join(value)
        if all(_has_text_form(type(item)) for item in value):
            return "; ".join(str(item) for item in value)
        if all(_is_instance(item) for item in value):
            return json.dumps([dataclasses.asdict(item) for item in value])
    raise SettingError(f"{shown(value)} is not the value of one setting, so it has no text form")


def _has_text_form(cls: Any) -> bool:
    """A record type whose `str` is text its `parse` reads back (FaultSpec)."""
    return isinstance(cls, type) and callable(getattr(cls, "parse", None))


# ------------------------------------------------------------------ the shape of the config, from its annotations


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _optional(hint: Any) -> Any:
    """The X of `X | None`, or None when the hint does not admit None."""
    arguments = get_args(hint)
    if get_origin(hint) in (Union, types.UnionType) and len(arguments) == 2 and type(None) in arguments:
        return next(argument for argument in arguments if argument is not type(None))
    return None


def _dataclass(hint: Any) -> type | None:
    """The dataclass a hint names (or the X of `X | None`), else None."""
    hint = _optional(hint) or hint
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _is_group(hint: Any) -> bool:
    """A part of the tree that paths go into (a dataclass, an optional one, a dict of them), not a leaf."""
    return get_origin(hint) is dict or _dataclass(hint) is not None


def _child_hint(hint: Any, name: str) -> Any:
    if get_origin(hint) is dict:
        return get_args(hint)[1] if name else None
    cls = _dataclass(hint)
    return _hints(cls).get(name) if cls is not None else None


def _hint_at(segments: tuple[str, ...], root: type) -> Any:
    """The annotated type at a path from `root` (a driver's config class), or None when the path names no setting."""
    hint: Any = root
    for name in segments:
        hint = _child_hint(hint, name) if _is_group(hint) else None
        if hint is None:
            return None
    return hint


def _parts(hint: Any) -> str:
    cls = _dataclass(hint)
    return ", ".join(_hints(cls)) if cls is not None else "KEY.FIELD"


def _tree(value: Any) -> Any:
    """A config as nested dicts down to its leaves, which stay typed: what `_assign` edits and `_build` turns back into a config."""
    if _is_instance(value):
        return {item.name: _tree(getattr(value, item.name)) for item in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: _tree(entry) for key, entry in value.items()}
    return value


def _is_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _segments(path: str) -> tuple[str, ...]:
    if not isinstance(path, str):
        raise SettingError(f"a setting's path is text such as core.lease_ttl_s, not {shown(path)}")
    return tuple(path.split(".")) if path else ()


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
