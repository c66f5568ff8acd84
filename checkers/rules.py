"""The invariant checkers: one fold over the history for each invariant DESIGN.md names, in the catalogue's order.

Why folds. Jepsen's checkers are pure functions of a history; ours receive it
one entry at a time (`History.append` fans every entry out and keeps only a
bounded tail), because a million-task history is streamed, never stored. So
each checker judges in one pass, in the order things happened, which is also
how the rules are worded: "after cancellation", "before any terminal state",
"at retirement". A checker reads accepted events only: a refused call changed
nothing, so no rule needs it (a stale fence refused is the system working).

Why bounded. Everything a checker keeps is keyed by task and dropped when the
task's `Retired` entry arrives, so memory follows the live tasks, not the
length of the run (`live()` says how many tasks a checker still holds). What
a rule needs of a task's past is kept as its smallest deciding summary: each
Attempt's lease generation and expiry, not its events; the first effect of
each operation, not the ledger. Rules about final records (budgets, retry
classification, lost tasks, the audit) are judged on the `Retired` entry,
Jepsen's final read. Only the first violation's example is kept, rendered with
`describe`, plus a count.

Unknown. Every checker is unknown on an empty history. A checker that judges
final records is also unknown when no task retired, or when tasks were still
live at the verdict: their final records were never read.

Why independent. A checker is an oracle for the core, so from the core it
imports record types only (`Event`, `Attempt`, `Task`): the state sets and
the failure-domain table its rules need are read from the packaged spec,
lazily and once (`_sets`, `_permissions`), never from the core's compiled
machine, its policy, or a table a driver runs, and no rule calls the core's
logic. A mistake in the core then shows up as a violation instead of being
shared (tests/checkers/test_oracles.py mutates the retry policy to prove it).

Why apart from the table. A driver may run an edited table (spec/edits.py,
`--spec`), and the checkers judge it: so they judge by the catalogue
(spec/invariants.toml) and the vocabulary's meanings, never by a row's
columns, or an edit would narrow its own check. `fenced_writes` judges every
write a worker makes after its claim, whatever a row's `fenced` says; nothing
here reads a spec at import (docs/design-review.md).

An accepted entry for a task that already retired would open its state again;
that cannot happen in a correct run (the store forgets a retired task), and
`complete_audit` reports an effect that lands for a task with no live record.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

from shiftchange.core import Attempt, Event, Task
from shiftchange.spec.model import RESPONSES, Spec

from .history import OK, UNKNOWN, VIOLATED, CheckContext, Checker, Fault, Landed, Retired, Verdict, describe

__all__ = [
    "INVARIANTS",
    "AppendOnlyAttempts",
    "BudgetsHold",
    "CancelIsFinal",
    "ClassifiedRetry",
    "CompleteAudit",
    "FencedWrites",
    "NoLostTasks",
    "OneEffectPerOperation",
    "SingleOwner",
    "SuspectThenReconcile",
    "TruthfulStates",
    "all_checkers",
]

EXAMPLE_LINES_MAX = 8
"""An example is the few entries that show a violation, not a transcript."""

_TOLERANCE = 1e-9
"""A cost within this of its cap counts as within it: float sums are not exact."""
FENCE_REFUSALS = frozenset({"stale_fence", "forged", "unfenced"})
"""The refusal codes an `Event` carries when the fence, not the table, refused a call: a caller who could not prove the
lease (the history's closed code vocabulary, restated here so that no rule reads the core's)."""

_ABSENT = object()
_REOPENED = frozenset({"queued", "admitted", "claimed", "running", "verifying"})
"""Attempt states that do or await work: a cancelled Attempt must never enter one again."""

WORKER = "worker"
"""The actor whose writes the fence guards: every accepted Attempt event of this actor after its claim is a material write."""
FENCE_ISSUER = "claim"
"""The worker's one write that needs no fence: it issues one (a new generation, token and expiry)."""
DELETION = "deletion"
"""The fault kind of an effect deleted at the provider by someone outside; its parameter `provider_id` names the effect."""
CONTRADICTORY = "contradictory_evidence"
"""The failure domain of evidence that cannot all be true (spec/failure_domains.toml): what a blocked Attempt carries."""
VERIFIED = "verified"
"""The provider's passing verdict: by the vocabulary, the one trigger whose meaning is that independent evidence confirmed
the result (`verification_failed` is its failing verdict)."""


@dataclass(frozen=True, slots=True)
class _StateSets:
    """The state sets the rules ask about, as the packaged spec defines them."""

    attempt_terminal: frozenset[str]
    task_terminal: frozenset[str]
    task_resting: frozenset[str]
    leased: frozenset[str]
    """Attempt states in which a lease confers authority: those the packaged table lets a renewal leave."""


@functools.cache
def _packaged() -> Spec:
    """The packaged spec, read on first use and kept for the process: never a table a driver runs, never at import.

    An oracle that shared the core's derivations would share their mistakes,
    and one that read the table under review would let an edit narrow its own
    check; so the checkers read the installed spec files themselves, once,
    when a rule first asks. Only record types come from `core`.
    """
    from shiftchange.spec.loader import packaged_spec

    return packaged_spec()


@functools.cache
def _sets() -> _StateSets:
    spec = _packaged()
    return _StateSets(
        attempt_terminal=frozenset(spec.attempt.terminal_states),
        task_terminal=frozenset(spec.task.terminal_states),
        task_resting=frozenset(name for name, state in spec.task.states.items() if state.resting),
        leased=frozenset(source for source, _dest, row in spec.attempt.edges() if row.trigger == "renew"),
    )


def _attempt_level(event: Event) -> bool:
    """An event about one Attempt's state; `decide` names the latest Attempt but moves the Task."""
    return event.attempt_id is not None and event.kind != "decide"


def _number(attempt_id: str) -> int:
    return int(attempt_id.rpartition("#")[2])


def _brief(text: str | None, length_max: int = 60) -> str:
    if text is None:
        return "None"
    return repr(text if len(text) <= length_max else text[: length_max - 3] + "...")


def _record(attempt: Attempt) -> str:
    """One line of an Attempt's final record: what a rule about records reads."""
    return (
        f"  {attempt.attempt_id}: {attempt.state}, domain {attempt.failure_domain}, signature {_brief(attempt.failure_signature)},"
        f" hypothesis {_brief(attempt.hypothesis)}, backoff {attempt.backoff_s:g}s, cost ${attempt.cost_usd:.2f},"
        f" elapsed {attempt.elapsed_s:g}s"
    )


