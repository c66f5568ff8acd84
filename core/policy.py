"""Policy: failure classification, the retry policy bound to it, budgets, and the loop decision.

Policy, not the worker, controls retry by failure class. The domain table
comes from the spec (`failure_domains.toml`); this module only reads it. The
functions here are pure: they look at a Task and its Attempts and answer, so
the same answer can be recomputed by a checker from the history.

After every Attempt exactly one decision is made, with its reason:
verify (the Attempt succeeded on independent evidence), correct (a new
Attempt with a changed hypothesis), retry (a transient failure, paced by
backoff), stop (a budget is exhausted or the domain says stop), escalate (a
human must decide: blocked, poison, repeated signature, unsafe).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import InputError
from .records import Attempt, Plan, Task

if TYPE_CHECKING:
    from shiftchange.spec.model import FailureDomain


@functools.cache
def domains() -> dict[str, FailureDomain]:
    """The packaged spec's failure-domain table, read on first use (the retry policy's; a table under review keeps it).

    The policy's own copy: the checkers read the same catalogue from the spec, and must never share a mistake made in
    the policy's table (a test that mutates this one shows the checkers still judge by the catalogue).
    """
    from .table import packaged

    return dict(packaged().spec.domains)


def __getattr__(name: str) -> object:
    if name == "DOMAINS":  # the table by its old name, read when first asked for, never at import
        return domains()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


RETRYING_RESPONSES = ("back_off_and_retry", "new_attempt_changed_hypothesis", "reconcile")
DECISIONS = ("verify", "correct", "retry", "stop", "escalate")


@dataclass(frozen=True, slots=True)
class Decision:
    kind: str
    reason: str
    task_trigger: str | None
    """The task machine's trigger this decision fires, if any (retry and correct leave the task in progress)."""


def classify(domain: str) -> str:
    """Check a reported failure domain against the spec's table; an unknown name is bad input."""
    if domain not in domains():
        raise InputError(f"unknown failure domain {domain!r}; use one of {', '.join(domains())}")
    return domain


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """One budget dimension of a task: what is used of its limit, and whether that is a stop."""

    name: str
    unit: str
    used: float
    limit: float
    exhausted: bool

    def words(self) -> str:
        if self.unit == "usd":
            return f"{self.name}: ${self.used:.2f} of ${self.limit:.2f} used"
        if self.unit == "s":
            return f"{self.name}: {self.used:.0f}s of {self.limit:.0f}s used"
        return f"{self.name}: {self.used} of {self.limit} used"


def budget_use(task: Task, attempts: list[Attempt]) -> tuple[BudgetUse, ...]:
    """Every dimension the chapter names, in one place: the stop rule and the recovery timeline both read this."""
    budget = task.budget
    return (
        BudgetUse("attempts", "", len(attempts), budget.attempts_max, len(attempts) >= budget.attempts_max),
        BudgetUse("elapsed time", "s", task.elapsed_s, budget.elapsed_max_s, task.elapsed_s >= budget.elapsed_max_s),
        BudgetUse("cost", "usd", task.cost_usd, budget.cost_max_usd, task.cost_usd >= budget.cost_max_usd),
        BudgetUse("tokens", "", task.tokens, budget.tokens_max, task.tokens >= budget.tokens_max),
        # Interruptions are counted when they happen (a release), so only going past the limit is a stop.
        BudgetUse("human interruptions", "", task.interruptions, budget.interruptions_max, task.interruptions > budget.interruptions_max),
    )


def budget_exhausted(task: Task, attempts: list[Attempt]) -> str | None:
    """The first exhausted budget dimension, or None while every one has room for another Attempt."""
    return next((use.words() for use in budget_use(task, attempts) if use.exhausted), None)


def _failures_in(attempts: list[Attempt], domain: str) -> int:
    return sum(1 for a in attempts if a.state == "failed" and a.failure_domain == domain)


def spend_fits(task: Task, cost_usd: float, tokens: int) -> bool:
    """Whether authorizing this spend keeps the task within its cost and token budgets."""
    return task.cost_usd + cost_usd <= task.budget.cost_max_usd and task.tokens + tokens <= task.budget.tokens_max


