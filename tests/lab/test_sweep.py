"""`shiftchange sim sweep`: rows independent of executor and job count, failing runs replayed, resuming, the table's files."""

from __future__ import annotations

import csv
import json
import shlex
import sys

import pytest

from shiftchange.checkers.rules import INVARIANTS
from shiftchange.cli.main import main
from shiftchange.core import InputError
from shiftchange.lab import sweep as sweep_module
from shiftchange.lab.sweep import IDENTITY, sweep, sweep_rows

SMALL = {"scenario": "baseline", "tasks": 15, "grid": {"workers.workers": [8, 16]}, "seeds": range(2)}
"""Four cheap runs: no faults, fifteen tasks, two worker counts times two seeds."""
PLANTED = ("--scenario", "baseline", "--tasks", "20", "--grid", "workload.drain_s=10800,1", "--seeds", "0", "--jobs", "1")
"""Two runs; with a one-second drain the run ends before its tasks rest, so exactly that run violates no_lost_tasks."""
PLAY_RUN = sweep_module.play_run
"""The real run function, which `counting` wraps."""


def sim(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["sim", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def read_csv(path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or ()), list(reader)


def counting(monkeypatch: pytest.MonkeyPatch, interrupt_at: int | None = None) -> list[int]:
    """Make jobs=1 record the index of each run it plays, and be interrupted (Ctrl-C) instead of playing the `interrupt_at`-th."""
    played: list[int] = []

    def play_run(run):
        if len(played) == interrupt_at:
            raise KeyboardInterrupt
        played.append(run.index)
        return PLAY_RUN(run)

    monkeypatch.setattr(sweep_module, "play_run", play_run)
    return played


@pytest.mark.heavy
def test_rows_are_identical_on_one_process_a_pool_and_a_dask_cluster():
    """The table is a function of the runs alone: in run order, with nothing from the wall clock, the executor or the job count."""
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("distributed")
    here = sweep(**SMALL, jobs=1)
    pooled = sweep(**SMALL, jobs=2)
    dask = sweep(**SMALL, jobs=2, executor="dask")
    assert list(zip(here["workers.workers"], here["seed"], strict=True)) == [(8, 0), (8, 1), (16, 0), (16, 1)]
    assert here["digest"].nunique() == 4
    pandas.testing.assert_frame_equal(here, pooled)
    pandas.testing.assert_frame_equal(here, dask)


@pytest.mark.heavy
def test_a_spec_travels_with_every_run_to_a_pool_and_a_dask_cluster(tmp_path):
    """A sweep of an edited table (renewals unfenced) plays that table wherever its runs go, not the workers' packaged one."""
    pytest.importorskip("distributed")
    from shiftchange.core.table import packaged
    from shiftchange.spec import DEFAULT_DIRECTORY, load_spec
    from shiftchange.spec.edits import unfence
    from shiftchange.spec.loader import FILES

    folder = tmp_path / "renew-unfenced"
    folder.mkdir()
    for name in FILES.values():
        (folder / name).write_text((DEFAULT_DIRECTORY / name).read_text())
    rows = (folder / "attempt.toml").read_text().split("[[transition]]")
    unfenced = [row.replace("fenced = true", "fenced = false") if '\ntrigger = "renew"\n' in row else row for row in rows]
    (folder / "attempt.toml").write_text("[[transition]]".join(unfenced))
    assert load_spec(folder).digest == unfence(load_spec(), "renew").digest
    zombie = {"scenario": "zombie-worker", "tasks": 20, "seeds": range(2), "spec": str(folder)}
    here = sweep_rows(**zombie, jobs=1)
    assert [row["digest"] for row in here] != [row["digest"] for row in sweep_rows(**{**zombie, "spec": None}, jobs=1)]
    assert not all(row["ok"] for row in here)  # a stale renewal lands on the retry's lease
    assert {row["spec_digest"] for row in here} == {load_spec(folder).digest} != {packaged().digest}
    for elsewhere in (sweep_rows(**zombie, jobs=2), sweep_rows(**zombie, jobs=2, executor="dask")):
        assert elsewhere == here


def test_rows_come_in_run_order_not_completion_order():
    """Two processes, the first run far longer than the second: the second finishes first, yet its row comes second."""
    rows = sweep(scenario="baseline", grid={"workload.tasks": [150, 5]}, jobs=2)
    assert list(rows["tasks"]) == [150, 5]


def test_a_violating_run_exits_1_and_prints_the_replay_that_reproduces_it(capsys):
    """Only the run with a one-second drain fails; the sweep finishes, exits 1, and its printed replay violates the same invariant."""
    status, out, err = sim(capsys, "sweep", *PLANTED)
    assert (status, err) == (1, "")
    replays = [line.removeprefix("replay: ") for line in out.splitlines() if line.startswith("replay: ")]
    assert len(replays) == 1, out
    assert "1 of 2 runs" in out
    words = shlex.split(replays[0])
    assert words[:3] == ["shiftchange", "sim", "run"]
    status, out, _ = sim(capsys, *words[2:], "--json", "--no-shrink")
    verdicts = json.loads(out)["invariants"]
    assert status == 1
    assert [name for name, verdict in verdicts.items() if verdict["status"] != "ok"] == ["no_lost_tasks"]
    assert verdicts["no_lost_tasks"]["status"] == "violated"


def test_an_interrupted_sweep_keeps_its_rows_and_resuming_plays_only_the_rest(tmp_path, monkeypatch):
    """Rows survive an interruption; resuming plays only the missing runs and ends with the file an uninterrupted sweep writes."""
    whole, resumed = tmp_path / "whole.csv", tmp_path / "resumed.csv"
    sweep(**SMALL, jobs=1, out=whole)
    counting(monkeypatch, interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        sweep(**SMALL, jobs=1, out=resumed)
    assert [(row["workers.workers"], row["seed"]) for row in read_csv(resumed)[1]] == [("8", "0"), ("8", "1")]
    played = counting(monkeypatch)
    rows = sweep(**SMALL, jobs=1, out=resumed)
    assert played == [2, 3]
    assert resumed.read_text() == whole.read_text()
    assert list(rows["seed"]) == [0, 1, 0, 1]
    played = counting(monkeypatch)
    sweep(**SMALL, jobs=1, out=resumed)
    assert played == []
    assert resumed.read_text() == whole.read_text()


def test_a_bad_grid_value_is_one_line_exit_2_before_anything_runs(capsys, tmp_path, monkeypatch):
    """Every config is built first: a negative drain names its path and value, nothing is played and no file is written."""
    played = counting(monkeypatch)
    out = tmp_path / "rows.csv"
    status, stdout, err = sim(capsys, "sweep", "--scenario", "baseline", "--grid", "workload.drain_s=10800,-5", "--out", str(out))
    assert (status, stdout, played) == (2, "", [])
    assert err.count("\n") == 1 and err.startswith("shiftchange: ")
    assert "workload.drain_s=-5" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--seeds", "3-1"), "backwards"),
        (("--grid", "workers.workers=8", "--grid", "workers.workers=16"), "twice"),
        (("--grid", "workload.drain_s=10800,10800.0"), "twice"),
        (("--out", "rows.txt"), ".csv or .parquet"),
        (("--executor", "threads"), "processes, dask"),
    ],
)
def test_bad_sweep_arguments_are_one_line_exit_2(capsys, monkeypatch, argv, named):
    """Seeds that run backwards, a path or a run named twice, an unknown file type or executor: one line each, nothing played."""
    played = counting(monkeypatch)
    status, _, err = sim(capsys, "sweep", "--scenario", "baseline", "--tasks", "5", *argv)
    assert (status, played) == (2, [])
    assert err.count("\n") == 1 and named in err


def test_the_csv_header_is_identity_swept_metrics_verdicts_then_digest_and_replay(tmp_path):
    """Columns in the documented order, metrics flattened with dots, and a final state a run never reached counted as zero."""
    out = tmp_path / "rows.csv"
    sweep(scenario="baseline", tasks=20, grid={"workload.drain_s": [10800, 1]}, jobs=1, out=out)
    header, rows = read_csv(out)
    verdicts = [f"{kind}.{name}" for name in INVARIANTS for kind in ("invariant", "violations")]
    metrics = header[len(IDENTITY) + 1 : -len(verdicts) - 3]
    assert header == [*IDENTITY, "workload.drain_s", *metrics, *verdicts, "ok", "digest", "replay"]
    assert {"tasks_done", "final_states.done", "final_states.lost (in_progress)", "provider_calls.code_host"} <= set(metrics)
    assert metrics.index("final_states.done") == metrics.index("final_states.lost (in_progress)") - 1
    drained, cut = rows
    assert (drained["final_states.lost (in_progress)"], cut["final_states.done"]) == ("0", "0")
    assert (drained["ok"], cut["ok"], cut["invariant.no_lost_tasks"]) == ("True", "False", "violated")
    assert int(cut["violations.no_lost_tasks"]) == 20


def test_parquet_is_written_read_back_and_resumed_from(tmp_path, monkeypatch):
    """A .parquet table holds the same rows the sweep returned, and a second sweep finds every row there and plays nothing."""
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = tmp_path / "rows.parquet"
    rows = sweep(**SMALL, jobs=1, out=out)
    written = pandas.read_parquet(out)
    assert list(written.columns) == list(rows.columns)
    assert list(written["digest"]) == list(rows["digest"])
    assert list(written["workers.workers"]) == [8, 8, 16, 16]
    played = counting(monkeypatch)
    again = sweep(**SMALL, jobs=1, out=out)
    assert played == []
    pandas.testing.assert_frame_equal(again, rows)


@pytest.mark.parametrize(
    ("module", "arguments", "named"),
    [
        ("distributed", {"executor": "dask"}, "pip install 'shiftchange[dask]'"),
    ],
)
def test_a_missing_optional_module_is_a_clear_input_error(monkeypatch, module, arguments, named):
    """Without Dask the sweep refuses before running and says what to install."""
    played = counting(monkeypatch)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(InputError, match=named.replace("[", r"\[").replace("]", r"\]")):
        sweep(**SMALL, jobs=1, **arguments)
    assert played == []


def test_artifacts_into_a_file_are_refused_before_any_run(monkeypatch, tmp_path):
    played = counting(monkeypatch)
    (tmp_path / "taken").write_text("")
    with pytest.raises(InputError, match="is a file"):
        sweep(**SMALL, jobs=1, artifacts=tmp_path / "taken")
    assert played == []


def test_a_setting_the_anti_pattern_overrides_is_refused_before_any_run(monkeypatch):
    """retry-storm sets the backoff itself: a row labelled with another strategy would name a value the run never used."""
    played = counting(monkeypatch)
    grid = {"reliability.backoff.strategy": ["exponential", "full_jitter"]}
    with pytest.raises(InputError, match=r"retry-storm sets reliability\.backoff\.strategy itself"):
        sweep(grid=grid, scenario="retry-storm", tasks=10, antipattern="retry-storm", jobs=1)
    assert played == []


def test_faults_from_a_config_file_and_from_the_command_line_are_both_placed(capsys, tmp_path):
    config = tmp_path / "f.toml"
    config.write_text('[[fault]]\nkind = "outage"\ntarget = "code_host"\nat_s = 20\nfor_s = 30\n')
    out = tmp_path / "rows.csv"
    argv = ("sweep", "--scenario", "baseline", "--tasks", "10", "--grid", "workers.workers=8", "--jobs", "1", "--out", str(out))
    assert sim(capsys, *argv, "--config", str(config), "--fault", "pause worker-001 at=10 for=5")[0] == 0
    replay = shlex.split(read_csv(out)[1][0]["replay"])
    assert "outage code_host at=20 for=30 mode=fail" in replay and "pause worker-001 at=10 for=5" in replay


def test_a_sweep_plots_a_metric_against_its_first_swept_setting(capsys, tmp_path):
    """--plot draws the chosen metric; the file is a PNG and the command says what it drew."""
    plot = tmp_path / "ttl.png"
    argv = ("sweep", "--scenario", "baseline", "--tasks", "10", "--grid", "core.lease_ttl_s=30,60", "--jobs", "1")
    status, out, _ = sim(capsys, *argv, "--plot", str(plot), "--metric", "false_expiries")
    assert status == 0 and f"{plot}: false_expiries against core.lease_ttl_s" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "extra",
    [("--metric", "no_such_metric"), ("--metric", "false_expiries", "--plot", "/no/such/folder/p.png")],
)
def test_a_bad_plot_request_exits_two_before_any_run(capsys, monkeypatch, tmp_path, extra):
    played = counting(monkeypatch)
    argv = ("sweep", "--scenario", "baseline", "--tasks", "10", "--grid", "core.lease_ttl_s=30,60", "--jobs", "1")
    plot = () if "--plot" in extra else ("--plot", str(tmp_path / "p.png"))
    status, _, err = sim(capsys, *argv, *plot, *extra)
    assert status == 2 and len(err.strip().splitlines()) == 1 and played == []


