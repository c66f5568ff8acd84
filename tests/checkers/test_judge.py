"""`judge(events, ledger, store)`: the simulator's checkers over a store's history and a provider's ledger, outside the simulator.

The goal is DESIGN's fourth principle: the same checker judges a simulated
run and a real one. So a history the reference core leaves in a store is
judged valid, a forged one is judged invalid with its witness, an empty one
unknown; a ledger a deployment builds is enough to find a duplicate effect
or an effect no grant minted; and the checkers give the same verdicts on a
simulated run's entries through `judge` as inside the simulator.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from shiftchange.antipatterns import antipattern
from shiftchange.checkers import INVARIANTS, OK, UNKNOWN, VIOLATED, Judge, LedgerEntry, context_for, judge, ledger_from
from shiftchange.checkers.history import Landed
from shiftchange.core import Event, InputError, LedgerProvider, MemoryStore
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play
from shiftchange.testing import reference_orchestrator
from shiftchange.testing.rig import World, fence

FINAL_RECORDS = {"no_lost_tasks", "budgets_hold", "classified_retry", "complete_audit", "truthful_states"}


def finished_world() -> World:
    """One task through a PR that landed, verified, decided and approved: done, its history in a memory store."""
    world = World(reference_orchestrator(MemoryStore))
    lease = world.running()
    world.landed(lease)
    world.orchestrator.complete_attempt(*fence(lease), "opened the pull request", head_sha="sha-1")
    world.orchestrator.verify_attempt(lease.attempt_id)
    world.orchestrator.decide("task-1")
    assert world.orchestrator.approve("task-1").accepted
    return world


def test_a_reference_history_with_its_ledger_and_final_read_is_valid_by_every_invariant():
    """Goal: the reference core's own history, its provider's ledger and its records satisfy all eleven invariants."""
    world = finished_world()
    ledger = ledger_from(world.provider.ledger, world.store)
    verdicts = judge(world.store.events(), ledger, world.store, context=context_for(world.config, world.reliability))
    assert set(verdicts) == set(INVARIANTS)
    assert {name: v.status for name, v in verdicts.items()} == dict.fromkeys(INVARIANTS, OK)


def test_a_deployment_without_keys_judges_a_landing_after_the_findings_through_judge():
    """Goal: `judge` over a store's history and a ledger entry that lands after reconciliation concluded: a violation of
    truthful_states when the deployment's code host ignores keys (`context_for(keyless=...)`, as chaos passes it for
    `--no-idempotency`), none when it honours them."""
    world = World(reference_orchestrator(MemoryStore))
    lease = world.running()
    grant = world.orchestrator.grant_tool(*fence(lease), "create-pr", "sha-1", request="open the pull request")
    world.clock.advance(world.config.lease_ttl_s + 1)
    world.orchestrator.reap()
    world.clock.advance(grant.deadline_at - world.clock.now() + 1)  # the call's deadline passed: settled, "absent"
    assert world.orchestrator.reconcile_attempt(lease.attempt_id).state == "failed"
    late = LedgerEntry(world.clock.now() + 1, "create-pr-9", grant.key, "create-pr", "sha-1", "task-1")
    for keyless, expected in ((("code_host",), VIOLATED), ((), OK)):
        context = context_for(world.config, world.reliability, keyless=keyless)
        verdict = judge(world.store.events(), [late], context=context)["truthful_states"]
        assert verdict.status in {expected, UNKNOWN} and (verdict.status == VIOLATED) == (expected == VIOLATED), verdict
    assert context_for().keyless == frozenset()


def test_without_a_final_read_the_rules_about_final_records_are_unknown():
    """Goal: judged from the history alone, the rules that read final records say unknown, and the others still judge."""
    world = finished_world()
    verdicts = judge(world.store.events(), ledger_from(world.provider.ledger, world.store))
    assert {name for name, v in verdicts.items() if v.status == UNKNOWN} == FINAL_RECORDS
    assert all(v.status == OK for name, v in verdicts.items() if name not in FINAL_RECORDS)


def test_an_empty_history_is_unknown_by_every_invariant():
    """Goal: nothing to judge is never a pass."""
    assert {v.status for v in judge([], []).values()} == {UNKNOWN}


def test_a_stale_write_in_a_history_is_invalid_with_its_witness():
    """Goal: an accepted renewal presenting another generation than its lease's is a fenced_writes violation, the events shown."""
    events = finished_world().store.events()
    claim = next(e for e in events if e.kind == "claim" and e.accepted)
    stale = replace(claim, seq=events[-1].seq + 1, kind="renew", from_state="running", to_state="running", generation=claim.generation + 7)
    forged = [*events, stale]
    verdict = judge(forged, [])["fenced_writes"]
    assert verdict.status == VIOLATED and verdict.violations == 1
    assert "presented generation" in verdict.example[0] and any(f"#{claim.seq}" in line for line in verdict.example[1:])


def test_a_ledger_with_two_effects_for_one_operation_is_invalid():
    """Goal: a deployment's own ledger entries are enough: a second effect of one PR is a duplicate, whatever its key."""
    world = finished_world()
    ledger = ledger_from(world.provider.ledger, world.store)
    duplicate = replace(ledger[0], provider_id="create-pr-99", key="create-pr:1718000000", at=ledger[0].at + 1)
    verdicts = judge(world.store.events(), [*ledger, duplicate], world.store)
    assert verdicts["one_effect_per_operation"].status == VIOLATED
    assert verdicts["complete_audit"].status == VIOLATED, "no grant minted the duplicate's key"