class _Fold:
    """What every checker shares: per-task state dropped at retirement, a violation count, the first example.

    A subclass names itself, says whether it judges final records, and
    overrides the hooks it needs: `_new` (a task's fresh state), `_on_event`
    (accepted events only), `_on_landed`, `_on_retired` (with the task's state,
    already dropped, or None if it never had any).
    """

    name = ""
    judges_final_records = False
    _follows_events = False
    """Whether the rule reads accepted events (it overrides `_on_event`): one that does not keeps no state for them."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._follows_events = cls._on_event is not _Fold._on_event

    def __init__(self, context: CheckContext) -> None:
        self.context = context
        self.violations = 0
        self._example: tuple[str, ...] = ()
        self._tasks: dict[str, object] = {}
        self._entries = 0
        self._retired = 0

    @functools.cached_property
    def sets(self) -> _StateSets:
        """The packaged spec's state sets, read when a rule first needs them (then an attribute), never at import."""
        return _sets()

    def live(self) -> int:
        """How many tasks this checker still keeps state for (zero once every task retired)."""
        return len(self._tasks)

    def event(self, event: Event) -> None:
        self._entries += 1
        if event.accepted and self._follows_events:
            self._on_event(self._state(event.task_id), event)

    def landed(self, landed: Landed) -> None:
        self._entries += 1
        self._on_landed(landed)

    def fault(self, fault: Fault) -> None:
        self._entries += 1

    def retired(self, retired: Retired) -> None:
        self._entries += 1
        self._retired += 1
        self._on_retired(self._tasks.pop(retired.task.task_id, None), retired)

    def reads_final_records(self) -> bool:
        """Whether this checker judges anything on a `Retired` entry (its final-record rules)."""
        return type(self)._on_retired is not _Fold._on_retired

    def verdict_if_retired(self, retirements: list[Retired]) -> Verdict:
        """The verdict this checker would give if these tasks retired now, leaving the checker as it was.

        Exhaustive exploration asks it in every state it reaches: a final read
        there, without copying the fold. `_on_retired` reads a task's state and
        never changes it, so restoring the counters and the task table undoes it.
        """
        kept = (self.violations, self._example, self._entries, self._retired, dict(self._tasks))
        try:
            for retired in retirements:
                self.retired(retired)
            return self.verdict()
        finally:
            self.violations, self._example, self._entries, self._retired, tasks = kept
            self._tasks.clear()
            self._tasks.update(tasks)

    def verdict(self) -> Verdict:
        if self.violations:
            return Verdict(self.name, VIOLATED, self.violations, self._example)
        if self._entries == 0:
            return Verdict(self.name, UNKNOWN, 0, ("the history is empty: nothing to judge",))
        if self.judges_final_records and self._retired == 0:
            return Verdict(self.name, UNKNOWN, 0, (f"no task retired in {self._entries} entries, so no final record was read",))
        if self.judges_final_records and self._tasks:
            waiting = next(iter(self._tasks))
            why = f"{len(self._tasks)} tasks never retired (e.g. {waiting}): their final records were never read"
            return Verdict(self.name, UNKNOWN, 0, (why,))
        return Verdict(self.name, OK, 0, ())

    # ---- hooks

    def _new(self) -> object:
        return None

    def _on_event(self, state, event: Event) -> None:
        pass

    def _on_landed(self, landed: Landed) -> None:
        pass

    def _on_retired(self, state, retired: Retired) -> None:
        pass

    # ---- helpers

    def _state(self, task_id: str):
        state = self._tasks.get(task_id, _ABSENT)
        if state is _ABSENT:
            state = self._tasks[task_id] = self._new()
        return state

    def _violation(self, why: str, *lines: str) -> None:
        """Count one violation; the first one's example is `why` and the lines that show it."""
        self.violations += 1
        if self.violations == 1:
            self._example = (why, *lines)[:EXAMPLE_LINES_MAX]


# --------------------------------------------------------------- single_owner


@dataclass(slots=True)
class _Lease:
    state: str
    expires_at: float
    granted_by: Event
    """The claim or renewal that set the expiry."""


class SingleOwner(_Fold):
    """At most one attempt per task holds authority (an unexpired lease in an active state) at any instant.

    An Attempt holds authority from its accepted claim until its lease expires
    (claim or renewal time plus `lease_ttl_s`) or it leaves the leased states
    (`_StateSets.leased`: those the packaged table lets a renewal leave). An accepted claim while any lease of
    the same task still holds authority makes two owners: a violation.
    """

    name = "single_owner"

    def _new(self) -> dict[str, _Lease]:
        return {}

    def _on_event(self, leases: dict[str, _Lease], event: Event) -> None:
        if not _attempt_level(event):
            return
        attempt_id = event.attempt_id
        if event.kind == "claim":
            leased = self.sets.leased
            for holder_id, lease in leases.items():
                if lease.state in leased and event.at < lease.expires_at:
                    whose = "its own earlier lease" if holder_id == attempt_id else f"{holder_id}'s lease"
                    self._violation(
                        f"two owners: {attempt_id} was claimed while {whose} held authority until t={lease.expires_at:.2f}",
                        describe(lease.granted_by),
                        describe(event),
                    )
                    break
            leases[attempt_id] = _Lease(event.to_state, event.at + self.context.lease_ttl_s, event)
            return
        lease = leases.get(attempt_id)
        if lease is None:
            return
        if event.to_state in self.sets.attempt_terminal:
            del leases[attempt_id]
            return
        if event.kind == "renew":
            lease.expires_at = event.at + self.context.lease_ttl_s
            lease.granted_by = event
        lease.state = event.to_state


# -------------------------------------------------------------- fenced_writes


@dataclass(slots=True)
class _Fence:
    generation: int
    expires_at: float
    claim: Event
    renewal: Event | None = None


@dataclass(slots=True)
class _Fences:
    by_attempt: dict[str, _Fence] = field(default_factory=dict)
    highest: Event | None = None
    """The claim that issued the task's highest generation so far."""


class FencedWrites(_Fold):
    """Every accepted material write carried the current generation and token; every stale one was refused and kept as a late event.

    Judged: every accepted Attempt event whose actor is the worker, other
    than the claim that issues the fence (in the packaged table: start, renew,
    grant_tool, record_receipt, report_call_failure, checkpoint, complete,
    report_failure, cancel_acknowledged). By the vocabulary's meaning each
    such write applies a material effect (spec/attempt.toml, `material`), and
    a worker may make a material write only under the fence; so the set is
    the actor's, never a row's `fenced` column, and a table that unfences a
    row (spec/edits.py `unfence`) is judged as strictly as the packaged one.
    Each must present the generation of the lease its Attempt holds (that
    Attempt's latest accepted claim), before that lease expired. One for an
    Attempt never claimed, with another generation or none, or after expiry
    is a violation. Every accepted claim issues a generation above any the
    task issued before (generations are monotonic per task).
    """

    name = "fenced_writes"

    def _new(self) -> _Fences:
        return _Fences()

    def _on_event(self, fences: _Fences, event: Event) -> None:
        if not _attempt_level(event):
            return
        if event.kind == FENCE_ISSUER:
            self._claimed(fences, event)
        elif event.actor == WORKER:
            self._fenced(fences, event)

    def _claimed(self, fences: _Fences, event: Event) -> None:
        if event.generation is None:
            self._violation(f"claim of {event.attempt_id} issued no generation: nothing can be fenced", describe(event))
            return
        highest = fences.highest
        if highest is not None and event.generation <= highest.generation:
            self._violation(
                f"claim of {event.attempt_id} issued generation {event.generation}, not above {highest.generation} already issued",
                describe(highest),
                describe(event),
            )
        else:
            fences.highest = event
        fences.by_attempt[event.attempt_id] = _Fence(event.generation, event.at + self.context.lease_ttl_s, event)

    def _fenced(self, fences: _Fences, event: Event) -> None:
        fence = fences.by_attempt.get(event.attempt_id)
        if fence is None:
            self._violation(f"accepted {event.kind} on {event.attempt_id}, which no claim ever leased", describe(event))
            return
        if event.generation != fence.generation:
            shown = _shown(fence)
            self._violation(
                f"accepted {event.kind} on {event.attempt_id} presented generation {event.generation};"
                f" the lease it holds is generation {fence.generation}",
                *shown,
                describe(event),
            )
        elif event.at >= fence.expires_at:
            shown = _shown(fence)
            self._violation(
                f"accepted {event.kind} on {event.attempt_id} after its lease expired at t={fence.expires_at:.2f}",
                *shown,
                describe(event),
            )
        elif event.kind == "renew":
            fence.expires_at = event.at + self.context.lease_ttl_s
            fence.renewal = event


