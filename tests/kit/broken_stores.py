"""Stores broken in exactly one contract each, to prove the kit's store checks can fail (and `shiftchange check-store` exits 1).

Each wraps a `MemoryStore` through the public `Store` and `Transaction`
interfaces and breaks one promise; everything else is the memory store's.
A factory of each is what `shiftchange check-store tests.kit.broken_stores:NAME`
imports.
"""

from __future__ import annotations

import atexit
import copy
import itertools
import re
import shutil
import sqlite3
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path
from typing import Any

from shiftchange.core import (
    Attempt,
    Event,
    InputError,
    Intent,
    Leader,
    MemoryStore,
    Plan,
    Store,
    StoreError,
    StoreLimits,
    StoreRetryable,
    Task,
    Transaction,
)
from shiftchange.spec import load_spec
from shiftchange.stores import sqlite
from shiftchange.stores.sqlite import SQLiteStore

TERMINAL = frozenset(load_spec().attempt.terminal_states)
EVERY_STATE = frozenset(load_spec().attempt.states)
NON_TERMINAL = EVERY_STATE - TERMINAL


class WrappedTransaction(Transaction):
    """Every call goes to the memory store's transaction; a subclass breaks one of them."""

    def __init__(self, inner: Transaction) -> None:
        self.inner = inner

    def task(self, task_id: str) -> Task | None:
        return self.inner.task(task_id)

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self.inner.attempt(attempt_id)

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return self.inner.attempts_of(task_id)

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return self.inner.attempts_in(states)

    def intent(self, key: str) -> Intent | None:
        return self.inner.intent(key)

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return self.inner.intents_of(attempt_id)

    def insert_task(self, task: Task) -> None:
        self.inner.insert_task(task)

    def update_task(self, task: Task, **changes: Any) -> None:
        self.inner.update_task(task, **changes)

    def insert_attempt(self, attempt: Attempt) -> None:
        self.inner.insert_attempt(attempt)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self.inner.update_attempt(attempt, **changes)

    def insert_intent(self, intent: Intent) -> None:
        self.inner.insert_intent(intent)

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self.inner.update_intent(intent, **changes)

    def append_event(self, **fields: Any) -> Event:
        return self.inner.append_event(**fields)

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        return self.inner.claimable(states, limit, workspace)

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        return self.inner.tasks_in(states)

    def leader(self, name: str) -> Leader | None:
        return self.inner.leader(name)

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self.inner.put_leader(name, holder, generation, expires_at)


class WrappedStore(Store):
    """A memory store seen through the interface; `transaction_type` wraps each of its transactions."""

    transaction_type: type[WrappedTransaction] = WrappedTransaction

    def __init__(self, inner: MemoryStore | None = None) -> None:
        self.inner = MemoryStore() if inner is None else inner

    def transaction(self) -> Any:
        return _Opened(self.inner.transaction(), self.transaction_type)

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        return self.inner.events(task_id, after_seq)


class _Opened:
    """The memory store's transaction context, yielding the wrapped transaction."""

    def __init__(self, context: Any, wrap: type[WrappedTransaction]) -> None:
        self.context = context
        self.wrap = wrap

    def __enter__(self) -> WrappedTransaction:
        return self.wrap(self.context.__enter__())

    def __exit__(self, *exc: Any) -> Any:
        return self.context.__exit__(*exc)


class _CommitsAnyway(_Opened):
    def __exit__(self, *exc: Any) -> Any:
        return self.context.__exit__(None, None, None)


class Unrollbacked(WrappedStore):
    """A transaction that raises keeps its writes: it commits on the way out, whatever happened."""

    def transaction(self) -> Any:
        return _CommitsAnyway(self.inner.transaction(), self.transaction_type)


class Reordering(WrappedStore):
    """The history comes back newest first."""

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        return list(reversed(self.inner.events(task_id, after_seq)))


class _ForgetsCheckpoints(WrappedTransaction):
    def insert_attempt(self, attempt: Attempt) -> None:
        self.inner.insert_attempt(replace(attempt, checkpoint=None))

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        changes.pop("checkpoint", None)
        self.inner.update_attempt(attempt, **changes)


class Lossy(WrappedStore):
    """An Attempt's checkpoint is never stored (a column the port forgot)."""

    transaction_type = _ForgetsCheckpoints


class _Unguarded(WrappedTransaction):
    """Writes go to the stored record whatever version the caller read: last writer wins."""

    def update_task(self, task: Task, **changes: Any) -> None:
        live = self.inner.task(task.task_id)
        task.version = live.version if live is not None else task.version
        self.inner.update_task(task, **changes)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        live = self.inner.attempt(attempt.attempt_id)
        attempt.version = live.version if live is not None else attempt.version
        self.inner.update_attempt(attempt, **changes)

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        live = self.inner.intent(intent.key)
        intent.version = live.version if live is not None else intent.version
        self.inner.update_intent(intent, **changes)


class Unguarded(WrappedStore):
    """No optimistic guard: a write made from a stale read overwrites the newer one."""

    transaction_type = _Unguarded


class _RewritesTerminal(WrappedTransaction):
    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        live = self.inner.attempt(attempt.attempt_id)
        if live is None or live.state not in TERMINAL:
            self.inner.update_attempt(attempt, **changes)
            return
        for name, value in changes.items():
            setattr(live, name, value)
        live.version += 1
        attempt.version = live.version


class MutableTerminal(WrappedStore):
    """A terminal Attempt can be written like any other: evidence can be rewritten."""

    transaction_type = _RewritesTerminal


class _Nested:
    def __init__(self, outer: WrappedTransaction) -> None:
        self.outer = outer

    def __enter__(self) -> WrappedTransaction:
        return self.outer

    def __exit__(self, *exc: Any) -> None:
        return None


class Nesting(WrappedStore):
    """A transaction opened inside another silently joins it instead of being refused."""

    def __init__(self) -> None:
        super().__init__()
        self.open: WrappedTransaction | None = None

    def transaction(self) -> Any:
        if self.open is not None:
            return _Nested(self.open)
        return _Tracked(self, self.inner.transaction())


class _Tracked(_Opened):
    def __init__(self, store: Nesting, context: Any) -> None:
        super().__init__(context, WrappedTransaction)
        self.store = store

    def __enter__(self) -> WrappedTransaction:
        self.store.open = super().__enter__()
        return self.store.open

    def __exit__(self, *exc: Any) -> Any:
        self.store.open = None
        return super().__exit__(*exc)


