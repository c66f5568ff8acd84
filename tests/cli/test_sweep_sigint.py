"""Ctrl-C on a parallel `sim sweep`, round after round, at moments spread over its life: always one line and 130.

A terminal's Ctrl-C is SIGINT to the whole process group: the sweep and
its workers. It may land while the workers are still being spawned (a
worker that has not yet said it ignores SIGINT would print its own
traceback), while the sweep waits in the pool's completion loop (where a
KeyboardInterrupt raised inside a lock's wait ended in `RuntimeError:
release unlocked lock`), or while a finished row is being written. Each
round starts a sweep, waits for its plan line (the runs are built; the pool
is next), sleeps a different delay (drawn from the round's seed, so a
failing round replays), and interrupts the group.

The default suite plays ten rounds; the `slow` variant plays fifty in a row.
"""

from __future__ import annotations

import csv
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from shiftchange.cli.main import EXIT_INTERRUPTED

DELAY_MAX_S = 2.5
"""Interrupts fall from the plan line to this long after it: spawning the workers, the first rows, the steady state."""
ENDED_WITHIN_S = 30.0
PLAN_WITHIN_S = 120.0
SEEDS = "0-1999"
"""Enough one-task runs that no sweep finishes before its interrupt, few enough that they are built in a moment."""


def sweep(out_file: os.PathLike[str]) -> subprocess.Popen[str]:
    """A parallel sweep in a new process group, its SIGINT Python's default even when this runner ignores it."""
    argv = ["sim", "sweep", "--scenario", "baseline", "--tasks", "1", "--seeds", SEEDS, "--jobs", "2", "--out", str(out_file)]
    return subprocess.Popen(
        [sys.executable, "-m", "shiftchange", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def interrupt_once(round_: int, tmp_path) -> None:
    out_file = tmp_path / f"rows-{round_}.csv"
    child = sweep(out_file)
    try:
        deadline = time.monotonic() + PLAN_WITHIN_S
        plan = child.stdout.readline()  # the sweep flushes its plan line: "N runs; playing N"
        assert "runs; playing" in plan and time.monotonic() < deadline, f"round {round_}: no plan line: {plan!r}"
        delay = random.Random(round_).uniform(0.0, DELAY_MAX_S)
        time.sleep(delay)
        os.killpg(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=ENDED_WITHIN_S)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    where = f"round {round_}, SIGINT {delay:.2f} s after the plan line"
    assert child.returncode == EXIT_INTERRUPTED, f"{where}: status {child.returncode}, stderr: {err[-3000:]}"
    assert "Traceback" not in out + err and "Fatal Python error" not in err, f"{where}: {err[-3000:]}"
    assert err == f"shiftchange: sweep interrupted; {out_file} keeps every row finished, and the same command plays only the rest\n", (
        f"{where}: {err[-3000:]}"
    )
    if out_file.exists():  # what was kept is a whole table, never half a row
        with out_file.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert all(row["replay"].startswith("shiftchange sim run") for row in rows), where


@pytest.mark.heavy
@pytest.mark.parametrize("round_", range(10))
def test_ctrl_c_at_any_moment_of_a_parallel_sweep_is_one_line_and_130(round_, tmp_path):
    """Goal: SIGINT to the sweep's process group, at a moment drawn for the round, ends it with one line and 130, no traceback."""
    interrupt_once(round_, tmp_path)


@pytest.mark.slow
def test_ctrl_c_to_a_parallel_sweep_fifty_times_in_a_row(tmp_path):
    """Goal: fifty rounds in a row (the longer variant of the ten above), every one one line and 130, none a traceback."""
    for round_ in range(100, 150):
        interrupt_once(round_, tmp_path)
