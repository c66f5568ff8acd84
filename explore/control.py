"""The control plane's steps: what a scheduler runs, learnt from the history as the agenda says, one contract a step.

`control:intake:TASK` (with an operator in the world, a new task waits in
its inbox until it is taken in: accepted and dispatched), `control:admit`
(an Attempt is queued), `control:reap` (a lease or a
cancellation ran out, by the reaper's own rule), `control:reconcile:ID`,
`control:verify:ID`, `control:decide:TASK`, `control:retry:TASK`,
`control:approve:TASK`, and the operator's `control:cancel:TASK` and
`control:cancel-attempt:ID` while cancellations are left to spend, and
`operator:accept:TASK`, `operator:approve:TASK`, `operator:release:TASK`
and `operator:admit:ATTEMPT` at any moment while operator calls are left
(`operate`): an operator who presses a button whatever the task's state, or
asks admission for an Attempt whatever its state, which the table must
refuse out of turn. A release accepted hands the task back to the loop.

What is due comes from `agent.control.Agenda`, noted on every committed
event, as every control plane learns it; the decisions are the agent's
(`retry_for`, `blind_retry`, `reconcile_settled` through the agenda).
Deciding and retrying stay two steps, so the search places a crash, a
cancellation or a late write between the loop's decision and its retry.
Under the blind-retry anti-pattern the loop never decides: a failed
Attempt's retry is asked unchanged, and only when the core refuses it does
the loop decide after all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from shiftchange.agent import Agenda, Retry, blind_retry, retry_for
from shiftchange.core import Plan
from shiftchange.core.lease import reapable

from .config import task_name

CANCEL_TASK, CANCEL_ATTEMPT = "operator cancelled the task", "operator cancelled this attempt"
OPERATOR_CALLS = ("accept", "approve", "release")
INTAKE = frozenset({"inbox", "ready"})
"""The task states a task waits for its intake in (with no Attempt yet)."""
RELEASE = "operator released the task with one more attempt"


@dataclass(slots=True)
class Survey:
    """What the records say is due this instant: admitted tasks (to claim), and the control plane's record-driven steps."""

    admitted: list[str]
    queued: bool
    reap_due: bool
    live_tasks: list[str]
    active: list[str]
    attempts: list[str]
    """Every Attempt, when operator calls are left to spend (they may ask admission for any of them)."""
    intake: list[str]
    """Tasks not yet sent to work (in their inbox, or accepted with no Attempt): with an operator, each waits for its
    intake step, so the operator's calls meet a task in its inbox too."""


def survey(world: Any) -> Survey:
    """One read of the records for this state's steps (active Attempts only when a cancellation is left to spend); the state
    sets are those of the table the world's orchestrator runs."""
    now, table = world.clock.now(), world.table
    with world.store.transaction() as tx:
        admitted = sorted({a.task_id for a in tx.attempts_in(("admitted",))})
        queued = bool(tx.attempts_in(("queued",)))
        reap_due = any(reapable(a, now, table.expirable) for a in tx.attempts_in(table.leased))  # the reaper's own scan and rule
        tasks = [tx.task(task_name(i)) for i in range(world.config.tasks)]
        active = sorted(a.attempt_id for a in tx.attempts_in(table.active)) if world.budgets.cancels else []
        attempts = [a.attempt_id for t in tasks for a in tx.attempts_of(t.task_id)] if world.budgets.operator_calls else []
        intake = [t.task_id for t in tasks if t.state in INTAKE and not tx.attempts_of(t.task_id)] if world.config.operator_calls else []
    live = [t.task_id for t in tasks if t.state not in table.task_terminal and t.state not in table.task_resting]
    return Survey(admitted, queued, reap_due, live, active, attempts, intake)


