"""The chapter's contracts through the conformance kit, for the reference core over every store; then the core's own seams.

The rules are `shiftchange.testing.check_contracts`, one check per test
here, each building its own world (a fresh store, a `ManualClock`, a
`LedgerProvider`) from the factory; the factory is the reference
`Orchestrator` over fresh stores of each kind (the `make_store` fixture:
memory, SQLite files, PostgreSQL schemas). What only the reference core has,
its `Seams`, is tested below the suite.
"""

from __future__ import annotations

import pytest

from shiftchange.core import Grant, KeyRequest, MemoryStore, Orchestrator, Plan, Seams
from shiftchange.testing import check_contracts, contract_checks, reference_orchestrator
from shiftchange.testing.rig import FIRST_HYPOTHESIS, REASON, World, appends, fence, refused_on
from tests.conftest import STORE_KINDS

HEAVY = {("postgres", "bad_input_raises_input_error_and_changes_nothing")}
"""Cases over 2 s: that check builds a world, so a PostgreSQL schema, per bad input (about forty)."""


def contract_cases() -> list:
    """Every check on every store kind, each case named kind-check; the heavy ones marked so the fast tier leaves them out."""
    return [
        pytest.param(kind, check, id=f"{kind}-{check.name}", marks=[pytest.mark.heavy] if (kind, check.name) in HEAVY else [])
        for kind in STORE_KINDS
        for check in contract_checks()
    ]


@pytest.fixture
def make_orchestrator(make_store):
    """The reference core over a fresh store per world."""
    return reference_orchestrator(make_store)


@pytest.mark.parametrize(("make_store", "check"), contract_cases(), indirect=["make_store"])
def test_contract(make_orchestrator, check):
    """Goal: the reference core over the store under test keeps the contract rule the kit's check states (its docstring)."""
    check(make_orchestrator)


def test_check_contracts_reports_every_rule_passed_for_the_reference_core():
    """Goal: check_contracts returns one passed result per contract check, in the suite's order."""
    report = check_contracts(reference_orchestrator(MemoryStore))
    assert [result.name for result in report.results] == [check.name for check in contract_checks()]
    assert report.ok, report.failures


def test_a_core_that_breaks_a_rule_fails_check_contracts():
    """Goal: the suite can fail: a core whose claims never issue a lease fails the claim rules, with the refusal in the detail."""

    class NeverClaims:
        def __init__(self, inner: Orchestrator) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

        def claim_attempt(self, task_id, worker_id, workspace, healthy=None):
            return self._inner.claim_attempt(task_id, worker_id, "nowhere", healthy)

    def make(**world):
        return NeverClaims(Orchestrator(MemoryStore(), **world))

    failed = {result.name: result.detail for result in check_contracts(make).failures}
    assert "claim_returns_a_fenced_lease_and_the_frozen_manifest" in failed
    assert "workspace_matches" in failed["claim_returns_a_fenced_lease_and_the_frozen_manifest"]


def test_seams_replace_key_minting_and_the_retry_rule(make_store):
    """Goal: the gateway mints only through Seams.mint_key and retry asks only Seams.retry_rule, so a configuration swaps either."""

    def at_a_moment(request: KeyRequest) -> str:
        return f"{request.operation}:at:{request.now:g}"

    def forbid_every_retry(task, attempts, plan) -> str:
        return "this configuration forbids every retry"

    seams = Seams(mint_key=at_a_moment, retry_rule=forbid_every_retry)

    def make(*, clock, provider, config, reliability):
        return Orchestrator(make_store(), clock, provider, config, reliability, seams=seams)

    world = World(make)
    try:
        lease = world.running()
        world.clock.set(7)
        grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1")
        assert isinstance(grant, Grant) and grant.key == "create-pr:at:7"
        assert world.store.get_intent("create-pr:at:7").attempt_id == lease.attempt_id
        world.failed(lease)
        with appends(world.store, 1) as events:
            refused = world.orchestrator.retry("task-1", REASON, Plan(FIRST_HYPOTHESIS))
        assert refused_on(refused, "policy_permits_retry")
        assert events[0].detail == "policy: this configuration forbids every retry"
    finally:
        world.close()
