"""`shiftchange sim ... --spec DIR|REV`: the simulator runs the table it is given, says which files it read, records the
spec's label and digest, and names it in every replay; a bad name or a malformed spec is one line and exit 2.

The failing tables are copies of the packaged spec with a worker row unfenced. An unfenced renewal is caught by the
default scenario. An unfenced `complete` alone is not (the default run below passes): the agent reports completion
right after the fenced receipt of its last effect, so a worker that lost its lease is stopped by that receipt's
refusal before it can complete. Only a pause that freezes it while the receipt's answer is on the wire, and wakes it
while its task's retry runs, sends the stale completion, and `_stale_completion` places exactly that pause.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
import shutil
import subprocess

import pytest

from shiftchange.cli.main import main
from shiftchange.core import Event
from shiftchange.core.table import packaged
from shiftchange.sim.config import FaultSpec
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.settings import PLACED_PATH, apply
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
    assert packaged_report["digest"] == report["digest"]  # the folder's table is the packaged one: the run is the same run
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


def _stale_completion(scenario="baseline", seed=1, tasks=40):
    """A placed pause that makes a worker complete after its lease is gone, while its task's retry runs.

    It strikes just after the worker's receipt of its last effect (create-pr) reached the orchestrator, so the worker
    hears the answer only when it wakes, and completes at once; it lasts until the middle of the retry's run, found
    in a run whose pause lasts long enough that the worker wakes after the retry ended.
    """
    config = scenario_config(scenario, seed, tasks)
    heard = []
    play(config, seed, scenario, history_sink=lambda entry: heard.append(entry) if type(entry) is Event else None)
    receipt = next(e for e in heard if e.kind == "record_receipt" and e.accepted and e.detail.startswith("create-pr"))
    at_s = math.ceil(receipt.at * 1000 + 0.5) / 1000  # after the receipt arrived, before its answer is heard

    def placed(for_s):
        text = f"pause {receipt.worker_id} at={at_s:g} for={for_s:g}"
        return text, apply(config, {PLACED_PATH: (*config.nemesis.placed, FaultSpec.parse(text))})

    probe = []
    play(placed(600)[1], seed, scenario, history_sink=lambda entry: probe.append(entry) if type(entry) is Event else None)
    retry = [e for e in probe if e.task_id == receipt.task_id and e.accepted and e.attempt_id not in (None, receipt.attempt_id)]
    started = next(e.at for e in retry if e.kind == "start")
    completed = next(e.at for e in retry if e.kind == "complete")
    return placed(round((started + completed) / 2 - at_s, 3))[0]


def test_an_unfenced_complete_lets_a_stale_worker_complete_over_the_retry(capsys, complete_unfenced):
    """The chapter's stale worker: its completion, unproven, lands on the task's current Attempt, the retry another worker holds."""
    fault = _stale_completion()
    argv = ("sim", "run", "--spec", complete_unfenced, "--scenario", "baseline", "--tasks", 40, "--seed", 1, "--fault", fault)
    status, out, _ = shiftchange(capsys, *argv, "--no-shrink")
    assert status == 1
    assert any(line.split()[:2] == ["FAIL", "fenced_writes"] for line in out.splitlines())
    assert "accepted complete on" in out
    words = shlex.split(replay_line(out))
    assert words[words.index("--spec") + 1] == str(complete_unfenced) and words[words.index("--fault") + 1] == fault
    status, again, _ = shiftchange(capsys, *words[1:], "--json", "--no-shrink")
    assert status == 1 and json.loads(again)["invariants"]["fenced_writes"]["status"] == "violated"
    status, shipped_out, _ = shiftchange(capsys, *argv[:3], DEFAULT_DIRECTORY, *argv[4:], "--no-shrink")
    assert status == 0, shipped_out  # the same pause under the shipped table: the stale completion is refused


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
    status, _, err = shiftchange(capsys, "spec", "review", "--spec", renew_unfenced, "--coverage", coverage, "-o", tmp_path / "review")
    assert (status, err) == (0, "")  # counted against the rows of the spec it ran


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
