"""The vocabulary's one implementation: one evaluator per guard and one writer per effect the tables may name.

A contract reads its records and gathers its inputs (the claimer's workspace,
the worker's result, the admission controller's decision, the gateway's
chosen dependency); then it asks `Context.fire`, the one firing path. That
path checks the fence when the row is fenced, asks the guards the row names
(each evaluated here, lazily, once per call), and applies the row's effects
here, in the row's order, inside the row's transaction. So what a row
requires and what it does is exactly its columns: drop a guard and it is not
asked; drop an effect and its write does not happen; the contract has no
second copy of either.

`Call` is one firing: the records, the clock's reading, the inputs the
contract gathered (`given`), the record changes the effects accumulate
(`writes`), the event's words (`detail`), writes to other records that must
follow the row's own (`followups`, run after the event, still in the
transaction), and what the contract hands back to its caller (`out`: the
lease token, the manifest, the grant).

Effects that write nothing to a record say why in `NOTHING_WRITTEN`: their
work is done by the next contract the destination makes due (a Reconciling
Attempt is queried by `reconcile`, outside any transaction, so no lock is held
across a provider call), or by a record another effect writes.

`check(spec)` is run when a table is compiled: every guard, effect and
trigger a table declares must be implemented here (and every one implemented
here declared), every effect's `material` must match its implementation's,
and the states must be the core's.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shiftchange.spec.loader import SpecError
from shiftchange.spec.model import Machine, Row, Spec

from .fence import token_digest
from .policy import budget_exhausted, poison
from .records import Manifest, Plan, new_manifest
from .states import ATTEMPT_STATES, ATTEMPT_TERMINAL, TASK_RESTING, TASK_STATES, TASK_TERMINAL

if TYPE_CHECKING:
    from shiftchange.spec.compiled import CompiledMachine

    from .context import Context
    from .records import Attempt, Task
    from .store import Transaction

__all__ = [
    "ATTEMPT_EFFECTS",
    "ATTEMPT_GUARDS",
    "EFFECTS",
    "FIRED",
    "GUARDS",
    "MATERIAL",
    "NOTHING_WRITTEN",
    "STATES",
    "TASK_EFFECTS",
    "TASK_GUARDS",
    "UNCHOSEN",
    "Call",
    "check",
    "choose",
    "remembered",
]

Guard = Callable[["Call"], bool]
Effect = Callable[["Call"], None]

GUARDS: dict[str, dict[str, Guard]] = {"attempt": {}, "task": {}}
EFFECTS: dict[str, dict[str, Effect]] = {"attempt": {}, "task": {}}
ATTEMPT_GUARDS = GUARDS["attempt"]
TASK_GUARDS = GUARDS["task"]
ATTEMPT_EFFECTS = EFFECTS["attempt"]
TASK_EFFECTS = EFFECTS["task"]
MATERIAL: dict[str, dict[str, bool]] = {"attempt": {}, "task": {}}
NOTHING_WRITTEN: dict[tuple[str, str], str] = {}
"""(machine, effect) -> why its implementation writes no record."""

FIRED = {
    "attempt": frozenset(
        {
            "admit", "defer", "shed", "exceed_budget", "claim", "start", "renew", "grant_tool", "record_receipt",
            "report_call_failure", "checkpoint", "complete", "report_failure", "expire", "reconcile", "effects_landed",
            "effects_absent", "evidence_contradictory", "verified", "verification_failed", "cancel", "cancel_acknowledged",
            "cancel_timed_out", "cancel_unclaimed",
        }
    ),
    "task": frozenset(
        {
            "accept", "dispatch", "retry", "attempt_succeeded", "attempt_blocked", "attempt_quarantined", "stop", "escalate",
            "approve", "release", "cancel",
        }
    ),
}  # fmt: skip
"""The triggers the core's contracts fire, per machine: a table may declare no other, and must declare these."""

STATES = {"attempt": (ATTEMPT_STATES, ATTEMPT_TERMINAL, frozenset()), "task": (TASK_STATES, TASK_TERMINAL, TASK_RESTING)}
"""The states the core names, the terminal ones and the resting ones (`core.states`): a table may move between them, not
add, drop or redefine one."""


