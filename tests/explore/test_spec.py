"""The explorer runs the table it is given: `--spec` names a folder (or a git revision), the core runs its rows, the
report names it, and its counterexample replays on it; a bad name or a malformed spec is one line and exit 2."""

from __future__ import annotations

import json
import shlex

import pytest

from shiftchange.cli.main import main
from shiftchange.core.table import packaged
from shiftchange.explore import ExploreConfig, ExploreError, World, explore, replay_command
from shiftchange.explore.exposures import pattern_of
from shiftchange.explore.snapshots import Snapshots
from shiftchange.spec import DEFAULT_DIRECTORY, load_spec

COMPLETE_ROW = """trigger = "complete"
source = "running"
dest = "verifying"
actor = "worker"
guards = ["lease_current"]
effects = ["record_result", "revoke_authority"]
fenced = true"""
SMALL = ["--workers", "2", "--tasks", "1", "--pauses", "1"]
"""A worker paused mid-Attempt wakes once its task was retried and claimed by the other: the interleaving an unfenced
complete needs (its stale complete lands on the task's current Attempt, the other worker's)."""


@pytest.fixture
def unfenced(spec_copy):
    """The packaged spec with the worker's complete row unfenced: any caller's complete is the task's current Attempt's."""
    spec_copy.replace("attempt.toml", COMPLETE_ROW, COMPLETE_ROW.replace("fenced = true", "fenced = false"))
    return spec_copy.root


def _argv_of(command: str) -> list[str]:
    return shlex.split(command)[1:]


def test_an_unfenced_complete_is_found_and_replays_on_the_same_spec(unfenced, capsys):
    assert main(["explore", "--spec", str(unfenced), *SMALL, "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("read spec: ") and captured.err.count("\n") == 1
    assert str(unfenced / "attempt.toml") in captured.err
    report = json.loads(captured.out)
    example = report["subject"]["counterexample"]
    assert example["invariant"] == "fenced_writes" and report["search"]["stopped_by"] == "violation"
    assert "presented generation 1; the lease it holds is generation 2" in example["example"][0]
    assert example["steps"][-1] == "worker-1:complete"  # the stale worker's write lands on its replacement's Attempt
    digest = load_spec(unfenced).digest
    assert report["spec"] == {"label": str(unfenced), "digest": digest, "ran": {"label": str(unfenced), "digest": digest}}
    assert digest != packaged().digest and report["config"]["spec"] == str(unfenced)
    assert f"--spec {shlex.quote(str(unfenced))}" in example["replay"]
    assert main([*_argv_of(example["replay"]), "--json"]) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["violation"]["invariant"] == "fenced_writes" and replayed["spec"]["digest"] == digest


def test_the_stale_write_is_attributed_to_the_worker_that_sent_it(unfenced, capsys):
    """The accepted stale complete lands on worker-2's Attempt; the history names worker-1, which sent it (issue 42)."""
    assert main(["explore", "--spec", str(unfenced), *SMALL]) == 1
    lines = capsys.readouterr().out.splitlines()
    stale = [line for line in lines if ": complete task-1#2 gen 1 " in line and line.rstrip().endswith("accepted")]
    claimed = [line for line in lines if ": claim task-1#2 gen 2 " in line]
    assert stale and claimed
    assert all("worker worker-1:" in line for line in stale) and all("worker worker-2:" in line for line in claimed)


def test_the_report_names_the_spec_it_ran(unfenced, capsys):
    assert main(["explore", "--spec", str(unfenced), *SMALL]) == 1
    out = capsys.readouterr().out
    assert f"  spec: {unfenced} (digest {load_spec(unfenced).digest})" in out.splitlines()[:3]
    assert f"--spec {unfenced} --replay '" in out


def test_the_shipped_spec_passes_the_same_configuration(spec_copy, capsys):
    for folder in (DEFAULT_DIRECTORY, spec_copy.root):
        assert main(["explore", "--spec", str(folder), *SMALL]) == 0
        captured = capsys.readouterr()
        assert "the search completed" in captured.out and f"digest {packaged().digest}" in captured.out
        assert captured.err.startswith("read spec: ")


def test_the_packaged_spec_is_the_default_and_named(capsys):
    assert main(["explore", "--workers", "1"]) == 0
    captured = capsys.readouterr()
    assert f"  spec: the packaged spec (digest {packaged().digest})" in captured.out and "read spec" not in captured.err


@pytest.mark.parametrize("processes", [1, 2])
def test_the_spec_travels_to_every_process_with_the_same_counterexample(unfenced, processes):
    config = ExploreConfig(pauses=1, spec=str(unfenced))
    result = explore(config, processes=processes)
    assert result.counterexample is not None and result.counterexample.invariant == "fenced_writes"
    assert result.table.digest == load_spec(unfenced).digest and result.tally.identity  # counted against the spec given
    assert len(result.counterexample.steps) == 19


def test_a_loaded_world_shares_its_table_and_an_anti_pattern_edits_the_given_one(unfenced):
    world = World(ExploreConfig(spec=str(unfenced)))
    snapshots = Snapshots(world)
    assert snapshots.loads(snapshots.dumps(world)).orchestrator.table is world.table  # shared, never compiled again
    assert world.orchestrator.table.digest == load_spec(unfenced).digest
    config = ExploreConfig(pauses=1, spec=str(DEFAULT_DIRECTORY), antipattern="no-fencing")
    played = World(config, pattern_of(config)).table
    assert played.label == f"{DEFAULT_DIRECTORY} with no-fencing" and played.digest != packaged().digest


def test_a_spec_with_a_space_in_its_name_replays(tmp_path):
    config = ExploreConfig(spec=str(tmp_path / "my spec"))
    assert f"--spec '{tmp_path / 'my spec'}'" in replay_command(config, ("control:admit",))
    assert _argv_of(replay_command(config, ("control:admit",)))[-3] == str(tmp_path / "my spec")


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_spec_name_is_a_typed_error(given):
    with pytest.raises(ExploreError, match="spec must name"):
        ExploreConfig(spec=given)


def test_a_bad_spec_name_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # not a git work tree either: neither a folder nor a revision
    assert main(["explore", "--spec", "nosuchdir"]) == 2
    err = capsys.readouterr().err
    assert "nosuchdir" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_malformed_spec_exits_2_with_one_line_naming_the_file(spec_copy, capsys):
    spec_copy.replace("attempt.toml", COMPLETE_ROW, COMPLETE_ROW.replace('dest = "verifying"', 'dest = "nowhere"'))
    assert main(["explore", "--spec", str(spec_copy.root), "--workers", "1"]) == 2
    captured = capsys.readouterr()
    assert "attempt.toml" in captured.err and captured.err.count("\n") == 1 and captured.out == ""


def test_the_anti_pattern_list_takes_no_spec(capsys):
    assert main(["explore", "--antipatterns", "--spec", str(DEFAULT_DIRECTORY)]) == 2
    assert "--spec" in capsys.readouterr().err
