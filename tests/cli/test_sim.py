"""`shiftchange sim`: listing scenarios and anti-patterns, running one seeded run, its report, its exit status and its replay."""

from __future__ import annotations

import json
import shlex
import sys
import types

import pytest

from shiftchange.antipatterns import ANTIPATTERNS
from shiftchange.checkers.rules import INVARIANTS
from shiftchange.cli.main import main
from shiftchange.lab.report import replay_command
from shiftchange.lab.settings import apply, diff, format_value, from_toml
from shiftchange.lab.shrink import Shrunk
from shiftchange.sim.config import SimConfig
from shiftchange.sim.scenarios import SCENARIOS, scenario_config
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
    assert report["driver"] == "sim" and report["search"] is None
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
    assert again_report["subject"]["digest"] == first_report["subject"]["digest"]
    assert again_report["faults"] == first_report["faults"] and len(first_report["faults"]) == 2
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
    assert report["faults"] == []
    assert report["replay"].endswith("--faults none")
    assert status == (0 if report["ok"] else 1)


def test_a_failing_run_reports_the_shrunk_counterexample_and_its_replay(capsys, monkeypatch):
    """Without --no-shrink, a failure goes to the shrinker with the scenario's config; its answer is printed, and put in the JSON."""
    asked = []

    def shrink(config, seed, scenario, antipattern=None, invariant=None, budget_runs=40, table=None):
        asked.append((config, seed, scenario, antipattern.name, table))
        outcome = play(config.with_tasks(5), seed, scenario, antipattern, keep_history=True)
        return Shrunk(5, (), outcome, ["t=1.00  first line", "t=2.00  second line"], 7, "complete_audit")

    monkeypatch.setitem(sys.modules, "shiftchange.lab.shrink", types.SimpleNamespace(shrink=shrink))
    status, out, _err = sim(capsys, "run", *FAILING)
    assert status == 1
    assert asked == [(scenario_config("baseline", 1, 40), 1, "baseline", "unrecorded-effects", None)]  # no --spec: the packaged
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


def test_set_with_dump_config_prints_the_effective_config_as_toml(capsys):
    """`--set core.lease_ttl_s=90 --dump-config` prints the whole config, which loads back to the scenario's with that one change."""
    status, out, err = sim(capsys, "run", "--scenario", "partition", "--tasks", "20", "--set", "core.lease_ttl_s=90", "--dump-config")
    assert (status, err) == (0, "")
    config = from_toml(out)
    assert config == apply(scenario_config("partition", 1, 20), {"core.lease_ttl_s": 90.0})
    assert diff(scenario_config("partition", 1, 20), config) == {"core.lease_ttl_s": 90.0}


def test_a_dump_given_back_as_config_is_the_same_config(capsys, tmp_path):
    """A dump (with an anti-pattern's tuning and settings) loaded with `--config` dumps the same text: an equal config."""
    argv = ("--antipattern", "retry-storm", "--set", "nemesis.faults=crash", "--set", "reliability.admission_rate.burst=3", "--tasks", "20")
    status, dumped, _err = sim(capsys, "run", *argv, "--dump-config")
    assert status == 0
    path = tmp_path / "run.toml"
    path.write_text(dumped)
    status, again, err = sim(capsys, "run", "--antipattern", "retry-storm", "--config", str(path), "--dump-config")
    assert (status, err) == (0, "")
    assert from_toml(again) == from_toml(dumped)
    assert again == dumped
    assert from_toml(dumped).reliability.admission_rate is not None and from_toml(dumped).nemesis.faults == ("crash",)


