"""The agent's worker protocol, command by answer: the refusal table, retries inside an Attempt, renewals, resuming.

Each test drives one `Agent` by hand with answers of the core's own result
types (`Refused`, `Accepted`, `Grant`, `Renewal`), so what is asserted is the
agent's decision alone, with no driver, network or store in between.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from shiftchange.agent import (
    Agent,
    AgentConfig,
    Call,
    ChapterWorkflow,
    Look,
    Looked,
    OperationsWorkflow,
    Perform,
    Stop,
    Wait,
    Work,
    WorkerSeams,
    head_sha,
)
from shiftchange.core import Accepted, Backoff, BackoffConfig, Effect, Grant, ProviderRefused, ProviderTimeout, Refused, Renewal

CONFIG = AgentConfig(call_deadline_s=30.0, gateway_retries_max=2, gateway_retry_s=2.0)
BACKOFF = BackoffConfig(strategy="exponential", base_s=1.0, cap_s=8.0)
"""Exponential backoff draws nothing, so a test can name each wait: 1, 2, 4, 8 s."""
FENCE = ("task-1#2", 2, "token")
TASK, HYPOTHESIS = "task-1", "hypothesis 1"
ONE_EFFECT = OperationsWorkflow(("create-pr",))
CORRECT = WorkerSeams()


def agent(workflow=ONE_EFFECT, seams=CORRECT, config=CONFIG) -> Agent:
    return Agent("worker-1", config, Backoff(BACKOFF, random.Random(0)), workflow, seams)


def claim(attempt_id=FENCE[0], generation=FENCE[1], token=FENCE[2], hypothesis=HYPOTHESIS) -> SimpleNamespace:
    """An accepted claim as a worker reads it: the lease and the manifest's hypothesis."""
    lease = SimpleNamespace(attempt_id=attempt_id, task_id=TASK, generation=generation, token=token)
    return SimpleNamespace(accepted=True, lease=lease, manifest=SimpleNamespace(task_id=TASK, hypothesis=hypothesis))


def grant(key="create-pr:task-1:abc", replay=None, deadline_at=40.0) -> Grant:
    return Grant(key, replay, deadline_at, "code_host", 100.0)


def effect(provider_id="pr-1", key="create-pr:task-1:abc") -> Effect:
    return Effect(provider_id, key, "create-pr", "identity", "", 0.0)


def running(worker: Agent, looked: Looked | None = None) -> Call:
    """Claim, look up the predecessor and start: returns the first command of the workflow."""
    assert isinstance(worker.claim("workspace", TASK), Call)
    look = worker.on(claim(), 0.0)
    assert look == Look(FENCE[0])
    start = worker.on(looked or Looked(HYPOTHESIS), 0.0)
    assert start == Call("start_attempt", FENCE)
    return worker.on(Accepted("running"), 0.0)


def at_grant(worker: Agent) -> Agent:
    first = running(worker)
    assert first.contract == "grant_tool", first
    return worker


# ------------------------------------------------------------ the refusal table

WAITS = [
    pytest.param(Refused("rate", code="rate_limit", guards=("rate_allows",), domain="capacity", state="running"), 2.0,
                 ("capacity", "capacity:rate limit at the gateway"), id="capacity-waits-gateway-retry"),
    pytest.param(Refused("in flight", guards=("no_call_in_flight",), state="running"), 30.0,
                 ("unknown_result", "unknown_result:an earlier call may still land"), id="call-in-flight-waits-a-deadline"),
]  # fmt: skip


@pytest.mark.parametrize(("refusal", "wait_s", "failure"), WAITS)
def test_a_refusal_the_worker_waits_out_is_asked_again_until_the_asks_run_out(refusal, wait_s, failure):
    worker = at_grant(agent())
    command = worker.on(refusal, 1.0)
    assert command == Wait(wait_s, failure[1])
    assert worker.on(None, 1.0 + wait_s).contract == "grant_tool"  # asked again after the wait
    worker.on(refusal, 2.0)
    assert worker.on(None, 3.0).contract == "grant_tool"  # the third and last ask (gateway_retries_max = 2)
    report = worker.on(refusal, 4.0)
    assert report == Call("report_failure", (*FENCE, *failure))
    assert isinstance(worker.on(Accepted("reconciling"), 4.0), Stop)
    assert not worker.holding


