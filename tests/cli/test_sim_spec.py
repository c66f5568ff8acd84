"""`shiftchange sim ... --spec DIR|REV`: the simulator runs the table it is given, says which files it read, records the
spec's label and digest, and names it in every replay; a bad name or a malformed spec is one line and exit 2.

The failing tables are copies of the packaged spec with a worker row unfenced. Both are caught by the default
scenario. An unfenced `complete` needs the nemesis's aimed pauses: the agent reports completion right after the
fenced receipt of its last effect, so a pause at a random moment almost never leaves a worker that lost its lease
with only its completion left to send; a pause aimed before `complete_attempt` that wakes when the retry starts does.
"""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import subprocess

import pytest

from shiftchange.cli.main import main
from shiftchange.core import Event
from shiftchange.core.table import packaged
from shiftchange.lab.settings import PLACED_PATH, apply
from shiftchange.sim.config import FaultSpec
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play
from shiftchange.spec import DEFAULT_DIRECTORY, load_spec
from shiftchange.spec.loader import FILES
from shiftchange.spec.source import read_spec


def copy_spec(folder):
    """The packaged spec's four files, copied into `folder`."""
    folder.mkdir()
    for name in FILES.values():
        shutil.copy(DEFAULT_DIRECTORY / name, folder / name)
    return folder


def unfence(folder, trigger):
    """Set `fenced = false` on every row of `trigger` in the copy's attempt.toml (at least one must change)."""
    path = folder / "attempt.toml"
    rows = path.read_text().split("[[transition]]")
    changed = 0
    for index, row in enumerate(rows):
        if f'\ntrigger = "{trigger}"\n' in row and "fenced = true" in row:
            rows[index] = row.replace("fenced = true", "fenced = false")
            changed += 1
    assert changed, f"no fenced {trigger} row in {path}"
    path.write_text("[[transition]]".join(rows))
    return folder


@pytest.fixture
def shipped(tmp_path):
    return copy_spec(tmp_path / "shipped")


@pytest.fixture
def renew_unfenced(tmp_path):
    return unfence(copy_spec(tmp_path / "renew-unfenced"), "renew")


@pytest.fixture
def complete_unfenced(tmp_path):
    return unfence(copy_spec(tmp_path / "complete-unfenced"), "complete")


