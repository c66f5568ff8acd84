"""The tool gateway: every side effect is authorized here, under an orchestrator-minted operation key, and its receipt recorded.

A worker never calls a provider on its own authority. It asks `grant_tool`
with its fence; the gateway mints the operation key (the `mint_key` seam),
persists the intent before the worker sees the key, and checks the fence,
the Attempt's timeout budget, spend (the `spend` seam), the dependency's rate
limit, retry budget and circuit breaker, then authorizes one call. A key
already receipted is a replay: the recorded result comes back and no call is
made. An earlier grant without a receipt may have landed, so before granting
it again the gateway asks provider truth (the `dedup` seam), outside the
write transaction so no lock is held across a provider call.

The rate limits, breakers and retry budgets are this process's view of its
dependencies: they live in memory and start fresh (closed, full) on restart.
When a dependency's circuit is open and a fallback is declared for it, the
call goes to the fallback, scaled by its cost factor, and the switch is
recorded on the Attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from .breaker import OPEN, Breakers
from .concurrency import ConcurrencyLimits
from .context import Context, contract
from .errors import InputError, NotFound
from .provider import Effect
from .rate_limit import RateLimiter
from .records import Attempt, Intent, Task
from .results import Accepted, Grant, Refused
from .retry_budget import RetryBudgets
from .seams import KeyRequest
from .store import Transaction
from .validate import fence_arguments, flag, number, text, whole
from .vocabulary import ATTEMPT_GUARDS, Call, choose

_HELD_BACK = frozenset({"circuit_allows", "retry_budget_allows", "concurrency_allows"})
"""Guards that hold a call back for its dependency's sake, not the caller's: the call may be asked again later."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One side effect a worker asks the gateway to authorize: what it is, where it goes, what it may cost."""

    operation: str
    identity: str
    request: str = ""
    call_deadline_s: float = 60.0
    cost_usd: float = 0.0
    tokens: int = 0
    spans_attempts: bool = True
    key: str | None = None
    """A key the worker presents; the call is refused unless it is the one the orchestrator mints."""
    dependency: str = "code_host"


@dataclass(slots=True)
class _Ask:
    """One grant being decided: the records it reads, what is known of its key, and the dependency chosen for it."""

    task: Task
    attempt: Attempt
    call: ToolCall
    minted: str
    intent: Intent | None
    receipt: str | None
    found_ids: frozenset[str]
    dependency: str
    cost_usd: float
    circuit: bool = True
    """Whether the chosen dependency's breaker let the call through (the `circuit_allows` guard)."""
    probe: bool = False
    """A half-open probe was spent on this call: given back if the table then refuses it."""
    why: str = ""
    trial: Call | None = None
    """The call on which the table's guards were asked for the chosen dependency, when their answers still hold."""
    replaying: bool = False
    """The key is receipted (recorded, or found once at the provider): the recorded result comes back, no call is made."""
    retrying: bool = False
    """Granted before and never receipted: asking again is a retry."""

    def __post_init__(self) -> None:
        # Fields, not properties: every guard of a grant reads them.
        self.replaying = self.receipt is not None
        self.retrying = self.intent is not None and self.receipt is None


