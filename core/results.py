"""What a contract call returns: a refusal as data, or what it moved, claimed, renewed, granted or found.

Why refusals are data: a caller (a worker, the simulator's checkers, the
recovery timeline, an operator's tool) must decide what a refusal means, and
deciding by searching the readable reason ties every caller to the wording of
one implementation. So a `Refused` carries a `code` from the closed vocabulary
below, the `guards` that failed (the spec's guard names), the `state` the
record was in, and whether it is `late` (its authority is gone: a stale
fence, an expired lease, an Attempt no longer leased). The `reason` stays, for
people; nothing decides by it. The same code and lateness are written on the
refused event, so the history says as much as the answer did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .records import Lease, Manifest, frozen_builder

REFUSAL_CODES: dict[str, str] = {
    "no_row": "no transition leaves the record's state on this trigger: the call is out of order",
    "guard": "a transition exists but a guard it needs does not hold (`guards` names them)",
    "stale_fence": "late: the generation presented is not the Attempt's current one",
    "expired_lease": "late: the lease had run out before the call",
    "not_leased": "late: the Attempt has left the states in which a lease is honoured",
    "unfenced": "no lease was ever issued for this Attempt, so no call can prove one",
    "forged": "the token does not match the lease",
    "budget": "the spend, or another Attempt, would pass the task's budget or the Attempt's spend ceiling",
    "rate_limit": "the dependency's rate limit is reached (a capacity denial)",
    "open_circuit": "the dependency's circuit breaker refused the call",
    "retry_budget": "the dependency's retry budget is spent",
    "concurrency_limit": "the calls in flight to the dependency are at its adaptive concurrency limit",
    "not_admitted": "admission deferred or shed the Attempt, or has not reached it yet",
    "not_found": "there is nothing to act on (a claim of a task with no Attempt, a decision with no ended Attempt)",
    "changed": "the Attempt changed while the provider was read: nothing was decided on stale findings, ask again",
}
"""Every code a `Refused` may carry, with what it means. The vocabulary is closed: a new code is a new entry here."""

LATE_CODES = frozenset({"stale_fence", "expired_lease", "not_leased"})
"""The codes of a refused call whose lease once was real but no longer gives it authority."""
FENCE_CODES = frozenset({"stale_fence", "forged", "unfenced"})
"""The codes of a call the fence refused before the table was asked: its `state` says nothing of what the table would do."""

GUARD_CODES: tuple[tuple[str, str], ...] = (
    ("lease_current", "expired_lease"),
    ("spend_within_budget", "budget"),
    ("budget_left", "budget"),
    ("rate_allows", "rate_limit"),
    ("circuit_allows", "open_circuit"),
    ("retry_budget_allows", "retry_budget"),
    ("concurrency_allows", "concurrency_limit"),
)
"""A failed guard with a code of its own, in precedence order; any other failed guard is code "guard"."""


def guard_code(failed: tuple[str, ...]) -> str:
    """The code of a refusal whose row exists but whose `failed` guards do not hold."""
    for guard, code in GUARD_CODES:
        if guard in failed:
            return code
    return "guard"


@dataclass(frozen=True, slots=True)
class Refused:
    """A contract call the table or a fence refused; it changed nothing but the history."""

    reason: str
    """Why, in words, for people; decide by `code` and `guards`, never by this text."""
    code: str = "guard"
    """One of REFUSAL_CODES."""
    guards: tuple[str, ...] = ()
    """The spec's guards that did not hold (a forbidden one written "!name"), for a refusal of code guard and its kin."""
    state: str | None = None
    """The state the record (the Attempt, or the Task for a task-level call) was in when refused."""
    domain: str | None = None
    """The failure domain a refusal counts as, where it is not the caller's defect (a rate denial is capacity)."""
    retry_after_s: float | None = None
    """When the gateway knows it, how long until asking again could be granted (an open circuit's cool-down left)."""
    accepted: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        assert self.code in REFUSAL_CODES, f"unknown refusal code {self.code!r}"

    @property
    def late(self) -> bool:
        """Refused because its authority is gone (stale fence, expired lease, no longer leased): kept for audit."""
        return self.code in LATE_CODES


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

# Built on every claim and renewal (see `records.frozen_builder`).
new_claim = frozen_builder(Claim)
new_renewal = frozen_builder(Renewal)
