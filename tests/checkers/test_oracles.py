"""The checkers are independent oracles: they judge from the spec's tables, so a wrong retry policy cannot fool them.

Independence is shown two ways. Statically, the checkers' modules import only
record types from `core`: nothing from the policy, the orchestrator or the
core's compiled machine. Dynamically, the retry policy's view of the
failure-domain table is mutated in place (the one dict the policy and the
orchestrator both read), the mutant is shown to permit a retry the spec
forbids (the reference core really appends it), and `classified_retry` still
reports it, because it reads its own copy of the table.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

import pytest

from shiftchange.checkers import history
from shiftchange.checkers import rules as checkers
from shiftchange.checkers.history import OK, VIOLATED
from shiftchange.core import Plan, policy
from tests.checkers.test_checkers import RealRun, story

RECORD_TYPES = {"Attempt", "Event", "Intent", "Task"}


def core_imports(module) -> set[tuple[str, str]]:
    """Every (module, name) a module imports from `shiftchange.core` or below."""
    found = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("shiftchange.core"):
            found |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names if alias.name.startswith("shiftchange.core")}
    return found


@pytest.mark.parametrize("module", [checkers, history], ids=lambda module: module.__name__)
def test_the_checkers_import_only_record_types_from_the_core(module):
    """Goal: no checker can share the policy's, the orchestrator's or the compiled machine's mistakes: it never imports them."""
    imports = core_imports(module)
    assert {where for where, _name in imports} <= {"shiftchange.core"}, imports
    assert {name for _where, name in imports} <= RECORD_TYPES, imports


# ------------------------------------------------ a mutated policy, a hand-built history


def test_a_retry_a_mutated_policy_permits_on_a_hand_built_history_is_still_reported(monkeypatch):
    """Goal: with the policy's table saying authorization failures may be retried unchanged, the oracle still says they stop."""
    s = story().created().dispatched("hypothesis one").running(1, 1).at(10).failed(1, 1, "authorization", "401 from the code host")
    failed = [s.attempts[1]]
    assert policy.retry_refusal(s.task, failed, Plan("hypothesis one")) is not None  # the real policy forbids it
    lenient = replace(policy.DOMAINS["authorization"], response="back_off_and_retry", retries_max=3, changed_hypothesis_required=False)
    monkeypatch.setitem(policy.DOMAINS, "authorization", lenient)
    assert policy.retry_refusal(s.task, failed, Plan("hypothesis one")) is None  # the mutant permits it

    s.at(20).retried(2, "hypothesis one", backoff_s=2.0).running(2, 2).at(25).succeeded(2, 2).retire()
    verdict = s.history.verdicts()["classified_retry"]
    assert verdict.status == VIOLATED
    assert "authorization failures respond stop, not retry" in verdict.example[0]


# ------------------------------------------------ a mutated policy, the reference core


def failed_attempt(run: RealRun, attempt_id: str, worker_id: str, domain: str, signature: str) -> None:
    """Claim and start an Attempt, then report a classified failure; reconciliation finds nothing and fails it."""
    core = run.orchestrator
    fence = run.running(attempt_id, worker_id)
    assert core.report_failure(*fence, domain, signature).state == "reconciling"
    assert core.reconcile_attempt(attempt_id).state == "failed"


def ready(run: RealRun, attempt_id: str) -> None:
    """Let a retried Attempt's backoff pass, so it may be claimed."""
    run.clock.advance(run.store.get_attempt(attempt_id).backoff_s + 1)


def authorization_retried(run: RealRun) -> None:
    """Authorization failures stop; the mutant lets them back off and retry."""
    failed_attempt(run, run.dispatched("task-1", "the token has the repo scope"), "worker-a", "authorization", "401 from the code host")
    assert run.orchestrator.retry("task-1", "retry after the credential failure", Plan("the token has the repo scope")).accepted


def validation_retried_unchanged(run: RealRun) -> None:
    """Validation failures need a changed hypothesis; the mutant lets one be repeated."""
    failed_attempt(run, run.dispatched("task-1", "the fixture leaks a port"), "worker-a", "validation", "test_port fails")
    assert run.orchestrator.retry("task-1", "retry after the validation failure", Plan("the fixture leaks a port")).accepted


