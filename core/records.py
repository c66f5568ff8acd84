"""The durable records: Task, Attempt, Manifest, Lease, Intent (operation key), Receipt, Event.

These are the chapter's records with its field names. They are plain slotted
dataclasses so the memory store can keep them live and the SQLite store can
map each field to a column. Each stored record carries a `version`, bumped on
every write; stores write with `WHERE version = ?`, so a write guarded by a
stale read fails instead of overwriting (the guard lives in the write).

Lease tokens never sit in a record: an Attempt keeps only the token's SHA-256
digest, so a leaked database cannot be used to forge a fence.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Budget:
    """The limits of one Task, every dimension the chapter names. Exhausting any one is a stop."""

    attempts_max: int = 5
    elapsed_max_s: float = 4 * 3600.0
    cost_max_usd: float = 20.0
    tokens_max: int = 2_000_000
    repeated_signatures_max: int = 1
    """How many consecutive attempts may end with the same failure signature before the loop stops (1: the second stops)."""
    interruptions_max: int = 3
    """Human interruptions (escalations, releases) the task may consume."""


@dataclass(slots=True)
class Task:
    """Stable identity of a bounded piece of work; its lifecycle moves on the task machine."""

    task_id: str
    objective: str
    scope: str
    workspace: str
    state: str
    budget: Budget
    created_at: float
    cost_usd: float = 0.0
    tokens: int = 0
    elapsed_s: float = 0.0
    interruptions: int = 0
    priority: int = 0
    """Higher is more important; load shedding drops the lowest first."""
    deadline_at: float | None = None
    """When the work stops being worth doing; shedding drops work that can no longer meet it."""
    decision: str | None = None
    decision_reason: str | None = None
    version: int = 0


@dataclass(slots=True, frozen=True)
class Plan:
    """What an Attempt is asked to try: its hypothesis and the versions it will freeze."""

    hypothesis: str
    base_sha: str = "0" * 40
    executor: str = "executor/1"
    model: str = "model/1"
    context_version: str = "context/1"
    policy_version: str = "policy/1"


@dataclass(slots=True, frozen=True)
class Manifest:
    """The frozen inputs of one Attempt, handed to the worker at claim."""

    task_id: str
    attempt_number: int
    objective: str
    scope: str
    workspace: str
    worktree: str
    hypothesis: str
    base_sha: str
    executor: str
    model: str
    context_version: str
    policy_version: str
    budget: Budget

    def digest(self) -> str:
        """SHA-256 of the fields' reprs in declaration order, budget inlined, unit-separated; stable across runs and stores."""
        words = "\x1f".join(map(repr, _manifest_values(self) + _budget_values(self.budget)))
        return hashlib.sha256(words.encode()).hexdigest()


@dataclass(slots=True)
class Attempt:
    """One historical try at a Task. Appended, never rewritten once terminal."""

    attempt_id: str
    task_id: str
    number: int
    state: str
    created_at: float
    hypothesis: str
    previous_attempt_id: str | None = None
    reason: str | None = None
    plan: Plan | None = None
    # The lease and claim.
    worker_id: str | None = None
    generation: int = 0
    token_digest: str | None = None
    claimed_at: float | None = None
    heartbeat_at: float | None = None
    expires_at: float | None = None
    manifest_digest: str | None = None
    worktree: str | None = None
    base_sha: str | None = None
    head_sha: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    timeout_budget_s: float = 0.0
    checkpoint: str | None = None
    # Outcome and evidence.
    result: str | None = None
    reconciliation: str | None = None
    failure_domain: str | None = None
    failure_signature: str | None = None
    evidence: str | None = None
    cancel_requested: bool = False
    cancel_reason: str | None = None
    cancel_deadline_at: float | None = None
    # Reliability controls.
    eligible_at: float | None = None
    """Not claimable before this time: the backoff after the previous Attempt's transient failure."""
    backoff_s: float = 0.0
    """The backoff drawn before this Attempt (decorrelated jitter continues from it)."""
    fallback: str | None = None
    """A declared fallback the gateway switched to ("model_provider -> small_model"): the frozen dependency changed."""
    # Spend.
    cost_usd: float = 0.0
    tokens: int = 0
    elapsed_s: float = 0.0
    version: int = 0


@dataclass(slots=True, frozen=True)
class Lease:
    """Temporary execution ownership, returned once to the claiming worker."""

    attempt_id: str
    task_id: str
    owner: str
    generation: int
    token: str
    expires_at: float