class ToolGateway:
    """grant_tool, record_receipt and report_call_failure, with the dependencies' rate limits, breakers and retry budgets."""

    __slots__ = ("_context", "breakers", "concurrency", "fallbacks", "limiter", "retry_budgets")

    def __init__(self, context: Context) -> None:
        self._context = context
        reliability = context.reliability
        self.limiter = RateLimiter(reliability.rate_limits, context.clock.now())
        self.breakers = Breakers({name: reliability.breaker for name in reliability.rate_limits})
        self.retry_budgets = RetryBudgets(tuple(reliability.rate_limits), reliability.retry_budget)
        self.concurrency = ConcurrencyLimits(tuple(reliability.rate_limits), reliability.concurrency)
        self.fallbacks = {fallback.dependency: fallback for fallback in reliability.fallbacks}

    def check(self, attempt_id: Any, generation: Any, token: Any, call: ToolCall) -> ToolCall:
        """Every argument of a grant, checked before anything is read."""
        fence_arguments(attempt_id, generation, token)
        configured = self._context.reliability.rate_limits
        if text(call.dependency, "dependency", 200) not in configured:
            raise InputError(f"unknown dependency {call.dependency!r}; configured: {', '.join(sorted(configured))}")
        text(call.operation, "operation", 100)
        text(call.identity, "identity", 200)
        text(call.request, "request", 100_000, empty=True)
        number(call.call_deadline_s, "call_deadline_s", self._context.config.call_deadline_max_s)
        number(call.cost_usd, "cost_usd", 1e6)
        whole(call.tokens, "tokens", 10**10)
        flag(call.spans_attempts, "spans_attempts")
        if call.key is not None:
            text(call.key, "key", 500)
        return call

    # ----------------------------------------------------------- grant

    @contract
    def grant(self, attempt_id: str, generation: int, token: str, call: ToolCall) -> Refused | Grant:
        """Authorize one call (the call's arguments already checked): mint, look up, choose the dependency, fire grant_tool."""
        context = self._context
        minted, found = self._look_up(attempt_id, call)
        with context as tx:
            attempt = context.addressed(tx, attempt_id, "grant_tool")
            ask = self._ask(tx, attempt, call, minted, found)
            given = {"ask": ask, "gateway": self}
            self._choose(tx, ask, given)
            detail = f"{minted}: {ask.why}" if ask.why else minted
            out: dict[str, Any] = {}
            asked = ask.trial
            result = context.fire(tx, attempt, "grant_tool", "worker", given, generation, token, detail, minted, out, ask.task, asked)
            if not result.accepted:
                if ask.probe:  # the table refused after the breaker let the call through (a stale fence): the probe is not spent
                    self.breakers.release_probe(ask.dependency)
                return self._held(result, ask)
            return out["grant"]

    def _look_up(self, attempt_id: str, call: ToolCall) -> tuple[str, list[Effect]]:
        """The key the gateway mints for this call, and provider truth about it where an earlier grant has no receipt."""
        context = self._context
        with context.store.transaction() as tx:
            prior = context.addressed(tx, attempt_id, "grant_tool")
            task_id, addressed = prior.task_id, prior.attempt_id
            request = KeyRequest(call.operation, task_id, addressed, call.identity, call.spans_attempts, call.key, context.clock.now())
            minted = context.seams.mint_key(request)
            earlier = tx.intent(minted)
            unreceipted = earlier is not None and earlier.receipt is None
        found = context.seams.dedup(context.provider, minted, call.operation, call.identity) if unreceipted else []
        return minted, found

    def _ask(self, tx: Transaction, attempt: Attempt, call: ToolCall, minted: str, found: list[Effect]) -> _Ask:
        """What the gateway knows of this key now: its intent, its receipt (recorded, or found once at the provider)."""
        intent = tx.intent(minted)
        found_ids = frozenset(effect.provider_id for effect in found)
        receipt = intent.receipt if intent is not None else None
        if receipt is None and len(found_ids) == 1:
            receipt = found[0].provider_id
        task = self._context.task(tx, attempt.task_id)
        return _Ask(task, attempt, call, minted, intent, receipt, found_ids, call.dependency, call.cost_usd)

    def _choose(self, tx: Transaction, ask: _Ask, given: dict[str, Any]) -> None:
        """Which dependency serves the call and what it may spend there: set on `ask` for the row's guards to judge.

        The one asked for, or its declared fallback while its circuit is open
        (or half-open with every probe out); a fallback's cost_factor scales
        what the call may spend. Whether the table would grant the call there
        is asked of the table itself, through its guards; a half-open probe is
        spent only on a call it would grant, since a spent probe that never
        reports would hold the circuit half-open for good. A replay makes no
        call: it spends nothing and asks no rate limit or circuit.
        """
        if ask.replaying:
            return
        context = self._context
        dependency = ask.call.dependency
        fallback = self.fallbacks.get(dependency)
        now = context.clock.now()
        for chosen in (dependency,) if fallback is None else (dependency, fallback.substitute):
            ask.dependency = chosen
            ask.cost_usd = ask.call.cost_usd if chosen == dependency else ask.call.cost_usd * fallback.cost_factor
            if self.breakers.state(chosen, now) == OPEN:
                self.breakers.allow(chosen, now)  # refuses without spending anything, and words the refusal
                ask.why = self._circuit_refusal(chosen)
                continue
            ask.circuit = True
            trial = Call(context, tx, ask.attempt, ask.task, ATTEMPT_GUARDS, given, "grant_tool")
            trial.chosen = choose(context.table.attempt, ask.attempt.state, "grant_tool", trial)
            if trial.chosen is None:
                ask.why = _denial(chosen, trial)
                ask.trial = trial
                return
            if self.breakers.allow(chosen, now):
                ask.probe = True
                context.on_rollback(partial(self.breakers.release_probe, chosen))
                ask.why = ""
                ask.trial = trial
                return
            ask.why = self._circuit_refusal(chosen)
        ask.dependency, ask.cost_usd, ask.circuit = dependency, ask.call.cost_usd, False

    def _held(self, refused: Refused, ask: _Ask) -> Refused:
        """A refused grant, with the failure domain it counts as and, where only time stands in the way, when to ask again.

        Judged by the guards the table says failed: held back for the
        dependency's sake only when nothing else stood in the way (a lost lease
        outranks it), and not at all when no row could grant the call from the
        Attempt's state (a cancelling Attempt is not waiting for a circuit).
        """
        failing = set(refused.guards)
        provider_down = bool(failing) and failing <= _HELD_BACK
        domain = "capacity" if "rate_allows" in failing else "provider" if provider_down else None
        retry_after_s = self._retry_after_s(ask) if provider_down else None
        return Refused(refused.reason, refused.code, refused.guards, refused.state, domain, retry_after_s)

    def persist_intent(self, call: Call) -> None:
        """The `persist_intent` effect: charge the Attempt and its task, take the rate token, persist (or hand over) the intent.

        The Attempt's charge is part of the row's own write; the intent and the
        task's charge follow its event. The rate token and the concurrency
        slot are taken now and given back if the transaction rolls back.
        """
        context = self._context
        ask: _Ask = call.given["ask"]
        attempt, chosen, now = ask.attempt, ask.dependency, call.now
        cost_usd = 0.0 if ask.replaying else ask.cost_usd
        tokens = 0 if ask.replaying else ask.call.tokens
        call.writes.update(cost_usd=attempt.cost_usd + cost_usd, tokens=attempt.tokens + tokens)
        switched = f"{ask.call.dependency} -> {chosen}" if chosen != ask.call.dependency else None
        if switched and switched != attempt.fallback:
            call.writes["fallback"] = switched
        deadline = now + ask.call.call_deadline_s
        if not ask.replaying:
            if self.limiter.try_acquire(chosen, now):
                context.on_rollback(partial(self.limiter.refund, chosen))
            context.after_commit(partial(self.retry_budgets.granted, chosen, ask.retrying))
            limit = self.concurrency.limit(chosen)
            limit.start(ask.minted, deadline)
            context.on_rollback(partial(limit.forget, ask.minted))
        replay = None
        if ask.replaying:
            replay = ask.intent.result if ask.intent is not None and ask.intent.receipt is not None else ask.receipt
        call.then(partial(self._persisted, call.tx, ask, now, deadline, replay, cost_usd, tokens))
        call.hand(grant=Grant(ask.minted, replay, deadline, chosen, _timeout_left_s(attempt, now)))

    def _persisted(self, tx: Transaction, ask: _Ask, now: float, deadline: float, replay: str | None, cost_usd: float, tokens: int) -> None:
        """The key's intent (new, handed over by a replay, or granted again) and the task's charge, after the grant's event."""
        intent, call, attempt_id = ask.intent, ask.call, ask.attempt.attempt_id
        if intent is None:
            fresh = Intent(
                ask.minted,
                ask.task.task_id,
                attempt_id,
                call.operation,
                call.identity,
                call.request,
                now,
                now,
                deadline,
                dependency=ask.dependency,
            )
            tx.insert_intent(fresh)
        elif ask.replaying:
            # A replay hands the effect to this Attempt, so its reconciliation and verification see it.
            tx.update_intent(intent, receipt=ask.receipt, result=replay, attempt_id=attempt_id)
        else:
            tx.update_intent(intent, attempt_id=attempt_id, granted_at=now, deadline_at=deadline, dependency=ask.dependency, outcome=None)
        tx.update_task(ask.task, cost_usd=ask.task.cost_usd + cost_usd, tokens=ask.task.tokens + tokens)

    def _retry_after_s(self, ask: _Ask) -> float | None:
        """How long until a refused grant could pass, where only time stands in the way: an open circuit's cool-down."""
        refusal = self.breakers.last_refusal(ask.dependency)
        if ask.circuit or refusal is None or refusal.until_s is None:
            return None
        return max(0.0, refusal.until_s - self._context.clock.now())

    def _circuit_refusal(self, dependency: str) -> str:
        refusal = self.breakers.last_refusal(dependency)
        return refusal.reason if refusal is not None else f"circuit of {dependency} is not closed"

    # -------------------------------------------------- receipts, failures

    @contract
    def record_receipt(self, attempt_id: Any, generation: Any, token: Any, key: Any, provider_id: Any, result: Any) -> Refused | Accepted:
        """Record the provider's identity for an operation key (fenced; a late receipt is found by reconciliation instead)."""
        fence_arguments(attempt_id, generation, token)
        text(key, "key", 500)
        text(provider_id, "provider_id", 200)
        text(result, "result", 100_000, empty=True)
        context = self._context
        with context as tx:
            attempt, intent = self._intent(tx, attempt_id, key, "record_receipt")
            given = {"gateway": self, "intent": intent, "key": key, "provider_id": provider_id, "result": result}
            return context.fire(tx, attempt, "record_receipt", "worker", given, generation, token, f"{key} -> {provider_id}", key)

    def record_receipt_of(self, call: Call) -> None:
        """The `record_receipt` effect: the provider's identity for the key (once), and the call's success (once) after commit."""
        context, tx, given = self._context, call.tx, call.given
        intent, key = given["intent"], given["key"]
        if intent.receipt is None:
            call.then(partial(tx.update_intent, intent, receipt=given["provider_id"], result=given["result"] or given["provider_id"]))
        if intent.outcome is None:
            call.then(partial(tx.update_intent, intent, outcome="succeeded"))
            context.after_commit(partial(self.breakers.record_success, intent.dependency, call.now))
            context.after_commit(partial(self.concurrency.limit(intent.dependency).succeeded, key, call.now))

    @contract
    def report_call_failure(self, attempt_id: Any, generation: Any, token: Any, key: Any, signature: Any) -> Refused | Accepted:
        """A granted provider call failed: its dependency's circuit breaker counts the failure signature (fenced)."""
        fence_arguments(attempt_id, generation, token)
        text(key, "key", 500)
        text(signature, "signature", 500)
        context = self._context
        with context as tx:
            attempt, intent = self._intent(tx, attempt_id, key, "report_call_failure")
            given = {"gateway": self, "intent": intent, "key": key, "signature": signature}
            return context.fire(tx, attempt, "report_call_failure", "worker", given, generation, token, f"{key}: {signature}", key)

    def record_call_failure_of(self, call: Call) -> None:
        """The `record_call_failure` effect: the call failed (once), counted by its breaker and concurrency limit after commit."""
        context, given = self._context, call.given
        intent = given["intent"]
        if intent.outcome is None:
            call.then(partial(call.tx.update_intent, intent, outcome="failed"))
            context.after_commit(partial(self.breakers.record_failure, intent.dependency, call.now, given["signature"]))
            context.after_commit(partial(self.concurrency.limit(intent.dependency).failed, given["key"], call.now))

    def _intent(self, tx: Transaction, attempt_id: str, key: str, trigger: str) -> tuple[Attempt, Intent]:
        """The addressed Attempt and its task's intent for `key`; an unknown one is NotFound, before any fence is asked."""
        attempt = self._context.addressed(tx, attempt_id, trigger)
        intent = tx.intent(key)
        if intent is None or intent.task_id != attempt.task_id:
            raise NotFound(f"no intent {key!r} for task {attempt.task_id!r}")
        return attempt, intent


def _timeout_left_s(attempt: Attempt, now: float) -> float:
    """What the Attempt's timeout budget has left at `now` (counted from its start, or from now if it has not started)."""
    return (attempt.started_at if attempt.started_at is not None else now) + attempt.timeout_budget_s - now


def _denial(dependency: str, trial: Call) -> str:
    """Why the table would refuse a grant on the dependency's verdicts, in words for the refused event."""
    holds = trial.holds
    if not holds("rate_allows"):
        return f"rate limit of {dependency} reached (a capacity denial)"
    if not holds("retry_budget_allows"):
        return f"retry budget of {dependency} spent: retries are held to their share of first calls"
    if not holds("concurrency_allows"):
        return f"calls in flight to {dependency} are at its adaptive concurrency limit"
    return ""