def guard(machine: str, name: str) -> Callable[[Guard], Guard]:
    def register(evaluate: Guard) -> Guard:
        if name in GUARDS[machine]:
            raise RuntimeError(f"guard {machine}.{name} implemented twice")
        GUARDS[machine][name] = evaluate
        return evaluate

    return register


def effect(machine: str, name: str, *, material: bool, nothing_written: str | None = None) -> Callable[[Effect], Effect]:
    def register(write: Effect) -> Effect:
        if name in EFFECTS[machine]:
            raise RuntimeError(f"effect {machine}.{name} implemented twice")
        EFFECTS[machine][name] = write
        MATERIAL[machine][name] = material
        if nothing_written is not None:
            NOTHING_WRITTEN[(machine, name)] = nothing_written
        return write

    return register


UNCHOSEN = object()
"""`Call.chosen` before the table was asked."""


class Call:
    """One firing of a row: what the contract read and gathered, what the row's guards found and what its effects write."""

    __slots__ = (
        "_guards",
        "_task",
        "attempt",
        "chosen",
        "context",
        "detail",
        "followups",
        "given",
        "now",
        "out",
        "trigger",
        "tx",
        "writes",
    )

    def __init__(
        self,
        context: Context,
        tx: Transaction,
        attempt: Attempt | None,
        task: Task | None,
        guards: dict[str, Guard],
        given: dict,
        trigger: str,
        out: dict[str, Any] | None = None,
        detail: str = "",
    ) -> None:
        # The firing path builds one of these per contract call: nothing is allocated here that most calls never use.
        self.context = context
        self.tx = tx
        self.attempt = attempt
        self._task = task
        self.now = context.clock.now()
        self.given = given
        self.writes: dict[str, Any] = {}
        self.detail = detail
        self.followups: list[Callable[[], None]] | None = None
        self.out = out
        self.chosen: tuple[str, Row] | object | None = UNCHOSEN
        """The row the table chose for this call, when a contract already asked (the gateway, choosing a dependency)."""
        self._guards = guards
        self.trigger = trigger

    def then(self, step: Callable[[], None]) -> None:
        """Run `step` after the row's own write and its event, inside the same transaction."""
        if self.followups is None:
            self.followups = [step]
        else:
            self.followups.append(step)

    def hand(self, **values: Any) -> None:
        """Hand `values` back to the contract (in the `out` it gave the firing path; nothing when it gave none)."""
        if self.out is not None:
            self.out.update(values)

    @property
    def task(self) -> Task:
        task = self._task
        if task is None:
            task = self._task = self.context.task(self.tx, self.attempt.task_id)
        return task

    def holds(self, name: str) -> bool:
        """Whether the guard `name` holds for this call, asked of its evaluator by name.

        The firing path asks the evaluators the table bound to its rows
        (`CompiledMachine.choose`); this is for the words of a refusal and for
        naming a guard whose evaluator lacks an input. Evaluators read and do
        not write, so asking twice gives the same answer.
        """
        try:
            return self._guards[name](self)
        except KeyError as missing:
            raise Unaskable(
                f"guard {name!r} cannot be asked of a {self.trigger!r} call: its evaluator needs {missing.args[0]!r},"
                " which that contract does not gather; name it on a row whose contract does"
            ) from None


def choose(machine: CompiledMachine, state: str, trigger: str, call: Call) -> tuple[str, Row] | None:
    """The row `machine` enables for this call, its guards asked through the evaluators the table bound to its rows."""
    try:
        return machine.choose(state, trigger, call)
    except KeyError:
        machine.fire(state, trigger, call.holds)  # asked again by name, so the guard short of an input is named (Unaskable)
        raise


def remembered(call: Call) -> Callable[[str], bool]:
    """`call.holds` asking each guard once: for the words of a refusal, which ask every guard of every row more than once."""
    known: dict[str, bool] = {}

    def holds(name: str) -> bool:
        held = known.get(name)
        if held is None:
            held = known[name] = call.holds(name)
        return held

    return holds


class Unaskable(RuntimeError):
    """A table names a guard or effect on a row whose contract does not gather what it needs: a design error, found on first use."""


# ======================================================================= the attempt machine: guards

# ---------------------------------------------------------------- admission


