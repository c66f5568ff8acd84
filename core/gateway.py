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
    """One grant being decided: the records it reads, what is known of its key, and the verdicts so far."""

    task: Task
    attempt: Attempt
    call: ToolCall
    minted: str
    intent: Intent | None
    receipt: str | None
    now: float
    holds: dict[str, bool]

    @property
    def replaying(self) -> bool:
        return self.receipt is not None

    @property
    def retrying(self) -> bool:
        """Granted before and never receipted: asking again is a retry."""
        return self.intent is not None and self.receipt is None


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
        """Authorize one call (the call's arguments already checked): mint, look up, fence, judge, persist the intent."""
        context = self._context
        minted, found = self._look_up(attempt_id, call)
        with context as tx:
            attempt = context.addressed(tx, attempt_id)
            refused = self._context.fenced(tx, attempt, "grant_tool", generation, token, minted)
            if refused is not None:
                return refused
            ask = self._ask(tx, attempt, call, minted, found)
            chosen, cost_usd, why = self._choose(ask)
            tokens = 0 if ask.replaying else call.tokens
            changes = {"cost_usd": attempt.cost_usd + cost_usd, "tokens": attempt.tokens + tokens}
            switched = f"{call.dependency} -> {chosen}" if chosen != call.dependency else None
            if switched and switched != attempt.fallback:
                changes["fallback"] = switched
            detail = f"{minted}: {why}" if why else minted
            result = context.fire(tx, attempt, "grant_tool", "worker", ask.holds, generation, detail, minted, **changes)
            if not result.accepted:
                return self._held(result, chosen, ask)
            return self._authorize(tx, ask, chosen, cost_usd, tokens)

    def _look_up(self, attempt_id: str, call: ToolCall) -> tuple[str, list[Effect]]:
        """The key the gateway mints for this call, and provider truth about it where an earlier grant has no receipt."""
        context = self._context
        with context.store.transaction() as tx:
            prior = context.fence.address(tx, attempt_id)
            if prior is None:
                raise NotFound(f"unknown attempt {attempt_id!r}")
            task_id, addressed = prior.task_id, prior.attempt_id
            request = KeyRequest(call.operation, task_id, addressed, call.identity, call.spans_attempts, call.key, context.clock.now())
            minted = context.seams.mint_key(request)
            earlier = tx.intent(minted)
            unreceipted = earlier is not None and earlier.receipt is None
        found = context.seams.dedup(context.provider, minted, call.operation, call.identity) if unreceipted else []
        return minted, found

    def _ask(self, tx: Transaction, attempt: Attempt, call: ToolCall, minted: str, found: list[Effect]) -> _Ask:
        """What the gateway knows of this key now, and the guards that do not depend on the dependency."""
        context = self._context
        now = context.clock.now()
        intent = tx.intent(minted)
        found_ids = {effect.provider_id for effect in found}
        receipt = intent.receipt if intent is not None else None
        if receipt is None and len(found_ids) == 1:
            receipt = found[0].provider_id
        in_flight = (
            intent is not None
            and receipt is None
            and not context.provider.supports_idempotency
            and intent.deadline_at is not None
            and now < intent.deadline_at
        )
        holds = {
            "lease_current": context.lease_current(attempt),
            "key_minted": call.key is None or call.key == minted,
            "no_call_in_flight": not in_flight and len(found_ids) <= 1,
            "timeout_budget_left": call.call_deadline_s <= _timeout_left_s(attempt, now),
        }
        return _Ask(context.task(tx, attempt.task_id), attempt, call, minted, intent, receipt, now, holds)

    def _choose(self, ask: _Ask) -> tuple[str, float, str]:
        """Which dependency serves the call, what it may spend there, and why not; the verdicts land in `ask.holds`.

        The one asked for, or its declared fallback while its circuit is open
        (or half-open with every probe out); a fallback's cost_factor scales
        what the call may spend. A half-open probe is spent only on a call the
        table will grant, since a spent probe that never reports would hold the
        circuit half-open for good. A replay makes no call: it spends nothing
        and asks no rate limit or circuit.
        """
        dependency = ask.call.dependency
        if ask.replaying:
            ask.holds.update(
                spend_within_budget=True, rate_allows=True, circuit_allows=True, retry_budget_allows=True, concurrency_allows=True
            )
            return dependency, 0.0, ""
        fallback = self.fallbacks.get(dependency)
        why = ""
        for chosen in (dependency,) if fallback is None else (dependency, fallback.substitute):
            cost_usd = ask.call.cost_usd if chosen == dependency else ask.call.cost_usd * fallback.cost_factor
            verdicts = self._verdicts(ask, chosen, cost_usd)
            if self.breakers.state(chosen, ask.now) == OPEN:
                self.breakers.allow(chosen, ask.now)  # refuses without spending anything, and words the refusal
                why = self._circuit_refusal(chosen)
                continue
            verdicts["circuit_allows"] = True
            if self._context.attempt_machine.fire(ask.attempt.state, "grant_tool", {**ask.holds, **verdicts}.__getitem__) is None:
                ask.holds.update(verdicts)
                return chosen, cost_usd, _denial(chosen, verdicts)
            if self.breakers.allow(chosen, ask.now):
                self._context.on_rollback(partial(self.breakers.release_probe, chosen))
                ask.holds.update(verdicts)
                return chosen, cost_usd, ""
            why = self._circuit_refusal(chosen)
        ask.holds.update(self._verdicts(ask, dependency, ask.call.cost_usd), circuit_allows=False)
        return dependency, ask.call.cost_usd, why

    def _verdicts(self, ask: _Ask, dependency: str, cost_usd: float) -> dict[str, bool]:
        """Spend, rate and retry budget for a call to `dependency` costing `cost_usd`."""
        context = self._context
        spend = context.seams.spend(ask.task, ask.attempt, cost_usd, ask.call.tokens, context.reliability.attempt_spend_max_usd)
        return {
            "spend_within_budget": spend,
            "rate_allows": self.limiter.available(dependency, ask.now) >= 1,
            "retry_budget_allows": not ask.retrying or self.retry_budgets.allows(dependency),
            "concurrency_allows": self.concurrency.allows(dependency, ask.now),
        }

    def _held(self, refused: Refused, chosen: str, ask: _Ask) -> Refused:
        """A refused grant, with the failure domain it counts as and, where only time stands in the way, when to ask again.

        Judged by the guards the table says failed: held back for the
        dependency's sake only when nothing else stood in the way (a lost lease
        outranks it), and not at all when no row could grant the call from the
        Attempt's state (a cancelling Attempt is not waiting for a circuit).
        """
        failing = set(refused.guards)
        provider_down = bool(failing) and failing <= _HELD_BACK
        domain = "capacity" if "rate_allows" in failing else "provider" if provider_down else None
        retry_after_s = self._retry_after_s(chosen, ask) if provider_down else None
        return Refused(refused.reason, refused.code, refused.guards, refused.state, domain, retry_after_s)

    def _authorize(self, tx: Transaction, ask: _Ask, chosen: str, cost_usd: float, tokens: int) -> Grant:
        """The grant is accepted: spend the rate token, persist (or hand over) the intent, charge the task."""
        context = self._context
        now, intent, call, minted = ask.now, ask.intent, ask.call, ask.minted
        if not ask.replaying:
            if self.limiter.try_acquire(chosen, now):
                context.on_rollback(partial(self.limiter.refund, chosen))
            context.after_commit(partial(self.retry_budgets.granted, chosen, ask.retrying))
        deadline = now + call.call_deadline_s
        if not ask.replaying:
            limit = self.concurrency.limit(chosen)
            limit.start(minted, deadline)
            context.on_rollback(partial(limit.forget, minted))
        replay = None
        attempt_id = ask.attempt.attempt_id
        if intent is None:
            fresh = Intent(
                minted, ask.task.task_id, attempt_id, call.operation, call.identity, call.request, now, now, deadline, dependency=chosen
            )
            tx.insert_intent(fresh)
        elif ask.replaying:
            # A replay hands the effect to this Attempt, so its reconciliation and verification see it.
            replay = intent.result if intent.receipt is not None else ask.receipt
            tx.update_intent(intent, receipt=ask.receipt, result=replay, attempt_id=attempt_id)
        else:
            tx.update_intent(intent, attempt_id=attempt_id, granted_at=now, deadline_at=deadline, dependency=chosen, outcome=None)
        tx.update_task(ask.task, cost_usd=ask.task.cost_usd + cost_usd, tokens=ask.task.tokens + tokens)
        return Grant(minted, replay, deadline, chosen, _timeout_left_s(ask.attempt, now))

    def _retry_after_s(self, dependency: str, ask: _Ask) -> float | None:
        """How long until a refused grant could pass, where only time stands in the way: an open circuit's cool-down."""
        refusal = self.breakers.last_refusal(dependency)
        if ask.holds["circuit_allows"] or refusal is None or refusal.until_s is None:
            return None
        return max(0.0, refusal.until_s - ask.now)

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
            attempt, intent = self._intent(tx, attempt_id, key)
            refused = self._context.fenced(tx, attempt, "record_receipt", generation, token, key)
            if refused is not None:
                return refused
            holds = {"lease_current": context.lease_current(attempt)}
            outcome = context.fire(tx, attempt, "record_receipt", "worker", holds, generation, f"{key} -> {provider_id}", key)
            if outcome.accepted and intent.receipt is None:
                tx.update_intent(intent, receipt=provider_id, result=result or provider_id)
            if outcome.accepted and intent.outcome is None:
                tx.update_intent(intent, outcome="succeeded")
                context.after_commit(partial(self.breakers.record_success, intent.dependency, context.clock.now()))
                context.after_commit(partial(self.concurrency.limit(intent.dependency).succeeded, key, context.clock.now()))
            return outcome

    @contract
    def report_call_failure(self, attempt_id: Any, generation: Any, token: Any, key: Any, signature: Any) -> Refused | Accepted:
        """A granted provider call failed: its dependency's circuit breaker counts the failure signature (fenced)."""
        fence_arguments(attempt_id, generation, token)
        text(key, "key", 500)
        text(signature, "signature", 500)
        context = self._context
        with context as tx:
            attempt, intent = self._intent(tx, attempt_id, key)
            refused = self._context.fenced(tx, attempt, "report_call_failure", generation, token, key)
            if refused is not None:
                return refused
            holds = {"lease_current": context.lease_current(attempt)}
            outcome = context.fire(tx, attempt, "report_call_failure", "worker", holds, generation, f"{key}: {signature}", key)
            if outcome.accepted and intent.outcome is None:
                tx.update_intent(intent, outcome="failed")
                context.after_commit(partial(self.breakers.record_failure, intent.dependency, context.clock.now(), signature))
                context.after_commit(partial(self.concurrency.limit(intent.dependency).failed, key, context.clock.now()))
            return outcome

    def _intent(self, tx: Transaction, attempt_id: str, key: str) -> tuple[Attempt, Intent]:
        """The addressed Attempt and its task's intent for `key`; an unknown one is NotFound, before any fence is asked."""
        attempt = self._context.addressed(tx, attempt_id)
        intent = tx.intent(key)
        if intent is None or intent.task_id != attempt.task_id:
            raise NotFound(f"no intent {key!r} for task {attempt.task_id!r}")
        return attempt, intent


def _timeout_left_s(attempt: Attempt, now: float) -> float:
    """What the Attempt's timeout budget has left at `now` (counted from its start, or from now if it has not started)."""
    return (attempt.started_at if attempt.started_at is not None else now) + attempt.timeout_budget_s - now


def _denial(dependency: str, verdicts: dict[str, bool]) -> str:
    """Why a grant the table refuses on the dependency's verdicts was refused, in words for the refused event."""
    if not verdicts["rate_allows"]:
        return f"rate limit of {dependency} reached (a capacity denial)"
    if not verdicts["retry_budget_allows"]:
        return f"retry budget of {dependency} spent: retries are held to their share of first calls"
    if not verdicts["concurrency_allows"]:
        return f"calls in flight to {dependency} are at its adaptive concurrency limit"
    return ""
