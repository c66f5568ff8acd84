"""The chapter's thirteen failure modes, each a switch that breaks the reference core in exactly that way.

An anti-pattern is a configuration of the system, never a subclass of the
`Orchestrator`. Where the failure mode is a property of the design (an
unfenced write, a retry row without its classification guard, a spend never
checked, a cancellation that is only a flag), it is a named edit of the
transition table (`shiftchange.spec.edits`), run through the same core as the
shipped table. Where it is a rule a port chooses (key minting, deduplication,
recovery), it replaces one of the core's `Seams`; where it lives in a store or
in how workers behave, it replaces that; a few are core or simulator
settings. Each comes with the scenario that exposes it and the invariant
expected to catch it. The correct core passes every scenario; a switch that
passes the checkers in its scenario is a bug in the checkers, and the tests
say so.

The breaks live here, beside the core and apart from every driver: each
replacement below implements a seam's public signature, and the two broken
stores name their transaction class through `MemoryStore.transaction_type`.
A driver (the simulator, the explorer, chaos) applies a switch to what it
runs: its store, its core's seams and table, its workers' seams, and its
reliability settings (`AntiPattern.configure` works on any driver's config
that holds a `reliability`), so every driver breaks the very same rules and
none of them has to be imported to do it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from shiftchange.agent import WorkerSeams
from shiftchange.core import BackoffConfig, InputError, KeyRequest, MemoryStore, ReliabilityConfig, Seams, mint_key
from shiftchange.core.records import Attempt
from shiftchange.core.store import MemoryTransaction, Transaction
from shiftchange.core.table import Table
from shiftchange.spec import edits
from shiftchange.spec.model import STAY, Spec

ConfigT = TypeVar("ConfigT")

# ------------------------------------------------------------------ breaks


class _OverwritingTransaction(MemoryTransaction):
    """A store that lets a terminal Attempt be written: the precondition of conflating Task and Attempt."""

    __slots__ = ()

    immutable_states = frozenset()


class OverwritingStore(MemoryStore):
    transaction_type = _OverwritingTransaction


def rewrite_attempt(tx: Transaction, attempt: Attempt, previous: Attempt | None) -> Attempt:
    """conflated-task-attempt: a retry rewrites the failed Attempt back to queued instead of appending Attempt N+1."""
    if previous is None:
        tx.insert_attempt(attempt)
        return attempt
    tx.update_attempt(
        previous,
        state=attempt.state,
        hypothesis=attempt.hypothesis,
        plan=attempt.plan,
        reason=attempt.reason,
        failure_domain=None,
        failure_signature=None,
        reconciliation=None,
        evidence=None,
        result=None,
        ended_at=None,
        expires_at=None,
        token_digest=None,
        eligible_at=attempt.eligible_at,
        backoff_s=attempt.backoff_s,
    )
    return previous


def timestamp_key(request: KeyRequest) -> str:
    """timestamp-keys: the operation key names the moment of the call, so every retry looks like a new operation."""
    return f"{request.operation}:{request.task_id}:{request.now!r}"


def worker_key(request: KeyRequest) -> str:
    """worker-minted-keys: the gateway takes whatever key the worker presents instead of minting it from the operation."""
    if request.presented is not None:
        return request.presented
    return mint_key(request.operation, request.task_id, request.attempt_id, request.identity, request.spans_attempts)


def attempt_scoped_key(request: KeyRequest) -> str:
    """restart-from-scratch: every key is the Attempt's own, so no operation is looked up across Attempts."""
    return mint_key(request.operation, request.task_id, request.attempt_id, request.identity, False)


def database_only(provider: Any, key: str, operation: str, identity: str) -> list:
    """db-only-dedup: before granting a call again, the gateway trusts its database and never asks provider truth.

    Reconciliation still reads the provider (the factory does reconcile a
    suspect Attempt); it is the retry inside a live Attempt, after a timeout
    with no receipt on record, that repeats the side effect.
    """
    return []


class _TranscriptTransaction(MemoryTransaction):
    """The orchestrator's record of operations lives only in a worker's transcript: nothing is listed per Attempt."""

    __slots__ = ()

    def intents_of(self, attempt_id: str) -> list:
        return []


class TranscriptStore(MemoryStore):
    """context-as-state: what was authorized and what landed is not in the durable record, only in the model's context."""

    transaction_type = _TranscriptTransaction


# ------------------------------------------------------- the table's edits


def _no_fencing(spec: Spec) -> Spec:
    """no-fencing: no worker row asks for the lease's proof; a call is the task's, and lands on whichever Attempt is current."""
    return edits.unfence(spec)


def _blind_retry(spec: Spec) -> Spec:
    """blind-retry: the retry row asks neither the retry policy (the failure's classification) nor for a reason."""
    return edits.drop_guard(edits.drop_guard(spec, "retry", "policy_permits_retry", "task"), "retry", "reason_given", "task")


def _budget_burn(spec: Spec) -> Spec:
    """budget-burn: a tool grant never asks whether its spend fits the task's budget and the Attempt's ceiling."""
    return edits.drop_guard(spec, "grant_tool", "spend_within_budget")