def _shown(fence: _Fence) -> list[str]:
    """The claim (and latest renewal) that set the fence a write is judged against."""
    return [describe(fence.claim)] + ([describe(fence.renewal)] if fence.renewal is not None else [])


# ------------------------------------------------------- append_only_attempts


@dataclass(slots=True)
class _Appended:
    count: int = 0
    appends: set[str] = field(default_factory=set)
    ended: dict[str, Event] = field(default_factory=dict)
    """The event that made each Attempt terminal."""


class AppendOnlyAttempts(_Fold):
    """Attempt numbers run 1..N without gaps; a terminal attempt never changes; each retry names its reason.

    Per task, appended Attempt numbers run 1, 2, ... N, each appended once.
    An Attempt in a terminal state never changes: any accepted event on it
    after it became terminal (other than `decide`, which only names it) is a
    violation, and its final record must still show the terminal state it
    reached. At retirement the records run 1..N and every Attempt N > 1 names
    Attempt N-1 as its predecessor and has a reason of at least
    `reason_length_min` characters.
    """

    name = "append_only_attempts"

    def _new(self) -> _Appended:
        return _Appended()

    def _on_event(self, state: _Appended, event: Event) -> None:
        if not _attempt_level(event):
            return
        attempt_id = event.attempt_id
        if event.kind == "append":
            number = _number(attempt_id)
            if attempt_id in state.appends:
                self._violation(f"{attempt_id} was appended twice", describe(event))
            elif number != state.count + 1:
                self._violation(f"appended Attempt {number} after Attempt {state.count}: numbers must run 1..N", describe(event))
            state.appends.add(attempt_id)
            state.count = max(state.count, number)
            return
        terminal = self.sets.attempt_terminal
        ended = state.ended.get(attempt_id)
        if ended is not None or event.from_state in terminal:
            shown = [describe(ended)] if ended is not None else []
            self._violation(f"terminal {attempt_id} was changed by {event.kind}", *shown, describe(event))
            state.ended.pop(attempt_id, None)  # one violation per reopening, not one per later step
        if event.to_state in terminal:
            state.ended[attempt_id] = event

    def _on_retired(self, state: _Appended | None, retired: Retired) -> None:
        task_id = retired.task.task_id
        ended = state.ended if state is not None else {}
        for index, attempt in enumerate(retired.attempts, 1):
            if attempt.number != index:
                numbers = ", ".join(str(a.number) for a in retired.attempts)
                self._violation(f"{task_id}'s Attempts are numbered {numbers}, not 1..N", describe(retired))
                return
            reached = ended.get(attempt.attempt_id)
            if reached is not None and attempt.state != reached.to_state:
                self._violation(
                    f"terminal {attempt.attempt_id} ended {reached.to_state}, but its final record says {attempt.state}",
                    describe(reached),
                    describe(retired),
                )
            if index == 1:
                continue
            predecessor = f"{task_id}#{index - 1}"
            if attempt.previous_attempt_id != predecessor:
                self._violation(
                    f"{attempt.attempt_id} names {attempt.previous_attempt_id} as its predecessor, not {predecessor}",
                    describe(retired),
                    _record(attempt),
                )
            if len((attempt.reason or "").strip()) < self.context.reason_length_min:
                self._violation(
                    f"{attempt.attempt_id} was appended with reason {_brief(attempt.reason)},"
                    f" shorter than {self.context.reason_length_min} characters",
                    describe(retired),
                )


# ----------------------------------------------------- suspect_then_reconcile


class SuspectThenReconcile(_Fold):
    """Every attempt whose lease expired passed Suspect then Reconciling before any terminal state.

    An accepted expiry moves the Attempt to suspect (never straight to a
    verdict), and an Attempt that entered suspect passes reconciling after it,
    before it reaches any terminal state. (A final record that is terminal
    with no event to get there is complete_audit's to report.)
    """

    name = "suspect_then_reconcile"

    def _new(self) -> dict[str, Event]:
        return {}

    def _on_event(self, suspects: dict[str, Event], event: Event) -> None:
        if not _attempt_level(event):
            return
        attempt_id = event.attempt_id
        if event.kind == "expire" and event.to_state != "suspect":
            self._violation(f"the lease of {attempt_id} expired and it went to {event.to_state}, not suspect", describe(event))
        if event.to_state == "suspect":
            suspects[attempt_id] = event
        elif event.to_state == "reconciling":
            suspects.pop(attempt_id, None)
        elif attempt_id in suspects and event.to_state in self.sets.attempt_terminal:
            self._violation(
                f"{attempt_id} went from suspect to {event.to_state} without reconciling",
                describe(suspects.pop(attempt_id)),
                describe(event),
            )


# --------------------------------------------------- one_effect_per_operation


class OneEffectPerOperation(_Fold):
    """The provider holds at most one effect per logical operation (one pull request per task and head SHA).

    A logical operation is (dependency, operation, identity); every landed
    effect of one operation must carry the same provider id. A second,
    distinct effect is a duplicate, whatever key it came with, unless the first
    was deleted at the provider by someone outside (a `deletion` fault naming it).
    """

    name = "one_effect_per_operation"

    def _new(self) -> dict[tuple[str, str, str], Landed]:
        return {}

    def fault(self, fault: Fault) -> None:
        """An effect deleted at the provider by someone outside (`deletion`, naming it) is gone: a later one is not its second."""
        super().fault(fault)
        if fault.kind == DELETION:
            deleted = fault.parameter("provider_id")
            for effects in self._tasks.values():
                for operation, landed in list(effects.items()):
                    if landed.provider_id == deleted:
                        del effects[operation]

    def _on_landed(self, landed: Landed) -> None:
        effects = self._state(landed.task_id)
        operation = (landed.dependency, landed.operation, landed.identity)
        first = effects.get(operation)
        if first is None:
            effects[operation] = landed
        elif first.provider_id != landed.provider_id:
            where = f"{landed.operation} {landed.identity} at {landed.dependency}"
            self._violation(f"{where} has two effects: {first.provider_id} and {landed.provider_id}", describe(first), describe(landed))


# -------------------------------------------------------------- no_lost_tasks


class NoLostTasks(_Fold):
    """After the run drains, every task is in a terminal or truthfully blocked/escalated state.

    A task leaves the live set (retires, or is drained when the run ends) in
    a terminal state or a resting one (`_StateSets`, from the packaged task table:
    blocked, escalated, quarantined); in any other state it was lost. And no
    Attempt of it was admitted after the task's deadline had passed: work the
    queue kept past its deadline was a promise it could no longer deliver (the
    chapter's silent queue growth), lost as surely as work never served.
    """

    name = "no_lost_tasks"
    judges_final_records = True

    def _new(self) -> list[Event]:
        return []

    def _on_event(self, admissions: list[Event], event: Event) -> None:
        if event.kind == "admit" and event.to_state == "admitted":
            admissions.append(event)

    def _on_retired(self, admissions: list[Event] | None, retired: Retired) -> None:
        task = retired.task
        deadline = task.deadline_at
        for admission in admissions or ():
            if deadline is not None and admission.at > deadline:
                late_s = admission.at - deadline
                self._violation(
                    f"{task.task_id} was admitted at t={admission.at:.2f}, {late_s:.2f}s after its deadline t={deadline:.2f} passed",
                    describe(admission),
                    describe(retired),
                )
                break
        sets = self.sets
        if task.state in sets.task_terminal or task.state in sets.task_resting:
            return
        how = "was drained" if retired.drained else "retired"
        lines = [f"{task.task_id} was lost: it {how} {task.state}, neither terminal nor resting", describe(retired)]
        if retired.attempts:
            latest = retired.attempts[-1]
            if latest.claimed_at is None:
                lines.append(
                    f"  its latest Attempt {latest.attempt_id} is {latest.state}, never claimed:"
                    f" it waited {retired.at - latest.created_at:.2f}s, from t={latest.created_at:.2f}"
                )
            else:
                lines.append(
                    f"  its latest Attempt {latest.attempt_id} is {latest.state}: appended at t={latest.created_at:.2f},"
                    f" claimed after {latest.claimed_at - latest.created_at:.2f}s"
                )
        else:
            lines.append(f"  it has no Attempt: nothing was dispatched in {retired.at - task.created_at:.2f}s")
        self._violation(*lines)