HELD_BACK = [
    pytest.param(Refused("open", code="open_circuit", guards=("circuit_allows",), domain="provider", state="running", retry_after_s=7.0),
                 7.0, "provider:circuit open", id="open-circuit"),
    pytest.param(Refused("spent", code="retry_budget", guards=("retry_budget_allows",), domain="provider", state="running"),
                 0.0, "provider:retry budget spent", id="spent-retry-budget"),
    pytest.param(Refused("limit", code="concurrency_limit", guards=("concurrency_allows",), domain="provider", state="running"),
                 0.0, "provider:concurrency limit reached", id="concurrency-limit"),
]  # fmt: skip


@pytest.mark.parametrize(("refusal", "retry_after_s", "signature"), HELD_BACK)
def test_a_call_held_back_for_the_dependency_spends_no_ask_and_waits_past_the_retry_after(refusal, retry_after_s, signature):
    worker = at_grant(agent())
    waits = []
    for hold in range(6):  # three times the asks an Attempt has (gateway_retries_max = 2), and still no failure
        command = worker.on(refusal, float(hold))
        assert isinstance(command, Wait) and command.why == signature, command
        waits.append(command.seconds)
        assert worker.on(None, float(hold)).contract == "grant_tool"
    # retry_after plus the n-th backoff (1, 2, 4, 8, 8, 8 s), never under gateway_retry_s
    assert waits == [max(2.0, retry_after_s + backoff_s) for backoff_s in (1.0, 2.0, 4.0, 8.0, 8.0, 8.0)]


def test_held_back_calls_return_spread_over_the_backoff_not_in_the_instant_the_circuit_closes():
    """Many workers held back by one open circuit: with jitter their returns spread out; without, they all come back together."""
    refusal = Refused("open", code="open_circuit", guards=("circuit_allows",), domain="provider", state="running", retry_after_s=30.0)
    spread = BackoffConfig(strategy="full_jitter", base_s=1.0, cap_s=60.0)

    def returns(jitter: bool) -> set[float]:
        config = AgentConfig(call_deadline_s=30.0, gateway_retry_s=0.1, held_back_jitter=jitter)
        times = set()
        for seed in range(20):
            worker = at_grant(Agent("worker-1", config, Backoff(spread, random.Random(seed)), ONE_EFFECT, CORRECT))
            for _hold in range(4):
                wait = worker.on(refusal, 0.0).seconds
                worker.on(None, 0.0)
            times.add(round(wait, 6))
            assert wait >= 30.0  # never before the circuit's retry_after
        return times

    assert returns(jitter=False) == {30.0}  # the fourth hold's backoff (at most 8 s) is under the cool-down: one instant
    assert len(returns(jitter=True)) == 20


def test_without_jitter_a_call_held_back_waits_the_longer_of_the_backoff_and_the_cool_down():
    refusal = Refused("open", code="open_circuit", guards=("circuit_allows",), domain="provider", state="running", retry_after_s=0.5)
    config = AgentConfig(call_deadline_s=30.0, gateway_retries_max=5, gateway_retry_s=0.1, held_back_jitter=False)
    worker = at_grant(agent(config=config))
    waits = []
    for _ask in range(4):
        waits.append(worker.on(refusal, 0.0).seconds)
        worker.on(None, 0.0)
    assert waits == [1.0, 2.0, 4.0, 8.0]  # max(gateway_retry_s, backoff of the n-th hold, retry_after_s)


def test_a_held_back_wait_is_capped_where_the_config_says():
    refusal = Refused("open", code="open_circuit", guards=("circuit_allows",), domain="provider", state="running", retry_after_s=90.0)
    worker = at_grant(agent(config=AgentConfig(call_deadline_s=30.0, held_back_wait_max_s=4.0)))
    assert worker.on(refusal, 0.0).seconds == 4.0


FAILS = [
    pytest.param(Refused("spend", code="budget", guards=("spend_within_budget",), state="running"),
                 ("capacity", "budget:spend ceiling reached"), id="spend-ceiling-fails-capacity"),
    pytest.param(Refused("timeout budget", guards=("timeout_budget_left",), state="running"),
                 ("executor", "executor:timeout budget exhausted"), id="timeout-budget-fails-executor"),
]  # fmt: skip


