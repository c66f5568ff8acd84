"""The invariant checkers: quiet on a real clean history, loud on each planted violation, bounded, and crash-safe.

Two kinds of history feed them. The first is real: the reference core driven
end to end (a clean success, an expired lease reconciled and retried, a
cancellation), its store's events streamed into a `History`, each ledger
effect added as `Landed`, and each task's final records as `Retired`. Every
checker must hold on it. The second is synthetic: a `Story` writes the events
a small task would leave, step by step, so a test can plant exactly one
violation (the anti-pattern's signature) and check that exactly one checker
reports it, and that the near miss beside it (a stale fence that was refused,
a claim the instant a lease expired) stays quiet.
"""

from __future__ import annotations

import copy

import pytest

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED, CheckContext, Fault, History, Landed, Retired, Verdict
from shiftchange.checkers.measures import Measures
from shiftchange.checkers.rules import INVARIANTS, all_checkers
from shiftchange.core import (
    Attempt,
    Budget,
    Claim,
    CoreConfig,
    Event,
    Grant,
    Intent,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    ReliabilityConfig,
    Task,
)
from shiftchange.core.machine import SPEC

DECISIONS = {"attempt_succeeded": "verify", "stop": "stop", "escalate": "escalate", "attempt_quarantined": "escalate",
             "attempt_blocked": "escalate"}  # fmt: skip
"""The loop's decision each of its task rows carries out (`core.policy.decide`)."""
LEASED = frozenset({"claimed", "running", "cancelling"})
"""The states in which a lease is honoured: leaving them, the run ends and its elapsed time is stamped (revoke_authority)."""
ANSWERS = {"cancel_acknowledged": "acknowledged by the executor", "cancel_timed_out": "executor did not acknowledge"}
CONTEXT = CheckContext(lease_ttl_s=30.0, attempt_spend_max_usd=5.0, reason_length_min=10)
WORKSPACE = "repo-a"
REASON = "lease lost and reconciliation found nothing"


def violated(history: History) -> set[str]:
    return {name for name, verdict in history.verdicts().items() if verdict.status == VIOLATED}


# ------------------------------------------------------------ the catalogue


def test_there_is_one_checker_per_invariant_of_the_catalogue_in_its_order():
    """Goal: every invariant the spec catalogues has exactly one checker, under its name, in the catalogue's order."""
    checkers = all_checkers(CONTEXT)
    assert tuple(SPEC.invariants) == INVARIANTS
    assert [checker.name for checker in checkers] == list(INVARIANTS)
    assert all_checkers(CONTEXT)[0] is not checkers[0]  # fresh instances every time


# --------------------------------------------------- a real, clean history