# --------------------------------------------------------------- budgets_hold


def _over(used: float, limit: float) -> bool:
    return used > limit + _TOLERANCE


class BudgetsHold(_Fold):
    """No attempt started, and no spend was authorized, past any budget dimension.

    At retirement: the task has at most `attempts_max` Attempts, its cost and
    tokens are within `cost_max_usd` and `tokens_max`, every Attempt's cost is
    within the per-Attempt spend ceiling (`attempt_spend_max_usd`), and no
    Attempt N > 1 was appended once the Attempts before it had used up
    `elapsed_max_s` (their elapsed times summed, as the loop decision sums
    them). A cost within 1e-9 of its cap counts as within it.
    """

    name = "budgets_hold"
    judges_final_records = True

    def _on_retired(self, _state: None, retired: Retired) -> None:
        for breach in self._breaches(retired.task, retired.attempts):
            self._violation(f"{retired.task.task_id}: {breach}", describe(retired), *map(_record, retired.attempts))

    def _breaches(self, task: Task, attempts: tuple[Attempt, ...]) -> list[str]:
        budget = task.budget
        breaches = []
        if len(attempts) > budget.attempts_max:
            breaches.append(f"{len(attempts)} Attempts, budget {budget.attempts_max}")
        if _over(task.cost_usd, budget.cost_max_usd):
            breaches.append(f"cost ${task.cost_usd:.2f}, budget ${budget.cost_max_usd:.2f}")
        if task.tokens > budget.tokens_max:
            breaches.append(f"{task.tokens} tokens, budget {budget.tokens_max}")
        ceiling = self.context.attempt_spend_max_usd
        breaches.extend(
            f"{a.attempt_id} spent ${a.cost_usd:.2f}, per-Attempt ceiling ${ceiling:.2f}" for a in attempts if _over(a.cost_usd, ceiling)
        )
        elapsed_s = 0.0
        for attempt in attempts:
            # The same sum, in the same order, the loop decision stops on (so no tolerance: equal is used up).
            if attempt.number > 1 and elapsed_s >= budget.elapsed_max_s:
                breaches.append(f"{attempt.attempt_id} was appended after {elapsed_s:g}s of an elapsed budget of {budget.elapsed_max_s:g}s")
            elapsed_s += attempt.elapsed_s
        return breaches


# ------------------------------------------------------------ cancel_is_final


@dataclass(slots=True)
class _Cancellation:
    requested: dict[str, Event] = field(default_factory=dict)
    """The first accepted cancellation request of each Attempt."""
    cancelled: Event | None = None
    """The task-level cancel that made the task cancelled."""
    reconciled: set[str] = field(default_factory=set)


class CancelIsFinal(_Fold):
    """After cancellation: no new claim or tool grant; late events reopen nothing; reconciliation ran.

    After an accepted Attempt-level cancel: no accepted claim, start or
    grant_tool for that Attempt, and it never again enters a working state
    (queued, admitted, claimed, running, verifying). After the task is
    cancelled: no accepted append, claim or grant_tool for any of its
    Attempts, and the task never leaves cancelled. An Attempt that ends
    cancelled passed reconciling first.
    """

    name = "cancel_is_final"

    def _new(self) -> _Cancellation:
        return _Cancellation()

    def _on_event(self, state: _Cancellation, event: Event) -> None:
        if _attempt_level(event):
            self._attempt_event(state, event)
        elif event.from_state == "cancelled" and event.to_state != "cancelled":
            shown = [describe(state.cancelled)] if state.cancelled is not None else []
            self._violation(f"cancelled {event.task_id} was reopened by {event.kind}", *shown, describe(event))
        elif event.kind == "cancel" and event.to_state == "cancelled":
            state.cancelled = event

    def _attempt_event(self, state: _Cancellation, event: Event) -> None:
        attempt_id = event.attempt_id
        requested = state.requested.get(attempt_id)
        if state.cancelled is not None and event.kind in ("append", "claim", "grant_tool"):
            self._violation(
                f"{event.kind} accepted for {attempt_id} after {event.task_id} was cancelled", describe(state.cancelled), describe(event)
            )
        elif requested is not None and event.kind in ("claim", "start", "grant_tool"):
            self._violation(f"{event.kind} accepted for {attempt_id} after its cancellation", describe(requested), describe(event))
        elif requested is not None and event.to_state in _REOPENED:
            why = f"{event.kind} left {attempt_id} {event.to_state} after its cancellation: it kept working"
            self._violation(why, describe(requested), describe(event))
        if event.kind == "cancel" and requested is None:
            state.requested[attempt_id] = event
        if event.to_state == "reconciling":
            state.reconciled.add(attempt_id)
        elif event.to_state == "cancelled" and attempt_id not in state.reconciled:
            shown = [describe(requested)] if requested is not None else []
            self._violation(f"{attempt_id} ended cancelled without reconciling", *shown, describe(event))


# ----------------------------------------------------------- classified_retry
#
# Why an oracle of its own. The retry policy (`core.policy`) decides whether the
# core may append Attempt N+1; this checker exists to say when that decision was
# wrong, so it shares none of the policy's code or constants. It reads the
# failure-domain table itself (its own copy, `_permissions`) and turns each clause
# of the invariant's statement into one rule. Where the policy answers "may the
# next Attempt start?" over a list, this walks a retired task's Attempts forward
# once, counting retries per domain and the current run of signatures: two
# programs of one rule, so a mistake in one shows up as a disagreement.

_CONTINUES = {
    "back_off_and_retry": True,
    "new_attempt_changed_hypothesis": True,
    "reconcile": True,
    "stop": False,
    "escalate": False,
    "quarantine": False,
}
"""Whether a response lets the loop go on to a new Attempt: "stops or escalates" (quarantine escalates a poison item) ends it."""
if set(_CONTINUES) != set(RESPONSES):
    raise RuntimeError(
        f"classified_retry knows the responses {sorted(_CONTINUES)} but the spec defines {sorted(RESPONSES)}:"
        " say in checkers/rules.py `_CONTINUES` whether each new response permits an automatic retry"
    )

_FAILURE_ENDINGS = frozenset({"failed", "quarantined"})
"""Attempt states whose failure signature a later failure can repeat (a quarantined Attempt is a dead-lettered failure)."""


@dataclass(frozen=True, slots=True)
class _Permission:
    """What one row of the failure-domain table permits after a failure of its domain."""

    domain: str
    response: str
    retries_max: int
    """Automatic Attempts the domain may start after its failures, over the whole task (the table's own definition)."""
    changed_hypothesis_required: bool


