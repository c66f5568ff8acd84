"""The chapter's thirteen failure modes, each a switch that breaks the reference core in exactly that way.

An anti-pattern is a small, named replacement for one part of the system (an
`Orchestrator` subclass, a store, how workers behave, or a configuration) plus the scenario that exposes it
and the invariant expected to catch it. The correct core passes every
scenario; a switch that passes the checkers in its scenario is a bug in the
checkers, and the tests say so.

The breaks live here, in the simulator, not in the core: the core keeps
exactly two seams for them (`Orchestrator._mint_key` and
`Orchestrator._retry_refusal`); the rest override ordinary methods, of the
Orchestrator, of the admission controller, or of the memory store's
transaction (a break of the store has to reach inside it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from shiftchange.core import Accepted, BackoffConfig, InputError, MemoryStore, Orchestrator, Refused
from shiftchange.core.admission import AdmissionController
from shiftchange.core.store import _MemoryTransaction

from .config import CONTRACTS, SimConfig
from .worker import Behaviour

# ------------------------------------------------------------------ breaks


class _OverwritingTransaction(_MemoryTransaction):
    """A store that lets a terminal Attempt be written: the precondition of conflating Task and Attempt."""

    __slots__ = ()

    def update_attempt(self, attempt: Any, **changes: Any) -> None:
        live = self._store._attempts[attempt.attempt_id]
        before = live.state
        self._apply(live, changes)
        if live.state != before:
            self._move(live, before, live.state)
            self._undo.append(("move", live, live.state, before))


class OverwritingStore(MemoryStore):
    def transaction(self) -> _MemoryTransaction:
        if self._open:
            raise RuntimeError("MemoryStore transactions do not nest")
        return _OverwritingTransaction(self)


class ConflatedOrchestrator(Orchestrator):
    """conflated-task-attempt: a retry rewrites the failed Attempt back to queued instead of appending Attempt N+1."""

    def retry(self, task_id: str, reason: str, plan: Any) -> Refused | Accepted:
        with self._unit() as tx:
            task = self._task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            latest = attempts[-1] if attempts else None
            if latest is None or latest.state != "failed":
                return Refused("no failed attempt to run again")
            tx.update_attempt(
                latest,
                state="queued",
                hypothesis=plan.hypothesis,
                plan=plan,
                reason=reason,
                failure_domain=None,
                failure_signature=None,
                reconciliation=None,
                evidence=None,
                result=None,
                ended_at=None,
                expires_at=None,
                token_digest=None,
            )
            self._event(tx, "orchestrator", "retry", task.task_id, latest, True, "accepted", "failed", "queued", detail=reason)
            self._pending.append(partial(self._queue, latest, task))
            return Accepted("queued")


_FENCED_CONTRACTS = tuple(contract for contract in CONTRACTS if contract != "claim_attempt")
"""Every contract a worker calls with a fence: all it sends but the claim that gives it one."""


class UnfencedOrchestrator(Orchestrator):
    """no-fencing: writes are addressed to the task's current Attempt and prove nothing; any caller's word is taken."""

    def _fence(self, tx: Any, attempt: Any, trigger: str, generation: Any, token: Any) -> None:
        return None

    def _lease_current(self, attempt: Any) -> bool:
        return True

    def _current(self, attempt_id: str) -> str:
        task_id = attempt_id.rsplit("#", 1)[0]
        attempts = self.store.get_attempts(task_id)
        return attempts[-1].attempt_id if attempts else attempt_id


def _addressed_by_task(name: str) -> Callable[..., Any]:
    def contract(self: UnfencedOrchestrator, attempt_id: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(Orchestrator, name)(self, self._current(attempt_id), *args, **kwargs)

    contract.__name__ = name
    return contract


for _name in _FENCED_CONTRACTS:
    setattr(UnfencedOrchestrator, _name, _addressed_by_task(_name))


class TimestampKeyOrchestrator(Orchestrator):
    """timestamp-keys: the operation key names the moment of the call, so every retry looks like a new operation."""

    def _mint_key(self, operation: str, task_id: str, attempt_id: str, identity: str, spans_attempts: bool) -> str:
        return f"{operation}:{task_id}:{self.clock.now()!r}"


class WorkerKeyOrchestrator(Orchestrator):
    """worker-minted-keys: the gateway takes whatever key the worker presents instead of minting it from the operation."""

    def grant_tool(self, *args: Any, key: str | None = None, **kwargs: Any) -> Any:
        self._presented = key
        try:
            return super().grant_tool(*args, key=key, **kwargs)
        finally:
            self._presented = None

    def _mint_key(self, operation: str, task_id: str, attempt_id: str, identity: str, spans_attempts: bool) -> str:
        presented = getattr(self, "_presented", None)
        return presented if presented is not None else super()._mint_key(operation, task_id, attempt_id, identity, spans_attempts)


class ScratchOrchestrator(Orchestrator):
    """restart-from-scratch: recovery reruns the workflow from step one; no operation is looked up across Attempts."""

    def _mint_key(self, operation: str, task_id: str, attempt_id: str, identity: str, spans_attempts: bool) -> str:
        return super()._mint_key(operation, task_id, attempt_id, identity, False)


class BlindRetryOrchestrator(Orchestrator):
    """blind-retry: the retry policy is never asked; any failure may be repeated unchanged until the budget is gone."""

    def _retry_refusal(self, task: Any, attempts: Any, plan: Any) -> None:
        return None


class BudgetBurnOrchestrator(Orchestrator):
    """budget-burn: spend is authorized without looking at the task's budget or the Attempt's ceiling."""

    def _spend_ok(self, task: Any, attempt: Any, cost_usd: float, tokens: int) -> bool:
        return True


class CancelFlagOrchestrator(Orchestrator):
    """cancel-as-flag: cancelling sets a flag on the Attempt and nothing else: no prevention, no signal, no reconciliation."""

    def cancel_attempt(self, attempt_id: str, reason: str) -> Any:
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            if attempt.state in ("succeeded", "failed", "cancelled", "blocked", "quarantined"):
                return Refused("already ended")
            tx.update_attempt(attempt, cancel_requested=True, cancel_reason=reason)
            self._event(tx, "operator", "cancel", attempt.task_id, attempt, True, "accepted", attempt.state, attempt.state, detail=reason)
            return Accepted(attempt.state, "flag set")


class _NoDeadlineShedding(AdmissionController):
    def _expired(self, item: Any, now_s: float) -> bool:
        return False


class SilentQueueOrchestrator(Orchestrator):
    """silent-queue-growth: admission never pushes back or sheds; the queue keeps every promise, however late."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.admission = _NoDeadlineShedding(self.reliability.admission, capacity_max=self.config.admitted_max)