def repeated_signature(attempts: list[Attempt], budget_repeats_max: int) -> bool:
    """True when the latest failure signature ends a run of identical ones longer than the budget allows."""
    signatures = [a.failure_signature for a in attempts if a.state in ("failed", "quarantined")]
    if not signatures or signatures[-1] is None:
        return False
    run = 0
    for signature in reversed(signatures):
        if signature != signatures[-1]:
            break
        run += 1
    return run > budget_repeats_max


def poison(earlier: list[Attempt], signature: str | None, repeats_max: int) -> bool:
    """A failure signature that would end a run of identical ones longer than the budget allows marks a poison item.

    `earlier` are the task's Attempts before this one, and `repeats_max` its budget's `repeated_signatures_max`:
    with the default of 1, the second Attempt in a row to fail the same way is poison (dead letter, not retry).
    The run is counted as `repeated_signature` counts it, over failed and quarantined Attempts.
    """
    if signature is None:
        return False
    run = 1
    for attempt in reversed([a for a in earlier if a.state in ("failed", "quarantined")]):
        if attempt.failure_signature != signature:
            break
        run += 1
    return run > repeats_max


def retry_refusal(task: Task, attempts: list[Attempt], plan: Plan) -> str | None:
    """Why the retry policy forbids another automatic Attempt, or None when it permits one."""
    latest = attempts[-1]
    domain = domains().get(latest.failure_domain or "")
    if domain is None:
        return "the latest failure is not classified"
    if domain.response not in RETRYING_RESPONSES:
        return f"{domain.name} failures respond {domain.response}, not retry"
    failures_in_domain = _failures_in(attempts, domain.name)
    if failures_in_domain > domain.retries_max:
        return f"{domain.name} allows {domain.retries_max} automatic retries; {failures_in_domain} failures so far"
    if domain.changed_hypothesis_required and plan.hypothesis.strip() == latest.hypothesis.strip():
        return f"{domain.name} failures need a changed hypothesis; the plan repeats {latest.hypothesis!r}"
    if repeated_signature(attempts, task.budget.repeated_signatures_max):
        return f"failure signature {latest.failure_signature!r} repeats"
    return None


def decide(task: Task, attempts: list[Attempt]) -> Decision:
    """The one loop decision after the latest Attempt ended."""
    latest = attempts[-1]
    if latest.state == "succeeded":
        return Decision("verify", "independent evidence confirmed the result", "attempt_succeeded")
    if latest.state == "blocked":
        return Decision(
            "escalate", f"evidence is contradictory or insufficient: {latest.evidence or latest.reconciliation}", "attempt_blocked"
        )
    if latest.state == "quarantined":
        return Decision(
            "escalate", f"poison: failure signature {latest.failure_signature!r} repeated; dead-lettered", "attempt_quarantined"
        )
    if latest.state == "cancelled":
        # The Attempt was cancelled but its Task was not: a human decides whether to release it or cancel it too.
        return Decision("stop", f"cancelled: {latest.cancel_reason}", "escalate")
    exhausted = budget_exhausted(task, attempts)
    if exhausted:
        return Decision("stop", f"budget exhausted ({exhausted})", "stop")
    if repeated_signature(attempts, task.budget.repeated_signatures_max):
        return Decision("escalate", f"failure signature {latest.failure_signature!r} repeats across attempts", "escalate")
    domain = domains()[latest.failure_domain or "internal"]
    failures_in_domain = _failures_in(attempts, domain.name)
    if domain.response not in RETRYING_RESPONSES:
        kind = "stop" if domain.response == "stop" else "escalate"
        return Decision(kind, f"{domain.name} failures respond {domain.response} (blast radius: {domain.blast_radius})", "escalate")
    if failures_in_domain > domain.retries_max:
        return Decision("escalate", f"{domain.name} retries exhausted ({domain.retries_max} allowed)", "escalate")
    if domain.changed_hypothesis_required:
        return Decision("correct", f"{domain.name} failure: a new Attempt must change its hypothesis", None)
    return Decision("retry", f"{domain.name} failure is transient: retry after backoff", None)
