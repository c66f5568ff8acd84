"""The seams: the rules a port or an experiment may replace, passed to `Orchestrator(..., seams=Seams(...))`.

Why seams and not subclasses: the simulator breaks the core in the
chapter's thirteen ways, and a break written as an `Orchestrator` subclass
that overrides private methods ties it to one implementation's insides and
stops being true the day they change. Each rule below is a value with a
small signature, so a break is a configuration: `Seams(mint_key=timestamp_key)`.
A port keeps the defaults and passes the same contract suite.

The defaults are the reference rules:

- `mint_key` names an operation key from the logical operation, never from a
  moment in time (see `mint_key`);
- `retry_rule` is the retry policy (`policy.retry_refusal`);
- `fence` proves the current lease (`fence.LeaseFence`);
- `spend` keeps a call within its task's budget and its Attempt's ceiling;
- `dedup` asks provider truth before an unreceipted call is granted again;
- `recovery` records a retry as Attempt N+1, never a rewrite of N.

The transition tables are not a seam: they are the design, passed whole as
the `Orchestrator`'s `table` (`core.table.Table`), and every column of a row
is what the core does (`core.vocabulary`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import InputError
from .fence import LEASE_FENCE, Fence
from .policy import retry_refusal, spend_fits
from .provider import Effect, ProviderAdapter
from .records import Attempt, Plan, Task
from .store import Transaction


def mint_key(operation: str, task_id: str, attempt_id: str, identity: str, spans_attempts: bool) -> str:
    """The operation key: named by the logical operation, never by a moment in time.

    An operation that may span attempts (a PR for a head SHA) is keyed by the
    Task and the content, so Attempt N+1 finds Attempt N's effect; one the
    Attempt owns is keyed by the Attempt.
    """
    owner = task_id if spans_attempts else attempt_id
    return f"{operation}:{owner}:{identity}"


@dataclass(frozen=True, slots=True)
class KeyRequest:
    """What the gateway knows when it mints an operation key."""

    operation: str
    task_id: str
    attempt_id: str
    identity: str
    spans_attempts: bool
    presented: str | None
    """The key the worker presented, if any (the reference ignores it, and refuses a call whose key differs)."""
    now: float


def minted_key(request: KeyRequest) -> str:
    """The reference key minting: `mint_key` of the logical operation."""
    return mint_key(request.operation, request.task_id, request.attempt_id, request.identity, request.spans_attempts)


def within_budget(task: Task, attempt: Attempt, cost_usd: float, tokens: int, attempt_spend_max_usd: float) -> bool:
    """Within the task's budget and the Attempt's spend ceiling (denial of wallet)."""
    return spend_fits(task, cost_usd, tokens) and attempt.cost_usd + cost_usd <= attempt_spend_max_usd


def provider_truth(provider: ProviderAdapter, key: str, operation: str, identity: str) -> list[Effect]:
    """Before granting an unreceipted call again, ask the provider whether it already landed."""
    return provider.find(key, operation, identity)


def append_attempt(tx: Transaction, attempt: Attempt, previous: Attempt | None) -> Attempt:
    """Recovery is Attempt N+1: the new record is appended; the previous one is history and stays as it ended."""
    tx.insert_attempt(attempt)
    return attempt


KeyMinter = Callable[[KeyRequest], str]
RetryRule = Callable[[Task, list[Attempt], Plan], "str | None"]
"""Why another automatic Attempt may not follow (the task, its Attempts, the new plan), or None when one may."""
SpendRule = Callable[[Task, Attempt, float, int, float], bool]
"""Whether (task, attempt, cost_usd, tokens, attempt_spend_max_usd) may be authorized."""
Dedup = Callable[[ProviderAdapter, str, str, str], list[Effect]]
"""What is known to have landed under (provider, key, operation, identity) before a call is granted again."""
Recovery = Callable[[Transaction, Attempt, "Attempt | None"], Attempt]
"""Record a retry's new Attempt (inside the retry's transaction); returns the record now queued."""


@dataclass(frozen=True, slots=True)
class Seams:
    """The replaceable rules of the core; every default is the reference rule."""

    mint_key: KeyMinter = minted_key
    retry_rule: RetryRule = retry_refusal
    fence: Fence = LEASE_FENCE
    spend: SpendRule = within_budget
    dedup: Dedup = provider_truth
    recovery: Recovery = append_attempt

    def __post_init__(self) -> None:
        for name in ("mint_key", "retry_rule", "spend", "dedup", "recovery"):
            if not callable(getattr(self, name)):
                raise InputError(f"Seams.{name} must be callable, not {getattr(self, name)!r:.60}")
        for name in ("address", "check", "honoured"):
            if not callable(getattr(self.fence, name, None)):
                raise InputError(f"Seams.fence must have an {name}() method (see core.fence.Fence), not {self.fence!r:.60}")
