"""The storage boundary: one narrow transactional interface, and the in-memory store.

Why a transaction of guarded record writes, not a method per SQL statement:
every contract (claim, renew, complete, cancel, reconcile, the reaper,
dispatch, retry) is written once, in the core's contract modules, and runs
inside exactly one `store.transaction()`. The store's job is narrow: hand out
records, and make each write conditional on the version it read (`UPDATE ...
WHERE version = ?`), refusing any write to a terminal Attempt. A contract
therefore cannot half-happen and cannot overwrite a change it did not see, on
any store.

Prior art and alternatives: procrastinate keeps one named SQL statement per
operation with the guard in its WHERE clause; that puts the contract logic in
SQL, once per backend, which is what we avoid here. A PostgreSQL store fits
this interface as it is: `transaction()` is a database transaction,
`attempt()` may take `FOR UPDATE`, and `claimable()` may use
`FOR UPDATE SKIP LOCKED`, without changing any caller.

`MemoryStore` is a real implementation of the same interface (fast, for the
simulator and unit tests) and passes the same contract suite as SQLite. It
keeps live records and an undo log, so a transaction that raises leaves
nothing behind.
"""

from __future__ import annotations

import copy
import functools
import heapq
import inspect
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from .errors import InputError, NotFound, StoreConflict, StoreError
from .limits import LIMITS, StoreLimits
from .records import Attempt, Event, Intent, Leader, Task, field_names, new_event
from .states import ATTEMPT_TERMINAL

_EVENT_ORDER = field_names(Event)[1:]
"""Every field of an Event but the sequence number the store assigns, in declaration order."""

WRITABLE = {
    Task: frozenset(field_names(Task)) - {"task_id", "version"},
    Attempt: frozenset(field_names(Attempt)) - {"attempt_id", "task_id", "number", "version"},
    Intent: frozenset(field_names(Intent)) - {"key", "task_id", "version"},
}
"""The fields an update may change, per record type: never an identity field nor the version the store itself bumps.
Every store refuses any other name with InputError (the SQLite store too), so the stores answer a bad write alike."""
_ATTEMPT_WRITABLE = WRITABLE[Attempt]
_POP_EVENT, _UNSEQ = ("pop_event",), ("unseq",)
"""Undo entries that carry nothing but their kind: one value each, not one per event."""


