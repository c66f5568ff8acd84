"""`shiftchange sim sweep --summary`, `--confidence` and `--target`: a line per grid point, resumed files, exit statuses 0, 1 and 2."""

from __future__ import annotations

import re

import pytest

from shiftchange.cli.main import main
from shiftchange.lab import sweep as sweep_module
from shiftchange.lab.stats import binomial_interval
from shiftchange.lab.summary import summarize
from shiftchange.lab.sweep import sweep_rows

LOSSY = ("--set", "network.loss_probability=0.1", "--set", "network.lossy_calls=renew_lease")
"""One renewal in ten lost, as in the README's lease study, so a short TTL expires leases."""
TTL_SWEEP = (
    "sweep",
    "--scenario",
    "baseline",
    "--tasks",
    "20",
    "--grid",
    "core.lease_ttl_s=30,45,90",
    "--seeds",
    "0-1",
    "--jobs",
    "1",
    *LOSSY,
)
"""Six cheap runs: three TTLs times two seeds, twenty tasks each."""
PLANTED = ("sweep", "--scenario", "baseline", "--tasks", "20", "--grid", "workload.drain_s=10800,1", "--seeds", "0-1", "--jobs", "1")
"""Four runs; with a one-second drain the run ends before its tasks rest, so both of that point's runs violate no_lost_tasks."""
PLAY_RUN = sweep_module.play_run