@pytest.mark.parametrize(("refusal", "failure"), FAILS)
def test_a_budget_refusal_reports_the_attempt_failed_in_its_domain(refusal, failure):
    worker = at_grant(agent())
    assert worker.on(refusal, 1.0) == Call("report_failure", (*FENCE, *failure))
    assert worker.on(Accepted("reconciling"), 1.0) == Stop(failure[1])


@pytest.mark.parametrize(
    ("refusal", "expected"),
    [
        pytest.param(Refused("cancelling", code="no_row", state="cancelling"), Call("acknowledge_cancel", FENCE), id="cancelling-acks"),
        pytest.param(Refused("stale", code="stale_fence", state="cancelling"), None, id="fence-refused-while-cancelling-stops"),
        pytest.param(Refused("expired", code="expired_lease", guards=("lease_current",), state="running"), None, id="lease-gone-stops"),
        pytest.param(Refused("moved on", code="not_leased", state="suspect"), None, id="no-longer-leased-stops"),
        pytest.param(SimpleNamespace(accepted=False, reason="ValueError: malformed"), None, id="a-rejected-call-stops"),
    ],
)
def test_any_other_refusal_acknowledges_a_cancellation_or_stops_without_another_word(refusal, expected):
    worker = at_grant(agent())
    command = worker.on(refusal, 1.0)
    if expected is None:
        assert command == Stop(refusal.reason)
        assert not worker.holding
    else:
        assert command == expected
        assert isinstance(worker.on(Accepted("cancelled"), 1.0), Stop)


def test_a_worker_that_ignores_cancellation_never_acknowledges_it():
    worker = at_grant(agent(seams=WorkerSeams(ignores_cancel=True)))
    assert isinstance(worker.on(Refused("cancelling", code="no_row", state="cancelling"), 1.0), Stop)


def test_refused_checkpoint_and_start_are_read_by_the_same_table():
    worker = agent(ChapterWorkflow(tool_calls=0))
    worker.claim("workspace", TASK)
    worker.on(claim(), 0.0)
    worker.on(Looked(HYPOTHESIS), 0.0)
    assert worker.on(Refused("cancelling", code="no_row", state="cancelling"), 0.0) == Call("acknowledge_cancel", FENCE)


# ------------------------------------------------------ calls inside an Attempt


def test_an_unanswered_grant_is_asked_again_after_the_gateway_pause():
    worker = at_grant(agent())
    assert worker.on(None, 1.0) == Wait(2.0, "provider:create-pr unanswered after 1 asks")
    assert worker.on(None, 3.0).contract == "grant_tool"


def test_the_provider_is_called_only_with_the_minted_key_and_the_granted_deadline():
    worker = at_grant(agent())
    perform = worker.on(grant(), 1.0)
    assert perform == Perform("code_host", "create-pr:task-1:abc", "create-pr", f"{TASK}:{head_sha(TASK, HYPOTHESIS)}", TASK, 40.0)
    assert worker.on(effect(), 2.0) == Call("record_receipt", (*FENCE, "create-pr:task-1:abc", "pr-1"))
    complete = worker.on(Accepted("running"), 2.0)
    assert complete.contract == "complete_attempt"
    assert complete.kwargs == {"head_sha": head_sha(TASK, HYPOTHESIS)}


def test_a_replayed_grant_is_never_performed_again():
    worker = at_grant(agent())
    assert worker.on(grant(replay="pr-1"), 1.0).contract == "complete_attempt"


def test_a_timed_out_call_is_reported_then_retried_after_the_backoff_then_failed_when_the_asks_run_out():
    worker = at_grant(agent())
    seen = []
    for attempt in range(3):
        worker.on(grant(), float(attempt))
        report = worker.on(ProviderTimeout("no answer"), float(attempt))
        assert report == Call("report_call_failure", (*FENCE, "create-pr:task-1:abc", "timeout:code_host gave no answer by the deadline"))
        seen.append(worker.on(Accepted("running"), float(attempt)))
        if isinstance(seen[-1], Wait):
            assert worker.on(None, float(attempt)).contract == "grant_tool"
    assert [c.seconds for c in seen[:2]] == [1.0, 2.0]  # retry n waits retry n's interval
    assert seen[2] == Call("report_failure", (*FENCE, "provider", "provider:create-pr timed out 3 times"))


