"""The loop decision after every Attempt, and the operator's word on a resting task.

After an Attempt ends exactly one decision is made and recorded with its
reason: verify, correct, retry, stop or escalate (`policy.decide`). A task
at rest (blocked, escalated, stopped) moves again only by an operator:
`release` (the only way a budget is ever extended) or `approve`.
"""

from __future__ import annotations

from typing import Any

from .context import Context, contract
from .policy import Decision, decide
from .results import Accepted, Refused
from .validate import check_budget, text


class Loop:
    """decide, release and approve."""

    __slots__ = ("_context",)

    def __init__(self, context: Context) -> None:
        self._context = context

    @contract
    def decide(self, task_id: Any) -> Decision | Refused:
        """After an Attempt ends: exactly one of verify, correct, retry, stop, escalate, recorded with its reason."""
        text(task_id, "task_id", 200)
        context = self._context
        with context as tx:
            task = context.task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            if not attempts or attempts[-1].state in context.table.active:
                refusal = Refused("no ended attempt to decide on", "not_found", state=task.state)
                return context.refuse(tx, "orchestrator", "decide", task.task_id, None, task.state, refusal)
            latest = attempts[-1]
            elapsed = sum(a.elapsed_s for a in attempts)
            if elapsed != task.elapsed_s:
                tx.update_task(task, elapsed_s=elapsed)
            decision = decide(task, attempts)
            if decision.task_trigger is not None and context.table.task.has(task.state, decision.task_trigger):
                given = {"attempts": attempts, "decision": decision.kind, "decision_reason": decision.reason}
                context.fire_task(tx, task, decision.task_trigger, "orchestrator", given, decision.reason)
            else:
                tx.update_task(task, decision=decision.kind, decision_reason=decision.reason)
            kind, state = decision.kind, task.state
            context.event(tx, "orchestrator", "decide", task.task_id, latest, True, kind, state, state, detail=decision.reason)
            return decision

    @contract
    def release(self, task_id: Any, reason: Any, budget: Any) -> Refused | Accepted:
        """An operator resolves a resting task; only this human decision may extend a budget."""
        text(task_id, "task_id", 200)
        text(reason, "reason", 2000)
        if budget is not None:
            check_budget(budget)
        context = self._context
        with context as tx:
            task = context.task(tx, task_id)
            given: dict[str, Any] = {"interruptions": task.interruptions + 1, "decision": "release", "decision_reason": reason}
            if budget is not None:
                given["budget"] = budget
            return context.fire_task(tx, task, "release", "operator", given, reason)

    @contract
    def approve(self, task_id: Any) -> Refused | Accepted:
        text(task_id, "task_id", 200)
        context = self._context
        with context as tx:
            return context.fire_task(tx, context.task(tx, task_id), "approve", "operator")