@guard("attempt", "capacity_available")
def _capacity_available(call: Call) -> bool:
    """The admission controller's model of capacity (bulkheads, global capacity, backpressure, deadline) for this step."""
    return call.given["admission"].guards["capacity_available"]


@guard("attempt", "selected_for_shedding")
def _selected_for_shedding(call: Call) -> bool:
    return call.given["admission"].guards["selected_for_shedding"]


@guard("attempt", "budget_left")
def _attempt_budget_left(call: Call) -> bool:
    """Every budget dimension has room for this Attempt: judged over the task's Attempts before it."""
    return budget_exhausted(call.task, call.given["attempts"][: call.attempt.number - 1]) is None


# -------------------------------------------------------------------- claim


@guard("attempt", "workspace_matches")
def _workspace_matches(call: Call) -> bool:
    return call.given["workspace"] == call.task.workspace


@guard("attempt", "worker_healthy")
def _worker_healthy(call: Call) -> bool:
    return call.given["healthy"]


@guard("attempt", "backoff_elapsed")
def _backoff_elapsed(call: Call) -> bool:
    eligible_at = call.attempt.eligible_at
    return eligible_at is None or call.now >= eligible_at


# -------------------------------------------------------------------- lease


@guard("attempt", "lease_current")
def _lease_current(call: Call) -> bool:
    return call.context.fence.honoured(call.attempt, call.now)


@guard("attempt", "lease_expired")
def _lease_expired(call: Call) -> bool:
    expires_at = call.attempt.expires_at
    return expires_at is not None and expires_at <= call.now


@guard("attempt", "lease_issued")
def _lease_issued(call: Call) -> bool:
    return call.attempt.token_digest is not None


# ------------------------------------------------------------- tool grants


@guard("attempt", "key_minted")
def _key_minted(call: Call) -> bool:
    ask = call.given["ask"]
    return ask.call.key is None or ask.call.key == ask.minted


@guard("attempt", "no_call_in_flight")
def _no_call_in_flight(call: Call) -> bool:
    """No earlier call under the key may still land: receipted or found, past its deadline, or deduplicated by the provider."""
    ask = call.given["ask"]
    intent = ask.intent
    in_flight = (
        intent is not None
        and ask.receipt is None
        and not call.context.provider.supports_idempotency
        and intent.deadline_at is not None
        and call.now < intent.deadline_at
    )
    return not in_flight and len(ask.found_ids) <= 1


@guard("attempt", "timeout_budget_left")
def _timeout_budget_left(call: Call) -> bool:
    attempt = call.attempt
    started = attempt.started_at if attempt.started_at is not None else call.now
    return call.given["ask"].call.call_deadline_s <= started + attempt.timeout_budget_s - call.now


@guard("attempt", "spend_within_budget")
def _spend_within_budget(call: Call) -> bool:
    ask = call.given["ask"]
    if ask.replaying:
        return True
    context = call.context
    return context.seams.spend(ask.task, ask.attempt, ask.cost_usd, ask.call.tokens, context.reliability.attempt_spend_max_usd)


@guard("attempt", "rate_allows")
def _rate_allows(call: Call) -> bool:
    ask = call.given["ask"]
    return ask.replaying or call.given["gateway"].limiter.available(ask.dependency, call.now) >= 1


@guard("attempt", "retry_budget_allows")
def _retry_budget_allows(call: Call) -> bool:
    ask = call.given["ask"]
    return ask.replaying or not ask.retrying or call.given["gateway"].retry_budgets.allows(ask.dependency)


@guard("attempt", "circuit_allows")
def _circuit_allows(call: Call) -> bool:
    """The dependency's breaker let the call through: decided by `Breakers.allow` as the gateway chose the dependency,
    because a half-open probe is spent only on a call every other guard would grant."""
    ask = call.given["ask"]
    return ask.replaying or ask.circuit


@guard("attempt", "concurrency_allows")
def _concurrency_allows(call: Call) -> bool:
    ask = call.given["ask"]
    return ask.replaying or call.given["gateway"].concurrency.allows(ask.dependency, call.now)


# ------------------------------------------------------- reconciliation, ending


@guard("attempt", "calls_settled")
def _calls_settled(call: Call) -> bool:
    return call.given["settled"]