class RealRun:
    """The reference core over a memory store, a manual clock and a ledger provider, streamed into a History."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.store = MemoryStore()
        self.provider = LedgerProvider(clock=self.clock)
        self.config = CoreConfig()
        self.orchestrator = Orchestrator(self.store, self.clock, self.provider, self.config, ReliabilityConfig())
        context = CheckContext(self.config.lease_ttl_s, ReliabilityConfig().attempt_spend_max_usd, self.config.reason_length_min)
        self.history = History(all_checkers(context))
        self.store.subscribe(self.history.append)

    def dispatched(self, task_id: str, hypothesis: str = "the fixture leaks a port") -> str:
        core = self.orchestrator
        core.create_task(task_id, "make the flaky test pass", WORKSPACE, scope="tests/")
        assert core.accept_task(task_id).accepted
        assert core.dispatch(task_id, Plan(hypothesis)).accepted
        return f"{task_id}#1"

    def running(self, attempt_id: str, worker_id: str) -> tuple[str, int, str]:
        core = self.orchestrator
        assert core.run_admission()[attempt_id].state == "admitted"
        claim = core.claim_attempt(attempt_id.split("#")[0], worker_id, WORKSPACE)
        assert isinstance(claim, Claim), claim
        fence = (attempt_id, claim.lease.generation, claim.lease.token)
        assert core.start_attempt(*fence).state == "running"
        return fence

    def pull_request(self, fence: tuple[str, int, str], head_sha: str, worker_id: str) -> None:
        """Grant create-pr at the gateway, let it land (one Landed entry), record the receipt, complete."""
        core = self.orchestrator
        grant = core.grant_tool(*fence, "create-pr", head_sha, request="open the pull request", cost_usd=0.5, tokens=1000)
        assert isinstance(grant, Grant), grant
        effect = self.provider.perform(grant.key, "create-pr", head_sha, "open the pull request")
        task_id = fence[0].split("#")[0]
        self.history.append(
            Landed(effect.at_s, "code_host", effect.provider_id, effect.key, effect.operation, effect.identity, task_id, worker_id, True)
        )
        assert core.record_receipt(*fence, grant.key, effect.provider_id).accepted
        self.clock.advance(5)
        assert core.complete_attempt(*fence, "the test passes", head_sha=head_sha).state == "verifying"

    def approved(self, task_id: str, attempt_id: str) -> None:
        core = self.orchestrator
        assert core.verify_attempt(attempt_id).state == "succeeded"
        assert core.decide(task_id).kind == "verify"
        assert core.approve(task_id).accepted

    def retire(self, task_id: str) -> None:
        task = copy.copy(self.store.get_task(task_id))
        attempts = tuple(copy.copy(a) for a in self.store.get_attempts(task_id))
        intents = tuple(copy.copy(i) for a in attempts for i in self.store.get_intents(a.attempt_id))
        self.history.append(Retired(self.clock.now(), task, attempts, intents))


def test_a_real_clean_history_satisfies_every_invariant():
    """Goal: on a history the reference core really produced (success, expiry then retry, cancellation), every checker holds."""
    run = RealRun()
    core, clock = run.orchestrator, run.clock

    # A clean success: one Attempt, one pull request, verified, approved.
    fence = run.running(run.dispatched("task-ok"), "worker-a")
    run.pull_request(fence, "sha-ok", "worker-a")
    run.approved("task-ok", "task-ok#1")

    # A vanished worker: the lease expires, the reaper makes it Suspect, reconciliation finds nothing, a paced retry succeeds.
    stale = run.running(run.dispatched("task-expired"), "worker-b")
    clock.advance(run.config.lease_ttl_s + 1)
    assert ("task-expired#1", "suspect") in core.reap()
    assert core.reconcile_attempt("task-expired#1").state == "failed"
    assert core.decide("task-expired").kind == "retry"
    assert core.retry("task-expired", REASON, Plan("the fixture leaks a port")).accepted
    retry = run.store.get_attempt("task-expired#2")
    assert retry.backoff_s > 0  # an executor failure is retried only after a backoff
    clock.advance(retry.backoff_s + 1)
    fence = run.running("task-expired#2", "worker-c")
    assert not core.complete_attempt(*stale, "done after all").accepted  # the paused worker wakes: refused, kept as a late event
    run.pull_request(fence, "sha-expired", "worker-c")
    run.approved("task-expired", "task-expired#2")

    # A cancellation: the task is cancelled while its Attempt runs; the worker acknowledges; reconciliation ends it.
    fence = run.running(run.dispatched("task-cancelled"), "worker-d")
    assert core.cancel_task("task-cancelled", "the objective was withdrawn").accepted
    assert run.store.get_attempt("task-cancelled#1").state == "cancelling"
    assert core.acknowledge_cancel(*fence).state == "cancelled"

    run.history.append(Fault(clock.now(), "pause", "worker-b", clock.now() + 10))
    for task_id in ("task-ok", "task-expired", "task-cancelled"):
        run.retire(task_id)

    verdicts = run.history.verdicts()
    assert {name: verdict.status for name, verdict in verdicts.items()} == dict.fromkeys(INVARIANTS, OK), verdicts
    assert all(checker.live() == 0 for checker in run.history.checkers)


# ------------------------------------------------- synthetic histories


class Story:
    """Writes the events one task would leave, step by step, keeping its records in step with them.

    Each accepted event moves the tracked Task or Attempt record to its
    to_state, so `retire()` hands the checkers final records that agree with
    the history unless a test makes them disagree on purpose. The steps are
    the core's, one event each; a test plants a violation by writing one
    event the core never would.
    """

    def __init__(self, history: History, task_id: str = "task-1") -> None:
        self.history = history
        self.task_id = task_id
        self.now = 0.0
        self.seq = 0
        self.task = Task(task_id, "make the flaky test pass", "tests/", WORKSPACE, "inbox", Budget(), 0.0)
        self.attempts: dict[int, Attempt] = {}
        self.intents: dict[str, Intent] = {}

    def at(self, now: float) -> Story:
        self.now = now
        return self

    def id(self, number: int) -> str:
        return f"{self.task_id}#{number}"

    def event(
        self,
        kind: str,
        number: int | None = None,
        to_state: str | None = None,
        accepted: bool = True,
        generation: int | None = None,
        actor: str = "orchestrator",
        worker_id: str | None = None,
        detail: str = "",
        from_state: str | None = None,
        operation_key: str | None = None,
        expires_at: float | None = None,
        code: str = "stale_fence",
        words: bool = True,
    ) -> Story:
        """One event; from_state defaults to the tracked record's state, to_state to an in-place write.

        A `decide` names the latest Attempt but moves the Task, as the core's does.
        """
        record = self.task if number is None or kind == "decide" else self.attempts[number]
        before = record.state if from_state is None else from_state
        after = before if to_state is None or not accepted else to_state
        if accepted and words and not detail and kind in ANSWERS:
            detail = ANSWERS[kind]  # the cancellation's answer, in the event's words
        self.seq += 1
        event = Event(
            self.seq,
            self.now,
            actor,
            kind,
            self.task_id,
            None if number is None else self.id(number),
            accepted,
            "accepted" if accepted else "late: stale fence",
            before,
            after,
            generation,
            worker_id,
            detail,
            None if accepted else code,
            not accepted,
            expires_at=expires_at,
            operation_key=operation_key,
        )
        if accepted:
            record.state = after
            if kind == "verified":
                record.evidence = detail or "ci passed on the head"  # the provider's verdict records its evidence
            elif kind == "verification_failed":
                record.evidence = detail or "ci failed on the head"
            elif kind in ("effects_absent", "effects_landed"):
                record.reconciliation = kind.removeprefix("effects_")  # reconciliation records its findings
            elif kind == "start":
                record.started_at = self.now  # the start is recorded
            elif kind == "complete":
                record.result = detail or "the pull request is open"  # the holder's reported result
            elif kind == "claim":
                record.claimed_at = self.now
            elif kind == "release":
                record.interruptions += 1  # an operator's release is an interruption the task counts
            if before in LEASED and after not in LEASED and record is not self.task:  # the run ends: its time is stamped
                began = record.started_at if record.started_at is not None else record.claimed_at
                record.elapsed_s = 0.0 if began is None else self.now - began
            decided = DECISIONS.get(kind) if record is self.task else None
            if decided is not None:  # the loop's decision, written with the row that carries it out
                record.decision, record.decision_reason = decided, detail or f"the loop decided {decided}"
        self.history.append(event)
        return self

    # ---- task steps

    def created(self) -> Story:
        self.seq += 1
        self.history.append(Event(self.seq, self.now, "operator", "create", self.task_id, None, True, "accepted", None, "inbox"))
        self.event("accept", to_state="ready", actor="operator")
        return self

    def append(self, number: int, hypothesis: str, reason: str | None = None, backoff_s: float = 0.0) -> Story:
        previous = self.id(number - 1) if number > 1 else None
        attempt = Attempt(self.id(number), self.task_id, number, "queued", self.now, hypothesis, previous, reason, backoff_s=backoff_s)
        self.attempts[number] = attempt
        self.seq += 1
        reason = reason or "first dispatch"
        self.history.append(
            Event(self.seq, self.now, "orchestrator", "append", self.task_id, attempt.attempt_id, True, reason, None, "queued")
        )
        return self

    def dispatched(self, hypothesis: str = "the fixture leaks a port") -> Story:
        self.event("dispatch", to_state="in_progress")
        return self.append(1, hypothesis)

    def retried(self, number: int, hypothesis: str, reason: str = REASON, backoff_s: float = 2.0) -> Story:
        self.event("retry", to_state="in_progress", detail=reason)
        return self.append(number, hypothesis, reason, backoff_s)

    # ---- attempt steps

    def running(self, number: int, generation: int, worker_id: str = "worker-a") -> Story:
        attempt = self.attempts[number]
        attempt.claimed_at, attempt.generation, attempt.worker_id = self.now, generation, worker_id
        self.event("admit", number, "admitted")
        self.event("claim", number, "claimed", generation=generation, actor="worker", worker_id=worker_id)
        self.event("start", number, "running", generation=generation, actor="worker", worker_id=worker_id)
        return self

    def fenced(
        self,
        kind: str,
        number: int,
        generation: int,
        to_state: str | None = None,
        accepted: bool = True,
        detail: str = "",
        operation_key: str | None = None,
        expires_at: float | None = None,
        code: str = "stale_fence",
    ) -> Story:
        worker_id = self.attempts[number].worker_id
        return self.event(
            kind,
            number,
            to_state,
            accepted,
            generation,
            "worker",
            worker_id,
            detail,
            operation_key=operation_key,
            expires_at=expires_at,
            code=code,
        )

    def granted(self, number: int, generation: int, key: str, accepted: bool = True) -> Story:
        self.fenced("grant_tool", number, generation, accepted=accepted, detail=key, operation_key=key)
        if accepted:
            identity = key.split(":")[2]
            self.intents[key] = Intent(key, self.task_id, self.id(number), "create-pr", identity, "open the pull request", self.now)
        return self

    def landed(self, key: str, provider_id: str, via_gateway: bool = True, task_id: str | None = None) -> Story:
        identity = key.split(":")[2]
        self.history.append(
            Landed(self.now, "code_host", provider_id, key, "create-pr", identity, task_id or self.task_id, "worker-a", via_gateway)
        )
        return self

    def succeeded(self, number: int, generation: int) -> Story:
        """Complete, verified, decided, approved: the task ends done."""
        self.fenced("complete", number, generation, "verifying")
        self.event("verified", number, "succeeded", actor="provider")
        self.event("attempt_succeeded", to_state="review")
        self.event("decide", number)
        self.event("approve", to_state="done", actor="operator")
        return self

    def failed(self, number: int, generation: int, domain: str = "executor", signature: str = "worker crashed") -> Story:
        """The worker reports a failure; reconciliation finds nothing landed; the loop decides."""
        attempt = self.attempts[number]
        attempt.failure_domain, attempt.failure_signature = domain, signature
        self.fenced("report_failure", number, generation, "reconciling")
        self.event("effects_absent", number, "failed")
        self.event("decide", number)
        return self

    def expired(self, number: int) -> Story:
        """The lease ran out: Suspect, then Reconciling finds nothing, Failed (executor)."""
        attempt = self.attempts[number]
        attempt.failure_domain, attempt.failure_signature = "executor", "executor:no effect landed"
        self.event("expire", number, "suspect", actor="reaper")
        self.event("reconcile", number, "reconciling")
        self.event("effects_absent", number, "failed")
        return self

    def escalated(self, number: int) -> Story:
        """The loop stops and asks a human: the task rests escalated."""
        self.event("escalate", to_state="escalated")
        self.event("decide", number)
        return self

    def retire(self, drained: bool = False) -> Story:
        attempts = tuple(copy.copy(self.attempts[n]) for n in sorted(self.attempts))
        self.history.append(Retired(self.now, copy.copy(self.task), attempts, tuple(self.intents.values()), drained))
        return self


def story() -> Story:
    """A fresh task-1 over a fresh History of the eleven checkers."""
    return Story(History(all_checkers(CONTEXT)))


def clean_start(s: Story) -> Story:
    """A task whose first Attempt expires: Suspect, Reconciling, failed; the loop decides to retry."""
    s.created().dispatched()
    s.running(1, 1)
    return s.at(31).expired(1).event("decide", 1)


def clean_finish(s: Story) -> Story:
    """The paced retry opens one pull request and succeeds; the task is approved and retires."""
    key = f"create-pr:{s.task_id}:sha-1"
    s.at(40).retried(2, "the fixture leaks a port")
    s.at(45).running(2, 2, "worker-b").granted(2, 2, key).landed(key, f"create-pr-{s.task_id}")
    return s.at(50).succeeded(2, 2).retire()


def clean(s: Story) -> Story:
    return clean_finish(clean_start(s))


def test_a_synthetic_clean_story_satisfies_every_invariant():
    """Goal: the Story builder writes consistent histories, so a planted violation is the only thing wrong with one."""
    s = clean(story())
    assert {name: verdict.status for name, verdict in s.history.verdicts().items()} == dict.fromkeys(INVARIANTS, OK)


# ---- one planted violation per checker, and the near miss beside it. Each builder writes the
# ---- violating history when `plant` is true and the nearest history that must stay ok otherwise.


def claim_during_a_live_lease(s: Story, plant: bool) -> Story:
    """Two owners: Attempt 2 is claimed at t=10 while Attempt 1's lease runs to t=30 (near miss: claimed at t=30 exactly)."""
    s.created().dispatched().running(1, 1)
    s.at(10 if plant else 30).retried(2, "the fixture leaks a port").running(2, 2, "worker-b")
    s.at(s.now + 5).succeeded(2, 2)
    return s.at(100).expired(1).retire()