class Leaky(WrappedStore):
    """Reads outside transactions hand out the live records, so a caller's edit changes the store."""

    def get_task(self, task_id: str) -> Task | None:
        with self.transaction() as tx:
            return tx.task(task_id)

    def get_attempt(self, attempt_id: str) -> Attempt | None:
        with self.transaction() as tx:
            return tx.attempt(attempt_id)


# ---- the claim queue


class _WorkspaceBlind(WrappedTransaction):
    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        return self.inner.claimable(states, limit)


class WorkspaceBlind(WrappedStore):
    """The claim queue ignores the workspace it is asked for: a worker is offered another workspace's Attempts."""

    transaction_type = _WorkspaceBlind


class _OffersLeased(WrappedTransaction):
    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        live = [a for a in self.inner.attempts_in(NON_TERMINAL) if workspace is None or self.task(a.task_id).workspace == workspace]
        return sorted(live, key=lambda a: (a.created_at, a.attempt_id))[:limit]


class OffersLeased(WrappedStore):
    """The claim queue offers every unfinished Attempt, whatever states were asked: leased and queued ones too."""

    transaction_type = _OffersLeased


class _NewestFirst(WrappedTransaction):
    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        every = self.inner.claimable(states, 1_000_000, workspace)
        return sorted(every, key=lambda a: (a.created_at, a.attempt_id), reverse=True)[:limit]


class NewestFirst(WrappedStore):
    """The claim queue is newest first (ORDER BY created_at DESC): the longest-waiting Attempt starves."""

    transaction_type = _NewestFirst


class _Limitless(WrappedTransaction):
    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        return self.inner.claimable(states, 1_000_000, workspace)


class Limitless(WrappedStore):
    """The claim queue ignores its limit: a claimer is handed (and, on a server, locks) the whole queue."""

    transaction_type = _Limitless


class _TasksSorted(WrappedTransaction):
    def tasks(self, task_ids: Iterable[str]) -> list[Task | None]:
        found = [self.inner.task(task_id) for task_id in dict.fromkeys(task_ids)]
        return sorted((task for task in found if task is not None), key=lambda task: task.task_id)


class TasksSorted(WrappedStore):
    """tasks(ids) answers the tasks it found in id order (as a careless `WHERE task_id = ANY(...)` would): missing ids and order lost."""

    transaction_type = _TasksSorted


class _InsertedStayAsInserted(WrappedTransaction):
    """An update of a task inserted by the same transaction is lost (as a store folding updates into a pending INSERT might)."""

    def __init__(self, inner: Transaction) -> None:
        super().__init__(inner)
        self.inserted: set[str] = set()

    def insert_task(self, task: Task) -> None:
        self.inner.insert_task(task)
        self.inserted.add(task.task_id)

    def update_task(self, task: Task, **changes: Any) -> None:
        if task.task_id in self.inserted:
            return
        self.inner.update_task(task, **changes)


class InsertedStayAsInserted(WrappedStore):
    """A task inserted and changed in one transaction is stored as inserted."""

    transaction_type = _InsertedStayAsInserted


# ---- tasks_in and the leader leases


class _StaleTaskIndex(WrappedTransaction):
    def insert_task(self, task: Task) -> None:
        self.inner.insert_task(task)
        self.index[task.task_id] = task.state  # type: ignore[attr-defined]

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        wanted = set(states)
        return [self.inner.task(task_id) for task_id, state in sorted(self.index.items()) if state in wanted]  # type: ignore[attr-defined,misc]


class StaleTaskIndex(WrappedStore):
    """tasks_in answers from an index of states written at insert and never updated: it misses every state change."""

    def __init__(self) -> None:
        super().__init__()
        self.index: dict[str, str] = {}

    def transaction(self) -> Any:
        return _Indexed(self.inner.transaction(), _StaleTaskIndex, self.index)


class _Indexed(_Opened):
    def __init__(self, context: Any, wrap: type[WrappedTransaction], index: dict[str, str]) -> None:
        super().__init__(context, wrap)
        self.index = index

    def __enter__(self) -> WrappedTransaction:
        tx = super().__enter__()
        tx.index = self.index  # type: ignore[attr-defined]
        return tx


class _LeaderNeverOverwritten(WrappedTransaction):
    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        if self.inner.leader(name) is None:  # INSERT ... ON CONFLICT DO NOTHING where DO UPDATE was meant
            self.inner.put_leader(name, holder, generation, expires_at)


class LeaderNeverOverwritten(WrappedStore):
    """put_leader writes a lease only if none exists: renewals and takeovers are silently lost."""

    transaction_type = _LeaderNeverOverwritten


class _LeaderInWholeSeconds(WrappedTransaction):
    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self.inner.put_leader(name, holder, generation, int(expires_at))  # an INTEGER column where REAL was meant


class LeaderInWholeSeconds(WrappedStore):
    """A leader lease's expiry is kept in whole seconds: a held lease looks expired early, and another process takes it."""

    transaction_type = _LeaderInWholeSeconds


# ---- updates


class _DropsOnUpdate(WrappedTransaction):
    record_type: type = Task
    field = "tokens"

    def _without(self, record: Any, changes: dict[str, Any]) -> dict[str, Any]:
        if isinstance(record, self.record_type):
            changes.pop(self.field, None)
        return changes

    def update_task(self, task: Task, **changes: Any) -> None:
        self.inner.update_task(task, **self._without(task, changes))

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self.inner.update_attempt(attempt, **self._without(attempt, changes))

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self.inner.update_intent(intent, **self._without(intent, changes))


def drops_on_update(record_type: type, field: str) -> type[WrappedStore]:
    """A store whose updates never write `field` of a `record_type` (a column the port's UPDATE forgot; its INSERT has it)."""
    transaction = type(f"_Drops{record_type.__name__}{field.title()}", (_DropsOnUpdate,), {"record_type": record_type, "field": field})
    doc = f"An update never writes {record_type.__name__}.{field}: an insert keeps it, a later change is lost."
    return type(f"Drops{record_type.__name__}{field.title()}", (WrappedStore,), {"transaction_type": transaction, "__doc__": doc})


make_drops_task_tokens_on_update = drops_on_update(Task, "tokens")
make_drops_task_budget_on_update = drops_on_update(Task, "budget")
make_drops_attempt_cancel_requested_on_update = drops_on_update(Attempt, "cancel_requested")
make_drops_attempt_plan_on_update = drops_on_update(Attempt, "plan")
make_drops_intent_outcome_on_update = drops_on_update(Intent, "outcome")


# ---- ids and their order


