"""A malformed spec gets a SpecError naming file, line, problem and fix; the command line exits 2 with one line."""

from __future__ import annotations

import pytest

from shiftchange.cli.main import main
from shiftchange.spec import SpecError, load_spec


def spec_error(directory) -> SpecError:
    with pytest.raises(SpecError) as caught:
        load_spec(directory)
    return caught.value


def test_packaged_spec_loads_with_both_machines():
    spec = load_spec()
    assert spec.attempt.initial == "queued"
    assert spec.task.initial == "inbox"
    assert {"suspect", "reconciling", "verifying", "cancelling", "blocked", "quarantined"} <= set(spec.attempt.states)
    assert {"ready", "in_progress", "review", "done", "cancelled", "escalated"} <= set(spec.task.states)
    assert {s for s, st in spec.task.states.items() if st.dispatchable} == {"ready", "in_progress"}


def test_bad_toml_names_file_and_line(spec_copy, capsys):
    spec_copy.replace("attempt.toml", 'trigger = "claim"', 'trigger = "claim')
    line = spec_copy.line_of("attempt.toml", 'trigger = "claim')
    assert main(["spec", "check", "--spec", str(spec_copy.root)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1
    assert f"attempt.toml:{line}:" in err and "bad TOML" in err
    assert "Traceback" not in captured.err + captured.out


def test_unknown_state_in_a_row(spec_copy):
    spec_copy.replace("attempt.toml", 'source = "admitted"\ndest = "claimed"', 'source = "admited"\ndest = "claimed"')
    error = spec_error(spec_copy.root)
    assert "unknown state 'admited'" in error.problem
    assert error.where.line == spec_copy.line_of("attempt.toml", 'source = "admited"')
    assert error.where.file.endswith("attempt.toml")


def test_unknown_guard(spec_copy):
    spec_copy.replace("attempt.toml", '"workspace_matches", "worker_healthy"', '"workspace_matches", "worker_happy"')
    error = spec_error(spec_copy.root)
    assert "unknown guard 'worker_happy'" in error.problem
    assert "declare it" in error.fix


def test_unknown_effect(spec_copy):
    spec_copy.replace("attempt.toml", 'effects = ["issue_lease", "freeze_manifest"]', 'effects = ["issue_lease", "freeze_manifesto"]')
    assert "unknown effect 'freeze_manifesto'" in spec_error(spec_copy.root).problem


def test_row_with_no_trigger(spec_copy):
    spec_copy.replace("attempt.toml", 'trigger = "checkpoint"\n', "")
    error = spec_error(spec_copy.root)
    assert error.problem == "row has no trigger"
    assert error.where.line is not None


def test_duplicate_rows_with_the_same_guards(spec_copy):
    spec_copy.append("attempt.toml", '[[transition]]\ntrigger = "reconcile"\nsource = "suspect"\ndest = "failed"\nactor = "orchestrator"\n')
    error = spec_error(spec_copy.root)
    assert "duplicate row" in error.problem and "'reconcile'" in error.problem
    assert "!name" in error.fix


def test_no_initial_state(spec_copy, capsys):
    spec_copy.replace("task.toml", 'initial = "inbox"\n', "")
    assert main(["spec", "check", "--spec", str(spec_copy.root)]) == 2
    err = capsys.readouterr().err
    assert "task.toml:" in err and "no initial state" in err


def test_domain_without_response(spec_copy):
    spec_copy.replace("failure_domains.toml", '[domains.executor]\nresponse = "back_off_and_retry"\n', "[domains.executor]\n")
    error = spec_error(spec_copy.root)
    assert "domain 'executor' has no response" in error.problem
    assert error.where.line == spec_copy.line_of("failure_domains.toml", "[domains.executor]")


def test_unknown_response(spec_copy):
    spec_copy.replace("failure_domains.toml", 'response = "reconcile"', 'response = "pray"')
    assert "unknown response 'pray'" in spec_error(spec_copy.root).problem


def test_guard_both_required_and_negated(spec_copy):
    spec_copy.replace(
        "attempt.toml", 'guards = ["capacity_available", "budget_left"]', 'guards = ["capacity_available", "!capacity_available"]'
    )
    assert "both requires and negates" in spec_error(spec_copy.root).problem


def test_fenced_must_be_boolean(spec_copy):
    spec_copy.replace("attempt.toml", 'effects = ["record_checkpoint"]\nfenced = true', 'effects = ["record_checkpoint"]\nfenced = "yes"')
    assert "fenced must be true or false" in spec_error(spec_copy.root).problem


def test_missing_file(spec_copy):
    (spec_copy.root / "invariants.toml").unlink()
    error = spec_error(spec_copy.root)
    assert error.problem == "file not found" and error.where.file.endswith("invariants.toml")


def test_missing_directory_is_a_clean_error(tmp_path, capsys):
    assert main(["spec", "check", "--spec", str(tmp_path / "nowhere")]) == 2
    assert "spec directory not found" in capsys.readouterr().err


def test_bad_arguments_exit_2_with_one_line(capsys):
    assert main(["spec", "diagram", "--machine", "robot", "--format", "png", "-o", "x.png"]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1
    assert "invalid choice: 'robot'" in captured.err