def claim_during_a_renewed_lease(s: Story, plant: bool) -> Story:
    """A renewal at t=25 extends Attempt 1's lease to t=55; Attempt 2 claimed at t=40 is a second owner (near miss: no renewal)."""
    s.created().dispatched().running(1, 1)
    if plant:
        s.at(25).fenced("renew", 1, 1)
    s.at(40).retried(2, "the fixture leaks a port").running(2, 2, "worker-b")
    s.at(45).succeeded(2, 2)
    return s.at(100).expired(1).retire()


def stale_completion_accepted(s: Story, plant: bool) -> Story:
    """No fencing: the stale worker's completion lands on Attempt 2 with generation 1 (near miss: the same call refused)."""
    s.created().dispatched().running(1, 1)
    s.at(31).expired(1).event("decide", 1)
    s.at(40).retried(2, "the fixture leaks a port").running(2, 2, "worker-b")
    s.at(42).fenced("complete", 2, 1, "verifying", accepted=plant)
    if not plant:
        return s.succeeded(2, 2).retire()
    s.event("verified", 2, "succeeded", actor="provider")
    s.event("attempt_succeeded", to_state="review").event("decide", 2).event("approve", to_state="done", actor="operator")
    return s.retire()


def write_after_expiry_accepted(s: Story, plant: bool) -> Story:
    """A checkpoint accepted at t=35 under a lease that expired at t=30 (near miss: at t=29.5, still current)."""
    s.created().dispatched().running(1, 1)
    s.at(35 if plant else 29.5).fenced("checkpoint", 1, 1)
    s.at(36).expired(1).event("decide", 1)
    return s.escalated(1).retire()


def failed_attempt_rewritten(s: Story, plant: bool) -> Story:
    """Task and Attempt conflated: a retry rewrites failed Attempt 1 to queued (near miss: that rewrite refused, Attempt 2 appended)."""
    s.created().dispatched().running(1, 1).at(10).failed(1, 1, "validation", "test_port fails")
    s.at(20).event("retry", 1, "queued", accepted=plant)
    if plant:
        return s.running(1, 2).at(25).succeeded(1, 2).retire()
    s.retried(2, "the port is reused without SO_REUSEADDR", backoff_s=0.0)
    return s.running(2, 2).at(25).succeeded(2, 2).retire()


def retry_reason_too_short(s: Story, plant: bool) -> Story:
    """A retry whose reason is 9 characters long (near miss: 10, the minimum)."""
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    s.at(20).retried(2, "the fixture leaks a port", reason="try again" if plant else "try again!")
    return s.running(2, 2).at(25).succeeded(2, 2).retire()


def attempt_number_skipped(s: Story, plant: bool) -> Story:
    """Attempt 3 appended after Attempt 1 (near miss: Attempt 2)."""
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    number = 3 if plant else 2
    s.at(20).retried(number, "the fixture leaks a port")
    return s.running(number, 2).at(25).succeeded(number, 2).retire()


def suspect_decided_without_reconciling(s: Story, plant: bool) -> Story:
    """An expired Attempt goes from suspect straight to failed (near miss: through reconciling)."""
    s.created().dispatched().running(1, 1).at(31)
    if plant:
        s.attempts[1].failure_domain, s.attempts[1].failure_signature = "executor", "executor:no effect landed"
        s.event("expire", 1, "suspect", actor="reaper").event("effects_absent", 1, "failed")
    else:
        s.expired(1)
    return s.escalated(1).retire()


def expiry_straight_to_failed(s: Story, plant: bool) -> Story:
    """The reaper fails an expired Attempt instead of making it suspect (near miss: suspect, then reconciling)."""
    s.created().dispatched().running(1, 1).at(31)
    if plant:
        s.attempts[1].failure_domain = "executor"
        s.event("expire", 1, "failed", actor="reaper")
    else:
        s.expired(1)
    return s.escalated(1).retire()


def second_pull_request_for_one_head(s: Story, plant: bool) -> Story:
    """Timestamp keys: two grants for head sha-1 under different keys open two PRs (near miss: the second is for sha-2)."""
    s.created().dispatched().running(1, 1)
    s.at(5).granted(1, 1, "create-pr:task-1:sha-1:t5").landed("create-pr:task-1:sha-1:t5", "create-pr-1")
    second = "create-pr:task-1:sha-1:t9" if plant else "create-pr:task-1:sha-2:t9"
    s.at(9).granted(1, 1, second).landed(second, "create-pr-2")
    return s.at(12).succeeded(1, 1).retire()


def queued_forever(s: Story, plant: bool) -> Story:
    """Silent queue growth: the run ends with Attempt 1 still queued after 500s (near miss: the task escalated, truthfully resting)."""
    s.created().dispatched()
    if not plant:
        s.running(1, 1).at(10).failed(1, 1, "authorization", "token revoked").escalated(1)
    return s.at(500).retire(drained=True)


def admitted_after_its_deadline(s: Story, plant: bool) -> Story:
    """Silent queue growth: Attempt 1 admitted at t=120, after the task's deadline t=100 (near miss: admitted at t=90)."""
    s.task.deadline_at = 100.0
    s.created().dispatched()
    admitted_at = 120.0 if plant else 90.0
    return s.at(admitted_at).running(1, 1).at(admitted_at + 5).succeeded(1, 1).retire()


def attempt_spend_over_ceiling(s: Story, plant: bool) -> Story:
    """Budget burn: one Attempt spends $6.00 against a $5.00 ceiling (near miss: exactly $5.00)."""
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, "create-pr:task-1:sha-1")
    s.attempts[1].cost_usd = s.task.cost_usd = 6.0 if plant else 5.0
    return s.at(10).succeeded(1, 1).retire()


def retry_after_elapsed_budget(s: Story, plant: bool) -> Story:
    """Attempt 2 appended after Attempt 1 used all 100s of the elapsed budget (near miss: it used 99s)."""
    s.task.budget = Budget(elapsed_max_s=100.0)
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    s.attempts[1].elapsed_s = 100.0 if plant else 99.0
    s.retried(2, "the fixture leaks a port")
    return s.at(20).running(2, 2).at(25).succeeded(2, 2).retire()


def grant_after_cancellation(s: Story, plant: bool) -> Story:
    """The cancelled worker is granted a tool call after the task and its Attempt were cancelled (near miss: the grant refused)."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("cancel", to_state="cancelled", actor="operator")
    s.event("cancel", 1, "cancelling", actor="operator")
    s.at(6).granted(1, 1, "create-pr:task-1:sha-1", accepted=plant)
    s.at(7).fenced("cancel_acknowledged", 1, 1, "reconciling")
    return s.event("effects_absent", 1, "cancelled").retire()


def cancel_as_a_flag(s: Story, plant: bool) -> Story:
    """Cancellation as a flag: the worker's completion moves the cancelling Attempt back to verifying (near miss: it acknowledges)."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("cancel", 1, "cancelling", actor="operator")
    if plant:
        s.at(6).fenced("complete", 1, 1, "verifying")
        s.event("verified", 1, "succeeded", actor="provider").event("attempt_succeeded", to_state="review").event("decide", 1)
        return s.event("approve", to_state="done", actor="operator").retire()
    s.at(6).fenced("cancel_acknowledged", 1, 1, "reconciling")
    s.event("effects_absent", 1, "cancelled").event("escalate", to_state="escalated").event("decide", 1)
    return s.retire()