def _prefixed(records: Iterable[Any], field: str, prefix: str) -> list[Any]:
    return [record for record in records if getattr(record, field).startswith(prefix)]


class _PrefixMatching(WrappedTransaction):
    """Lookups by `LIKE id || '%'` where `= id` was meant."""

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return _prefixed(self.inner.attempts_in(EVERY_STATE), "task_id", task_id)

    def intents_of(self, attempt_id: str) -> list[Intent]:
        intents = (self.inner.intent(key) for key in sorted(self.store._intents))  # type: ignore[attr-defined]
        return _prefixed(intents, "attempt_id", attempt_id)


class PrefixMatching(WrappedStore):
    """Ids are matched by prefix (task-1 finds task-10's Attempts, intents and history too)."""

    def transaction(self) -> Any:
        return _WithStore(self.inner.transaction(), _PrefixMatching, self.inner)

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        every = self.inner.events(None, after_seq)
        return every if task_id is None else _prefixed(every, "task_id", task_id)


class _WithStore(_Opened):
    def __init__(self, context: Any, wrap: type[WrappedTransaction], store: MemoryStore) -> None:
        super().__init__(context, wrap)
        self.store = store

    def __enter__(self) -> WrappedTransaction:
        tx = super().__enter__()
        tx.store = self.store  # type: ignore[attr-defined]
        return tx


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


class _Utf16Ordered(WrappedTransaction):
    """Every list sorted by UTF-16 code units (as Java or JavaScript compare strings), attempts_of by the number's text."""

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return sorted(self.inner.attempts_in(states), key=lambda a: _utf16(a.attempt_id))

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        every = self.inner.claimable(states, 1_000_000, workspace)
        return sorted(every, key=lambda a: (a.created_at, _utf16(a.attempt_id)))[:limit]

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        return sorted(self.inner.tasks_in(states), key=lambda t: _utf16(t.task_id))

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return sorted(self.inner.intents_of(attempt_id), key=lambda i: _utf16(i.key))

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return sorted(self.inner.attempts_of(task_id), key=lambda a: str(a.number))


class Utf16Ordered(WrappedStore):
    """Ids sort by UTF-16 code units, not code points (an astral character before U+FFFF), and numbers as text (10 before 2)."""

    transaction_type = _Utf16Ordered


# ---- factories that do not make fresh stores

_ONE_STORE = MemoryStore()
"""What `make_same_store_twice` returns on every call."""
_SHARED_DATA = MemoryStore()
"""The data every store `make_sharing_data` makes holds."""


def make_same_store_twice() -> Store:
    """The same store object on every call (a factory that caches its store)."""
    return _ONE_STORE


def make_sharing_data() -> Store:
    """A new store object on every call, all over one memory store (a factory that opens the same file or schema every time)."""
    return WrappedStore(_SHARED_DATA)


def make_unrollbacked() -> Store:
    return Unrollbacked()


def make_reordering() -> Store:
    return Reordering()


def make_lossy() -> Store:
    return Lossy()


def make_unguarded() -> Store:
    return Unguarded()


def make_mutable_terminal() -> Store:
    return MutableTerminal()


def make_nesting() -> Store:
    return Nesting()


def make_leaky() -> Store:
    return Leaky()


def make_workspace_blind() -> Store:
    return WorkspaceBlind()


def make_offers_leased() -> Store:
    return OffersLeased()


def make_newest_first() -> Store:
    return NewestFirst()


def make_limitless() -> Store:
    return Limitless()


def make_tasks_sorted() -> Store:
    return TasksSorted()


def make_inserted_stay_as_inserted() -> Store:
    return InsertedStayAsInserted()


def make_stale_task_index() -> Store:
    return StaleTaskIndex()


def make_leader_never_overwritten() -> Store:
    return LeaderNeverOverwritten()


def make_leader_in_whole_seconds() -> Store:
    return LeaderInWholeSeconds()


def make_prefix_matching() -> Store:
    return PrefixMatching()


def make_utf16_ordered() -> Store:
    return Utf16Ordered()


def make_wrapped() -> Store:
    """The memory store through the wrappers, broken in nothing: it passes, so each failure above is its own break."""
    return WrappedStore()


def make_nothing() -> object:
    """Not a store at all: `check-store` refuses it as bad input."""
    return object()


def make_raising() -> Store:
    raise OSError("the database server refused the connection")


BROKEN = {
    "make_unrollbacked": ("exception_rolls_back_every_write_of_the_transaction", "conflict_mid_transaction_rolls_back_earlier_writes"),
    "make_reordering": ("events_are_in_seq_order_and_filter_by_task_and_seq", "long_history_keeps_append_order_and_numbering"),
    "make_lossy": ("attempt_round_trips_every_field", "awkward_text_round_trips_exactly"),
    "make_unguarded": ("stale_version_write_conflicts_and_changes_nothing",),
    "make_mutable_terminal": ("terminal_attempt_is_immutable",),
    "make_nesting": ("transactions_do_not_nest",),
    "make_leaky": ("reads_outside_transactions_are_copies",),
    "make_workspace_blind": (
        "claimable_honours_the_workspace_filter",
        "claim_next_takes_the_oldest_admitted_attempt_of_its_workspace",
        "ids_that_differ_by_a_prefix_case_or_normalisation_never_alias",
    ),
    "make_offers_leased": ("claimable_offers_only_attempts_in_the_asked_states", "claim_next_never_hands_one_attempt_to_two_claimers"),
    "make_newest_first": (
        "claimable_is_oldest_first_by_created_at_then_attempt_id",
        "claim_next_takes_the_oldest_admitted_attempt_of_its_workspace",
        "claim_next_never_hands_one_attempt_to_two_claimers",
    ),
    "make_limitless": ("claimable_honours_its_limit",),
    "make_tasks_sorted": ("tasks_reads_many_as_task_reads_each",),
    "make_inserted_stay_as_inserted": ("records_inserted_and_changed_in_one_transaction_are_stored_as_last_changed",),
    "make_stale_task_index": ("tasks_in_answers_from_current_state_in_task_id_order",),
    "make_leader_never_overwritten": (
        "leader_lease_round_trips_and_put_leader_overwrites",
        "a_held_leader_lease_cannot_be_taken_until_it_expires",
    ),
    "make_leader_in_whole_seconds": (
        "leader_lease_round_trips_and_put_leader_overwrites",
        "a_held_leader_lease_cannot_be_taken_until_it_expires",
    ),
    "make_drops_task_tokens_on_update": ("every_writable_field_round_trips_after_an_update",),
    "make_drops_task_budget_on_update": ("every_writable_field_round_trips_after_an_update",),
    "make_drops_attempt_cancel_requested_on_update": ("every_writable_field_round_trips_after_an_update",),
    "make_drops_attempt_plan_on_update": ("every_writable_field_round_trips_after_an_update",),
    "make_drops_intent_outcome_on_update": ("every_writable_field_round_trips_after_an_update",),
    "make_prefix_matching": ("ids_that_differ_by_a_prefix_case_or_normalisation_never_alias",),
    "make_utf16_ordered": ("every_promised_order_is_code_point_order",),
    "make_same_store_twice": ("factory_makes_a_fresh_empty_store_each_call",),
    "make_sharing_data": ("factory_makes_a_fresh_empty_store_each_call",),
}
"""Each broken factory, and checks of the store contract that must fail for it."""


