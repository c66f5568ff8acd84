"""Stores broken in exactly one contract each, to prove the kit's store checks can fail (and `shiftchange check-store` exits 1).

Each wraps a `MemoryStore` through the public `Store` and `Transaction`
interfaces and breaks one promise; everything else is the memory store's.
A factory of each is what `shiftchange check-store tests.kit.broken_stores:NAME`
imports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from shiftchange.core import Attempt, Event, Intent, MemoryStore, Store, Task, Transaction
from shiftchange.spec import load_spec

TERMINAL = frozenset(load_spec().attempt.terminal_states)


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


class WrappedStore(Store):
    """A memory store seen through the interface; `transaction_type` wraps each of its transactions."""

    transaction_type: type[WrappedTransaction] = WrappedTransaction

    def __init__(self) -> None:
        self.inner = MemoryStore()

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
}
"""Each broken factory, and checks of the store contract that must fail for it."""