@functools.cache
def _permissions() -> dict[str, _Permission]:
    """The packaged failure-domain table, one `_Permission` per domain, read on first use."""
    return {
        name: _Permission(name, row.response, row.retries_max, row.changed_hypothesis_required) for name, row in _packaged().domains.items()
    }


def _words(hypothesis: str) -> list[str]:
    """A hypothesis as its words: re-spacing one does not change it."""
    return hypothesis.split()


@dataclass(slots=True)
class _RetryWalk:
    """One retired task's Attempts read in order: retries so far per domain, and the run of identical failure signatures."""

    repeats_max: int
    retries: dict[str, int] = field(default_factory=dict)
    signature: str | None = None
    run: int = 0
    """Failures in a row with `signature` (zero when the latest failure has none)."""

    def ended(self, attempt: Attempt) -> None:
        """Fold in how an Attempt ended; only failures carry a signature to repeat."""
        if attempt.state not in _FAILURE_ENDINGS:
            return
        if attempt.failure_signature is not None and attempt.failure_signature == self.signature:
            self.run += 1
        else:
            self.signature = attempt.failure_signature
            self.run = 0 if attempt.failure_signature is None else 1

    def forbids(self, previous: Attempt, new: Attempt) -> str | None:
        """Why the statement forbids `new` following `previous`, or None; counts the retry against its domain."""
        if previous.state != "failed":
            return f"{previous.attempt_id} ended {previous.state}, not failed"
        permission = _permissions().get(previous.failure_domain or "")
        if permission is None:
            return f"the failure of {previous.attempt_id} is not classified ({previous.failure_domain})"
        if not _CONTINUES[permission.response]:
            return f"{permission.domain} failures respond {permission.response}, not retry"
        retries = self.retries[permission.domain] = self.retries.get(permission.domain, 0) + 1
        if retries > permission.retries_max:
            return f"{permission.domain} allows {permission.retries_max} automatic retries and this is retry {retries}"
        if permission.response == "back_off_and_retry" and not new.backoff_s > 0:
            return f"{permission.domain} failures are retried only after a backoff, and it waited {new.backoff_s:g}s"
        if permission.changed_hypothesis_required and _words(new.hypothesis) == _words(previous.hypothesis):
            return f"{permission.domain} failures need a changed hypothesis and it repeats {_brief(previous.hypothesis)}"
        if self.run > self.repeats_max:
            return f"failure signature {_brief(self.signature)} repeats past {self.repeats_max}: it must stop or escalate"
        return None


class ClassifiedRetry(_Fold):
    """Every automatic retry followed a classification that permits it; no retry of authorization or deterministic
    validation failures without a changed hypothesis; a repeated failure signature stops or escalates.

    Judged at retirement, for each Attempt N+1 in order, from the
    failure-domain table and the task's own records, never from the retry
    policy: Attempt N ended failed, its failure domain is a row of the table,
    and that row's response goes on (not stop, escalate or quarantine); at
    most `retries_max` Attempts have followed failures of that domain, this
    one included; after a back_off_and_retry failure, Attempt N+1 waited
    (`backoff_s > 0`); where the row requires a changed hypothesis, Attempt
    N+1's hypothesis has other words than Attempt N's (re-spacing changes
    nothing); and no Attempt follows a run of identical failure signatures
    longer than the budget's `repeated_signatures_max`.
    """

    name = "classified_retry"
    judges_final_records = True

    def _on_retired(self, _state: None, retired: Retired) -> None:
        walk = _RetryWalk(retired.task.budget.repeated_signatures_max)
        for previous, new in zip(retired.attempts, retired.attempts[1:], strict=False):
            walk.ended(previous)
            refusal = walk.forbids(previous, new)
            if refusal is not None:
                self._violation(f"{new.attempt_id} was appended although {refusal}", describe(retired), _record(previous), _record(new))


# ------------------------------------------------------------- complete_audit


@dataclass(slots=True)
class _Audit:
    task_event: Event | None = None
    """The latest accepted event that set the task's state."""
    latest: dict[str, Event] = field(default_factory=dict)
    """The latest accepted event of each Attempt (its to_state is the Attempt's state)."""
    appended: set[str] = field(default_factory=set)
    granted: set[str] = field(default_factory=set)
    """Operation keys minted by accepted grants."""
    landed: dict[str, Landed] = field(default_factory=dict)
    """The first effect that landed under each key, through the gateway with a minted key."""


class CompleteAudit(_Fold):
    """Every provider effect has a recorded intent; every state change has its event.

    Every landed effect came through the tool gateway, under a key an
    accepted grant_tool of its task minted, for a task still live (one that
    retired or never existed has nothing on record to explain it), and the
    key is among the task's intents when it retires. At retirement every
    Attempt record has its append event, every appended Attempt has a record,
    each Attempt's final state is the to_state of its last accepted event,
    and the task's final state is the to_state of its last accepted
    task-level event.
    """

    name = "complete_audit"
    judges_final_records = True

    def _new(self) -> _Audit:
        return _Audit()

    def _on_event(self, audit: _Audit, event: Event) -> None:
        if not _attempt_level(event):
            audit.task_event = event
            return
        audit.latest[event.attempt_id] = event
        if event.kind == "append":
            audit.appended.add(event.attempt_id)
        elif event.kind == "grant_tool":
            audit.granted.add(event.operation_key)

    def _on_landed(self, landed: Landed) -> None:
        audit = self._tasks.get(landed.task_id)
        if audit is None:
            self._violation(f"an effect landed for {landed.task_id}, which has no live record (retired or never created)", describe(landed))
        elif not landed.via_gateway:
            self._violation(f"an effect for {landed.task_id} bypassed the tool gateway: no intent was recorded", describe(landed))
        elif landed.key not in audit.granted:
            self._violation(
                f"an effect for {landed.task_id} landed under key {landed.key}, which no accepted grant minted", describe(landed)
            )
        else:
            audit.landed.setdefault(landed.key, landed)

    def _on_retired(self, audit: _Audit | None, retired: Retired) -> None:
        task = retired.task
        if audit is None or audit.task_event is None:
            self._violation(f"{task.task_id} retired {task.state}, but no task event of it is on record", describe(retired))
            return
        intents = {intent.key for intent in retired.intents}
        for key, landed in audit.landed.items():
            if key not in intents:
                self._violation(f"an effect landed under {key}, and {task.task_id} retired with no intent for it", describe(landed))
        recorded = set()
        for attempt in retired.attempts:
            recorded.add(attempt.attempt_id)
            latest = audit.latest.get(attempt.attempt_id)
            if attempt.attempt_id not in audit.appended:
                self._violation(f"{attempt.attempt_id} is on record but was never appended by an event", describe(retired))
            elif attempt.state != latest.to_state:
                self._violation(
                    f"{attempt.attempt_id} retired {attempt.state}, but its last accepted event left it {latest.to_state}",
                    describe(latest),
                    describe(retired),
                )
        for attempt_id in sorted(audit.appended - recorded):
            self._violation(f"{attempt_id} was appended, but {task.task_id} retired without its record", describe(retired))
        if task.state != audit.task_event.to_state:
            self._violation(
                f"{task.task_id} retired {task.state}, but its last accepted task event left it {audit.task_event.to_state}",
                describe(audit.task_event),
                describe(retired),
            )


# ------------------------------------------------------------------ catalogue

# --------------------------------------------------------------- truthful_states


