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
from typing import TYPE_CHECKING, Any, TypeVar

from .config import CoreConfig, ReliabilityConfig
from .errors import InputError, NotFound, StoreContention, StoreRetryable
from .limits import LIMITS, StoreLimits, limited
from .provider import ProviderAdapter
from .records import Attempt, Task
from .results import LATE_CODES, Accepted, Refused, guard_code
from .seams import Seams
from .store import Store, Transaction
from .table import Table, packaged
from .validate import text
from .vocabulary import ATTEMPT_EFFECTS, ATTEMPT_GUARDS, TASK_EFFECTS, TASK_GUARDS, UNCHOSEN, Call, Unaskable, choose, remembered

if TYPE_CHECKING:
    from shiftchange.spec.model import Row

_NOTHING: dict[str, Any] = {}
"""The inputs of a call that gathers none (its rows' guards and effects read only its records)."""

_accepted_in = functools.lru_cache(maxsize=None)(Accepted)
"""The one Accepted(state) with no detail for each state: results are frozen, so one value serves every call."""


class Context:
    """The store, clock, provider, configuration and seams of one orchestrator, and its one open transaction."""

    __slots__ = (
        "_open",
        "_pending",
        "_undo",
        "clock",
        "config",
        "fence",
        "fenced_triggers",
        "limits",
        "moved",
        "provider",
        "racing",
        "reliability",
        "retries",
        "seams",
        "store",
        "table",
    )

    def __init__(
        self,
        store: Store,
        clock: Any,
        provider: ProviderAdapter,
        config: CoreConfig,
        reliability: ReliabilityConfig,
        seams: Seams,
        table: Table | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.provider = provider
        self.config = config
        self.reliability = reliability
        self.seams = seams
        self.fence = seams.fence
        self.table = packaged() if table is None else table
        """The spec this orchestrator runs: every state change is one of its rows (`fire`, `fire_task`)."""
        self.fenced_triggers = self.table.attempt.fenced_triggers
        """The triggers the fence addresses and proves (`addressed`): the table's, read once."""
        self.moved: Callable[[str, str, str], None] | None = None
        """Told (attempt id, from state, to state) of every accepted move, inside the transaction (the admission gate)."""
        self._pending: list[Callable[[], None]] = []
        self._undo: list[Callable[[], None]] = []
        self._open: Any = None
        declared = getattr(store, "limits", LIMITS)
        if not isinstance(declared, StoreLimits):
            raise InputError(f"{type(store).__name__}.limits must be a StoreLimits, not {type(declared).__name__}")
        self.limits: StoreLimits | None = declared if declared.narrower_than(LIMITS) else None
        """The store's declared limits where they are narrower than what the core may write: every write is checked first."""
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
        return tx if self.limits is None else limited(tx, self.limits)

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

    def addressed(self, tx: Transaction, attempt_id: str, trigger: str) -> Attempt:
        """The Attempt a worker's call of `trigger` touches.

        Where the table fences the trigger, the one the fence addresses (the
        one the call names, for the reference fence), whose lease the call must
        then prove. Where it does not, the caller's word is all there is: the
        call is the task's, and lands on the task's current Attempt, whoever
        holds it (the chapter's stale worker "records completion over a
        replacement's work").
        """
        if trigger in self.fenced_triggers:
            attempt = self.fence.address(tx, attempt_id)
        else:
            named = tx.attempt(attempt_id)
            attempts = tx.attempts_of(named.task_id) if named is not None else []
            attempt = attempts[-1] if attempts else named
        if attempt is None:
            raise NotFound(f"unknown attempt {attempt_id!r}")
        return attempt

    @staticmethod
    def caller(tx: Transaction, attempt: Attempt, presented: int | None) -> str | None:
        """Who sent a worker's call that touches `attempt`: the holder of the generation it presented.

        Usually the Attempt's own holder. Where the table does not fence the
        trigger, a stale worker's call lands on the task's current Attempt
        (`addressed`), and the event must name the stale worker that wrote,
        never the replacement whose Attempt it overwrote.
        """
        if presented is None or presented == attempt.generation:
            return attempt.worker_id
        return next((other.worker_id for other in tx.attempts_of(attempt.task_id) if other.generation == presented), None)

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

    # ---------------------------------------------------------------- fire

    def fire(
        self,
        tx: Transaction,
        attempt: Attempt,
        trigger: str,
        actor: str,
        given: dict[str, Any] | None = None,
        presented: int | None = None,
        token: str | None = None,
        detail: str = "",
        operation_key: str | None = None,
        out: dict[str, Any] | None = None,
        task: Task | None = None,
        asked: Call | None = None,
    ) -> Refused | Accepted:
        """The one firing path of the attempt table: fence if the row says so, ask its guards, apply its effects in order.

        `given` holds what the contract read and gathered for the guards and
        effects to use; `presented` and `token` are the caller's fence. A
        refusal is kept in the history with its code; an accepted call writes
        the effects' changes in one update guarded by the record's version,
        then its event, then the writes that must follow it (a new Attempt, an
        intent). What the effects hand back (a lease token, a manifest) is
        copied into `out`. `task` spares a read when the contract holds the
        Attempt's task already; `asked` is a `Call` on which the contract
        already asked this table's guards with these same inputs (the gateway,
        choosing a dependency), whose answers are not asked again.
        """
        before = attempt.state
        machine = self.table.attempt
        if machine.fenced(before, trigger):
            failed = self.fence.check(attempt, presented, token)
            if failed is not None:
                code, reason = failed
                # No worker id: an unproven call cannot be attributed to the lease holder.
                refusal = Refused(reason, code, state=before)
                return self.refuse(tx, actor, trigger, attempt.task_id, attempt, before, refusal, presented, operation_key=operation_key)
        if asked is None:
            call = Call(self, tx, attempt, task, ATTEMPT_GUARDS, _NOTHING if given is None else given, trigger, out, detail)
            try:
                fired = machine.choose(before, trigger, call)
            except KeyError:
                choose(machine, before, trigger, call)  # asks again by name, naming the guard short of an input
                raise
        else:
            call = asked
            call.out, call.detail = out, detail
            fired = call.chosen if call.chosen is not UNCHOSEN else choose(machine, before, trigger, call)
        worker = None
        if actor == "worker":  # the caller (a claim names itself): the holder, unless an unfenced call presented another generation
            worker = call.given.get("worker_id") or (
                attempt.worker_id if presented is None or presented == attempt.generation else self.caller(tx, attempt, presented)
            )
        if fired is None:
            refusal = self._refusal(attempt, trigger, remembered(call))
            return self.refuse(tx, actor, trigger, attempt.task_id, attempt, before, refusal, presented, worker, detail, operation_key)
        dest, row = fired
        try:
            for effect in row.effects:
                ATTEMPT_EFFECTS[effect](call)
        except KeyError as missing:
            raise _unaskable(row, call, missing) from None
        writes = call.writes
        if dest != before:
            writes["state"] = dest
            if self.moved is not None:
                self.moved(attempt.attempt_id, before, dest)
        tx.update_attempt(attempt, **writes)
        detail = call.detail
        # The event written out rather than through `event`: every accepted contract takes this path.
        tx.append_event(
            at=call.now,
            actor=actor,
            kind=trigger,
            task_id=attempt.task_id,
            attempt_id=attempt.attempt_id,
            accepted=True,
            reason="accepted",
            from_state=before,
            to_state=dest,
            generation=writes.get("generation", presented),
            worker_id=worker,
            detail=detail,
            code=None,
            late=False,
            expires_at=attempt.expires_at,
            operation_key=operation_key,
            retries=self.retries,
        )
        if call.followups is not None:
            for followup in call.followups:
                followup()
        return Accepted(dest, detail) if detail else _accepted_in(dest)

    def _refusal(self, attempt: Attempt, trigger: str, holds: Callable[[str], bool]) -> Refused:
        """A refused row, with its code; a fenced call whose lease is no longer honoured is late: its authority is gone."""
        before = attempt.state
        table = self.table
        machine = table.attempt
        reason = machine.why_refused(before, trigger, holds)
        failed = machine.failed_guards(before, trigger, holds)
        code = guard_code(failed) if failed else "no_row"
        if trigger in machine.fenced_triggers and not self.lease_current(attempt):
            code, reason = "expired_lease", f"late: the lease is no longer honoured (expired at {attempt.expires_at}); {reason}"
        elif trigger in machine.fenced_triggers and before not in table.leased:
            code, reason = "not_leased", f"late: the lease is no longer honoured (the Attempt is {before}, no longer leased); {reason}"
        return Refused(reason, code, failed, before)

    def fire_task(
        self,
        tx: Transaction,
        task: Task,
        trigger: str,
        actor: str,
        given: dict[str, Any] | None = None,
        detail: str = "",
        out: dict[str, Any] | None = None,
    ) -> Refused | Accepted:
        """The firing path of the task table: ask the row's guards, apply its effects, write the change and its event."""
        machine = self.table.task
        before = task.state
        call = Call(self, tx, None, task, TASK_GUARDS, _NOTHING if given is None else given, trigger, out, detail)
        try:
            fired = machine.choose(before, trigger, call)
        except KeyError:
            choose(machine, before, trigger, call)  # asks again by name, naming the guard short of an input
            raise
        if fired is None:
            holds = remembered(call)
            failed = machine.failed_guards(before, trigger, holds)
            refusal = Refused(machine.why_refused(before, trigger, holds), guard_code(failed) if failed else "no_row", failed, before)
            return self.refuse(tx, actor, trigger, task.task_id, None, before, refusal, detail=detail)
        dest, row = fired
        try:
            for effect in row.effects:
                TASK_EFFECTS[effect](call)
        except KeyError as missing:
            raise _unaskable(row, call, missing) from None
        tx.update_task(task, state=dest, **call.writes)
        self.event(tx, actor, trigger, task.task_id, None, True, "accepted", before, dest, detail=call.detail)
        if call.followups is not None:
            for followup in call.followups:
                followup()
        return Accepted(dest, call.detail)

    def elapsed_s(self, attempt: Attempt, now: float) -> float:
        """How long the Attempt has run: from its start (or its claim, if it never started) to `now`."""
        start = attempt.started_at if attempt.started_at is not None else attempt.claimed_at
        return 0.0 if start is None else max(0.0, now - start)


def _unaskable(row: Row, call: Call, missing: KeyError) -> Unaskable:
    """An effect of `row` needed an input its contract does not gather: a design error of the table, named."""
    return Unaskable(
        f"row {row.where} cannot apply its effects to a {call.trigger!r} call: one needs {missing.args[0]!r},"
        " which that contract does not gather"
    )


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