def sim(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["sim", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def played_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the index of every run the sweep plays (jobs=1 plays them here)."""
    played: list[int] = []

    def play_run(run):
        played.append(run.index)
        return PLAY_RUN(run)

    monkeypatch.setattr(sweep_module, "play_run", play_run)
    return played


def group_lines(out: str, swept: str) -> list[list[str]]:
    """The summary's body: the lines after the heading that starts with the swept path, split on runs of two spaces or more."""
    lines = out.splitlines()
    start = next(index for index, line in enumerate(lines) if line.split()[:1] == [swept])
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        body.append(re.split(r"\s{2,}", line.strip()))
    return body


def test_summary_prints_a_line_per_grid_point_with_pooled_rates_and_their_intervals(capsys, monkeypatch, tmp_path):
    """Three TTLs, two seeds each: three lines (not six), each with its runs, ok runs and the rate pooled from the rows' counts."""
    status, out, err = sim(capsys, *TTL_SWEEP, "--summary")
    assert (status, err) == (0, "")
    body = group_lines(out, "core.lease_ttl_s")
    assert [cells[:3] for cells in body] == [[ttl, "2", "2/2 100% [15.8%, 100%]"] for ttl in ("30.0", "45.0", "90.0")]
    assert "seed" not in out.split()  # no per-run table
    assert "all 6 runs held every invariant" in out
    table = tmp_path / "ttl.csv"
    assert sim(capsys, *TTL_SWEEP, "--out", str(table))[0] == 0
    played = played_runs(monkeypatch)
    lossy = {"network.loss_probability": 0.1, "network.lossy_calls": "renew_lease"}
    rows = sweep_rows({"core.lease_ttl_s": ["30", "45", "90"]}, range(2), "baseline", 20, lossy, jobs=1, out=table)
    assert played == []  # the rows are the table's, read back, not played again
    for cells, group in zip(body, summarize(rows, ["core.lease_ttl_s"]), strict=True):
        events, trials = group["sum.false_expiries"], group["sum.leases"]
        assert cells[3].startswith(f"{events:,}/{trials:,} "), cells
        low, high = binomial_interval(events, trials)
        shown = re.fullmatch(r"\S+ (\S+) \[(\S+), (\S+)\]", cells[3])
        assert shown is not None, cells[3]
        value, shown_low, shown_high = (float(text) for text in shown.groups())
        assert value == pytest.approx(1000 * events / trials, rel=0.01, abs=0.005)
        assert shown_low == pytest.approx(1000 * low, rel=0.01, abs=0.005)
        assert shown_high == pytest.approx(1000 * high, rel=0.01, abs=0.005)
        assert cells[-1] == "none"
    assert int(body[0][3].split("/")[0]) > 0  # the shortest TTL did expire leases: the test reads a rate that is not 0


def test_the_confidence_names_the_level_and_narrows_the_intervals(capsys):
    """--confidence 0.8: the heading says 80% and the ok-runs interval is the 80% one for 2 of 2."""
    status, out, _ = sim(capsys, *TTL_SWEEP, "--summary", "--confidence", "0.8")
    assert status == 0
    assert "ok runs [80%]" in out and "exact 80% interval" in out
    low, _ = binomial_interval(2, 2, 0.8)
    assert group_lines(out, "core.lease_ttl_s")[0][2] == f"2/2 100% [{100 * low:.1f}%, 100%]"


def test_a_violating_point_says_which_invariant_failed_and_the_sweep_exits_1(capsys):
    """The one-second drain's line shows 0 of 2 runs held and names no_lost_tasks; each failing run's replay is printed."""
    status, out, _ = sim(capsys, *PLANTED, "--summary")
    assert status == 1
    body = group_lines(out, "workload.drain_s")
    assert [(cells[0], cells[1], cells[2].split()[0], cells[-1]) for cells in body] == [
        ("10800.0", "2", "2/2", "none"),
        ("1.0", "2", "0/2", "no_lost_tasks 0/2"),
    ]
    assert len([line for line in out.splitlines() if line.startswith("replay: ")]) == 2


def test_summary_of_a_resumed_out_file_summarizes_every_row_and_plays_none(capsys, monkeypatch, tmp_path):
    """A finished --out given again with --summary plays nothing and prints the same lines as when the runs were played."""
    out = tmp_path / "ttl.csv"
    status, first, _ = sim(capsys, *TTL_SWEEP, "--out", str(out), "--summary")
    assert status == 0
    played = played_runs(monkeypatch)
    status, again, _ = sim(capsys, *TTL_SWEEP, "--out", str(out), "--summary")
    assert (status, played) == (0, [])
    assert "6 runs, 6 of them already in" in again and f"{out}: 6 rows" in again
    assert group_lines(again, "core.lease_ttl_s") == group_lines(first, "core.lease_ttl_s")
    assert len(group_lines(again, "core.lease_ttl_s")) == 3


def test_a_half_finished_out_file_is_summarized_with_the_runs_it_lacked(capsys, monkeypatch, tmp_path):
    """An --out holding the 30 s runs only: --summary over the whole grid plays the four others and summarizes all six."""
    out = tmp_path / "ttl.csv"
    one_ttl = ["core.lease_ttl_s=30" if word.startswith("core.lease_ttl_s=") else word for word in TTL_SWEEP]
    assert sim(capsys, *one_ttl, "--out", str(out))[0] == 0
    played = played_runs(monkeypatch)
    status, printed, _ = sim(capsys, *TTL_SWEEP, "--out", str(out), "--summary")
    assert (status, played) == (0, [2, 3, 4, 5])
    assert [cells[:2] for cells in group_lines(printed, "core.lease_ttl_s")] == [["30.0", "2"], ["45.0", "2"], ["90.0", "2"]]


def test_a_pooled_rate_plot_with_a_target_is_drawn_and_named(capsys, tmp_path):
    """--plot of a pooled rate that is no per-run column, with --target, writes the PNG and says what it drew."""
    plot = tmp_path / "ttl.png"
    status, out, err = sim(capsys, *TTL_SWEEP, "--plot", str(plot), "--metric", "renewals_unanswered_share", "--target", "0.1", "--summary")
    assert (status, err) == (0, "")
    assert f"{plot}: renewals_unanswered_share against core.lease_ttl_s" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"
    heading = next(line for line in out.splitlines() if line.startswith("core.lease_ttl_s"))
    assert heading.count("renewals unanswered") == 1  # the plotted rate is one of the summary's already, shown once


def test_rows_that_are_no_counts_exit_2_with_one_line_and_the_file_keeps_them(capsys, tmp_path):
    """An --out edited by hand to hold more false expiries than leases: the summary refuses it in one line, exit 2."""
    out = tmp_path / "ttl.csv"
    assert sim(capsys, *TTL_SWEEP, "--out", str(out))[0] == 0
    lines = out.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("false_expiries")] = str(int(cells[header.index("leases")]) + 100)
    edited = "\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n"
    out.write_text(edited)
    status, _, err = sim(capsys, *TTL_SWEEP, "--out", str(out), "--summary")
    assert status == 2 and err.count("\n") == 1
    assert "cannot summarize the rows: false_expiries_per_1000_leases:" in err and "more events than trials" in err
    assert out.read_text() == edited


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--summary", "--confidence", "1.5"), "--confidence: must be a number strictly between 0 and 1"),
        (("--summary", "--confidence", "0"), "strictly between 0 and 1"),
        (("--summary", "--confidence", "95"), "strictly between 0 and 1"),
        (("--summary", "--confidence", "high"), "strictly between 0 and 1"),
        (("--confidence", "0.9"), "--confidence sets the intervals of --summary and --plot"),
        (("--target", "1"), "--target draws a line on the plot"),
        (("--plot", "PLOT", "--target", "one"), "--target: must be a number"),
        (("--plot", "PLOT", "--target", "nan"), "--target: must be a finite number"),
        (("--plot", "PLOT", "--metric", "false_expiries_per_1000_lease"), "is not a metric of a run or a pooled rate"),
    ],
)
def test_bad_summary_and_plot_flags_exit_2_with_one_line_before_any_run(capsys, monkeypatch, tmp_path, extra, named):
    """A confidence outside (0, 1) or given with nothing to use it, a target without a plot or not a number: one line, no run."""
    played = played_runs(monkeypatch)
    argv = [str(tmp_path / "p.png") if word == "PLOT" else word for word in extra]
    status, out, err = sim(capsys, *TTL_SWEEP, *argv)
    assert (status, out, played) == (2, "", [])
    assert err.count("\n") == 1 and err.startswith("shiftchange: ")
    assert named in err