# ---- two handles on one store: what `check_store(make, reopen=...)` must reject


class _DeferringConnection:
    """An sqlite3 connection that begins every transaction DEFERRED where IMMEDIATE was written."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, statement: str, *parameters: Any) -> sqlite3.Cursor:
        return self._connection.execute("BEGIN DEFERRED" if statement == sqlite.BEGIN else statement, *parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


class DeferredSQLiteStore(SQLiteStore):
    """SQLite with `BEGIN` (deferred) for `BEGIN IMMEDIATE`: a transaction reads before it holds the write lock, so a writer
    that finds another's write transaction open fails at once with "database is locked" instead of waiting its turn."""

    def __init__(self, path: Path, *, busy_timeout_s: float = sqlite.BUSY_TIMEOUT_S) -> None:
        super().__init__(path, busy_timeout_s=busy_timeout_s)
        self._connection = _DeferringConnection(self._connection)  # type: ignore[assignment]


class _Serialized(_Opened):
    """The memory store's transaction, taken in turns by every handle (a lock for the write lock)."""

    def __init__(self, store: DirtyReads) -> None:
        self.store = store
        self.wrap = store.transaction_type

    def __enter__(self) -> WrappedTransaction:
        if not self.store.lock.acquire(timeout=LOCK_WAIT_S):
            raise RuntimeError(f"no turn at the shared memory store within {LOCK_WAIT_S} s")
        self.context = self.store.inner.transaction()
        try:
            return super().__enter__()
        except BaseException:
            self.store.lock.release()
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            self.store.lock.release()


class DirtyReads(WrappedStore):
    """Handles on one memory store: writers take turns, but reads outside a transaction see its uncommitted writes (READ UNCOMMITTED)."""

    def __init__(self, inner: MemoryStore | None = None, lock: Any = None) -> None:
        super().__init__(inner)
        self.lock = threading.RLock() if lock is None else lock

    def transaction(self) -> Any:
        return _Serialized(self)

    def get_task(self, task_id: str) -> Task | None:
        return copy.copy(self.inner._tasks.get(task_id))  # the live record, mid-transaction or not

    def reopen(self) -> DirtyReads:
        return DirtyReads(self.inner, self.lock)


LOCK_WAIT_S = 5.0
"""How long a DirtyReads handle waits for its turn before it gives up (only a broken check would make it wait so long)."""


def sqlite_files(directory: Path, kind: type[SQLiteStore] = SQLiteStore) -> tuple[Callable[[], Store], Callable[[Store], Store]]:
    """A factory of fresh SQLite files of `kind` in `directory`, and the reopen that opens the same file again.

    Their busy timeout is `KIT_BUSY_TIMEOUT_S`, as `check-store sqlite:///DIR` opens them: the kit holds a lock past it.
    """
    numbers = itertools.count()

    def make() -> Store:
        return kind(directory / f"store-{next(numbers)}.sqlite", busy_timeout_s=KIT_BUSY_TIMEOUT_S)

    def reopen(store: Store) -> Store:
        return kind(store.path, busy_timeout_s=KIT_BUSY_TIMEOUT_S)  # type: ignore[attr-defined]

    return make, reopen


KIT_BUSY_TIMEOUT_S = 2.0
"""The busy timeout of the SQLite files the two-handle tests make (the command's own for `sqlite:///DIR`)."""


def deferred_sqlite(directory: Path) -> tuple[Callable[[], Store], Callable[[Store], Store]]:
    return sqlite_files(directory, DeferredSQLiteStore)


def dirty_reads(directory: Path) -> tuple[Callable[[], Store], Callable[[Store], Store]]:
    return DirtyReads, lambda store: store.reopen()  # type: ignore[attr-defined]


def reopen_elsewhere(directory: Path) -> tuple[Callable[[], Store], Callable[[Store], Store]]:
    """A reopen that opens a new, empty file instead of the store's own: the second handle shares nothing."""
    make, _ = sqlite_files(directory)
    return make, lambda store: make()


SHARED_BROKEN = {
    "deferred_sqlite": ("a_writer_waits_for_the_other_handles_write_transaction",),
    "dirty_reads": ("uncommitted_writes_are_invisible_to_the_other_handle",),
    "reopen_elsewhere": ("second_handle_shares_the_first_handles_store",),
}
"""Each broken pair of (factory, reopen), built by the function of that name from a directory, and the two-handle checks that must fail."""


# ==== the ports of the kit's checks of the clock, values at their limits, scale and age, atomicity, two handles and durability
#
# One per check: each breaks the one property a real port plausibly breaks (a column type, a pagination token forgotten,
# a TTL, a rollback in `except Exception:`, a per-process cache), and the kit must reject it naming that check.


class _Clock:
    """A clock anchored on the wall clock once, then advancing by the monotonic clock; `shape` bends each reading."""

    def __init__(self, shape: Callable[[float, int], float] = lambda now, n: now, offset_s: float = 0.0) -> None:
        self.anchor = time.time() - time.monotonic() + offset_s
        self.shape = shape
        self.readings = 0

    def now(self) -> float:
        self.readings += 1
        return self.shape(self.anchor + time.monotonic(), self.readings)


class WithClock(WrappedStore):
    """A memory store that has a clock of its own (as a server store does): the wall clock, unless a subclass bends it."""

    def __init__(self) -> None:
        super().__init__()
        self._clock = self.make_clock()

    def make_clock(self) -> _Clock:
        return _Clock()

    def clock(self) -> Any:
        return self._clock


class ClockInMilliseconds(WithClock):
    """The store's clock reads milliseconds since the epoch (a server's `now()` in ms where seconds were meant)."""

    def make_clock(self) -> _Clock:
        return _Clock(lambda now, n: now * 1000.0)