@guard("attempt", "cancel_requested")
def _cancel_requested(call: Call) -> bool:
    return call.attempt.cancel_requested


@guard("attempt", "poison_signature")
def _poison_signature(call: Call) -> bool:
    """The failure signature this ending records would end a run of identical ones longer than the budget allows."""
    earlier = call.given["attempts"][: call.attempt.number - 1]
    return poison(earlier, call.given["signature"], call.task.budget.repeated_signatures_max)


@guard("attempt", "cancel_deadline_passed")
def _cancel_deadline_passed(call: Call) -> bool:
    deadline = call.attempt.cancel_deadline_at
    return deadline is not None and deadline <= call.now


# ======================================================================= the attempt machine: effects


@effect("attempt", "record_admission", material=False)
def _record_admission(call: Call) -> None:
    """The admission decision, with the capacity it reserved, in the event's words."""
    call.detail = call.given["admission"].reason


@effect("attempt", "record_deferral", material=False)
def _record_deferral(call: Call) -> None:
    call.detail = call.given["admission"].reason


@effect("attempt", "record_shed", material=False)
def _record_shed(call: Call) -> None:
    call.detail = call.given["admission"].reason
    call.writes["ended_at"] = call.now


@effect("attempt", "issue_lease", material=True)
def _issue_lease(call: Call) -> None:
    """A generation above any the task issued, a fresh token (the Attempt keeps its digest), an expiry one TTL away."""
    now = call.now
    token = secrets.token_urlsafe(32)
    generation = max(a.generation for a in call.given["attempts"]) + 1
    call.writes.update(
        worker_id=call.given["worker_id"],
        generation=generation,
        token_digest=token_digest(token),
        claimed_at=now,
        heartbeat_at=now,
        expires_at=now + call.context.config.lease_ttl_s,
        timeout_budget_s=call.context.config.timeout_budget_s,
    )
    out = call.out
    if out is not None:
        out["token"], out["generation"] = token, generation


@effect("attempt", "freeze_manifest", material=True)
def _freeze_manifest(call: Call) -> None:
    manifest = manifest_for(call.task, call.attempt)
    call.writes.update(manifest_digest=manifest.digest(), worktree=manifest.worktree, base_sha=manifest.base_sha)
    if call.out is not None:
        call.out["manifest"] = manifest


@effect("attempt", "record_start", material=True)
def _record_start(call: Call) -> None:
    call.writes["started_at"] = call.now


@effect("attempt", "extend_lease", material=True)
def _extend_lease(call: Call) -> None:
    writes, now = call.writes, call.now
    writes["heartbeat_at"] = now
    writes["expires_at"] = now + call.context.config.lease_ttl_s


@effect("attempt", "persist_intent", material=True)
def _persist_intent(call: Call) -> None:
    """Charge the Attempt and its task, take the rate token and a concurrency slot, persist (or hand over) the key's intent."""
    call.given["gateway"].persist_intent(call)


@effect("attempt", "record_receipt", material=True)
def _record_receipt(call: Call) -> None:
    call.given["gateway"].record_receipt_of(call)


@effect("attempt", "record_call_failure", material=True)
def _record_call_failure(call: Call) -> None:
    call.given["gateway"].record_call_failure_of(call)


@effect("attempt", "record_checkpoint", material=True)
def _record_checkpoint(call: Call) -> None:
    call.writes["checkpoint"] = call.given["checkpoint"]


@effect("attempt", "record_result", material=True)
def _record_result(call: Call) -> None:
    call.writes.update(result=call.given["result"], head_sha=call.given["head_sha"])


@effect("attempt", "record_failure_report", material=True)
def _record_failure_report(call: Call) -> None:
    call.writes.update(failure_domain=call.given["domain"], failure_signature=call.given["signature"])


@effect("attempt", "revoke_authority", material=True)
def _revoke_authority(call: Call) -> None:
    """The lease holder's run ends here: its end and how long it ran are stamped, and the lease ends with it.

    The lease's expiry comes forward to now (never later than it was), so `lease_current` holds for no call after this
    row, whatever state a later row leaves the Attempt in: authority is ended by the record, not only by the row's
    destination being a state no renewal leaves.
    """
    attempt, now = call.attempt, call.now
    expires_at = attempt.expires_at
    writes = call.writes
    writes.update(ended_at=now, elapsed_s=call.context.elapsed_s(attempt, now))
    if expires_at is not None and expires_at > now:
        writes["expires_at"] = now