def validation_retried_past_its_limit(run: RealRun) -> None:
    """Validation allows three automatic retries; the mutant allows nine, and a fourth retry is appended."""
    failed_attempt(run, run.dispatched("task-1", "hypothesis 1"), "worker-a", "validation", "signature 1")
    for number in range(2, 6):
        assert run.orchestrator.retry("task-1", f"correction number {number}", Plan(f"hypothesis {number}")).accepted
        if number < 5:
            ready(run, f"task-1#{number}")
            failed_attempt(run, f"task-1#{number}", "worker-a", "validation", f"signature {number}")


MUTANTS = [
    pytest.param(
        "authorization",
        {"response": "back_off_and_retry", "retries_max": 3, "changed_hypothesis_required": False},
        authorization_retried,
        "authorization failures respond stop, not retry",
        id="authorization-retried",
    ),
    pytest.param(
        "validation",
        {"changed_hypothesis_required": False},
        validation_retried_unchanged,
        "validation failures need a changed hypothesis",
        id="validation-unchanged",
    ),
    pytest.param(
        "validation",
        {"retries_max": 9},
        validation_retried_past_its_limit,
        "validation allows 3 automatic retries and this is retry 4",
        id="validation-past-limit",
    ),
]


@pytest.mark.parametrize(("domain", "mutation", "drive", "phrase"), MUTANTS)
def test_a_retry_the_mutated_policy_lets_the_core_append_is_reported(monkeypatch, domain, mutation, drive, phrase):
    """Goal: the reference core, its policy mutated, appends a retry the spec forbids; classified_retry alone reports it."""
    monkeypatch.setitem(policy.DOMAINS, domain, replace(policy.DOMAINS[domain], **mutation))
    run = RealRun()
    drive(run)  # asserts the core accepted the forbidden retry: the mutation reached the core
    latest = run.store.get_attempts("task-1")[-1].attempt_id
    ready(run, latest)
    run.pull_request(run.running(latest, "worker-b"), "sha-1", "worker-b")
    run.approved("task-1", latest)
    run.retire("task-1")

    verdicts = run.history.verdicts()
    assert {name for name, verdict in verdicts.items() if verdict.status == VIOLATED} == {"classified_retry"}, verdicts
    assert phrase in verdicts["classified_retry"].example[0], verdicts["classified_retry"].example


def test_the_oracle_holds_on_the_same_runs_with_the_real_policy():
    """Goal: the near miss: without the mutation the core refuses each of those retries, and the checker has nothing to report."""
    run = RealRun()
    failed_attempt(run, run.dispatched("task-1", "the token has the repo scope"), "worker-a", "authorization", "401 from the code host")
    assert not run.orchestrator.retry("task-1", "retry after the credential failure", Plan("the token has the repo scope")).accepted
    assert run.orchestrator.decide("task-1").kind == "stop"
    run.retire("task-1")
    assert {verdict.status for verdict in run.history.verdicts().values()} == {OK}, run.history.verdicts()


# ------------------------------------------------ the statement, read on its own terms


def test_a_respaced_hypothesis_is_not_a_changed_one():
    """Goal: "without a changed hypothesis" means the same words: re-spacing a validation hypothesis is reported as unchanged."""
    s = story().created().dispatched("the fixture leaks a port").running(1, 1).at(10).failed(1, 1, "validation", "test_port fails")
    s.at(20).retried(2, "the  fixture leaks a port ", backoff_s=0.0).running(2, 2).at(25).succeeded(2, 2).retire()
    verdict = s.history.verdicts()["classified_retry"]
    assert verdict.status == VIOLATED
    assert "need a changed hypothesis" in verdict.example[0]


def test_every_response_of_the_spec_is_read_by_the_oracle():
    """Goal: a response the spec adds cannot slip past the oracle: the module refuses to load until it says whether it retries."""
    from shiftchange.spec import RESPONSES

    assert set(checkers._CONTINUES) == set(RESPONSES)
    assert {name for name, goes_on in checkers._CONTINUES.items() if not goes_on} == {"stop", "escalate", "quarantine"}