def _cancel_as_flag(spec: Spec) -> Spec:
    """cancel-as-flag: cancelling leaves the Attempt where it was, a flag and nothing else.

    No prevention (it stays claimable and may be granted tools), no signal it
    must answer, no reconciliation: only the request recorded on the Attempt.
    """
    return edits.move_dest(spec, "cancel", STAY)


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
    seams: Seams = field(default_factory=Seams)
    """The core's rules, one of them replaced (the default: the reference core)."""
    edit: Callable[[Spec], Spec] | None = None
    """The design choice, as an edit of the transition table the run is given (`spec.edits`), or None."""
    store: Callable[[], MemoryStore] = _events_dropped
    worker_seams: WorkerSeams = field(default_factory=WorkerSeams)
    tune: Callable[[ReliabilityConfig], ReliabilityConfig] = _same
    """The reliability settings the failure mode lifts (its retry discipline, its backpressure), or none."""
    blind_loop: bool = False
    """The loop never decides: every failed Attempt is retried at once, unchanged."""

    def configure(self, config: ConfigT) -> ConfigT:
        """Any driver's config (a dataclass with a `reliability: ReliabilityConfig`) with this failure mode's settings."""
        if self.tune is _same:
            return config
        return replace(config, reliability=self.tune(config.reliability))  # type: ignore[type-var,attr-defined]

    def make_store(self) -> MemoryStore:
        return self.store()

    def table(self, base: Table) -> Table:
        """The table a run of this anti-pattern plays: `base` (the one the run was given) with the edit applied."""
        if self.edit is None:
            return base
        return Table(self.edit(base.spec), f"{base.label} with {self.name}")


def _storm(reliability: ReliabilityConfig) -> ReliabilityConfig:
    """No retry discipline: no backoff (between Attempts or between a call's retries), no breaker, retry budget or concurrency limit."""
    return replace(reliability, backoff=BackoffConfig(strategy="none"), breaker=None, retry_budget=None, concurrency=None)


def _unbounded_queue(reliability: ReliabilityConfig) -> ReliabilityConfig:
    """No backpressure, no shedding: the queue's depth and age limits lifted, and work past its deadline still admitted.

    The bulkhead is the world's own, so capacity is unchanged.
    """
    admission = replace(reliability.admission, queue_depth_max=10_000_000, queue_age_max_s=1e9, shed_past_deadline=False)
    return replace(reliability, admission=admission)


ANTIPATTERNS: dict[str, AntiPattern] = {
    pattern.name: pattern
    for pattern in (
        AntiPattern(
            "conflated-task-attempt",
            "retry overwrites the failed record; nobody can say how many tries were made or what each cost",
            "baseline",
            "append_only_attempts",
            seams=Seams(recovery=rewrite_attempt),
            store=lambda: OverwritingStore(keep_events=False),
        ),
        AntiPattern(
            "no-fencing",
            "a worker that lost its lease reconnects and records completion over its replacement's work",
            "zombie-worker",
            "fenced_writes",
            edit=_no_fencing,
        ),
        AntiPattern(
            "timestamp-keys",
            "every retry looks new, so the provider receives duplicate operations",
            "duplicate-delivery",
            "one_effect_per_operation",
            seams=Seams(mint_key=timestamp_key),
        ),
        AntiPattern(
            "db-only-dedup",
            "the factory times out, has no record, and retries a PR creation that already succeeded",
            "provider-outage",
            "one_effect_per_operation",
            seams=Seams(dedup=database_only),
        ),
        AntiPattern(
            "blind-retry",
            "the same validation failure repeats until the budget is gone",
            "baseline",
            "classified_retry",
            edit=_blind_retry,
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
            edit=_cancel_as_flag,
            worker_seams=WorkerSeams(ignores_cancel=True),
        ),
        AntiPattern(
            "silent-queue-growth",
            "queue age climbs, deadlines pass, and admitted work was never going to be served in time",
            "capacity-overload",
            "no_lost_tasks",
            tune=_unbounded_queue,
        ),
        AntiPattern(
            "budget-burn",
            "a loop or hostile input drains tokens and money without producing anything",
            "budget-burn",
            "budgets_hold",
            edit=_budget_burn,
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
            seams=Seams(mint_key=worker_key),
            worker_seams=WorkerSeams(mints_own_keys=True),
        ),
        AntiPattern(
            "restart-from-scratch",
            "a crashed workflow reruns from step one and repeats every side effect",
            "crash-restart",
            "one_effect_per_operation",
            seams=Seams(mint_key=attempt_scoped_key),
            worker_seams=WorkerSeams(ignores_checkpoint=True),
        ),
        AntiPattern(
            "unrecorded-effects",
            "the factory cannot say what a run did, and blames the model's nondeterminism",
            "baseline",
            "complete_audit",
            worker_seams=WorkerSeams(bypasses_gateway=("push",)),
        ),
    )
}


def antipattern(name: str) -> AntiPattern:
    found = ANTIPATTERNS.get(name)
    if found is None:
        raise InputError(f"unknown anti-pattern {name!r}; use one of {', '.join(ANTIPATTERNS)}")
    return found
