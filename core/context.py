"""What every contract of one orchestrator shares: one transaction with its post-commit steps, the tables, the event writer.

A contract opens `with context as tx:` once; that is one store transaction.
The in-memory bookkeeping its writes imply (the admission queue, breaker
counts, retry budgets, health probes) is registered with `after_commit` and
applied only if the transaction commits, so a contract that raises leaves
both the store and this process's view of it as they were.

Every state change is asked of the compiled transition table: `fire` and
`fire_task` compute nothing themselves, they take the guards the caller
computed, and either write the change the one enabled row allows (guarded by
the record's version) or record the refusal with its code, failed guards and
lateness. Every call, accepted or refused, appends an event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .config import CoreConfig, ReliabilityConfig
from .errors import NotFound, StoreContention, StoreRetryable
from .machine import FENCED, LEASED
from .provider import ProviderAdapter
from .records import Attempt, Task
from .results import LATE_CODES, Accepted, Refused, guard_code
from .seams import Seams
from .store import Store, Transaction
from .validate import text

_accepted_in = functools.lru_cache(maxsize=None)(Accepted)
"""The one Accepted(state) with no detail for each state: results are frozen, so one value serves every call."""


class Context:
    """The store, clock, provider, configuration and seams of one orchestrator, and its one open transaction."""

    __slots__ = (
        "_open",
        "_pending",
        "_undo",
        "attempt_machine",
        "clock",
        "config",
        "fence",
        "moved",
        "provider",
        "racing",
        "reliability",
        "retries",
        "seams",
        "store",
        "task_machine",
    )

    def __init__(
        self, store: Store, clock: Any, provider: ProviderAdapter, config: CoreConfig, reliability: ReliabilityConfig, seams: Seams
    ) -> None:
        self.store = store
        self.clock = clock
        self.provider = provider
        self.config = config
        self.reliability = reliability
        self.seams = seams
        self.fence = seams.fence
        self.attempt_machine = seams.attempt_machine
        self.task_machine = seams.task_machine
        self.moved: Callable[[str, str, str], None] | None = None
        """Told (attempt id, from state, to state) of every accepted move, inside the transaction (the admission gate)."""
        self._pending: list[Callable[[], None]] = []
        self._undo: list[Callable[[], None]] = []
        self._open: Any = None
        self.racing: bool = getattr(store, "races", True)
        """The store may run transactions side by side and raise StoreRetryable: contracts are then run again (`contract`)."""
        self.retries = 0
        """How many times the contract now running has run again after losing a race; its events carry the count."""

    # ------------------------------------------------------- the transaction

    def __enter__(self) -> Transaction:
        if self._open is not None:
            raise RuntimeError("contracts do not nest: one contract is one transaction")
        self._pending.clear()
        self._undo.clear()
        opened = self.store.transaction()
        tx = opened.__enter__()
        self._open = opened
        return tx

    def __exit__(self, kind: type | None, error: BaseException | None, trace: Any) -> None:
        opened, self._open = self._open, None
        pending = self._pending
        try:
            opened.__exit__(kind, error, trace)
        except BaseException:
            pending.clear()
            self._rolled_back()
            raise
        if kind is not None:
            pending.clear()
            self._rolled_back()
            return
        self._undo.clear()
        if not pending:  # most contracts imply no bookkeeping: no copy on the hot path
            return
        steps = tuple(pending)
        pending.clear()
        for step in steps:
            step()

    def after_commit(self, step: Callable[[], None]) -> None:
        """Apply `step` to this process's bookkeeping if, and only if, the open transaction commits."""
        self._pending.append(step)

    def on_rollback(self, step: Callable[[], None]) -> None:
        """Undo, with `step`, bookkeeping the open transaction had to spend before it knew it would commit.

        A rate token or a half-open probe must be taken when the call is
        judged (two grants must not share one), so it is spent inside the
        transaction; if that transaction then rolls back, or loses its race and
        runs again, the token or probe is given back, never lost for good.
        """
        self._undo.append(step)

    def _rolled_back(self) -> None:
        steps = self._undo[::-1]
        self._undo.clear()
        for step in steps:
            step()

    # ---------------------------------------------------------------- reads

    def task(self, tx: Transaction, task_id: Any) -> Task:
        task = tx.task(text(task_id, "task_id", 200))
        if task is None:
            raise NotFound(f"unknown task {task_id!r}")
        return task

    def attempt(self, tx: Transaction, attempt_id: Any) -> Attempt:
        attempt = tx.attempt(text(attempt_id, "attempt_id", 220))
        if attempt is None:
            raise NotFound(f"unknown attempt {attempt_id!r}")
        return attempt

    def addressed(self, tx: Transaction, attempt_id: str) -> Attempt:
        """The Attempt a fenced call may touch, as the fence says (the one it names, for the reference fence)."""
        attempt = self.fence.address(tx, attempt_id)
        if attempt is None:
            raise NotFound(f"unknown attempt {attempt_id!r}")
        return attempt

    def lease_current(self, attempt: Attempt) -> bool:
        return self.fence.honoured(attempt, self.clock.now())

    # --------------------------------------------------------------- events

    def event(
        self,
        tx: Transaction,
        actor: str,
        kind: str,
        task_id: str,
        attempt: Attempt | None,
        accepted: bool,
        reason: str,
        from_state: str | None = None,
        to_state: str | None = None,
        generation: int | None = None,
        worker_id: str | None = None,
        detail: str = "",
        code: str | None = None,
        operation_key: str | None = None,
    ) -> None:
        """Append one history entry; an Attempt's event carries its lease expiry as the call left it."""
        tx.append_event(
            at=self.clock.now(),
            actor=actor,
            kind=kind,
            task_id=task_id,
            attempt_id=None if attempt is None else attempt.attempt_id,
            accepted=accepted,
            reason=reason,
            from_state=from_state,
            to_state=to_state,
            generation=generation,
            worker_id=worker_id,
            detail=detail,
            code=code,
            late=code in LATE_CODES,
            expires_at=None if attempt is None else attempt.expires_at,
            operation_key=operation_key,
            retries=self.retries,
        )

    def refuse(
        self,
        tx: Transaction,
        actor: str,
        kind: str,
        task_id: str,
        attempt: Attempt | None,
        state: str | None,
        refusal: Refused,
        generation: int | None = None,
        worker_id: str | None = None,
        detail: str = "",
        operation_key: str | None = None,
    ) -> Refused:
        """Keep a refusal in the history (the record stays in `state`) and hand it back."""
        reason, code = refusal.reason, refusal.code
        self.event(tx, actor, kind, task_id, attempt, False, reason, state, state, generation, worker_id, detail, code, operation_key)
        return refusal

    def fenced(
        self, tx: Transaction, attempt: Attempt, trigger: str, generation: int, token: str, operation_key: str | None = None
    ) -> Refused | None:
        """Refuse, and keep in the history, any fenced call that does not prove the current lease (see `fence.py`)."""
        failed = self.fence.check(attempt, generation, token)
        if failed is None:
            return None
        code, reason = failed
        # No worker id: an unproven call cannot be attributed to the lease holder.
        refusal = Refused(reason, code, state=attempt.state)
        return self.refuse(tx, "worker", trigger, attempt.task_id, attempt, attempt.state, refusal, generation, operation_key=operation_key)

    # ---------------------------------------------------------------- fire

    def fire(
        self,
        tx: Transaction,
        attempt: Attempt,
        trigger: str,
        actor: str,
        holds: dict[str, bool],
        presented: int | None = None,
        detail: str = "",
        operation_key: str | None = None,
        **changes: Any,
    ) -> Refused | Accepted:
        """Ask the attempt table; write the change and its event, or record the refusal."""
        before = attempt.state
        fired = self.attempt_machine.fire(before, trigger, holds.__getitem__)
        worker = changes.get("worker_id", attempt.worker_id) if actor == "worker" else None
        if fired is None:
            refusal = self._refusal(attempt, trigger, holds)
            return self.refuse(tx, actor, trigger, attempt.task_id, attempt, before, refusal, presented, worker, detail, operation_key)
        dest = fired[0]
        if dest != before:
            changes["state"] = dest
            if self.moved is not None:
                self.moved(attempt.attempt_id, before, dest)
        tx.update_attempt(attempt, **changes)
        # The event written out rather than through `event`: every accepted contract takes this path.
        tx.append_event(
            at=self.clock.now(),
            actor=actor,
            kind=trigger,
            task_id=attempt.task_id,
            attempt_id=attempt.attempt_id,
            accepted=True,
            reason="accepted",
            from_state=before,
            to_state=dest,
            generation=changes.get("generation", presented),
            worker_id=worker,
            detail=detail,
            code=None,
            late=False,
            expires_at=attempt.expires_at,
            operation_key=operation_key,
            retries=self.retries,
        )
        return Accepted(dest, detail) if detail else _accepted_in(dest)

    def _refusal(self, attempt: Attempt, trigger: str, holds: dict[str, bool]) -> Refused:
        """A refused row, with its code; a fenced call whose lease is no longer honoured is late: its authority is gone."""
        before = attempt.state
        machine = self.attempt_machine
        reason = machine.why_refused(before, trigger, holds.__getitem__)
        failed = machine.failed_guards(before, trigger, holds.__getitem__)
        code = guard_code(failed) if failed else "no_row"
        if trigger in FENCED and not self.lease_current(attempt):
            code, reason = "expired_lease", f"late: the lease is no longer honoured (expired at {attempt.expires_at}); {reason}"
        elif trigger in FENCED and before not in LEASED:
            code, reason = "not_leased", f"late: the lease is no longer honoured (the Attempt is {before}, no longer leased); {reason}"
        return Refused(reason, code, failed, before)

    def fire_task(
        self, tx: Transaction, task: Task, trigger: str, actor: str, holds: dict[str, bool], detail: str = "", **changes: Any
    ) -> Refused | Accepted:
        """Ask the task table; write the change and its event, or record the refusal."""
        machine = self.task_machine
        before = task.state
        fired = machine.fire(before, trigger, holds.__getitem__)
        if fired is None:
            failed = machine.failed_guards(before, trigger, holds.__getitem__)
            refusal = Refused(
                machine.why_refused(before, trigger, holds.__getitem__), guard_code(failed) if failed else "no_row", failed, before
            )
            return self.refuse(tx, actor, trigger, task.task_id, None, before, refusal, detail=detail)
        dest = fired[0]
        tx.update_task(task, state=dest, **changes)
        self.event(tx, actor, trigger, task.task_id, None, True, "accepted", before, dest, detail=detail)
        return Accepted(dest, detail)

    def elapsed_s(self, attempt: Attempt, now: float) -> float:
        """How long the Attempt has run: from its start (or its claim, if it never started) to `now`."""
        start = attempt.started_at if attempt.started_at is not None else attempt.claimed_at
        return 0.0 if start is None else max(0.0, now - start)


