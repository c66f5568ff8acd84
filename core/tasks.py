"""Tasks and their Attempts: capture, accept, first dispatch, and retry as Attempt N+1 (Mission Control's rules).

First dispatch is only for a dispatchable task with no Attempt at all. A
retry needs no active Attempt, the latest one failed, a reason of at least
`reason_length_min` characters, the retry rule's permission and budget left;
after a transient failure the new Attempt waits out a backoff before it may
be claimed. How the new Attempt is recorded is the `recovery` seam: the
reference appends it and never rewrites the one before.

Bulk intake (`submit_many`) runs create, accept and first dispatch for many
tasks in one store transaction: the same functions the single contracts run
(`_created`, `_accepted`, `_dispatched`, each inside an open transaction),
so each task is recorded and refused exactly as the three calls would.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from functools import partial
from typing import Any

from .backoff import Backoff
from .context import Context, contract
from .errors import InputError
from .policy import domains
from .records import Attempt, Budget, Plan, Task
from .results import Accepted, Refused
from .store import Transaction
from .validate import check_budget, check_plan, number, text

SUBMISSIONS_MAX = 1_000
"""The most tasks one `submit_many` call takes: one store transaction holds every row it writes (a task, its Attempt, four
events) and every row lock it takes until its commit, so a batch is bounded. Larger intake is split by the caller."""


@dataclass(frozen=True, slots=True)
class Submission:
    """One task for `Orchestrator.submit_many`: `create_task`'s arguments and the Plan of its first dispatch."""

    task_id: str
    objective: str
    workspace: str
    plan: Plan
    scope: str = ""
    budget: Budget | None = None
    priority: int = 0
    deadline_at: float | None = None


