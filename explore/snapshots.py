"""Worlds as bytes for the search's frontier: pickles whose memo is primed with what every world of a search shares.

A search keeps every world it has yet to expand, as bytes (pickle: about
six kilobytes a world), and loads one for every step it takes. Three things
make that cheap:

- **A primed memo.** Both the pickler and the unpickler start from one
  memo that already holds the objects every world shares (`World.shared`:
  compiled tables, configurations, seams, the agents' workflow), every
  class and function a world's pickle names, and its common strings. Each
  of them is then two bytes of reference in a snapshot, loaded as the very
  same object: never copied, never looked up by name (`find_class` imports
  the module of every global it meets). The memo's indices are explicit in
  protocol 3 (`BINPUT`), which is why protocol 3 and not 5: protocol 4's
  `MEMOIZE` numbers entries by the unpickler's own count, which a primed
  unpickler does not have.
- **Frozen dataclasses by values.** Events, effects, plans and the agent's
  commands (`FROZEN`) would pickle through `dataclasses`' own
  `__setstate__`, which looks the fields up again on every call; they are
  rebuilt from a tuple of their values by field names looked up once.
- **The history by its checkers.** The history's table of bound methods per
  kind of entry (45 of them) is made again from its checkers, not stored.

Measured on 200 worlds of the benchmark configuration's search (CPU time,
best of five): store 433 -> 146 µs, load 478 -> 292 µs, 17.6 -> 5.8 kB.
A primed memo holds its objects by id, so they are kept alive as long as
the `Snapshots` that primed it; worlds are loaded only by the `Snapshots`
that stored them (or a process forked from it, which has the same objects).

Undoing a step in place instead of loading the world again (saving the
shallow contents of every mutable object a load makes, putting them back
after the step) was measured and dropped: listing and saving them cost
about 220 µs a load and putting them back about 120 µs a step, more than
the load it saves.
"""

from __future__ import annotations

import copyreg
import dataclasses
import io
import operator
import pickle
import struct
import types
from typing import Any

from shiftchange.agent import Call, Perform, Wait
from shiftchange.checkers.history import Fault, History, Landed
from shiftchange.core import Event, Plan
from shiftchange.core.provider import Effect

from .network import InFlight
from .world import World

FROZEN = (Event, Plan, Effect, Landed, Fault, Call, Perform, Wait, InFlight)
"""Frozen dataclasses with slots a world holds many of."""
PROTOCOL = 3

_FIELD_NAMES: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in FROZEN}
_VALUES = {cls: operator.attrgetter(*names) for cls, names in _FIELD_NAMES.items()}


def _rebuilt(cls: type, values: tuple) -> Any:
    obj = object.__new__(cls)
    for name, value in zip(_FIELD_NAMES[cls], values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def _by_values(obj: Any) -> Any:
    return (_rebuilt, (type(obj), _VALUES[type(obj)](obj)))


_HISTORY_FIELDS = frozenset(vars(History([], tail_max=0, digest=False)))


def _history(checkers: list[Any], count: int) -> History:
    history = History(checkers, tail_max=0, digest=False)
    history.count = count
    return history


def _by_checkers(history: History) -> Any:
    """A history as its checkers and count: its table of bound methods per kind of entry is made again, not stored.

    Only the explorer's own kind (no tail, no digest, no sink, no checker crashed) is; any other pickles as it is.
    """
    state = vars(history)
    plain = state.keys() == _HISTORY_FIELDS and not state["_failed"] and state["_sink"] is None and state["_digest"] is None
    if not plain or history.tail.maxlen != 0:
        return history.__reduce_ex__(PROTOCOL)
    return (_history, (history.checkers, history.count))


_TABLE = copyreg.dispatch_table.copy()
_TABLE.update(dict.fromkeys(FROZEN, _by_values))
_TABLE[History] = _by_checkers


class _Collector(pickle._Pickler):
    """The pure-Python pickler, watching every object it saves: the classes, functions and strings a world's pickle names."""

    def __init__(self, file: io.BytesIO, skip: set[int]) -> None:
        super().__init__(file, PROTOCOL)
        self.dispatch_table = _TABLE
        self.skip = skip
        self.named: dict[int, Any] = {}
        self.string_objects: dict[str, str] = {}

    def persistent_id(self, obj: Any) -> None:
        if id(obj) in self.skip:
            return "shared"  # stands in for it: nothing it refers to is walked
        if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
            self.named[id(obj)] = obj
        elif type(obj) is str:
            self.string_objects.setdefault(obj, obj)
        return None


def _primed_objects(world: World) -> list[Any]:
    """What every snapshot of this world's search refers to instead of holding: shared objects, then named ones, then strings."""
    shared = [obj for obj in world.shared if obj is not None]
    collector = _Collector(io.BytesIO(), {id(obj) for obj in shared})
    collector.dump(world)
    named = [obj for obj in (*FROZEN, _rebuilt, _history, *collector.named.values()) if id(obj) not in {id(s) for s in shared}]
    strings = list(collector.string_objects.values())
    unique: dict[int, Any] = {}
    for obj in (*shared, *named, *strings):
        unique.setdefault(id(obj), obj)
    return list(unique.values())


def _unpickler_memo(objects: list[Any]) -> Any:
    """An unpickler memo holding `objects` at indices 0..n-1: loaded from opcodes that fetch each by its persistent id.

    (Assigning a dict to `Unpickler.memo` loses it in CPython 3.11; copying another unpickler's memo proxy does not.)
    """
    ops = [b"\x80\x03"]
    for index in range(len(objects)):
        packed = struct.pack("<i", index)
        ops.append(b"J" + packed + b"Q" + b"r" + packed + b"0")  # BININT index, BINPERSID, LONG_BINPUT index, POP
    ops.append(b"N.")
    unpickler = pickle.Unpickler(io.BytesIO(b"".join(ops)))
    unpickler.persistent_load = objects.__getitem__
    unpickler.load()
    memo = unpickler.memo
    copied = memo.copy()
    assert len(copied) == len(objects) and all(copied[i] is obj for i, obj in enumerate(objects)), "the primed memo is wrong"
    return memo


class Snapshots:
    """Store and load the worlds of one search, every snapshot referring to the objects primed from its first world."""

    def __init__(self, world: World) -> None:
        self._objects = _primed_objects(world)
        """Kept alive while the snapshots are: the pickler's memo is keyed by their ids."""
        self.primed = len(self._objects)
        pickler = pickle.Pickler(io.BytesIO(), PROTOCOL)
        pickler.memo = {id(obj): (index, obj) for index, obj in enumerate(self._objects)}
        self._pickler_memo = pickler.memo
        self._unpickler_memo = _unpickler_memo(self._objects)

    def dumps(self, world: World) -> bytes:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, PROTOCOL)
        pickler.dispatch_table = _TABLE
        pickler.memo = self._pickler_memo
        pickler.dump(world)
        return buffer.getvalue()

    def loads(self, data: bytes) -> World:
        unpickler = pickle.Unpickler(io.BytesIO(data))
        unpickler.memo = self._unpickler_memo
        return unpickler.load()