def test_a_provider_refusal_is_reported_to_the_gateway_then_fails_the_attempt_in_its_domain():
    worker = at_grant(agent())
    worker.on(grant(), 1.0)
    report = worker.on(ProviderRefused("authorization", "403: revoked"), 1.0)
    assert report == Call("report_call_failure", (*FENCE, "create-pr:task-1:abc", "authorization:403: revoked"))
    assert worker.on(Accepted("running"), 1.0) == Call("report_failure", (*FENCE, "authorization", "authorization:403: revoked"))


@pytest.mark.parametrize("contract", ["report_call_failure", "record_receipt"])
def test_a_report_or_receipt_refused_as_late_stops_the_worker(contract):
    worker = at_grant(agent())
    worker.on(grant(), 1.0)
    command = worker.on(ProviderTimeout("no answer") if contract == "report_call_failure" else effect(), 1.0)
    assert command.contract == contract
    assert isinstance(worker.on(Refused("stale", code="stale_fence", state="running"), 1.0), Stop)


def test_an_unanswered_start_is_asked_again_and_a_refusal_from_running_means_it_had_landed():
    worker = agent()
    worker.claim("workspace", TASK)
    worker.on(claim(), 0.0)
    worker.on(Looked(HYPOTHESIS), 0.0)
    assert worker.on(None, 0.0) == Call("start_attempt", FENCE)
    assert worker.on(Refused("already", code="no_row", state="running"), 0.0).contract == "grant_tool"


def test_a_start_unanswered_twice_leaves_the_attempt_to_its_lease():
    worker = agent()
    worker.claim("workspace", TASK)
    worker.on(claim(), 0.0)
    worker.on(Looked(HYPOTHESIS), 0.0)
    worker.on(None, 0.0)
    assert isinstance(worker.on(None, 0.0), Stop)


def test_a_claim_refused_or_unanswered_leaves_the_worker_idle():
    worker = agent()
    assert worker.claim("workspace") == Call("claim_next", ("worker-1", "workspace", True))
    assert isinstance(worker.on(None, 0.0), Stop)
    assert worker.claim("workspace", TASK) == Call("claim_attempt", (TASK, "worker-1", "workspace", True))
    assert isinstance(worker.on(Refused("taken", code="no_row", state="claimed"), 0.0), Stop)
    assert not worker.holding


# ------------------------------------------------------------------ renewals


def test_a_refused_renewal_interrupts_the_workflow_and_stops_it():
    worker = at_grant(agent())
    assert worker.renewal() == Call("renew_lease", FENCE)
    assert worker.renewed(FENCE, Refused("expired", code="expired_lease", state="running"))
    assert isinstance(worker.interrupted(), Stop)
    assert worker.renewal() is None


def test_a_renewal_that_asks_for_cancellation_makes_the_worker_acknowledge_once():
    worker = at_grant(agent())
    assert worker.renewed(FENCE, Renewal(10.0, cancel_requested=True))
    assert worker.interrupted() == Call("acknowledge_cancel", FENCE)
    assert not worker.renewed(FENCE, Renewal(11.0, cancel_requested=True))  # already acknowledging


def test_renewals_that_change_nothing_are_not_interrupts():
    worker = at_grant(agent())
    assert not worker.renewed(FENCE, Renewal(10.0, cancel_requested=False))
    assert not worker.renewed(FENCE, None)  # unanswered: the next beat goes anyway
    assert not worker.renewed(("task-1#1", 1, "old"), Refused("stale", code="stale_fence"))  # another Attempt's renewal
    assert not agent(seams=WorkerSeams(ignores_cancel=True)).renewed(FENCE, Renewal(10.0, cancel_requested=True))


def test_a_landed_effects_receipt_is_recorded_before_an_interrupt_takes_effect():
    worker = at_grant(agent())
    worker.on(grant(), 1.0)
    assert worker.on(effect(), 2.0).contract == "record_receipt"
    assert not worker.renewed(FENCE, Renewal(10.0, cancel_requested=True))  # the receipt finishes first
    assert worker.on(Accepted("running"), 2.0) == Call("acknowledge_cancel", FENCE)


