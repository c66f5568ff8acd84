"""`shiftchange spec diff`: rows matched and compared field by field, verdicts that move, touched invariants, folders and git revisions."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from shiftchange.cli import spec_diff
from shiftchange.cli.main import main
from shiftchange.spec import DEFAULT_DIRECTORY, SpecError, load_spec
from shiftchange.spec.diagram import Marks
from shiftchange.spec.diff import diff_specs, marks_for

UNFENCED = ('effects = ["record_checkpoint"]\nfenced = true', 'effects = ["record_checkpoint"]\nfenced = false')
"""The checkpoint row, a worker's material write, made to skip the fence."""
CHECKPOINT_ROW = next(row.index + 1 for row in load_spec().attempt.rows if row.trigger == "checkpoint")
"""The number the review page and the diagrams give the checkpoint row."""
RECONCILE_ROW = """[[transition]]
trigger = "reconcile"
source = "suspect"
dest = "reconciling"
actor = "orchestrator"
effects = ["query_provider"]
"""
LANDED_FAILED = """[[transition]]
trigger = "effects_landed"
source = "reconciling"
dest = "failed"
actor = "orchestrator"
guards = ["calls_settled", "!cancel_requested", "!poison_signature"]
effects = ["record_findings", "classify_failure"]
"""
LANDED_QUARANTINED = LANDED_FAILED.replace('dest = "failed"', 'dest = "quarantined"').replace('"!poison_signature"', '"poison_signature"')
PAUSED = """
[states.paused]
resting = true
description = "Held by an operator."

[[transition]]
trigger = "cancel"
source = "paused"
dest = "cancelling"
actor = "operator"
effects = ["request_cancel"]
"""
"""A new state, and a new row that reaches out of it (nothing reaches into it)."""


