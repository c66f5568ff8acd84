"""The Hypothesis stateful machine over any orchestrator: `orchestrator_machine(make_orchestrator)`.

Hypothesis drives the factory's orchestrator through interleavings of every
contract: workers claim, renew, start, call tools and complete with their
own, forged, stale, newer and borrowed fences; calls are delivered twice;
the clock jumps, or lands exactly on a lease's expiry; the reaper,
reconciliation, verification, cancellation and the loop decision run in any
order; the provider loses responses; bad input arrives between good calls.

Two judges watch, and neither trusts the implementation's own account:

- The model. It knows what the machine did and what came back, and keeps
  the authority facts independently: each lease it was handed, the expiry
  it computed for it (claim or renewal time plus `lease_ttl_s`, brought
  forward to the moment a row revokes the holder's authority), the highest
  generation of each task, which Attempts were cancelled and which
  completed, what each terminal Attempt looked like when it ended, and each
  worker's health probes. Every answer is checked against it and against
  the spec's own table (read here from `shiftchange.spec`, not the core):
  a fenced call is accepted only with the lease's own fence, from a state
  whose row the trigger has, before the model's expiry, even if the reaper
  has not run; the reaper moves exactly the leases the model says expired;
  a call the table must accept is not refused.
- The checkers, through `judge`: after every step, the history and the
  provider's ledger so far are judged by the same invariant checkers a
  simulated run is (all but `no_lost_tasks`, since tasks are still in flight).

Why no preconditions. A rule that draws a lease would need one while no
lease exists; instead, the tasks are created and dispatched at
initialization, and a fenced rule with no lease to draw presents a made-up
fence for an Attempt that has none (which must be refused). Every rule draw
therefore runs, and the objects it acts on are drawn from the live ones
(`st.sampled_from` over the leases and Attempts that exist). A test keeps
this honest (no rule has a precondition).

Why no Bundles: a Bundle is empty until its first result, and a rule that
draws from an empty one is filtered out, which is the rejection this design
avoids; the live lists above are never empty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as seeded
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from shiftchange.core import (
    Attempt,
    Budget,
    Claim,
    CoreConfig,
    InputError,
    Lease,
    LedgerProvider,
    ManualClock,
    NotFound,
    Plan,
    ProviderTimeout,
    ReliabilityConfig,
    Renewal,
)
from shiftchange.spec import load_spec

from .checks import Violation, expect, expect_equal
from .judge import INVARIANTS, VIOLATED, Judge, context_for, ledger_from
from .rig import OrchestratorFactory

__all__ = ["OrchestratorMachine", "orchestrator_machine", "run_machine"]

TASKS = ("t1", "t2")
WORKERS = ("w1", "w2", "w3")
WORKSPACE = "ws"
CONFIG = CoreConfig(lease_ttl_s=30.0, heartbeat_interval_s=10.0, cancel_ack_timeout_s=20.0)
RELIABILITY = ReliabilityConfig()
BUDGET = Budget(attempts_max=4, cost_max_usd=5.0)
FENCES = ("own", "own", "own", "own", "forged token", "stale generation", "newer generation", "borrowed")
"""How a fenced rule presents a lease: half the time its own fence (first: shrinking tends to it), else one of four to be refused."""
REASONS = ("short", "the lease expired and nothing landed")

# The spec's table, read as an oracle independent of the core's compiled machine.
_SPEC = load_spec()
TERMINAL = frozenset(_SPEC.attempt.terminal_states)
SOURCES: dict[str, frozenset[str]] = {
    trigger: frozenset(source for source, _dest, row in _SPEC.attempt.edges() if row.trigger == trigger)
    for trigger in _SPEC.attempt.triggers
}
"""For each Attempt trigger, the states it has a row from: from any other state it must be refused."""
LEASED = SOURCES["renew"]
EXPIRABLE = SOURCES["expire"]
REVOKING = frozenset(row.trigger for _source, _dest, row in _SPEC.attempt.edges() if "revoke_authority" in row.effects)
"""Triggers whose rows end the holder's run: its lease ends with them (`revoke_authority`)."""
WORKING = frozenset({"queued", "admitted", "claimed", "running", "verifying"})
"""States that do or await work: a cancelled Attempt never enters one again."""
RESTING = frozenset(name for name, state in _SPEC.task.states.items() if state.resting)
JUDGED = tuple(name for name in INVARIANTS if name != "no_lost_tasks")
"""Every invariant but no_lost_tasks, which holds only once a run has drained."""


@dataclasses.dataclass(slots=True)
class _Held:
    """A lease the machine was handed, and the expiry the model computed for it."""

    lease: Lease
    expires_at: float


