"""`shiftchange orchestrator`: the control plane as a process, on real cadences, over a store other processes share.

The same duties as the simulator's control plane, decided by the same code
(`shiftchange.agent.control`: the `Agenda` of what is due, `retry_for` after
the loop's decision), but it learns what is due from the store's records
(`Agenda.survey`), not from a listener on its own transactions: other
processes (workers, other orchestrators) write most of what happens, and a
process killed and restarted remembers nothing. Each duty is a scan of the
states that ask for it, so a restarted orchestrator picks up exactly where
the store says things are:

- admission, every `admission_interval_s`, only while this process holds
  the admission leader lease (`runtime/leadership.py`), each step fenced by
  that lease inside its own transaction and preceded by a refresh of the
  admission state from the store (workers end Attempts in other processes);
- the reaper, every `reap_interval_s` (any number of orchestrators may reap:
  the contract is safe under races);
- every `loop_interval_s`: reconcile what is Suspect or Reconciling, verify
  what has been Verifying for `ci_s`, decide the next step of every task in
  progress with no active Attempt (and retry it when the loop says so), once
  per Attempt that ended, and approve what has waited in review for
  `review_s`;
- every `number_events_every_s`, on a store that numbers its history after
  commit (PostgreSQL: `number_events`), the history committed since is
  numbered, so it stays numbered while nobody reads it (every reader numbers
  it too, before it reads).

Every duty judges time by the store's clock (`clock.lease_clock`: the
PostgreSQL server's; this process's wall clock on SQLite), the admission
leader lease and its fence included, so an orchestrator whose own clock is
minutes off reaps, reconciles and leads exactly as one whose clock is right.

A store or provider that does not answer (a cut connection, a restarting
server) costs one round of that duty; it is logged and the next round asks
again.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from shiftchange.agent import Agenda, Delays, retry_for
from shiftchange.agent.control import RECOVERING
from shiftchange.core import CoreError, InputError, Orchestrator, ProviderRefused, ProviderTimeout, ReliabilityConfig, StoreError
from shiftchange.core.table import Table, table_for
from shiftchange.stores import open_store

from .clock import judged_by, lease_clock
from .codehost import HttpProvider
from .config import RuntimeConfig, load_config
from .leadership import FencedStore, Leadership, NotLeader

__all__ = ["ADMISSION_LEASE", "ControlProcess"]

log = logging.getLogger("shiftchange.orchestrator")

ADMISSION_LEASE = "admission"
REFRESH_S = 30.0
"""How often a process rebuilds its own orchestrator's admission state from the store (the leader refreshes every step)."""