def test_ledger_from_names_each_effect_by_the_intent_of_its_key():
    """Goal: Effects become ledger entries of their intents' tasks; an effect under an unminted key says it bypassed the gateway."""
    world = finished_world()
    provider = LedgerProvider(clock=world.clock)
    minted = provider.perform("create-pr:task-1:sha-1", "create-pr", "sha-1", "")
    rogue = provider.perform("rogue-key", "create-pr", "sha-2", "")
    entries = ledger_from([minted, rogue], world.store, dependency="code_host")
    assert [(e.task_id, e.via_gateway, e.dependency) for e in entries] == [("task-1", True, "code_host"), ("", False, "code_host")]
    assert entries[0].landed() == Landed(minted.at_s, "code_host", minted.provider_id, minted.key, "create-pr", "sha-1", "task-1", "", True)


def test_a_judge_folds_on_after_a_final_read():
    """Goal: verdicts(store) reads final records on copies: asked twice it answers the same, and folding continues after it."""
    world = finished_world()
    events = world.store.events()
    judgement = Judge(context_for(world.config, world.reliability))
    for event in events[:-3]:
        judgement.event(event)
    first, again = judgement.verdicts(world.store), judgement.verdicts(world.store)
    assert first == again
    for event in events[-3:]:
        judgement.event(event)
    for entry in ledger_from(world.provider.ledger, world.store):
        judgement.landed(entry)
    assert {v.status for v in judgement.verdicts(world.store).values()} == {OK}


def test_invariants_can_be_chosen_by_name_and_an_unknown_name_is_bad_input():
    """Goal: a judge of some invariants answers for those only; a name no checker has is an InputError naming the real ones."""
    assert set(judge([], [], invariants=["single_owner", "fenced_writes"])) == {"single_owner", "fenced_writes"}
    with pytest.raises(InputError, match="no invariant named no_such_rule"):
        judge([], [], invariants=["no_such_rule"])


def test_a_checker_that_crashes_on_a_history_is_unknown_not_a_crash():
    """Goal: a malformed history makes the checker that cannot read it unknown, with why, and the others still judge it."""
    bad = Event(seq=1, at=0.0, actor="orchestrator", kind="append", task_id="t", attempt_id="no-number", accepted=True, reason="r")
    verdicts = judge([bad], [])
    assert verdicts["append_only_attempts"].status == UNKNOWN
    assert "crashed" in verdicts["append_only_attempts"].example[0]
    assert verdicts["single_owner"].status == OK


def sim_entries(outcome) -> tuple[list[Event], list[Landed]]:
    return [e for e in outcome.tail if isinstance(e, Event)], [e for e in outcome.tail if isinstance(e, Landed)]


STREAMED = ("single_owner", "fenced_writes", "suspect_then_reconcile", "one_effect_per_operation", "cancel_is_final")
"""The invariants judged from the history as it streams, without final records: what `judge` sees of a simulated run's entries."""


@pytest.mark.parametrize(("scenario", "pattern"), [("zombie-worker", None), ("zombie-worker", "no-fencing")])
def test_judge_gives_a_simulated_runs_verdicts_from_its_entries(scenario, pattern):
    """Goal: the same checkers judge a simulated run and a history from elsewhere: judge over the run's entries agrees with the run."""
    broken = antipattern(pattern) if pattern else None
    config = scenario_config(scenario, 3, 40)
    outcome = play(config, 3, scenario, broken, keep_history=True, series=False)
    events, landed = sim_entries(outcome)
    context = context_for(outcome.config.core, outcome.config.reliability)
    verdicts = judge(events, landed, context=context, invariants=STREAMED)
    assert {name: v.status for name, v in verdicts.items()} == {name: outcome.verdicts[name].status for name in STREAMED}
    if pattern is not None:
        assert verdicts["fenced_writes"].status == VIOLATED


def test_ledger_entries_and_landed_entries_are_judged_alike():
    """Goal: a LedgerEntry is the simulator's Landed by another name: either one, for the same effect, gets the same verdicts."""
    world = finished_world()
    entries = ledger_from(world.provider.ledger, world.store)
    as_landed = [entry.landed() for entry in entries]
    events = world.store.events()
    assert judge(events, entries, world.store) == judge(events, as_landed, world.store)
    assert isinstance(entries[0], LedgerEntry)


def test_the_kit_re_exports_the_checkers_own_judge():
    """Goal: `judge` lives with the checkers (a driver judges without the kit) and the kit's users still find it where it was."""
    import importlib

    import shiftchange.checkers
    import shiftchange.testing

    module = importlib.import_module("shiftchange.testing.judge")  # the package's `judge` attribute is the function
    for name in ("judge", "Judge", "LedgerEntry", "context_for", "ledger_from"):
        assert getattr(shiftchange.testing, name) is getattr(shiftchange.checkers, name)
        assert getattr(module, name) is getattr(shiftchange.checkers, name)