def shiftchange(capsys, *argv):
    status = main([str(word) for word in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def replay_line(out):
    lines = [line for line in out.splitlines() if line.startswith("replay: ")]
    assert lines, out
    return lines[0].removeprefix("replay: ")


def read_line(folder):
    return "read spec: " + ", ".join(str(folder / name) for name in FILES.values())


# ------------------------------------------------------------------ sim run


def test_the_shipped_spec_given_as_a_folder_plays_the_packaged_run(capsys, shipped):
    """The same table, given as a folder: the same history, a pass, the spec named on stderr, in the JSON and in the replay."""
    status, out, err = shiftchange(capsys, "sim", "run", "--spec", shipped, "--tasks", 300, "--seed", 1, "--json")
    report = json.loads(out)
    assert status == 0 and report["ok"]
    assert err.splitlines() == [read_line(shipped)]
    assert report["spec"] == {"label": str(shipped), "digest": packaged().digest}
    assert shlex.split(report["replay"])[-2:] == ["--spec", str(shipped)]
    status, plain, err = shiftchange(capsys, "sim", "run", "--tasks", 300, "--seed", 1, "--json")
    packaged_report = json.loads(plain)
    assert (status, err) == (0, "")
    # the folder's table is the packaged one: the run is the same run
    assert packaged_report["subject"]["digest"] == report["subject"]["digest"]
    assert packaged_report["spec"] == {"label": "the packaged spec", "digest": packaged().digest}
    assert "--spec" not in packaged_report["replay"]


def test_without_spec_the_report_reads_as_before(capsys):
    status, out, err = shiftchange(capsys, "sim", "run", "--tasks", 20, "--seed", 0)
    assert (status, err) == (0, "")
    assert "spec" not in out.splitlines()[0] and "read spec" not in out


def test_an_unfenced_renewal_fails_fenced_writes_and_its_replay_names_the_spec(capsys, renew_unfenced):
    """The default scenario's pauses wake workers whose stale renewal the unfenced table lands on the task's new Attempt."""
    status, out, err = shiftchange(capsys, "sim", "run", "--spec", renew_unfenced, "--tasks", 300, "--seed", 1, "--no-shrink")
    assert status == 1
    assert err.splitlines() == [read_line(renew_unfenced)]
    digest = load_spec(renew_unfenced).digest
    assert f"spec {renew_unfenced} (digest {digest})" in out.splitlines()[0]
    assert any(line.split()[:2] == ["FAIL", "fenced_writes"] for line in out.splitlines())
    assert "accepted renew on" in out
    replay = replay_line(out)
    words = shlex.split(replay)
    assert words[words.index("--spec") + 1] == str(renew_unfenced)
    status, again, _ = shiftchange(capsys, *words[1:], "--json", "--no-shrink")
    report = json.loads(again)
    assert status == 1 and report["invariants"]["fenced_writes"]["status"] == "violated"
    assert report["replay"] == replay and report["spec"] == {"label": str(renew_unfenced), "digest": digest}


def test_the_shrunk_counterexample_plays_the_same_spec(capsys, renew_unfenced):
    status, out, _ = shiftchange(capsys, "sim", "run", "--spec", renew_unfenced, "--tasks", 75, "--seed", 1, "--json")
    minimal = json.loads(out)["minimal"]
    assert status == 1 and minimal["invariant"] == "fenced_writes"
    words = shlex.split(minimal["replay"])
    assert words[words.index("--spec") + 1] == str(renew_unfenced)
    status, again, _ = shiftchange(capsys, *words[1:], "--json", "--no-shrink")
    assert status == 1 and json.loads(again)["invariants"]["fenced_writes"]["status"] == "violated"


def test_spec_check_fails_an_unfenced_complete(capsys, complete_unfenced):
    status, out, _ = shiftchange(capsys, "spec", "check", "--spec", complete_unfenced)
    assert status == 1
    assert any(line.split()[:2] == ["FAIL", "attempt.fenced_worker_writes"] for line in out.splitlines())


AIMED = "pause busy at=0 for=600 before=complete_attempt wake=replaced"
"""The chapter's stale worker, placed: the first worker about to complete freezes until another starts its task's retry."""


def test_the_default_run_catches_an_unfenced_complete(capsys, complete_unfenced):
    """The issue's test: `sim run --spec DIR` alone, the main job. Its aimed pauses freeze a worker about to report its
    result and wake it as its task's retry starts; the unproven completion lands on the retry's Attempt."""
    status, out, _ = shiftchange(capsys, "sim", "run", "--spec", complete_unfenced, "--no-shrink")
    assert status == 1
    assert any(line.split()[:2] == ["FAIL", "fenced_writes"] for line in out.splitlines())
    assert "accepted complete on" in out
    words = shlex.split(replay_line(out))
    assert words[words.index("--spec") + 1] == str(complete_unfenced)


def _stale_completions(config_history):
    """Each accepted completion whose presented generation is not its Attempt's: (event, the Attempt's own worker)."""
    claims = {e.attempt_id: e for e in config_history if e.kind == "claim" and e.accepted}
    return [
        (e, claims[e.attempt_id].worker_id)
        for e in config_history
        if e.kind == "complete" and e.accepted and e.generation != claims[e.attempt_id].generation
    ]


def test_an_unfenced_complete_lets_a_stale_worker_complete_over_the_retry(capsys, complete_unfenced):
    """The chapter's stale worker: its completion, unproven, lands on the task's current Attempt, the retry another
    worker holds; the event names the stale worker that wrote, not the retry's. The shipped table refuses it."""
    argv = ("sim", "run", "--spec", complete_unfenced, "--scenario", "baseline", "--tasks", 40, "--seed", 1, "--fault", AIMED)
    status, out, _ = shiftchange(capsys, *argv, "--no-shrink")
    assert status == 1
    assert any(line.split()[:2] == ["FAIL", "fenced_writes"] for line in out.splitlines())
    assert "accepted complete on" in out
    words = shlex.split(replay_line(out))
    assert words[words.index("--spec") + 1] == str(complete_unfenced) and words[words.index("--fault") + 1] == AIMED
    status, again, _ = shiftchange(capsys, *words[1:], "--json", "--no-shrink")
    assert status == 1 and json.loads(again)["invariants"]["fenced_writes"]["status"] == "violated"
    status, shipped_out, _ = shiftchange(capsys, *argv[:3], DEFAULT_DIRECTORY, *argv[4:], "--no-shrink")
    assert status == 0, shipped_out  # the same pause under the shipped table: the stale completion is refused


def test_a_stale_write_names_its_writer_not_the_replacement(complete_unfenced):
    """The accepted stale completion is the paused worker's: the history names it, not the worker holding the retry."""
    config = scenario_config("baseline", 1, 40)
    config = apply(config, {PLACED_PATH: (FaultSpec.parse(AIMED),)})
    heard = []
    play(config, 1, "baseline", table=str(complete_unfenced), history_sink=heard.append)
    paused = next(entry for entry in heard if type(entry) is not Event and getattr(entry, "kind", None) == "pause")
    events = [entry for entry in heard if type(entry) is Event]
    stale = _stale_completions(events)
    assert stale, "the aimed pause made no stale completion"
    for event, holder in stale:
        assert event.worker_id == paused.target != holder
        assert event.generation < next(e.generation for e in events if e.kind == "claim" and e.attempt_id == event.attempt_id)


def test_the_report_files_record_the_spec(capsys, tmp_path, renew_unfenced):
    """report.json, the HTML page and the coverage file of a run of a given spec name it."""
    artifacts, page, coverage = tmp_path / "run", tmp_path / "page.html", tmp_path / "cov.json"
    argv = ("sim", "run", "--spec", renew_unfenced, "--tasks", 20, "--artifacts", artifacts, "--report", page, "--coverage", coverage)
    status, _out, _ = shiftchange(capsys, *argv)
    digest = load_spec(renew_unfenced).digest
    report = json.loads((artifacts / "report.json").read_text())
    assert status in (0, 1) and report["spec"] == {"label": str(renew_unfenced), "digest": digest}
    assert f"{renew_unfenced}, digest {digest}" in page.read_text()
    recorded = json.loads(coverage.read_text())
    assert f"--spec {renew_unfenced}" in json.dumps(recorded)
    status, out, err = shiftchange(capsys, "spec", "review", "--spec", renew_unfenced, "--coverage", coverage, "-o", tmp_path / "review")
    assert (status, err) == (1, "")  # counted against the rows of the spec it ran, whose unfenced renewal fails a property
    assert "attempt.fenced_worker_writes" in out


# ------------------------------------------------------------------ bad input


BAD_NAME_COMMANDS = {
    "run": ("sim", "run", "--tasks", 5),
    "sweep": ("sim", "sweep", "--seeds", 0, "--tasks", 5),
    "phase": ("sim", "phase", "--axis", "trigger.for_s=20", "--trigger", "outage model_provider at=100 for=20", "--tasks", 5),
    "tune lease": ("sim", "tune", "lease", "--tool-call-s", 5, "--renewal-loss", 0.1, "--target-per-1000", 1, "--tasks", 5),
    "tune calls": ("sim", "tune", "calls", "--seeds", 0),
}


@pytest.mark.parametrize("command", BAD_NAME_COMMANDS)
def test_a_spec_that_names_nothing_is_one_line_and_exit_2_with_nothing_played(capsys, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    status, out, err = shiftchange(capsys, *BAD_NAME_COMMANDS[command], "--spec", "nosuchdir")
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and "nosuchdir" in err


def test_a_malformed_spec_is_one_line_naming_its_file_and_exit_2(capsys, shipped):
    (shipped / "task.toml").write_text((shipped / "task.toml").read_text() + "\nbroken = = 1\n")
    status, out, err = shiftchange(capsys, "sim", "run", "--spec", shipped, "--tasks", 5)
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and f"{shipped / 'task.toml'}:" in err


def test_a_git_revision_names_the_spec_it_holds(capsys, monkeypatch):
    """`--spec HEAD` reads the repository's spec/ at HEAD, and the replay names it as read (HEAD:spec)."""
    root = DEFAULT_DIRECTORY.parent
    inside = shutil.which("git") and subprocess.run(["git", "-C", root, "cat-file", "-e", "HEAD:spec/attempt.toml"], check=False)
    if not inside or inside.returncode:
        pytest.skip("the packaged spec is not in a git checkout")
    monkeypatch.chdir(root)
    status, out, err = shiftchange(capsys, "sim", "run", "--spec", "HEAD", "--tasks", 10, "--json")
    report = json.loads(out)
    assert status == 0 and err.startswith("read spec: HEAD:spec/attempt.toml, ")
    assert report["spec"] == {"label": "HEAD:spec", "digest": read_spec("HEAD").digest}
    assert shlex.split(report["replay"])[-2:] == ["--spec", "HEAD:spec"]


# ------------------------------------------------------------------ sweep and phase


def test_a_sweep_carries_the_spec_to_its_workers_and_its_digest_in_every_row(capsys, tmp_path, renew_unfenced):
    """Two worker processes play the spec the sweep read; a resumed table of another spec is refused, of the same one kept."""
    out = tmp_path / "rows.csv"
    argv = ("sim", "sweep", "--seeds", "0-1", "--tasks", 20, "--out", out)
    status, printed, err = shiftchange(capsys, *argv, "--spec", renew_unfenced, "--jobs", 2)
    assert status in (0, 1) and err.splitlines() == [read_line(renew_unfenced)], printed
    rows = list(csv.DictReader(out.open()))
    digest = load_spec(renew_unfenced).digest
    assert [row["spec_digest"] for row in rows] == [digest, digest]
    for row in rows:
        words = shlex.split(row["replay"])
        assert words[words.index("--spec") + 1] == str(renew_unfenced)
    before = out.read_bytes()
    status, printed, err = shiftchange(capsys, *argv, "--jobs", 1)
    assert (status, printed) == (2, "") and "spec_digest" in err and out.read_bytes() == before
    status, printed, _ = shiftchange(capsys, *argv, "--spec", renew_unfenced, "--jobs", 1)
    assert "already in" in printed and "playing 0" in printed


def test_a_sweep_without_spec_carries_the_packaged_digest(capsys, tmp_path):
    out = tmp_path / "rows.csv"
    status, _printed, err = shiftchange(capsys, "sim", "sweep", "--seeds", 0, "--tasks", 10, "--out", out, "--jobs", 1)
    row = next(csv.DictReader(out.open()))
    assert (status, err) == (0, "") and row["spec_digest"] == packaged().digest and "--spec" not in row["replay"]


def test_both_arms_of_a_map_replay_on_its_spec(capsys, tmp_path, renew_unfenced):
    out = tmp_path / "rows.csv"
    argv = ("sim", "phase", "--axis", "workload.arrival_rate_per_s=0.05", "--trigger", "outage model_provider at=100 for=20")
    status, _printed, err = shiftchange(
        capsys, *argv, "--seeds", 0, "--tasks", 5, "--arrivals-s", 300, "--jobs", 1, "--spec", renew_unfenced, "--out", out
    )
    assert status in (0, 1) and err.splitlines() == [read_line(renew_unfenced)]
    row = next(csv.DictReader(out.open()))
    for arm in ("control", "triggered"):
        words = shlex.split(row[f"{arm}.replay"])
        assert words[words.index("--spec") + 1] == str(renew_unfenced)