def cancelled_without_reconciling(s: Story, plant: bool) -> Story:
    """The cancellation timed out and the Attempt ended cancelled without reconciling (near miss: through reconciling)."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("cancel", to_state="cancelled", actor="operator").event("cancel", 1, "cancelling", actor="operator")
    s.at(40).event("cancel_timed_out", 1, "cancelled" if plant else "reconciling", actor="reaper")
    if not plant:
        s.event("effects_absent", 1, "cancelled")
    return s.retire()


def validation_retried_unchanged(s: Story, plant: bool) -> Story:
    """Blind retry: a validation failure retried with the same hypothesis (near miss: a changed one)."""
    s.created().dispatched("the fixture leaks a port").running(1, 1).at(10).failed(1, 1, "validation", "test_port fails")
    hypothesis = "the fixture leaks a port" if plant else "the port is reused without SO_REUSEADDR"
    s.at(20).retried(2, hypothesis, backoff_s=0.0)
    return s.running(2, 2).at(25).succeeded(2, 2).retire()


def transient_failure_retried_at_once(s: Story, plant: bool) -> Story:
    """Retry storm: an executor failure retried with no backoff (near miss: a 0.5s backoff)."""
    s.created().dispatched().running(1, 1).at(10).failed(1, 1, "executor", "worker crashed")
    s.at(20).retried(2, "the fixture leaks a port", backoff_s=0.0 if plant else 0.5)
    return s.running(2, 2).at(25).succeeded(2, 2).retire()


def repeated_signature_retried(s: Story, plant: bool) -> Story:
    """Attempts 1 and 2 fail with the same signature and Attempt 3 is still appended (near miss: Attempt 2's signature differs)."""
    s.created().dispatched("hypothesis one").running(1, 1).at(10).failed(1, 1, "validation", "test_port fails")
    s.at(20).retried(2, "hypothesis two", backoff_s=0.0).running(2, 2)
    s.at(30).failed(2, 2, "validation", "test_port fails" if plant else "test_socket fails")
    s.at(40).retried(3, "hypothesis three", backoff_s=0.0).running(3, 3)
    return s.at(45).succeeded(3, 3).retire()


def unauthorized_retried(s: Story, plant: bool) -> Story:
    """An authorization failure (response: stop) retried automatically (near miss: a repository failure, which may be corrected)."""
    domain = "authorization" if plant else "repository"
    s.created().dispatched("hypothesis one").running(1, 1).at(10).failed(1, 1, domain, f"{domain} failure")
    s.at(20).retried(2, "hypothesis two", backoff_s=0.0)
    return s.running(2, 2).at(25).succeeded(2, 2).retire()


def effect_without_a_grant(s: Story, plant: bool) -> Story:
    """Unrecorded effects: the worker calls the provider without the gateway (near miss: through it, under the minted key)."""
    s.created().dispatched().running(1, 1)
    if plant:
        s.at(5).landed("create-pr:task-1:sha-1", "create-pr-1", via_gateway=False)
    else:
        s.at(5).granted(1, 1, "create-pr:task-1:sha-1").landed("create-pr:task-1:sha-1", "create-pr-1")
    return s.at(10).succeeded(1, 1).retire()


def effect_under_a_worker_minted_key(s: Story, plant: bool) -> Story:
    """Worker-minted keys: the effect lands under a key the gateway never minted (near miss: the minted key)."""
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, "create-pr:task-1:sha-1")
    s.landed("create-pr:task-1:sha-1:worker-a" if plant else "create-pr:task-1:sha-1", "create-pr-1")
    return s.at(10).succeeded(1, 1).retire()


def effect_after_retirement(s: Story, plant: bool) -> Story:
    """An effect lands for a task that already retired: nothing on record explains it (near miss: it lands before)."""
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, "create-pr:task-1:sha-1")
    if not plant:
        s.landed("create-pr:task-1:sha-1", "create-pr-1")
    s.at(10).succeeded(1, 1).retire()
    if plant:
        s.at(11).landed("create-pr:task-1:sha-1", "create-pr-1")
    return s


def state_change_without_event(s: Story, plant: bool) -> Story:
    """The task's record says done with no approve event (near miss: the approve event is there)."""
    s.created().dispatched().running(1, 1)
    s.at(5).fenced("complete", 1, 1, "verifying").event("verified", 1, "succeeded", actor="provider")
    s.event("attempt_succeeded", to_state="review").event("decide", 1)
    if plant:
        s.task.state = "done"
    else:
        s.event("approve", to_state="done", actor="operator")
    return s.retire()


def generation_reissued(s: Story, plant: bool) -> Story:
    """Attempt 2's claim issues generation 1 again, so a stale fence would pass (near miss: generation 2)."""
    s.created().dispatched().running(1, 1)
    s.at(31).expired(1).event("decide", 1)
    generation = 1 if plant else 2
    s.at(40).retried(2, "the fixture leaks a port").running(2, generation, "worker-b")
    return s.at(45).succeeded(2, generation).retire()


def predecessor_misnamed(s: Story, plant: bool) -> Story:
    """Restart from scratch: Attempt 2's record names no predecessor (near miss: it names Attempt 1)."""
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    s.at(20).retried(2, "the fixture leaks a port").running(2, 2)
    if plant:
        s.attempts[2].previous_attempt_id = None
    return s.at(25).succeeded(2, 2).retire()


def claim_after_task_cancelled(s: Story, plant: bool) -> Story:
    """A worker claims the admitted Attempt after its task was cancelled, before the Attempt's own cancel (near miss: refused)."""
    s.created().dispatched().event("admit", 1, "admitted")
    s.at(5).event("cancel", to_state="cancelled", actor="operator")
    s.attempts[1].worker_id = "worker-a"
    s.event("claim", 1, "claimed", accepted=plant, generation=1, actor="worker", worker_id="worker-a")
    s.event("cancel", 1, "cancelling", actor="operator")
    if plant:
        s.at(6).fenced("cancel_acknowledged", 1, 1, "reconciling")
    else:
        s.event("cancel_unclaimed", 1, "reconciling")
    return s.event("effects_absent", 1, "cancelled").retire()


def domain_retries_exhausted(s: Story, plant: bool) -> Story:
    """A fifth Attempt after four validation failures, which allow three retries (near miss: the fourth was a repository failure)."""
    s.created().dispatched("hypothesis 1").running(1, 1).at(5).failed(1, 1, "validation", "signature 1")
    for number in range(2, 5):
        s.at(10 * number).retried(number, f"hypothesis {number}", backoff_s=0.0).running(number, number)
        domain = "repository" if number == 4 and not plant else "validation"
        s.at(10 * number + 5).failed(number, number, domain, f"signature {number}")
    s.at(50).retried(5, "hypothesis 5", backoff_s=0.0).running(5, 5)
    return s.at(55).succeeded(5, 5).retire()


def intent_lost(s: Story, plant: bool) -> Story:
    """The grant was accepted and the effect landed, but the task retires with no intent for its key (near miss: the intent kept)."""
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, "create-pr:task-1:sha-1").landed("create-pr:task-1:sha-1", "create-pr-1")
    if plant:
        s.intents.clear()
    return s.at(10).succeeded(1, 1).retire()


def too_many_attempts(s: Story, plant: bool) -> Story:
    """Two Attempts under a budget of one (near miss: a budget of two)."""
    s.task.budget = Budget(attempts_max=1 if plant else 2)
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    s.at(20).retried(2, "the fixture leaks a port").running(2, 2)
    return s.at(25).succeeded(2, 2).retire()


def task_cost_over_budget(s: Story, plant: bool) -> Story:
    """Two Attempts of $3.00 each under a task budget of $5.00 (near miss: $2.50 each)."""
    s.task.budget = Budget(cost_max_usd=5.0)
    spend = 3.0 if plant else 2.5
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    s.at(20).retried(2, "the fixture leaks a port").running(2, 2)
    s.attempts[1].cost_usd = s.attempts[2].cost_usd = spend
    s.task.cost_usd = 2 * spend
    return s.at(25).succeeded(2, 2).retire()


def retry_after_a_success(s: Story, plant: bool) -> Story:
    """A reviewer's rejection is answered by a retry of an Attempt that succeeded (near miss: Attempt 1 failed validation)."""
    s.created().dispatched("hypothesis one").running(1, 1).at(5)
    if plant:
        s.fenced("complete", 1, 1, "verifying").event("verified", 1, "succeeded", actor="provider")
        s.event("attempt_succeeded", to_state="review").event("decide", 1).event("request_changes", to_state="ready", actor="operator")
    else:
        s.failed(1, 1, "validation", "test_port fails")
    s.at(20).retried(2, "hypothesis two", backoff_s=0.0).running(2, 2)
    return s.at(25).succeeded(2, 2).retire()


def attempt_without_its_event(s: Story, plant: bool) -> Story:
    """Attempt 2 is on record but no append event made it (near miss: its append event is there)."""
    s.created().dispatched().running(1, 1).at(10).failed(1, 1)
    if plant:
        s.at(20).event("retry", to_state="in_progress", detail=REASON)
        s.attempts[2] = Attempt("task-1#2", "task-1", 2, "queued", 20.0, "the fixture leaks a port", "task-1#1", REASON, backoff_s=2.0)
    else:
        s.at(20).retried(2, "the fixture leaks a port")
    return s.running(2, 2).at(25).succeeded(2, 2).retire()


def succeeded_on_the_workers_word(s: Story, plant: bool) -> Story:
    """The worker's completion lands the Attempt in succeeded itself: no verification, no evidence."""
    s.created().dispatched().running(1, 1)
    if not plant:
        return s.at(5).succeeded(1, 1).retire()
    s.at(5).fenced("complete", 1, 1, "succeeded")
    s.event("attempt_succeeded", to_state="review").event("decide", 1).event("approve", to_state="done", actor="operator")
    return s.retire()


