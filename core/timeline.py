"""The recovery timeline: per Attempt, its hypothesis, actions, evidence, cost and the budget left.

The chapter's build sequence ends with "surface a recovery timeline to the
operator: hypotheses, actions, evidence, cost, and remaining budget per
Attempt". Everything here is read from the store, never from a worker or a
transcript: the Task and Attempt records, the intents with their receipts, and
the one history of events, accepted and refused.

Why two steps, data then text: `build_timeline` returns frozen values that a
test, a notebook or another renderer can inspect, and `render_timeline` only
formats them. Neither reads a clock or prints: "now" would make the same
store render differently twice, so elapsed time is what the records say.

Why one transaction for the reads: the timeline may be built while another
process writes to the store; reading the Task, its Attempts, their intents and
the history in one transaction shows one consistent moment, so no event can
name an Attempt the timeline has not read.

What counts as late is the core's word, not the timeline's: the orchestrator
marks every refused event of a fenced call whose authority is gone (stale
fence, expired lease, Attempt no longer leased) `late`, with its refusal
code. Such an event is kept for audit and marked, because it is exactly the
evidence the operator needs when a stale worker claims success. A claim that
lost a race is refused, but it is not late: it never had a lease.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import NotFound
from .policy import budget_exhausted, budget_use, repeated_signature
from .records import Attempt, Event, Intent, Task
from .store import Store
from .vocabulary import FIRED

__all__ = [
    "Action",
    "AttemptTimeline",
    "BudgetLine",
    "Evidence",
    "FinalRecords",
    "Receipt",
    "Timeline",
    "build_timeline",
    "moment",
    "offset",
    "readable_times",
    "render_timeline",
]


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One budget dimension of the Task: its limit, what is used and what is left."""

    name: str
    unit: str
    """The unit of used, limit and left: usd, s, or empty for a count."""
    used: float
    limit: float
    left: float


@dataclass(frozen=True, slots=True)
class Action:
    """One event of the history, as the operator reads it."""

    seq: int
    at: float
    actor: str
    kind: str
    accepted: bool
    reason: str
    from_state: str | None
    to_state: str | None
    generation: int | None
    """The fence generation the caller presented, if any."""
    worker_id: str | None
    detail: str
    late: bool
    """Refused because its lease had expired or its fence was stale: kept for audit, no authority."""
    code: str | None
    """For a refusal, its code (`results.REFUSAL_CODES`); None when accepted."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """An operation key the orchestrator minted for the Attempt, and the provider's identity for it once known."""

    key: str
    operation: str
    identity: str
    receipt: str | None
    granted_at: float | None
    deadline_at: float | None


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the Attempt left behind: reconciliation, independent evidence, classification, receipts."""

    reconciliation: str | None
    evidence: str | None
    failure_domain: str | None
    failure_signature: str | None
    claimed_result: str | None
    """The worker's own claim; recorded, but never evidence by itself."""
    receipts: tuple[Receipt, ...]


@dataclass(frozen=True, slots=True)
class AttemptTimeline:
    number: int
    attempt_id: str
    state: str
    hypothesis: str
    recovery_reason: str | None
    """Why this Attempt exists; None for the first dispatch."""
    previous_attempt_id: str | None
    worker_id: str | None
    generation: int
    head_sha: str | None
    state_path: tuple[str, ...]
    actions: tuple[Action, ...]
    evidence: Evidence
    cost_usd: float
    tokens: int
    elapsed_s: float
    backoff_s: float = 0.0
    """The pause drawn before this Attempt could be claimed (after a transient failure)."""
    fallback: str | None = None
    """A declared fallback the gateway switched this Attempt to: its frozen dependency changed."""


@dataclass(frozen=True, slots=True)
class Timeline:
    task_id: str
    objective: str
    state: str
    created_at: float
    """When the Task was created, on the store's clock: the origin of every action's relative time."""
    decision: str | None
    decision_reason: str | None
    budget: tuple[BudgetLine, ...]
    exhausted: str | None
    """The first exhausted budget dimension, as the policy words it; None while another Attempt fits."""
    repeating_signature: str | None
    """The latest failure signature when it repeats beyond the budget (a stop), else None."""
    repeats_allowed: int
    task_actions: tuple[Action, ...]
    """Events about the Task as a whole (create, accept, dispatch, retry, release, approve)."""
    attempts: tuple[AttemptTimeline, ...]


