"""A trial: the shipped table passes every check; the unfenced complete fails the structure, the explorer and the simulator."""

from __future__ import annotations

import pytest

from shiftchange.lab.trial import EXPLORE, SIMULATE, STRUCTURE, Scale, TrialError, run_trial
from shiftchange.spec.edits import negate_guard, unfence
from shiftchange.spec.loader import load_spec, packaged_spec

PAUSE = "workers=2 pauses=1"


@pytest.mark.heavy
def test_the_shipped_table_passes_a_small_trial():
    trial = run_trial(packaged_spec(), Scale(explore=(PAUSE, "workers=2 crashes=1"), scenarios=("mixed",), tasks=40))
    assert [run.check for run in trial.checks] == [STRUCTURE, EXPLORE, SIMULATE]
    assert trial.killed_by is None and not trial.stopped_early
    failed = [finding for run in trial.checks for finding in run.failed()]
    assert failed == []
    assert {finding.name for finding in trial.check(EXPLORE).findings} >= {"fenced_writes", "single_owner"}


@pytest.mark.heavy
def test_the_unfenced_complete_is_killed_by_the_structure_first_and_found_by_the_explorer_in_19_steps(tmp_path):
    proposal = unfence(packaged_spec(), "complete")
    scale = Scale(explore=(PAUSE,), scenarios=())
    early = run_trial(proposal, scale, out=tmp_path, stop_early=True)
    assert (early.killed_by.check, early.killed_by.name) == (STRUCTURE, "attempt.fenced_worker_writes")
    assert [run.check for run in early.checks] == [STRUCTURE] and early.stopped_early
    full = run_trial(proposal, scale, out=tmp_path)
    example = full.shortest("fenced_writes")
    assert (example.check, example.size) == (EXPLORE, 19)
    folder = tmp_path / f"spec-{proposal.digest}"
    assert load_spec(folder).digest == proposal.digest  # the replay names a folder that holds this very spec
    assert example.replay[0].startswith("shiftchange explore --workers 2") and f"--spec {folder}" in example.replay[0]
    assert "Recovery timeline of task task-1" in example.timeline
    assert "worker-1 gen 1     complete             running -> verifying" in example.timeline
    with pytest.raises(TrialError, match="give the trial a label, or an out folder"):
        run_trial(proposal, scale)


def test_a_bad_scale_is_one_typed_error():
    with pytest.raises(TrialError, match="unknown scenario 'nosuch'"):
        Scale(scenarios=("nosuch",))
    with pytest.raises(TrialError, match="unknown count 'workerz'"):
        Scale(explore=("workerz=2",))
    with pytest.raises(TrialError, match="workers must be a whole number from 1 to 4"):
        Scale(explore=("workers=9",))
    with pytest.raises(TrialError, match="unknown check 'fuzz'"):
        run_trial(packaged_spec(), checks=("fuzz",))


def test_an_exploration_names_timings_a_workflow_and_a_keyless_code_host():
    from shiftchange.lab.trial import explore_config

    config = explore_config("workers=1 pauses=2 idempotent_provider=0 call_deadline_s=5 operations=2 lease_ttl_s=2.5")
    assert (config.workers, config.pauses, config.idempotent_provider) == (1, 2, False)
    assert (config.call_deadline_s, config.lease_ttl_s, config.operations) == (5, 2.5, ("push-branch", "create-pr"))
    assert explore_config("workers=1 operations=1").operations == ("create-pr",)  # the default workflow
    assert config.time == "abstract"  # 2.5 s and 5 s add exactly; 2.3 s does not, and only the concrete clock searches it
    assert explore_config("workers=1 pauses=1 lease_ttl_s=2.3").time == "concrete"
    for text, says in (
        ("workers=1 operations=4", "operations=N names 1 to 3 side effects"),
        ("workers=1 idempotent_provider=2", "idempotent_provider is 0 or 1"),
        ("workers=1 heartbeat_interval_s=9", "must be shorter than lease_ttl_s"),
        ("workers=1 antipattern=1", "unknown count 'antipattern'"),
        ("workers=1 pauses=1.5", "pauses must be a whole number"),
    ):
        with pytest.raises(TrialError, match=says):
            explore_config(text)


def test_work_can_finish_kills_a_table_that_is_safe_and_useless():
    """Goal: a grant that asks the opposite of `rate_allows` refuses every call, so every safety invariant holds and no run
    ends with the task done: the explorer's liveness verdict kills it, and holds for the shipped table."""
    from shiftchange.lab.trial import FINISHES

    scale = Scale(explore=("workers=1 refusals=1",), scenarios=())
    base = run_trial(packaged_spec(), scale, label="spec", timelines=False)
    assert base.verdicts()[("explore", FINISHES)].status == "ok"
    useless = negate_guard(packaged_spec(), "attempt", 10, "rate_allows")
    trial = run_trial(useless, scale, label="useless", timelines=False, stop_early=True)
    assert (trial.killed_by.check, trial.killed_by.name) == ("explore", FINISHES)
    assert "no run ends with every task done" in trial.killed_by.detail
    assert all(finding.ok for (check, name), finding in trial.verdicts().items() if name != FINISHES)
