"""Hypothesis drives the orchestrator through every interleaving it can find and checks DESIGN.md's invariants after each step.

Workers claim, renew and complete with current, stale and forged fences; calls
are delivered twice; the clock jumps past leases; the reaper, reconciliation,
verification and cancellation run in any order; the provider accepts requests
and loses their responses. Every accepted write, every refusal and every
provider effect is then judged by invariants that read only the store's
history and the provider's ledger. The same machine runs on the memory and
the SQLite store; and every transition the core asks of the compiled table
is asked of the `transitions` Machine too (the differential oracle).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from shiftchange.core import (
    Budget,
    CoreConfig,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    ProviderTimeout,
)
from shiftchange.core import orchestrator as orchestrator_module
from shiftchange.core.machine import ACTIVE, ATTEMPT, ATTEMPT_TERMINAL, LEASED, SPEC, TASK
from shiftchange.core.policy import DOMAINS, RETRYING_RESPONSES
from shiftchange.spec.oracle import build_oracle, oracle_fire

TASKS = ("t1", "t2")
WORKERS = ("w1", "w2", "w3")
WORKSPACE = "ws"
FENCED_TRIGGERS = frozenset(row.trigger for row in SPEC.attempt.rows if row.fenced)
CONFIG = CoreConfig(lease_ttl_s=30.0, heartbeat_interval_s=10.0, cancel_ack_timeout_s=20.0)


class RecordingMachine:
    """Wraps the compiled attempt table and keeps every question asked of it, for the differential check."""

    def __init__(self, compiled) -> None:
        self._compiled = compiled
        self.asked: list[tuple[str, str, dict[str, bool], str | None]] = []

    def fire(self, state, trigger, holds):
        values = {name: holds(name) for name in self._compiled.guards_of(state, trigger)}
        fired = self._compiled.fire(state, trigger, holds)
        self.asked.append((state, trigger, values, fired[0] if fired else None))
        return fired

    def __getattr__(self, name):
        return getattr(self._compiled, name)


class Lifecycle(RuleBasedStateMachine):
    """The orchestrator, a store, a lossy provider and three workers holding every lease they were ever given."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(1000.0)
        self.store = self.make_store()
        self.provider = LedgerProvider(supports_idempotency=False, clock=self.clock)
        self.orchestrator = Orchestrator(self.store, self.clock, self.provider, CONFIG)
        self._originals = (orchestrator_module.ATTEMPT, orchestrator_module.TASK)
        self.recorders = {"attempt": RecordingMachine(ATTEMPT), "task": RecordingMachine(TASK)}
        orchestrator_module.ATTEMPT, orchestrator_module.TASK = self.recorders["attempt"], self.recorders["task"]
        self.oracles = {name: build_oracle(SPEC.machines[name]) for name in self.recorders}
        self.leases: list = []
        self.last_call = None
        self.frozen: dict[str, dict] = {}
        self.checked_events = 0
        self.cancelled_at: dict[str, int] = {}

    def make_store(self):
        return MemoryStore()

    def teardown(self) -> None:
        orchestrator_module.ATTEMPT, orchestrator_module.TASK = self._originals
        self.store.close()

    # ----------------------------------------------------------- helpers

    def call(self, function, *args, **kwargs):
        """Make a contract call and remember it, so a later rule can deliver it again."""
        self.last_call = (function, args, kwargs)
        return function(*args, **kwargs)

    def latest(self, task_id):
        attempts = self.store.get_attempts(task_id)
        return attempts[-1] if attempts else None

    def is_current(self, lease) -> bool:
        attempt = self.store.get_attempt(lease.attempt_id)
        return attempt.generation == lease.generation and attempt.state in LEASED

    # ------------------------------------------------------------- rules

    @initialize(idempotent=st.booleans())
    def create_tasks(self, idempotent):
        self.provider.supports_idempotency = idempotent
        for task_id in TASKS:
            self.orchestrator.create_task(task_id, f"objective of {task_id}", WORKSPACE, budget=Budget(attempts_max=4, cost_max_usd=5.0))
            self.orchestrator.accept_task(task_id)

    @rule(task=st.sampled_from(TASKS), hypothesis=st.sampled_from(("plan A", "plan B")))
    def dispatch(self, task, hypothesis):
        self.call(self.orchestrator.dispatch, task, Plan(hypothesis))

    @rule(
        task=st.sampled_from(TASKS),
        reason=st.sampled_from(("short", "the lease expired and nothing landed")),
        hypothesis=st.sampled_from(("plan A", "plan B", "plan C")),
    )
    def retry(self, task, reason, hypothesis):
        before = self.store.get_attempts(task)
        result = self.call(self.orchestrator.retry, task, reason, Plan(hypothesis))
        if len(reason) < CONFIG.reason_length_min:
            assert not result.accepted, "a retry without a ten-character reason was accepted"
        if result.accepted:
            assert before and before[-1].state == "failed"
            assert all(a.state not in ACTIVE for a in before)

    @rule(task=st.sampled_from(TASKS))
    def admit(self, task):
        attempt = self.latest(task)
        if attempt is not None:
            self.call(self.orchestrator.admit, attempt.attempt_id)

    @rule(task=st.sampled_from(TASKS), worker=st.sampled_from(WORKERS), foreign=st.booleans())
    def claim(self, task, worker, foreign):
        before = self.latest(task)
        result = self.call(self.orchestrator.claim_attempt, task, worker, "elsewhere" if foreign else WORKSPACE)
        if foreign:
            assert not result.accepted, "a worker claimed outside its workspace"
        if result.accepted:
            assert before is not None and before.state == "admitted", "a claim took an attempt that was not admitted"
            self.leases.append(result.lease)

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), forged=st.booleans())
    def start(self, data, forged):
        lease = data.draw(st.sampled_from(self.leases))
        self.fenced_call(self.orchestrator.start_attempt, lease, forged)

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), forged=st.booleans())
    def renew(self, data, forged):
        lease = data.draw(st.sampled_from(self.leases))
        self.fenced_call(self.orchestrator.renew_lease, lease, forged)

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), head=st.sampled_from(("sha1", "sha2")), lose=st.booleans(), receipt=st.booleans())
    def effect(self, data, head, lose, receipt):
        self.do_effect(data.draw(st.sampled_from(self.leases)), head, lose, receipt)

    def do_effect(self, lease, head, lose, receipt):
        """A worker asks the gateway, calls the provider only when authorized and not a replay, and may record the receipt."""
        current = self.is_current(lease)
        identity = f"{lease.task_id}:{head}"
        grant = self.call(
            self.orchestrator.grant_tool,
            lease.attempt_id,
            lease.generation,
            lease.token,
            "create-pr",
            identity,
            call_deadline_s=15.0,
            cost_usd=1.0,
        )
        if not current:
            assert not grant.accepted, "a stale lease was granted a tool call"
        if not grant.accepted or grant.replay is not None:
            return
        if lose:
            self.provider.lose_responses(1)
        try:
            effect = self.provider.perform(grant.key, "create-pr", identity, "")
        except ProviderTimeout:
            return
        if receipt:
            self.call(self.orchestrator.record_receipt, lease.attempt_id, lease.generation, lease.token, grant.key, effect.provider_id)

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), forged=st.booleans())
    def complete(self, data, forged):
        lease = data.draw(st.sampled_from(self.leases))
        self.fenced_call(self.orchestrator.complete_attempt, lease, forged, "done", head_sha="sha1")

    @precondition(lambda self: self.leases)
    @rule(
        data=st.data(),
        domain=st.sampled_from(("validation", "provider", "authorization")),
        signature=st.sampled_from(("tests fail", "timeout")),
    )
    def report_failure(self, data, domain, signature):
        lease = data.draw(st.sampled_from(self.leases))
        self.fenced_call(self.orchestrator.report_failure, lease, False, domain, signature)

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), signature=st.sampled_from(("503", "timeout")))
    def call_failed(self, data, signature):
        """A worker reports that a granted provider call failed; the dependency's breaker counts it."""
        lease = data.draw(st.sampled_from(self.leases))
        intents = self.store.get_intents(lease.attempt_id)
        if intents:
            self.fenced_call(self.orchestrator.report_call_failure, lease, False, intents[0].key, signature)

    @rule(worker=st.sampled_from(WORKERS), ok=st.booleans())
    def health_probe(self, worker, ok):
        self.orchestrator.record_health_probe(worker, ok)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def acknowledge_cancel(self, data):
        lease = data.draw(st.sampled_from(self.leases))
        self.fenced_call(self.orchestrator.acknowledge_cancel, lease, False)

    def fenced_call(self, function, lease, forged, *args, **kwargs):
        """A fenced call with the lease's fence, or a forged token; a forged or stale fence must never be accepted."""
        token = "forged-" + lease.token[7:] if forged else lease.token
        current = self.is_current(lease)
        result = self.call(function, lease.attempt_id, lease.generation, token, *args, **kwargs)
        if forged or not current:
            assert not result.accepted, f"{function.__name__} accepted a forged or stale fence"

    @rule(seconds=st.sampled_from((1.0, 9.0, 16.0, 31.0)), then_reap=st.booleans())
    def advance(self, seconds, then_reap):
        """Time passes (possibly past every lease), and the reaper may run right after."""
        self.clock.advance(seconds)
        if then_reap:
            self.call(self.orchestrator.reap)

    @rule()
    def reap(self):
        self.call(self.orchestrator.reap)

    @rule(task=st.sampled_from(TASKS))
    def reconcile(self, task):
        attempt = self.latest(task)
        if attempt is not None:
            self.call(self.orchestrator.reconcile_attempt, attempt.attempt_id)

    @rule(task=st.sampled_from(TASKS), verdict=st.sampled_from(("passed", "failed:tests", None)))
    def verify(self, task, verdict):
        attempt = self.latest(task)
        if attempt is None:
            return
        self.provider.default_verdict = verdict
        self.call(self.orchestrator.verify_attempt, attempt.attempt_id)

    @rule(task=st.sampled_from(TASKS), roll=st.integers(0, 3))
    def cancel(self, task, roll):
        """Cancellation, drawn a quarter as often as other rules so runs also get deep before being cancelled."""
        attempt = self.latest(task)
        if attempt is not None and roll == 0:
            self.call(self.orchestrator.cancel_attempt, attempt.attempt_id, "operator changed priorities")

    @rule(task=st.sampled_from(TASKS), worker=st.sampled_from(WORKERS), head=st.sampled_from(("sha1", "sha2")))
    def progress(self, task, worker, head):
        """One step along the happy path of the task's latest attempt, so interleavings reach deep states."""
        attempt = self.latest(task)
        if attempt is None:
            self.call(self.orchestrator.dispatch, task, Plan("plan A"))
            return
        lease = next((held for held in self.leases if held.attempt_id == attempt.attempt_id), None)
        state = attempt.state
        if state == "queued":
            self.call(self.orchestrator.admit, attempt.attempt_id)
        elif state == "admitted":
            self.claim(task, worker, False)
        elif state == "claimed" and lease is not None:
            self.call(self.orchestrator.start_attempt, lease.attempt_id, lease.generation, lease.token)
        elif state == "running" and lease is not None and not self.store.get_intents(attempt.attempt_id):
            self.do_effect(lease, head, lose=False, receipt=True)
        elif state == "running" and lease is not None:
            self.call(self.orchestrator.complete_attempt, lease.attempt_id, lease.generation, lease.token, "done", head_sha=head)
        elif state in ("suspect", "reconciling"):
            self.call(self.orchestrator.reconcile_attempt, attempt.attempt_id)
        elif state == "verifying":
            self.call(self.orchestrator.verify_attempt, attempt.attempt_id)
        elif state == "cancelling" and lease is not None:
            self.call(self.orchestrator.acknowledge_cancel, lease.attempt_id, lease.generation, lease.token)
        elif state in ATTEMPT_TERMINAL:
            decision = self.call(self.orchestrator.decide, task)
            if getattr(decision, "kind", None) in ("retry", "correct"):
                self.retry(task, "the previous attempt failed; trying again", f"plan after {attempt.number}")

    @rule(task=st.sampled_from(TASKS))
    def decide(self, task):
        self.call(self.orchestrator.decide, task)

    @precondition(lambda self: self.last_call is not None)
    @rule()
    def deliver_again(self):
        """Duplicate delivery: the same call arrives a second time."""
        function, args, kwargs = self.last_call
        function(*args, **kwargs)

    # -------------------------------------------------------- invariants

    def attempts(self):
        return [a for task in TASKS for a in self.store.get_attempts(task)]

    @invariant()
    def single_owner(self):
        now = self.clock.now()
        for task in TASKS:
            holders = [a for a in self.store.get_attempts(task) if a.state in LEASED and a.expires_at is not None and a.expires_at > now]
            assert len(holders) <= 1, f"two attempts of {task} hold authority: {[a.attempt_id for a in holders]}"

    @invariant()
    def append_only_attempts(self):
        for task in TASKS:
            attempts = self.store.get_attempts(task)
            assert [a.number for a in attempts] == list(range(1, len(attempts) + 1))
            for attempt in attempts[1:]:
                assert attempt.previous_attempt_id == f"{task}#{attempt.number - 1}"
                assert attempt.reason and len(attempt.reason) >= CONFIG.reason_length_min
            for attempt in attempts:
                if attempt.state in ATTEMPT_TERMINAL:
                    snapshot = asdict(attempt)
                    assert self.frozen.setdefault(attempt.attempt_id, snapshot) == snapshot, f"terminal {attempt.attempt_id} changed"

    @invariant()
    def history_judges_every_write(self):
        """fenced_writes, suspect_then_reconcile, cancel_is_final, complete_audit and result_before_verification, from the history alone.

        result_before_verification: only a result the lease holder reported (complete) enters Verifying; effects that
        reconciliation found without one end the Attempt failed, so partial work is never verified into a success.
        """
        events = self.store.events()
        attempts = {a.attempt_id: a for a in self.attempts()}
        path: dict[str, list[str]] = {}
        for event in events:
            attempt = attempts.get(event.attempt_id) if event.attempt_id else None
            if event.accepted and event.kind in FENCED_TRIGGERS:
                assert event.generation == attempt.generation, f"fenced_writes: {event} carried a stale generation"
            if event.accepted and attempt is not None and event.from_state != event.to_state:
                path.setdefault(event.attempt_id, []).append(event.to_state)
                if event.to_state == "verifying":
                    assert event.kind == "complete", f"result_before_verification: {event.attempt_id} entered verifying by {event.kind}"
            if event.accepted and event.kind == "cancel" and event.attempt_id:
                self.cancelled_at.setdefault(event.attempt_id, event.seq)
            if event.accepted and event.kind in ("claim", "grant_tool") and event.attempt_id in self.cancelled_at:
                assert event.seq < self.cancelled_at[event.attempt_id], f"cancel_is_final: {event.kind} after cancellation"
        for attempt_id, states in path.items():
            attempt = attempts[attempt_id]
            assert states[-1] == attempt.state, f"complete_audit: {attempt_id} is {attempt.state} but its events end at {states[-1]}"
            if "suspect" in states and attempt.state in ATTEMPT_TERMINAL:
                after = states[states.index("suspect") :]
                assert "reconciling" in after, f"suspect_then_reconcile: {attempt_id} went {states}"
            if attempt.state == "cancelled":
                assert "reconciling" in states, f"cancel_is_final: {attempt_id} cancelled without reconciliation"

    @invariant()
    def classified_retry(self):
        for task in TASKS:
            attempts = self.store.get_attempts(task)
            for previous, new in itertools.pairwise(attempts):
                domain = DOMAINS[previous.failure_domain]
                assert previous.state == "failed" and domain.response in RETRYING_RESPONSES, f"classified_retry: {new.attempt_id}"
                if domain.changed_hypothesis_required:
                    assert new.hypothesis != previous.hypothesis, f"classified_retry: {new.attempt_id} repeats its hypothesis"

    @invariant()
    def one_effect_per_operation(self):
        for effect in self.provider.ledger:
            same = self.provider.effects_for(effect.operation, effect.identity)
            assert len(same) == 1, f"one_effect_per_operation: {len(same)} effects for {effect.identity}"
            intent = self.store.get_intent(effect.key)
            assert intent is not None, f"complete_audit: effect {effect.provider_id} has no recorded intent"

    @invariant()
    def budgets_hold(self):
        for task in TASKS:
            record = self.store.get_task(task)
            assert record.cost_usd <= record.budget.cost_max_usd
            assert len(self.store.get_attempts(task)) <= record.budget.attempts_max
            for attempt in self.store.get_attempts(task):
                assert attempt.cost_usd <= self.orchestrator.reliability.attempt_spend_max_usd

    @invariant()
    def admission_matches_the_store(self):
        """Admission (derived state) agrees with the store: queued ones wait (or sleep out a backoff), ended ones are gone."""
        limit = self.orchestrator.reliability.admission.partition_concurrency_max
        assert self.orchestrator.admission.in_flight(WORKSPACE) <= limit
        for attempt in self.attempts():
            status = self.orchestrator.admission_status(attempt.attempt_id)
            if attempt.state == "queued":
                expected = {"waiting", "sleeping"} if attempt.eligible_at is not None else {"waiting"}
                assert status in expected, (attempt.attempt_id, status)
            elif attempt.state in ATTEMPT_TERMINAL:
                assert status == "gone", (attempt.attempt_id, attempt.state, status)

    @invariant()
    def compiled_table_agrees_with_transitions(self):
        """Differential: every question the core asked of a compiled table gets the same answer from the transitions Machine."""
        for name, recorder in self.recorders.items():
            oracle, model = self.oracles[name]
            for state, trigger, values, dest in recorder.asked:
                assert oracle_fire(oracle, model, state, trigger, values) == dest, (name, state, trigger, values)
            recorder.asked.clear()


class SQLiteLifecycle(Lifecycle):
    """The same machine over a SQLite file."""

    def make_store(self):
        from shiftchange.core.sqlite_store import SQLiteStore

        self.directory = Path(tempfile.mkdtemp(prefix="shiftchange-"))
        return SQLiteStore(self.directory / "store.sqlite")

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.directory, ignore_errors=True)


COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much], "stateful_step_count": 80}

TestMemoryLifecycle = Lifecycle.TestCase
TestMemoryLifecycle.settings = settings(max_examples=200, **COMMON)
TestSQLiteLifecycle = SQLiteLifecycle.TestCase
TestSQLiteLifecycle.settings = settings(max_examples=40, **COMMON)


class ManyLifecycles(Lifecycle):
    pass


class ManySQLiteLifecycles(SQLiteLifecycle):
    pass


TestManyMemoryLifecycles = pytest.mark.slow(ManyLifecycles.TestCase)
TestManyMemoryLifecycles.settings = settings(max_examples=3000, **{**COMMON, "stateful_step_count": 150})
TestManySQLiteLifecycles = pytest.mark.slow(ManySQLiteLifecycles.TestCase)
TestManySQLiteLifecycles.settings = settings(max_examples=500, **{**COMMON, "stateful_step_count": 150})