class _TranscriptTransaction(_MemoryTransaction):
    """The orchestrator's record of operations lives only in a worker's transcript: nothing is listed per Attempt."""

    __slots__ = ()

    def intents_of(self, attempt_id: str) -> list:
        return []


class TranscriptStore(MemoryStore):
    """context-as-state: what was authorized and what landed is not in the durable record, only in the model's context."""

    def transaction(self) -> _MemoryTransaction:
        if self._open:
            raise RuntimeError("MemoryStore transactions do not nest")
        return _TranscriptTransaction(self)

    def get_intents(self, attempt_id: str) -> list:
        return []


class _DatabaseOnly:
    """The gateway's view of the providers under db-only-dedup: it never finds anything, so only its own records count."""

    def __init__(self, providers: Any) -> None:
        self.supports_idempotency = providers.supports_idempotency

    def find(self, key: str, operation: str, identity: str) -> list:
        return []


class DatabaseOnlyOrchestrator(Orchestrator):
    """db-only-dedup: before granting a call again, the gateway trusts its database and never asks provider truth.

    Reconciliation still reads the provider (the factory does reconcile a
    suspect Attempt); it is the retry inside a live Attempt, after a timeout
    with no receipt on record, that repeats the side effect.
    """

    def grant_tool(self, *args: Any, **kwargs: Any) -> Any:
        truth = self.provider
        self.provider = _DatabaseOnly(truth)
        try:
            return super().grant_tool(*args, **kwargs)
        finally:
            self.provider = truth


# --------------------------------------------------------------- registry


def _same(value: Any) -> Any:
    return value


def _events_dropped() -> MemoryStore:
    return MemoryStore(keep_events=False)


@dataclass(frozen=True)
class AntiPattern:
    """One failure mode of the chapter as a switch: what it breaks, where it shows, and who must catch it."""

    name: str
    failure_mode: str
    """The chapter's failure mode, in a line."""
    scenario: str
    """The scenario that exposes it."""
    invariant: str
    """The invariant expected to catch it."""
    orchestrator: type = Orchestrator
    store: Callable[[], MemoryStore] = _events_dropped
    behaviour: Behaviour = field(default_factory=Behaviour)
    tune: Callable[[SimConfig], SimConfig] = _same
    blind_loop: bool = False
    """The loop never decides: every failed Attempt is retried at once, unchanged."""

    def configure(self, config: SimConfig) -> SimConfig:
        return self.tune(config)

    def make_store(self) -> MemoryStore:
        return self.store()


