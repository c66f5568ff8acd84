"""The admission gate: queued -> admitted, where bulkheads, backpressure, shedding, budgets and the admission rate act.

The decisions are the `AdmissionController`'s (core/admission.py); this
module fires them through the attempt table and keeps the controller in step
with the store. The controller's state is this process's and derived: it is
rebuilt from the store's active Attempts on start, and every change a
contract's writes imply is applied only when that transaction commits.
Attempts waiting out a backoff are not yet in the queue, so they hold no
slot while they wait; they join it when their time comes.
"""

from __future__ import annotations

import heapq
from functools import partial

from .admission import ADMIT, AdmissionController, AdmissionDecision
from .context import Context
from .policy import budget_exhausted
from .rate_limit import TokenBucket
from .records import Attempt, Task
from .results import Accepted, Refused
from .store import Transaction


class AdmissionGate:
    """One orchestrator's admission queue, backoff sleepers and in-flight slots, and the admission step."""

    __slots__ = ("_asleep", "_bucket", "_context", "_sleeping", "_terminal", "controller")

    def __init__(self, context: Context) -> None:
        self._context = context
        reliability = context.reliability
        self.controller = AdmissionController(reliability.admission, capacity_max=context.config.admitted_max)
        rate = reliability.admission_rate
        self._bucket = TokenBucket(rate, context.clock.now()) if rate is not None else None
        self._sleeping: list[tuple[float, float, str]] = []
        self._asleep: set[str] = set()
        """The ids in `_sleeping` still asleep; one that left queued (cancelled) is dropped here and skipped on waking."""
        self._terminal = context.table.attempt_terminal
        context.moved = self._moved
        self._rebuild()

    def refresh(self) -> None:
        """Forget the derived state and rebuild it from the store (the admission rate's bucket is kept).

        For when this process's view may be stale: other processes share the
        store and moved Attempts this gate never saw, or a step that decided
        in memory lost its race in the store and was rolled back.
        """
        reliability = self._context.reliability
        self.controller = AdmissionController(reliability.admission, capacity_max=self._context.config.admitted_max)
        self._sleeping.clear()
        self._asleep.clear()
        self._rebuild()

    def _rebuild(self) -> None:
        """Derived state: rebuilt from the store's active Attempts (after a restart too)."""
        with self._context.store.transaction() as tx:
            for attempt in sorted(tx.attempts_in(self._context.table.active), key=lambda a: (a.created_at, a.attempt_id)):
                task = tx.task(attempt.task_id)
                if attempt.state != "queued":
                    self.controller.restore(attempt.attempt_id, task.workspace)
                else:
                    self.queue(attempt, task)

    # ------------------------------------------------------ bookkeeping

    def queue(self, attempt: Attempt, task: Task) -> None:
        """Into the admission queue, or to sleep until its backoff has passed (call after the append commits)."""
        if attempt.eligible_at is not None and attempt.eligible_at > self._context.clock.now():
            heapq.heappush(self._sleeping, (attempt.eligible_at, attempt.created_at, attempt.attempt_id))
            self._asleep.add(attempt.attempt_id)
        else:
            self.controller.enqueue(attempt.attempt_id, task.workspace, task.priority, attempt.created_at, task.deadline_at)

    def status(self, attempt_id: str) -> str:
        """Where admission holds an Attempt: "sleeping" (waiting out a backoff), "waiting", "in_flight", or "gone"."""
        if attempt_id in self._asleep:
            return "sleeping"
        return self.controller.status(attempt_id)

    def _moved(self, attempt_id: str, before: str, dest: str) -> None:
        """An accepted move: leaving queued frees its queue place, reaching a terminal state its slot (after commit)."""
        if before == "queued":
            self._context.after_commit(partial(self._dequeue, attempt_id))
        elif dest in self._terminal:
            self._context.after_commit(partial(self._release, attempt_id))

    def _dequeue(self, attempt_id: str) -> None:
        self._asleep.discard(attempt_id)
        self.controller.remove(attempt_id)

    def _release(self, attempt_id: str) -> None:
        if self.controller.status(attempt_id) == "in_flight":
            self.controller.release(attempt_id)

    def _wake(self, tx: Transaction, now: float) -> None:
        """Attempts whose backoff has passed join the admission queue (unless they left queued meanwhile, e.g. cancelled)."""
        while self._sleeping and self._sleeping[0][0] <= now:
            _eligible_at, _created_at, attempt_id = heapq.heappop(self._sleeping)
            if attempt_id not in self._asleep:
                continue
            self._asleep.discard(attempt_id)
            attempt = tx.attempt(attempt_id)
            if attempt is not None and attempt.state == "queued":
                self.queue(attempt, tx.task(attempt.task_id))

    # --------------------------------------------------------- the step

    def step(self, tx: Transaction) -> dict[str, Refused | Accepted]:
        """One admission step inside the caller's transaction: admit, defer or shed waiting Attempts."""
        context = self._context
        now = context.clock.now()
        self._wake(tx, now)
        bucket = self._bucket
        results: dict[str, Refused | Accepted] = {}
        for decision in self.controller.decide(now, None if bucket is None else int(bucket.available(now))):
            if decision.trigger == ADMIT and bucket is not None:
                bucket.try_acquire(now)
            attempt = context.attempt(tx, decision.item_id)
            task = context.task(tx, attempt.task_id)
            results[attempt.attempt_id] = self._apply(tx, attempt, task, decision, now)
        return results

    def _apply(self, tx: Transaction, attempt: Attempt, task: Task, decision: AdmissionDecision, now: float) -> Refused | Accepted:
        context = self._context
        attempts = tx.attempts_of(task.task_id)
        budget_left = budget_exhausted(task, attempts[: attempt.number - 1]) is None
        given = {"admission": decision, "attempts": attempts, "domain": "capacity", "signature": "capacity:shed"}
        if decision.trigger == ADMIT and not budget_left:
            # Denial of wallet: a budget ran out while it waited; it fails (classified) rather than wait forever.
            context.after_commit(partial(self._release, attempt.attempt_id))
            given["signature"] = "budget:exhausted at admission"
            return context.fire(tx, attempt, "exceed_budget", "orchestrator", given, detail="budget exhausted at admission")
        result = context.fire(tx, attempt, decision.trigger, "orchestrator", given)
        if decision.trigger == ADMIT and not result.accepted:
            context.after_commit(partial(self._release, attempt.attempt_id))
        return result

    def admit(self, tx: Transaction, attempt: Attempt) -> Refused | Accepted:
        """Run one step and say what it decided for `attempt` (already looked up): Accepted only when admitted.

        A deferral or a shed is refused here with its reason (the step itself
        recorded it as an accepted defer or shed transition).
        """
        context = self._context
        result = self.step(tx).get(attempt.attempt_id)
        if result is not None and result.accepted and result.state != "admitted":
            return Refused(f"not admitted ({result.state}): {result.detail}", "not_admitted", state=result.state)
        if result is not None:
            return result
        if attempt.state != "queued":
            return context.fire(tx, attempt, "admit", "orchestrator")  # no admit row leaves this state: refused, kept
        if attempt.eligible_at is not None and attempt.eligible_at > context.clock.now():
            reason = f"waiting out its backoff until {attempt.eligible_at:g} before it joins the admission queue"
        else:
            reason = f"still waiting for admission (queue depth {self.controller.queue_depth()})"
        return context.refuse(
            tx, "orchestrator", "admit", attempt.task_id, attempt, attempt.state, Refused(reason, "not_admitted", state="queued")
        )
