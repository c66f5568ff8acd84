"""Record access of a PostgreSQL store's transaction: the reads that lock, each record read once and kept current by
the writes, and the writes, kept to be sent with the next read or the commit, each with its guard."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from shiftchange.core.errors import InputError, StoreConflict
from shiftchange.core.records import (
    Attempt,
    Event,
    Intent,
    Leader,
    Task,
    new_event,
)
from shiftchange.core.states import ATTEMPT_TERMINAL

from ..columns import check_changes
from .statements import (
    _EVENT_FIELDS,
    ATTEMPTS,
    COUNT_GUARD,
    EVENTS,
    FORGET_PICKED,
    INSERT_ATTEMPT,
    INSERT_INTENT,
    INSERT_TASK,
    INTENTS,
    LEADERS,
    LOCK_ATTEMPT,
    LOCK_ATTEMPTS_OF_TASK,
    LOCK_CLAIMABLE,
    LOCK_CLAIMABLE_IN,
    LOCK_CLAIMABLE_ONE,
    LOCK_CLAIMABLE_ONE_IN,
    LOCK_INTENT,
    LOCK_INTENTS_OF_ATTEMPT,
    LOCK_LEADER,
    LOCK_TASK,
    LOCK_TASK_GUARD,
    LOCK_TASKS,
    NOW,
    PARENTS_GUARD,
    PICK_WITH_TASK,
    PICK_WITH_TASK_IN,
    PICKED_SIBLINGS,
    PUT_LEADER,
    SELECT_ATTEMPTS_IN_STATES,
    SELECT_EVENTS,
    SELECT_EVENTS_OF_TASK,
    SELECT_TASKS_IN_STATES,
    SELECT_WORKSPACE,
    TASKS,
    _Table,
)

if TYPE_CHECKING:
    pass


def _check_limit(limit: Any) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InputError(f"limit must be an integer >= 0, not {limit!r}")


class _RecordAccess:
    """The record half of `_PostgresTransaction`: the store interface's reads and writes, over the transaction's machinery
    (`_read`, `_write`, `_statement`, the cache of records read and the writes kept), which the other half provides."""

    def _locked(self, table: _Table, query: str, identity: str) -> Any:
        """A record read with its row lock, once per transaction: a second read is the first's object, kept current by writes."""
        key = (table.name, identity)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rows = self._read(query, (identity,))
        if not rows:
            return None
        record = self._cache[key] = table.from_row(rows[0])
        return record

    def _locked_all(self, table: _Table, query: str, parameters: tuple) -> list:
        """Records read with their row locks; one already read in this transaction is that object."""
        return self._cached_all(table, self._read(query, parameters))

    def _cached_all(self, table: _Table, rows: list[tuple]) -> list:
        found = []
        cache = self._cache
        for row in rows:
            record = table.from_row(row)
            identity = getattr(record, table.key)
            record = cache.setdefault((table.name, identity), record)
            found.append(record)
        return found

    def _one(self, table: _Table, query: str, parameters: tuple) -> Any:
        rows = self._read(query, parameters, clock=False)
        return table.from_row(rows[0]) if rows else None

    def _all(self, table: _Table, query: str, parameters: tuple) -> list:
        return [table.from_row(row) for row in self._read(query, parameters, clock=False)]

    def task(self, task_id: str) -> Task | None:
        return self._locked(TASKS, LOCK_TASK, task_id)

    def tasks(self, task_ids: Iterable[str]) -> list[Task | None]:
        """The tasks of `task_ids`, in their order, locked in task-id order, in one round trip (those read before are not read again)."""
        wanted = list(task_ids)
        cache = self._cache
        unread = [task_id for task_id in dict.fromkeys(wanted) if (TASKS.name, task_id) not in cache]
        if unread:
            self._cached_all(TASKS, self._read(LOCK_TASKS, (unread,)))
        return [cache.get((TASKS.name, task_id)) for task_id in wanted]

    def attempt(self, attempt_id: str) -> Attempt | None:
        return self._locked(ATTEMPTS, LOCK_ATTEMPT, attempt_id)

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return self._locked_all(ATTEMPTS, LOCK_ATTEMPTS_OF_TASK, (task_id,))

    def attempts_in(self, states: Iterable[str]) -> list[Attempt]:
        """A plain read, no lock: a write based on it is guarded by the version, and raises StoreRetryable if it is stale."""
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        cache = self._cache
        return [cache.get((ATTEMPTS.name, row[0])) or ATTEMPTS.from_row(row) for row in self._read(SELECT_ATTEMPTS_IN_STATES, (wanted,))]

    def claimable(self, states: Iterable[str], limit: int, workspace: str | None = None) -> list[Attempt]:
        """Up to `limit` Attempts in `states` (of `workspace`'s tasks), oldest first, locked; rows others hold are skipped."""
        _check_limit(limit)
        wanted = list(dict.fromkeys(states))
        if not wanted or limit == 0:
            return []
        state: Any = wanted[0] if len(wanted) == 1 else wanted
        if workspace is None:
            found = self._locked_all(ATTEMPTS, LOCK_CLAIMABLE_ONE if len(wanted) == 1 else LOCK_CLAIMABLE, (state, limit))
        else:
            found = self._locked_all(ATTEMPTS, LOCK_CLAIMABLE_ONE_IN if len(wanted) == 1 else LOCK_CLAIMABLE_IN, (state, workspace, limit))
        return found

    def claim_candidate(self, states: Iterable[str], workspace: str | None = None) -> tuple[Attempt, Task | None, list[Attempt]] | None:
        """The claim queue's oldest Attempt, its task and the task's Attempts, locked in that order, in one round trip."""
        wanted = list(dict.fromkeys(states))
        if len(wanted) != 1:
            return super().claim_candidate(wanted, workspace)
        (state,) = wanted
        pick = self._statement(PICK_WITH_TASK, (state,)) if workspace is None else self._statement(PICK_WITH_TASK_IN, (state, workspace))
        rows, siblings, ((now,),) = self._trip([(FORGET_PICKED, ()), pick, (PICKED_SIBLINGS, ()), (NOW, ())], 3)
        self._now, self._heard_at = now, time.monotonic()
        if not rows:
            return None
        width = len(ATTEMPTS.columns)
        (attempt,) = self._cached_all(ATTEMPTS, [rows[0][:width]])
        task = self._cache.setdefault((TASKS.name, attempt.task_id), TASKS.from_row(rows[0][width:-1]))
        return attempt, task, self._cached_all(ATTEMPTS, siblings)

    def intent(self, key: str) -> Intent | None:
        return self._locked(INTENTS, LOCK_INTENT, key)

    def tasks_in(self, states: Iterable[str]) -> list[Task]:
        """A plain read, no lock (the control plane's scan), in task-id order."""
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        return self._all(TASKS, SELECT_TASKS_IN_STATES, (wanted,))

    def leader(self, name: str) -> Leader | None:
        """The named leader lease, its row locked until the transaction ends: a takeover waits for a fenced step to commit."""
        rows = self._read(LOCK_LEADER, (name,))
        return LEADERS.from_row(rows[0]) if rows else None

    def put_leader(self, name: str, holder: str, generation: int, expires_at: float) -> None:
        self._write(PUT_LEADER, (name, holder, generation, expires_at), None)

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return self._locked_all(INTENTS, LOCK_INTENTS_OF_ATTEMPT, (attempt_id,))

    # ---- guarded writes

    def insert_task(self, task: Task) -> None:
        self._insert(TASKS, INSERT_TASK, task, f"task {task.task_id!r}")
        self._inserted_tasks.setdefault(task.task_id, 0)

    def update_task(self, task: Task, **changes: Any) -> None:
        self._update(TASKS, task, changes, terminal_guard=False)

    def insert_attempt(self, attempt: Attempt) -> None:
        # The task's row lock orders appends to one task: no other transaction can add an Attempt between the count and the insert.
        task_id = attempt.task_id
        siblings = self._inserted_tasks.get(task_id)
        if siblings is None:
            self._write(LOCK_TASK_GUARD, (task_id,), ("parent", None, task_id, None, f"unknown task {task_id!r}"))
            self._write(COUNT_GUARD, (task_id, attempt.number - 1), ("numbering", None, task_id, attempt.number, ""))
        elif attempt.number != siblings + 1:
            # A task this transaction inserted: it exists (or its INSERT aborts the transaction) and has only the Attempts
            # inserted here, since no other transaction sees its row until this one commits. The server need not count them.
            raise StoreConflict(f"attempt numbers must run 1..N: task {task_id!r} has {siblings}, got {attempt.number}")
        self._insert(ATTEMPTS, INSERT_ATTEMPT, attempt, f"attempt {attempt.attempt_id!r}")
        if siblings is not None:
            self._inserted_tasks[task_id] = siblings + 1
        if attempt.state == "admitted":
            self._admitted_in(attempt)

    def update_attempt(self, attempt: Attempt, **changes: Any) -> None:
        self._update(ATTEMPTS, attempt, changes, terminal_guard=True)
        if changes.get("state") == "admitted":
            self._admitted_in(attempt)

    def _admitted_in(self, attempt: Attempt) -> None:
        task = self._cache.get((TASKS.name, attempt.task_id))
        if task is None:
            rows = self._read(SELECT_WORKSPACE, (attempt.task_id,), clock=False)
            workspace = rows[0][0] if rows else ""
        else:
            workspace = task.workspace
        self._admitted.add(workspace)

    def insert_intent(self, intent: Intent) -> None:
        detail = f"intent {intent.key!r} names an unknown task or attempt"
        self._write(PARENTS_GUARD, (intent.task_id, intent.attempt_id), ("parent", None, intent.key, None, detail))
        self._insert(INTENTS, INSERT_INTENT, intent, f"intent {intent.key!r}")

    def update_intent(self, intent: Intent, **changes: Any) -> None:
        self._update(INTENTS, intent, changes, terminal_guard=False)

    # Every field spelled out, as the memory store does (an event per contract call); an Event has no column to encode.
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
        """Keep one history entry, sent with the COMMIT; its seq is 0 until the history is read (numbered after commit)."""
        values = (at, actor, kind, task_id, attempt_id, accepted, reason, from_state, to_state, generation, worker_id, detail)
        values += (code, late, expires_at, operation_key, retries)
        self._check_text(values)
        self._events.append(values)
        return new_event(0, *values)

    def events(self, task_id: str | None, after_seq: int) -> list[Event]:
        """The numbered history this transaction sees (its own events are numbered only after it commits)."""
        if task_id is None:
            return self._all(EVENTS, SELECT_EVENTS, (after_seq,))
        return self._all(EVENTS, SELECT_EVENTS_OF_TASK, (task_id, after_seq))

    def _insert(self, table: _Table, query: str, record: Any, what: str) -> None:
        """Keep the INSERT, made into a statement only when sent (so updates of the record until then ride in it)."""
        row = table.to_row(record)
        self._check_text(row)
        key = (table.name, getattr(record, table.key))
        if key in self._unsent:  # the server would refuse the second; unsent, the first would be lost instead
            raise StoreConflict(f"{what} already exists")
        guard_index = len(self._guards)
        self._guards.append(("insert", table, None, None, what))
        self._pending.append(None)
        self._cache[key] = record
        self._unsent[key] = [len(self._pending) - 1, table, query, record, guard_index, row]

    def _update(self, table: _Table, record: Any, changes: dict[str, Any], *, terminal_guard: bool) -> None:
        """Write `changes` only if the row still has `record.version` (and is not terminal); then mirror them on `record`."""
        check_changes(table, changes)
        identity = getattr(record, table.key)
        if terminal_guard and record.state in ATTEMPT_TERMINAL:
            # Terminal is final: no other transaction can have changed that, so it is no race to run again.
            raise StoreConflict(f"{table.record_type.__name__.lower()} {identity!r} is terminal ({record.state}) and immutable")
        encoded = [table.encode(name, value) for name, value in changes.items()]
        unsent = self._unsent.get((table.name, identity))
        if unsent is not None and unsent[3].version == record.version:
            # Inserted by this transaction and not yet sent: the INSERT will carry the changed record instead (checked
            # as an UPDATE's parameters would be), so an intake's create, accept and dispatch are one statement.
            self._check_text(encoded)
            unsent[5] = None
        else:
            key = (table.name, identity)
            kept = self._unsent_updates.get(key)
            if kept is not None and kept[2] + kept[5] == record.version:
                # Updated earlier in this transaction and not yet sent (a claim and its start): one UPDATE carries both,
                # guarded by the version first read (a write after a terminal state was refused above).
                self._check_text(encoded)
                kept[3].update(zip(changes, encoded, strict=True))
                kept[5] += 1
            else:
                self._check_text(encoded)
                if kept is not None:  # a second write it cannot merge with (a copy read at another version): send both
                    self._render_update(key, kept)
                guard_index = len(self._guards)
                self._guards.append(("update", table, identity, record.version, ""))
                self._pending.append(None)
                merged = dict(zip(changes, encoded, strict=True))
                self._unsent_updates[key] = [len(self._pending) - 1, table, record.version, merged, terminal_guard, 1, guard_index]
        for name, value in changes.items():
            setattr(record, name, value)
        record.version += 1
        cached = self._cache.get((table.name, identity))
        if cached is not None and cached is not record:
            for name, value in changes.items():
                setattr(cached, name, value)
            cached.version = record.version


assert tuple(inspect.signature(_RecordAccess.append_event).parameters)[1:] == _EVENT_FIELDS, "append_event must take every field"
