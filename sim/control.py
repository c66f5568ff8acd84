"""The control plane around the core: admission, the reaper, reconciliation, verification, the loop decision, review, retirement.

Everything here calls `Orchestrator` contracts on a cadence, exactly as a
deployment's scheduler would; nothing reaches into the core's records. What
is due, and what to ask for after a decision, are the agent's
(`shiftchange.agent.control`), shared with the explorer and the runtime: a
listener on the store hands every committed event to an `Agenda`, which
notes an Attempt entering Suspect or Reconciling (reconcile it), Verifying
(verify it once CI may have run), a terminal state (decide the loop's next
step), a task reaching review (a reviewer approves it) or rest (retire it
after a grace period); `retry_for` turns the loop's decision into the retry
to ask for, `blind_retry` is the blind-retry anti-pattern's loop. The
listener only notes; the work runs in the control plane's own processes,
never inside a store transaction.

Admitted Attempts are offered to the workers through a queue. An offer
nobody claimed in `redispatch_s` (the worker crashed, the claim was lost on
the wire) is offered again; a second claim of one Attempt is refused by the
core, so offering twice is safe.

The control plane holds only what it uses (`ControlContext`): the
orchestrator and its store (read, never written, outside the contracts),
the offer queue, the workbench of live tasks, and the callbacks through
which a retired task leaves the run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from copy import copy
from dataclasses import dataclass
from typing import Any

from shiftchange.agent import Agenda, Delays, blind_retry, retry_for
from shiftchange.checkers.history import Retired
from shiftchange.core import Event
from shiftchange.core.states import ATTEMPT_TERMINAL, TASK_AT_REST

from .config import ControlConfig
from .worker import Offer


@dataclass(frozen=True, slots=True)
class ControlContext:
    """What the control plane uses: the core, the offer queue, the live tasks, and where retired tasks go."""

    env: Any
    orchestrator: Any
    store: Any
    offers: Any
    bench: Any
    """The workload's `Workbench` (a task's workspace; the live set)."""
    queue_watch: Any
    """Told when an Attempt is queued and admitted (the metrics' queue age)."""
    retire: Callable[[Retired], None]
    """Writes a retired task's final records into the history."""
    forget: Callable[[str], None]
    """Forgets a retired task everywhere it is kept (store, providers, workbench)."""
    control: ControlConfig
    ci_s: float
    blind_loop: bool = False
    """The blind-retry anti-pattern: every failed Attempt is retried at once, unchanged."""


class ControlPlane:
    """The scheduler's loops, fed by what the history says needs doing (the agent's `Agenda`), and the offers to workers."""

    def __init__(self, context: ControlContext) -> None:
        self.context = context
        self.env = context.env
        control = context.control
        self.agenda = Agenda(Delays(ci_s=context.ci_s, review_s=control.review_s, retire_grace_s=control.retire_grace_s))
        self.offered: dict[str, tuple[float, Offer]] = {}

    # ------------------------------------------------------ the listener

    def note(self, event: Event) -> None:
        """Called for every committed event: the agenda notes what it asks for; an Attempt admitted is offered to the workers."""
        state = self.agenda.note(event)
        if state is None:
            return
        attempt_id = event.attempt_id
        if state == "admitted":
            self._offer(event.task_id, attempt_id)
            self.context.queue_watch.admitted(attempt_id, event.at)
        elif state == "claimed" or state in ATTEMPT_TERMINAL:
            self.offered.pop(attempt_id, None)
        elif state == "queued":
            self.context.queue_watch.queued(attempt_id, self.peek(attempt_id), event.at)

    # ------------------------------------------------------------ reads

    def peek(self, attempt_id: str) -> Any:
        """The live Attempt record, read-only (no copy): for the control plane's cheap questions."""
        with self.context.store.transaction() as tx:
            return tx.attempt(attempt_id)

    def _peek_latest(self, task_id: str) -> Any:
        with self.context.store.transaction() as tx:
            return tx.attempts_of(task_id)[-1]

    def _peek_task_state(self, task_id: str) -> str | None:
        with self.context.store.transaction() as tx:
            task = tx.task(task_id)
            return None if task is None else task.state

    def _offer(self, task_id: str, attempt_id: str) -> None:
        offer = Offer(task_id, attempt_id, self.context.bench.profile(task_id).workspace)
        self.offered[attempt_id] = (self.env.now, offer)
        self.context.offers.put(offer)

    # ---------------------------------------------------------- processes

    def admission(self) -> Generator[Any, Any, None]:
        """Run an admission step when something changed (an Attempt queued or ended), and at least every `admission_idle_s`.

        The controller looks at the whole queue each step, so stepping a
        queue nothing has changed only costs; the idle step still lets
        backoffs wake, deadlines pass and backpressure ease on time.
        """
        control, agenda = self.context.control, self.agenda
        idle_s = 0.0
        while True:
            if agenda.admission_due or idle_s >= control.admission_idle_s:
                agenda.admission_due = False
                idle_s = 0.0
                self.context.orchestrator.run_admission()
            yield self.env.timeout(control.admission_interval_s)
            idle_s += control.admission_interval_s

    def reaper(self) -> Generator[Any, Any, None]:
        interval_s = self.context.control.reap_interval_s
        while True:
            yield self.env.timeout(interval_s)
            self.context.orchestrator.reap()

    def loop(self) -> Generator[Any, Any, None]:
        interval_s = self.context.control.loop_interval_s
        while True:
            yield self.env.timeout(interval_s)
            self.step()

    def step(self) -> None:
        """Work off everything due: reconcile, verify, decide, approve, redispatch, retire."""
        orchestrator, agenda, now = self.context.orchestrator, self.agenda, self.env.now
        for attempt_id in list(agenda.reconcile):
            agenda.reconciled(attempt_id, orchestrator.reconcile_attempt(attempt_id))
        for attempt_id in agenda.due(agenda.verify, now):
            agenda.verified(attempt_id, orchestrator.verify_attempt(attempt_id), now)
        for task_id in list(agenda.decide):
            agenda.decide.pop(task_id)
            self._decide(task_id)
        for task_id in agenda.due(agenda.approve, now):
            agenda.approve.pop(task_id)
            orchestrator.approve(task_id)
        self._redispatch(now)
        for task_id in agenda.due(agenda.retire, now):
            self._retire(task_id, now)

    def _redispatch(self, now: float) -> None:
        """Offer again every Attempt still admitted `redispatch_s` after it was offered (its claim was lost, its worker died)."""
        for attempt_id, (offered_at, offer) in list(self.offered.items()):
            if offered_at + self.context.control.redispatch_s <= now:
                attempt = self.peek(attempt_id)
                if attempt is not None and attempt.state == "admitted":
                    self.offered[attempt_id] = (now, offer)
                    self.context.offers.put(offer)
                else:
                    self.offered.pop(attempt_id)

    def _decide(self, task_id: str) -> None:
        """The loop's decision after an Attempt ended, and the retry it asks for (the blind loop retries without one)."""
        orchestrator = self.context.orchestrator
        if self.context.blind_loop:
            retry = blind_retry(task_id, self._peek_latest(task_id))
            if retry is not None and orchestrator.retry(retry.task_id, retry.reason, retry.plan).accepted:
                return
        decision = orchestrator.decide(task_id)
        retry = retry_for(task_id, decision, self._peek_latest(task_id))
        if retry is not None:
            # A refused retry leaves the task in progress with nothing to run: no_lost_tasks reports it when the run drains.
            orchestrator.retry(retry.task_id, retry.reason, retry.plan)

    def cancel(self, task_id: str) -> None:
        """An operator cancels a task (if it still exists and is not already at rest)."""
        state = self._peek_task_state(task_id)
        if state is not None and state not in TASK_AT_REST:
            self.context.orchestrator.cancel_task(task_id, "operator cancelled the task")

    # --------------------------------------------------------- retirement

    def _retire(self, task_id: str, now: float, drained: bool = False) -> None:
        with self.context.store.transaction() as tx:
            attempts = tx.attempts_of(task_id)
            if not drained and any(a.state not in ATTEMPT_TERMINAL for a in attempts):
                self.agenda.retire[task_id] = now + self.context.control.retire_grace_s  # not finished yet: look again later
                return
            # Shallow copies suffice: a record's fields are strings, numbers and frozen values.
            task = copy(tx.task(task_id))
            intents = tuple(copy(intent) for attempt in attempts for intent in tx.intents_of(attempt.attempt_id))
            attempts = [copy(attempt) for attempt in attempts]
        self.agenda.retire.pop(task_id, None)
        self.context.retire(Retired(now, task, tuple(attempts), intents, drained))
        if not drained:
            self.context.forget(task_id)

    def drain(self) -> None:
        """The run is over: every task still in the store retires now, whatever its state (Jepsen's final read)."""
        now = self.env.now
        for task_id in list(self.context.bench.profiles):
            self._retire(task_id, now, drained=True)
