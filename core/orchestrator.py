"""The Orchestrator: the public facade of the contracts, each one store transaction, built from the modules that hold them.

Each public method is one contract. It checks every argument first, then
runs as one store transaction: the guards the spec names for that call are
computed, the compiled table answers with the one enabled row or a
refusal, and the store writes the change guarded by the record's version.
Every call, accepted or refused, appends an event, so the history alone
shows what was asked, with which fence, and why it was refused.

The contracts live by concern: `tasks` (create, accept, dispatch, retry),
`admission_gate` (queued -> admitted), `lease` (claim, the fenced writes,
complete, the reaper), `gateway` (tool grants and receipts), `reconciler`
(reconcile, verify), `cancellation`, and `loop` (the decision after each
Attempt). What they share is `context.Context`; the rules a port or an
experiment may replace are `seams.Seams`, passed here.

The reliability controls keep this process's state: the admission queue is
derived from the store and rebuilt on start; rate limits, breakers and
health probes start fresh. With several orchestrator processes on one store,
one of them should run admission, or their bulkheads count only what each
has seen.
"""

from __future__ import annotations

import random

from .admission import AdmissionController
from .admission_gate import AdmissionGate
from .breaker import Breakers
from .cancellation import Cancellation
from .clock import Clock
from .concurrency import ConcurrencyLimits
from .config import CoreConfig, ReliabilityConfig
from .context import Context, contract
from .errors import InputError
from .fence import token_digest
from .gateway import ToolCall, ToolGateway
from .lease import Leases
from .loop import Loop
from .policy import Decision
from .provider import ProviderAdapter
from .rate_limit import RateLimiter
from .reconciler import Reconciler
from .records import Budget, Plan, Task
from .results import Accepted, Claim, Grant, Reconciliation, Refused, Renewal, Result
from .retry_budget import RetryBudgets
from .seams import Seams, mint_key
from .store import Store
from .table import Table, packaged
from .tasks import Submission, Tasks
from .validate import check_budget, instance, text

__all__ = [
    "Accepted",
    "Claim",
    "Grant",
    "Orchestrator",
    "Reconciliation",
    "Refused",
    "Renewal",
    "Result",
    "check_budget",
    "mint_key",
    "token_digest",
]


