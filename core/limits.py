"""What a store must hold: the longest id, key and text the core ever writes, and a port's narrower declaration.

Why limits are data: a real backend has column types and sizes (a
`VARCHAR(64)`, an item of 400 KB, a sort key of 1 KB). A port that silently
truncates, or fails on a long value half-way through a contract, breaks the
core in ways no short test value shows. So the limits are stated once, here:
`LIMITS` is what the core may write and every shipped store holds; a port
that holds less says so with `Store.limits`, the conformance kit checks that
it holds what it declares (values at exactly those limits, full Unicode,
counted in characters), and the core refuses anything longer with an
`InputError` before the store sees it, inside the contract's transaction, so
nothing changes.

The categories, by what a store does with the field:
- **ids** (`id_chars_max`): looked up and compared: attempt ids, workspaces,
  worker ids, identities and the other names. A task id leaves room for its
  Attempts' ids (the task id, `#` and the number), so a task id is at most
  `id_chars_max - ATTEMPT_SUFFIX_CHARS`.
- **keys** (`key_chars_max`): the operation key (`operation:owner:identity`),
  an intent's primary key and an event's `operation_key`.
- **texts** (`text_chars_max`): everything else a caller may send: objectives,
  results, requests, checkpoints, reasons, details.

Numbers are not limited here: every store keeps 64-bit integers and IEEE
doubles exactly (the kit checks times at today's epoch with sub-millisecond
parts, budgets to a millionth of a dollar, generations up to 2**62).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any

from .errors import InputError
from .records import Attempt, Event, Intent, Task

__all__ = ["ATTEMPT_SUFFIX_CHARS", "ID_CHARS_MIN", "KEY_CHARS_MIN", "LIMITS", "TEXT_CHARS_MIN", "StoreLimits", "check_fields", "limited"]

ATTEMPT_SUFFIX_CHARS = 20
"""Room an Attempt id takes beyond its task id (`#` and the number): a task id is at most `id_chars_max` less this."""
ID_CHARS_MIN = 64
"""The least `id_chars_max` a store may declare: task ids of 44 characters (a UUID and a prefix)."""
KEY_CHARS_MIN = 128
"""The least `key_chars_max` a store may declare: an operation, a task id and a content hash."""
TEXT_CHARS_MIN = 1_000
"""The least `text_chars_max` a store may declare: a reason, a checkpoint note, a short result."""


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """The longest values a store holds, in characters (code points, as Python's `len` counts them)."""

    id_chars_max: int = 220
    key_chars_max: int = 600
    text_chars_max: int = 100_000

    def __post_init__(self) -> None:
        least = {"id_chars_max": ID_CHARS_MIN, "key_chars_max": KEY_CHARS_MIN, "text_chars_max": TEXT_CHARS_MIN}
        for field in fields(self):
            value, smallest = getattr(self, field.name), least[field.name]
            if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
                raise InputError(f"StoreLimits.{field.name} must be a whole number of characters >= {smallest}, not {value!r}")

    @property
    def task_id_chars_max(self) -> int:
        return self.id_chars_max - ATTEMPT_SUFFIX_CHARS

    def narrower_than(self, other: StoreLimits) -> bool:
        """Whether any limit here is below `other`'s."""
        return any(getattr(self, f.name) < getattr(other, f.name) for f in fields(self))

    def beyond(self, other: StoreLimits) -> list[str]:
        """The limits here above `other`'s, by name: a port may declare narrower limits than LIMITS, never wider ones."""
        return [f.name for f in fields(self) if getattr(self, f.name) > getattr(other, f.name)]

    def limit_of(self, name: str) -> int:
        """The limit of a record field (or an event keyword) called `name`."""
        if name == "task_id":
            return self.task_id_chars_max
        if name in ID_FIELDS:
            return self.id_chars_max
        if name in KEY_FIELDS:
            return self.key_chars_max
        return self.text_chars_max


LIMITS = StoreLimits()
"""What the core may write, and what a store that declares nothing must hold."""

ID_FIELDS = frozenset({"attempt_id", "previous_attempt_id", "workspace", "worker_id", "identity", "actor", "kind", "state", "dependency"})
"""String fields a store looks up or compares (besides task_id): limited to `id_chars_max`."""
KEY_FIELDS = frozenset({"key", "operation_key"})
"""The operation key, wherever it is written: limited to `key_chars_max`."""


def _strings(values: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, str]]:
    for name, value in values:
        if isinstance(value, str):
            yield name, value
        elif hasattr(value, "__dataclass_fields__"):  # a Plan or a Budget held by a record: its texts are texts
            yield from (
                (f"{name}.{inner.name}", getattr(value, inner.name))
                for inner in fields(value)
                if isinstance(getattr(value, inner.name), str)
            )


def check_fields(kind: str, values: Iterable[tuple[str, Any]], limits: StoreLimits) -> None:
    """InputError naming the first string field of `values` longer than `limits` allow for it (a `kind` record's)."""
    for name, value in _strings(values):
        limit = limits.limit_of(name if "." not in name else "")  # a Plan's texts are texts
        if len(value) > limit:
            raise InputError(
                f"{kind}.{name} is {len(value)} characters, longer than this store holds ({limit}, its declared StoreLimits):"
                " nothing was written"
            )


def limited(tx: Any, limits: StoreLimits) -> Any:
    """`tx`, every write checked against `limits` first: how the core enforces a port's narrower declaration."""
    return _LimitedTransaction(tx, limits)


def _record_values(record: Any) -> Iterator[tuple[str, Any]]:
    return ((field.name, getattr(record, field.name)) for field in fields(record))


class _LimitedTransaction:
    """The store's transaction with each insert, update and append checked against the store's declared limits."""

    __slots__ = ("_limits", "_tx")

    def __init__(self, tx: Any, limits: StoreLimits) -> None:
        self._tx = tx
        self._limits = limits

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def insert_task(self, task: Task) -> None:
        check_fields("Task", _record_values(task), self._limits)
        self._tx.insert_task(task)

    def insert_attempt(self, attempt: Attempt) -> None:
        check_fields("Attempt", _record_values(attempt), self._limits)
        self._tx.insert_attempt(attempt)

    def insert_intent(self, intent: Intent) -> None:
        check_fields("Intent", _record_values(intent), self._limits)
        self._tx.insert_intent(intent)

    def update_task(self, task: Task, **changes: Any) -> None:
        check_fields("Task", changes.items(), self._limits)
        self._tx.update_task(task, **changes)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        check_fields("Attempt", changes.items(), self._limits)
        self._tx.update_attempt(attempt, **changes)

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        check_fields("Intent", changes.items(), self._limits)
        self._tx.update_intent(intent, **changes)

    def append_event(self, **values: Any) -> Event:
        check_fields("Event", values.items(), self._limits)
        return self._tx.append_event(**values)
