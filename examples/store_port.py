"""A minimal port of the store: the `Store` / `Transaction` protocol on Python dictionaries, written against the public interface only.

    shiftchange check-store examples.store_port:make_store    # from the repository root

It is what a port to another database starts from: every method the
protocol names, each doing the smallest correct thing, and the conformance
kit (`shiftchange.testing.check_store`) as its test. A real port replaces
the dictionaries with tables and keeps the rules: an update is guarded by the
version it read and refused for a terminal Attempt; only `WRITABLE` fields
may be written; Attempt numbers run 1..N; lists come in the order the
protocol promises (ids by code point, as Python's `sorted` orders str).

Why a copy of the tables per transaction: it is the simplest atomicity there
is. A transaction reads and writes its own copy, a commit swaps the copy in,
and a rollback drops it, so a transaction that raises leaves nothing behind
and the history has no gap. The price is a copy of every record per
transaction (records are shallow-copied; their strings are shared), which is
fine for an example and for tests, not for a million tasks: the memory store
(`shiftchange.core.MemoryStore`) keeps an undo log instead.

Two handles: `reopen(store)` opens a second handle on the same tables, as a
second connection would, for threads of one process; a lock taken for the
whole transaction makes the handles take turns, and a handle that cannot get
it within `lock_timeout_s` raises `StoreRetryable`, as a database's lock
timeout does. So the example passes the kit's two-handle checks too:

    shiftchange check-store examples.store_port:make_store --reopen examples.store_port:reopen

The tables live in one process's memory: a handle opened in another process
(the kit's check of a writer killed mid-transaction) holds a copy, which the
kit sees and reports as skipped. A port to a real database shares its data
between processes, and that check then runs.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shiftchange.core import (
    Attempt,
    Event,
    InputError,
    Intent,
    Leader,
    NotFound,
    Store,
    StoreConflict,
    StoreRetryable,
    Task,
    Transaction,
)
from shiftchange.core.store import WRITABLE
from shiftchange.spec import load_spec

__all__ = ["DictStore", "make_store", "reopen"]

TERMINAL = frozenset(load_spec().attempt.terminal_states)
"""The Attempt states no write may leave."""


@dataclass
class _Tables:
    """Everything the store holds, keyed by identity."""

    tasks: dict[str, Task] = field(default_factory=dict)
    attempts: dict[str, Attempt] = field(default_factory=dict)
    intents: dict[str, Intent] = field(default_factory=dict)
    leaders: dict[str, Leader] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)

    def copy(self) -> _Tables:
        """A copy a transaction may change freely: new dictionaries of copied records (Events and Leaders are frozen)."""
        return _Tables(
            {key: copy.copy(task) for key, task in self.tasks.items()},
            {key: copy.copy(attempt) for key, attempt in self.attempts.items()},
            {key: copy.copy(intent) for key, intent in self.intents.items()},
            dict(self.leaders),
            list(self.events),
        )


class DictTransaction(Transaction):
    """Reads and guarded writes on one transaction's copy of the tables."""

    def __init__(self, tables: _Tables) -> None:
        self.tables = tables

    # Reads.
    def task(self, task_id: str) -> Task | None:
        return self.tables.tasks.get(task_id)

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self.tables.attempts.get(attempt_id)

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return sorted((a for a in self.tables.attempts.values() if a.task_id == task_id), key=lambda a: a.number)

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        wanted = set(states)
        return sorted((a for a in self.tables.attempts.values() if a.state in wanted), key=lambda a: a.attempt_id)

    # `claimable` is the protocol's own: attempts_in, oldest first, the workspace filter. One handle needs no row locks.

    def intent(self, key: str) -> Intent | None:
        return self.tables.intents.get(key)

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return sorted((i for i in self.tables.intents.values() if i.attempt_id == attempt_id), key=lambda i: i.key)

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        wanted = set(states)
        return sorted((t for t in self.tables.tasks.values() if t.state in wanted), key=lambda t: t.task_id)

    def leader(self, name: str) -> Leader | None:
        return self.tables.leaders.get(name)

    # Writes.
    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self.tables.leaders[name] = Leader(name, holder, generation, expires_at)

    def insert_task(self, task: Task) -> None:
        self._insert(self.tables.tasks, task.task_id, task, "task")

    def insert_attempt(self, attempt: Attempt) -> None:
        if attempt.task_id not in self.tables.tasks:
            raise NotFound(f"unknown task {attempt.task_id!r}")
        if attempt.attempt_id not in self.tables.attempts and len(self.attempts_of(attempt.task_id)) != attempt.number - 1:
            raise StoreConflict(f"attempt numbers must run 1..N: task {attempt.task_id!r} cannot take number {attempt.number}")
        self._insert(self.tables.attempts, attempt.attempt_id, attempt, "attempt")

    def insert_intent(self, intent: Intent) -> None:
        if intent.task_id not in self.tables.tasks or intent.attempt_id not in self.tables.attempts:
            raise NotFound(f"intent {intent.key!r} names an unknown task or attempt")
        self._insert(self.tables.intents, intent.key, intent, "intent")

    def update_task(self, task: Task, **changes: Any) -> None:
        self._update(self.tables.tasks, task.task_id, task, changes)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        stored = self.tables.attempts.get(attempt.attempt_id)
        if stored is not None and stored.state in TERMINAL:
            raise StoreConflict(f"attempt {attempt.attempt_id!r} is terminal ({stored.state}) and immutable")
        self._update(self.tables.attempts, attempt.attempt_id, attempt, changes)

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self._update(self.tables.intents, intent.key, intent, changes)

    def append_event(self, **fields: Any) -> Event:
        event = Event(seq=len(self.tables.events) + 1, **fields)
        self.tables.events.append(event)
        return event

    @staticmethod
    def _insert(table: dict[str, Any], identity: str, record: Any, what: str) -> None:
        if identity in table:
            raise StoreConflict(f"{what} {identity!r} already exists")
        table[identity] = copy.copy(record)  # the caller's object stays the caller's

    @staticmethod
    def _update(table: dict[str, Any], identity: str, record: Any, changes: dict[str, Any]) -> None:
        """Write `changes` only if the stored version is the one `record` was read at; then bump it, stored and on `record`."""
        allowed = WRITABLE[type(record)]
        if not changes.keys() <= allowed:
            raise InputError(f"cannot write {sorted(changes.keys() - allowed)} of a {type(record).__name__}")
        stored = table.get(identity)
        if stored is None or stored.version != record.version:
            raise StoreConflict(f"{type(record).__name__} {identity!r} changed since it was read, or does not exist")
        for target in {id(stored): stored, id(record): record}.values():
            for name, value in changes.items():
                setattr(target, name, value)
            target.version += 1


