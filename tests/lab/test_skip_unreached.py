"""Skipping the runs a mutant cannot reach: the same verdicts as playing every run, for less.

`lab.mutate` skips a run of a mutant when the base's same run never presented the changed row's trigger in any state the
row leaves (every run is deterministic, and the core reads a row only when a call presents it). These tests hold that to
account: on a small scale with every outcome occurring, the verdicts with and without the skipping are the same, runs
were in fact skipped, and a mutant whose compiled state sets differ from the base's (an `expire` row moved) skips nothing.
"""

from __future__ import annotations

import pytest

from shiftchange.lab.mutants import Mutant, mutants_of
from shiftchange.lab.mutate import KILLED, SURVIVED, _derived, _Job, _unreached, mutate, run_job, verdicts_of
from shiftchange.lab.trial import Scale, run_trial
from shiftchange.spec.loader import packaged_spec

SCALE = Scale(explore=("workers=2 pauses=1", "workers=1 refusals=1"), scenarios=("mixed",), tasks=60)


@pytest.mark.heavy
def test_skipping_unreached_runs_changes_no_verdict():
    spec = packaged_spec()
    kinds = ("drop_guard", "unfence", "drop_row")
    skipping = mutate(spec, SCALE, kinds, label="spec", skip_unreached=True)
    playing = mutate(spec, SCALE, kinds, label="spec", skip_unreached=False)
    assert verdicts_of(skipping) == verdicts_of(playing)
    outcomes = {(status, check) for _id, status, check, _invariant in verdicts_of(skipping)}
    assert {(KILLED, "structure"), (KILLED, "explore"), (SURVIVED, None)} <= outcomes
    skipped = sum(spent["skipped"] for spent in skipping.per_check().values())
    assert skipped > 0 and sum(spent["skipped"] for spent in playing.per_check().values()) == 0
    assert sum(spent["runs"] for spent in skipping.per_check().values()) < sum(spent["runs"] for spent in playing.per_check().values())
    unreached = [result for result in skipping.survivors if not result.reached]
    assert unreached and all("a hole in the checks" in skipping.reading(result) for result in unreached)


def test_the_base_trial_records_what_each_run_presented():
    trial = run_trial(packaged_spec(), Scale(explore=("workers=1 refusals=1",), scenarios=("mixed",), tasks=20), label="spec",
                      timelines=False, coverage=True)  # fmt: skip
    explored = trial.check("explore").presented["workers=1 refusals=1"]
    simulated = trial.check("simulate").presented["mixed seed 0"]
    for presented in (explored, simulated):
        assert ("attempt", "claim", "admitted") in presented and ("task", "dispatch", "ready") in presented
        assert ("attempt", "shed", "queued") not in presented  # admission never sheds in these worlds


def test_a_mutant_that_moves_a_derived_state_set_skips_nothing():
    spec = packaged_spec()
    presented = {("explore", "x"): frozenset({("attempt", "claim", "admitted")})}
    derived = _derived(spec)
    by_id = {mutant.id: mutant for mutant in mutants_of(spec)}
    moved: Mutant = by_id["attempt-16-widen_source-verifying"]  # expire from verifying too: the expirable states change
    assert _unreached(spec, moved, presented, derived) == frozenset()
    elsewhere = by_id["attempt-14-drop_guard-lease_current"]  # complete: never presented in that run
    assert _unreached(spec, elsewhere, presented, derived) == frozenset({("explore", "x")})
    claim = by_id["attempt-5-drop_guard-backoff_elapsed"]
    assert _unreached(spec, claim, presented, derived) == frozenset()


@pytest.mark.heavy
def test_a_widened_or_moved_row_skips_only_runs_that_would_play_as_the_base():
    """Goal: the widening's branch (only the added state can differ) and moved destinations, on a sample of each kind,
    give the same verdict skipping as playing every run; some runs are skipped, so the comparison is not vacuous."""
    spec = packaged_spec()
    base = run_trial(spec, SCALE, label="spec", timelines=False, coverage=True)
    expected = tuple(sorted(key for key, finding in base.verdicts().items() if not finding.ok))
    presented = {(run.check, name): pairs for run in base.checks for name, pairs in run.presented.items()}
    derived = _derived(spec)
    sample = [m for kind in ("widen_source", "move_dest") for m in mutants_of(spec, (kind,))[::23]]
    skipped = 0
    for index, mutant in enumerate(sample):
        unreached = _unreached(spec, mutant, presented, derived)
        skipping = run_job(_Job(index, spec, mutant, SCALE, expected, None, unreached))
        playing = run_job(_Job(index, spec, mutant, SCALE, expected, None, frozenset()))
        assert (skipping["status"], skipping["check"], skipping["invariant"]) == (
            playing["status"],
            playing["check"],
            playing["invariant"],
        ), mutant.id
        skipped += sum(spent["skipped"] for spent in skipping["checks"].values())
    assert len(sample) >= 30 and skipped > 0