def _storm(config: SimConfig) -> SimConfig:
    """No retry discipline: no backoff (between Attempts or between a call's retries), no circuit breaker, no retry budget."""
    reliability = replace(config.reliability, backoff=BackoffConfig(strategy="none"), breaker=None, retry_budget=None)
    return replace(config, reliability=reliability)


def _unbounded_queue(config: SimConfig) -> SimConfig:
    """No backpressure: the queue's depth and age limits lifted; the bulkhead is the world's own, so capacity is unchanged."""
    admission = replace(config.reliability.admission, queue_depth_max=10_000_000, queue_age_max_s=1e9)
    return replace(config, reliability=replace(config.reliability, admission=admission))


ANTIPATTERNS: dict[str, AntiPattern] = {
    pattern.name: pattern
    for pattern in (
        AntiPattern(
            "conflated-task-attempt",
            "retry overwrites the failed record; nobody can say how many tries were made or what each cost",
            "baseline",
            "append_only_attempts",
            orchestrator=ConflatedOrchestrator,
            store=lambda: OverwritingStore(keep_events=False),
        ),
        AntiPattern(
            "no-fencing",
            "a worker that lost its lease reconnects and records completion over its replacement's work",
            "zombie-worker",
            "fenced_writes",
            orchestrator=UnfencedOrchestrator,
        ),
        AntiPattern(
            "timestamp-keys",
            "every retry looks new, so the provider receives duplicate operations",
            "duplicate-delivery",
            "one_effect_per_operation",
            orchestrator=TimestampKeyOrchestrator,
        ),
        AntiPattern(
            "db-only-dedup",
            "the factory times out, has no record, and retries a PR creation that already succeeded",
            "provider-outage",
            "one_effect_per_operation",
            orchestrator=DatabaseOnlyOrchestrator,
        ),
        AntiPattern(
            "blind-retry",
            "the same validation failure repeats until the budget is gone",
            "baseline",
            "classified_retry",
            orchestrator=BlindRetryOrchestrator,
            blind_loop=True,
        ),
        AntiPattern(
            "retry-storm",
            "many workers recover from one outage at once, without backoff, and knock the dependency over again",
            "retry-storm",
            "goodput_recovers",
            tune=_storm,
        ),
        AntiPattern(
            "cancel-as-flag",
            "the cancelled worker keeps running and pushes a branch",
            "cancel-storm",
            "cancel_is_final",
            orchestrator=CancelFlagOrchestrator,
            behaviour=Behaviour(ignores_cancel=True),
        ),
        AntiPattern(
            "silent-queue-growth",
            "queue age climbs, deadlines pass, and admitted work was never going to be served in time",
            "capacity-overload",
            "no_lost_tasks",
            orchestrator=SilentQueueOrchestrator,
            tune=_unbounded_queue,
        ),
        AntiPattern(
            "budget-burn",
            "a loop or hostile input drains tokens and money without producing anything",
            "budget-burn",
            "budgets_hold",
            orchestrator=BudgetBurnOrchestrator,
        ),
        AntiPattern(
            "context-as-state",
            "the only record of what was done is the model's transcript; after a crash a fresh model must guess",
            "mixed",
            "complete_audit",
            store=lambda: TranscriptStore(keep_events=False),
        ),
        AntiPattern(
            "worker-minted-keys",
            "each worker invents its own key, so a replacement cannot find its predecessor's effect",
            "crash-restart",
            "one_effect_per_operation",
            orchestrator=WorkerKeyOrchestrator,
            behaviour=Behaviour(mints_own_keys=True),
        ),
        AntiPattern(
            "restart-from-scratch",
            "a crashed workflow reruns from step one and repeats every side effect",
            "crash-restart",
            "one_effect_per_operation",
            orchestrator=ScratchOrchestrator,
            behaviour=Behaviour(ignores_checkpoint=True),
        ),
        AntiPattern(
            "unrecorded-effects",
            "the factory cannot say what a run did, and blames the model's nondeterminism",
            "baseline",
            "complete_audit",
            behaviour=Behaviour(bypasses_gateway=("push",)),
        ),
    )
}


def antipattern(name: str) -> AntiPattern:
    found = ANTIPATTERNS.get(name)
    if found is None:
        raise InputError(f"unknown anti-pattern {name!r}; use one of {', '.join(ANTIPATTERNS)}")
    return found