def succeeded_on_a_failing_verdict(s: Story, plant: bool) -> Story:
    """The provider's failing verdict lands the Attempt in succeeded: evidence recorded, but evidence of a failure."""
    s.created().dispatched().running(1, 1)
    if not plant:
        return s.at(5).succeeded(1, 1).retire()
    s.attempts[1].evidence = "ci failed on the head"
    s.at(5).fenced("complete", 1, 1, "verifying").event("verification_failed", 1, "succeeded", actor="provider")
    s.event("attempt_succeeded", to_state="review").event("decide", 1).event("approve", to_state="done", actor="operator")
    return s.retire()


def findings_not_recorded(s: Story, plant: bool) -> Story:
    """Reconciliation fails the expired Attempt but records nothing of what it found: Attempt 2 has nothing to resume from."""
    s.created().dispatched().running(1, 1).at(31).expired(1).event("decide", 1)
    if plant:
        s.attempts[1].reconciliation = None
    return s.at(40).escalated(1).retire()


def escalated_without_its_decision(s: Story, plant: bool) -> Story:
    """The task rests escalated while its record still says the loop decided to retry: a human reads the wrong reason."""
    s.created().dispatched().running(1, 1).at(31).expired(1).event("decide", 1).at(40).escalated(1)
    if plant:
        s.task.decision = "retry"
    return s.retire()


def cancelled_unasked(s: Story, plant: bool) -> Story:
    """Reconciliation ends an expired Attempt cancelled although nobody asked for a cancellation."""
    s.created().dispatched().running(1, 1)
    if not plant:
        return s.at(31).expired(1).event("decide", 1).at(40).escalated(1).retire()
    s.at(31).event("expire", 1, "suspect", actor="reaper").event("reconcile", 1, "reconciling")
    s.event("effects_absent", 1, "cancelled").event("decide", 1)
    return s.at(40).escalated(1).retire()


def failed_unclassified(s: Story, plant: bool) -> Story:
    """An Attempt ends failed with no failure domain on its record: the retry policy has nothing to read."""
    s.created().dispatched().running(1, 1).at(31).expired(1).event("decide", 1)
    if plant:
        s.attempts[1].failure_domain = None
    return s.at(40).escalated(1).retire()


def review_of_a_failed_attempt(s: Story, plant: bool) -> Story:
    """The task goes to review while its latest Attempt failed: a human is asked to approve work that never succeeded."""
    s.created().dispatched().running(1, 1).at(31).expired(1).event("decide", 1)
    if plant:
        s.at(40).event("attempt_succeeded", to_state="review").event("approve", to_state="done", actor="operator")
        return s.retire()
    return s.at(40).escalated(1).retire()


def done_without_review(s: Story, plant: bool) -> Story:
    """The orchestrator marks the task done itself, straight from in_progress: nobody reviewed it."""
    s.created().dispatched().running(1, 1)
    if not plant:
        return s.at(5).succeeded(1, 1).retire()
    s.at(5).fenced("complete", 1, 1, "verifying").event("verified", 1, "succeeded", actor="provider")
    return s.event("attempt_succeeded", to_state="done").event("decide", 1).retire()


def failure_report_keeps_the_lease(s: Story, plant: bool) -> Story:
    """The worker's failure report moves its Attempt into Reconciling with the lease still current until t=30 (near miss: the
    report ends the lease at t=5)."""
    s.created().dispatched().running(1, 1)
    attempt = s.attempts[1]
    attempt.failure_domain, attempt.failure_signature = "executor", "worker crashed"
    s.at(5).fenced("report_failure", 1, 1, "reconciling", expires_at=30.0 if plant else 5.0)
    return s.event("effects_absent", 1, "failed").event("decide", 1).escalated(1).retire()


def report_leaves_it_running(s: Story, plant: bool) -> Story:
    """The failure report ends the lease at t=5 but leaves the Attempt running (near miss: it leaves for Reconciling)."""
    s.created().dispatched().running(1, 1)
    attempt = s.attempts[1]
    attempt.failure_domain, attempt.failure_signature = "executor", "worker crashed"
    s.at(5).fenced("report_failure", 1, 1, None if plant else "reconciling", expires_at=5.0)
    if plant:
        return s.at(31).expired(1).event("decide", 1).escalated(1).retire()
    return s.event("effects_absent", 1, "failed").event("decide", 1).escalated(1).retire()


def receipt_claims_again(s: Story, plant: bool) -> Story:
    """A receipt sends a running Attempt back to claimed (near miss: it writes in place)."""
    s.created().dispatched().running(1, 1)
    s.at(5).fenced("record_receipt", 1, 1, "claimed" if plant else None)
    if plant:
        s.fenced("start", 1, 1, "running")
    return s.at(10).succeeded(1, 1).retire()


def verifying_without_a_result(s: Story, plant: bool) -> Story:
    """A renewal moves the Attempt into verifying: verification then judges a result nobody reported (near miss: complete)."""
    s.created().dispatched().running(1, 1)
    s.at(5).fenced("renew" if plant else "complete", 1, 1, "verifying")
    s.event("verified", 1, "succeeded", actor="provider")
    s.event("attempt_succeeded", to_state="review").event("decide", 1).event("approve", to_state="done", actor="operator")
    return s.retire()


def blocked_on_a_failing_verdict(s: Story, plant: bool) -> Story:
    """A failing CI verdict blocks the Attempt: blocked with evidence, but of a failure, not of a contradiction (near miss:
    two pull requests for one key, contradictory)."""
    s.created().dispatched().running(1, 1).at(5).fenced("complete", 1, 1, "verifying")
    attempt = s.attempts[1]
    if plant:
        attempt.failure_domain, attempt.failure_signature = "validation", "test_port fails"
        s.event("verification_failed", 1, "blocked", actor="provider")
    else:
        attempt.failure_domain, attempt.failure_signature = "contradictory_evidence", "evidence:create-pr: 2 effects"
        attempt.evidence = "create-pr: 2 effects"
        s.event("evidence_contradictory", 1, "blocked")
    return s.event("attempt_blocked", to_state="blocked").event("decide", 1).retire()


def quarantined_at_first_failure(s: Story, plant: bool) -> Story:
    """Attempt 1's first failure is dead-lettered: its signature repeats nothing (near miss: Attempt 2 repeats Attempt 1's)."""
    s.created().dispatched().running(1, 1)
    attempt = s.attempts[1]
    attempt.failure_domain, attempt.failure_signature = "validation", "test_port fails"
    s.at(5).fenced("report_failure", 1, 1, "reconciling")
    if plant:
        s.event("effects_absent", 1, "quarantined").event("attempt_quarantined", to_state="quarantined").event("decide", 1)
        return s.retire()
    s.event("effects_absent", 1, "failed").event("decide", 1)
    s.at(10).retried(2, "the port is reused without SO_REUSEADDR", backoff_s=0.0).running(2, 2)
    s.attempts[2].failure_domain, s.attempts[2].failure_signature = "validation", "test_port fails"
    s.at(15).fenced("report_failure", 2, 2, "reconciling").event("effects_absent", 2, "quarantined")
    return s.event("attempt_quarantined", to_state="quarantined").event("decide", 2).retire()


def suspect_while_renewed(s: Story, plant: bool) -> Story:
    """The reaper makes the Attempt suspect at t=40 although a renewal at t=20 gave it a lease until t=50 (near miss: t=50)."""
    s.created().dispatched().running(1, 1).at(20).fenced("renew", 1, 1)
    return s.at(40 if plant else 50).expired(1).event("decide", 1).escalated(1).retire()


def failure_report_straight_to_failed(s: Story, plant: bool) -> Story:
    """The worker's failure report ends the Attempt failed at once: a call of its may still land (near miss: Reconciling)."""
    s.created().dispatched().running(1, 1)
    attempt = s.attempts[1]
    attempt.failure_domain, attempt.failure_signature = "executor", "worker crashed"
    if plant:
        s.at(5).fenced("report_failure", 1, 1, "failed")
    else:
        s.at(5).fenced("report_failure", 1, 1, "reconciling").event("effects_absent", 1, "failed")
    return s.event("decide", 1).escalated(1).retire()


def admitted_on_a_deferral(s: Story, plant: bool) -> Story:
    """Admission defers the Attempt, and the deferral moves it to admitted: past the capacity it was deferred for
    (near miss: the deferral keeps it queued, and a later `admit` admits it)."""
    s.created().dispatched()
    if plant:
        s.event("defer", 1, "admitted")
    else:
        s.event("defer", 1).event("admit", 1, "admitted")
    s.attempts[1].claimed_at, s.attempts[1].generation, s.attempts[1].worker_id = 0.0, 1, "worker-a"
    s.event("claim", 1, "claimed", generation=1, actor="worker", worker_id="worker-a")
    s.event("start", 1, "running", generation=1, actor="worker", worker_id="worker-a")
    return s.at(10).succeeded(1, 1).retire()


