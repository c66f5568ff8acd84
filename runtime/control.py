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
  the admission leader lease (`core/leadership.py`), each step fenced by
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
  it too, before it reads);
- with `--metrics-port`, every `SURVEY_EVERY_S`, a scan of the live records
  for the metrics (`runtime/metrics.py`, docs/metrics.md): Attempts and
  tasks by state, leases held and run out, the oldest wait to be claimed,
  and whether a task whose lease this process expired has been claimed
  again (its time to recover). The duties count what they did as they do it.

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
from shiftchange.core import (
    CoreError,
    InputError,
    Orchestrator,
    ProviderRefused,
    ProviderTimeout,
    ReliabilityConfig,
    StoreError,
    StoreRetryable,
)
from shiftchange.core.leadership import FencedStore, Leadership, NotLeader
from shiftchange.core.states import ATTEMPT_STATES, ATTEMPT_TERMINAL, TASK_AT_REST, TASK_RESTING, TASK_STATES, TASK_TERMINAL
from shiftchange.core.table import Table, table_for
from shiftchange.stores import open_store

from .clock import judged_by, lease_clock
from .config import RuntimeConfig, load_config
from .http_provider import HttpProvider
from .metrics import Metrics, start_metrics

__all__ = ["ADMISSION_LEASE", "ControlProcess"]

log = logging.getLogger("shiftchange.orchestrator")

ADMISSION_LEASE = "admission"
REFRESH_S = 30.0
"""How often a process rebuilds its own orchestrator's admission state from the store (the leader refreshes every step)."""
SURVEY_EVERY_S = 1.0
"""How often, with metrics on, the orchestrator scans the live records for them."""
LIVE_ATTEMPTS = tuple(sorted(ATTEMPT_STATES - ATTEMPT_TERMINAL))
LIVE_TASKS = tuple(sorted(TASK_STATES - TASK_TERMINAL))
"""The states the survey counts: not those that end a record (they only grow), but the resting ones a person must act on."""
WAITING = ("queued", "admitted")
"""An Attempt waiting to be claimed: the queue whose oldest wait the metrics show."""
WATCHED_MAX = 10_000
"""The most tasks whose recovery one process watches at once (after a lease it expired); past it, the oldest are let go."""