class Orchestrator:
    """The reference orchestrator over one store, one clock and one provider adapter."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        provider: ProviderAdapter,
        config: CoreConfig | None = None,
        reliability: ReliabilityConfig | None = None,
        rng: random.Random | None = None,
        *,
        seams: Seams | None = None,
        table: Table | None = None,
    ) -> None:
        """`rng` draws backoff jitter; pass a seeded `random.Random` (the default is seeded with 0, never the global one).

        `seams` replaces the core's rules (key minting, the retry rule, the
        fence, spend, deduplication, recovery); the default is the reference
        for each. `table` is the spec this orchestrator runs
        (`core.table.table_for(...)`); the default is the packaged one.
        """
        config = CoreConfig() if config is None else instance(config, "config", CoreConfig)
        reliability = ReliabilityConfig() if reliability is None else instance(reliability, "reliability", ReliabilityConfig)
        self.rng = random.Random(0) if rng is None else instance(rng, "rng", random.Random)
        seams = Seams() if seams is None else instance(seams, "seams", Seams)
        if not callable(getattr(clock, "now", None)):
            raise InputError(f"clock must have a now() method returning seconds, not {clock!r:.60}")
        if not callable(getattr(store, "transaction", None)):
            raise InputError(f"store must be a Store (with transaction()), not {store!r:.60}")
        table = packaged() if table is None else instance(table, "table", Table)
        context = Context(store, clock, provider, config, reliability, seams, table)
        self._context = context
        self._gate = AdmissionGate(context)
        self._gateway = ToolGateway(context)
        self._reconciler = Reconciler(context, self._gateway.breakers)
        self._leases = Leases(context, self._reconciler.reconcile)
        self._tasks = Tasks(context, self.rng, self._gate.queue)
        self._cancellation = Cancellation(context, self._reconciler.reconcile)
        self._loop = Loop(context)

    # ------------------------------------------------- what it is built of

    @property
    def store(self) -> Store:
        return self._context.store

    @property
    def clock(self) -> Clock:
        return self._context.clock

    @property
    def provider(self) -> ProviderAdapter:
        return self._context.provider

    @provider.setter
    def provider(self, provider: ProviderAdapter) -> None:
        self._context.provider = provider

    @property
    def config(self) -> CoreConfig:
        return self._context.config

    @property
    def reliability(self) -> ReliabilityConfig:
        return self._context.reliability

    @property
    def seams(self) -> Seams:
        return self._context.seams

    @property
    def table(self) -> Table:
        """The spec this orchestrator runs."""
        return self._context.table

    @property
    def admission(self) -> AdmissionController:
        """The admission controller (this process's queue and in-flight slots)."""
        return self._gate.controller

    @property
    def limiter(self) -> RateLimiter:
        return self._gateway.limiter

    @property
    def breakers(self) -> Breakers:
        return self._gateway.breakers

    @property
    def retry_budgets(self) -> RetryBudgets:
        return self._gateway.retry_budgets

    @property
    def concurrency(self) -> ConcurrencyLimits:
        """The adaptive concurrency limit of each dependency (this process's view, as the breakers are)."""
        return self._gateway.concurrency

    # ------------------------------------------------------------- tasks

    def create_task(
        self,
        task_id: str,
        objective: str,
        workspace: str,
        scope: str = "",
        budget: Budget | None = None,
        priority: int = 0,
        deadline_at: float | None = None,
    ) -> Task:
        """Capture a task in the inbox. Its workspace is its bulkhead partition; priority and deadline steer load shedding."""
        return self._tasks.create(task_id, objective, workspace, scope, budget, priority, deadline_at)

    def accept_task(self, task_id: str) -> Refused | Accepted:
        return self._tasks.accept(task_id)

    def dispatch(self, task_id: str, plan: Plan) -> Refused | Accepted:
        """First dispatch: only for a dispatchable task with no Attempt at all; appends Attempt 1."""
        return self._tasks.dispatch(task_id, plan)

    def retry(self, task_id: str, reason: str, plan: Plan) -> Refused | Accepted:
        """Attempt N+1, only with no active Attempt, the latest failed, a reason, policy's permission and budget left."""
        return self._tasks.retry(task_id, reason, plan)

    def submit_many(self, entries: list[Submission] | tuple[Submission, ...]) -> list[Refused | Accepted]:
        """Bulk intake: create_task, accept_task and dispatch for each Submission, all in one store transaction.

        One result per entry, in order: its dispatch's Accepted, or its first
        refusal (a task id already present, in the store or earlier in the
        batch, is refused for that entry alone and writes nothing). Each task
        is recorded exactly as the three calls would record it. Any bad entry,
        or more than `SUBMISSIONS_MAX` (1,000), is an InputError before
        anything is written; an exception rolls the whole batch back, and
        admission queues the new Attempts only once it commits. See
        `core.tasks.Tasks.submit_many`.
        """
        return self._tasks.submit_many(entries)

    # --------------------------------------------------------- admission

    def refresh(self) -> None:
        """Rebuild this orchestrator's derived admission state from the store.

        One process's admission queue and in-flight slots are derived from the
        moves it saw. When other processes share the store (workers claiming
        and completing elsewhere), call this before an admission step so the
        bulkheads count what the store holds now.
        """
        self._gate.refresh()

    def refresh_after_race(self) -> None:
        """`contract` calls this before running an admission step again: the lost run decided in memory too."""
        self._gate.refresh()

    @contract
    def run_admission(self) -> dict[str, Refused | Accepted]:
        """One admission step: admit, defer or shed waiting Attempts (bulkheads, backpressure, shedding, budgets, rate)."""
        with self._context as tx:
            return self._gate.step(tx)

    @contract
    def admit(self, attempt_id: str) -> Refused | Accepted:
        """Run one admission step and say what it decided for this Attempt: Accepted only when admitted.

        An unknown Attempt is NotFound before the step runs. A deferral or a
        shed is refused here with its reason (the step itself recorded it as
        an accepted defer or shed transition).
        """
        text(attempt_id, "attempt_id", 220)
        with self._context as tx:
            return self._gate.admit(tx, self._context.attempt(tx, attempt_id))

    def admission_status(self, attempt_id: str) -> str:
        """Where admission holds an Attempt: "sleeping" (waiting out a backoff), "waiting", "in_flight", or "gone"."""
        return self._gate.status(text(attempt_id, "attempt_id", 220))

    # ------------------------------------------------------------- lease

    def record_health_probe(self, worker_id: str, ok: bool) -> None:
        """The platform's cheap check that a worker can do work. Health probes gate claims; heartbeats gate renewals."""
        self._leases.record_health_probe(worker_id, ok)

    def claim_attempt(self, task_id: str, worker_id: str, workspace: str, healthy: bool | None = None) -> Refused | Claim:
        """Atomically take the task's admitted Attempt and a new lease; a second caller is refused.

        `healthy`, when given, is a health probe taken with the claim, recorded with it.
        """
        return self._leases.claim(task_id, worker_id, workspace, healthy)

    def claim_next(self, worker_id: str, workspace: str, healthy: bool | None = None) -> Refused | Claim | None:
        """Claim the longest-admitted Attempt in `workspace` (workers pulling from a shared store); None when there is none.

        Workers claiming side by side take different Attempts: the store
        offers only rows no other transaction holds (SKIP LOCKED on a server).
        """
        return self._leases.claim_next(worker_id, workspace, healthy)

    def claim_next_and_start(
        self, worker_id: str, workspace: str, healthy: bool | None = None
    ) -> Refused | tuple[Claim, Refused | Accepted] | None:
        """`claim_next`, then `start_attempt` under the new lease, in one store transaction (two rows, two events, one commit).

        For a worker that starts the moment it claims. None when there is
        nothing to claim; a refused claim comes back alone.
        """
        return self._leases.claim_next_and_start(worker_id, workspace, healthy)

    def start_attempt(self, attempt_id: str, generation: int, token: str) -> Refused | Accepted:
        return self._leases.start(attempt_id, generation, token)

    def renew_lease(self, attempt_id: str, generation: int, token: str) -> Refused | Renewal:
        """Extend expiry under the current fence; tells the worker when cancellation was requested."""
        return self._leases.renew(attempt_id, generation, token)

    def checkpoint(self, attempt_id: str, generation: int, token: str, checkpoint: str) -> Refused | Accepted:
        return self._leases.checkpoint(attempt_id, generation, token, checkpoint)

    def complete_attempt(self, attempt_id: str, generation: int, token: str, result: str, head_sha: str | None = None) -> Result:
        """Accept the worker's result for verification under the current fence; a late one triggers reconciliation."""
        return self._leases.complete(attempt_id, generation, token, result, head_sha)

    def report_failure(self, attempt_id: str, generation: int, token: str, domain: str, signature: str, detail: str = "") -> Result:
        """The worker reports a failure; effects may be in flight, so the Attempt goes to Reconciling, never straight to Failed."""
        return self._leases.report_failure(attempt_id, generation, token, domain, signature, detail)

    def reap(self) -> list[tuple[str, str]]:
        """Expired leases make their Attempts Suspect; unanswered cancellations time out into Reconciling."""
        return self._leases.reap()

    # ------------------------------------------------------ tool gateway

    def grant_tool(
        self,
        attempt_id: str,
        generation: int,
        token: str,
        operation: str,
        identity: str,
        request: str = "",
        call_deadline_s: float = 60.0,
        cost_usd: float = 0.0,
        tokens: int = 0,
        spans_attempts: bool = True,
        key: str | None = None,
        dependency: str = "code_host",
    ) -> Refused | Grant:
        """The tool gateway: mint and persist the operation key, check fence, time, spend, rate and circuit, then authorize one call.

        A key that was already receipted is a replay: the recorded result comes
        back and the worker must not call the provider again. A worker that
        presents its own `key` is refused unless it is the one the orchestrator mints.
        When `dependency`'s circuit is open and a fallback is declared for it, the
        call goes to the fallback and the switch is recorded on the Attempt.
        """
        call = ToolCall(operation, identity, request, call_deadline_s, cost_usd, tokens, spans_attempts, key, dependency)
        gateway = self._gateway
        return gateway.grant(attempt_id, generation, token, gateway.check(attempt_id, generation, token, call))

    def record_receipt(
        self, attempt_id: str, generation: int, token: str, key: str, provider_id: str, result: str = ""
    ) -> Refused | Accepted:
        """Record the provider's identity for an operation key (fenced; a late receipt is found by reconciliation instead)."""
        return self._gateway.record_receipt(attempt_id, generation, token, key, provider_id, result)

    def report_call_failure(self, attempt_id: str, generation: int, token: str, key: str, signature: str) -> Refused | Accepted:
        """A granted provider call failed: its dependency's circuit breaker counts the failure signature (fenced)."""
        return self._gateway.report_call_failure(attempt_id, generation, token, key, signature)

    # -------------------------------------------- reconciliation, verify

    def reconcile_attempt(self, attempt_id: str) -> Refused | Reconciliation:
        """For each operation key, find the matching effect at the provider, record it, and classify the outcome."""
        return self._reconciler.reconcile(attempt_id)

    def verify_attempt(self, attempt_id: str) -> Refused | Accepted:
        """Success needs independent evidence: every effect found at the provider and passed by its verdict."""
        return self._reconciler.verify(attempt_id)

    # ------------------------------------------------------ cancellation

    def cancel_attempt(self, attempt_id: str, reason: str) -> Result:
        """The protocol: prevent new claims and grants, signal, then acknowledgement or timeout, reconcile, terminate."""
        return self._cancellation.cancel_attempt(attempt_id, reason)

    def acknowledge_cancel(self, attempt_id: str, generation: int, token: str) -> Result:
        return self._cancellation.acknowledge(attempt_id, generation, token)

    def cancel_task(self, task_id: str, reason: str) -> Refused | Accepted:
        """Cancel the task, and run the cancellation protocol on its active Attempt."""
        return self._cancellation.cancel_task(task_id, reason)

    # ---------------------------------------------------------- the loop

    def decide(self, task_id: str) -> Decision | Refused:
        """After an Attempt ends: exactly one of verify, correct, retry, stop, escalate, recorded with its reason."""
        return self._loop.decide(task_id)

    def release(self, task_id: str, reason: str, budget: Budget | None = None) -> Refused | Accepted:
        """An operator resolves a resting task; only this human decision may extend a budget."""
        return self._loop.release(task_id, reason, budget)

    def approve(self, task_id: str) -> Refused | Accepted:
        return self._loop.approve(task_id)