def started_twice(s: Story, plant: bool) -> Story:
    """A duplicated start is accepted on the running Attempt, stamping its start again (near miss: it is refused)."""
    s.created().dispatched().running(1, 1)
    s.at(3).fenced("start", 1, 1, accepted=plant, code="no_row")
    return s.at(10).succeeded(1, 1).retire()


def cancellation_answered_by_a_failure_report(s: Story, plant: bool) -> Story:
    """A cancelling Attempt leaves Cancelling on its worker's failure report, neither acknowledged nor timed out (near
    miss: the report is refused, and the worker acknowledges)."""
    s.created().dispatched().running(1, 1)
    s.attempts[1].failure_domain, s.attempts[1].failure_signature = "executor", "worker crashed"
    s.at(5).event("cancel", 1, "cancelling", actor="operator")
    if plant:
        s.at(6).fenced("report_failure", 1, 1, "reconciling")
    else:
        s.at(6).fenced("report_failure", 1, 1, accepted=False, code="no_row").fenced("cancel_acknowledged", 1, 1, "reconciling")
    s.event("effects_absent", 1, "cancelled")
    return s.event("cancel", to_state="cancelled", actor="operator").retire()


def acknowledgement_refused_within_the_lease(s: Story, plant: bool) -> Story:
    """The holder acknowledges its cancellation at t=12, within the lease its claim gave it until t=30, and is refused; the
    cancellation then times out (near miss: the acknowledgement comes at t=31, after the lease ran out)."""
    s.created().dispatched().running(1, 1)
    s.at(10).event("cancel", 1, "cancelling", actor="operator")
    s.at(12 if plant else 31).fenced("cancel_acknowledged", 1, 1, accepted=False, code="guard" if plant else "expired_lease")
    s.at(32).event("cancel_timed_out", 1, "reconciling", actor="reaper").event("effects_absent", 1, "cancelled")
    return s.event("cancel", to_state="cancelled", actor="operator").retire()


def cancelling_by_the_orchestrator(s: Story, plant: bool) -> Story:
    """The orchestrator puts a running Attempt into cancelling on its own (near miss: the operator's cancel)."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("cancel", 1, "cancelling", actor="orchestrator" if plant else "operator")
    s.at(6).fenced("cancel_acknowledged", 1, 1, "reconciling").event("effects_absent", 1, "cancelled")
    return s.event("cancel", to_state="cancelled", actor="operator").retire()


def done_on_a_rejection(s: Story, plant: bool) -> Story:
    """The reviewer's rejection (`request_changes`) lands the task in done (near miss: the reviewer's approval)."""
    s.created().dispatched().running(1, 1).at(5).fenced("complete", 1, 1, "verifying")
    s.event("verified", 1, "succeeded", actor="provider").event("attempt_succeeded", to_state="review").event("decide", 1)
    return s.event("request_changes" if plant else "approve", to_state="done", actor="operator").retire()


def accepted_again(s: Story, plant: bool) -> Story:
    """An operator accepts the task a second time while it is in progress, sending it back to ready (near miss: refused)."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("accept", to_state="ready", actor="operator", accepted=plant)
    return s.at(10).succeeded(1, 1).retire()


def released_out_of_turn(s: Story, plant: bool) -> Story:
    """An operator releases a task that was never at rest, straight from in progress (near miss: refused)."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("release", to_state="ready", actor="operator", accepted=plant)
    return s.at(10).succeeded(1, 1).retire()


def run_time_not_stamped(s: Story, plant: bool) -> Story:
    """The lease runs out at t=30 after a run that began at t=0, and the Attempt's record says it ran 0 s: the elapsed-time
    budget never sees the run (near miss: 30 s stamped when the reaper ended it)."""
    s.created().dispatched().running(1, 1).at(31).expired(1)
    if plant:
        s.attempts[1].elapsed_s = 0.0
    return s.event("decide", 1).at(40).escalated(1).retire()


def release_not_counted(s: Story, plant: bool) -> Story:
    """An operator releases an escalated task, and its record counts no interruption (near miss: it counts one)."""
    s.created().dispatched().running(1, 1).at(31).expired(1).event("decide", 1).escalated(1)
    s.at(40).event("release", to_state="ready", actor="operator", detail="the flaky port is fixed upstream")
    if plant:
        s.task.interruptions = 0
    s.task.decision, s.task.decision_reason = "release", "the flaky port is fixed upstream"
    return s.at(41).event("cancel", to_state="cancelled", actor="operator").retire()


def released_into_progress(s: Story, plant: bool) -> Story:
    """A release moves the escalated task straight to in progress, with no Attempt sent to work (near miss: to ready)."""
    s.created().dispatched().running(1, 1).at(31).expired(1).event("decide", 1).escalated(1)
    s.at(40).event("release", to_state="in_progress" if plant else "ready", actor="operator", detail="fixed upstream")
    s.task.decision, s.task.decision_reason = "release", "fixed upstream"
    return s.at(41).event("cancel", to_state="cancelled", actor="operator").retire()


def acknowledgement_without_words(s: Story, plant: bool) -> Story:
    """The holder's acknowledgement of a cancellation is recorded with no words (near miss: "acknowledged by the executor")."""
    s.created().dispatched().running(1, 1)
    s.at(5).event("cancel", 1, "cancelling", actor="operator")
    s.at(6).event("cancel_acknowledged", 1, "reconciling", generation=1, actor="worker", worker_id="worker-a", words=not plant)
    s.event("effects_absent", 1, "cancelled")
    return s.event("cancel", to_state="cancelled", actor="operator").retire()


def deleted_pull_request_replaced(s: Story, plant: bool) -> Story:
    """Two pull requests for one head; the near miss: the first was deleted at the code host by someone outside first."""
    key = "create-pr:task-1:sha-1"
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, key).landed(key, "create-pr-1")
    if not plant:
        s.history.append(Fault(6.0, "deletion", "code_host", 6.0, "create-pr-1 is deleted", (("provider_id", "create-pr-1"),)))
    s.at(31).expired(1).event("decide", 1)
    s.at(40).retried(2, "the fixture leaks a port").running(2, 2, "worker-b").granted(2, 2, key).landed(key, "create-pr-2")
    return s.at(45).succeeded(2, 2).retire()


PLANTED = {
    "single_owner": (
        (claim_during_a_live_lease, "two owners"),
        (claim_during_a_renewed_lease, "until t=55.00"),
    ),
    "fenced_writes": (
        (stale_completion_accepted, "presented generation 1"),
        (write_after_expiry_accepted, "after its lease expired"),
        (generation_reissued, "not above 1"),
    ),
    "append_only_attempts": (
        (failed_attempt_rewritten, "terminal task-1#1 was changed by retry"),
        (retry_reason_too_short, "shorter than 10 characters"),
        (attempt_number_skipped, "numbers must run 1..N"),
        (predecessor_misnamed, "names None as its predecessor"),
    ),
    "suspect_then_reconcile": (
        (suspect_decided_without_reconciling, "without reconciling"),
        (expiry_straight_to_failed, "not suspect"),
    ),
    "one_effect_per_operation": (
        (second_pull_request_for_one_head, "two effects"),
        (deleted_pull_request_replaced, "two effects: create-pr-1 and create-pr-2"),
    ),
    "no_lost_tasks": (
        (queued_forever, "waited 500.00s"),
        (admitted_after_its_deadline, "after its deadline t=100.00 passed"),
    ),
    "budgets_hold": (
        (attempt_spend_over_ceiling, "per-Attempt ceiling"),
        (retry_after_elapsed_budget, "elapsed budget"),
        (too_many_attempts, "2 Attempts, budget 1"),
        (task_cost_over_budget, "cost $6.00, budget $5.00"),
    ),
    "cancel_is_final": (
        (grant_after_cancellation, "grant_tool accepted for task-1#1 after task-1 was cancelled"),
        (claim_after_task_cancelled, "claim accepted for task-1#1 after task-1 was cancelled"),
        (cancel_as_a_flag, "left task-1#1 verifying after its cancellation"),
        (cancelled_without_reconciling, "ended cancelled without reconciling"),
    ),
    "classified_retry": (
        (validation_retried_unchanged, "need a changed hypothesis"),
        (transient_failure_retried_at_once, "only after a backoff"),
        (repeated_signature_retried, "repeats past 1"),
        (unauthorized_retried, "respond stop"),
        (domain_retries_exhausted, "allows 3 automatic retries"),
        (retry_after_a_success, "ended succeeded, not failed"),
    ),
    "complete_audit": (
        (effect_without_a_grant, "bypassed the tool gateway"),
        (effect_under_a_worker_minted_key, "no accepted grant minted"),
        (intent_lost, "retired with no intent"),
        (effect_after_retirement, "no live record"),
        (state_change_without_event, "last accepted task event"),
        (attempt_without_its_event, "never appended by an event"),
    ),
    "truthful_states": (
        (succeeded_on_the_workers_word, "entered succeeded by the worker, not the provider"),
        (succeeded_on_a_failing_verdict, "succeeded on verification_failed"),
        (cancelled_unasked, "no cancellation was asked of it"),
        (findings_not_recorded, "after reconciling, with no findings recorded"),
        (escalated_without_its_decision, "its recorded decision is 'retry'"),
        (failed_unclassified, "ended failed with no classified failure domain"),
        (review_of_a_failed_attempt, "entered review while its latest Attempt is failed"),
        (done_without_review, "entered done by the orchestrator"),
        (failure_report_keeps_the_lease, "with its lease still current until t=30.00"),
        (report_leaves_it_running, "stayed running on the worker's report_failure with its lease ended"),
        (receipt_claims_again, "entered claimed from running, not from admitted"),
        (verifying_without_a_result, "no result of its holder's is recorded"),
        (blocked_on_a_failing_verdict, "blocked without contradictory evidence"),
        (quarantined_at_first_failure, "does not repeat the Attempts before it"),
        (suspect_while_renewed, "gave it a lease until t=50.00"),
        (failure_report_straight_to_failed, "straight from running"),
        (cancelling_by_the_orchestrator, "entered cancelling by the orchestrator"),
        (done_on_a_rejection, "entered done on request_changes"),
        (accepted_again, "accepted again, from in_progress"),
        (released_out_of_turn, "released from in_progress"),
        (admitted_on_a_deferral, "entered admitted on defer, not on admit"),
        (started_twice, "started again while running"),
        (cancellation_answered_by_a_failure_report, "left Cancelling on report_failure"),
        (acknowledgement_refused_within_the_lease, "refused its cancel_acknowledged while cancelling"),
        (run_time_not_stamped, "its record says it ran 0 s"),
        (release_not_counted, "released 1 times, but its record counts 0 interruptions"),
        (released_into_progress, "entered in_progress on release, not on dispatch or retry"),
        (acknowledgement_without_words, "with no words recorded for it"),
    ),
}
CASES = [pytest.param(name, build, phrase, id=build.__name__) for name, planted in PLANTED.items() for build, phrase in planted]