# ------------------------------------------------------------------ build


def build_timeline(store: Store, task_id: str) -> Timeline:
    """Read one Task's records and history; raises NotFound for an unknown task id."""
    with store.transaction() as tx:
        task = tx.task(task_id)
        if task is None:
            raise NotFound(f"unknown task {task_id!r}")
        attempts = tx.attempts_of(task_id)
        intents = {attempt.attempt_id: tx.intents_of(attempt.attempt_id) for attempt in attempts}
        # Inside the transaction, so the history and the records show the same moment.
        events = store.events(task_id)
        # Build the frozen values before the transaction ends: a memory store hands out live records.
        return _timeline(task, attempts, intents, events)


def _timeline(task: Task, attempts: list[Attempt], intents: dict[str, list[Intent]], events: list[Event]) -> Timeline:
    by_attempt: dict[str | None, list[Event]] = {}
    for event in events:
        by_attempt.setdefault(event.attempt_id, []).append(event)
    repeats_allowed = task.budget.repeated_signatures_max
    return Timeline(
        task_id=task.task_id,
        objective=task.objective,
        state=task.state,
        created_at=task.created_at,
        decision=task.decision,
        decision_reason=task.decision_reason,
        budget=_budget_lines(task, attempts),
        exhausted=budget_exhausted(task, attempts),
        repeating_signature=attempts[-1].failure_signature if attempts and repeated_signature(attempts, repeats_allowed) else None,
        repeats_allowed=repeats_allowed,
        task_actions=tuple(_action(event) for event in by_attempt.get(None, ())),
        attempts=tuple(_attempt(a, by_attempt.get(a.attempt_id, []), intents[a.attempt_id]) for a in attempts),
    )


def _budget_lines(task: Task, attempts: list[Attempt]) -> tuple[BudgetLine, ...]:
    """Every dimension as the policy counts it (`policy.budget_use`), so the timeline and the stop rule always agree."""
    return tuple(BudgetLine(use.name, use.unit, use.used, use.limit, max(0, use.limit - use.used)) for use in budget_use(task, attempts))


def _attempt(attempt: Attempt, events: list[Event], intents: list[Intent]) -> AttemptTimeline:
    return AttemptTimeline(
        number=attempt.number,
        attempt_id=attempt.attempt_id,
        state=attempt.state,
        hypothesis=attempt.hypothesis,
        recovery_reason=attempt.reason,
        previous_attempt_id=attempt.previous_attempt_id,
        worker_id=attempt.worker_id,
        generation=attempt.generation,
        head_sha=attempt.head_sha,
        backoff_s=attempt.backoff_s,
        fallback=attempt.fallback,
        state_path=_state_path(events),
        actions=tuple(_action(event) for event in events),
        evidence=Evidence(
            reconciliation=attempt.reconciliation,
            evidence=attempt.evidence,
            failure_domain=attempt.failure_domain,
            failure_signature=attempt.failure_signature,
            claimed_result=attempt.result,
            receipts=tuple(Receipt(i.key, i.operation, i.identity, i.receipt, i.granted_at, i.deadline_at) for i in intents),
        ),
        cost_usd=attempt.cost_usd,
        tokens=attempt.tokens,
        elapsed_s=attempt.elapsed_s,
    )


def _state_path(events: list[Event]) -> tuple[str, ...]:
    """The states the Attempt passed through, from its accepted attempt-machine events (the append opens it)."""
    path: list[str] = []
    for event in events:
        moved = event.kind == "append" or (event.kind in FIRED["attempt"] and event.from_state != event.to_state)
        if event.accepted and moved and event.to_state is not None:
            path.append(event.to_state)
    return tuple(path)