@dataclass
class _Shared:
    """What every handle on one store shares: the committed tables, and the lock a transaction holds from start to commit."""

    tables: _Tables = field(default_factory=_Tables)
    lock: threading.Lock = field(default_factory=threading.Lock)


class DictStore(Store):
    """Records in dictionaries, one transaction at a time; a commit swaps in the transaction's copy of the tables."""

    races: ClassVar[bool] = False
    """Transactions never run side by side (every handle takes the one lock), so none loses a race."""

    lock_timeout_s: float = 1.0
    """How long a transaction waits for another handle's before it raises StoreRetryable."""

    def __init__(self, shared: _Shared | None = None) -> None:
        self._shared = _Shared() if shared is None else shared
        self._working: _Tables | None = None
        """The open transaction's copy of the tables (this handle holds the lock while it is open), else None."""
        self._working_thread: int | None = None
        """The thread that opened it: only its own reads see the copy; another thread waits for the commit."""

    @contextmanager
    def _locked(self) -> Iterator[_Shared]:
        if not self._shared.lock.acquire(timeout=self.lock_timeout_s):
            raise StoreRetryable(f"another handle held the store's lock for over {self.lock_timeout_s} s")
        try:
            yield self._shared
        finally:
            self._shared.lock.release()

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        if self._working is not None:
            raise RuntimeError("DictStore transactions do not nest")
        with self._locked() as shared:
            self._working, self._working_thread = shared.tables.copy(), threading.get_ident()
            try:
                yield DictTransaction(self._working)
                shared.tables = self._working  # the commit; an exception (any BaseException) skips it, which is the rollback
            finally:
                self._working = self._working_thread = None

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        """The history; inside this handle's open transaction, the one it sees (its own writes too), without waiting for itself."""
        working = self._working
        if working is not None and self._working_thread == threading.get_ident():
            return self._history(working, task_id, after_seq)
        with self._locked() as shared:
            return self._history(shared.tables, task_id, after_seq)

    @staticmethod
    def _history(tables: _Tables, task_id: str | None, after_seq: int) -> list[Event]:
        return [e for e in tables.events if e.seq > after_seq and (task_id is None or e.task_id == task_id)]


def make_store() -> DictStore:
    """A fresh, empty store: what the kit calls for every check."""
    return DictStore()


def reopen(store: DictStore) -> DictStore:
    """A second handle on the tables `store` holds (for the kit's two-handle checks: `--reopen examples.store_port:reopen`)."""
    return DictStore(store._shared)