def spec_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(DEFAULT_DIRECTORY, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


def edit(folder: Path, file: str, old: str, new: str) -> None:
    path = folder / file
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur exactly once in {file}"
    path.write_text(text.replace(old, new))


def append(folder: Path, file: str, text: str) -> None:
    path = folder / file
    path.write_text(path.read_text() + text)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["spec", "diff", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def unfenced(tmp_path: Path) -> tuple[Path, Path]:
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", *UNFENCED)
    return old, new


# ------------------------------------------------------------ the main case


def test_unfencing_a_worker_row_names_the_row_the_field_the_broken_property_and_the_invariant(unfenced, capsys):
    status, out, _ = run(capsys, str(unfenced[0]), str(unfenced[1]))
    assert status == 1
    assert f"row {CHECKPOINT_ROW} changed: checkpoint:" in out
    assert "      fenced: true -> false" in out
    assert "broken (PASS -> FAIL): attempt.fenced_worker_writes" in out
    assert "witness: unfenced worker write: checkpoint" in out
    assert "  fenced_writes: rows of attempt.checkpoint" in out
    assert "anti-pattern no-fencing:" in out
    assert out.rstrip().endswith("the change breaks 1 property: attempt.fenced_worker_writes")


def test_json_carries_the_same_facts(unfenced, capsys):
    status, out, _ = run(capsys, str(unfenced[0]), str(unfenced[1]), "--json")
    assert status == 1
    report = json.loads(out)
    assert report["breaks"] is True and report["equal"] is False
    (changed,) = report["machines"]["attempt"]["rows"]["changed"]
    assert changed == {
        "old_row": CHECKPOINT_ROW,
        "new_row": CHECKPOINT_ROW,
        "trigger": "checkpoint",
        "fields": {"fenced": {"old": True, "new": False}},
    }
    assert report["machines"]["task"]["changed"] is False
    (broken,) = report["properties"]["broken"]
    assert broken["name"] == "attempt.fenced_worker_writes" and (broken["old"], broken["new"]) == ("PASS", "FAIL")
    assert any("checkpoint" in line for line in broken["witness"])
    touched = {entry["name"]: entry for entry in report["touched_invariants"]}
    assert touched["fenced_writes"]["triggers"] == ["attempt.checkpoint"]
    assert "no-fencing" in [pattern["name"] for pattern in touched["fenced_writes"]["antipatterns"]]


def test_json_keys_keep_their_order(unfenced, capsys):
    first = run(capsys, str(unfenced[0]), str(unfenced[1]), "--json")[1]
    assert list(json.loads(first)) == [
        "old",
        "new",
        "equal",
        "breaks",
        "machines",
        "failure_domains",
        "invariants",
        "properties",
        "touched_invariants",
        "diagrams",
    ]
    assert run(capsys, str(unfenced[0]), str(unfenced[1]), "--json")[1] == first


# ------------------------------------------------------- what shows up where


def test_identical_specs_are_no_change_and_exit_0(tmp_path, capsys):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    status, out, err = run(capsys, str(old), str(new))
    assert (status, err) == (0, "")
    assert out.splitlines()[2] == "no change"
    assert json.loads(run(capsys, str(old), str(new), "--json")[1])["equal"] is True


def test_added_row_removed_row_added_state_and_changed_statement_each_show(tmp_path, capsys):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", RECONCILE_ROW, "")
    append(new, "attempt.toml", PAUSED)
    edit(new, "invariants.toml", "passed Suspect then Reconciling", "passed Suspect, then Reconciling,")
    removed = next(row.index + 1 for row in load_spec(old).attempt.rows if row.trigger == "reconcile")
    added = len(load_spec(new).attempt.rows)
    status, out, _ = run(capsys, str(old), str(new))
    assert status == 1  # paused is unreachable, and the reconcile trigger is left unused
    assert f"  row {added} added: cancel: paused -> cancelling, by operator" in out
    assert f"  old row {removed} removed: reconcile: suspect -> reconciling" in out
    assert "  state added: paused (resting: true;" in out
    assert "  invariant changed: suspect_then_reconcile\n      statement: " in out
    assert "  suspect_then_reconcile: statement changed; rows of attempt.reconcile, attempt.cancel" in out
    assert "broken (PASS -> FAIL): attempt.reachable" in out
    # Removing a row renumbers the rows after it; that is not a change of theirs.
    assert f"renumbered, content unchanged: {removed + 1}-{added} -> {removed}-{added - 1}" in out
    assert out.count(" changed: ") == 1


def test_failure_domain_field_change_shows_old_and_new(tmp_path, capsys):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "failure_domains.toml", "retries_max = 5", "retries_max = 6")
    status, out, _ = run(capsys, str(old), str(new))
    assert status == 0
    assert "  domain changed: capacity\n      retries_max: 5 -> 6" in out
    assert "  every verdict is unchanged" in out


def test_vocabulary_roles_and_state_flags_are_compared(tmp_path):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(
        new,
        "attempt.toml",
        'description = "Record the last safe checkpoint."\nmaterial = true',
        'description = "Record it."\nmaterial = false',
    )
    edit(new, "attempt.toml", 'cancel_trigger = "cancel"\n', "")
    edit(new, "task.toml", "[states.blocked]\nresting = true\n", "[states.blocked]\n")
    diff = diff_specs(load_spec(old), load_spec(new))
    attempt, task = diff.machines["attempt"], diff.machines["task"]
    (effect,) = attempt.effects.changed
    assert effect.name == "record_checkpoint"
    assert {(f.field, f.old, f.new) for f in effect.fields} == {
        ("description", "Record the last safe checkpoint.", "Record it."),
        ("material", True, False),
    }
    assert [(f.field, f.old, f.new) for f in attempt.header] == [("roles.cancel_trigger", "cancel", None)]
    assert [(c.name, [(f.field, f.old, f.new) for f in c.fields]) for c in task.states.changed] == [("blocked", [("resting", True, False)])]
    # With no cancel trigger, the cancellation properties are gone from the attempt machine.
    assert {v.name for v in diff.verdicts if v.kind == "removed"} == {"attempt.cancel_everywhere", "attempt.cancel_through_reconciliation"}


# ----------------------------------------------------------- row matching


def test_a_moved_row_is_renumbered_not_changed(tmp_path):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", RECONCILE_ROW, "")
    append(new, "attempt.toml", "\n" + RECONCILE_ROW)
    diff = diff_specs(load_spec(old), load_spec(new))
    rows = diff.machines["attempt"].rows
    assert not rows and diff.equal
    assert ("reconcile", len(load_spec(new).attempt.rows)) in {(pair.new.trigger, pair.new.index + 1) for pair in rows.renumbered}


def test_changed_rows_pair_with_the_most_similar_row_of_their_trigger(tmp_path):
    # Two effects_landed rows are edited and swapped: pairing by table order would cross them, similarity must not.
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edited_failed = LANDED_FAILED.replace('effects = ["record_findings", "classify_failure"]', 'effects = ["record_findings"]')
    edited_quarantined = LANDED_QUARANTINED.replace('["record_findings", "classify_failure"]', '["classify_failure", "record_findings"]')
    edit(new, "attempt.toml", LANDED_FAILED + "\n" + LANDED_QUARANTINED, edited_quarantined + "\n" + edited_failed)
    rows = diff_specs(load_spec(old), load_spec(new)).machines["attempt"].rows
    assert not rows.added and not rows.removed
    changes = {(pair.old.dest, pair.new.dest): [(f.field, f.old, f.new) for f in pair.fields] for pair in rows.changed}
    both = ("record_findings", "classify_failure")
    assert changes == {
        ("failed", "failed"): [("effects", both, ("record_findings",))],
        ("quarantined", "quarantined"): [("effects", both, ("classify_failure", "record_findings"))],
    }


def test_a_row_sharing_no_state_with_the_old_one_is_a_removal_and_an_addition(tmp_path):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(
        new,
        "attempt.toml",
        'trigger = "reconcile"\nsource = "suspect"\ndest = "reconciling"',
        'trigger = "reconcile"\nsource = "verifying"\ndest = "blocked"',
    )
    rows = diff_specs(load_spec(old), load_spec(new)).machines["attempt"].rows
    assert [row.trigger for row in rows.added] == ["reconcile"] and [row.trigger for row in rows.removed] == ["reconcile"]
    assert not rows.changed


def test_source_order_and_guard_order_are_no_change(tmp_path):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", 'source = ["claimed", "running"]\ndest = "suspect"', 'source = ["running", "claimed"]\ndest = "suspect"')
    edit(new, "attempt.toml", 'guards = ["capacity_available", "budget_left"]', 'guards = ["budget_left", "capacity_available"]')
    assert diff_specs(load_spec(old), load_spec(new)).equal


# --------------------------------------------------------- exit status


def test_a_failure_already_in_old_does_not_make_exit_1(tmp_path, capsys):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    for folder in (old, new):
        edit(folder, "attempt.toml", *UNFENCED)
    edit(new, "failure_domains.toml", "retries_max = 5", "retries_max = 6")
    status, out, _ = run(capsys, str(old), str(new))
    assert status == 0
    assert "still failing (FAIL before and after): attempt.fenced_worker_writes" in out
    assert "the change breaks no property" in out


def test_fixing_a_property_exits_0_and_says_fixed(unfenced, capsys):
    status, out, _ = run(capsys, str(unfenced[1]), str(unfenced[0]))
    assert status == 0
    assert "fixed (FAIL -> PASS): attempt.fenced_worker_writes" in out


def test_malformed_new_spec_exits_2_with_one_line(tmp_path, capsys):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", 'trigger = "checkpoint"', 'trigger = "checkpoint')
    status, out, err = run(capsys, str(old), str(new))
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "attempt.toml:" in err and "bad TOML" in err and "Traceback" not in err


def test_nonexistent_path_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(capsys, str(tmp_path / "nowhere"), str(spec_folder(tmp_path, "new")))
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and "nowhere" in err and "folder" in err


def test_unknown_diagram_extension_exits_2(unfenced, capsys):
    status, _, err = run(capsys, str(unfenced[0]), str(unfenced[1]), "--diagram", str(unfenced[1] / "out.jpeg"))
    assert status == 2 and "diagram's format" in err


# ------------------------------------------------------------------ git


def git(repo: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=shiftchange", "-c", "user.email=tests@example.invalid", "-c", "commit.gpgsign=false", *argv],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    spec_folder(root, "spec")
    git(root, "init", "-q")
    git(root, "add", "spec")
    git(root, "commit", "-q", "-m", "the spec")
    monkeypatch.chdir(root)
    return root


def test_a_git_revision_is_compared_with_the_work_tree(repo, capsys):
    edit(repo / "spec", "attempt.toml", *UNFENCED)
    status, out, _ = run(capsys, "HEAD")
    assert status == 1
    assert out.splitlines()[0] == f"shiftchange spec diff: HEAD:spec -> {repo / 'spec'}"
    assert f"row {CHECKPOINT_ROW} changed: checkpoint:" in out and "fenced: true -> false" in out


def test_a_revision_with_a_path_reads_that_folder(repo, capsys):
    spec_folder(repo, "proposal")
    edit(repo / "proposal", "attempt.toml", *UNFENCED)
    git(repo, "add", "proposal")
    git(repo, "commit", "-q", "-m", "a proposal")
    status, out, _ = run(capsys, "HEAD:spec", "HEAD:proposal")
    assert status == 1 and "fenced: true -> false" in out
    assert "(HEAD:proposal/attempt.toml:" in out  # a witness names the file as git does, not a temporary folder


def test_a_malformed_spec_at_a_revision_names_it_as_git_does(repo, capsys):
    edit(repo / "spec", "attempt.toml", 'trigger = "checkpoint"', 'trigger = "checkpoint')
    git(repo, "commit", "-q", "-am", "broken")
    status, _, err = run(capsys, "HEAD", str(spec_folder(repo.parent, "good")))
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "HEAD:spec/attempt.toml:" in err and "bad TOML" in err


def test_an_unknown_revision_exits_2(repo, capsys):
    status, _, err = run(capsys, "no-such-branch")
    assert status == 2 and "neither a folder nor a revision git knows" in err


def test_a_revision_outside_a_git_work_tree_exits_2(tmp_path, capsys, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    status, _, err = run(capsys, "HEAD", str(spec_folder(tmp_path, "new")))
    assert status == 2 and "not in a git work tree" in err


def test_a_revision_without_git_installed_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from shiftchange.spec import source

    monkeypatch.setattr(source.shutil, "which", lambda name: None)
    status, _, err = run(capsys, "HEAD", str(spec_folder(tmp_path, "new")))
    assert status == 2 and "git is not installed" in err


# ---------------------------------------------------------------- diagrams


def test_marks_name_the_added_changed_and_removed_rows_of_the_new_machine(tmp_path):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", *UNFENCED)
    edit(new, "attempt.toml", RECONCILE_ROW, "")
    append(new, "attempt.toml", PAUSED)
    old_spec, new_spec = load_spec(old), load_spec(new)
    marks = marks_for(diff_specs(old_spec, new_spec), "attempt")
    reconcile = next(row for row in old_spec.attempt.rows if row.trigger == "reconcile")
    assert marks == Marks(
        added=frozenset({len(new_spec.attempt.rows) - 1}),
        changed=frozenset({CHECKPOINT_ROW - 1}),
        removed=(reconcile,),
        removed_states=(),
    )
    assert marks_for(diff_specs(old_spec, new_spec), "task") == Marks()


def test_marks_keep_the_states_the_new_machine_lost(tmp_path):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    append(old, "attempt.toml", PAUSED)
    old_spec = load_spec(old)
    marks = marks_for(diff_specs(old_spec, load_spec(new)), "attempt")
    assert marks.removed_states == (old_spec.attempt.states["paused"],)
    assert [row.sources for row in marks.removed] == [("paused",)]


def test_diagram_draws_each_changed_machine_with_its_marks(tmp_path, capsys, monkeypatch):
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "attempt.toml", *UNFENCED)
    edit(
        new,
        "task.toml",
        'trigger = "approve"\nsource = "review"\ndest = "done"\nactor = "operator"',
        'trigger = "approve"\nsource = "review"\ndest = "done"\nactor = "orchestrator"',
    )
    calls = []
    real = spec_diff.render

    def recording(machine, fmt, path, renderer="auto", marks=None):
        calls.append((machine.name, fmt, Path(path).name, marks))
        return real(machine, fmt, path, renderer, marks=marks)

    monkeypatch.setattr(spec_diff, "render", recording)
    output = tmp_path / "change.mmd"
    status, out, _ = run(capsys, str(old), str(new), "--diagram", str(output))
    assert status == 1
    approve = next(row.index for row in load_spec(new).task.rows if row.trigger == "approve")
    assert calls == [
        ("attempt", "mermaid", "change.mmd", Marks(changed=frozenset({CHECKPOINT_ROW - 1}))),
        ("task", "mermaid", "change-task.mmd", Marks(changed=frozenset({approve}))),
    ]
    assert output.read_text().startswith("%%") and (tmp_path / "change-task.mmd").is_file()
    assert f"wrote {output} (attempt machine, mermaid, text)" in out


def test_diagram_with_machine_draws_only_that_one(unfenced, tmp_path, capsys):
    output = tmp_path / "task.dot"
    status, out, _ = run(capsys, str(unfenced[0]), str(unfenced[1]), "--diagram", str(output), "--machine", "task", "--json")
    assert status == 1
    assert json.loads(out)["diagrams"] == [{"machine": "task", "path": str(output), "format": "dot", "renderer": "text"}]
    assert output.read_text().lstrip().startswith("//") and not (tmp_path / "task-attempt.dot").exists()


# ------------------------------------------------- invariants name their rows


def test_every_packaged_invariant_names_declared_triggers():
    spec = load_spec()
    for invariant in spec.invariants.values():
        assert invariant.triggers, invariant.name
        for name in invariant.triggers:
            machine, trigger = name.split(".")
            assert trigger in spec.machines[machine].triggers, name


def test_an_unknown_invariant_trigger_is_a_spec_error_with_its_line(tmp_path):
    folder = spec_folder(tmp_path, "spec")
    edit(
        folder,
        "invariants.toml",
        '"attempt.record_receipt",\n  "task.dispatch", "task.retry",\n]',
        '"attempt.record_receipt",\n  "task.dispatch", "task.retry", "task.redo",\n]',
    )
    with pytest.raises(SpecError) as caught:
        load_spec(folder)
    line = next(n for n, text in enumerate((folder / "invariants.toml").read_text().splitlines(), 1) if '"task.redo"' in text)
    assert caught.value.where.file.endswith("invariants.toml") and caught.value.where.line == line
    assert caught.value.problem == "unknown task trigger 'redo'"


@pytest.mark.parametrize(
    ("listed", "problem"),
    [("robot.claim", "unknown machine 'robot' in trigger 'robot.claim'"), ("claim", "bad trigger 'claim': not machine.trigger")],
)
def test_an_invariant_trigger_must_name_a_machine(tmp_path, listed, problem):
    folder = spec_folder(tmp_path, "spec")
    edit(
        folder,
        "invariants.toml",
        '"attempt.record_receipt",\n  "task.dispatch", "task.retry",\n]',
        f'"attempt.record_receipt",\n  "task.dispatch", "task.retry", "{listed}",\n]',
    )
    with pytest.raises(SpecError) as caught:
        load_spec(folder)
    assert caught.value.problem == problem


def test_an_invariant_judging_other_triggers_is_touched_with_its_anti_patterns(tmp_path, capsys):
    """Dropping a trigger from what budgets_hold judges changes what it guards: touched, and the anti-pattern it catches listed."""
    old, new = spec_folder(tmp_path, "old"), spec_folder(tmp_path, "new")
    edit(new, "invariants.toml", '"task.dispatch", "task.retry", "task.stop",', '"task.dispatch", "task.retry",')
    status, out, _ = run(capsys, str(old), str(new))
    assert status == 0
    assert "  budgets_hold: judges other triggers" in out
    assert "anti-pattern budget-burn:" in out