class OrchestratorMachine(RuleBasedStateMachine):
    """The machine; `orchestrator_machine(make_orchestrator)` makes a subclass bound to a factory, ready to run.

    Subclass it to add invariants of your own (`@invariant()` methods reading
    `self.orchestrator`, `self.store`, `self.provider`, `self.clock`).
    """

    make_orchestrator: ClassVar[Callable[..., Any] | None] = None
    config: ClassVar[CoreConfig] = CONFIG
    reliability: ClassVar[ReliabilityConfig] = RELIABILITY

    def __init__(self) -> None:
        super().__init__()
        factory = type(self).make_orchestrator
        if factory is None:
            raise TypeError(f"{type(self).__name__} has no factory: make the machine with orchestrator_machine(make_orchestrator)")
        self.clock = ManualClock(1000.0)
        self.provider = LedgerProvider(supports_idempotency=False, clock=self.clock)
        self.orchestrator = factory(clock=self.clock, provider=self.provider, config=self.config, reliability=self.reliability)
        self.store = self.orchestrator.store
        self.judge = Judge(context_for(self.config, self.reliability), JUDGED)
        self.seen_seq = 0
        self.seen_effects = 0
        # The model: what the machine knows, independently of what the store says.
        self.attempt_ids: dict[str, list[str]] = {task: [] for task in TASKS}
        self.states: dict[str, str] = {}
        self.held: dict[str, _Held] = {}
        self.leases: list[Lease] = []
        self.generations: dict[str, int] = {}
        self.tokens: set[str] = set()
        self.cancelled: set[str] = set()
        self.cancel_deadlines: dict[str, float] = {}
        self.cancelled_tasks: set[str] = set()
        self.completed: set[str] = set()
        self.frozen: dict[str, Attempt] = {}
        self.probes: dict[str, tuple[float, bool]] = {}
        self.last: Callable[[], object] | None = None

    def teardown(self) -> None:
        self.store.close()

    # ------------------------------------------------------------ setup

    @initialize(idempotent=st.booleans())
    def create_and_dispatch(self, idempotent: bool) -> None:
        """Two tasks, accepted and dispatched: every rule finds an Attempt to act on from the first step."""
        self.provider.supports_idempotency = idempotent
        for task_id in TASKS:
            self.orchestrator.create_task(task_id, f"objective of {task_id}", WORKSPACE, budget=BUDGET)
            expect(self.orchestrator.accept_task(task_id).accepted, f"accept_task({task_id!r}) of a new task was refused")
            self._dispatch(task_id, "plan A")
        self._observe()

    # ------------------------------------------------------------ rules: the task and its Attempts

    @rule(task=st.sampled_from(TASKS), hypothesis=st.sampled_from(("plan A", "plan B")))
    def dispatch(self, task: str, hypothesis: str) -> None:
        self._dispatch(task, hypothesis)

    @rule(task=st.sampled_from(TASKS), reason=st.sampled_from(REASONS), hypothesis=st.sampled_from(("plan A", "plan B", "plan C")))
    def retry(self, task: str, reason: str, hypothesis: str) -> None:
        self._retry(task, reason, hypothesis)

    @rule(data=st.data())
    def admit(self, data: st.DataObject) -> None:
        self._admit(self._any_attempt(data))

    @rule(
        task=st.sampled_from(TASKS),
        worker=st.sampled_from(WORKERS),
        foreign=st.sampled_from((False, False, False, True)),
        healthy=st.sampled_from((None, None, True, False)),
    )
    def claim(self, task: str, worker: str, foreign: bool, healthy: bool | None) -> None:
        """A claim, a quarter of them from outside the task's workspace and a quarter with a failing probe: both must be refused."""
        self._claim(task, worker, "elsewhere" if foreign else WORKSPACE, healthy)

    @rule(worker=st.sampled_from(WORKERS), ok=st.booleans())
    def health_probe(self, worker: str, ok: bool) -> None:
        self.orchestrator.record_health_probe(worker, ok)
        self.probes[worker] = (self.clock.now(), ok)

    # ------------------------------------------------------------ rules: fenced calls

    @rule(data=st.data(), variant=st.sampled_from(FENCES))
    def start(self, data: st.DataObject, variant: str) -> None:
        self._fenced("start", self.orchestrator.start_attempt, self._fence(data, variant))

    @rule(data=st.data(), variant=st.sampled_from(FENCES))
    def renew(self, data: st.DataObject, variant: str) -> None:
        self._fenced("renew", self.orchestrator.renew_lease, self._fence(data, variant))

    @rule(data=st.data(), variant=st.sampled_from(FENCES))
    def checkpoint(self, data: st.DataObject, variant: str) -> None:
        self._fenced("checkpoint", self.orchestrator.checkpoint, self._fence(data, variant), "step 3 done")

    @rule(data=st.data(), variant=st.sampled_from(FENCES), head=st.sampled_from(("sha1", "sha2")))
    def complete(self, data: st.DataObject, variant: str, head: str) -> None:
        self._fenced("complete", self.orchestrator.complete_attempt, self._fence(data, variant), "done", head_sha=head)

    @rule(
        data=st.data(),
        variant=st.sampled_from(FENCES),
        domain=st.sampled_from(("validation", "provider", "authorization", "executor")),
        signature=st.sampled_from(("tests fail", "timeout")),
    )
    def report_failure(self, data: st.DataObject, variant: str, domain: str, signature: str) -> None:
        self._fenced("report_failure", self.orchestrator.report_failure, self._fence(data, variant), domain, signature)

    @rule(data=st.data(), variant=st.sampled_from(FENCES))
    def acknowledge_cancel(self, data: st.DataObject, variant: str) -> None:
        self._fenced("cancel_acknowledged", self.orchestrator.acknowledge_cancel, self._fence(data, variant))

    @rule(
        data=st.data(),
        variant=st.sampled_from(FENCES),
        head=st.sampled_from(("sha1", "sha2")),
        lose=st.booleans(),
        receipt=st.booleans(),
        spans=st.booleans(),
    )
    def effect(self, data: st.DataObject, variant: str, head: str, lose: bool, receipt: bool, spans: bool) -> None:
        """A worker asks the gateway, calls the provider only when granted and not a replay, and may record the receipt."""
        self._effect(self._fence(data, variant), head, lose, receipt, spans)

    @rule(data=st.data(), variant=st.sampled_from(FENCES), signature=st.sampled_from(("503", "timeout")))
    def call_failed(self, data: st.DataObject, variant: str, signature: str) -> None:
        """A worker reports that a granted call failed, under the key of one of its Attempt's intents (or one never minted)."""
        self._call_failed(self._fence(data, variant), signature)

    # ------------------------------------------------------------ rules: time, the reaper, and the orchestrator's own steps

    @rule(seconds=st.sampled_from((1.0, 9.0, 16.0, 31.0)), then_reap=st.booleans())
    def advance(self, seconds: float, then_reap: bool) -> None:
        """Time passes (possibly past every lease), and the reaper may run right after."""
        self.clock.advance(seconds)
        if then_reap:
            self._reap()

    @rule(
        data=st.data(),
        offset=st.sampled_from((0.0, -0.5, 0.5)),
        call=st.sampled_from(("complete", "complete", "renew", "grant_tool", "start", "checkpoint", "report_failure")),
    )
    def at_expiry(self, data: st.DataObject, offset: float, call: str) -> None:
        """The clock lands on the expiry of a lease still honoured (or half a second either side), and its holder, unaware, calls.

        The instant authority ends: just before it the call has authority, at and
        after it none, whether or not the reaper has run since. Completion is drawn
        twice as often as the others: it is the call a late worker makes that matters most.
        """
        now = self.clock.now()
        live = [held for a, held in self.held.items() if self.states[a] in LEASED and held.expires_at + offset > now]
        if not live:
            self.clock.advance(1.0)
            return
        held = data.draw(st.sampled_from(live), label="lease")
        self.clock.set(held.expires_at + offset)
        fence = (held.lease.attempt_id, held.lease.generation, held.lease.token)
        if call == "grant_tool":
            self._effect(fence, "sha2", lose=False, receipt=True, spans=False)
            return
        contracts = {
            "complete": (self.orchestrator.complete_attempt, ("done",)),
            "renew": (self.orchestrator.renew_lease, ()),
            "start": (self.orchestrator.start_attempt, ()),
            "checkpoint": (self.orchestrator.checkpoint, ("step 4 done",)),
            "report_failure": (self.orchestrator.report_failure, ("executor", "crash")),
        }
        contract, arguments = contracts[call]
        self._fenced(call, contract, fence, *arguments)

    @rule()
    def reap(self) -> None:
        self._reap()

    @rule(data=st.data())
    def reconcile(self, data: st.DataObject) -> None:
        self._plain("reconcile_attempt", self._any_attempt(data))

    @rule(data=st.data(), verdict=st.sampled_from(("passed", "failed:tests", None)))
    def verify(self, data: st.DataObject, verdict: str | None) -> None:
        self.provider.default_verdict = verdict
        self._plain("verify_attempt", self._any_attempt(data))

    @rule(data=st.data(), roll=st.integers(0, 7))
    def cancel(self, data: st.DataObject, roll: int) -> None:
        """Cancellation of any Attempt, an eighth as often as other rules (the roll), so runs also get deep before they are cancelled."""
        attempt_id = self._any_attempt(data)
        if roll == 0:
            self._cancel(attempt_id)
        else:
            self._plain("reconcile_attempt", attempt_id)

    @rule(data=st.data(), roll=st.integers(0, 3))
    def cancel_while_working(self, data: st.DataObject, roll: int) -> None:
        """A quarter as often: an Attempt whose worker holds a lease is cancelled, and the worker, not yet told, calls on under it.

        As a worker between heartbeats does, it asks for a tool grant, starts,
        completes and renews: no new start or tool grant may follow a cancellation.
        """
        if roll != 0 or not self.leases:
            self.clock.advance(1.0)
            return
        lease = data.draw(st.sampled_from(self.leases), label="lease")
        self._cancel(lease.attempt_id)
        fence = (lease.attempt_id, lease.generation, lease.token)
        for call in (
            partial(self._effect, fence, "sha1", False, False, True),
            partial(self._fenced, "start", self.orchestrator.start_attempt, fence),
            partial(self._fenced, "complete", self.orchestrator.complete_attempt, fence, "done"),
            partial(self._fenced, "renew", self.orchestrator.renew_lease, fence),
        ):
            self._observe()
            call()

    @rule(task=st.sampled_from(TASKS), roll=st.integers(0, 15))
    def cancel_task(self, task: str, roll: int) -> None:
        """A task cancelled by an operator, a sixteenth as often (the roll); otherwise the loop decides on it."""
        if roll == 0:
            self._cancel_task(task)
        else:
            self._decide(task)

    @rule(task=st.sampled_from(TASKS))
    def decide(self, task: str) -> None:
        self._decide(task)

    @rule(task=st.sampled_from(TASKS))
    def operator(self, task: str) -> None:
        """An operator approves a task in review, or releases a resting one with one more Attempt of budget."""
        state = self.store.get_task(task).state
        if state == "review":
            result = self.orchestrator.approve(task)
        else:
            budget = dataclasses.replace(BUDGET, attempts_max=BUDGET.attempts_max + 1)
            result = self.orchestrator.release(task, "an operator looked and allows one more try", budget)
        if result.accepted:
            expect(state == "review" or state in RESTING, f"the operator's call on {task} in {state} was accepted")

    @rule(
        task=st.sampled_from(TASKS),
        worker=st.sampled_from(WORKERS),
        head=st.sampled_from(("sha1", "sha2")),
        steps=st.integers(1, 4),
    )
    def progress(self, task: str, worker: str, head: str, steps: int) -> None:
        """A few steps along the happy path of the task's latest Attempt, so interleavings reach deep states."""
        for _ in range(steps):
            self._progress(task, worker, head)
            self._observe()

    def _progress(self, task: str, worker: str, head: str) -> None:
        attempt_id = self.attempt_ids[task][-1]
        state = self.states[attempt_id]
        held = self.held.get(attempt_id)
        fence = (attempt_id, held.lease.generation, held.lease.token) if held is not None else None
        if state == "queued":
            self._admit(attempt_id)
        elif state == "admitted":
            self._claim(task, worker, WORKSPACE, None)
        elif state == "claimed" and fence is not None:
            self._fenced("start", self.orchestrator.start_attempt, fence)
        elif state == "running" and fence is not None and not self.store.get_intents(attempt_id):
            self._effect(fence, head, lose=False, receipt=True, spans=True)
        elif state == "running" and fence is not None:
            self._fenced("complete", self.orchestrator.complete_attempt, fence, "done", head_sha=head)
        elif state in ("suspect", "reconciling"):
            self._plain("reconcile_attempt", attempt_id)
        elif state == "verifying":
            self._plain("verify_attempt", attempt_id)
        elif state == "cancelling" and fence is not None:
            self._fenced("cancel_acknowledged", self.orchestrator.acknowledge_cancel, fence)
        elif state in TERMINAL:
            decision = self._decide(task)
            if getattr(decision, "kind", None) in ("retry", "correct"):
                self._retry(task, "the previous attempt failed; trying again", f"plan after {attempt_id}")
        else:
            self._reap()

    @rule()
    def deliver_again(self) -> None:
        """Duplicate delivery: the last call arrives a second time, and is judged again as if new."""
        if self.last is not None:
            self.last()

    @rule(worker=st.sampled_from(WORKERS), healthy=st.booleans())
    def claim_of_an_unknown_task(self, worker: str, healthy: bool) -> None:
        """A claim naming no task is NotFound and keeps nothing, not even the health probe it came with."""
        self.last = partial(self.claim_of_an_unknown_task, worker, healthy)
        before = self._snapshot()
        try:
            self.orchestrator.claim_attempt("t9", worker, WORKSPACE, healthy=healthy)
        except NotFound:
            pass
        else:
            raise Violation("a claim of the unknown task t9 did not raise NotFound")
        expect_equal(self._snapshot(), before, "the store, history and ledger after a claim of an unknown task")

    @rule(data=st.data())
    def bad_input(self, data: st.DataObject) -> None:
        """A call with an argument no contract accepts raises InputError or NotFound and changes nothing, probes included."""
        name, kind, call = data.draw(st.sampled_from(self._bad_calls()), label="bad call")
        before = self._snapshot()
        try:
            call()
        except kind:
            pass
        else:
            raise Violation(f"{name}: expected {kind.__name__}, but the call returned")
        expect_equal(self._snapshot(), before, f"{name}: the store, history and ledger after a call that raised")

    # ------------------------------------------------------------ the checked calls

    def _dispatch(self, task: str, hypothesis: str) -> None:
        self.last = partial(self._dispatch, task, hypothesis)
        had = list(self.attempt_ids[task])
        result = self.orchestrator.dispatch(task, Plan(hypothesis))
        if result.accepted:
            expect(not had, f"dispatch of {task} accepted although it has Attempts {had}: the first dispatch only")
            self.attempt_ids[task].append(f"{task}#1")

    def _retry(self, task: str, reason: str, hypothesis: str) -> None:
        self.last = partial(self._retry, task, reason, hypothesis)
        had = list(self.attempt_ids[task])
        result = self.orchestrator.retry(task, reason, Plan(hypothesis))
        if not result.accepted:
            return
        expect(len(reason.strip()) >= self.config.reason_length_min, f"a retry of {task} with the reason {reason!r} was accepted")
        active = [a for a in had if self.states[a] not in TERMINAL]
        expect(not active, f"a retry of {task} was accepted while {active} were active")
        expect(had and self.states[had[-1]] == "failed", f"a retry of {task} was accepted after {had[-1:]} ended {self._state_of(had)}")
        new_id = f"{task}#{len(had) + 1}"
        attempt = self.store.get_attempt(new_id)
        expect(attempt is not None, f"an accepted retry of {task} appended no Attempt {new_id}")
        expect_equal((attempt.number, attempt.previous_attempt_id), (len(had) + 1, had[-1]), f"the retry's {new_id} (number, predecessor)")
        self.attempt_ids[task].append(new_id)

    def _admit(self, attempt_id: str) -> None:
        self.last = partial(self._admit, attempt_id)
        before = self.states[attempt_id]
        result = self.orchestrator.admit(attempt_id)
        if result.accepted:
            expect(before == "queued", f"admit of {attempt_id} in {before} was accepted: only a queued Attempt is admitted")

    def _claim(self, task: str, worker: str, workspace: str, healthy: bool | None) -> None:
        self.last = partial(self._claim, task, worker, workspace, healthy)
        latest = self.attempt_ids[task][-1]
        before = self.states[latest]
        record = self.store.get_attempt(latest)
        result = self.orchestrator.claim_attempt(task, worker, workspace, healthy)
        now = self.clock.now()
        if healthy is not None:
            self.probes[worker] = (now, healthy)
        probe = self.probes.get(worker)
        fit = probe is None or (probe[1] and now - probe[0] <= self.reliability.health_probe_max_age_s)
        eligible = record.eligible_at is None or now >= record.eligible_at
        allowed = workspace == WORKSPACE and before == "admitted" and fit and eligible and task not in self.cancelled_tasks
        if not result.accepted:
            expect(not allowed, f"a claim of admitted {latest} by healthy {worker} in its workspace was refused: {result}")
            return
        expect(isinstance(result, Claim), f"an accepted claim returned {result!r}, not a Claim")
        expect(allowed, f"a claim of {latest} ({before}) by {worker} in {workspace!r} was accepted (healthy: {fit}, eligible: {eligible})")
        lease = result.lease
        expect_equal((lease.attempt_id, lease.task_id, lease.owner), (latest, task, worker), "the lease's (attempt, task, owner)")
        expect(lease.generation > self.generations.get(task, 0), f"the lease of {latest} has generation {lease.generation}, not above")
        expect(lease.token not in self.tokens and len(lease.token) >= 32, "a lease token was issued twice, or is shorter than 32")
        expect_equal(lease.expires_at, now + self.config.lease_ttl_s, f"the expiry of the lease of {latest}")
        self.generations[task] = lease.generation
        self.tokens.add(lease.token)
        self.held[latest] = _Held(lease, lease.expires_at)
        self.leases.append(lease)

    def _fenced(self, trigger: str, contract: Callable[..., Any], fence: tuple[str, int, str], *args: Any, **kwargs: Any) -> None:
        """A fenced call, judged by the model: accepted only with authority, and never refused when the table must accept it."""
        self.last = partial(self._fenced, trigger, contract, fence, *args, **kwargs)
        attempt_id, generation, _token = fence
        before = self.states.get(attempt_id)
        authority = self._authority(trigger, fence)
        result = contract(*fence, *args, **kwargs)
        if result.accepted:
            expect(authority is None, f"{trigger} on {attempt_id} ({before}) with generation {generation} was accepted, but {authority}")
            if trigger == "complete":
                self.completed.add(attempt_id)
            if trigger in REVOKING:  # the holder's run ends here, and its lease with it
                held = self.held[attempt_id]
                held.expires_at = min(held.expires_at, self.clock.now())
            if trigger == "renew":
                expect(isinstance(result, Renewal), f"an accepted renewal returned {result!r}")
                now = self.clock.now()
                expect_equal(result.expires_at, now + self.config.lease_ttl_s, f"the renewed expiry of {attempt_id}")
                self.held[attempt_id].expires_at = result.expires_at
            return
        must = trigger in ("start", "renew", "checkpoint", "complete", "report_failure", "cancel_acknowledged")
        expect(
            not (must and authority is None), f"{trigger} by the holder of {attempt_id} ({before}), with authority, was refused: {result}"
        )

    def _authority(self, trigger: str, fence: tuple[str, int, str]) -> str | None:
        """Why the model says this fenced call has no authority, or None when it has (and the table has a row for it)."""
        attempt_id, generation, token = fence
        held = self.held.get(attempt_id)
        before = self.states.get(attempt_id)
        task = attempt_id.partition("#")[0]
        if held is None or (generation, token) != (held.lease.generation, held.lease.token):
            return "the fence is not the lease the Attempt was given (forged, stale, newer or borrowed)"
        if generation != self.generations.get(task):
            return f"generation {generation} is not the task's current {self.generations.get(task)}"
        if self.clock.now() >= held.expires_at:
            return f"its lease expired at t={held.expires_at:g} and it is now t={self.clock.now():g} (reaped or not)"
        if trigger in ("start", "grant_tool") and (attempt_id in self.cancelled or task in self.cancelled_tasks):
            return "it was cancelled: no new start or tool grant after cancellation"
        if before not in SOURCES[trigger]:
            return f"the table has no {trigger} row from {before}"
        return None

    def _effect(self, fence: tuple[str, int, str], head: str, lose: bool, receipt: bool, spans: bool) -> None:
        self.last = partial(self._effect, fence, head, lose, receipt, spans)
        attempt_id, generation, token = fence
        task = attempt_id.partition("#")[0]
        # A PR spans attempts (one per task and head); a push is the Attempt's own, so its identity names the Attempt.
        identity = f"{task}:{head}" if spans else f"{attempt_id}:{head}"
        operation = "create-pr" if spans else "push"
        authority = self._authority("grant_tool", fence)
        grant = self.orchestrator.grant_tool(
            attempt_id, generation, token, operation, identity, call_deadline_s=15.0, cost_usd=1.0, spans_attempts=spans
        )
        if not grant.accepted:
            return
        expect(authority is None, f"grant_tool on {attempt_id} ({self.states.get(attempt_id)}) was accepted, but {authority}")
        if grant.replay is not None:
            return
        if lose:
            self.provider.lose_responses(1)
        try:
            effect = self.provider.perform(grant.key, operation, identity, "")
        except ProviderTimeout:
            return
        if receipt:
            self._fenced("record_receipt", self.orchestrator.record_receipt, fence, grant.key, effect.provider_id)

    def _call_failed(self, fence: tuple[str, int, str], signature: str) -> None:
        intents = self.store.get_intents(fence[0])
        key = intents[0].key if intents else f"create-pr:{fence[0]}:never-granted"
        try:
            self._fenced("report_call_failure", self.orchestrator.report_call_failure, fence, key, signature)
        except NotFound:
            expect(not intents, f"report_call_failure under {key}, an intent of {fence[0]}, raised NotFound")
        self.last = partial(self._call_failed, fence, signature)

    def _plain(self, contract: str, attempt_id: str) -> None:
        self.last = partial(self._plain, contract, attempt_id)
        getattr(self.orchestrator, contract)(attempt_id)

    def _cancel(self, attempt_id: str) -> None:
        self.last = partial(self._cancel, attempt_id)
        before = self.states[attempt_id]
        result = self.orchestrator.cancel_attempt(attempt_id, "operator changed priorities")
        if result.accepted:
            expect(before not in TERMINAL, f"a cancel of {attempt_id}, already {before}, was accepted: a terminal Attempt is immutable")
            self._cancelled(attempt_id)

    def _cancel_task(self, task: str) -> None:
        self.last = partial(self._cancel_task, task)
        latest = self.attempt_ids[task][-1]
        result = self.orchestrator.cancel_task(task, "operator cancelled the task")
        if result.accepted:
            self.cancelled_tasks.add(task)
            if self.states[latest] not in TERMINAL:
                self._cancelled(latest)

    def _cancelled(self, attempt_id: str) -> None:
        if attempt_id not in self.cancelled:
            self.cancelled.add(attempt_id)
            self.cancel_deadlines[attempt_id] = self.clock.now() + self.config.cancel_ack_timeout_s

    def _decide(self, task: str) -> Any:
        self.last = partial(self._decide, task)
        return self.orchestrator.decide(task)

    def _reap(self) -> None:
        """The reaper moves exactly what the model says is due: expired leases to suspect, unanswered cancellations to reconciling."""
        self.last = partial(self._reap)
        now = self.clock.now()
        due = {(a, "suspect") for a, held in self.held.items() if self.states[a] in EXPIRABLE and held.expires_at <= now}
        due |= {
            (a, "reconciling")
            for a, deadline in self.cancel_deadlines.items()
            if self.states[a] == "cancelling" and a in self.held and deadline <= now
        }
        moved = set(self.orchestrator.reap())
        expect_equal(moved, due, f"what the reaper moved at t={now:g}")
        for attempt_id, _state in due:  # an expiry or a timed-out cancellation ends the holder's run and its lease
            held = self.held[attempt_id]
            held.expires_at = min(held.expires_at, now)

    # ------------------------------------------------------------ drawing live objects

    def _any_attempt(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from([a for task in TASKS for a in self.attempt_ids[task]]), label="attempt")

    def _fence(self, data: st.DataObject, variant: str) -> tuple[str, int, str]:
        """A fence of the given kind, from the leases held; before any lease, a made-up one for an Attempt that has none."""
        if not self.leases:
            return self._any_attempt(data), 1, "made-up-" + "x" * 35
        lease = data.draw(st.sampled_from(self.leases), label="lease")
        if variant == "own":
            return lease.attempt_id, lease.generation, lease.token
        if variant == "forged token":
            return lease.attempt_id, lease.generation, "forged-" + lease.token[7:]
        if variant == "stale generation":
            return lease.attempt_id, lease.generation - 1, lease.token
        if variant == "newer generation":
            return lease.attempt_id, lease.generation + 1, lease.token
        others = [a for task in TASKS for a in self.attempt_ids[task] if a != lease.attempt_id]
        return data.draw(st.sampled_from(others), label="borrowed by"), lease.generation, lease.token

    def _bad_calls(self) -> list[tuple[str, type[Exception], Callable[[], object]]]:
        """Calls no contract accepts, built from the live Attempts and leases: each must raise before it changes anything."""
        o = self.orchestrator
        attempt_id = self.attempt_ids["t1"][-1]
        lease = self.leases[-1] if self.leases else Lease(attempt_id, "t1", "w1", 1, "f" * 43, 0.0)
        fence = (lease.attempt_id, lease.generation, lease.token)
        forged = (lease.attempt_id, lease.generation, "f" * 43)
        return [
            ("admit(None)", InputError, lambda: o.admit(None)),
            ("admit of an unknown Attempt", NotFound, lambda: o.admit("t9#1")),
            ("claim of an unknown task, with a failing probe", NotFound, lambda: o.claim_attempt("t9", "w2", WORKSPACE, healthy=False)),
            ("claim with a non-bool probe", InputError, lambda: o.claim_attempt("t1", "w3", WORKSPACE, healthy="no")),
            ("renew with a bool generation", InputError, lambda: o.renew_lease(lease.attempt_id, True, lease.token)),
            ("complete with a non-str result", InputError, lambda: o.complete_attempt(*fence, 42)),
            ("grant with a list for dependency", InputError, lambda: o.grant_tool(*fence, "create-pr", "x", dependency=["code_host"])),
            ("grant with negative cost", InputError, lambda: o.grant_tool(*fence, "create-pr", "x", cost_usd=-1.0)),
            ("receipt with a forged token and no key", InputError, lambda: o.record_receipt(*forged, None, "pr-1")),
            ("call failure with a number for key", InputError, lambda: o.report_call_failure(*forged, 123, "503")),
            ("report of an unknown domain", InputError, lambda: o.report_failure(*fence, "martian", "crash")),
            ("cancel with an empty reason", InputError, lambda: o.cancel_attempt(attempt_id, "")),
            ("retry with a plan that is not a Plan", InputError, lambda: o.retry("t1", REASONS[1], "plan D")),
            ("decide of an unknown task", NotFound, lambda: o.decide("t9")),
        ]

    # ------------------------------------------------------------ what is judged after every step

    def _snapshot(self) -> tuple:
        attempts = [self.store.get_attempts(task) for task in TASKS]
        intents = [self.store.get_intents(a.attempt_id) for group in attempts for a in group]
        return self.store.events(), [self.store.get_task(t) for t in TASKS], attempts, intents, list(self.provider.ledger)

    def _state_of(self, attempt_ids: list[str]) -> str | None:
        return self.states[attempt_ids[-1]] if attempt_ids else None

    def _observe(self) -> None:
        """Read the records and judge each Attempt's move against the model; then fold the new history into the checkers."""
        now = self.clock.now()
        for task in TASKS:
            records = self.store.get_attempts(task)
            known = self.attempt_ids[task]
            expect_equal([a.attempt_id for a in records], known, f"{task}'s Attempts (only dispatch and retry append one)")
            for attempt in records:
                self._judge_move(attempt, self.states.get(attempt.attempt_id), now)
                self.states[attempt.attempt_id] = attempt.state
            owners = [a for a in known if self.states[a] in LEASED and a in self.held and now < self.held[a].expires_at]
            expect(len(owners) <= 1, f"two Attempts of {task} hold authority at t={now:g}: {owners}")
        for event in self.store.events(after_seq=self.seen_seq):
            self.judge.event(event)
            self.seen_seq = event.seq
        fresh = self.provider.ledger[self.seen_effects :]
        for entry in ledger_from(fresh, self.store):
            self.judge.landed(entry)
        self.seen_effects += len(fresh)

    def _judge_move(self, attempt: Attempt, before: str | None, now: float) -> None:
        attempt_id, state = attempt.attempt_id, attempt.state
        frozen = self.frozen.get(attempt_id)
        if frozen is not None:
            expect_equal(attempt, frozen, f"terminal {attempt_id}, which must never change")
        elif state in TERMINAL:
            self.frozen[attempt_id] = attempt
        if state == before:
            return
        held = self.held.get(attempt_id)
        if state == "suspect":
            expect(held is not None and held.expires_at <= now, f"{attempt_id} became suspect at t={now:g} before its lease expired")
        if state in ("verifying", "succeeded"):
            expect(attempt_id in self.completed, f"{attempt_id} went {before} -> {state} with no accepted completion from its holder")
        if attempt_id in self.cancelled:
            expect(state not in WORKING, f"cancelled {attempt_id} went {before} -> {state}: cancellation is final")

    @invariant()
    def judged_by_the_model_and_the_checkers(self) -> None:
        self._observe()
        for name, verdict in self.judge.verdicts(self.store).items():
            if verdict.status == VIOLATED:
                raise Violation(f"{name}: " + "\n  ".join(verdict.example))