@dataclass(slots=True)
class _Latest:
    """A task's latest Attempt as its accepted events left it, and the Attempts a cancellation was asked of."""

    attempt_id: str | None = None
    number: int = 0
    state: str | None = None
    cancel_asked: set[str] = field(default_factory=set)
    reconciled: set[str] = field(default_factory=set)
    """Attempts that entered Reconciling: they end with reconciliation's findings recorded."""
    judged: set[str] = field(default_factory=set)
    """Attempts that left Verifying for an ending: they end with the provider's evidence recorded."""
    promised: dict[str, float] = field(default_factory=dict)
    """Each leased Attempt's expiry as its claim and accepted renewals promised it (claim or renewal time plus the TTL)."""
    entered: dict[str, set[str]] = field(default_factory=dict)
    """The states each Attempt entered that its final record must bear out (running: a start; verifying: a result)."""
    granted: dict[str, str] = field(default_factory=dict)
    """At a keyless dependency (`CheckContext.keyless`): each operation key's latest grant, by the Attempt it was granted to."""
    settled: dict[str, Event] = field(default_factory=dict)
    """Keys whose Attempt reconciliation concluded since their latest grant, with the concluding event: nothing may land."""
    began: dict[str, float] = field(default_factory=dict)
    """When each leased Attempt's run began: its start, else its claim (what an elapsed time is counted from)."""
    ran: dict[str, float] = field(default_factory=dict)
    """How long each Attempt's run lasted, from its beginning to the move that took it out of a holder's states."""
    releases: int = 0
    """The operator's accepted releases of the task: each is an interruption its record counts."""
    released: bool = False
    """Whether an operator released the task: a release may replace its budget, so the final record's budget is not the
    one an earlier Attempt was judged poison under."""