# ----------------------------------------------------------- resume and seams


def test_a_retry_with_the_same_plan_resumes_after_the_predecessors_checkpoint():
    worker = agent(ChapterWorkflow(tool_calls=1))
    first = running(worker, Looked(HYPOTHESIS, HYPOTHESIS, "pushed"))
    assert first.args[3:] == ("model-call", f"{FENCE[0]}:describe-pr")


def test_a_changed_plan_or_no_predecessor_starts_from_the_first_step():
    for looked in (Looked(HYPOTHESIS, "another plan", "pushed"), Looked(HYPOTHESIS), None):
        worker = agent(ChapterWorkflow(tool_calls=1))
        worker.claim("workspace", TASK)
        worker.on(claim(), 0.0)
        worker.on(looked, 0.0)
        assert worker.on(Accepted("running"), 0.0).args[3:] == ("model-call", f"{FENCE[0]}:step-0")


def test_restart_from_scratch_never_looks_the_predecessor_up():
    worker = agent(seams=WorkerSeams(ignores_checkpoint=True))
    worker.claim("workspace", TASK)
    assert worker.on(claim(), 0.0) == Call("start_attempt", FENCE)


def test_the_chapter_workflow_does_its_local_work_and_checkpoints_between_effects():
    worker = agent(ChapterWorkflow(tool_calls=1))
    commands = [running(worker)]
    answers = {"grant_tool": grant(), "record_receipt": Accepted("running"), "checkpoint": Accepted("running")}
    while not (isinstance(commands[-1], Call) and commands[-1].contract == "complete_attempt"):
        command = commands[-1]
        answer = effect() if isinstance(command, Perform) else answers.get(getattr(command, "contract", None))
        commands.append(worker.on(answer, 0.0))
    shape = [c.contract if isinstance(c, Call) else type(c).__name__ for c in commands]
    assert shape.count("Perform") == 5  # two model calls, push, the PR's description, create-pr
    assert [c.kind for c in commands if isinstance(c, Work)] == ["tool", "commit"]
    assert [c.args[3] for c in commands if isinstance(c, Call) and c.contract == "checkpoint"] == ["tools-done", "pushed"]


def test_no_workflow_checkpoints_after_its_last_effect():
    for workflow in (ChapterWorkflow(), ChapterWorkflow(tool_calls=0), OperationsWorkflow(("push", "create-pr", "comment"))):
        kinds = [step.kind for step in workflow.steps(TASK, FENCE[0], "head")]
        assert kinds[-1] == "effect", workflow
        assert kinds.count("effect") > 0


def test_a_bypassed_operation_goes_to_the_provider_under_the_workers_own_key_with_no_grant_and_no_receipt():
    worker = agent(seams=WorkerSeams(bypasses_gateway=("create-pr",)))
    perform = running(worker)
    assert isinstance(perform, Perform)
    assert (perform.key.startswith("create-pr:worker-1:"), perform.via_gateway, perform.deadline_at) == (True, False, 30.0)
    assert worker.on(effect(), 1.0).contract == "complete_attempt"


def test_a_worker_minting_its_own_keys_presents_them_to_the_gateway():
    worker = agent(seams=WorkerSeams(mints_own_keys=True))
    assert running(worker).kwargs["key"].startswith("create-pr:worker-1:task-1#2:")
    assert running(agent()).kwargs["key"] is None  # the correct worker lets the orchestrator mint


def test_a_workflow_handed_with_a_claim_is_for_that_claim_only():
    worker = agent(OperationsWorkflow(("create-pr",)))
    worker.claim("workspace", TASK, workflow=OperationsWorkflow(("push", "create-pr")))
    worker.on(claim(), 0.0)
    worker.on(Looked(HYPOTHESIS), 0.0)
    assert worker.on(Accepted("running"), 0.0).args[3] == "push"
    worker.on(Refused("expired", code="expired_lease", state="running"), 0.0)  # stops
    assert running(worker).args[3] == "create-pr"  # the next claim runs the agent's own workflow again