@pytest.mark.parametrize(("keyless", "late"), [(True, True), (True, False), (False, True)])
def test_a_call_landing_after_its_reconciliation_concluded_contradicts_the_findings_only_where_keys_are_ignored(keyless, late):
    """Goal: at a code host that ignores keys, a call of Attempt 1 lands after reconciliation concluded that every call had
    settled: the findings were false (truthful_states alone says so). Near misses: the call lands before the conclusion; or
    the code host honours keys, where reconciliation may conclude with a call in flight by design."""
    context = CheckContext(30.0, 5.0, 10, frozenset({"code_host"}) if keyless else frozenset())
    s = Story(History(all_checkers(context)))
    key = "create-pr:task-1:sha-1"
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, key)
    if not late:
        s.at(20).landed(key, "create-pr-1")
    s.at(31).event("expire", 1, "suspect", actor="reaper").event("reconcile", 1, "reconciling")
    s.attempts[1].failure_domain, s.attempts[1].failure_signature = "executor", "executor:no effect landed"
    s.event("effects_absent" if late else "effects_landed", 1, "failed")
    if late:
        s.at(32).landed(key, "create-pr-1")
    s.event("decide", 1).at(40).escalated(1).retire()
    expected = {"truthful_states"} if keyless and late else set()
    assert violated(s.history) == expected, s.history.verdicts()
    if expected:
        assert "after task-1#1's reconciliation concluded" in "\n".join(s.history.verdicts()["truthful_states"].example)


def test_an_acknowledgement_refused_after_the_run_ended_is_no_violation():
    """Goal: the holder completes (its lease ends with the run), an operator then cancels the verifying Attempt, and the
    holder's acknowledgement is refused as late at once: the lease its claim promised until t=30 ended with the run."""
    s = story().created().dispatched().running(1, 1)
    s.at(5).fenced("complete", 1, 1, "verifying", expires_at=5.0)
    s.event("cancel", 1, "cancelling", actor="operator")
    s.at(6).fenced("cancel_acknowledged", 1, 1, accepted=False, code="expired_lease")
    s.at(26).event("cancel_timed_out", 1, "reconciling", actor="reaper").event("effects_absent", 1, "cancelled")
    s.event("cancel", to_state="cancelled", actor="operator").retire()
    verdict = s.history.verdicts()["truthful_states"]
    assert verdict.status == OK, verdict.example


def test_a_call_landing_after_contradictory_evidence_is_no_violation_even_where_keys_are_ignored():
    """Goal: contradictory evidence ends Reconciling at once, with a call perhaps still in flight, and claims nothing of
    the calls: one of them landing afterwards contradicts no finding (only effects_landed and effects_absent settle)."""
    s = Story(History(all_checkers(CheckContext(30.0, 5.0, 10, frozenset({"code_host"})))))
    key = "create-pr:task-1:sha-2"
    s.created().dispatched().running(1, 1).at(5).granted(1, 1, key)
    s.at(31).event("expire", 1, "suspect", actor="reaper").event("reconcile", 1, "reconciling")
    s.attempts[1].failure_domain, s.attempts[1].evidence = "contradictory_evidence", "the receipted pull request is gone"
    s.attempts[1].reconciliation = "contradictory"  # what reconciliation found, recorded with the evidence
    s.event("evidence_contradictory", 1, "blocked").at(32).landed(key, "create-pr-2")
    s.event("attempt_blocked", to_state="blocked").event("decide", 1).retire()
    verdict = s.history.verdicts()["truthful_states"]
    assert verdict.status == OK, verdict.example


def test_the_fence_refusals_the_checkers_name_are_the_cores():
    """Goal: the checkers restate the codes of a fence's refusal (they read no core logic); they must be the core's."""
    from shiftchange.checkers.rules import FENCE_REFUSALS
    from shiftchange.core.results import FENCE_CODES

    assert FENCE_REFUSALS == FENCE_CODES


def test_every_checker_has_a_planted_violation():
    """Goal: no checker goes untested: each invariant has at least one planted violation below."""
    assert tuple(PLANTED) == INVARIANTS


@pytest.mark.parametrize(("invariant", "build", "phrase"), CASES)
def test_a_planted_violation_is_reported_by_its_checker_alone(invariant, build, phrase):
    """Goal: the anti-pattern's signature makes exactly its checker report violated, saying what broke, in a short example."""
    history = build(story(), plant=True).history
    assert violated(history) == {invariant}, history.verdicts()
    verdict = history.verdicts()[invariant]
    assert verdict.violations >= 1
    assert phrase in "\n".join(verdict.example), verdict.example
    assert 2 <= len(verdict.example) <= 8, verdict.example
    assert any(line.startswith("t=") for line in verdict.example), verdict.example  # at least one entry, rendered by describe


def test_a_quarantine_is_judged_under_the_budget_it_was_decided_by_not_one_a_release_gave_later():
    """Goal: Attempt 2 repeats Attempt 1's signature under a budget of one repeat, and is quarantined; an operator then
    releases the task with room for three. The quarantine was right when it was made: no violation."""
    s = story()
    s.created().dispatched().running(1, 1).at(5).failed(1, 1, "validation", "test_port fails")
    s.at(10).retried(2, "the port is reused without SO_REUSEADDR", backoff_s=0.0).running(2, 2)
    s.attempts[2].failure_domain, s.attempts[2].failure_signature = "validation", "test_port fails"
    s.at(15).fenced("report_failure", 2, 2, "reconciling").event("effects_absent", 2, "quarantined")
    s.event("attempt_quarantined", to_state="quarantined").event("decide", 2)
    s.task.budget = Budget(repeated_signatures_max=3)
    s.at(20).event("release", to_state="ready", actor="operator", detail="the flaky port is fixed upstream")
    s.task.decision, s.task.decision_reason = "release", "the flaky port is fixed upstream"
    s.at(25).event("cancel", to_state="cancelled", actor="operator")
    verdict = s.retire().history.verdicts()["truthful_states"]
    assert verdict.status == OK, verdict.example


@pytest.mark.parametrize("kind", ["accept", "release"])
def test_an_operator_verb_out_of_turn_is_judged_even_when_the_task_stays_where_it_is(kind):
    """Goal: an accept or a release accepted on a task already ready leaves it ready (no state entered), and is still the
    operator's verb applied where it means nothing; the same history without it holds."""
    s = story().created()
    s.at(1).event(kind, to_state="ready", actor="operator")
    s.dispatched().running(1, 1).at(10).succeeded(1, 1).retire()
    verdict = s.history.verdicts()["truthful_states"]
    assert verdict.status == VIOLATED and "from ready" in "\n".join(verdict.example), verdict.example
    clean_history = story().created().dispatched().running(1, 1).at(10).succeeded(1, 1).retire().history
    assert clean_history.verdicts()["truthful_states"].status == OK


