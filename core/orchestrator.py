"""The contracts: dispatch and retry, claim, renew, the tool gateway, complete, the reaper, reconcile, cancel, verify, decide.

Each public method is one contract and runs as one store transaction. Every
state change is asked of the compiled transition table: the method computes
the guards the spec names for that call, the table answers with the one
enabled row or a refusal, and the store writes the change guarded by the
record's version. Every call, accepted or refused, appends an event, so the
history alone shows what was asked, with which fence, and why it was refused.

Fencing: a fenced call presents (attempt id, generation, token). It is
accepted only if the generation is the Attempt's current one and the token's
digest matches in constant time; otherwise it is kept as a late event and
changes nothing. A stale completion also triggers reconciliation of the
Attempt it names, because a late worker is evidence that effects may exist.

Reconciliation and verification read the provider through its adapter
before they open the write transaction, then write guarded by the version
they read, so no database lock is held across a provider call.

The reliability controls (core/admission.py, backoff.py, rate_limit.py,
breaker.py) are consulted here, at the two places the chapter pins them:
admission (queued to admitted) and the tool gateway (grant_tool). Their state
is this process's: the admission queue is derived from the store and rebuilt
on start, and its bookkeeping is applied only when the transaction that
implies it commits; rate limits, breakers and health probes start fresh. With
several orchestrator processes on one store, one of them should run
admission, or their bulkheads count only what each has seen.
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import hmac
import random
import secrets
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .admission import ADMIT, SHED, AdmissionController
from .backoff import Backoff
from .breaker import OPEN, Breakers
from .clock import Clock
from .config import CoreConfig, ReliabilityConfig
from .errors import InputError, NotFound
from .machine import ACTIVE, ATTEMPT, ATTEMPT_TERMINAL, EXPIRABLE, FENCED, LEASED, TASK
from .policy import DOMAINS, Decision, classify, decide, poison, retry_refusal, spend_fits
from .policy import budget_exhausted as _budget_exhausted
from .provider import Effect, ProviderAdapter
from .rate_limit import RateLimiter, TokenBucket
from .records import Attempt, Budget, Intent, Lease, Manifest, Plan, Task
from .retry_budget import RetryBudgets
from .store import Store, Transaction

# ----------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Refused:
    """A contract call the table or a fence refused; it changed nothing but the history."""

    reason: str
    domain: str | None = None
    """The failure domain a refusal counts as, where it is not the caller's defect (a rate denial is capacity)."""
    retry_after_s: float | None = None
    """When the gateway knows it, how long until asking again could be granted (an open circuit's cool-down left)."""
    accepted: bool = field(default=False, init=False)


@dataclass(frozen=True, slots=True)
class Accepted:
    """A contract call that moved a record; `state` is where the Attempt (or Task) now is."""

    state: str
    detail: str = ""
    accepted: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class Claim:
    lease: Lease
    manifest: Manifest
    accepted: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class Renewal:
    expires_at: float
    cancel_requested: bool
    accepted: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class Grant:
    """Authority for one side effect: the orchestrator-minted key, and the recorded result on replay."""

    key: str
    replay: str | None
    deadline_at: float
    dependency: str
    """Where the call goes: the dependency asked for, or its declared fallback while the circuit is open."""
    timeout_left_s: float
    """What the Attempt's timeout budget has left, before this call."""
    accepted: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What reconciliation found: landed, absent, contradictory, or pending (calls still in flight)."""

    outcome: str
    state: str
    findings: tuple[str, ...]
    accepted: bool = field(default=True, init=False)


Result = Refused | Accepted | Claim | Renewal | Grant | Reconciliation


def _denial(dependency: str, verdicts: dict[str, bool]) -> str:
    """Why a grant the table refuses on the dependency's verdicts was refused, in words for the refused event."""
    if not verdicts["rate_allows"]:
        return f"rate limit of {dependency} reached (a capacity denial)"
    if not verdicts["retry_budget_allows"]:
        return f"retry budget of {dependency} spent: retries are held to their share of first calls"
    return ""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def mint_key(operation: str, task_id: str, attempt_id: str, identity: str, spans_attempts: bool) -> str:
    """The operation key: named by the logical operation, never by a moment in time.

    An operation that may span attempts (a PR for a head SHA) is keyed by the
    Task and the content, so Attempt N+1 finds Attempt N's effect; one the
    Attempt owns is keyed by the Attempt.
    """
    owner = task_id if spans_attempts else attempt_id
    return f"{operation}:{owner}:{identity}"


def _text(value: Any, name: str, limit: int = 10_000, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()) or len(value) > limit:
        raise InputError(f"{name} must be a non-empty string of at most {limit} characters, not {value!r:.60}")
    return value


