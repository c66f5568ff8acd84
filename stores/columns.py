"""How a record type maps to the columns of one table: the code every SQL store shares.

Columns are derived from the record dataclasses (`records.field_names` and
their type hints), so a field added to a record cannot be forgotten by a
store: a field of a type no store maps fails at import. Budget and Plan are
JSON text in every store. What differs between stores (the SQL type names,
the placeholder style, the statements) stays in each store's own module.
"""

from __future__ import annotations

import functools
import typing
from typing import Any, ClassVar

from shiftchange.core.errors import InputError
from shiftchange.core.records import Budget, Plan, budget_from_json, budget_to_json, field_names, plan_from_json, plan_to_json
from shiftchange.core.store import WRITABLE

__all__ = ["Columns", "check_changes"]


class Columns:
    """The columns of one record type, their kinds, which are optional, and the conversions each way.

    A subclass names its `SQL_TYPES` (Python type of a field -> column type)
    and may add `DECODERS` (SQLite reads booleans back as integers).
    """

    __slots__ = ("_decoders", "_encoders", "columns", "key", "kinds", "name", "optional", "record_type")

    SQL_TYPES: ClassVar[dict[type, str]] = {}
    ENCODERS: ClassVar[dict[type, Any]] = {Budget: budget_to_json, Plan: plan_to_json}
    # A read decodes the same JSON text over and over (a task's budget, an Attempt's plan), and the values are frozen:
    # one decoded value serves all.
    DECODERS: ClassVar[dict[type, Any]] = {
        Budget: functools.lru_cache(maxsize=1024)(budget_from_json),
        Plan: functools.lru_cache(maxsize=1024)(plan_from_json),
    }

    def __init__(self, name: str, record_type: type, key: str) -> None:
        self.name = name
        self.record_type = record_type
        self.key = key
        self.columns = field_names(record_type)
        self.kinds: dict[str, type] = {}
        self.optional: set[str] = set()
        hints = typing.get_type_hints(record_type)
        for column in self.columns:
            arguments = typing.get_args(hints[column])
            if type(None) in arguments:
                self.optional.add(column)
                (kind,) = (argument for argument in arguments if argument is not type(None))
            else:
                kind = hints[column]
            # A field of a type with no column mapping must fail at import, not corrupt rows later.
            assert kind in self.SQL_TYPES, f"{record_type.__name__}.{column}: no {type(self).__name__} column type for {kind!r}"
            self.kinds[column] = kind
        # Decoders are looked up once per table, not per column per row: reads sit on every contract.
        self._decoders = tuple(
            (index, self.DECODERS[self.kinds[column]]) for index, column in enumerate(self.columns) if self.kinds[column] in self.DECODERS
        )
        self._encoders = {column: self.ENCODERS[kind] for column, kind in self.kinds.items() if kind in self.ENCODERS}

    def encode(self, column: str, value: Any) -> Any:
        encoder = self._encoders.get(column)
        return encoder(value) if encoder is not None and value is not None else value

    def from_row(self, row: tuple) -> Any:
        if not self._decoders:
            return self.record_type(*row)
        values = list(row)
        for index, decoder in self._decoders:
            if values[index] is not None:
                values[index] = decoder(values[index])
        return self.record_type(*values)


def check_changes(table: Columns, changes: dict[str, Any]) -> None:
    """Only real, writable fields reach the SQL text; the identity and the version are the store's to manage."""
    if changes.keys() <= WRITABLE[table.record_type]:
        return
    unknown = sorted(name for name in changes if name not in table.kinds)
    if unknown:
        raise InputError(f"{table.record_type.__name__} has no field(s) {', '.join(map(repr, unknown))}")
    managed = sorted(name for name in changes if name not in WRITABLE[table.record_type])
    if managed:
        kind = table.record_type.__name__
        raise InputError(f"cannot change {', '.join(map(repr, managed))} of a {kind}: an identity, or the store's to manage")