def test_a_fault_placed_in_a_sweep_is_played_in_every_run(capsys, tmp_path):
    """--fault puts the same placed fault into each run: the rows' replay commands carry it."""
    out = tmp_path / "rows.csv"
    argv = ("sweep", "--scenario", "baseline", "--tasks", "10", "--grid", "workers.workers=8,16", "--jobs", "1", "--out", str(out))
    status, _, _ = sim(capsys, *argv, "--fault", "outage code_host at=20 for=30")
    _, rows = read_csv(out)
    assert status == 0 and len(rows) == 2
    assert all("outage code_host at=20 for=30 mode=fail" in shlex.split(row["replay"]) for row in rows)


def test_resuming_with_other_fixed_settings_is_refused_and_leaves_the_file_alone(capsys, monkeypatch, tmp_path):
    """A row played with network.loss_probability=0.1 is not a row of the same grid at 0.3: the config digest tells them apart."""
    out = tmp_path / "rows.csv"
    argv = ("sweep", "--scenario", "baseline", "--tasks", "10", "--grid", "workers.workers=8,16", "--jobs", "1", "--out", str(out))
    assert sim(capsys, *argv, "--set", "network.loss_probability=0.1")[0] == 0
    before = out.read_bytes()
    played = counting(monkeypatch)
    status, _, err = sim(capsys, *argv, "--set", "network.loss_probability=0.3")
    assert status == 2 and "config_digest" in err and played == [] and out.read_bytes() == before
    status, again, _ = sim(capsys, *argv, "--set", "network.loss_probability=0.1")
    assert status == 0 and "2 runs, 2 of them already in" in again and "playing 0" in again and played == []
