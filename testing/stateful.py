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
    CoreConfig,
    Lease,
    LedgerProvider,
    ManualClock,
    NotFound,
    ReliabilityConfig,
)

from .checks import Violation, expect, expect_equal
from .judge import VIOLATED, Judge, context_for
from .rig import OrchestratorFactory
from .stateful_calls import (
    BUDGET,
    CONFIG,
    FENCES,
    JUDGED,
    LEASED,
    REASONS,
    RELIABILITY,
    RESTING,
    TASKS,
    TERMINAL,
    WORKERS,
    WORKSPACE,
    CheckedCalls,
    _Held,
)

__all__ = ["OrchestratorMachine", "orchestrator_machine", "run_machine"]


class OrchestratorMachine(CheckedCalls, RuleBasedStateMachine):
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