@effect(
    "attempt",
    "query_provider",
    material=False,
    nothing_written="Reconciling makes the Attempt due for `reconcile`, which asks the provider per operation key outside any"
    " transaction (no lock is held across a provider call) and records what it found with record_findings",
)
def _query_provider(call: Call) -> None:
    return None


@effect("attempt", "record_findings", material=True)
def _record_findings(call: Call) -> None:
    """What reconciliation found; the Attempt's classification, or none when it ends by cancellation (not a failure)."""
    writes = call.writes
    writes["reconciliation"] = call.given["outcome"]
    if call.attempt.cancel_requested:
        writes.update(failure_domain=None, failure_signature=None)


@effect("attempt", "record_evidence", material=True)
def _record_evidence(call: Call) -> None:
    call.writes["evidence"] = call.given["evidence"]
    if "outcome" in call.given:
        call.writes["reconciliation"] = call.given["outcome"]


@effect("attempt", "classify_failure", material=True)
def _classify_failure(call: Call) -> None:
    """The failure domain (one the spec's failure-domain table declares) and the signature the retry policy reads."""
    writes = call.writes
    writes.update(failure_domain=call.given["domain"], failure_signature=call.given["signature"])
    if call.attempt.ended_at is None and "ended_at" not in writes:
        writes["ended_at"] = call.now


@effect("attempt", "request_cancel", material=True)
def _request_cancel(call: Call) -> None:
    """The first request is kept with its reason and the executor's deadline to acknowledge; a repeated one changes neither."""
    attempt = call.attempt
    first = not attempt.cancel_requested
    call.writes.update(
        cancel_requested=True,
        cancel_reason=call.given["reason"] if first else attempt.cancel_reason,
        cancel_deadline_at=call.now + call.context.config.cancel_ack_timeout_s if first else attempt.cancel_deadline_at,
    )


@effect(
    "attempt",
    "signal_executor",
    material=False,
    nothing_written="the signal is the cancel_requested flag request_cancel writes: the lease holder's next renewal returns it",
)
def _signal_executor(call: Call) -> None:
    return None


@effect("attempt", "record_acknowledgement", material=True)
def _record_acknowledgement(call: Call) -> None:
    """The executor's acknowledgement, or the timeout, in the event's words."""
    call.detail = call.detail or call.given["acknowledgement"]


# ======================================================================= the task machine


@guard("task", "no_prior_attempt")
def _no_prior_attempt(call: Call) -> bool:
    return not call.given["attempts"]


@guard("task", "no_active_attempt")
def _no_active_attempt(call: Call) -> bool:
    active = call.context.table.active
    return all(a.state not in active for a in call.given["attempts"])


@guard("task", "latest_attempt_failed")
def _latest_attempt_failed(call: Call) -> bool:
    attempts = call.given["attempts"]
    return bool(attempts) and attempts[-1].state == "failed"


@guard("task", "reason_given")
def _reason_given(call: Call) -> bool:
    return len(call.given["reason"].strip()) >= call.context.config.reason_length_min


@guard("task", "policy_permits_retry")
def _policy_permits_retry(call: Call) -> bool:
    """The retry rule (a seam; the reference is the failure-domain table's policy) permits another automatic Attempt."""
    attempts = call.given["attempts"]
    if not attempts or attempts[-1].state != "failed":
        return False
    return call.context.seams.retry_rule(call.task, attempts, call.given["plan"]) is None


@guard("task", "budget_left")
def _task_budget_left(call: Call) -> bool:
    return budget_exhausted(call.task, call.given["attempts"]) is None


@effect("task", "record_decision", material=True)
def _record_decision(call: Call) -> None:
    """The decision and its reason where the contract made one (the loop's, an operator's), and for an operator's release
    the interruption it counts and the budget it may extend: only this human decision extends a budget."""
    given, writes = call.given, call.writes
    for name in ("decision", "decision_reason", "interruptions", "budget"):
        if name in given:
            writes[name] = given[name]