class TruthfulStates(_Fold):
    """Every state a record enters means what the chapter says it means, whoever moved it there.

    A state's meaning is the vocabulary's, not a row's (`[states.*]` in the
    packaged spec; a table may not add, drop or redefine one), so this rule
    judges who moved a record into a state and what the record carries there,
    never which row did it:

    - an Attempt is `admitted` only by the orchestrator's admission, from `queued`,
      on `admit` (a deferral or a shedding admits nothing);
    - it is `running` or `verifying` only by its worker (the lease holder starts
      it, and reports the result that verification then checks);
    - it is `claimed` only by a worker, from `admitted` (a claim takes an
      Attempt no one held), and `running` only from `claimed`, with its start
      recorded; a run starts once (no start is accepted in place); it never
      goes back to `queued`;
    - it is `verifying` only with the result its holder reported recorded;
    - it is `suspect` only by the reaper, from a holder's state, once the lease
      its claim and accepted renewals promised has run out, and never once a
      cancellation was asked of it (a cancellation has its own time-out);
    - it is `cancelling` only by an operator, and leaves Cancelling for
      Reconciling only on its holder's acknowledgement or its time-out (each
      recorded in its event's words), or at once when nobody holds it; a
      holder's acknowledgement, completion or failure report is never refused
      in the state its run is in while the lease it was promised lasts (only the
      fence may refuse it);
    - it is `reconciling` only from a holder's state or `suspect` (an Attempt
      whose run may have acted unseen), and it leaves Reconciling only for an
      ending; an Attempt whose run may have acted ends only through
      Reconciling or Verifying, never straight from a holder's state;
    - a lease confers authority only in a holder's state: an Attempt leaves
      those states with its lease ended (its expiry not after the move) and
      its run's time stamped (its elapsed time at least the run's length), and a
      worker's write that leaves it there finds its lease current;
    - at a dependency that ignores operation keys (`CheckContext.keyless`),
      reconciliation's findings are final: no call of the reconciled Attempt
      lands after them (until its key is granted again);
    - it `succeeded` only on the provider's passing verdict (`verified`, the
      vocabulary's one trigger that means it), from `verifying`; and its final
      record carries that evidence;
    - it is `cancelled` only after a cancellation was asked of it;
    - its final record, when `failed`, `quarantined` or `blocked`, carries a
      classified failure domain; quarantined, a failure signature that repeats
      the Attempts before it beyond the task's budget (poison); blocked, the
      contradictory evidence and its domain;
    - an Attempt that passed Reconciling ends with its findings recorded, and
      one the provider's verdict ended, with the evidence;
    - a Task is in `review` only when its latest Attempt succeeded, `blocked` or
      `quarantined` only when its latest Attempt is, `done` only by an
      operator's approval (`approve`) from `review`, `cancelled` only on an
      operator's `cancel`, `in_progress` only on a `dispatch` or `retry` (an
      Attempt sent to work), `ready` only by an operator, accepted only from its
      inbox and released only from rest (each release counted as an
      interruption on its record), and never moved back to `inbox`; in
      review or done it carries the loop's decision `verify`, at rest `stop` or
      `escalate`, with a reason.
    """

    name = "truthful_states"
    judges_final_records = True

    _MOVED_BY: ClassVar[dict[str, str]] = {
        "admitted": "orchestrator",
        "claimed": WORKER,
        "running": WORKER,
        "verifying": WORKER,
        "suspect": "reaper",
        "cancelling": "operator",
        "succeeded": "provider",
    }
    _MOVED_FROM: ClassVar[dict[str, frozenset[str]]] = {
        "admitted": frozenset({"queued"}),
        "claimed": frozenset({"admitted"}),
        "running": frozenset({"claimed"}),
        "suspect": frozenset({"claimed", "running"}),
        "reconciling": frozenset({"claimed", "running", "cancelling", "suspect"}),
        "succeeded": frozenset({"verifying"}),
    }
    """Where a state is entered from. Reconciling: a holder's states (the packaged table's leased ones) and suspect."""
    _MOVED_ON: ClassVar[dict[str, str]] = {"admitted": "admit", "succeeded": VERIFIED}
    """The one trigger that means a state: admission admits (a deferral or a shedding does not), the provider's passing
    verdict succeeds."""
    _ANSWERS_CANCEL = frozenset({"cancel_acknowledged", "cancel_timed_out", "cancel_unclaimed"})
    """The cancellation protocol's ways out of Cancelling: the holder's acknowledgement, its time-out, nobody to signal."""
    _FINDINGS = frozenset({"effects_landed", "effects_absent"})
    """Reconciliation's conclusions that every call of the Attempt settled (landed, or past its deadline unanswered):
    after one, where keys are ignored, none of its calls may land. Contradictory evidence concludes at once, with calls
    perhaps in flight, and claims nothing of them."""
    _ACKNOWLEDGED = frozenset({"cancel_acknowledged", "cancel_timed_out"})
    """The answers to a signalled holder's cancellation: each is recorded in its event's words (the acknowledgement, or
    that none came in time)."""
    _ENDS_RUN: ClassVar[dict[str, frozenset[str]]] = {
        "complete": frozenset({"running"}),
        "report_failure": frozenset({"claimed", "running"}),
        "cancel_acknowledged": frozenset({"cancelling"}),
    }
    """A holder's calls that end its run, and the states in which the run they end is its own: within its lease, a
    holder is never refused one there (the fence refuses only a stale or forged caller)."""
    _MAY_HAVE_ACTED = frozenset({"claimed", "running"})
    """A holder's working states: an Attempt in one may have acted unseen, so it ends only through Reconciling (or
    Verifying, on a result). From suspect and cancelling the same is suspect_then_reconcile's and cancel_is_final's."""
    _BORNE_OUT = frozenset({"running", "verifying"})
    _TASK_MOVED_BY: ClassVar[dict[str, str]] = {"ready": "operator", "cancelled": "operator", "done": "operator"}
    _TASK_ENTERED_ON: ClassVar[dict[str, frozenset[str]]] = {
        "done": frozenset({"approve"}),
        "cancelled": frozenset({"cancel"}),
        "in_progress": frozenset({"dispatch", "retry"}),
    }
    """The triggers that mean a task state: done on the operator's approval, cancelled on a cancellation, in progress
    on an Attempt sent to work (the first dispatch or a retry), never on a verb that appends none."""
    _TASK_LATEST: ClassVar[dict[str, str]] = {"review": "succeeded", "blocked": "blocked", "quarantined": "quarantined"}
    _CLASSIFIED = frozenset({"failed", "quarantined", "blocked"})
    _DECIDED: ClassVar[dict[str, frozenset[str]]] = {
        "review": frozenset({"verify"}),
        "done": frozenset({"verify"}),
        "escalated": frozenset({"stop", "escalate"}),
        "blocked": frozenset({"stop", "escalate"}),
        "quarantined": frozenset({"stop", "escalate"}),
    }
    """The loop's decision a task at rest, in review or done carries: the one that put it there, with its reason."""

    def _new(self) -> _Latest:
        return _Latest()

    def _on_event(self, latest: _Latest, event: Event) -> None:
        kind, to_state = event.kind, event.to_state
        attempt_id = event.attempt_id
        if attempt_id is not None and kind != "decide":  # an Attempt's event (`_attempt_level`), on the simulator's hot path
            if attempt_id != latest.attempt_id and _number(attempt_id) > latest.number:
                latest.attempt_id, latest.number = attempt_id, _number(attempt_id)
            if attempt_id == latest.attempt_id:
                latest.state = to_state
            if kind == "cancel":
                latest.cancel_asked.add(attempt_id)
            from_state = event.from_state
            if from_state == to_state or kind == "append":
                if kind == "start":
                    self._violation(f"{attempt_id} was started again while {from_state}: a run starts once", describe(event))
                elif kind == "grant_tool" and self.context.keyless and event.operation_key is not None:
                    latest.granted[event.operation_key] = attempt_id
                    latest.settled.pop(event.operation_key, None)
                if kind == "renew":
                    latest.promised[attempt_id] = event.at + self.context.lease_ttl_s
                # most events write in place: nothing entered a state; a worker's write that leaves its Attempt in a
                # holder's state must find the lease current (a report that ended the run, left running, does not)
                expires_at = event.expires_at
                if event.actor == WORKER and expires_at is not None and expires_at <= event.at and to_state in self.sets.leased:
                    self._violation(
                        f"{attempt_id} stayed {to_state} on the worker's {kind} with its lease ended at t={expires_at:.2f}",
                        describe(event),
                    )
                return
            self._entered(latest, event, attempt_id, kind, from_state, to_state)
            return
        if event.attempt_id is not None or kind == "create":
            return  # `decide` names an Attempt and moves nothing; `create` puts a task in its inbox
        if kind == "release":  # an operator's verbs act on the state they name, whether or not the task then moves
            latest.released = True
            latest.releases += 1
            if event.from_state not in self.sets.task_resting:
                self._violation(f"{event.task_id} was released from {event.from_state}: only a task at rest is", describe(event))
        elif kind == "accept" and event.from_state != "inbox":
            self._violation(f"{event.task_id} was accepted again, from {event.from_state}: only a task in its inbox is", describe(event))
        if event.from_state == to_state:
            return
        if to_state == "inbox":
            self._violation(f"{event.task_id} went back to its inbox from {event.from_state}", describe(event))
        wanted = self._TASK_MOVED_BY.get(to_state)
        if wanted is not None and event.actor != wanted:
            self._violation(f"{event.task_id} entered {to_state} by the {event.actor}, not an {wanted}", describe(event))
        if to_state == "done" and event.from_state != "review":
            self._violation(f"{event.task_id} was done from {event.from_state}, never reviewed", describe(event))
        triggers = self._TASK_ENTERED_ON.get(to_state)
        if triggers is not None and kind not in triggers:
            self._violation(f"{event.task_id} entered {to_state} on {kind}, not on {' or '.join(sorted(triggers))}", describe(event))
        needed = self._TASK_LATEST.get(to_state)
        if needed is not None and latest.state != needed:
            self._violation(f"{event.task_id} entered {to_state} while its latest Attempt is {latest.state}, not {needed}", describe(event))

    def event(self, event: Event) -> None:
        """`_Fold.event`, and a refused call that would end a holder's run judged too (the simulator's hot path: inline)."""
        self._entries += 1
        if event.accepted:
            self._on_event(self._state(event.task_id), event)
        elif event.kind in self._ENDS_RUN:
            self._refused_holder(event)

    def _refused_holder(self, event: Event) -> None:
        """A holder's call that ends its run, refused: only the fence may refuse it while the lease it was promised lasts."""
        latest = self._tasks.get(event.task_id)
        attempt_id = event.attempt_id
        if not isinstance(latest, _Latest) or attempt_id != latest.attempt_id or event.code in FENCE_REFUSALS:
            return
        promised = latest.promised.get(attempt_id)
        if latest.state in self._ENDS_RUN[event.kind] and promised is not None and event.at < promised - _TOLERANCE:
            self._violation(
                f"{attempt_id}'s holder was refused its {event.kind} while {latest.state}, within the lease it was promised"
                f" until t={promised:.2f}",
                describe(event),
            )

    def _entered(self, latest: _Latest, event: Event, attempt_id: str, kind: str, from_state: str | None, to_state: str) -> None:
        """An Attempt moved from one state into another: who moved it, from where, with what authority left."""
        sets = self.sets
        terminal = sets.attempt_terminal
        if from_state in terminal:
            return  # an ended Attempt rewritten is append_only_attempts' to judge
        if to_state == "reconciling":
            latest.reconciled.add(attempt_id)
        elif from_state == "reconciling" and kind in self._FINDINGS and latest.granted:
            latest.settled.update((key, event) for key, owner in latest.granted.items() if owner == attempt_id)
        if from_state == "verifying" and to_state in terminal:
            latest.judged.add(attempt_id)
        if to_state in self._BORNE_OUT:
            latest.entered.setdefault(attempt_id, set()).add(to_state)
        leased = sets.leased
        if from_state in leased and to_state not in leased:
            began = latest.began.get(attempt_id)
            if began is not None:
                latest.ran[attempt_id] = event.at - began
            if from_state == "cancelling" and kind in self._ACKNOWLEDGED and not event.detail:
                self._violation(f"{attempt_id}'s cancellation was answered ({kind}) with no words recorded for it", describe(event))
        if to_state == "running" or to_state == "claimed":  # a run is timed from its start, else its claim
            latest.began[attempt_id] = event.at
        if to_state == "claimed":
            latest.promised[attempt_id] = event.at + self.context.lease_ttl_s
        elif to_state == "suspect":
            promised = latest.promised.get(attempt_id)
            if promised is not None and event.at < promised:
                self._violation(
                    f"{attempt_id} became suspect at t={event.at:.2f}, but its claim and renewals gave it a lease until t={promised:.2f}",
                    describe(event),
                )
        wanted = self._MOVED_BY.get(to_state)
        if wanted is not None and event.actor != wanted:
            self._violation(f"{attempt_id} entered {to_state} by the {event.actor}, not the {wanted}", describe(event))
        meant = self._MOVED_ON.get(to_state)
        if meant is not None and kind != meant:
            self._violation(f"{attempt_id} entered {to_state} on {kind}, not on {meant}, the trigger that means it", describe(event))
        if from_state == "cancelling" and to_state == "reconciling" and kind not in self._ANSWERS_CANCEL:
            self._violation(
                f"{attempt_id} left Cancelling on {kind}: only its acknowledgement or time-out answers a cancellation"
                " (or, with nobody holding it, the cancellation itself)",
                describe(event),
            )
        sources = self._MOVED_FROM.get(to_state)
        if sources is not None and from_state not in sources:
            self._violation(f"{attempt_id} entered {to_state} from {from_state}, not from {' or '.join(sorted(sources))}", describe(event))
        if to_state == "queued":
            self._violation(f"{attempt_id} went back to queued from {from_state}", describe(event))
        if from_state == "reconciling" and to_state not in terminal:
            self._violation(f"{attempt_id} left Reconciling for {to_state}, not for an ending", describe(event))
        if from_state in self._MAY_HAVE_ACTED and to_state in terminal and event.actor != "reaper":  # an expiry: suspect_then_reconcile's
            self._violation(
                f"{attempt_id} ended {to_state} straight from {from_state}: its run may have acted, and nothing reconciled it",
                describe(event),
            )
        if to_state == "suspect" and attempt_id in latest.cancel_asked:
            self._violation(f"{attempt_id} became suspect after a cancellation was asked of it", describe(event))
        expires_at = event.expires_at
        if from_state in sets.leased and to_state not in sets.leased and expires_at is not None and expires_at > event.at:
            self._violation(
                f"{attempt_id} left {from_state} for {to_state} with its lease still current until t={expires_at:.2f}",
                describe(event),
            )
        if to_state == "cancelled" and attempt_id not in latest.cancel_asked:
            self._violation(f"{attempt_id} was cancelled, but no cancellation was asked of it", describe(event))
        if from_state in leased and to_state not in leased and attempt_id in latest.promised:
            # the run is over, and the lease it was promised with it (a later cancellation renews nothing)
            latest.promised[attempt_id] = min(latest.promised[attempt_id], event.at)

    def _on_landed(self, landed: Landed) -> None:
        latest = self._tasks.get(landed.task_id)
        if not isinstance(latest, _Latest) or landed.dependency not in self.context.keyless:
            return
        concluded = latest.settled.get(landed.key)
        if concluded is not None:
            self._violation(
                f"an effect landed under {landed.key} after {concluded.attempt_id}'s reconciliation concluded that its calls"
                f" had settled ({concluded.kind}); {landed.dependency} ignores keys, so its findings were final",
                describe(concluded),
                describe(landed),
            )

    def _on_retired(self, latest: _Latest | None, retired: Retired) -> None:
        attempts = retired.attempts
        for index, attempt in enumerate(attempts):
            state = attempt.state
            if latest is not None:
                self._borne_out(latest, attempt, retired)
            if state in self._CLASSIFIED and attempt.failure_domain is None:
                self._violation(
                    f"{attempt.attempt_id} ended {state} with no classified failure domain", _record(attempt), describe(retired)
                )
            elif state == "quarantined" and not _poison(attempts[:index], attempt, _repeats_max(latest, retired)):
                self._violation(
                    f"{attempt.attempt_id} was quarantined, but its failure signature {_brief(attempt.failure_signature)} does not"
                    f" repeat the Attempts before it beyond the task's budget ({_repeats_max(latest, retired)})",
                    _record(attempt),
                    describe(retired),
                )
            elif state == "blocked" and (attempt.failure_domain != CONTRADICTORY or not attempt.evidence):
                self._violation(
                    f"{attempt.attempt_id} ended blocked without contradictory evidence recorded", _record(attempt), describe(retired)
                )
            elif state == "succeeded" and not attempt.evidence:
                self._violation(f"{attempt.attempt_id} succeeded with no evidence recorded", _record(attempt), describe(retired))
            elif latest is not None and state in self.sets.attempt_terminal:
                if attempt.attempt_id in latest.reconciled and attempt.reconciliation is None:
                    self._violation(
                        f"{attempt.attempt_id} ended {state} after reconciling, with no findings recorded",
                        _record(attempt),
                        describe(retired),
                    )
                elif attempt.attempt_id in latest.judged and not attempt.evidence:
                    self._violation(
                        f"{attempt.attempt_id} ended {state} on the provider's verdict, with no evidence recorded",
                        _record(attempt),
                        describe(retired),
                    )
        task = retired.task
        if latest is not None and task.interruptions != latest.releases:
            self._violation(
                f"{task.task_id} was released {latest.releases} times, but its record counts {task.interruptions} interruptions",
                describe(retired),
            )
        wanted = self._DECIDED.get(task.state)
        if wanted is not None and (task.decision not in wanted or not task.decision_reason):
            self._violation(
                f"{task.task_id} is {task.state} but its recorded decision is {task.decision!r} ({_brief(task.decision_reason)}),"
                f" not one of {', '.join(sorted(wanted))} with its reason",
                describe(retired),
            )

    def _borne_out(self, latest: _Latest, attempt: Attempt, retired: Retired) -> None:
        ran = latest.ran.get(attempt.attempt_id)
        if ran is not None and attempt.elapsed_s < ran - 1e-6:
            self._violation(
                f"{attempt.attempt_id}'s run lasted {ran:g} s until it left its holder's states, but its record says it ran"
                f" {attempt.elapsed_s:g} s",
                _record(attempt),
                describe(retired),
            )
        entered = latest.entered.get(attempt.attempt_id)
        if not entered:
            return
        if "running" in entered and attempt.started_at is None:
            self._violation(f"{attempt.attempt_id} was running, but no start is recorded", _record(attempt), describe(retired))
        if "verifying" in entered and attempt.result is None:
            self._violation(
                f"{attempt.attempt_id} was verifying, but no result of its holder's is recorded", _record(attempt), describe(retired)
            )


