"""The control plane's decisions, sans-I/O: what is due (admit, reap, reconcile, verify, decide, retry, approve), and the
next hypothesis. Every control plane (the simulator's processes, the explorer's actions, the runtime's scans) asks here.

A control plane learns what is due in one of two ways, and both end in the
same `Agenda`:

- from the history, as it is written (`Agenda.note` on every committed
  event): the simulator and the explorer, whose store runs in their process;
- from the records, by scanning the states that ask for work
  (`Agenda.survey`): the runtime, where other processes write most of what
  happens and a restarted orchestrator remembers nothing.

The agenda only says what is due; the driver runs the contracts, on its own
cadence, and tells the agenda what came of them (`reconciled`, `verified`).
After an Attempt ends, the loop decides (`Orchestrator.decide`), and
`retry_for` turns a retry or a correction into the retry to ask for: a retry
keeps the plan, a correction changes the hypothesis. The blind-retry
anti-pattern (`blind_retry`) skips the decision and runs the failed plan
again while it can.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shiftchange.core import Plan
from shiftchange.core.states import ATTEMPT_TERMINAL, TASK_AT_REST

RECOVERING = ("suspect", "reconciling")


@dataclass(frozen=True, slots=True)
class Retry:
    """The retry a control plane asks for: `Orchestrator.retry(task_id, reason, plan)`."""

    task_id: str
    reason: str
    hypothesis: str
    blind: bool = False
    """The blind-retry anti-pattern's: asked without a decision (when refused, the loop decides after all)."""

    @property
    def plan(self) -> Plan:
        return Plan(self.hypothesis)


def next_hypothesis(task_id: str, number: int) -> str:
    """The hypothesis of a correction after Attempt `number`: a changed plan, named by the Attempt that will run it."""
    return f"hypothesis {number + 1} for {task_id}"


def retry_for(task_id: str, decision: Any, latest: Any) -> Retry | None:
    """The retry the loop's decision asks for after `latest` ended: the same plan, a changed one, or none."""
    kind = getattr(decision, "kind", None)
    if kind == "retry":
        return Retry(task_id, f"retry: {decision.reason}", latest.hypothesis)
    if kind == "correct":
        return Retry(task_id, f"correct: {decision.reason}", next_hypothesis(task_id, latest.number))
    return None  # verify, stop, escalate, or a refusal: nothing to run


def blind_retry(task_id: str, latest: Any) -> Retry | None:
    """The blind loop never decides: a failed Attempt runs again, unchanged, while the core lets it."""
    if latest.state != "failed":
        return None
    return Retry(task_id, f"blind retry after {latest.attempt_id} failed", latest.hypothesis, blind=True)


def reconcile_settled(result: Any) -> bool:
    """Whether a reconciliation is done with (anything but "pending": calls still in flight, ask again later)."""
    return getattr(result, "outcome", None) != "pending"


@dataclass(frozen=True, slots=True)
class Delays:
    """How long the control plane lets things wait: CI before verification, a reviewer before approval, retirement."""

    ci_s: float = 0.0
    review_s: float = 0.0
    retire_grace_s: float = 0.0


@dataclass
class Agenda:
    """What is due: Attempts to reconcile and verify (with when), tasks to decide, approve and retire (with when)."""

    delays: Delays = field(default_factory=Delays)
    reconcile: dict[str, None] = field(default_factory=dict)
    verify: dict[str, float] = field(default_factory=dict)
    decide: dict[str, None] = field(default_factory=dict)
    approve: dict[str, float] = field(default_factory=dict)
    retire: dict[str, float] = field(default_factory=dict)
    admission_due: bool = True
    """An Attempt was queued or ended since the last admission step."""
    decided_after: dict[str, str] = field(default_factory=dict)
    """From the records: task id -> the ended Attempt the loop last decided after. The history makes a task due once per
    Attempt that ends; a survey would find a task whose retry was refused undecided again every round, so it remembers."""

    # ------------------------------------------------- from the history

    def note(self, event: Any) -> str | None:
        """Note what one committed event asks for; returns the Attempt's new state when it entered one, else None."""
        if not event.accepted or event.from_state == event.to_state:
            return None
        state = event.to_state
        if event.attempt_id is None:  # a task-level change
            if state == "review":
                self.approve[event.task_id] = event.at + self.delays.review_s
            elif state in TASK_AT_REST:
                self.retire[event.task_id] = event.at + self.delays.retire_grace_s
            else:
                self.retire.pop(event.task_id, None)
            if event.kind == "release":  # an operator handed a resting task back: the loop decides on it again
                self.decide[event.task_id] = None
            return None
        if event.kind == "decide":
            return None
        if state in RECOVERING:
            self.reconcile[event.attempt_id] = None
        elif state == "verifying":
            self.verify[event.attempt_id] = event.at + self.delays.ci_s
        elif state in ATTEMPT_TERMINAL:
            self.decide[event.task_id] = None
        if state == "queued" or state in ATTEMPT_TERMINAL:
            self.admission_due = True  # a new Attempt waits, or an ended one freed its slot
        return state

    # ------------------------------------------------- from the records

    def survey(
        self,
        recovering: Iterable[Any],
        verifying: Iterable[Any],
        undecided: Iterable[str],
        in_review: Iterable[str],
        now: float,
        latest: Mapping[str, str] | None = None,
    ):
        """Replace what is due by what the records say: Attempts Suspect or Reconciling, Attempts Verifying (due `ci_s` after
        they ended), tasks in progress with no active Attempt, and tasks in review (due `review_s` after first seen).

        With `latest` (each undecided task's latest Attempt), a task already `decided` after that very Attempt is not due again.
        """
        self.reconcile = {attempt.attempt_id: None for attempt in recovering}
        self.verify = {a.attempt_id: (now if a.ended_at is None else a.ended_at + self.delays.ci_s) for a in verifying}
        if latest is None:
            self.decide = dict.fromkeys(undecided)
        else:
            self.decided_after = {task_id: after for task_id, after in self.decided_after.items() if latest.get(task_id) == after}
            self.decide = {task_id: None for task_id in undecided if task_id not in self.decided_after}
        self.approve = {task_id: self.approve.get(task_id, now + self.delays.review_s) for task_id in in_review}

    # ------------------------------------------------------- what is due

    def due(self, table: dict[str, float], now: float) -> list[str]:
        """The items of `table` (verify, approve, retire) whose time has come, in the order they were noted."""
        return [item for item, at in table.items() if at <= now]

    def decided(self, task_id: str, after_attempt_id: str) -> None:
        """The loop decided `task_id` after its Attempt `after_attempt_id` ended, and asked for what it said: a survey leaves the
        task off the agenda until another Attempt of it ends."""
        self.decide.pop(task_id, None)
        self.decided_after[task_id] = after_attempt_id

    def reconciled(self, attempt_id: str, result: Any) -> None:
        if reconcile_settled(result):
            self.reconcile.pop(attempt_id, None)

    def verified(self, attempt_id: str, result: Any, now: float) -> None:
        """CI had not answered yet ("pending"): look again half a CI time later; otherwise it is done with."""
        if getattr(result, "detail", None) == "pending":
            self.verify[attempt_id] = now + self.delays.ci_s / 2
        else:
            self.verify.pop(attempt_id, None)