def test_a_config_files_tasks_are_kept_unless_tasks_is_given(capsys, tmp_path):
    """Without --tasks the file's workload.tasks holds; --tasks wins over the file and over --set."""
    path = tmp_path / "run.toml"
    path.write_text("[workload]\ntasks = 33\n")
    _status, out, _err = sim(capsys, "run", "--config", str(path), "--dump-config")
    assert from_toml(out).workload.tasks == 33
    _status, out, _err = sim(capsys, "run", "--config", str(path), "--set", "workload.tasks=44", "--tasks", "20", "--dump-config")
    assert from_toml(out).workload.tasks == 20
    _status, out, _err = sim(capsys, "run", "--dump-config")
    assert from_toml(out).workload.tasks == 1000


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--set", "core.lease_ttl_s=abc"), ("core.lease_ttl_s", "'abc'")),
        (("--set", "core.lease_tl_s=90"), ("core.lease_tl_s", "core.lease_ttl_s")),
        (("--set", "core.lease_ttl_s"), ("PATH=VALUE", "core.lease_ttl_s")),
        (("--set", "core.heartbeat_interval_s=100"), ("core.heartbeat_interval_s (100.0)", "core.lease_ttl_s (60.0)")),
        (("--config", "no-such-file.toml"), ("cannot read config file no-such-file.toml",)),
    ],
    ids=["not-a-number", "unknown-path", "no-equals", "relation", "missing-file"],
)
def test_a_bad_setting_exits_two_with_one_line_naming_it(capsys, argv, words):
    """Bad settings and unreadable files are one line on stderr, exit status 2, nothing run and nothing on stdout."""
    status, out, err = sim(capsys, "run", "--tasks", "20", *argv)
    assert (status, out) == (2, "")
    assert err.startswith("shiftchange: ") and err.count("\n") == 1
    assert all(word in err for word in words), err


def test_a_malformed_config_file_names_the_file_and_line(capsys, tmp_path):
    """Malformed TOML is one line naming the file and where tomllib stopped."""
    path = tmp_path / "broken.toml"
    path.write_text("[core]\nlease_ttl_s = = 90\n")
    status, out, err = sim(capsys, "run", "--config", str(path))
    assert (status, out) == (2, "")
    assert str(path) in err and "line 2" in err and err.count("\n") == 1


def test_scenarios_show_lists_what_a_scenario_changes(capsys):
    """`--show partition` prints its nemesis settings as path = value, each value in the text `--set` takes."""
    status, out, err = sim(capsys, "scenarios", "--show", "partition")
    assert (status, err) == (0, "")
    assert out.splitlines() == ["nemesis.faults = partition", "nemesis.partition_interval_s = 240.0", "nemesis.partition_workers = 6"]
    status, out, _err = sim(capsys, "scenarios", "--show", "swarm", "--seed", "3")
    swarm = diff(SimConfig(), scenario_config("swarm", 3))
    assert status == 0 and out.splitlines() == [f"{path} = {format_value(value)}" for path, value in swarm.items()]
    assert swarm != diff(SimConfig(), scenario_config("swarm", 1))
    status, _out, err = sim(capsys, "scenarios", "--show", "no-such-scenario")
    assert status == 2 and "unknown scenario" in err


def test_a_run_given_settings_replays_to_the_same_digest(capsys):
    """The replay of a run given --set names each setting, and playing it again gives the same history, not the bare scenario's."""
    argv = ("--scenario", "baseline", "--tasks", "20", "--seed", "3", "--json", "--no-shrink")
    settings = ("--set", "network.loss_probability=0.05", "--set", "core.lease_ttl_s=90")
    _status, out, _err = sim(capsys, "run", *argv, *settings)
    first = json.loads(out)
    words = shlex.split(first["replay"])
    assert words[words.index("--set") :] == ["--set", "network.loss_probability=0.05", "--set", "core.lease_ttl_s=90.0"]
    _status, again, _err = sim(capsys, "run", *words[3:], "--json", "--no-shrink")
    _status, bare, _err = sim(capsys, "run", *argv)
    assert json.loads(again)["subject"]["digest"] == first["subject"]["digest"] != json.loads(bare)["subject"]["digest"]
    assert json.loads(again)["replay"] == first["replay"]


