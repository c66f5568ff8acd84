"""A count of one takes the singular: `1 run; playing 1`, `1 row`, `1 job`, never `1 runs`.

The issue named "1 faults injected" (the simulator's report) and "1 workers skewed" (the chaos report); these are the
same slip in the sweep's and the map's lines, with the helper they now share (`shiftchange.lab.summary.counted`).
"""

from __future__ import annotations

import re

import pytest

from shiftchange.cli.main import main
from shiftchange.lab.summary import counted

ONE_PLURAL = re.compile(r"(?<![\d,.])1 (runs|rows|jobs|seeds|faults|workers)\b")


@pytest.mark.parametrize(
    ("count", "noun", "plural", "expected"),
    [
        (1, "run", None, "1 run"),
        (0, "run", None, "0 runs"),
        (2, "run", None, "2 runs"),
        (1234, "seed", None, "1,234 seeds"),
        (1, "fix", "fixes", "1 fix"),
        (3, "fix", "fixes", "3 fixes"),
    ],
)
def test_counted_is_singular_for_one_only(count, noun, plural, expected):
    assert counted(count, noun, plural) == expected


def test_a_sweep_of_one_run_says_run_and_row(capsys, tmp_path):
    out_file = tmp_path / "rows.csv"
    status = main(["sim", "sweep", "--scenario", "baseline", "--tasks", "2", "--seeds", "0", "--jobs", "1", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines() == ["1 run; playing 1", f"{out_file}: 1 row", "the run held every invariant"]


@pytest.mark.heavy
def test_a_map_of_one_job_says_job(capsys):
    argv = ["sim", "phase", "--arrivals-s", "900", "--seeds", "0", "--jobs", "1", "--axis", "trigger.for_s=20"]
    status = main([*argv, "--trigger", "slowdown model_provider at=400 for=60 factor=4"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[0] == "1 job (2 runs: a control and a triggered run per cell and seed)"
    assert not ONE_PLURAL.search(out), out


def test_a_run_with_one_fault_says_one_fault_injected(capsys):
    status = main(["sim", "run", "--tasks", "3", "--fault", "crash busy at=1 for=5"])
    first = capsys.readouterr().out.splitlines()[0]
    assert status == 0 and "; 1 fault injected, " in first and not ONE_PLURAL.search(first), first


def test_the_reports_count_skewed_workers_singular_for_one():
    from shiftchange.lab.summary import counted

    assert (counted(1, "worker"), counted(0, "worker"), counted(1200, "worker")) == ("1 worker", "0 workers", "1,200 workers")
