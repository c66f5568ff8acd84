"""One table, two interpreters: the compiled lookup and the `transitions` Machine agree on every state, trigger and guard valuation."""

from __future__ import annotations

import itertools

import pytest

from shiftchange.spec import AmbiguousTransition, CompiledMachine, load_spec
from shiftchange.spec.oracle import build_oracle, oracle_fire

SPEC = load_spec()


@pytest.mark.parametrize("name", ["attempt", "task"])
def test_compiled_and_transitions_agree_everywhere(name):
    machine = SPEC.machines[name]
    compiled = CompiledMachine(machine)
    oracle, model = build_oracle(machine)
    checked = refusals = 0
    for state in machine.states:
        for trigger in machine.triggers:
            consulted = compiled.guards_of(state, trigger)
            for values in itertools.product((False, True), repeat=len(consulted)):
                holds = dict(zip(consulted, values, strict=True))
                fired = compiled.fire(state, trigger, lambda g, h=holds: h[g])
                expected = oracle_fire(oracle, model, state, trigger, holds)
                assert (fired[0] if fired else None) == expected, (state, trigger, holds)
                checked += 1
                refusals += fired is None
    # Both outcomes occur, so the agreement is not vacuous.
    assert refusals and checked - refusals


def test_refusal_explains_the_failing_guard():
    compiled = CompiledMachine(SPEC.attempt)
    holds = {"lease_current": False}.get
    assert compiled.fire("running", "complete", lambda g: holds(g, False)) is None
    assert "lease_current" in compiled.why_refused("running", "complete", lambda g: holds(g, False))
    assert compiled.why_refused("succeeded", "complete", lambda g: True) == "no 'complete' from 'succeeded'"


def test_fenced_completion_moves_running_to_verifying():
    compiled = CompiledMachine(SPEC.attempt)
    dest, row = compiled.fire("running", "complete", lambda g: g == "lease_current")
    assert dest == "verifying" and row.fenced


@pytest.mark.parametrize(
    ("poison", "cancel", "dest"),
    [(False, False, "failed"), (True, False, "quarantined"), (False, True, "cancelled"), (True, True, "cancelled")],
)
def test_landed_effects_without_a_result_end_the_attempt_and_never_verify(poison, cancel, dest):
    """Reconciliation that finds landed effects fails the Attempt (quarantined on poison, cancelled on request), like absent ones."""
    compiled = CompiledMachine(SPEC.attempt)
    holds = {"calls_settled": True, "poison_signature": poison, "cancel_requested": cancel}
    landed, _row = compiled.fire("reconciling", "effects_landed", holds.__getitem__)
    absent, _row = compiled.fire("reconciling", "effects_absent", holds.__getitem__)
    assert landed == absent == dest


def test_only_a_fenced_completion_enters_verifying():
    """The one way into Verifying is a result the lease holder reported under its fence; no reconciliation outcome leads there."""
    into = [(row.trigger, row.sources, row.fenced) for row in SPEC.attempt.rows if "verifying" in {row.dest_from(s) for s in row.sources}]
    assert into == [("complete", ("running",), True)]


def test_stay_rows_keep_their_source_state():
    compiled = CompiledMachine(SPEC.attempt)
    for state in ("cancelling", "reconciling"):
        dest, _row = compiled.fire(state, "cancel", lambda g: False)
        assert dest == state


def test_overlapping_rows_raise_at_run_time(spec_copy):
    spec_copy.append(
        "attempt.toml",
        '[[transition]]\ntrigger = "shed"\nsource = "queued"\ndest = "cancelled"\n'
        'actor = "orchestrator"\nguards = ["selected_for_shedding"]\n',
    )
    compiled = CompiledMachine(load_spec(spec_copy.root).attempt)
    with pytest.raises(AmbiguousTransition):
        compiled.fire("queued", "shed", lambda g: g == "selected_for_shedding")


def test_refusal_reasons_and_failed_guards_read_the_same_under_every_hash_seed():
    """The compiled table keeps each row's guards in the table's order, so a refusal's text and guards do not depend on PYTHONHASHSEED."""
    import os
    import subprocess
    import sys

    code = (
        "from shiftchange.spec import CompiledMachine, load_spec\n"
        "spec = load_spec()\n"
        "for machine in spec.machines.values():\n"
        "    compiled = CompiledMachine(machine)\n"
        "    for state in machine.states:\n"
        "        for trigger in machine.triggers:\n"
        "            for holds in (lambda g: False, lambda g: True, lambda g: len(g) % 2 == 0):\n"
        "                print(compiled.why_refused(state, trigger, holds), compiled.failed_guards(state, trigger, holds))\n"
    )
    outputs = []
    for seed in ("1", "2", "3"):
        result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0].count("refused: guard") > 10
    assert outputs[0] == outputs[1] == outputs[2]