class FrozenClock(WithClock):
    """The store's clock answers the time it was first read, for ever (a server time cached and never read again)."""

    def make_clock(self) -> _Clock:
        first = time.time()
        return _Clock(lambda now, n: first)


class ClockSteppingBack(WithClock):
    """Every other reading of the store's clock is a quarter second behind the last (a wall clock stepped back by NTP)."""

    def make_clock(self) -> _Clock:
        return _Clock(lambda now, n: now - (0.25 if n % 2 else 0.0))


def make_with_clock() -> Store:
    """The memory store with the wall clock as its own: broken in nothing, it passes the clock checks."""
    return WithClock()


def make_clock_in_milliseconds() -> Store:
    return ClockInMilliseconds()


def make_frozen_clock() -> Store:
    return FrozenClock()


def make_clock_stepping_back() -> Store:
    return ClockSteppingBack()


# ---- values at their limits


def _texts(record: Any, change: Callable[[str, str], str]) -> Any:
    """A copy of `record` with `change(name, value)` applied to each of its string fields (and its Plan's)."""
    values = {}
    for field in dataclass_fields(record):
        value = getattr(record, field.name)
        if isinstance(value, str):
            values[field.name] = change(field.name, value)
        elif isinstance(value, Plan):
            values[field.name] = replace(value, **{f.name: change(f.name, getattr(value, f.name)) for f in dataclass_fields(value)})
    return replace(record, **values)


class _Mangling(WrappedTransaction):
    """Every string field written (insert, update, event) goes through `change`, as a column type would change it."""

    def change(self, name: str, value: str) -> str:
        return value

    def _changes(self, changes: dict[str, Any]) -> dict[str, Any]:
        return {name: self.change(name, value) if isinstance(value, str) else value for name, value in changes.items()}

    def insert_task(self, task: Task) -> None:
        self.inner.insert_task(_texts(task, self.change))

    def insert_attempt(self, attempt: Attempt) -> None:
        self.inner.insert_attempt(_texts(attempt, self.change))

    def insert_intent(self, intent: Intent) -> None:
        self.inner.insert_intent(_texts(intent, self.change))

    def update_task(self, task: Task, **changes: Any) -> None:
        self.inner.update_task(task, **self._changes(changes))

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self.inner.update_attempt(attempt, **self._changes(changes))

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self.inner.update_intent(intent, **self._changes(changes))

    def append_event(self, **fields: Any) -> Event:
        return self.inner.append_event(**self._changes(fields))

    def task(self, task_id: str) -> Task | None:
        return self.inner.task(self.change("task_id", task_id))

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self.inner.attempt(self.change("attempt_id", attempt_id))


IDS = frozenset({"task_id", "attempt_id", "previous_attempt_id", "workspace", "worker_id"})


class _TruncatingIds(_Mangling):
    def change(self, name: str, value: str) -> str:
        return value[:64] if name in IDS else value


class TruncatingIds(WrappedStore):
    """Ids are cut to 64 characters (a VARCHAR(64) in a non-strict SQL mode), with no limit declared."""

    transaction_type = _TruncatingIds


class _TruncatingKeys(_Mangling):
    def change(self, name: str, value: str) -> str:
        return value[:255] if name in ("key", "operation_key") else value

    def intent(self, key: str) -> Intent | None:
        return self.inner.intent(key[:255])


class TruncatingKeys(WrappedStore):
    """Operation keys are cut to 255 characters (a VARCHAR(255) primary key), with no limit declared."""

    transaction_type = _TruncatingKeys


class _TruncatingIdsAt50(_Mangling):
    def change(self, name: str, value: str) -> str:
        return value[:50] if name in IDS else value


class OverDeclared(WrappedStore):
    """Declares ids of up to 64 characters (StoreLimits) but holds 50: the kit writes ids at the declared limit."""

    limits = StoreLimits(id_chars_max=64)
    transaction_type = _TruncatingIdsAt50


class WiderThanTheCore(WrappedStore):
    """Declares texts of a million characters, more than the core ever writes: a declaration the kit cannot check up to."""

    limits = StoreLimits(text_chars_max=1_000_000)


NARROW = StoreLimits(id_chars_max=64, text_chars_max=4_000)


class _RefusesPastItsLimits(_Mangling):
    """A backend in strict mode: a value longer than its column is an InputError, nothing written."""

    def change(self, name: str, value: str) -> str:
        if len(value) > NARROW.limit_of(name):
            raise InputError(f"{name} of {len(value)} characters is longer than its column ({NARROW.limit_of(name)})")
        return value

    def task(self, task_id: str) -> Task | None:
        return self.inner.task(task_id)

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self.inner.attempt(attempt_id)


class NarrowDeclared(WrappedStore):
    """Declares ids of 64 characters and texts of 4,000, holds exactly that and refuses longer: broken in nothing, it passes,
    and the core keeps under it."""

    limits = NARROW
    transaction_type = _RefusesPastItsLimits


class _ByteCountedTexts(_Mangling):
    def change(self, name: str, value: str) -> str:
        if len(value) <= 25_000:  # at most 100,000 bytes whatever its characters
            return value
        encoded = value.encode()
        return value if len(encoded) <= 100_000 else encoded[:100_000].decode(errors="ignore")


class ByteCountedTexts(WrappedStore):
    """Texts are cut at 100,000 UTF-8 bytes where the limit is 100,000 characters (a byte-sized column or item)."""

    transaction_type = _ByteCountedTexts


def _rounded(record: Any, digits: int) -> Any:
    return replace(
        record,
        **{
            f.name: round(v, digits)
            for f in dataclass_fields(record)
            if f.name.endswith("_at") and isinstance(v := getattr(record, f.name), float)
        },
    )


class _MillisecondTimes(WrappedTransaction):
    def insert_task(self, task: Task) -> None:
        self.inner.insert_task(_rounded(task, 3))

    def insert_attempt(self, attempt: Attempt) -> None:
        self.inner.insert_attempt(_rounded(attempt, 3))

    def insert_intent(self, intent: Intent) -> None:
        self.inner.insert_intent(_rounded(intent, 3))

    def append_event(self, **fields: Any) -> Event:
        return self.inner.append_event(
            **{k: round(v, 3) if k in ("at", "expires_at") and isinstance(v, float) else v for k, v in fields.items()}
        )


class MillisecondTimes(WrappedStore):
    """Times are kept to the millisecond (a TIMESTAMP(3) column): a lease's expiry loses its last digits."""

    transaction_type = _MillisecondTimes


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