def _repeats_max(latest: _Latest | None, retired: Retired) -> int:
    """The run of identical failure signatures a quarantine must exceed: the task's budget, unless an operator's release
    may have replaced it since (then only that the signature repeats nothing is judged: a run of one)."""
    if latest is not None and latest.released:
        return 0
    return retired.task.budget.repeated_signatures_max


def _poison(earlier: list[Attempt] | tuple[Attempt, ...], attempt: Attempt, repeats_max: int) -> bool:
    """Whether `attempt`'s failure signature ends a run of identical ones (over the failed and quarantined Attempts before
    it) longer than the budget's `repeated_signatures_max`: the chapter's poison, counted from the records."""
    signature = attempt.failure_signature
    if not signature:
        return False
    run = 1
    for before in reversed(earlier):
        if before.state not in ("failed", "quarantined"):
            continue
        if before.failure_signature != signature:
            break
        run += 1
    return run > repeats_max


_CHECKERS: tuple[type[_Fold], ...] = (
    SingleOwner,
    FencedWrites,
    AppendOnlyAttempts,
    SuspectThenReconcile,
    OneEffectPerOperation,
    NoLostTasks,
    BudgetsHold,
    CancelIsFinal,
    ClassifiedRetry,
    CompleteAudit,
    TruthfulStates,
)

INVARIANTS: tuple[str, ...] = tuple(checker.name for checker in _CHECKERS)
"""The invariant names, in the catalogue's order (spec/invariants.toml)."""


def all_checkers(context: CheckContext) -> list[Checker]:
    """Fresh instances of the eleven checkers, in the catalogue's order."""
    return [checker(context) for checker in _CHECKERS]