@effect("task", "append_attempt", material=True)
def _append_attempt(call: Call) -> None:
    """Attempt N+1 through the recovery seam, after the task's own event: a retry appends, never rewrites."""
    append = call.given["append"]
    call.then(append)


@effect(
    "task",
    "raise_attention_item",
    material=True,
    nothing_written="the task resting in blocked, escalated or quarantined is the attention item: `shiftchange status` and"
    " the timeline list resting tasks, and only an operator's release moves them",
)
def _raise_attention_item(call: Call) -> None:
    return None


@effect("task", "cancel_active_attempt", material=True)
def _cancel_active_attempt(call: Call) -> None:
    """The task's active Attempt, if any, is cancelled by the Attempt protocol once this transaction commits."""
    attempts = call.given["attempts"]
    active = call.context.table.active
    if attempts and attempts[-1].state in active:
        call.hand(cancel_attempt=attempts[-1].attempt_id)


@effect(
    "task",
    "record_review",
    material=True,
    nothing_written="the reviewer's verdict is the event the row appends (approve, by the operator)",
)
def _record_review(call: Call) -> None:
    return None


# ======================================================================= helpers and the load-time check


def manifest_for(task: Task, attempt: Attempt) -> Manifest:
    """The frozen inputs handed to the worker with its lease."""
    plan = attempt.plan or Plan(attempt.hypothesis)
    return new_manifest(
        task.task_id,
        attempt.number,
        task.objective,
        task.scope,
        task.workspace,
        f"{task.workspace}/{task.task_id}/attempt-{attempt.number}",
        plan.hypothesis,
        plan.base_sha,
        plan.executor,
        plan.model,
        plan.context_version,
        plan.policy_version,
        task.budget,
    )


def check(spec: Spec) -> None:
    """Refuse a spec whose vocabulary or states are not the ones implemented here, naming the file and line."""
    for machine in (spec.attempt, spec.task):
        _check_machine(machine)


def _check_machine(machine: Machine) -> None:
    name = machine.name
    if name not in GUARDS:
        raise SpecError(machine.where, f"no machine {name!r} is implemented", "name the machine attempt or task")
    fix = "the vocabulary's meanings are the core's (core/vocabulary.py): a table may use them in any row, not redefine them"
    for kind, declared, implemented in (
        ("guard", machine.guards, GUARDS[name]),
        ("effect", machine.effects, EFFECTS[name]),
    ):
        for term in declared.values():
            if term.name not in implemented:
                raise SpecError(term.where, f"{name} {kind} {term.name!r} has no implementation in the core", fix)
        missing = sorted(set(implemented) - set(declared))
        if missing:
            where = machine.where
            raise SpecError(where, f"the core implements {name} {kind} {missing[0]!r}, which the vocabulary does not declare", fix)
    for term in machine.effects.values():
        material = MATERIAL[name][term.name]
        if term.material != material:
            said = "material" if term.material else "not material"
            raise SpecError(term.where, f"{name} effect {term.name!r} is declared {said}; its implementation is the opposite", fix)
    for term in machine.triggers.values():
        if term.name not in FIRED[name]:
            raise SpecError(term.where, f"{name} trigger {term.name!r} is fired by no contract of the core", fix)
    missing = sorted(FIRED[name] - set(machine.triggers))
    if missing:
        raise SpecError(machine.where, f"the core fires {name} trigger {missing[0]!r}, which the vocabulary does not declare", fix)
    known, terminal, resting = STATES[name]
    states = set(machine.states)
    if states != known:
        extra = sorted(states - known)
        problem = f"{name} state {extra[0]!r} is not one the core knows" if extra else ""
        problem = problem or f"{name} state {sorted(known - states)[0]!r}, which the core names, is missing"
        where = machine.states[extra[0]].where if extra else machine.where
        raise SpecError(where, problem, "a table moves between the core's states; it may not add or drop one")
    for state in machine.states.values():
        for flag, declared, core_set in (("terminal", state.terminal, terminal), ("resting", state.resting, resting)):
            if declared != (state.name in core_set):
                said = flag if declared else f"not {flag}"
                raise SpecError(state.where, f"{name} state {state.name!r} is declared {said}; the core's is the opposite", fix)