class _Float32Budgets(WrappedTransaction):
    def insert_task(self, task: Task) -> None:
        budget = replace(task.budget, cost_max_usd=_float32(task.budget.cost_max_usd), elapsed_max_s=_float32(task.budget.elapsed_max_s))
        self.inner.insert_task(replace(task, budget=budget))


class Float32Budgets(WrappedStore):
    """A budget's dollars and seconds are kept as 32-bit floats (MySQL's FLOAT): 12.345678 USD comes back 12.345677852630615."""

    transaction_type = _Float32Budgets


def _like(pattern: str) -> re.Pattern[str]:
    """SQL LIKE without an ESCAPE clause: % any run, _ any one character."""
    return re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern), re.DOTALL)


class _LikeLookups(WrappedTransaction):
    """Lookups by key are `WHERE key LIKE ?` where `= ?` was meant: the first stored match in key order."""

    def _first(self, table: dict[str, Any], wanted: str) -> Any:
        pattern = _like(wanted)
        return next((table[key] for key in sorted(table) if pattern.fullmatch(key)), None)

    def task(self, task_id: str) -> Task | None:
        return self._first(self.store._tasks, task_id)  # type: ignore[attr-defined]

    def intent(self, key: str) -> Intent | None:
        return self._first(self.store._intents, key)  # type: ignore[attr-defined]


class LikeLookups(WrappedStore):
    """Tasks and intents are looked up with LIKE: an id holding _ or % finds another record first."""

    def transaction(self) -> Any:
        return _WithStore(self.inner.transaction(), _LikeLookups, self.inner)


def make_truncating_ids() -> Store:
    return TruncatingIds()


def make_truncating_keys() -> Store:
    return TruncatingKeys()


def make_over_declared() -> Store:
    return OverDeclared()


def make_wider_than_the_core() -> Store:
    return WiderThanTheCore()


def make_narrow_declared() -> Store:
    return NarrowDeclared()


def make_byte_counted_texts() -> Store:
    return ByteCountedTexts()


def make_millisecond_times() -> Store:
    return MillisecondTimes()


def make_float32_budgets() -> Store:
    return Float32Budgets()


def make_like_lookups() -> Store:
    return LikeLookups()


# ---- scale and age

PAGE = 1_000
"""The page size of the paginated backend the first-page store stands for."""


class _FirstPageOnly(WrappedTransaction):
    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return self.inner.attempts_in(states)[:PAGE]

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        return self.inner.claimable(states, limit, workspace)[:PAGE]

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return self.inner.attempts_of(task_id)[:PAGE]

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return self.inner.intents_of(attempt_id)[:PAGE]

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        return self.inner.tasks_in(states)[:PAGE]


class FirstPageOnly(WrappedStore):
    """Every scan and the history answer their first page of 1,000 rows (a continuation token never followed)."""

    transaction_type = _FirstPageOnly

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        return self.inner.events(task_id, after_seq)[:PAGE]


TTL_HORIZON_S = 5 * 365 * 86_400.0
"""How far in the past an expiry may be and still be acted on (DynamoDB's TTL ignores older ones): small test times never expire."""


def _expired(at: float | None) -> bool:
    now = time.time()
    return at is not None and now - TTL_HORIZON_S < at < now


class _ExpiringRows(WrappedTransaction):
    def attempt(self, attempt_id: str) -> Attempt | None:
        found = self.inner.attempt(attempt_id)
        return None if found is None or _expired(found.expires_at) else found

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return [a for a in self.inner.attempts_in(states) if not _expired(a.expires_at)]

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return [a for a in self.inner.attempts_of(task_id) if not _expired(a.expires_at)]

    def leader(self, name: str) -> Leader | None:
        found = self.inner.leader(name)
        return None if found is None or _expired(found.expires_at) else found


class ExpiringRows(WrappedStore):
    """An Attempt or a leader lease vanishes once its expiry has passed on the wall clock (a TTL attribute on the lease's expiry)."""

    transaction_type = _ExpiringRows


def make_first_page_only() -> Store:
    return FirstPageOnly()


def make_expiring_rows() -> Store:
    return ExpiringRows()


# ---- atomicity


class _CommitsOnBaseException(_Opened):
    def __exit__(self, kind: Any, error: Any, trace: Any) -> Any:
        if kind is not None and not issubclass(kind, Exception):
            return self.context.__exit__(None, None, None)  # the rollback sits in `except Exception:`; a commit in `finally:`
        return self.context.__exit__(kind, error, trace)


class CommitsOnInterrupt(WrappedStore):
    """A transaction left by a BaseException (Ctrl-C, a cancellation) commits: the rollback was written for Exception only."""

    def transaction(self) -> Any:
        return _CommitsOnBaseException(self.inner.transaction(), self.transaction_type)


class _Batching(WrappedTransaction):
    def __init__(self, inner: Transaction) -> None:
        super().__init__(inner)
        self.opened: _Flushing | None = None
        self.writes = 0

    def _wrote(self) -> None:
        self.writes += 1
        if self.writes % BATCH_WRITES == 0 and self.opened is not None:
            self.inner = self.opened.flush()

    def insert_task(self, task: Task) -> None:
        super().insert_task(task)
        self._wrote()

    def insert_attempt(self, attempt: Attempt) -> None:
        super().insert_attempt(attempt)
        self._wrote()

    def append_event(self, **fields: Any) -> Event:
        event = super().append_event(**fields)
        self._wrote()
        return event


class _Flushing(_Opened):
    def __init__(self, store: FlushesEveryHundred) -> None:
        super().__init__(store.inner.transaction(), _Batching)
        self.store = store

    def __enter__(self) -> WrappedTransaction:
        tx = super().__enter__()
        tx.opened = self  # type: ignore[attr-defined]
        return tx

    def flush(self) -> Transaction:
        """Commit what is written so far and go on in a new transaction (a backend that takes 100 items per transaction)."""
        self.context.__exit__(None, None, None)
        self.context = self.store.inner.transaction()
        return self.context.__enter__()


BATCH_WRITES = 100
"""The most writes the batching store sends in one transaction of its backend."""


class FlushesEveryHundred(WrappedStore):
    """Writes go to the backend in transactions of 100 (a DynamoDB-style item cap): a rollback leaves every full batch behind."""

    def transaction(self) -> Any:
        return _Flushing(self)


def make_commits_on_interrupt() -> Store:
    return CommitsOnInterrupt()


def make_flushes_every_hundred() -> Store:
    return FlushesEveryHundred()


# ---- durability