def test_a_reopened_terminal_attempt_is_one_violation_not_one_per_later_step():
    """Goal: the count says how many offences there were: one rewrite of failed Attempt 1, not one per step it then took."""
    verdict = failed_attempt_rewritten(story(), plant=True).history.verdicts()["append_only_attempts"]
    assert verdict.violations == 1
    assert "failed->queued" in verdict.example[-1]


@pytest.mark.parametrize(("invariant", "build", "phrase"), CASES)
def test_the_near_miss_beside_each_planted_violation_holds(invariant, build, phrase):
    """Goal: the nearest correct history (a refused stale fence, a claim the instant a lease expired) is judged ok by every checker."""
    history = build(story(), plant=False).history
    assert {name: verdict.status for name, verdict in history.verdicts().items()} == dict.fromkeys(INVARIANTS, OK)


# ------------------------------------------------------------- unknown


def test_every_checker_is_unknown_on_an_empty_history():
    """Goal: a checker that saw nothing says unknown, and why, instead of a vacuous ok."""
    verdicts = History(all_checkers(CONTEXT)).verdicts()
    assert {name: verdict.status for name, verdict in verdicts.items()} == dict.fromkeys(INVARIANTS, UNKNOWN)
    assert all(verdict.example for verdict in verdicts.values())


def test_checkers_of_final_records_are_unknown_when_no_task_retired():
    """Goal: with events but no Retired entry, the checkers of final records cannot tell and say so; the event checkers judge."""
    s = clean_start(story())
    verdicts = s.history.verdicts()
    final = {"no_lost_tasks", "budgets_hold", "classified_retry", "complete_audit", "truthful_states"}
    assert {name for name, verdict in verdicts.items() if verdict.status == UNKNOWN} == final
    assert "no task retired" in verdicts["no_lost_tasks"].example[0]
    assert {name for name, verdict in verdicts.items() if verdict.status == OK} == set(INVARIANTS) - final


def test_checkers_of_final_records_are_unknown_while_a_task_never_retired():
    """Goal: one task retired and one still live at the verdict: its final records were never read, so no ok."""
    history = History(all_checkers(CONTEXT))
    clean(Story(history, "task-1"))
    clean_start(Story(history, "task-2"))
    verdict = history.verdicts()["no_lost_tasks"]
    assert verdict.status == UNKNOWN
    assert "task-2" in verdict.example[0] and "never retired" in verdict.example[0]


# ------------------------------------------------------- bounded memory


def test_checkers_forget_each_task_when_it_retires():
    """Goal: memory follows the live tasks, not the run: 2000 tasks, ten live at a time, and nothing kept once all retired."""
    history = History(all_checkers(CONTEXT), tail_max=100)
    checkers = history.checkers
    for batch in range(200):
        stories = [clean_start(Story(history, f"task-{batch}-{index}")) for index in range(10)]
        # A rule that reads events keeps each live task's state; one that does not keeps at most that.
        assert all(checker.live() == 10 if checker._follows_events else checker.live() <= 10 for checker in checkers)
        assert sum(checker._follows_events for checker in checkers) >= 7
        for started in stories:
            clean_finish(started)
        assert [checker.live() for checker in checkers] == [0] * len(checkers)
    verdicts = history.verdicts()
    assert {name: verdict.status for name, verdict in verdicts.items()} == dict.fromkeys(INVARIANTS, OK)
    assert len(history.tail) == 100


# --------------------------------------------------------- a crashing checker


class Exploding:
    """A checker with a bug: it raises on the first event it reads."""

    name = "exploding"

    def event(self, event: Event) -> None:
        raise KeyError(event.attempt_id)

    def landed(self, landed: Landed) -> None: ...

    def fault(self, fault: Fault) -> None: ...

    def retired(self, retired: Retired) -> None: ...

    def verdict(self) -> Verdict:
        return Verdict(self.name, OK, 0, ())


def test_a_crashing_checker_is_unknown_and_the_others_still_judge():
    """Goal: a checker that raises yields unknown with the error, never a crashed run, and the ten still reach their verdicts."""
    history = History([Exploding(), *all_checkers(CONTEXT)])
    clean(Story(history))
    verdicts = history.verdicts()
    assert verdicts["exploding"].status == UNKNOWN
    assert "KeyError" in verdicts["exploding"].example[0]
    assert {name: verdicts[name].status for name in INVARIANTS} == dict.fromkeys(INVARIANTS, OK)


# ------------------------------------------------------------ the shared measures


class MeasuresFeed:
    """Hands a `History`'s entries to the shared measures, as the simulator's metrics do (a fold, not a checker: no verdict)."""

    name = "measures"

    def __init__(self, measures: Measures) -> None:
        self.measures = measures

    def event(self, event: Event) -> None:
        self.measures.event(event)

    def landed(self, landed: Landed) -> None:
        self.measures.landed(landed)

    def fault(self, fault: Fault) -> None: ...

    def retired(self, retired: Retired) -> None:
        self.measures.retired(retired)

    def verdict(self) -> Verdict:
        return Verdict(self.name, OK, 0, ())


def test_the_shared_measures_time_detection_and_recovery_from_the_strike_and_count_distinct_duplicates():
    """Goal: detect runs from the strike to its Attempt's expire, recover to the task's next claim of another Attempt; a repeated
    provider id is the same effect, a second one for the same operation a duplicate; a retired task is forgotten."""
    measures = Measures()
    s = Story(History([MeasuresFeed(measures)]))
    s.created().dispatched().at(1.0).running(1, 1)
    strike = measures.struck("task-1", "task-1#1", 5.0)
    s.at(9.5).expired(1).at(10.0).retried(2, "the fixture leaks a port").at(12.0).running(2, 2)
    assert (strike.detect_s, strike.recover_s) == (4.5, 7.0)
    unseen = measures.struck("task-1", "task-1#2", 13.0)
    s.at(14.0).granted(2, 2, "create-pr:task-1:sha-1").landed("create-pr:task-1:sha-1", "pr-1")
    s.landed("create-pr:task-1:sha-1", "pr-1")
    assert measures.duplicate_effects == 0, "the provider answered a repeated key with the effect it has"
    s.landed("create-pr:task-1:sha-1:again", "pr-2")
    assert measures.duplicate_effects == 1
    assert unseen.detect_s is None and unseen.recover_s is None, "nothing expired or reclaimed after that strike"
    summary = measures.summary()
    assert summary == {
        "strikes": 2,
        "detect_count": 1,
        "detect_s_mean": 4.5,
        "detect_s_p50": 4.5,
        "detect_s_max": 4.5,
        "recover_count": 1,
        "recover_s_mean": 7.0,
        "recover_s_p50": 7.0,
        "recover_s_max": 7.0,
        "duplicate_effects": 1,
    }
    assert measures.live() == 1
    s.retire()
    assert measures.live() == 0, "a retired task's strikes and effects are dropped"


def test_the_simulator_reports_the_shared_measures_of_its_crashes():
    """Goal: the simulator's crash figures are the shared fold's, fed the crashes its workers report."""
    from shiftchange.sim.metrics import Metrics

    metrics = Metrics(lease_ttl_s=30.0)
    s = Story(History([MeasuresFeed(metrics.measures)]))
    s.created().dispatched().at(1.0).running(1, 1)
    metrics.crashed("worker-a", "task-1#1", 2.0)
    s.at(32.0).expired(1).at(33.0).retried(2, "the fixture leaks a port").at(40.0).running(2, 2)
    summary = metrics.summary(40.0, {})
    assert (summary["crashes_holding"], summary["crash_detect_count"], summary["crash_detect_s_mean"]) == (1, 1, 30.0)
    assert (summary["crash_recover_count"], summary["crash_recover_s_mean"], summary["crash_recover_s_max"]) == (1, 38.0, 38.0)


def test_a_strike_given_ahead_of_the_history_counts_only_what_came_after_it():
    """Goal: chaos reads a run back and gives each strike before the events: an earlier claim or expiry does not count for it."""
    measures = Measures()
    strike = measures.struck("task-1", "task-1#1", 5.0)
    s = Story(History([MeasuresFeed(measures)]))
    s.created().dispatched().at(1.0).running(1, 1)  # claimed before the strike: no recovery
    s.at(9.0).expired(1).at(10.0).retried(2, "the fixture leaks a port").at(13.0).running(2, 2)
    assert (strike.detect_s, strike.recover_s) == (4.0, 8.0)