def test_the_replay_of_a_custom_config_is_baseline_with_its_settings_and_placed_faults():
    """A run of play's default scenario ("custom") replays as baseline, with --set for each change and --fault for each placed fault."""
    config = apply(SimConfig().with_tasks(20), {"workers.workers": 6, "nemesis.placed": "outage code_host at=30 for=60"})
    outcome = play(config, 2)
    words = shlex.split(replay_command(outcome))
    assert words[3:5] == ["--scenario", "baseline"]
    assert words[-4:] == ["--set", "workers.workers=6", "--fault", "outage code_host at=30 for=60 mode=fail"]


def test_a_failing_run_given_settings_shrinks_its_own_config(capsys, monkeypatch):
    """The shrinker is handed the config the run played, settings included, not the bare scenario's."""
    asked = []

    def shrink(config, seed, scenario, antipattern=None, invariant=None, budget_runs=40, table=None):
        asked.append(config)

    monkeypatch.setitem(sys.modules, "shiftchange.lab.shrink", types.SimpleNamespace(shrink=shrink))
    status, _out, _err = sim(capsys, "run", *FAILING, "--set", "core.lease_ttl_s=90")
    assert status == 1
    assert asked == [apply(scenario_config("baseline", 1, 40), {"core.lease_ttl_s": 90.0})]


def test_a_placed_fault_from_the_command_line_is_listed_with_its_index_and_replays(capsys):
    """--fault adds to the seed's schedule; --list-faults shows it among the drawn ones; the replay command carries it."""
    placed = "outage model_provider at=100 for=60 mode=hang"
    status, out, _ = sim(capsys, "run", "--scenario", "baseline", "--tasks", "30", "--fault", placed, "--list-faults")
    assert status == 0 and out.splitlines()[0] == "1 fault: 0 drawn from seed 0, 1 placed by the config"
    assert "   0  t=   100.00 to    160.00  placed  outage model_provider mode=hang" in out
    status, out, _ = sim(capsys, "run", "--scenario", "baseline", "--tasks", "30", "--fault", placed, "--json")
    report = json.loads(out)
    assert report["schema_version"] == 4
    assert status == 0 and len(report["faults"]) == 1 and "--fault" in report["replay"] and placed in shlex.split(report["replay"])
    status, again, _ = sim(capsys, *shlex.split(report["replay"])[2:], "--json")
    assert json.loads(again)["subject"]["digest"] == report["subject"]["digest"]


def test_the_header_says_how_many_settings_a_run_changed_from_its_scenario(capsys):
    """A run given --set (or a --config) is not the bare scenario, and its first line says so."""
    status, out, _ = sim(capsys, "run", "--scenario", "baseline", "--tasks", "10", "--set", "core.lease_ttl_s=90", "--no-shrink")
    assert status == 0 and out.splitlines()[0].startswith("shiftchange sim run: scenario baseline with 1 setting changed, seed 0")


@pytest.mark.heavy
def test_series_plot_and_artifacts_are_written_where_asked(capsys, tmp_path):
    status, _out, _ = sim(
        capsys, "run", "--scenario", "baseline", "--tasks", "20", "--series", str(tmp_path / "s.csv"), "--plot", str(tmp_path / "s.png"),
        "--artifacts", str(tmp_path / "run"),
    )  # fmt: skip
    assert status == 0
    header = (tmp_path / "s.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["t_s", "window_s"] and "renewals_unanswered" in header and "model_provider.latency_s_p99" in header
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "run" / "report.json").read_text())["schema_version"] == 4


@pytest.mark.parametrize(
    "argv",
    [
        ("--plot", "/no/such/folder/s.png"),
        ("--series", "/no/such/folder/s.csv"),
        ("--fault", "outage nowhere at=1 for=2"),
        ("--fault", "crash worker-999 at=1 for=2", "--list-faults"),
    ],
)
def test_an_output_that_cannot_be_written_or_a_bad_fault_exits_two_before_running(capsys, argv):
    status, out, err = sim(capsys, "run", "--tasks", "5", *argv)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("shiftchange: ")
