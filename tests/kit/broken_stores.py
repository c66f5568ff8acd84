"""Stores broken in exactly one contract each, to prove the kit's store checks can fail (and `shiftchange check-store` exits 1).

Each wraps a `MemoryStore` through the public `Store` and `Transaction`
interfaces and breaks one promise; everything else is the memory store's.
A factory of each is what `shiftchange check-store tests.kit.broken_stores:NAME`
imports.
"""

from __future__ import annotations

import copy
import itertools
import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from shiftchange.core import Attempt, Event, Intent, Leader, MemoryStore, Store, Task, Transaction
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

    def __init__(self, path: Path) -> None:
        super().__init__(path)
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
    """A factory of fresh SQLite files of `kind` in `directory`, and the reopen that opens the same file again."""
    numbers = itertools.count()
    return (lambda: kind(directory / f"store-{next(numbers)}.sqlite")), (lambda store: kind(store.path))  # type: ignore[attr-defined]


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