def _number(value: Any, name: str, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit or value != value:
        raise InputError(f"{name} must be a number from 0 to {limit}, not {value!r}")
    return value


def _int(value: Any, name: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise InputError(f"{name} must be an integer from 0 to {limit}, not {value!r}")
    return value


class _Unit:
    """One store transaction, plus the in-memory bookkeeping its writes imply, applied only if it commits."""

    __slots__ = ("_context", "_pending")

    def __init__(self, context: Any, pending: list) -> None:
        self._context = context
        self._pending = pending

    def __enter__(self) -> Transaction:
        self._pending.clear()
        return self._context.__enter__()

    def __exit__(self, kind: type | None, error: BaseException | None, trace: Any) -> None:
        try:
            self._context.__exit__(kind, error, trace)
        finally:
            pending = ()
            if self._pending:  # most contracts imply no bookkeeping: no copy on the hot path
                pending = tuple(self._pending)
                self._pending.clear()
        if kind is None:
            for step in pending:
                step()


def check_budget(budget: Budget) -> None:
    """A task's budget is a Budget whose every limit is a number in range: bad input otherwise (the simulator's config uses it too)."""
    if not isinstance(budget, Budget):
        raise InputError("budget must be a Budget")
    _int(budget.attempts_max, "attempts_max", 1000)
    if budget.attempts_max < 1:
        raise InputError("attempts_max must be at least 1: a task that may make no Attempt could never start, nor come to rest")
    _number(budget.elapsed_max_s, "elapsed_max_s", 365 * 86400)
    _number(budget.cost_max_usd, "cost_max_usd", 1e7)
    _int(budget.tokens_max, "tokens_max", 10**12)
    _int(budget.repeated_signatures_max, "repeated_signatures_max", 1000)
    _int(budget.interruptions_max, "interruptions_max", 1000)


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
    ) -> None:
        """`rng` draws backoff jitter; pass a seeded `random.Random` (the default is seeded with 0, never the global one)."""
        self.store = store
        self.clock = clock
        self.provider = provider
        self.config = config or CoreConfig()
        self.reliability = reliability or ReliabilityConfig()
        self.rng = rng if rng is not None else random.Random(0)
        # Rate limits, breakers and health are this orchestrator's view of its dependencies and workers: they
        # live in memory, like a process's connection pool, and start fresh (closed, full, unprobed) on restart.
        now = clock.now()
        self.limiter = RateLimiter(self.reliability.rate_limits, now)
        self.breakers = Breakers({name: self.reliability.breaker for name in self.reliability.rate_limits})
        self.retry_budgets = RetryBudgets(tuple(self.reliability.rate_limits), self.reliability.retry_budget)
        self.fallbacks = {fallback.dependency: fallback for fallback in self.reliability.fallbacks}
        self._probes: dict[str, tuple[float, bool]] = {}
        self._pending: list = []
        self.admission = AdmissionController(self.reliability.admission, capacity_max=self.config.admitted_max)
        rate = self.reliability.admission_rate
        self._admission_bucket = TokenBucket(rate, now) if rate is not None else None
        # Attempts waiting out a backoff are not yet in the admission queue, so they hold no slot while they wait.
        self._sleeping: list[tuple[float, float, str]] = []
        self._asleep: set[str] = set()
        """The ids in `_sleeping` still asleep; one that left queued (cancelled) is dropped here and skipped on waking."""
        self._rebuild_admission()

    def _unit(self) -> _Unit:
        return _Unit(self.store.transaction(), self._pending)

    def _rebuild_admission(self) -> None:
        """The admission controller is derived state: rebuild it from the store's active Attempts (after a restart too)."""
        with self.store.transaction() as tx:
            for attempt in sorted(tx.attempts_in(ACTIVE), key=lambda a: (a.created_at, a.attempt_id)):
                task = tx.task(attempt.task_id)
                if attempt.state != "queued":
                    self.admission.restore(attempt.attempt_id, task.workspace)
                else:
                    self._queue(attempt, task)

    def _queue(self, attempt: Attempt, task: Task) -> None:
        """Into the admission queue, or to sleep until its backoff has passed."""
        if attempt.eligible_at is not None and attempt.eligible_at > self.clock.now():
            heapq.heappush(self._sleeping, (attempt.eligible_at, attempt.created_at, attempt.attempt_id))
            self._asleep.add(attempt.attempt_id)
        else:
            self.admission.enqueue(attempt.attempt_id, task.workspace, task.priority, attempt.created_at, task.deadline_at)

    def admission_status(self, attempt_id: str) -> str:
        """Where admission holds an Attempt: "sleeping" (waiting out a backoff), "waiting", "in_flight", or "gone"."""
        if attempt_id in self._asleep:
            return "sleeping"
        return self.admission.status(attempt_id)

    def _wake(self, tx: Transaction, now: float) -> None:
        """Attempts whose backoff has passed join the admission queue (unless they left queued meanwhile, e.g. cancelled)."""
        while self._sleeping and self._sleeping[0][0] <= now:
            _eligible_at, _created_at, attempt_id = heapq.heappop(self._sleeping)
            if attempt_id not in self._asleep:
                continue
            self._asleep.discard(attempt_id)
            attempt = tx.attempt(attempt_id)
            if attempt is not None and attempt.state == "queued":
                self._queue(attempt, tx.task(attempt.task_id))

    def _dequeue(self, attempt_id: str) -> None:
        """An Attempt left queued (admitted, shed, cancelled): out of the queue, or out of its backoff sleep."""
        self._asleep.discard(attempt_id)
        self.admission.remove(attempt_id)

    def _release(self, attempt_id: str) -> None:
        if self.admission.status(attempt_id) == "in_flight":
            self.admission.release(attempt_id)

    # ------------------------------------------------------------ helpers

    def _event(
        self,
        tx: Transaction,
        actor: str,
        kind: str,
        task_id: str,
        attempt: Attempt | None,
        accepted: bool,
        reason: str,
        from_state: str | None = None,
        to_state: str | None = None,
        generation: int | None = None,
        worker_id: str | None = None,
        detail: str = "",
    ) -> None:
        tx.append_event(
            at=self.clock.now(),
            actor=actor,
            kind=kind,
            task_id=task_id,
            attempt_id=attempt.attempt_id if attempt else None,
            accepted=accepted,
            reason=reason,
            from_state=from_state,
            to_state=to_state,
            generation=generation,
            worker_id=worker_id,
            detail=detail,
        )

    def _fire(
        self,
        tx: Transaction,
        attempt: Attempt,
        trigger: str,
        actor: str,
        holds: dict[str, bool],
        presented: int | None = None,
        detail: str = "",
        **changes: Any,
    ) -> Refused | Accepted:
        """Ask the attempt table; write the change and its event, or record the refusal.

        A refused fenced call whose lease is no longer honoured (expired, or the
        Attempt left the leased states) is marked late: its authority is gone.
        """
        fired = ATTEMPT.fire(attempt.state, trigger, holds.__getitem__)
        before = attempt.state
        worker = changes.get("worker_id", attempt.worker_id) if actor == "worker" else None
        if fired is None:
            reason = ATTEMPT.why_refused(before, trigger, holds.__getitem__)
            if trigger in FENCED and not self._lease_current(attempt):
                reason = f"late: the lease is no longer honoured (expired at {attempt.expires_at}); {reason}"
            elif trigger in FENCED and before not in LEASED:
                reason = f"late: the lease is no longer honoured (the Attempt is {before}, no longer leased); {reason}"
            self._event(tx, actor, trigger, attempt.task_id, attempt, False, reason, before, before, presented, worker, detail)
            return Refused(reason)
        dest, _row = fired
        if dest != before:
            changes["state"] = dest
            if before == "queued":
                self._pending.append(partial(self._dequeue, attempt.attempt_id))
            elif dest in ATTEMPT_TERMINAL:
                self._pending.append(partial(self._release, attempt.attempt_id))
        tx.update_attempt(attempt, **changes)
        self._event(
            tx,
            actor,
            trigger,
            attempt.task_id,
            attempt,
            True,
            "accepted",
            before,
            dest,
            changes.get("generation", presented),
            worker,
            detail,
        )
        return Accepted(dest, detail)

    def _fire_task(
        self, tx: Transaction, task: Task, trigger: str, actor: str, holds: dict[str, bool], detail: str = "", **changes: Any
    ) -> Refused | Accepted:
        fired = TASK.fire(task.state, trigger, holds.__getitem__)
        before = task.state
        if fired is None:
            reason = TASK.why_refused(before, trigger, holds.__getitem__)
            self._event(tx, actor, trigger, task.task_id, None, False, reason, before, before, detail=detail)
            return Refused(reason)
        dest, _row = fired
        tx.update_task(task, state=dest, **changes)
        self._event(tx, actor, trigger, task.task_id, None, True, "accepted", before, dest, detail=detail)
        return Accepted(dest, detail)

    def _task(self, tx: Transaction, task_id: Any) -> Task:
        task = tx.task(_text(task_id, "task_id", 200))
        if task is None:
            raise NotFound(f"unknown task {task_id!r}")
        return task

    def _attempt(self, tx: Transaction, attempt_id: Any) -> Attempt:
        attempt = tx.attempt(_text(attempt_id, "attempt_id", 220))
        if attempt is None:
            raise NotFound(f"unknown attempt {attempt_id!r}")
        return attempt

    def _fence(self, tx: Transaction, attempt: Attempt, trigger: str, generation: Any, token: Any) -> Refused | None:
        """Refuse, and keep as a late event, any fenced call that does not prove the current lease."""
        _int(generation, "generation", 2**62)
        _text(token, "token", 200)
        current = attempt.generation
        # Only a stale generation is "late" (a lease that once was real); the others never proved anything.
        if attempt.token_digest is None:
            reason = "unfenced: no lease was issued for this attempt"
        elif generation != current:
            reason = f"late: stale fence, generation {generation} presented, current is {current}"
        elif not hmac.compare_digest(token_digest(token), attempt.token_digest):
            reason = "forged: the token does not match the lease"
        else:
            return None
        # No worker id: an unproven call cannot be attributed to the lease holder.
        self._event(tx, "worker", trigger, attempt.task_id, attempt, False, reason, attempt.state, attempt.state, generation, None)
        return Refused(reason)

    def _lease_current(self, attempt: Attempt) -> bool:
        return attempt.expires_at is not None and self.clock.now() < attempt.expires_at

    # ---------------------------------------------------- task lifecycle

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
        if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > 1_000_000:
            raise InputError(f"priority must be an integer within a million of 0, not {priority!r}")
        if deadline_at is not None:
            _number(deadline_at, "deadline_at", 1e12)
        task = Task(
            task_id=_text(task_id, "task_id", 200),
            objective=_text(objective, "objective"),
            scope=_text(scope, "scope", empty=True),
            workspace=_text(workspace, "workspace", 200),
            state=TASK.initial,
            budget=budget or Budget(),
            created_at=self.clock.now(),
            priority=priority,
            deadline_at=deadline_at,
        )
        check_budget(task.budget)
        with self._unit() as tx:
            if tx.task(task.task_id) is not None:
                raise InputError(f"task {task.task_id!r} already exists")
            tx.insert_task(task)
            self._event(tx, "operator", "create", task.task_id, None, True, "accepted", None, task.state)
        return copy.copy(task)

    def accept_task(self, task_id: str) -> Refused | Accepted:
        with self._unit() as tx:
            return self._fire_task(tx, self._task(tx, task_id), "accept", "operator", {})

    def dispatch(self, task_id: str, plan: Plan) -> Refused | Accepted:
        """First dispatch: only for a dispatchable task with no Attempt at all; appends Attempt 1."""
        self._check_plan(plan)
        with self._unit() as tx:
            task = self._task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            holds = {"no_prior_attempt": not attempts, "budget_left": _budget_exhausted(task, attempts) is None}
            result = self._fire_task(tx, task, "dispatch", "orchestrator", holds)
            if result.accepted:
                self._append_attempt(tx, task, 1, plan, None, None)
            return result

    def retry(self, task_id: str, reason: str, plan: Plan) -> Refused | Accepted:
        """Attempt N+1, only with no active Attempt, the latest failed, a reason, policy's permission and budget left."""
        self._check_plan(plan)
        _text(reason, "reason", 2000, empty=True)
        with self._unit() as tx:
            task = self._task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            latest = attempts[-1] if attempts else None
            refusal = self._retry_refusal(task, attempts, plan) if latest is not None and latest.state == "failed" else "no failed attempt"
            holds = {
                "no_active_attempt": all(a.state not in ACTIVE for a in attempts),
                "latest_attempt_failed": latest is not None and latest.state == "failed",
                "reason_given": len(reason.strip()) >= self.config.reason_length_min,
                "policy_permits_retry": refusal is None,
                "budget_left": _budget_exhausted(task, attempts) is None,
            }
            detail = f"policy: {refusal}" if refusal else reason.strip()
            result = self._fire_task(tx, task, "retry", "orchestrator", holds, detail=detail)
            if result.accepted:
                backoff_s = self._backoff_s(attempts)
                self._append_attempt(tx, task, len(attempts) + 1, plan, latest, reason.strip(), backoff_s)
            return result

    def _retry_refusal(self, task: Task, attempts: list[Attempt], plan: Plan) -> str | None:
        """The single place the retry policy is asked whether another Attempt may follow."""
        return retry_refusal(task, attempts, plan)

    def _backoff_s(self, attempts: list[Attempt]) -> float:
        """The pause before the next claim: only after a transient failure (a back-off-and-retry domain)."""
        latest = attempts[-1]
        if DOMAINS[latest.failure_domain].response != "back_off_and_retry":
            return 0.0
        run = 0
        for attempt in reversed(attempts):
            if attempt.failure_domain != latest.failure_domain:
                break
            run += 1
        config = self.reliability.backoff
        backoff = Backoff(config, self.rng)
        if run > 1 and config.strategy == "decorrelated_jitter":
            backoff.restore(latest.backoff_s)  # the sequence continues from the delay before the latest Attempt
        return backoff.delay_s(run - 1)

    @staticmethod
    def _check_plan(plan: Plan) -> None:
        if not isinstance(plan, Plan):
            raise InputError("plan must be a Plan")
        _text(plan.hypothesis, "hypothesis", 2000)
        for name in ("base_sha", "executor", "model", "context_version", "policy_version"):
            _text(getattr(plan, name), name, 200)

    def _append_attempt(
        self, tx: Transaction, task: Task, number: int, plan: Plan, previous: Attempt | None, reason: str | None, backoff_s: float = 0.0
    ) -> None:
        attempt = Attempt(
            attempt_id=f"{task.task_id}#{number}",
            task_id=task.task_id,
            number=number,
            state=ATTEMPT.initial,
            created_at=self.clock.now(),
            hypothesis=plan.hypothesis,
            previous_attempt_id=previous.attempt_id if previous else None,
            reason=reason,
            plan=plan,
            eligible_at=self.clock.now() + backoff_s if backoff_s else None,
            backoff_s=backoff_s,
        )
        tx.insert_attempt(attempt)
        self._event(tx, "orchestrator", "append", task.task_id, attempt, True, reason or "first dispatch", None, attempt.state)
        self._pending.append(partial(self._queue, attempt, task))

    # ----------------------------------------------------------- admission

    def run_admission(self) -> dict[str, Refused | Accepted]:
        """One admission step: admit, defer or shed waiting Attempts (bulkheads, backpressure, shedding, budgets, rate)."""
        now = self.clock.now()
        results: dict[str, Refused | Accepted] = {}
        with self._unit() as tx:
            self._wake(tx, now)
            bucket = self._admission_bucket
            decisions = self.admission.decide(now, None if bucket is None else int(bucket.available(now)))
            for decision in decisions:
                if decision.trigger == ADMIT and bucket is not None:
                    bucket.try_acquire(now)
                attempt = self._attempt(tx, decision.item_id)
                task = self._task(tx, attempt.task_id)
                results[attempt.attempt_id] = self._apply_admission(tx, attempt, task, decision, now)
        return results

    def _apply_admission(self, tx: Transaction, attempt: Attempt, task: Task, decision: Any, now: float) -> Refused | Accepted:
        budget_left = _budget_exhausted(task, tx.attempts_of(task.task_id)[:-1]) is None
        holds = {**decision.guards, "budget_left": budget_left}
        if decision.trigger == ADMIT and not budget_left:
            # Denial of wallet: a budget ran out while it waited; it fails (classified) rather than wait forever.
            self._pending.append(partial(self._release, attempt.attempt_id))
            return self._fire(
                tx,
                attempt,
                "exceed_budget",
                "orchestrator",
                holds,
                detail="budget exhausted at admission",
                failure_domain="capacity",
                failure_signature="budget:exhausted at admission",
                ended_at=now,
            )
        changes = {}
        if decision.trigger == SHED:
            changes = {"failure_domain": "capacity", "failure_signature": "capacity:shed", "ended_at": now}
        result = self._fire(tx, attempt, decision.trigger, "orchestrator", holds, detail=decision.reason, **changes)
        if decision.trigger == ADMIT and not result.accepted:
            self._pending.append(partial(self._release, attempt.attempt_id))
        return result

    def admit(self, attempt_id: str) -> Refused | Accepted:
        """Run one admission step and say what it decided for this Attempt: Accepted only when admitted.

        A deferral or a shed is refused here with its reason (the step itself
        recorded it as an accepted defer or shed transition).
        """
        result = self.run_admission().get(_text(attempt_id, "attempt_id", 220))
        if result is not None and result.accepted and result.state != "admitted":
            return Refused(f"not admitted ({result.state}): {result.detail}")
        if result is not None:
            return result
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            if attempt.state != "queued":
                return self._fire(tx, attempt, "admit", "orchestrator", {})  # no admit row leaves this state: refused, kept
            if attempt.eligible_at is not None and attempt.eligible_at > self.clock.now():
                reason = f"waiting out its backoff until {attempt.eligible_at:g} before it joins the admission queue"
            else:
                reason = f"still waiting for admission (queue depth {self.admission.queue_depth()})"
            self._event(tx, "orchestrator", "admit", attempt.task_id, attempt, False, reason, attempt.state, attempt.state)
            return Refused(reason)

    # --------------------------------------------------------------- lease

    def record_health_probe(self, worker_id: str, ok: bool) -> None:
        """The platform's cheap check that a worker can do work. Health probes gate claims; heartbeats gate renewals."""
        _text(worker_id, "worker_id", 200)
        if not isinstance(ok, bool):
            raise InputError("ok must be true or false")
        self._probes[worker_id] = (self.clock.now(), ok)

    def _healthy(self, worker_id: str) -> bool:
        """A worker never probed may claim (probing is opt-in); a probed one needs a passing probe no older than the limit."""
        probe = self._probes.get(worker_id)
        if probe is None:
            return True
        at_s, ok = probe
        return ok and self.clock.now() - at_s <= self.reliability.health_probe_max_age_s

    def claim_attempt(self, task_id: str, worker_id: str, workspace: str, healthy: bool | None = None) -> Refused | Claim:
        """Atomically take the task's admitted Attempt and a new lease; a second caller is refused.

        `healthy`, when given, is a health probe taken with the claim and recorded first.
        """
        _text(worker_id, "worker_id", 200)
        _text(workspace, "workspace", 200)
        if healthy is not None:
            self.record_health_probe(worker_id, healthy)
        with self._unit() as tx:
            task = self._task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            if not attempts:
                self._event(tx, "worker", "claim", task.task_id, None, False, "no attempt to claim", worker_id=worker_id)
                return Refused("no attempt to claim")
            attempt = attempts[-1]
            now = self.clock.now()
            generation = max(a.generation for a in attempts) + 1
            token = secrets.token_urlsafe(32)
            worktree = f"{task.workspace}/{task.task_id}/attempt-{attempt.number}"
            plan = attempt.plan or Plan(attempt.hypothesis)
            manifest = Manifest(
                task.task_id,
                attempt.number,
                task.objective,
                task.scope,
                task.workspace,
                worktree,
                plan.hypothesis,
                plan.base_sha,
                plan.executor,
                plan.model,
                plan.context_version,
                plan.policy_version,
                task.budget,
            )
            holds = {
                "workspace_matches": workspace == task.workspace,
                "worker_healthy": self._healthy(worker_id),
                "backoff_elapsed": attempt.eligible_at is None or now >= attempt.eligible_at,
            }
            result = self._fire(
                tx,
                attempt,
                "claim",
                "worker",
                holds,
                None,
                worker_id=worker_id,
                generation=generation,
                token_digest=token_digest(token),
                claimed_at=now,
                heartbeat_at=now,
                expires_at=now + self.config.lease_ttl_s,
                manifest_digest=manifest.digest(),
                worktree=worktree,
                base_sha=plan.base_sha,
                timeout_budget_s=self.config.timeout_budget_s,
            )
            if not result.accepted:
                return result
            return Claim(Lease(attempt.attempt_id, task.task_id, worker_id, generation, token, attempt.expires_at), manifest)

    def start_attempt(self, attempt_id: str, generation: int, token: str) -> Refused | Accepted:
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "start", generation, token)
            if refused:
                return refused
            return self._fire(
                tx, attempt, "start", "worker", {"lease_current": self._lease_current(attempt)}, generation, started_at=self.clock.now()
            )

    def renew_lease(self, attempt_id: str, generation: int, token: str) -> Refused | Renewal:
        """Extend expiry under the current fence; tells the worker when cancellation was requested."""
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "renew", generation, token)
            if refused:
                return refused
            now = self.clock.now()
            result = self._fire(
                tx,
                attempt,
                "renew",
                "worker",
                {"lease_current": self._lease_current(attempt)},
                generation,
                heartbeat_at=now,
                expires_at=now + self.config.lease_ttl_s,
            )
            if not result.accepted:
                return result
            return Renewal(attempt.expires_at, attempt.cancel_requested)

    # -------------------------------------------------------- tool gateway

    def _mint_key(self, operation: str, task_id: str, attempt_id: str, identity: str, spans_attempts: bool) -> str:
        """The single place the orchestrator mints an operation key (see `mint_key`)."""
        return mint_key(operation, task_id, attempt_id, identity, spans_attempts)

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
        if dependency not in self.reliability.rate_limits:
            raise InputError(f"unknown dependency {dependency!r}; configured: {', '.join(sorted(self.reliability.rate_limits))}")
        _text(operation, "operation", 100)
        _text(identity, "identity", 200)
        _text(request, "request", 100_000, empty=True)
        _number(call_deadline_s, "call_deadline_s", self.config.call_deadline_max_s)
        _number(cost_usd, "cost_usd", 1e6)
        _int(tokens, "tokens", 10**10)
        if not isinstance(spans_attempts, bool):
            raise InputError("spans_attempts must be true or false")
        if key is not None:
            _text(key, "key", 500)
        prior = self.store.get_attempt(_text(attempt_id, "attempt_id", 220))
        if prior is None:
            raise NotFound(f"unknown attempt {attempt_id!r}")
        minted = self._mint_key(operation, prior.task_id, prior.attempt_id, identity, spans_attempts)
        earlier = self.store.get_intent(minted)
        # An earlier grant without a receipt may have landed: ask provider truth before authorizing the call again.
        found = self.provider.find(minted, operation, identity) if earlier is not None and earlier.receipt is None else []
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "grant_tool", generation, token)
            if refused:
                return refused
            task = self._task(tx, attempt.task_id)
            now = self.clock.now()
            intent = tx.intent(minted)
            receipt = intent.receipt if intent is not None else None
            if receipt is None and len({e.provider_id for e in found}) == 1:
                receipt = found[0].provider_id
            in_flight = (
                intent is not None
                and receipt is None
                and not self.provider.supports_idempotency
                and intent.deadline_at is not None
                and now < intent.deadline_at
            )
            timeout_left_s = (attempt.started_at if attempt.started_at is not None else now) + attempt.timeout_budget_s - now
            replaying = receipt is not None
            retrying = intent is not None and not replaying  # granted before, never receipted: asking again is a retry
            if replaying:  # a replay makes no call: it spends nothing and asks no rate limit or circuit
                cost_usd, tokens = 0.0, 0
            holds = {
                "lease_current": self._lease_current(attempt),
                "key_minted": key is None or key == minted,
                "no_call_in_flight": not in_flight and len({e.provider_id for e in found}) <= 1,
                "timeout_budget_left": call_deadline_s <= timeout_left_s,
            }
            chosen, cost_usd, verdicts, why = self._dependency(task, attempt, dependency, holds, cost_usd, tokens, now, replaying, retrying)
            holds.update(verdicts)
            changes = {"cost_usd": attempt.cost_usd + cost_usd, "tokens": attempt.tokens + tokens}
            switched = f"{dependency} -> {chosen}" if chosen != dependency else None
            if switched and switched != attempt.fallback:
                changes["fallback"] = switched
            result = self._fire(
                tx, attempt, "grant_tool", "worker", holds, generation, detail=f"{minted}: {why}" if why else minted, **changes
            )
            if not result.accepted:
                # Held back for the dependency's sake only when nothing else stood in the way (a lost lease outranks it).
                failing = {name for name, holds_now in holds.items() if not holds_now}
                provider_down = bool(failing) and failing <= {"circuit_allows", "retry_budget_allows"}
                domain = "capacity" if not holds["rate_allows"] else "provider" if provider_down else None
                return Refused(result.reason, domain, self._retry_after_s(chosen, holds, now) if provider_down else None)
            if not replaying:
                self.limiter.try_acquire(chosen, now)
                self._pending.append(partial(self.retry_budgets.granted, chosen, retrying))
            deadline = now + call_deadline_s
            replay = None
            if intent is None:
                tx.insert_intent(
                    Intent(minted, task.task_id, attempt.attempt_id, operation, identity, request, now, now, deadline, dependency=chosen)
                )
            elif replaying:
                # A replay hands the effect to this Attempt, so its reconciliation and verification see it.
                replay = intent.result if intent.receipt is not None else receipt
                tx.update_intent(intent, receipt=receipt, result=replay, attempt_id=attempt.attempt_id)
            else:
                tx.update_intent(
                    intent, attempt_id=attempt.attempt_id, granted_at=now, deadline_at=deadline, dependency=chosen, outcome=None
                )
            tx.update_task(task, cost_usd=task.cost_usd + cost_usd, tokens=task.tokens + tokens)
            return Grant(minted, replay, deadline, chosen, timeout_left_s)

    def _spend_ok(self, task: Task, attempt: Attempt, cost_usd: float, tokens: int) -> bool:
        """Within the task's budget and the Attempt's spend ceiling (denial of wallet)."""
        return spend_fits(task, cost_usd, tokens) and attempt.cost_usd + cost_usd <= self.reliability.attempt_spend_max_usd

    def _dependency(
        self,
        task: Task,
        attempt: Attempt,
        dependency: str,
        holds: dict[str, bool],
        cost_usd: float,
        tokens: int,
        now: float,
        replaying: bool,
        retrying: bool,
    ) -> tuple[str, float, dict[str, bool], str]:
        """Which dependency serves a call, what it may spend there, the spend, rate and circuit verdicts, and why not.

        The one asked for, or its declared fallback while its circuit is open
        (or half-open with every probe out); a fallback's declared cost_factor
        scales what the call is authorized to spend. A half-open probe is spent
        only on a call the table will grant, since a spent probe that never
        reports would hold the circuit half-open for good. A retry (`retrying`)
        must also find credit in the chosen dependency's retry budget.
        """
        if replaying:
            verdicts = {"spend_within_budget": True, "rate_allows": True, "circuit_allows": True, "retry_budget_allows": True}
            return dependency, 0.0, verdicts, ""
        fallback = self.fallbacks.get(dependency)
        why = ""
        for chosen in (dependency,) if fallback is None else (dependency, fallback.substitute):
            cost = cost_usd if chosen == dependency else cost_usd * fallback.cost_factor
            verdicts = {
                "spend_within_budget": self._spend_ok(task, attempt, cost, tokens),
                "rate_allows": self.limiter.available(chosen, now) >= 1,
                "retry_budget_allows": not retrying or self.retry_budgets.allows(chosen),
            }
            if self.breakers.state(chosen, now) == OPEN:
                self.breakers.allow(chosen, now)  # refuses without spending anything, and words the refusal
                why = self._circuit_refusal(chosen)
                continue
            verdicts["circuit_allows"] = True
            if ATTEMPT.fire(attempt.state, "grant_tool", {**holds, **verdicts}.__getitem__) is None:
                return chosen, cost, verdicts, _denial(chosen, verdicts)
            if self.breakers.allow(chosen, now):
                return chosen, cost, verdicts, ""
            why = self._circuit_refusal(chosen)
        verdicts = {
            "spend_within_budget": self._spend_ok(task, attempt, cost_usd, tokens),
            "rate_allows": self.limiter.available(dependency, now) >= 1,
            "retry_budget_allows": not retrying or self.retry_budgets.allows(dependency),
            "circuit_allows": False,
        }
        return dependency, cost_usd, verdicts, why

    def _retry_after_s(self, dependency: str, holds: dict[str, bool], now: float) -> float | None:
        """How long until a refused grant could pass, where only time stands in the way: an open circuit's cool-down."""
        refusal = self.breakers.last_refusal(dependency)
        if holds["circuit_allows"] or refusal is None or refusal.until_s is None:
            return None
        return max(0.0, refusal.until_s - now)

    def _circuit_refusal(self, dependency: str) -> str:
        refusal = self.breakers.last_refusal(dependency)
        return refusal.reason if refusal is not None else f"circuit of {dependency} is not closed"

    def record_receipt(
        self, attempt_id: str, generation: int, token: str, key: str, provider_id: str, result: str = ""
    ) -> Refused | Accepted:
        """Record the provider's identity for an operation key (fenced; a late receipt is found by reconciliation instead)."""
        _text(provider_id, "provider_id", 200)
        _text(result, "result", 100_000, empty=True)
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "record_receipt", generation, token)
            if refused:
                return refused
            intent = tx.intent(_text(key, "key", 500))
            if intent is None or intent.task_id != attempt.task_id:
                raise NotFound(f"no intent {key!r} for task {attempt.task_id!r}")
            outcome = self._fire(
                tx,
                attempt,
                "record_receipt",
                "worker",
                {"lease_current": self._lease_current(attempt)},
                generation,
                detail=f"{key} -> {provider_id}",
            )
            if outcome.accepted and intent.receipt is None:
                tx.update_intent(intent, receipt=provider_id, result=result or provider_id)
            if outcome.accepted and intent.outcome is None:
                tx.update_intent(intent, outcome="succeeded")
                self._pending.append(partial(self.breakers.record_success, intent.dependency, self.clock.now()))
            return outcome

    def report_call_failure(self, attempt_id: str, generation: int, token: str, key: str, signature: str) -> Refused | Accepted:
        """A granted provider call failed: its dependency's circuit breaker counts the failure signature (fenced)."""
        _text(signature, "signature", 500)
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "report_call_failure", generation, token)
            if refused:
                return refused
            intent = tx.intent(_text(key, "key", 500))
            if intent is None or intent.task_id != attempt.task_id:
                raise NotFound(f"no intent {key!r} for task {attempt.task_id!r}")
            holds = {"lease_current": self._lease_current(attempt)}
            outcome = self._fire(tx, attempt, "report_call_failure", "worker", holds, generation, detail=f"{key}: {signature}")
            if outcome.accepted and intent.outcome is None:
                tx.update_intent(intent, outcome="failed")
                self._pending.append(partial(self.breakers.record_failure, intent.dependency, self.clock.now(), signature))
            return outcome

    def checkpoint(self, attempt_id: str, generation: int, token: str, checkpoint: str) -> Refused | Accepted:
        _text(checkpoint, "checkpoint", 10_000)
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "checkpoint", generation, token)
            if refused:
                return refused
            return self._fire(
                tx, attempt, "checkpoint", "worker", {"lease_current": self._lease_current(attempt)}, generation, checkpoint=checkpoint
            )

    # ---------------------------------------------------------- completion

    def complete_attempt(self, attempt_id: str, generation: int, token: str, result: str, head_sha: str | None = None) -> Result:
        """Accept the worker's result for verification under the current fence; a late one triggers reconciliation."""
        _text(result, "result", 100_000)
        if head_sha is not None:
            _text(head_sha, "head_sha", 200)
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "complete", generation, token)
            if refused is None:
                now = self.clock.now()
                outcome = self._fire(
                    tx,
                    attempt,
                    "complete",
                    "worker",
                    {"lease_current": self._lease_current(attempt)},
                    generation,
                    result=result,
                    head_sha=head_sha,
                    ended_at=now,
                    elapsed_s=self._elapsed(attempt, now),
                )
                if outcome.accepted:
                    return outcome
                refused = outcome
            overdue = attempt.state in EXPIRABLE and not self._lease_current(attempt)
        if overdue:
            self.reap()
        if self.store.get_attempt(attempt_id).state == "suspect":
            self.reconcile_attempt(attempt_id)
        return refused

    def report_failure(self, attempt_id: str, generation: int, token: str, domain: str, signature: str, detail: str = "") -> Result:
        """The worker reports a failure; effects may be in flight, so the Attempt goes to Reconciling, never straight to Failed."""
        classify(_text(domain, "domain", 100))
        _text(signature, "signature", 500)
        _text(detail, "detail", 10_000, empty=True)
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "report_failure", generation, token)
            if refused:
                return refused
            now = self.clock.now()
            return self._fire(
                tx,
                attempt,
                "report_failure",
                "worker",
                {"lease_current": self._lease_current(attempt)},
                generation,
                detail=detail,
                failure_domain=domain,
                failure_signature=signature,
                ended_at=now,
                elapsed_s=self._elapsed(attempt, now),
            )

    def _elapsed(self, attempt: Attempt, now: float) -> float:
        start = attempt.started_at if attempt.started_at is not None else attempt.claimed_at
        return 0.0 if start is None else max(0.0, now - start)

    # --------------------------------------------------------------- reaper

    def reap(self) -> list[tuple[str, str]]:
        """Expired leases make their Attempts Suspect; unanswered cancellations time out into Reconciling."""
        moved = []
        with self._unit() as tx:
            now = self.clock.now()
            for attempt in tx.attempts_in(LEASED):
                if attempt.state in EXPIRABLE and attempt.expires_at is not None and attempt.expires_at <= now:
                    result = self._fire(
                        tx, attempt, "expire", "reaper", {"lease_expired": True}, ended_at=now, elapsed_s=self._elapsed(attempt, now)
                    )
                elif attempt.state == "cancelling" and attempt.cancel_deadline_at is not None and attempt.cancel_deadline_at <= now:
                    result = self._fire(
                        tx,
                        attempt,
                        "cancel_timed_out",
                        "reaper",
                        {"lease_issued": attempt.token_digest is not None, "cancel_deadline_passed": True},
                        detail="executor did not acknowledge",
                        ended_at=now,
                    )
                else:
                    continue
                if result.accepted:
                    moved.append((attempt.attempt_id, result.state))
        return moved

    # -------------------------------------------------------- reconciliation

    def _findings(self, intents: list[Intent]) -> tuple[list[tuple[Intent, list[Effect]]], bool]:
        """Ask the provider about every operation key; returns the matches and whether every call has settled."""
        now = self.clock.now()
        found = [(intent, self.provider.find(intent.key, intent.operation, intent.identity)) for intent in intents]
        settled = all(
            effects or self.provider.supports_idempotency or intent.deadline_at is None or intent.deadline_at <= now
            for intent, effects in found
        )
        return found, settled

    def reconcile_attempt(self, attempt_id: str) -> Refused | Reconciliation:
        """For each operation key, find the matching effect at the provider, record it, and classify the outcome."""
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            if attempt.state == "suspect":
                self._fire(tx, attempt, "reconcile", "orchestrator", {})
            if attempt.state != "reconciling":
                reason = f"no reconciliation from {attempt.state!r}"
                self._event(tx, "orchestrator", "reconcile", attempt.task_id, attempt, False, reason, attempt.state, attempt.state)
                return Refused(reason)
            intents = tx.intents_of(attempt.attempt_id)
            attempts = tx.attempts_of(attempt.task_id)
            seen = attempt.version
        found, settled = self._findings(intents)
        with self._unit() as tx:
            current = self._attempt(tx, attempt_id)
            if current.version != seen:
                return self._lost_race(tx, current, "reconcile", "the attempt changed during reconciliation; reconcile again")
            return self._conclude(tx, current, attempts, found, settled)

    def _lost_race(self, tx: Transaction, attempt: Attempt, kind: str, reason: str) -> Refused:
        """The provider was read while another call moved the Attempt: refuse, keep the refusal, decide nothing on stale findings."""
        self._event(tx, "orchestrator", kind, attempt.task_id, attempt, False, reason, attempt.state, attempt.state)
        return Refused(reason)

    def _conclude(
        self, tx: Transaction, attempt: Attempt, attempts: list[Attempt], found: list[tuple[Intent, list[Effect]]], settled: bool
    ) -> Reconciliation:
        findings, landed, contradictions = [], 0, []
        for intent, effects in found:
            ids = sorted({e.provider_id for e in effects})
            findings.append(f"{intent.key}: {', '.join(ids) if ids else 'absent'}")
            if len(ids) > 1:
                contradictions.append(f"{intent.key} has {len(ids)} effects")
            elif intent.receipt is not None and ids != [intent.receipt]:
                contradictions.append(f"{intent.key} receipt {intent.receipt} not found at the provider")
            elif ids:
                landed += 1
                if intent.receipt is None:
                    fresh = tx.intent(intent.key)
                    tx.update_intent(fresh, receipt=ids[0], result=ids[0])
        text = "; ".join(findings) or "no operation keys"
        earlier = attempts[: attempt.number - 1]
        repeats_max = self._task(tx, attempt.task_id).budget.repeated_signatures_max
        if contradictions:
            self._fire(
                tx,
                attempt,
                "evidence_contradictory",
                "orchestrator",
                {},
                detail=text,
                reconciliation="contradictory",
                evidence="; ".join(contradictions),
                failure_domain="contradictory_evidence",
                failure_signature="contradictory:" + contradictions[0],
            )
            return Reconciliation("contradictory", attempt.state, tuple(findings))
        if not settled:
            self._event(
                tx,
                "orchestrator",
                "reconcile",
                attempt.task_id,
                attempt,
                True,
                "pending: calls still in flight",
                attempt.state,
                attempt.state,
                detail=text,
            )
            return Reconciliation("pending", attempt.state, tuple(findings))
        # Settled calls nobody reported teach the breakers too, so a half-open probe whose worker vanished still reports.
        now = self.clock.now()
        for intent, effects in found:
            fresh = tx.intent(intent.key)
            if fresh.outcome is not None:
                continue
            tx.update_intent(fresh, outcome="succeeded" if effects else "failed")
            if effects:
                self._pending.append(partial(self.breakers.record_success, intent.dependency, now))
            else:
                self._pending.append(partial(self.breakers.record_failure, intent.dependency, now, "unknown_result: no effect landed"))
        # Landed effects without a reported result are partial work: the Attempt fails (its findings are now receipts)
        # and Attempt N+1 resumes from them, its grant of the same key replaying the receipt. Only `complete` verifies.
        outcome = "landed" if landed else "absent"
        domain = attempt.failure_domain or "executor"
        signature = attempt.failure_signature or (f"{domain}:lease lost after effects landed" if landed else f"{domain}:no effect landed")
        holds = {
            "calls_settled": True,
            "cancel_requested": attempt.cancel_requested,
            "poison_signature": poison(earlier, signature, repeats_max),
        }
        self._fire(
            tx,
            attempt,
            f"effects_{outcome}",
            "orchestrator",
            holds,
            detail=text,
            reconciliation=outcome,
            failure_domain=None if attempt.cancel_requested else domain,
            failure_signature=None if attempt.cancel_requested else signature,
        )
        return Reconciliation(outcome, attempt.state, tuple(findings))

    # -------------------------------------------------------- verification

    def verify_attempt(self, attempt_id: str) -> Refused | Accepted | Reconciliation:
        """Success needs independent evidence: every effect found at the provider and passed by its verdict."""
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            intents = tx.intents_of(attempt.attempt_id)
            attempts = tx.attempts_of(attempt.task_id)
            seen = attempt.version
        found, _settled = self._findings(intents)
        verdicts = [
            (intent, effects, self.provider.verdict(effects[0].provider_id) if len(effects) == 1 else None) for intent, effects in found
        ]
        with self._unit() as tx:
            current = self._attempt(tx, attempt_id)
            if current.version != seen:
                return self._lost_race(tx, current, "verify", "the attempt changed during verification; verify again")
            return self._judge(tx, current, attempts, verdicts)

    def _judge(self, tx: Transaction, attempt: Attempt, attempts: list[Attempt], verdicts: list) -> Refused | Accepted:
        if attempt.state != "verifying":
            reason = f"nothing to verify in {attempt.state!r}"
            self._event(tx, "provider", "verify", attempt.task_id, attempt, False, reason, attempt.state, attempt.state)
            return Refused(reason)
        evidence = "; ".join(
            f"{i.key}: {','.join(e.provider_id for e in effects) or 'absent'} {v or 'pending'}" for i, effects, v in verdicts
        )
        problems = [f"{i.key}: {len(effects)} effects" for i, effects, _v in verdicts if len(effects) != 1]
        if not verdicts or problems:
            why = "; ".join(problems) or "no effect to verify: the worker's claim alone is not evidence"
            return self._fire(
                tx,
                attempt,
                "evidence_contradictory",
                "orchestrator",
                {},
                detail=why,
                evidence=why,
                failure_domain="contradictory_evidence",
                failure_signature="evidence:" + why[:200],
            )
        failed = [v for _i, _e, v in verdicts if v is not None and v != "passed"]
        if failed:
            signature = failed[0].removeprefix("failed:")
            repeats_max = self._task(tx, attempt.task_id).budget.repeated_signatures_max
            domain = attempt.failure_domain or "validation"
            return self._fire(
                tx,
                attempt,
                "verification_failed",
                "provider",
                {"poison_signature": poison(attempts[: attempt.number - 1], signature, repeats_max)},
                detail=evidence,
                evidence=evidence,
                failure_domain=domain,
                failure_signature=signature,
            )
        if any(v is None for _i, _e, v in verdicts):
            self._event(
                tx,
                "provider",
                "verify",
                attempt.task_id,
                attempt,
                True,
                "pending: verdict not in yet",
                attempt.state,
                attempt.state,
                detail=evidence,
            )
            return Accepted(attempt.state, "pending")
        return self._fire(tx, attempt, "verified", "provider", {}, detail=evidence, evidence=evidence)

    # --------------------------------------------------------- cancellation

    def cancel_attempt(self, attempt_id: str, reason: str) -> Result:
        """The protocol: prevent new claims and grants, signal, then acknowledgement or timeout, reconcile, terminate."""
        _text(reason, "reason", 2000)
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            now = self.clock.now()
            first = not attempt.cancel_requested
            result = self._fire(
                tx,
                attempt,
                "cancel",
                "operator",
                {},
                detail=reason,
                cancel_requested=True,
                cancel_reason=attempt.cancel_reason if not first else reason,
                cancel_deadline_at=attempt.cancel_deadline_at if not first else now + self.config.cancel_ack_timeout_s,
            )
            if result.accepted and attempt.state == "cancelling" and attempt.token_digest is None:
                result = self._fire(tx, attempt, "cancel_unclaimed", "orchestrator", {"lease_issued": False}, detail="nobody to signal")
            reconcile = attempt.state == "reconciling"
        return self.reconcile_attempt(attempt_id) if reconcile else result

    def acknowledge_cancel(self, attempt_id: str, generation: int, token: str) -> Result:
        with self._unit() as tx:
            attempt = self._attempt(tx, attempt_id)
            refused = self._fence(tx, attempt, "cancel_acknowledged", generation, token)
            if refused:
                return refused
            now = self.clock.now()
            result = self._fire(
                tx,
                attempt,
                "cancel_acknowledged",
                "worker",
                {"lease_issued": True, "lease_current": self._lease_current(attempt)},
                generation,
                ended_at=now,
                elapsed_s=self._elapsed(attempt, now),
            )
        return self.reconcile_attempt(attempt_id) if result.accepted else result

    # ------------------------------------------------------------- the loop

    def decide(self, task_id: str) -> Decision | Refused:
        """After an Attempt ends: exactly one of verify, correct, retry, stop, escalate, recorded with its reason."""
        with self._unit() as tx:
            task = self._task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            if not attempts or attempts[-1].state in ACTIVE:
                reason = "no ended attempt to decide on"
                self._event(tx, "orchestrator", "decide", task.task_id, None, False, reason, task.state, task.state)
                return Refused(reason)
            latest = attempts[-1]
            elapsed = sum(a.elapsed_s for a in attempts)
            if elapsed != task.elapsed_s:
                tx.update_task(task, elapsed_s=elapsed)
            decision = decide(task, attempts)
            changes = {"decision": decision.kind, "decision_reason": decision.reason}
            if decision.task_trigger is not None and task.state == "in_progress":
                holds = {"no_active_attempt": True, "budget_left": _budget_exhausted(task, attempts) is None}
                self._fire_task(tx, task, decision.task_trigger, "orchestrator", holds, detail=decision.reason, **changes)
            else:
                tx.update_task(task, **changes)
            self._event(
                tx, "orchestrator", "decide", task.task_id, latest, True, decision.kind, task.state, task.state, detail=decision.reason
            )
            return decision

    def release(self, task_id: str, reason: str, budget: Budget | None = None) -> Refused | Accepted:
        """An operator resolves a resting task; only this human decision may extend a budget."""
        _text(reason, "reason", 2000)
        if budget is not None:
            check_budget(budget)
        with self._unit() as tx:
            task = self._task(tx, task_id)
            changes: dict[str, Any] = {"interruptions": task.interruptions + 1, "decision": "release", "decision_reason": reason}
            if budget is not None:
                changes["budget"] = budget
            return self._fire_task(tx, task, "release", "operator", {}, detail=reason, **changes)

    def approve(self, task_id: str) -> Refused | Accepted:
        with self._unit() as tx:
            return self._fire_task(tx, self._task(tx, task_id), "approve", "operator", {})

    def cancel_task(self, task_id: str, reason: str) -> Refused | Accepted:
        """Cancel the task, and run the cancellation protocol on its active Attempt."""
        _text(reason, "reason", 2000)
        with self._unit() as tx:
            task = self._task(tx, task_id)
            result = self._fire_task(tx, task, "cancel", "operator", {}, detail=reason)
            attempts = tx.attempts_of(task.task_id)
            active = attempts[-1].attempt_id if attempts and attempts[-1].state in ACTIVE else None
        if result.accepted and active is not None:
            self.cancel_attempt(active, reason)
        return result
