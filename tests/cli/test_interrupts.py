"""Ctrl-C ends any command with one line on stderr and status 130, never a traceback; a run reports what it played first.

Two kinds of test. In-process ones raise KeyboardInterrupt at a chosen
point (the simulator's first progress report, a sweep's third run, a spec
check), so what is printed can be checked exactly. Subprocess ones send a
real SIGINT to a long run and to a sweep's whole process group, as a
terminal's Ctrl-C does, and check the exit status and that no process (the
sweep's workers included) printed a traceback.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from shiftchange.cli import main as cli_main
from shiftchange.cli.main import EXIT_INTERRUPTED, main
from shiftchange.lab import sweep as sim_sweep
from shiftchange.sim.world import World

STARTED_WITHIN_S = 120.0
"""How long a subprocess may take to show it is under way (a loaded CI machine imports slowly)."""
ENDED_WITHIN_S = 30.0
"""How long it may take to end after SIGINT: it must not wait for runs in flight."""


def interrupt_at_first_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `World.run` raise KeyboardInterrupt at its first progress report, as Ctrl-C between two chunks would."""
    run = World.run

    def interrupted(self, schedule, progress=None):
        def ctrl_c(sim_time_s: float, tasks_retired: int, tasks: int) -> None:
            raise KeyboardInterrupt

        run(self, schedule, ctrl_c)

    monkeypatch.setattr(World, "run", interrupted)


def test_an_interrupted_run_prints_one_line_then_the_report_of_what_it_played(monkeypatch, capsys):
    """Goal: the run stops, says where in one line, and reports the invariants judged so far and the metrics measured so far."""
    interrupt_at_first_progress(monkeypatch)
    status = main(["sim", "run", "--scenario", "baseline", "--tasks", "300", "--seed", "1"])
    out, err = capsys.readouterr()
    assert status == EXIT_INTERRUPTED == 130
    assert err.count("\n") == 1 and err.startswith("shiftchange: interrupted at simulated 0:"), err
    assert "of 300 tasks retired" in err and "partial report follows" in err
    assert "SimPy events" in out.splitlines()[0]
    assert "UNKNOWN  classified_retry" in out  # tasks still live: their final records were never read
    assert "tasks done" in out and "Traceback" not in out + err


def test_an_interrupted_json_run_says_it_was_interrupted(monkeypatch, capsys):
    """Goal: `--json` still prints one object, with where the run stopped, and it is not ok."""
    interrupt_at_first_progress(monkeypatch)
    status = main(["sim", "run", "--scenario", "baseline", "--tasks", "300", "--json"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert status == EXIT_INTERRUPTED
    assert err.count("\n") == 1
    assert report["ok"] is False
    assert report["interrupted"]["sim_time_s"] > 0
    assert report["interrupted"]["tasks_retired"] < report["tasks"] == 300


def test_an_interrupted_sweep_keeps_the_rows_it_finished(monkeypatch, capsys, tmp_path):
    """Goal: Ctrl-C during the third run of a sweep leaves the first two rows in --out, with one line saying so."""
    play_run, calls = sim_sweep.play_run, []

    def third_interrupted(run):
        calls.append(run)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return play_run(run)

    monkeypatch.setattr(sim_sweep, "play_run", third_interrupted)
    out_file = tmp_path / "rows.csv"
    status = main(["sim", "sweep", "--scenario", "baseline", "--tasks", "20", "--seeds", "0-9", "--jobs", "1", "--out", str(out_file)])
    err = capsys.readouterr().err
    assert status == EXIT_INTERRUPTED
    assert err == f"shiftchange: sweep interrupted; {out_file} keeps every row finished, and the same command plays only the rest\n"
    with out_file.open(newline="") as rows:
        assert [row["seed"] for row in csv.DictReader(rows)] == ["0", "1"]


def test_any_other_command_ends_with_one_line(monkeypatch, capsys):
    """Goal: a command with no partial result to give (here `spec check`) still ends in one line and 130, not a traceback."""

    def ctrl_c(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "check_spec", ctrl_c)
    assert main(["spec", "check"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "shiftchange: interrupted\n"


# ------------------------------------------------------------ a real SIGINT


def command(*argv: str, group: bool = False) -> subprocess.Popen[str]:
    """`shiftchange ARGV...` in a child whose SIGINT is Python's default, even when this runner ignores it (a background job)."""
    return subprocess.Popen(
        [sys.executable, "-m", "shiftchange", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=group,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for(ready, child: subprocess.Popen[str]) -> None:
    """Poll `ready()` until it holds; fail with the child's output if the child ends or takes too long."""
    deadline = time.monotonic() + STARTED_WITHIN_S
    while not ready():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            _out, err = child.communicate()
            pytest.fail(f"the command never got under way (status {child.returncode}): {err[-2000:]}")
        time.sleep(0.1)


def test_sigint_ends_a_long_run_with_one_line_and_its_partial_report(tmp_path):
    """Goal: SIGINT to `sim run --tasks 100000` ends it at once with status 130, one line on stderr and the partial report."""
    history = tmp_path / "run" / "history.jsonl"
    child = command("sim", "run", "--tasks", "100000", "--artifacts", str(tmp_path / "run"))
    wait_for(lambda: history.exists() and history.stat().st_size > 0, child)  # the world is playing: its history streams out
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=ENDED_WITHIN_S)
    assert child.returncode == EXIT_INTERRUPTED, err
    assert err.count("\n") == 1 and err.startswith("shiftchange: interrupted at simulated"), err
    assert "Traceback" not in out + err
    assert "invariants" in out and "tasks done" in out
    assert history.stat().st_size > 0  # what was streamed stays


@pytest.mark.heavy
def test_ctrl_c_to_a_parallel_sweep_stops_its_workers_and_keeps_its_rows(tmp_path):
    """Goal: SIGINT to the sweep's whole process group (a terminal's Ctrl-C): one line, 130, rows kept, no worker left running."""
    out_file = tmp_path / "rows.csv"
    child = command(
        "sim", "sweep", "--scenario", "baseline", "--tasks", "30", "--seeds", "0-9999", "--jobs", "2", "--out", str(out_file), group=True
    )

    def rows() -> int:
        return len(out_file.read_text().splitlines()) - 1 if out_file.exists() else 0

    wait_for(lambda: rows() >= 2, child)
    written = rows()
    os.killpg(child.pid, signal.SIGINT)
    out, err = child.communicate(timeout=ENDED_WITHIN_S)
    assert child.returncode == EXIT_INTERRUPTED, err
    assert err == f"shiftchange: sweep interrupted; {out_file} keeps every row finished, and the same command plays only the rest\n"
    assert "Traceback" not in out
    assert rows() >= written
    assert not _group_alive(child.pid), "a sweep worker outlived the sweep"


def _group_alive(group: int) -> bool:
    """Whether any process of the group is still there, after a moment for terminated workers to be reaped."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.1)
    return True