@dataclass(slots=True)
class ControlPlane:
    """The agenda the history keeps, the retries the loop decided and not yet asked for, and whether the loop is blind."""

    agenda: Agenda = field(default_factory=Agenda)
    retries: dict[str, Retry] = field(default_factory=dict)
    blind_loop: bool = False

    def note(self, event: Any) -> None:
        self.agenda.note(event)

    def steps(self, world: Any, due: Survey) -> list[str]:
        """Every control step enabled now, in a fixed order."""
        agenda, now = self.agenda, world.clock.now()
        labels = [f"control:intake:{t}" for t in due.intake]
        labels += ["control:admit"] if due.queued else []
        if due.reap_due:
            labels.append("control:reap")
        labels += [f"control:reconcile:{a}" for a in agenda.reconcile]
        labels += [f"control:verify:{a}" for a in agenda.due(agenda.verify, now)]
        labels += [f"control:decide:{t}" for t in agenda.decide]
        labels += [f"control:retry:{t}" for t in self.retries]
        labels += [f"control:approve:{t}" for t in agenda.due(agenda.approve, now)]
        if world.budgets.cancels:
            labels += [f"control:cancel:{t}" for t in due.live_tasks]
            labels += [f"control:cancel-attempt:{a}" for a in due.active]
        if world.budgets.operator_calls:
            labels += [f"operator:{call}:{task_name(i)}" for i in range(world.config.tasks) for call in OPERATOR_CALLS]
            labels += [f"operator:admit:{a}" for a in due.attempts]
        return labels

    def operate(self, world: Any, action: str, name: str) -> None:
        """One operator call out of the blue, spent from its budget, on a task or (admission) an Attempt named `name`."""
        world.budgets.operator_calls -= 1
        orchestrator = world.orchestrator
        if action == "admit":
            orchestrator.admit(name)  # admission asked for this Attempt, whatever its state
        elif action == "accept":
            orchestrator.accept_task(name)
        elif action == "approve":
            orchestrator.approve(name)
        else:
            with world.store.transaction() as tx:
                budget = tx.task(name).budget
            budget = replace(budget, attempts_max=budget.attempts_max + 1)
            orchestrator.release(name, RELEASE, budget)  # accepted, the agenda hears it and the loop decides next

    def apply(self, world: Any, action: str, argument: str) -> None:
        """Run one control step's contract, and tell the agenda what came of it."""
        orchestrator, agenda, now = world.orchestrator, self.agenda, world.clock.now()
        if action == "intake":
            intake(world, argument)
        elif action == "admit":
            orchestrator.run_admission()
        elif action == "reap":
            orchestrator.reap()
        elif action == "reconcile":
            agenda.reconciled(argument, orchestrator.reconcile_attempt(argument))
        elif action == "verify":
            agenda.verified(argument, orchestrator.verify_attempt(argument), now)
        elif action == "decide":
            agenda.decide.pop(argument)
            self._decide(world, argument)
        elif action == "retry":
            self._retry(world, self.retries.pop(argument))
        elif action == "approve":
            agenda.approve.pop(argument)
            orchestrator.approve(argument)
        else:
            self._cancel(world, action, argument)

    def _cancel(self, world: Any, action: str, argument: str) -> None:
        world.budgets.cancels -= 1
        if action == "cancel":
            world.orchestrator.cancel_task(argument, CANCEL_TASK)
        else:
            world.orchestrator.cancel_attempt(argument, CANCEL_ATTEMPT)

    def _decide(self, world: Any, task_id: str) -> None:
        """The loop's decision after an Attempt ended (the blind loop's retry instead); the retry is a step of its own."""
        latest = _latest(world, task_id)
        retry = blind_retry(task_id, latest) if self.blind_loop else None
        if retry is None:
            retry = retry_for(task_id, world.orchestrator.decide(task_id), latest)
        if retry is not None:
            self.retries[task_id] = retry

    def _retry(self, world: Any, retry: Retry) -> None:
        result = world.orchestrator.retry(retry.task_id, retry.reason, retry.plan)
        if retry.blind and not result.accepted:  # the blind loop asks the loop only once its blind retry is refused
            decided = retry_for(retry.task_id, world.orchestrator.decide(retry.task_id), _latest(world, retry.task_id))
            if decided is not None:
                self.retries[retry.task_id] = decided

    def row(self, at: Callable[[float], Any]) -> tuple:
        """What is due, as plain values, sorted, each time written by `at` (as a number on the clock, or relative to it):
        the order things were noted in only orders the steps, all of them enabled."""
        agenda = self.agenda
        retries = sorted((t, r.reason, r.hypothesis, r.blind) for t, r in self.retries.items())
        verify, approve = (
            sorted((a, at(due)) for a, due in agenda.verify.items()),
            sorted((t, at(due)) for t, due in agenda.approve.items()),
        )
        return (sorted(agenda.reconcile), verify, sorted(agenda.decide), approve, retries)


def intake(world: Any, task_id: str) -> None:
    """A new task taken in: accepted from its inbox (unless an operator accepted it already), and sent to work."""
    orchestrator = world.orchestrator
    with world.store.transaction() as tx:
        state = tx.task(task_id).state
    if state == "inbox":
        orchestrator.accept_task(task_id)
    orchestrator.dispatch(task_id, Plan(f"hypothesis 1 for {task_id}"))


def _latest(world: Any, task_id: str) -> Any:
    with world.store.transaction() as tx:
        return tx.attempts_of(task_id)[-1]
