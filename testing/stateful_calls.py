"""What the stateful machine (`testing.stateful`) shares with its rules: the world it sets up (tasks, workers, the core's
configuration, the fences a rule presents), the spec's table read as an oracle, and the machine's checked calls, its
draws of live objects and its judging after every step, as a base class (`CheckedCalls`) the machine's rules call into.
The rules themselves, and how to run the machine, are in `testing.stateful`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

from hypothesis import strategies as st

from shiftchange.core import (
    Attempt,
    Budget,
    Claim,
    CoreConfig,
    InputError,
    Lease,
    NotFound,
    Plan,
    ProviderTimeout,
    ReliabilityConfig,
    Renewal,
)
from shiftchange.spec import load_spec

from .checks import expect, expect_equal
from .judge import INVARIANTS, ledger_from

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


class CheckedCalls:
    """The machine's calls, each checked against the model and the spec's table; its draws; its judging after a step.

    A base class of `OrchestratorMachine`: it reads the state the machine's `__init__` sets (the orchestrator, the store,
    the clock, the model's leases and facts) and is not a machine by itself.
    """

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