class UnsyncedSQLite(SQLiteStore):
    """SQLite tuned for speed with `synchronous=OFF` after opening: a commit is not synced, and a power cut may lose or corrupt it."""

    def _configure(self, connection: sqlite3.Connection) -> None:
        super()._configure(connection)
        connection.execute("PRAGMA synchronous=OFF")


_FILES: list[Path] = []


def _directory() -> Path:
    """A directory of this process's for the SQLite files the module-level factories make (removed when the process ends)."""
    if not _FILES:
        _FILES.append(Path(tempfile.mkdtemp(prefix="broken-stores-")))
        atexit.register(shutil.rmtree, _FILES[0], True)
    return _FILES[0]


_NUMBERS = itertools.count()


def make_unsynced_sqlite() -> Store:
    return UnsyncedSQLite(_directory() / f"unsynced-{next(_NUMBERS)}.sqlite")


# ---- two handles: memory stores whose handles share one MemoryStore and take turns at it


class SharedMemory(WrappedStore):
    """Handles on one memory store that take turns at it under one lock (a correct two-handle store, for threads of one process).

    A handle that cannot get the lock within `lock_timeout_s` raises StoreRetryable, as a database's lock timeout does.
    `reopen()` opens another handle on the same data; a subclass breaks one rule between handles.
    """

    lock_timeout_s: float = 1.0

    def __init__(self, inner: MemoryStore | None = None, lock: Any = None) -> None:
        super().__init__(inner)
        self.lock = threading.RLock() if lock is None else lock

    def acquire(self) -> None:
        if not self.lock.acquire(timeout=self.lock_timeout_s):
            raise StoreRetryable(f"another handle held the shared memory store for over {self.lock_timeout_s} s")

    def transaction(self) -> Any:
        return _Turns(self)

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        self.acquire()
        try:
            return self.inner.events(task_id, after_seq)
        finally:
            self.lock.release()

    def reopen(self) -> SharedMemory:
        return type(self)(self.inner, self.lock)

    def committed(self, tx: WrappedTransaction) -> None:
        """Told of each transaction of this handle that committed (a subclass keeps its per-handle cache with it)."""


class _Turns(_Opened):
    def __init__(self, store: SharedMemory) -> None:
        self.store = store
        self.wrap = store.transaction_type

    def __enter__(self) -> WrappedTransaction:
        self.store.acquire()
        try:
            self.context = self.store.inner.transaction()
            self.tx = super().__enter__()
            self.tx.handle = self.store  # type: ignore[attr-defined]
            return self.tx
        except BaseException:
            self.store.lock.release()
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            result = super().__exit__(*exc)
            if exc[0] is None:
                self.store.committed(self.tx)
            return result
        finally:
            self.store.lock.release()


def reopen(store: Any) -> Store:
    """The second handle of every two-handle store of this module: `--reopen tests.kit.broken_stores:reopen`."""
    if hasattr(store, "reopen"):
        return store.reopen()
    from tests.kit.journal_store import reopen as reopen_journal

    return reopen_journal(store)


def make_journal() -> Store:
    """A store several processes share through one journal file (tests/kit/journal_store.py): broken in nothing."""
    from tests.kit.journal_store import JournalStore

    return JournalStore(_directory() / f"journal-{next(_NUMBERS)}.log")


def make_journal_keeping_dead_writes() -> Store:
    """The journal store that replays the logged writes of a writer killed mid-transaction as if they had committed."""
    from tests.kit.journal_store import JournalStore

    return JournalStore(_directory() / f"journal-{next(_NUMBERS)}.log", keeps_unfinished=True)


class ClockPerHandle(SharedMemory):
    """Each handle reads the wall clock of its own machine, the second half a second ahead: processes disagree on every lease."""

    def __init__(self, inner: MemoryStore | None = None, lock: Any = None, offset_s: float = 0.0) -> None:
        super().__init__(inner, lock)
        self._clock = _Clock(offset_s=offset_s)

    def clock(self) -> Any:
        return self._clock

    def reopen(self) -> SharedMemory:
        return ClockPerHandle(self.inner, self.lock, offset_s=0.5)


class _CachedLeaders(WrappedTransaction):
    def leader(self, name: str) -> Leader | None:
        pending = getattr(self, "pending", {})
        if name in pending:  # this transaction's own write
            return pending[name]
        cache = self.handle.leaders  # type: ignore[attr-defined]
        if name not in cache:
            cache[name] = self.inner.leader(name)
        return cache[name]

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self.inner.put_leader(name, holder, generation, expires_at)
        self.pending = {**getattr(self, "pending", {}), name: Leader(name, holder, generation, expires_at)}


class LeadersPerHandle(SharedMemory):
    """Each handle caches the leader leases it has read or written and never reads them again: another process's takeover is missed."""

    transaction_type = _CachedLeaders

    def __init__(self, inner: MemoryStore | None = None, lock: Any = None) -> None:
        super().__init__(inner, lock)
        self.leaders: dict[str, Leader | None] = {}

    def committed(self, tx: WrappedTransaction) -> None:
        self.leaders.update(getattr(tx, "pending", {}))


class _IndexedScans(WrappedTransaction):
    """attempts_in and tasks_in from this handle's own index of states, fed by its own committed writes."""

    def _note(self, kind: str, identity: str, state: str) -> None:
        self.pending = [*getattr(self, "pending", []), (kind, identity, state)]

    def insert_task(self, task: Task) -> None:
        super().insert_task(task)
        self._note("task", task.task_id, task.state)

    def update_task(self, task: Task, **changes: Any) -> None:
        super().update_task(task, **changes)
        self._note("task", task.task_id, task.state)

    def insert_attempt(self, attempt: Attempt) -> None:
        super().insert_attempt(attempt)
        self._note("attempt", attempt.attempt_id, attempt.state)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        super().update_attempt(attempt, **changes)
        self._note("attempt", attempt.attempt_id, attempt.state)

    def _indexed(self, kind: str, states: Iterable[str]) -> list[str]:
        wanted = set(states)
        index = {**self.handle.index[kind], **{i: s for k, i, s in getattr(self, "pending", []) if k == kind}}  # type: ignore[attr-defined]
        return sorted(identity for identity, state in index.items() if state in wanted)

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return [self.inner.attempt(attempt_id) for attempt_id in self._indexed("attempt", states)]  # type: ignore[misc]

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        return [self.inner.task(task_id) for task_id in self._indexed("task", states)]  # type: ignore[misc]

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        return Transaction.claimable(self, states, limit, workspace)