@functools.lru_cache(maxsize=256)
def _reader(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """Reads `names` of a record as one tuple (the values an undo restores); contracts write few distinct sets of fields."""
    if not names:
        return lambda record: ()
    if len(names) == 1:  # attrgetter of one name returns the value itself, not a tuple of one
        one = operator.attrgetter(names[0])
        return lambda record: (one(record),)
    return operator.attrgetter(*names)


class Transaction(ABC):
    """Record access inside one atomic transaction. Reads may return live records: do not mutate them, write through `update_*`."""

    # Reads.
    @abstractmethod
    def task(self, task_id: str) -> Task | None: ...

    def tasks(self, task_ids: Iterable[str]) -> list[Task | None]:
        """The tasks of `task_ids`, in their order (None where there is none): what `task` gives for each, read as it reads.

        A bulk intake asks for a whole batch at once; a store may answer in
        one round trip (locking the rows in task-id order), this default asks
        `task` for each.
        """
        return [self.task(task_id) for task_id in task_ids]

    @abstractmethod
    def attempt(self, attempt_id: str) -> Attempt | None: ...

    @abstractmethod
    def attempts_of(self, task_id: str) -> list[Attempt]:
        """Every Attempt of a task, by number."""

    @abstractmethod
    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        """Every Attempt currently in one of `states` (the reaper's scan), in attempt-id order."""

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        """Up to `limit` Attempts in one of `states`, oldest first (by created_at, then attempt id): the claim queue.

        With `workspace`, only Attempts of tasks in that workspace (a worker
        serves one). A store that serializes its transactions answers from
        `attempts_in`. A server store locks the rows it returns and skips rows
        other transactions hold (`FOR UPDATE SKIP LOCKED`), so concurrent
        claimers each get different Attempts instead of queueing behind the same one.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InputError(f"limit must be an integer >= 0, not {limit!r}")
        found = self._unordered_in(states)
        if workspace is not None:
            found = [attempt for attempt in found if getattr(self.task(attempt.task_id), "workspace", None) == workspace]
        # sorted(...)[:limit] without sorting the whole queue: a claim (limit 1) is one pass, not n log n.
        return heapq.nsmallest(limit, found, key=lambda a: (a.created_at, a.attempt_id))

    def _unordered_in(self, states: Iterable[str]) -> list[Attempt]:
        """`attempts_in(states)` in any order: what `claimable` orders itself. A store may skip the id sort here."""
        return self.attempts_in(states)

    def claim_candidate(self, states: Iterable[str], workspace: str | None = None) -> tuple[Attempt, Task | None, list[Attempt]] | None:
        """The claim queue's oldest Attempt (`claimable(states, 1, workspace)`), its task and the task's Attempts, or None.

        Read as `claimable`, `task` and `attempts_of` read them, in that order
        (each locked, on a server store), which is how a claim reads. A store
        may answer in one round trip; this default makes the three reads.
        """
        for attempt in self.claimable(states, 1, workspace):
            return attempt, self.task(attempt.task_id), self.attempts_of(attempt.task_id)
        return None

    @abstractmethod
    def intent(self, key: str) -> Intent | None: ...

    @abstractmethod
    def intents_of(self, attempt_id: str) -> list[Intent]:
        """The intents last granted to this Attempt, by key."""

    # Guarded writes: each raises StoreConflict if the record changed since it was read.
    @abstractmethod
    def insert_task(self, task: Task) -> None: ...

    @abstractmethod
    def update_task(self, task: Task, **changes: Any) -> None:
        """Apply `changes` if the stored version equals `task.version`; bumps the version on both."""

    @abstractmethod
    def insert_attempt(self, attempt: Attempt) -> None:
        """Append an Attempt; its (task_id, number) must be new."""

    @abstractmethod
    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        """Apply `changes` if the version matches and the stored Attempt is not terminal."""

    @abstractmethod
    def insert_intent(self, intent: Intent) -> None: ...

    @abstractmethod
    def update_intent(self, intent: Intent, **changes: Any) -> None: ...

    @abstractmethod
    def append_event(self, **fields: Any) -> Event:
        """Append one history entry; the store assigns its sequence number."""

    # What processes sharing a store need besides the contracts (the runtime's control plane). Not abstract: a port
    # the runtime does not run on need not have them, and says so when asked.
    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        """Every Task currently in one of `states`, in task-id order; an unlocked read (the control plane's scan)."""
        raise StoreError(f"{type(self).__name__} cannot list tasks by state")

    def leader(self, name: str) -> Leader | None:
        """The named leader lease, if anyone ever took it; a server store locks its row until the transaction ends."""
        raise StoreError(f"{type(self).__name__} keeps no leader leases")

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        """Write the named leader lease (the caller read it in this transaction and decided)."""
        raise StoreError(f"{type(self).__name__} keeps no leader leases")


@dataclass(frozen=True, slots=True)
class Durability:
    """What a store says about surviving a crash: its engine and the settings it runs with, as the engine names them."""

    engine: str
    settings: dict[str, str]


class Store(ABC):
    """A durable home for Tasks, Attempts, intents and the history."""

    numbers_on_append: ClassVar[bool] = True
    """Whether `append_event` returns the number the event will have in the history. A store that numbers its history
    after commit (PostgreSQL: see `shiftchange.stores.postgres`) returns seq 0 there, and its readers see every committed
    event numbered 1..N in commit order all the same, no gap ever filled later (the kit checks both)."""

    races: ClassVar[bool] = True
    """Whether transactions may run side by side and lose a race (StoreRetryable), so contracts must be ready to run again.
    True unless a store says otherwise: a port that serializes every transaction (memory, SQLite) sets False."""

    limits: StoreLimits = LIMITS
    """The longest ids, keys and texts this store holds (`shiftchange.core.limits`). A port that holds less declares its
    own, never wider ones; the core then refuses anything longer with InputError before it is written."""

    lock_timeout_s: float | None = None
    """The longest a transaction waits for a lock another handle holds before it raises StoreRetryable. A store several
    processes share states it (the kit holds a lock longer and checks); None: one handle, nothing to wait for."""

    clock_epoch_offset_s: float = 0.0
    """How far ahead of Unix time the store's own clock (`clock()`) reads, in seconds: 0 for a clock on the Unix epoch."""

    @abstractmethod
    def transaction(self) -> Any:
        """A context manager yielding a `Transaction`; commits on success, rolls back on any exception."""

    @abstractmethod
    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        """The history, in order; optionally one task's, optionally after a sequence number."""

    def close(self) -> None:  # noqa: B027 - a hook with a sensible default, not an abstract method
        """Release resources; the memory store has none."""

    def clock(self) -> Any | None:
        """The store's own clock, when it has one every process sharing it reads alike (a server's), else None.

        A deployment whose processes run on several machines judges leases by
        this clock, not by each machine's: pass it to the Orchestrator. Its
        `now()` inside this thread's open transaction is the server's time
        read in that transaction; outside one, the server's time as last read
        plus the local monotonic time since. None (memory, SQLite: one
        machine) means the caller's clock is the time.
        """
        return None

    def durability(self) -> Durability | None:
        """The settings this store runs with that decide whether a commit survives a crash, read from the store itself.

        None (the default, the memory store) means the store does not say it
        is durable. The kit judges the settings of the engines it knows
        (`Durability.engine` "sqlite" or "postgresql") and reports the rest as
        taken on the store's word.
        """
        return None

    # Reads outside contracts return copies, so callers cannot change the store by accident. A shallow copy is a
    # whole copy: a record's fields are strings, numbers, booleans and frozen values (Budget, Plan).
    def get_task(self, task_id: str) -> Task | None:
        with self.transaction() as tx:
            return copy.copy(tx.task(task_id))

    def get_attempt(self, attempt_id: str) -> Attempt | None:
        with self.transaction() as tx:
            return copy.copy(tx.attempt(attempt_id))

    def get_attempts(self, task_id: str) -> list[Attempt]:
        with self.transaction() as tx:
            return [copy.copy(attempt) for attempt in tx.attempts_of(task_id)]

    def get_intents(self, attempt_id: str) -> list[Intent]:
        with self.transaction() as tx:
            return [copy.copy(intent) for intent in tx.intents_of(attempt_id)]

    def get_intent(self, key: str) -> Intent | None:
        with self.transaction() as tx:
            return copy.copy(tx.intent(key))

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryTransaction(Transaction):
    """The memory store's transaction: live records, an undo log, and listeners told of events only on commit.

    `immutable_states` are the Attempt states no write may leave (the
    terminal ones): the guard every store keeps. A subclass that empties it
    is a store broken in exactly that way (the simulator's conflated-task-attempt).
    """

    __slots__ = ("_appended", "_store", "_undo")

    immutable_states: ClassVar[frozenset[str]] = ATTEMPT_TERMINAL

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._undo: list[tuple] = []
        self._appended: list[Event] = []

    # A plain class, not @contextmanager: this sits on every contract's path and a generator costs twice as much.
    def __enter__(self) -> MemoryTransaction:
        self._store._open = True
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: object) -> None:
        self._store._open = False
        if kind is not None:
            self.rollback()
            return
        for event in self._appended:
            for listener in self._store._listeners:
                listener(event)

    def task(self, task_id: str) -> Task | None:
        return self._store._tasks.get(task_id)

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self._store._attempts.get(attempt_id)

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return list(self._store._by_task.get(task_id, ()))

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        return sorted(self._unordered_in(states), key=lambda a: a.attempt_id)

    def _unordered_in(self, states: Iterable[str]) -> list[Attempt]:
        found = []
        for state in set(states):
            found.extend(self._store._by_state.get(state, {}).values())
        return found

    def intent(self, key: str) -> Intent | None:
        return self._store._intents.get(key)

    def intents_of(self, attempt_id: str) -> list[Intent]:
        keys = self._store._intent_keys.get(attempt_id, ())
        return [self._store._intents[k] for k in sorted(keys) if self._store._intents[k].attempt_id == attempt_id]

    def insert_task(self, task: Task) -> None:
        if task.task_id in self._store._tasks:
            raise StoreConflict(f"task {task.task_id!r} already exists")
        self._store._tasks[task.task_id] = task
        self._undo.append(("delete", self._store._tasks, task.task_id))

    def update_task(self, task: Task, **changes: Any) -> None:
        live = self._store._tasks.get(task.task_id)
        if live is None or live.version != task.version:
            raise StoreConflict(f"task {task.task_id!r} changed since it was read")
        self._apply(live, changes)
        if task is not live:
            self._apply(task, changes, undo=False)

    def insert_attempt(self, attempt: Attempt) -> None:
        store = self._store
        if attempt.task_id not in store._tasks:
            raise NotFound(f"unknown task {attempt.task_id!r}")
        if attempt.attempt_id in store._attempts:
            raise StoreConflict(f"attempt {attempt.attempt_id!r} already exists")
        siblings = store._by_task.setdefault(attempt.task_id, [])
        if len(siblings) != attempt.number - 1:
            raise StoreConflict(f"attempt numbers must run 1..N: task {attempt.task_id!r} has {len(siblings)}, got {attempt.number}")
        store._attempts[attempt.attempt_id] = attempt
        siblings.append(attempt)
        store._by_state.setdefault(attempt.state, {})[attempt.attempt_id] = attempt
        self._undo.append(("insert_attempt", attempt))

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        # `_apply` written out: every contract that moves an Attempt comes through here.
        live = self._store._attempts.get(attempt.attempt_id)
        if live is None or live.version != attempt.version:
            raise StoreConflict(f"attempt {attempt.attempt_id!r} changed since it was read")
        old_state = live.state
        if old_state in self.immutable_states:
            raise StoreConflict(f"attempt {attempt.attempt_id!r} is terminal ({old_state}) and immutable")
        if not changes.keys() <= _ATTEMPT_WRITABLE:
            raise InputError(f"cannot write {sorted(changes.keys() - _ATTEMPT_WRITABLE)} of an Attempt")
        undo = self._undo
        names = tuple(changes)
        undo.append(("restore", live, names, _reader(names)(live), live.version))
        for name, value in changes.items():
            setattr(live, name, value)
        live.version += 1
        new_state = live.state
        if new_state != old_state:
            self._move(live, old_state, new_state)
            undo.append(("move", live, new_state, old_state))
        if attempt is not live:
            self._apply(attempt, changes, undo=False)

    def insert_intent(self, intent: Intent) -> None:
        if intent.task_id not in self._store._tasks or intent.attempt_id not in self._store._attempts:
            raise NotFound(f"intent {intent.key!r} names an unknown task or attempt")
        if intent.key in self._store._intents:
            raise StoreConflict(f"intent {intent.key!r} already exists")
        self._store._intents[intent.key] = intent
        self._store._intent_keys.setdefault(intent.attempt_id, set()).add(intent.key)
        self._undo.append(("delete", self._store._intents, intent.key))
        self._undo.append(("discard_key", intent.attempt_id, intent.key))

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        live = self._store._intents.get(intent.key)
        if live is None or live.version != intent.version:
            raise StoreConflict(f"intent {intent.key!r} changed since it was read")
        if "attempt_id" in changes and changes["attempt_id"] != live.attempt_id:
            self._store._intent_keys.setdefault(changes["attempt_id"], set()).add(live.key)
            self._undo.append(("discard_key", changes["attempt_id"], live.key))
        self._apply(live, changes)
        if intent is not live:
            self._apply(intent, changes, undo=False)

    # Every field of an Event but its seq, spelled out: binding named parameters costs half of collecting `**fields`, and
    # every contract call appends an event. A field added to Event and not here fails at import (see below the class).
    def append_event(
        self,
        *,
        at: float,
        actor: str,
        kind: str,
        task_id: str,
        attempt_id: str | None,
        accepted: bool,
        reason: str,
        from_state: str | None = None,
        to_state: str | None = None,
        generation: int | None = None,
        worker_id: str | None = None,
        detail: str = "",
        code: str | None = None,
        late: bool = False,
        expires_at: float | None = None,
        operation_key: str | None = None,
        retries: int = 0,
    ) -> Event:
        store = self._store
        event = new_event(
            store._next_seq,
            at,
            actor,
            kind,
            task_id,
            attempt_id,
            accepted,
            reason,
            from_state,
            to_state,
            generation,
            worker_id,
            detail,
            code,
            late,
            expires_at,
            operation_key,
            retries,
        )
        store._next_seq += 1
        if store._keep_events:
            store._events.append(event)
            self._undo.append(_POP_EVENT)
        else:
            self._undo.append(_UNSEQ)
        if store._listeners:
            self._appended.append(event)
        return event

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        wanted = set(states)
        return sorted((task for task in self._store._tasks.values() if task.state in wanted), key=lambda task: task.task_id)

    def leader(self, name: str) -> Leader | None:
        return self._store._leaders.get(name)

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        leaders = self._store._leaders
        self._undo.append(("leader", name, leaders.get(name)))
        leaders[name] = Leader(name, holder, generation, expires_at)

    def _apply(self, record: Any, changes: dict[str, Any], undo: bool = True) -> None:
        if not changes.keys() <= WRITABLE[type(record)]:
            raise InputError(f"cannot write {sorted(changes.keys() - WRITABLE[type(record)])} of a {type(record).__name__}")
        if undo:
            names = tuple(changes)
            self._undo.append(("restore", record, names, _reader(names)(record), record.version))
        for name, value in changes.items():
            setattr(record, name, value)
        record.version += 1

    def _move(self, attempt: Attempt, old: str, new: str) -> None:
        index = self._store._by_state
        del index[old][attempt.attempt_id]
        index.setdefault(new, {})[attempt.attempt_id] = attempt

    def rollback(self) -> None:
        store = self._store
        for entry in reversed(self._undo):
            kind = entry[0]
            if kind == "restore":
                _kind, record, names, values, version = entry
                for name, value in zip(names, values, strict=True):
                    setattr(record, name, value)
                record.version = version
            elif kind == "delete":
                del entry[1][entry[2]]
            elif kind == "discard_key":
                store._intent_keys.get(entry[1], set()).discard(entry[2])
            elif kind == "insert_attempt":
                attempt = entry[1]
                del store._attempts[attempt.attempt_id]
                store._by_task[attempt.task_id].pop()
                del store._by_state[attempt.state][attempt.attempt_id]
            elif kind == "move":
                self._move(entry[1], entry[2], entry[3])
            elif kind == "pop_event":
                store._events.pop()
                store._next_seq -= 1
            elif kind == "unseq":
                store._next_seq -= 1
            elif kind == "leader":
                if entry[2] is None:
                    store._leaders.pop(entry[1], None)
                else:
                    store._leaders[entry[1]] = entry[2]
        self._undo.clear()
        self._appended.clear()


assert tuple(inspect.signature(MemoryTransaction.append_event).parameters)[1:] == _EVENT_ORDER, "append_event must take every Event field"


class MemoryStore(Store):
    """Records in dictionaries; single-threaded (the simulator's and unit tests' store).

    `keep_events=False` drops the history after listeners have seen it, so a
    long simulation can stream events to its checkers in bounded memory.
    """

    races: ClassVar[bool] = False
    transaction_type: ClassVar[type[MemoryTransaction]] = MemoryTransaction
    """The transaction class `transaction()` opens; a subclass may name its own (a store broken in one rule)."""

    def __init__(self, keep_events: bool = True) -> None:
        self._tasks: dict[str, Task] = {}
        self._attempts: dict[str, Attempt] = {}
        self._by_task: dict[str, list[Attempt]] = {}
        self._by_state: dict[str, dict[str, Attempt]] = {}
        self._intents: dict[str, Intent] = {}
        self._intent_keys: dict[str, set[str]] = {}
        self._leaders: dict[str, Leader] = {}
        self._events: list[Event] = []
        self._next_seq = 1
        self._keep_events = keep_events
        self._listeners: list = []
        self._open = False

    def forget(self, task_id: str) -> None:
        """Retention: drop a task whose Attempts have all ended, with its Attempts and intents.

        A long-running deployment archives finished work; a simulation of a
        million tasks must, or its memory grows with every task it ever saw.
        The history is not touched: whoever subscribed has already seen it.
        """
        attempts = self._by_task.get(task_id, [])
        if any(a.state not in ATTEMPT_TERMINAL for a in attempts):
            raise StoreConflict(f"task {task_id!r} still has an active attempt; only finished work is forgotten")
        if self._tasks.pop(task_id, None) is None:
            raise NotFound(f"unknown task {task_id!r}")
        for attempt in self._by_task.pop(task_id, []):
            del self._attempts[attempt.attempt_id]
            del self._by_state[attempt.state][attempt.attempt_id]
            for key in self._intent_keys.pop(attempt.attempt_id, ()):
                intent = self._intents.get(key)
                if intent is not None and intent.task_id == task_id:
                    del self._intents[key]

    def subscribe(self, listener) -> None:
        """Call `listener(event)` for every event of every committed transaction, in order."""
        self._listeners.append(listener)

    def transaction(self) -> MemoryTransaction:
        if self._open:
            raise RuntimeError("MemoryStore transactions do not nest")
        return self.transaction_type(self)

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        return [e for e in self._events if e.seq > after_seq and (task_id is None or e.task_id == task_id)]
