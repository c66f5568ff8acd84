"""Worlds as bytes (pickle) for the search's frontier, the objects every copy shares referred to, not copied.

A search keeps every world it has yet to expand; as bytes a world is about
ten kilobytes. Measured on one world of a few steps: about 240 µs to load
and 210 µs to store, against about 920 µs for `copy.deepcopy`. The shared
objects (`World.shared`: compiled tables, configurations, seams, the agents'
workflow and backoff) are pickled as a reference into a registry kept alive
while a search runs; their types are looked up in a dispatch table, so every
other object pickles at the C pickler's speed.

Frozen dataclasses with slots (events, effects, plans, the agent's
commands) pickle through `dataclasses`' own `__getstate__` and
`__setstate__`, which look the fields up again on every call; a world holds
dozens, so the hot ones (`FROZEN`) are rebuilt from a tuple of their values
by field names looked up once.
"""

from __future__ import annotations

import copyreg
import dataclasses
import io
import operator
import pickle
from typing import Any

from shiftchange.agent import Call, Perform, Wait
from shiftchange.checkers.history import Fault, Landed
from shiftchange.core import Event, Plan
from shiftchange.core.provider import Effect

from .network import InFlight
from .world import World

FROZEN = (Event, Plan, Effect, Landed, Fault, Call, Perform, Wait, InFlight)
"""Frozen dataclasses with slots a world holds many of."""

_SHARED: dict[int, Any] = {}
"""The objects every snapshot of the running searches refers to instead of holding: id -> object (kept alive here)."""


def _shared(ident: int) -> Any:
    return _SHARED[ident]


def _by_reference(obj: Any) -> Any:
    if id(obj) in _SHARED:
        return (_shared, (id(obj),))
    return obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in FROZEN}
_VALUES = {cls: operator.attrgetter(*names) for cls, names in _FIELD_NAMES.items()}


def _rebuilt(cls: type, values: tuple) -> Any:
    obj = object.__new__(cls)
    for name, value in zip(_FIELD_NAMES[cls], values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def _by_values(obj: Any) -> Any:
    return (_rebuilt, (type(obj), _VALUES[type(obj)](obj)))


class Snapshots:
    """Store and load worlds; `close` forgets the shared objects this one registered."""

    def __init__(self, shared: list[Any]) -> None:
        mine = [obj for obj in shared if obj is not None]
        self._added = [obj for obj in mine if id(obj) not in _SHARED]
        table = copyreg.dispatch_table.copy()
        table.update(dict.fromkeys(FROZEN, _by_values))
        for obj in mine:
            _SHARED[id(obj)] = obj
            table[type(obj)] = _by_reference
        self._table = table

    def dumps(self, world: World) -> bytes:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = self._table
        pickler.dump(world)
        return buffer.getvalue()

    def loads(self, data: bytes) -> World:
        return pickle.loads(data)

    def close(self) -> None:
        for obj in self._added:
            _SHARED.pop(id(obj), None)