class ScanIndexPerHandle(SharedMemory):
    """Each handle answers attempts_in and tasks_in (and so its claim queue) from an index of states kept in its own memory."""

    transaction_type = _IndexedScans

    def __init__(self, inner: MemoryStore | None = None, lock: Any = None) -> None:
        super().__init__(inner, lock)
        self.index: dict[str, dict[str, str]] = {"task": {}, "attempt": {}}

    def committed(self, tx: WrappedTransaction) -> None:
        for kind, identity, state in getattr(tx, "pending", []):
            self.index[kind][identity] = state


class _QueuedHere(_IndexedScans):
    """Every scan reads the store, but the claim's one-round-trip read answers from this handle's own queue."""

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return self.inner.attempts_in(states)

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        return self.inner.tasks_in(states)

    def claim_candidate(self, states: Iterable[str], workspace: str | None = None) -> tuple[Attempt, Task | None, list[Attempt]] | None:
        mine = [a for a in (self.inner.attempt(i) for i in self._indexed("attempt", states)) if a is not None]
        mine = [a for a in mine if workspace is None or self.inner.task(a.task_id).workspace == workspace]
        if not mine:
            return None
        oldest = min(mine, key=lambda a: (a.created_at, a.attempt_id))
        return oldest, self.inner.task(oldest.task_id), self.inner.attempts_of(oldest.task_id)


class ClaimQueuePerHandle(ScanIndexPerHandle):
    """The claim (a one-round-trip `claim_candidate`) reads a queue kept in each process's memory, fed by its own writes: every
    scan is right, but a claimer on another handle starves."""

    transaction_type = _QueuedHere


class LockWaitUnbounded(SharedMemory):
    """States a lock timeout of 1 s but waits for the lock without bound (a timeout option never passed to the driver)."""

    def acquire(self) -> None:
        self.lock.acquire()


class BusyNotRetryable(SQLiteStore):
    """SQLite whose busy timeout ends in a plain StoreError (not retryable): a contract that only waited is reported as broken."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, busy_timeout_s=2.0)

    def _error(self, error: sqlite3.Error) -> Any:
        if getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY":
            return StoreError(f"store {self.path} is busy")
        return super()._error(error)

    def reopen(self) -> BusyNotRetryable:
        return BusyNotRetryable(self.path)


class HistoryWaitsForItself(SharedMemory):
    """Its lock is not reentrant: store.events() inside the handle's own transaction waits for that transaction, then gives up."""

    def __init__(self, inner: MemoryStore | None = None, lock: Any = None) -> None:
        super().__init__(inner, threading.Lock() if lock is None else lock)


def make_history_waits_for_itself() -> Store:
    return HistoryWaitsForItself()


def make_shared_memory() -> Store:
    """Two-handle memory stores broken in nothing: with `reopen` they pass every two-handle check the kit runs in one process."""
    return SharedMemory()


def make_clock_per_handle() -> Store:
    return ClockPerHandle()


def make_leaders_per_handle() -> Store:
    return LeadersPerHandle()


def make_scan_index_per_handle() -> Store:
    return ScanIndexPerHandle()


def make_claim_queue_per_handle() -> Store:
    return ClaimQueuePerHandle()


def make_lock_wait_unbounded() -> Store:
    return LockWaitUnbounded()


def make_busy_not_retryable() -> Store:
    return BusyNotRetryable(_directory() / f"busy-{next(_NUMBERS)}.sqlite")


KIT_PORTS: dict[str, tuple[str, bool]] = {
    "make_clock_in_milliseconds": ("store_clock_reads_seconds_on_the_shared_epoch", False),
    "make_frozen_clock": ("store_clock_advances_with_real_time", False),
    "make_clock_stepping_back": ("store_clock_never_goes_backwards", False),
    "make_history_waits_for_itself": ("the_history_can_be_read_inside_an_open_transaction", False),
    "make_truncating_ids": ("ids_at_their_limit_round_trip_and_look_up_in_full_unicode", False),
    "make_truncating_keys": ("ids_at_their_limit_round_trip_and_look_up_in_full_unicode", False),
    "make_over_declared": ("ids_at_their_limit_round_trip_and_look_up_in_full_unicode", False),
    "make_wider_than_the_core": ("declared_limits_are_enforced_by_the_core", False),
    "make_byte_counted_texts": ("texts_at_their_limit_round_trip_counted_in_characters", False),
    "make_millisecond_times": ("times_keep_sub_millisecond_parts_at_todays_epoch", False),
    "make_float32_budgets": ("every_field_round_trips_at_non_default_values", False),
    "make_like_lookups": ("keys_with_pattern_metacharacters_match_only_themselves", False),
    "make_first_page_only": ("every_scan_and_history_read_is_whole_and_in_order_past_a_page", False),
    "make_expiring_rows": ("rows_live_on_after_real_time_passes_their_times", False),
    "make_commits_on_interrupt": ("an_interrupt_at_any_write_leaves_nothing_behind", False),
    "make_flushes_every_hundred": ("hundreds_of_writes_commit_whole_or_not_at_all", False),
    "make_unsynced_sqlite": ("a_durable_store_runs_with_settings_a_commit_survives_a_crash_under", False),
    "make_clock_per_handle": ("both_handles_read_the_same_store_clock", True),
    "make_leaders_per_handle": ("leader_leases_are_one_across_handles", True),
    "make_scan_index_per_handle": ("every_scan_sees_the_other_handles_commits", True),
    "make_claim_queue_per_handle": ("concurrent_claimers_on_two_handles_both_make_progress", True),
    "make_lock_wait_unbounded": ("a_writer_blocked_past_the_lock_timeout_gets_a_retryable_error_in_time", True),
    "make_busy_not_retryable": ("a_writer_blocked_past_the_lock_timeout_gets_a_retryable_error_in_time", True),
    "make_journal_keeping_dead_writes": ("a_writer_killed_mid_transaction_leaves_nothing_visible", True),
}
"""The ports of the kit's checks of the clock, limits, scale, atomicity, two handles and durability, one per check: each
factory, the check it must fail, and whether it is checked through two handles (`--reopen tests.kit.broken_stores:reopen`).
The command line must reject each (tests/kit/test_kit_ports.py)."""

UNBROKEN_PORTS: dict[str, bool] = {
    "make_with_clock": False,
    "make_narrow_declared": False,
    "make_shared_memory": True,
    "make_journal": True,
}
"""The same wrappers broken in nothing (a clock of its own, narrower limits declared, two handles in one process, a journal
several processes share): each passes the kit."""