@dataclass(slots=True)
class Intent:
    """An orchestrator-minted operation key with the intent persisted before any call, and its receipt once known."""

    key: str
    task_id: str
    attempt_id: str
    operation: str
    identity: str
    """What names the effect at the provider when it keeps no keys (a PR's head SHA)."""
    request: str
    minted_at: float
    granted_at: float | None = None
    deadline_at: float | None = None
    receipt: str | None = None
    """The provider's identity for the effect (a PR number), once recorded."""
    dependency: str = "code_host"
    """The dependency the call went to, whose circuit breaker learns its outcome."""
    outcome: str | None = None
    """What the dependency's breaker was told of the latest call: "succeeded", "failed", or None while untold."""
    result: str | None = None
    version: int = 0


@dataclass(slots=True, frozen=True)
class Event:
    """One entry of the history: every contract call, accepted or refused, and every provider finding."""

    seq: int
    at: float
    actor: str
    kind: str
    task_id: str
    attempt_id: str | None
    accepted: bool
    reason: str
    from_state: str | None = None
    to_state: str | None = None
    generation: int | None = None
    """The fence generation the caller presented, if any."""
    worker_id: str | None = None
    detail: str = ""
    code: str | None = None
    """For a refused call, its refusal code (`results.REFUSAL_CODES`); None when accepted."""
    late: bool = False
    """Refused because its authority is gone (stale fence, expired lease, no longer leased): kept for audit."""
    expires_at: float | None = None
    """The Attempt's lease expiry as this event left it (None for a task event or an Attempt never leased)."""
    operation_key: str | None = None
    """The operation key the call minted or presented (grant_tool, record_receipt, report_call_failure)."""
    retries: int = 0
    """How many times the contract that wrote this event ran again after losing a race in the store (a deadlock, a
    serialization failure): 0 on a store that serializes its transactions, at most `CoreConfig.store_retries_max`."""


@dataclass(frozen=True, slots=True)
class Leader:
    """A named lease on a duty only one process may do at a time (admission): who holds it, its generation, until when."""

    name: str
    holder: str
    generation: int
    expires_at: float


def frozen_builder(record_type: type) -> Callable[..., Any]:
    """A positional constructor of a frozen, slotted record that costs what a mutable record's does.

    Why: a frozen dataclass's __init__ sets every field through
    `object.__setattr__`, about four times the cost of a plain attribute
    store, and the core builds such records on every contract (an Event per
    call; a Manifest, a Lease and a Claim per claim). So the record is built
    as a mutable twin with the same slots, and then becomes the frozen type:
    CPython lets an object change to a class of identical layout. What comes
    out is an ordinary frozen instance: equal, hashable and immutable like
    one made by `record_type(...)`. The check below fails at import, not in
    a contract, if the layouts ever differ.
    """
    spec = [
        (item.name, item.type, field(default=item.default, init=item.init) if item.default is not MISSING else field(init=item.init))
        for item in fields(record_type)
    ]
    twin = make_dataclass(f"_{record_type.__name__}Draft", spec, slots=True, eq=False, repr=False, match_args=False)

    def build(*values: Any) -> Any:
        record = twin(*values)
        record.__class__ = record_type
        return record

    sample = tuple(range(sum(1 for item in fields(record_type) if item.init)))
    assert build(*sample) == record_type(*sample), f"{record_type.__name__}: the fast constructor builds a different record"
    return build


new_event = frozen_builder(Event)
"""`Event(...)` positionally, for the stores' hot path."""
new_manifest = frozen_builder(Manifest)
new_lease = frozen_builder(Lease)


def field_names(record_type: type) -> tuple[str, ...]:
    """Column order for a record type (used by SQL stores)."""
    return tuple(f.name for f in fields(record_type))


_MANIFEST_FIELDS = tuple(name for name in field_names(Manifest) if name != "budget")
_BUDGET_FIELDS = field_names(Budget)
# A claim digests its manifest on the hot path: read the fields with one call each (no cache: 1 == 1.0, yet their reprs differ).
_manifest_values = operator.attrgetter(*_MANIFEST_FIELDS)
_budget_values = operator.attrgetter(*_BUDGET_FIELDS)


_BUDGET_KEYS = tuple(sorted(field.name for field in fields(Budget)))
_PLAN_KEYS = tuple(sorted(field.name for field in fields(Plan)))
assert all(str(field.type) in ("int", "float", "str") for field in (*fields(Budget), *fields(Plan))), "Budget and Plan must stay flat"


# Both are flat (every field a scalar): a dict of their fields in key order is what asdict with sort_keys gives, for less.
def budget_to_json(budget: Budget) -> str:
    return json.dumps({key: getattr(budget, key) for key in _BUDGET_KEYS})


def budget_from_json(text: str) -> Budget:
    return Budget(**json.loads(text))


def plan_to_json(plan: Plan | None) -> str | None:
    return None if plan is None else json.dumps({key: getattr(plan, key) for key in _PLAN_KEYS})


def plan_from_json(text: str | None) -> Plan | None:
    return None if text is None else Plan(**json.loads(text))