class ControlProcess:
    """One orchestrator process: the duties on their cadences, one after another on one thread."""

    def __init__(
        self,
        store_url: str,
        provider_url: str,
        config: RuntimeConfig,
        holder: str,
        table: Table | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`table` is the spec every Orchestrator of this process runs (`core.table.table_for`); None: the packaged one.
        `metrics` counts what the duties do and sees the survey's scans (`runtime.metrics`); None counts nothing."""
        self.config = config
        self.metrics = Metrics("orchestrator") if metrics is None else metrics
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
        self.watched: dict[str, tuple[int, float]] = {}
        """Tasks whose lease this process expired, not yet claimed again: task id -> (the Attempt's number, when it was expired)."""

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
        if self.metrics.on:
            due["survey"], cadence["survey"], duties["survey"] = now, SURVEY_EVERY_S, self.survey_step
        while not self.stopping.is_set():
            for name, duty in duties.items():
                if self.stopping.is_set() or self.clock.now() < due[name]:
                    continue
                try:
                    duty()
                except (StoreError, StoreRetryable, ProviderTimeout, ProviderRefused) as error:
                    log.warning("%s: no answer this round: %s", name, error)
                    self.metrics.duty_failed(name)
                except CoreError as error:  # a defect, not a fault: said loudly, but it costs a round, not the process
                    log.error("%s: %s: %s", name, type(error).__name__, error)
                    self.metrics.duty_failed(name)
                due[name] = self.clock.now() + cadence[name]
            self.stopping.wait(max(0.0, min(due.values()) - self.clock.now()))

    # ------------------------------------------------------------- duties

    def admission_step(self) -> None:
        leading = self.leadership.hold()
        self.metrics.leading(leading)
        if not leading:
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
        for result in results.values():
            self.metrics.answered("admission", result)

    def reap_step(self) -> None:
        moved = self.orchestrator.reap()
        self.counts["reaped"] += len(moved)
        if not self.metrics.on or not moved:
            return
        now = self.clock.now()
        for attempt_id, state in moved:
            if state != "suspect":  # a cancellation the worker never acknowledged: Reconciling
                self.metrics.cancellation_timed_out()
                continue
            attempt = self.store.get_attempt(attempt_id)
            heard = None if attempt is None else (attempt.heartbeat_at or attempt.claimed_at)
            self.metrics.expired(None if heard is None else now - heard)
            if attempt is not None:
                self.watched.pop(attempt.task_id, None)  # the latest expiry is the one a recovery follows
                self.watched[attempt.task_id] = (attempt.number, now)
        while len(self.watched) > WATCHED_MAX:
            del self.watched[next(iter(self.watched))]

    def survey_step(self) -> None:
        """For the metrics: the live records by state, the leases, the oldest wait, and the watched tasks claimed again since."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            attempts = tx.attempts_in(LIVE_ATTEMPTS)
            tasks = tx.tasks_in(LIVE_TASKS)
            watched = {task_id: tx.attempts_of(task_id) for task_id in self.watched}
        leased = [attempt for attempt in attempts if attempt.state in self.table.leased]
        run_out = sum(1 for attempt in leased if attempt.expires_at is not None and attempt.expires_at <= now)
        waits = [now - max(a.created_at, a.eligible_at or a.created_at) for a in attempts if a.state in WAITING]
        self.metrics.survey(_by_state(LIVE_ATTEMPTS, attempts), _by_state(LIVE_TASKS, tasks), len(leased), run_out, max(waits, default=0.0))
        task_states = {task.task_id: task.state for task in tasks}
        for task_id, tries in watched.items():
            number, expired_at = self.watched[task_id]
            claimed = [a.claimed_at for a in tries if a.number > number and a.claimed_at is not None]
            if claimed:
                self.metrics.recovered(min(claimed) - expired_at)
                del self.watched[task_id]
            elif task_states.get(task_id, "done") in TASK_AT_REST:  # ended or resting: nothing will claim it without a person
                del self.watched[task_id]

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
            if self._each("reconcile_attempt", orchestrator.reconcile_attempt, attempt_id):
                self.counts["reconciled"] += 1
        for attempt_id in agenda.due(agenda.verify, now):
            if self._each("verify_attempt", orchestrator.verify_attempt, attempt_id):
                self.counts["verified"] += 1
        for task_id in list(agenda.decide):
            self._each("decide", self._decide, task_id, counted=False)
        for task_id in agenda.due(agenda.approve, now):
            if self._each("approve", orchestrator.approve, task_id):
                self.counts["approved"] += 1
        if now >= self._refreshed_at + REFRESH_S:
            # This process's own admission state grows with every retry it queues and it never admits; start it afresh.
            self._refreshed_at = now
            orchestrator.refresh()

    def _each(self, duty: str, contract: Callable[[str], Any], item: str, counted: bool = True) -> bool:
        """One item of a duty (its answer counted as the contract `duty`'s unless `counted` is False: it counts its own);
        one that cannot be done this round costs itself, not the rest of the round."""
        try:
            answer = contract(item)
        except (StoreError, StoreRetryable, ProviderTimeout, ProviderRefused) as error:
            log.warning("%s %s: no answer this round: %s", duty, item, error)
            self.metrics.unanswered(duty)
            return False
        except CoreError as error:
            log.error("%s %s: %s: %s", duty, item, type(error).__name__, error)
            self.metrics.unanswered(duty)
            return False
        if counted:
            self.metrics.answered(duty, answer)
        return True

    def _decide(self, task_id: str) -> None:
        """The loop's decision after the task's latest Attempt ended, and the retry it asks for, if any (agent.control)."""
        attempts = self.store.get_attempts(task_id)
        if not attempts or attempts[-1].state in self.table.active:
            return  # it has an Attempt to run after all (dispatched since the scan)
        latest = attempts[-1]
        decision = self.orchestrator.decide(task_id)
        self.counts["decided"] += 1
        self.metrics.answered("decide", decision)
        if self.metrics.on and getattr(decision, "kind", None) is not None:
            task = self.store.get_task(task_id)
            self.metrics.decided(decision.kind, task.state if task is not None and task.state in TASK_RESTING else None)
        retry = retry_for(task_id, decision, latest)
        if retry is not None:
            result = self.orchestrator.retry(retry.task_id, retry.reason, retry.plan)
            self.metrics.answered("retry", result)
            if not result.accepted:
                log.warning("retry of %s refused: %s", task_id, result.reason)
        self.agenda.decided(task_id, latest.attempt_id)


def _by_state(states: tuple[str, ...], records: list[Any]) -> dict[str, int]:
    """How many of `records` are in each of `states`, every state named (0 included: a series that vanishes cannot alert)."""
    counts = dict.fromkeys(states, 0)
    for record in records:
        counts[record.state] = counts.get(record.state, 0) + 1
    return counts


# ---------------------------------------------------------------- the command


def run_orchestrator(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = load_config(args.config)
    if args.store.strip() == "memory:":
        raise InputError("an orchestrator process needs a store other processes can share: sqlite:///path or postgresql://...")
    holder = args.id or f"orchestrator-{os.getpid()}"
    table = table_for(getattr(args, "spec", None))  # a bad --spec is said before the store is opened
    # Then the metrics: a missing prometheus_client or a port taken is said before the store is opened (SQLite would create it).
    metrics = start_metrics("orchestrator", getattr(args, "metrics_port", None), getattr(args, "metrics_host", "127.0.0.1"))
    try:
        control = ControlProcess(args.store, args.provider, config, holder, table, metrics)
        metrics.identify(holder, table.label, table.digest)
        signal.signal(signal.SIGTERM, lambda *_: control.stopping.set())
        log.info("orchestrator %s started, %s; running %s (digest %s)", holder, judged_by(control.clock), table.label, table.digest)
        try:
            control.run()
        finally:
            control.close()
    finally:
        metrics.close()
    log.info("orchestrator %s stopped: %s", holder, control.counts)
    return 0