Method = TypeVar("Method", bound=Callable[..., Any])


def contract(method: Method) -> Method:
    """Run a contract method again from its start, a bounded number of times, when its store transaction lost a race.

    Why the method and not the transaction: a `with` block cannot be run
    again, and a contract computes its guards from what it read, so after a
    deadlock or a row changed under an unlocked read the whole contract must
    read again. That is safe because a rolled-back transaction left nothing:
    no record, no event, no post-commit bookkeeping. The count goes into the
    events the successful run writes (`Event.retries`); after
    `CoreConfig.store_retries_max` runs again it raises `StoreContention`,
    never retrying without bound. A store that serializes its transactions
    (`races = False`: memory, SQLite) pays one attribute test.

    The method's object keeps its `Context` as `_context`. A contract called
    from inside another (a late completion reaping) counts its own runs.
    """

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        context = self._context
        if not context.racing:
            return method(self, *args, **kwargs)
        outer = context.retries
        limit = context.config.store_retries_max
        try:
            for retries in range(limit + 1):
                context.retries = retries
                try:
                    return method(self, *args, **kwargs)
                except StoreRetryable as error:
                    lost = error
                    refresh = getattr(self, "refresh_after_race", None)
                    if refresh is not None:
                        refresh()
            raise StoreContention(f"{method.__name__} lost its race in the store {limit + 1} times in a row: {lost}", limit) from lost
        finally:
            context.retries = outer

    return run  # type: ignore[return-value]