def _action(event: Event) -> Action:
    return Action(
        seq=event.seq,
        at=event.at,
        actor=event.actor,
        kind=event.kind,
        accepted=event.accepted,
        reason=event.reason,
        from_state=event.from_state,
        to_state=event.to_state,
        generation=event.generation,
        worker_id=event.worker_id,
        detail=event.detail,
        late=event.late,
        code=event.code,
    )


# ----------------------------------------------------------------- render


def render_timeline(timeline: Timeline) -> str:
    """Plain text for an operator: a header with the Task and its budget, then one block per Attempt."""
    every = [*timeline.task_actions, *(action for attempt in timeline.attempts for action in attempt.actions)]
    width = max((len(moment(action.at, timeline.created_at)) for action in every), default=0)
    lines = [f"Recovery timeline of task {timeline.task_id}", *_header(timeline, width)]
    for attempt in timeline.attempts:
        lines.append("")
        lines.extend(_attempt_block(attempt, timeline.created_at, width))
    return readable_times("\n".join(lines) + "\n")


def _header(timeline: Timeline, width: int) -> list[str]:
    decision = "none yet" if timeline.decision is None else f"{timeline.decision}: {timeline.decision_reason}"
    lines = [f"  objective   {timeline.objective}", f"  state       {timeline.state}", f"  created     {moment(timeline.created_at)}"]
    lines += [f"  decision    {decision}", "  budget"]
    width = max(len(name) for name in (*(line.name for line in timeline.budget), "repeated signature"))
    for line in timeline.budget:
        used, limit, left = (_amount(value, line.unit) for value in (line.used, line.limit, line.left))
        lines.append(f"    {line.name:<{width}}  {used} of {limit} used, {left} left")
    lines.append(f"    {'exhausted':<{width}}  {timeline.exhausted or 'none: another attempt fits'}")
    if timeline.repeating_signature is None:
        repeats = f"none beyond the {timeline.repeats_allowed} allowed"
    else:
        repeats = f"{timeline.repeating_signature!r} repeats beyond the {timeline.repeats_allowed} allowed"
    lines.append(f"    {'repeated signature':<{width}}  {repeats}")
    lines.append("  task events (times after the task's creation)")
    lines.extend(_action_line(action, timeline.created_at, width) for action in timeline.task_actions)
    return lines


def _attempt_block(attempt: AttemptTimeline, origin: float, width: int) -> list[str]:
    recovery = (
        "first dispatch" if attempt.previous_attempt_id is None else f"after {attempt.previous_attempt_id}: {attempt.recovery_reason}"
    )
    worker = "never claimed" if attempt.worker_id is None else f"{attempt.worker_id}, lease generation {attempt.generation}"
    evidence = attempt.evidence
    lines = [
        f"Attempt {attempt.number} ({attempt.attempt_id}): {attempt.state}",
        f"  hypothesis  {attempt.hypothesis}",
        f"  recovery    {recovery}",
        f"  worker      {worker}",
        f"  path        {' -> '.join(attempt.state_path)}",
        f"  spend       {_amount(attempt.cost_usd, 'usd')}, {attempt.tokens} tokens, {_amount(attempt.elapsed_s, 's')} elapsed",
    ]
    if attempt.backoff_s:
        lines.append(f"  backoff     waited {_amount(attempt.backoff_s, 's')} after a transient failure before it could be claimed")
    if attempt.fallback:
        lines.append(f"  fallback    {attempt.fallback} (the frozen dependency changed)")
    lines += [
        "  evidence",
        f"    reconciliation  {evidence.reconciliation or 'not needed'}",
    ]
    if evidence.evidence:
        lines.append(f"    verdict         {evidence.evidence}")
    if evidence.failure_domain:
        lines.append(f"    failure         {evidence.failure_domain}, signature {evidence.failure_signature!r}")
    if evidence.claimed_result:
        lines.append(f"    worker's claim  {evidence.claimed_result} (head {attempt.head_sha or 'unknown'}; not evidence by itself)")
    for receipt in evidence.receipts:
        lines.append(f"    receipt         {receipt.key} -> {receipt.receipt or 'none recorded'}")
    lines.append("  actions")
    lines.extend(_action_line(action, origin, width) for action in attempt.actions)
    return lines