class Tasks:
    """The task lifecycle contracts that create records: create, accept, dispatch, retry, and bulk intake."""

    __slots__ = ("_context", "_queue", "_rng")

    def __init__(self, context: Context, rng: random.Random, queue: Any) -> None:
        self._context = context
        self._rng = rng
        self._queue = queue
        """Told (attempt, task) of every Attempt a committed transaction queued: the admission gate's `queue`."""

    @contract
    def create(self, task_id: Any, objective: Any, workspace: Any, scope: Any, budget: Any, priority: Any, deadline_at: Any) -> Task:
        """Capture a task in the inbox. Its workspace is its bulkhead partition; priority and deadline steer load shedding."""
        task = self._new_task(task_id, objective, workspace, scope, budget, priority, deadline_at)
        with self._context as tx:
            if self._created(tx, task) is not None:
                raise InputError(f"task {task.task_id!r} already exists")
        return copy.copy(task)

    @contract
    def accept(self, task_id: Any) -> Refused | Accepted:
        text(task_id, "task_id", 200)
        with self._context as tx:
            return self._accepted(tx, task_id)

    @contract
    def dispatch(self, task_id: Any, plan: Any) -> Refused | Accepted:
        """First dispatch: only for a dispatchable task with no Attempt at all; appends Attempt 1."""
        text(task_id, "task_id", 200)
        check_plan(plan)
        with self._context as tx:
            return self._dispatched(tx, task_id, plan)

    def submit_many(self, entries: Any) -> list[Refused | Accepted]:
        """Create, accept and first-dispatch every entry, in one store transaction; one result per entry, in order.

        Each entry is a `Submission`. Every entry is checked before anything
        is read or written, so one bad entry (or more than `SUBMISSIONS_MAX`,
        or anything but a list or tuple of Submissions) is an InputError naming
        it, and nothing is written. Then each task goes through the very code
        of `create`, `accept` and `dispatch`, in entry order: the same records,
        the same events, the same refusals as those three calls one by one
        (dispatch asked only once accept was accepted, as a caller would).

        An entry's result is its dispatch's Accepted, or the first refusal
        (accept's, or dispatch's: a budget already spent). A task id that
        exists, in the store or earlier in the same batch, is refused for that
        entry alone (code "no_row": there is no create from the state the
        task is in, which the Refused names) where `create_task` raises
        InputError: one duplicate must not cost a batch of hundreds, and the
        caller learns which ids it had sent before. Like `create_task`'s
        error it writes nothing, no event either, so the history is the one
        the single calls would leave; the other task is not touched.

        The batch is one transaction: an exception anywhere rolls every entry
        back, and the admission queue hears of the new Attempts only once it
        commits. A race lost in the store (StoreRetryable) reruns the whole
        batch, as any contract is run again. An id that a transaction running
        beside this one inserts after this one read it is the store's to
        answer, as for `create_task`: PostgreSQL raises StoreConflict, and the
        whole batch is rolled back. An empty list writes nothing and opens no
        transaction.
        """
        if not isinstance(entries, list | tuple):
            raise InputError(f"submit_many takes a list or tuple of Submission, not {type(entries).__name__} {entries!r:.60}")
        if len(entries) > SUBMISSIONS_MAX:
            raise InputError(f"submit_many takes at most {SUBMISSIONS_MAX:,} submissions per call, not {len(entries):,}: split the batch")
        for index, entry in enumerate(entries):
            if not isinstance(entry, Submission):
                raise InputError(f"submission {index} must be a Submission, not {type(entry).__name__} {entry!r:.60}")
        return self.submit(tuple(entries)) if entries else []

    @contract
    def submit(self, submissions: tuple[Submission, ...]) -> list[Refused | Accepted]:
        """`submit_many`'s one contract over checked entries: the tasks are built again on every run, since a run writes them."""
        tasks = []
        for index, e in enumerate(submissions):
            try:
                tasks.append(self._new_task(e.task_id, e.objective, e.workspace, e.scope, e.budget, e.priority, e.deadline_at))
                check_plan(e.plan)
            except InputError as error:
                raise InputError(f"submission {index} ({e.task_id!r:.60}): {error}") from None
        results: list[Refused | Accepted] = []
        with self._context as tx:
            # The batch's tasks read at once (one round trip on a server), not one by one as `_created` would.
            ids = [task.task_id for task in tasks]
            stored = dict(zip(ids, tx.tasks(ids), strict=True))
            inserted: set[str] = set()
            for task, entry in zip(tasks, submissions, strict=True):
                # An id an earlier entry inserted is read again: it is that task as this transaction has left it.
                existing = tx.task(task.task_id) if task.task_id in inserted else stored[task.task_id]
                if existing is not None:
                    reason = f"task {task.task_id!r} already exists ({existing.state}): not created again, nor accepted or dispatched"
                    results.append(Refused(reason, "no_row", (), existing.state))
                    continue
                self._insert_created(tx, task)
                inserted.add(task.task_id)
                result = self._accepted(tx, task.task_id)
                if result.accepted:
                    result = self._dispatched(tx, task.task_id, entry.plan, [])
                results.append(result)
        return results

    # ------------------------------------------- the bodies, inside a transaction

    def _new_task(self, task_id: Any, objective: Any, workspace: Any, scope: Any, budget: Any, priority: Any, deadline_at: Any) -> Task:
        """`create`'s argument checks, in its order, and the record it inserts."""
        if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 1_000_000:
            raise InputError(f"priority must be an integer within a million of 0, not {priority!r}")
        if deadline_at is not None:
            number(deadline_at, "deadline_at", 1e12)
        context = self._context
        return Task(
            task_id=text(task_id, "task_id", 200),
            objective=text(objective, "objective"),
            scope=text(scope, "scope", empty=True),
            workspace=text(workspace, "workspace", 200),
            state=context.table.task.initial,
            budget=Budget() if budget is None else check_budget(budget),
            created_at=context.clock.now(),
            priority=priority,
            deadline_at=deadline_at,
        )

    def _created(self, tx: Transaction, task: Task) -> Task | None:
        """Insert `task` in the inbox with its event; or, when a task of that id exists, write nothing and return that one."""
        existing = tx.task(task.task_id)
        if existing is not None:
            return existing
        self._insert_created(tx, task)
        return None

    def _insert_created(self, tx: Transaction, task: Task) -> None:
        """Insert `task`, which the store was just asked for and does not hold, with its create event."""
        tx.insert_task(task)
        self._context.event(tx, "operator", "create", task.task_id, None, True, "accepted", None, task.state)

    def _accepted(self, tx: Transaction, task_id: str) -> Refused | Accepted:
        context = self._context
        return context.fire_task(tx, context.task(tx, task_id), "accept", "operator")

    def _dispatched(self, tx: Transaction, task_id: str, plan: Plan, attempts: list[Attempt] | None = None) -> Refused | Accepted:
        """First dispatch of a checked task id and plan: the table's answer, and Attempt 1 appended if it accepted.

        `attempts` are the task's Attempts when the caller already knows them
        without asking the store: none, for a task this transaction inserted
        (an Attempt needs its task's row, which no other transaction can see
        yet). That spares a read, a round trip on a server, per task of a batch.
        """
        context = self._context
        task = context.task(tx, task_id)
        if attempts is None:
            attempts = tx.attempts_of(task.task_id)
        given = {"attempts": attempts, "append": partial(self._append, tx, task, 1, plan, None, None)}
        return context.fire_task(tx, task, "dispatch", "orchestrator", given)

    @contract
    def retry(self, task_id: Any, reason: Any, plan: Any) -> Refused | Accepted:
        """Attempt N+1, only with no active Attempt, the latest failed, a reason, the retry rule's permission and budget left."""
        text(task_id, "task_id", 200)
        check_plan(plan)
        text(reason, "reason", 2000, empty=True)
        context = self._context
        with context as tx:
            task = context.task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            latest = attempts[-1] if attempts else None
            failed = latest is not None and latest.state == "failed"
            # The policy's words for the event; whether it permits the retry is the row's policy_permits_retry guard.
            refusal = context.seams.retry_rule(task, attempts, plan) if failed else "no failed attempt"
            detail = f"policy: {refusal}" if refusal else reason.strip()
            append = partial(self._append_retry, tx, task, attempts, plan, reason.strip())
            given = {"attempts": attempts, "reason": reason, "plan": plan, "append": append}
            return context.fire_task(tx, task, "retry", "orchestrator", given, detail)

    def _append_retry(self, tx: Transaction, task: Task, attempts: list[Attempt], plan: Plan, reason: str) -> None:
        """A retry's Attempt N+1, paced by a backoff when the latest failed in a transient domain."""
        latest = attempts[-1] if attempts else None
        backoff_s = self._backoff_s(attempts) if latest is not None and latest.failure_domain is not None else 0.0
        self._append(tx, task, len(attempts) + 1, plan, latest, reason, backoff_s)

    def _backoff_s(self, attempts: list[Attempt]) -> float:
        """The pause before the next claim: only after a transient failure (a back-off-and-retry domain)."""
        latest = attempts[-1]
        if domains()[latest.failure_domain].response != "back_off_and_retry":
            return 0.0
        run = 0
        for attempt in reversed(attempts):
            if attempt.failure_domain != latest.failure_domain:
                break
            run += 1
        config = self._context.reliability.backoff
        backoff = Backoff(config, self._rng)
        if run > 1 and config.strategy == "decorrelated_jitter":
            backoff.restore(latest.backoff_s)  # the sequence continues from the delay before the latest Attempt
        return backoff.delay_s(run - 1)

    def _append(
        self, tx: Transaction, task: Task, number: int, plan: Plan, previous: Attempt | None, reason: str | None, backoff_s: float = 0.0
    ) -> None:
        """Record the next Attempt through the recovery seam, its event, and (after commit) its place in admission."""
        context = self._context
        now = context.clock.now()
        attempt = Attempt(
            attempt_id=f"{task.task_id}#{number}",
            task_id=task.task_id,
            number=number,
            state=context.table.attempt.initial,
            created_at=now,
            hypothesis=plan.hypothesis,
            previous_attempt_id=previous.attempt_id if previous else None,
            reason=reason,
            plan=plan,
            eligible_at=now + backoff_s if backoff_s else None,
            backoff_s=backoff_s,
        )
        was = previous.state if previous is not None else None
        recorded = context.seams.recovery(tx, attempt, previous)
        from_state = None if recorded is attempt else was  # a record rewritten in place moved from where it was
        context.event(tx, "orchestrator", "append", task.task_id, recorded, True, reason or "first dispatch", from_state, recorded.state)
        context.after_commit(lambda: self._queue(recorded, task))