def orchestrator_machine(
    make_orchestrator: OrchestratorFactory,
    *,
    config: CoreConfig = CONFIG,
    reliability: ReliabilityConfig = RELIABILITY,
    name: str | None = None,
) -> type[OrchestratorMachine]:
    """A state machine class over orchestrators from `make_orchestrator` (see `rig.OrchestratorFactory`).

    Run it with `run_machine`, or under pytest or unittest as its `.TestCase`
    (set `.TestCase.settings` to choose the budget). `config` and
    `reliability` are passed to the factory and are what the model and the
    checkers state their rules against.
    """
    if not callable(make_orchestrator):
        raise TypeError(f"make_orchestrator must be callable, not {make_orchestrator!r}")
    attributes = {"make_orchestrator": staticmethod(make_orchestrator), "config": config, "reliability": reliability}
    label = name or f"MachineOver_{getattr(make_orchestrator, '__name__', 'factory')}"
    return type("".join(c if c.isalnum() else "_" for c in label), (OrchestratorMachine,), attributes)


def run_machine(
    machine: type[RuleBasedStateMachine],
    *,
    examples: int = 50,
    steps: int = 80,
    seed: int | None = 0,
    shrink: bool = True,
) -> None:
    """Run a machine for `examples` examples of up to `steps` rules; raises the first failure (shrunk unless `shrink=False`).

    `seed` fixes the run, so a given code and seed finds the same failure every
    time (None draws a fresh one). No example database is read or written.
    """
    phases = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    chosen = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    target = machine if seed is None else seeded(seed)(type(machine.__name__, (machine,), {}))
    run_state_machine_as_test(target, settings=chosen)