def _action_line(action: Action, origin: float, width: int) -> str:
    actor = action.worker_id or action.actor
    who = actor if action.generation is None else f"{actor} gen {action.generation}"
    if action.accepted:
        notes = [_movement(action), "" if action.reason == "accepted" else action.reason, action.detail]
    else:
        notes = [f"REFUSED ({action.reason})", action.detail]
    text = "  ".join(note for note in notes if note)
    return f"    {moment(action.at, origin):>{width}}  {who:<18} {action.kind:<20} {text}".rstrip()


def _movement(action: Action) -> str:
    if action.from_state == action.to_state:
        return ""
    return f"{action.from_state} -> {action.to_state}" if action.from_state else f"-> {action.to_state}"


def _amount(value: float, unit: str) -> str:
    if unit == "usd":
        return f"${value:.2f}"
    if unit == "s":
        return f"{value:.0f}s"
    return f"{value:.0f}"


EPOCH_PLAUSIBLE_S = 1e9
"""Times from this many seconds on (2001-09-09) are read as Unix time (a real store's); below, as a simulated clock's."""


def moment(at: float, origin: float | None = None) -> str:
    """A time on the store's clock for a person: ISO 8601 in UTC when it is Unix time, the simulated clock's seconds when it is
    not (a simulation starts at 0); with `origin`, also the offset after it (`+1m05.2s`)."""
    if at >= EPOCH_PLAUSIBLE_S:
        text = datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    else:
        text = f"t={at:.1f}s"
    return text if origin is None else f"{text} ({offset(at - origin)})"


EPOCH_FLOAT = re.compile(r"(?<![\w.])(?:t=)?(\d{10,}\.\d+)(?![\w.])")
"""A Unix time written as a bare number (10 digits or more: from EPOCH_PLAUSIBLE_S on), with any `t=` before it."""


def readable_times(text: str) -> str:
    """`text` with every Unix time written as a bare number ("expired at 1796499303.7910109", a checker's "t=1796499303.79")
    written as `moment` writes it, ISO 8601 UTC. Reasons are recorded in the core's words with the clock's number in them
    (the core cannot tell a Unix clock from a simulated one); what a person reads is a time."""
    return EPOCH_FLOAT.sub(lambda found: moment(float(found.group(1))), text)


def offset(seconds: float) -> str:
    """A signed duration, coarsest unit first: +4.2s, +3m07.0s, +2h05m, -1.5s."""
    sign = "-" if seconds < 0 else "+"
    left = abs(seconds)
    if left < 60:
        return f"{sign}{left:.1f}s"
    if left < 3600:
        return f"{sign}{int(left // 60)}m{left % 60:04.1f}s"
    return f"{sign}{int(left // 3600)}h{int(left % 3600 // 60):02d}m"


class FinalRecords:
    """One task's final records and its events, read as `build_timeline` reads a store.

    A simulated run and an explored path keep no events in their stores (they go to the checkers as they happen);
    given the records the checkers judged, this read-only view lets their pages show the operator's own timeline.
    """

    def __init__(self, task: Task, attempts: Sequence[Attempt], intents: Sequence[Intent], events: Sequence[Event]) -> None:
        self._task = task
        self._attempts = sorted(attempts, key=lambda attempt: attempt.number)
        self._intents = intents
        self._events = events

    @contextmanager
    def transaction(self) -> Iterator[FinalRecords]:
        yield self

    def task(self, task_id: str) -> Task | None:
        return self._task if task_id == self._task.task_id else None

    def attempts_of(self, task_id: str) -> list[Attempt]:
        return list(self._attempts) if task_id == self._task.task_id else []

    def intents_of(self, attempt_id: str) -> list[Intent]:
        return sorted((intent for intent in self._intents if intent.attempt_id == attempt_id), key=lambda intent: intent.key)

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list[Event]:
        return [event for event in self._events if event.seq > after_seq and task_id in (None, event.task_id)]
