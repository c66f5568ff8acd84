"""`shiftchange sim`: listing scenarios and anti-patterns, running one seeded run, its report, its exit status and its replay."""

from __future__ import annotations

import json
import shlex
import sys
import types

import pytest

from shiftchange.cli.main import main
from shiftchange.sim.antipatterns import ANTIPATTERNS
from shiftchange.sim.checkers import INVARIANTS
from shiftchange.sim.report import replay_command
from shiftchange.sim.scenarios import SCENARIOS, scenario_config
from shiftchange.sim.shrink import Shrunk
from shiftchange.sim.world import play

DESIGN_KEYS = {"scenario", "seed", "tasks", "antipattern", "config", "invariants", "metrics", "ok"}
"""The keys DESIGN.md promises in the `--json` object."""
FAILING = ("--antipattern", "unrecorded-effects", "--tasks", "40", "--seed", "1")
"""A small run that must fail: workers push without asking the gateway, so complete_audit is violated."""


def sim(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["sim", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def replay_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("replay: ")]
    assert len(lines) == 1, out
    return lines[0].removeprefix("replay: ")


def test_scenarios_lists_every_scenario_with_its_summary(capsys):
    """Each scenario appears on its own line, name first, with its summary."""
    status, out, err = sim(capsys, "scenarios")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == len(SCENARIOS)
    for line, scenario in zip(lines, SCENARIOS.values(), strict=True):
        assert line.split()[0] == scenario.name
        assert line.endswith(scenario.summary)


def test_antipatterns_lists_thirteen_rows_with_scenario_and_invariant(capsys):
    """Under a header, one row per anti-pattern: its name, the scenario that exposes it, the invariant that must catch it."""
    status, out, err = sim(capsys, "antipatterns")
    assert (status, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["anti-pattern", "scenario"]
    assert len(rows) == len(ANTIPATTERNS) == 13
    for row, pattern in zip(rows, ANTIPATTERNS.values(), strict=True):
        assert row.split()[:3] == [pattern.name, pattern.scenario, pattern.invariant]
        assert row.endswith(pattern.failure_mode)


def test_a_correct_run_exits_zero_and_passes_every_invariant(capsys):
    """A fault-free run of the reference core holds every invariant: each named on a PASS row, exit status 0, no replay line."""
    status, out, err = sim(capsys, "run", "--tasks", "60", "--seed", "3", "--scenario", "baseline")
    assert (status, err) == (0, "")
    rows = {line.split()[1]: line.split()[0] for line in out.splitlines() if line.startswith("  ") and len(line.split()) > 1}
    assert {name: rows.get(name) for name in INVARIANTS} == dict.fromkeys(INVARIANTS, "PASS")
    assert "scenario baseline, seed 3, 60 tasks" in out.splitlines()[0]
    assert f"all {len(INVARIANTS)} invariants hold" in out
    assert "replay:" not in out


def test_json_prints_one_object_with_the_design_keys(capsys):
    """`--json` prints exactly one JSON object holding every key DESIGN.md names, each invariant as {ok, status, violations, example}."""
    status, out, err = sim(capsys, "run", "--tasks", "60", "--seed", "3", "--scenario", "baseline", "--json")
    assert (status, err) == (0, "")
    report = json.loads(out)
    assert report.keys() >= DESIGN_KEYS
    assert (report["scenario"], report["seed"], report["tasks"], report["antipattern"], report["ok"]) == ("baseline", 3, 60, None, True)
    assert report["config"]["workload"]["tasks"] == 60
    assert list(report["invariants"]) == list(INVARIANTS)
    for verdict in report["invariants"].values():
        assert verdict == {"ok": True, "status": "ok", "violations": 0, "example": []}
    assert report["metrics"]["tasks_done"] <= 60


@pytest.mark.parametrize(
    "argv",
    [
        ("--scenario", "no-such-scenario"),
        ("--antipattern", "no-such-antipattern"),
        ("--tasks", "0"),
        ("--tasks", "abc"),
        ("--tasks", "10000001"),
        ("--seed", "-1"),
        ("--faults", "x"),
        ("--faults", "1,,2"),
        ("--scenario", "baseline", "--tasks", "10", "--faults", "0"),
    ],
    ids=["unknown-scenario", "unknown-antipattern", "zero-tasks", "tasks-not-a-number", "too-many-tasks", "negative-seed",
         "faults-not-numbers", "faults-empty-item", "fault-beyond-the-schedule"],
)  # fmt: skip
def test_bad_arguments_exit_two_with_one_line_on_stderr(capsys, argv):
    """Bad arguments, including names the simulator does not know, are one line on stderr, exit status 2, nothing on stdout."""
    status, out, err = sim(capsys, "run", *argv)
    assert (status, out) == (2, "")
    assert err.startswith("shiftchange: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_a_failing_run_exits_one_and_prints_its_replay_command(capsys):
    """With no scenario named, the anti-pattern's own runs; the violated invariant is a FAIL row with its example; the replay follows."""
    status, out, err = sim(capsys, "run", *FAILING, "--no-shrink")
    assert (status, err) == (1, "")
    assert "scenario baseline" in out.splitlines()[0] and "anti-pattern unrecorded-effects" in out.splitlines()[0]
    audit = next(line for line in out.splitlines() if " complete_audit " in line)
    assert audit.split()[0] == "FAIL"
    assert "WITHOUT A GRANT" in out
    replay = replay_line(out)
    assert replay.startswith("shiftchange sim run ")
    assert "--antipattern unrecorded-effects" in replay and "--tasks 40" in replay and "--seed 1" in replay
    assert "shortest counterexample" not in out


def test_the_printed_replay_command_reproduces_the_run_exactly(capsys):
    """The command a failing run prints, run again through `main`, plays the same history: the same digest (determinism through the CLI)."""
    argv = ("--antipattern", "unrecorded-effects", "--scenario", "mixed", "--tasks", "60", "--seed", "1", "--faults", "0,2", "--no-shrink")
    status, out, _err = sim(capsys, "run", *argv)
    assert status == 1
    words = shlex.split(replay_line(out))
    assert words[:3] == ["shiftchange", "sim", "run"] and "--faults" in words
    _status, first, _err = sim(capsys, "run", *argv, "--json")
    status, again, _err = sim(capsys, "run", *words[3:], "--json", "--no-shrink")
    assert status == 1
    first_report, again_report = json.loads(first), json.loads(again)
    assert again_report["digest"] == first_report["digest"]
    assert again_report["faults"] == first_report["faults"] == 2
    assert again_report["replay"] == first_report["replay"] == replay_line(out)


def test_the_replay_command_names_only_the_faults_that_were_left_out():
    """`--faults` appears only when part of the seed's schedule was dropped; `none` when all of it was."""
    outcome = play(scenario_config("mixed", 1, 40), 1, "mixed")
    size = len(outcome.schedule)
    assert size >= 2
    base = "shiftchange sim run --scenario mixed --seed 1 --tasks 40"
    assert replay_command(outcome) == base
    assert replay_command(outcome, tuple(range(size))) == base
    assert replay_command(outcome, (size - 1, 0)) == f"{base} --faults 0,{size - 1}"
    assert replay_command(outcome, ()) == f"{base} --faults none"


def test_faults_none_plays_no_fault_of_the_schedule(capsys):
    """`--faults none` replays a run with every fault of the seed's schedule dropped."""
    status, out, _err = sim(capsys, "run", "--scenario", "mixed", "--tasks", "40", "--seed", "1", "--faults", "none", "--json")
    report = json.loads(out)
    assert report["faults"] == 0
    assert report["replay"].endswith("--faults none")
    assert status == (0 if report["ok"] else 1)


def test_a_failing_run_reports_the_shrunk_counterexample_and_its_replay(capsys, monkeypatch):
    """Without --no-shrink, a failure goes to the shrinker with the scenario's config; its answer is printed, and put in the JSON."""
    asked = []

    def shrink(config, seed, scenario, antipattern=None, invariant=None, budget_runs=40):
        asked.append((config, seed, scenario, antipattern.name))
        outcome = play(config.with_tasks(5), seed, scenario, antipattern, keep_history=True)
        return Shrunk(5, (), outcome, ["t=1.00  first line", "t=2.00  second line"], 7, "complete_audit")

    monkeypatch.setitem(sys.modules, "shiftchange.sim.shrink", types.SimpleNamespace(shrink=shrink))
    status, out, _err = sim(capsys, "run", *FAILING)
    assert status == 1
    assert asked == [(scenario_config("baseline", 1, 40), 1, "baseline", "unrecorded-effects")]
    assert "shortest counterexample found: 5 tasks, 0 faults (after 7 runs)" in out
    assert "  t=1.00  first line\n  t=2.00  second line\n" in out
    shrunk_replay = "shiftchange sim run --scenario baseline --seed 1 --tasks 5 --antipattern unrecorded-effects"
    assert out.rstrip().endswith(f"replay: {shrunk_replay}")
    status, out, _err = sim(capsys, "run", *FAILING, "--json")
    minimal = json.loads(out)["minimal"]
    assert (minimal["invariant"], minimal["tasks"], minimal["faults_kept"]) == ("complete_audit", 5, [])
    assert minimal["timeline"][0] == "t=1.00  first line"
    assert minimal["replay"] == shrunk_replay


def test_the_shrunk_counterexample_replays_to_the_same_violation(capsys):
    """The shrinker's replay command is smaller than the run it came from and still violates the invariant it shrank for."""
    status, out, _err = sim(capsys, "run", *FAILING, "--json")
    assert status == 1
    minimal = json.loads(out)["minimal"]
    assert minimal["invariant"] == "complete_audit" and minimal["tasks"] <= 40
    words = shlex.split(minimal["replay"])
    status, again, _err = sim(capsys, "run", *words[3:], "--json", "--no-shrink")
    assert status == 1
    assert json.loads(again)["invariants"]["complete_audit"]["status"] == "violated"