class ControlProcess:
    """One orchestrator process: the duties on their cadences, one after another on one thread."""

    def __init__(self, store_url: str, provider_url: str, config: RuntimeConfig, holder: str, table: Table | None = None) -> None:
        """`table` is the spec every Orchestrator of this process runs (`core.table.table_for`); None: the packaged one."""
        self.config = config
        self.table = table_for(table)
        self.stopping = threading.Event()
        self.store = open_store(store_url)  # first: a bad store URL is the first thing said
        try:
            self.clock = lease_clock(self.store)
            provider = HttpProvider(provider_url, clock=self.clock)
        except BaseException:
            self.store.close()
            raise
        reliability = ReliabilityConfig()
        self.orchestrator = Orchestrator(self.store, self.clock, provider, config.core, reliability, table=self.table)
        self.leadership = Leadership(self.store, ADMISSION_LEASE, holder, config.leader_lease_s, self.clock)
        self._admission: Orchestrator | None = None
        self._fenced = FencedStore(self.store, self.leadership)
        self._provider = provider
        self._reliability = reliability
        self.agenda = Agenda(Delays(ci_s=config.ci_s, review_s=config.review_s))
        """What is due, as the last scan of the records found it (a restarted process starts from the records again)."""
        self._refreshed_at = self.clock.now()
        self.counts = {"admission_steps": 0, "admitted": 0, "reaped": 0, "reconciled": 0, "verified": 0, "decided": 0, "approved": 0}
        self.numbered_to = 0
        """The last number the history was given by this process's `number_step` (0: none yet)."""

    def close(self) -> None:
        self.store.close()

    def run(self) -> None:
        config = self.config
        now = self.clock.now()
        due = {"admission": now, "reap": now, "loop": now}
        cadence = {"admission": config.admission_interval_s, "reap": config.reap_interval_s, "loop": config.loop_interval_s}
        duties = {"admission": self.admission_step, "reap": self.reap_step, "loop": self.loop_step}
        if callable(getattr(self.store, "number_events", None)):
            due["number"], cadence["number"], duties["number"] = now, config.number_events_every_s, self.number_step
        while not self.stopping.is_set():
            for name, duty in duties.items():
                if self.stopping.is_set() or self.clock.now() < due[name]:
                    continue
                try:
                    duty()
                except (StoreError, ProviderTimeout, ProviderRefused) as error:
                    log.warning("%s: no answer this round: %s", name, error)
                except CoreError as error:  # a defect, not a fault: said loudly, but it costs a round, not the process
                    log.error("%s: %s: %s", name, type(error).__name__, error)
                due[name] = self.clock.now() + cadence[name]
            self.stopping.wait(max(0.0, min(due.values()) - self.clock.now()))

    # ------------------------------------------------------------- duties

    def admission_step(self) -> None:
        if not self.leadership.hold():
            self._admission = None  # a later leadership starts from the store again
            return
        try:
            if self._admission is None:
                self._admission = Orchestrator(
                    self._fenced, self.clock, self._provider, self.config.core, self._reliability, table=self.table
                )
                log.info("leading admission (generation %s)", self.leadership.generation)
            else:
                self._admission.refresh()
            results = self._admission.run_admission()
        except NotLeader as error:
            log.info("admission skipped: %s", error)
            self._admission = None
            return
        self.counts["admission_steps"] += 1
        self.counts["admitted"] += sum(1 for result in results.values() if result.accepted and result.state == "admitted")

    def reap_step(self) -> None:
        self.counts["reaped"] += len(self.orchestrator.reap())

    def number_step(self) -> None:
        """Number the history committed since the last step (a store that numbers after commit: PostgreSQL)."""
        self.numbered_to = max(self.numbered_to, self.store.number_events())

    def loop_step(self) -> None:
        orchestrator, agenda, now = self.orchestrator, self.agenda, self.clock.now()
        with self.store.transaction() as tx:
            recovering = tx.attempts_in(RECOVERING)
            verifying = tx.attempts_in(("verifying",))
            active_tasks = {a.task_id for a in tx.attempts_in(self.table.active)}
            undecided = [task.task_id for task in tx.tasks_in(("in_progress",)) if task.task_id not in active_tasks]
            latest = {task_id: attempts[-1].attempt_id for task_id in undecided if (attempts := tx.attempts_of(task_id))}
            in_review = [task.task_id for task in tx.tasks_in(("review",))]
        agenda.survey(recovering, verifying, undecided, in_review, now, latest)
        for attempt_id in list(agenda.reconcile):
            if self._each("reconcile", orchestrator.reconcile_attempt, attempt_id):
                self.counts["reconciled"] += 1
        for attempt_id in agenda.due(agenda.verify, now):
            if self._each("verify", orchestrator.verify_attempt, attempt_id):
                self.counts["verified"] += 1
        for task_id in list(agenda.decide):
            self._each("decide", self._decide, task_id)
        for task_id in agenda.due(agenda.approve, now):
            if self._each("approve", orchestrator.approve, task_id):
                self.counts["approved"] += 1
        if now >= self._refreshed_at + REFRESH_S:
            # This process's own admission state grows with every retry it queues and it never admits; start it afresh.
            self._refreshed_at = now
            orchestrator.refresh()

    def _each(self, duty: str, contract: Callable[[str], Any], item: str) -> bool:
        """One item of a duty; one that cannot be done this round costs itself, not the rest of the round."""
        try:
            contract(item)
        except (StoreError, ProviderTimeout, ProviderRefused) as error:
            log.warning("%s %s: no answer this round: %s", duty, item, error)
            return False
        except CoreError as error:
            log.error("%s %s: %s: %s", duty, item, type(error).__name__, error)
            return False
        return True

    def _decide(self, task_id: str) -> None:
        """The loop's decision after the task's latest Attempt ended, and the retry it asks for, if any (agent.control)."""
        attempts = self.store.get_attempts(task_id)
        if not attempts or attempts[-1].state in self.table.active:
            return  # it has an Attempt to run after all (dispatched since the scan)
        latest = attempts[-1]
        decision = self.orchestrator.decide(task_id)
        self.counts["decided"] += 1
        retry = retry_for(task_id, decision, latest)
        if retry is not None:
            result = self.orchestrator.retry(retry.task_id, retry.reason, retry.plan)
            if not result.accepted:
                log.warning("retry of %s refused: %s", task_id, result.reason)
        self.agenda.decided(task_id, latest.attempt_id)


# ---------------------------------------------------------------- the command


def run_orchestrator(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = load_config(args.config)
    if args.store.strip() == "memory:":
        raise InputError("an orchestrator process needs a store other processes can share: sqlite:///path or postgresql://...")
    holder = args.id or f"orchestrator-{os.getpid()}"
    table = table_for(getattr(args, "spec", None))  # a bad --spec is said before the store is opened
    control = ControlProcess(args.store, args.provider, config, holder, table)
    signal.signal(signal.SIGTERM, lambda *_: control.stopping.set())
    log.info("orchestrator %s started, %s; running %s (digest %s)", holder, judged_by(control.clock), table.label, table.digest)
    try:
        control.run()
    finally:
        control.close()
    log.info("orchestrator %s stopped: %s", holder, control.counts)
    return 0
