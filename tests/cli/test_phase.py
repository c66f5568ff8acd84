"""`shiftchange sim phase` end to end: the grids, --json, --out/--cells/--plot, exit statuses 0, 1 and 2.

Two real maps of the retry-storm world are played (each once, for the module): the core's defaults beside the
retry-storm anti-pattern (`none`) with every output file asked for, and the defaults alone as JSON. Each has two cells
(a 20 s and a 120 s slowdown) of one seed, each cell a control and a triggered run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.lab import phase as phase_module

TRIGGER = "slowdown model_provider at=400 for=60 factor=4"
TINY = (
    "sim",
    "phase",
    "--scenario",
    "retry-storm",
    "--arrivals-s",
    "1500",
    "--seeds",
    "0",
    "--jobs",
    "1",
    "--axis",
    "trigger.for_s=20,120",
    "--trigger",
    TRIGGER,
)
"""Two cells per discipline, one seed: two jobs (four runs) per discipline."""
LETTERS = {"recovers": "R", "metastable": "M", "overloaded": "O", "unjudged": "?"}


def quiet_main(*argv: str) -> tuple[int, str, str]:
    """`main` with stdout and stderr captured (for module-scoped fixtures, where capsys is not available)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The defaults and `none`, rows, cells and heatmap written: four jobs, eight runs."""
    folder = tmp_path_factory.mktemp("phase")
    paths = {"rows": folder / "rows.csv", "cells": folder / "cells.csv", "plot": folder / "map.png"}
    status, out, err = quiet_main(
        *TINY,
        "--discipline",
        "defaults",
        "--discipline",
        "none",
        "--out",
        str(paths["rows"]),
        "--cells",
        str(paths["cells"]),
        "--plot",
        str(paths["plot"]),
    )
    return {"status": status, "text": out, "err": err, **paths}


@pytest.fixture(scope="module")
def defaults_json() -> tuple[int, str, str]:
    """The defaults alone, as JSON: two jobs, four runs."""
    return quiet_main(*TINY, "--json")


def panels(out: str) -> dict[str, dict[str, tuple[str, int, int]]]:
    """Each panel of the text map: discipline -> {axis value: (letter, recovered, seeds)}, from its header and its one row."""
    lines = out.splitlines()
    found: dict[str, dict[str, tuple[str, int, int]]] = {}
    for index, line in enumerate(lines):
        heading = re.fullmatch(r"(\S+), trigger (.+): R recovers, M metastable, O overloaded \(recovered/seeds\)", line)
        if heading is None:
            continue
        discipline, trigger = heading.groups()
        assert trigger == "slowdown model_provider at=400 factor=4.0; for= per column"  # each column plays its own duration
        header, marks = lines[index + 1], lines[index + 2]
        assert header.rstrip().endswith("<- trigger.for_s")
        xs = header.split("|", 1)[1].split("<-")[0].split()
        cells = re.findall(r"([RMO?]) (\d+)/(\d+)", marks.split("|", 1)[1])
        assert len(cells) == len(xs), marks
        found[discipline] = {x: (letter, int(a), int(b)) for x, (letter, a, b) in zip(xs, cells, strict=True)}
    return found


def test_the_anti_pattern_breaks_classified_retry_so_the_map_exits_1_and_names_it(both):
    assert both["status"] == 1
    assert both["err"] == ""
    lines = both["text"].splitlines()
    assert lines[0] == "4 jobs (8 runs: a control and a triggered run per cell and seed)"
    broken = next(index for index, line in enumerate(lines) if "broke an invariant" in line)
    assert re.fullmatch(r"\d of 4 jobs broke an invariant \(classified_retry\); the first:", lines[broken])
    replay = shlex.split(lines[broken + 1])
    assert replay[:3] == ["shiftchange", "sim", "run"]
    assert "reliability.backoff.strategy=none" in replay  # the anti-pattern's run, not the defaults'
    rows = read_csv(both["rows"])
    for row in rows:
        held = row["control.invariants_ok"] == "True" and row["triggered.invariants_ok"] == "True"
        if row["discipline"] == "defaults":
            assert held, row
        else:
            assert held or "classified_retry" in row["control.invariants_broken"] + row["triggered.invariants_broken"]
    assert any(row["discipline"] == "none" and row["triggered.invariants_broken"] == "classified_retry" for row in rows)


def test_the_defaults_alone_exit_0_and_json_is_the_only_output(defaults_json):
    status, out, err = defaults_json
    assert (status, err) == (0, "")
    cells = json.loads(out)  # no "N jobs" line, no grid: the whole of stdout is the JSON
    assert [(cell["discipline"], cell["trigger.for_s"]) for cell in cells] == [("defaults", 20.0), ("defaults", 120.0)]
    for cell in cells:
        assert cell["trigger"] == "slowdown model_provider at=400 for=60 factor=4.0"
        assert cell["status"] == "recovers" and cell["recovered"] == cell["seeds"] == 1
        assert cell["recovery_s_max"] > 0 and cell["invariants_ok"] is True


def test_the_grid_has_a_panel_per_discipline_with_a_letter_and_a_count_per_cell(both):
    found = panels(both["text"])
    assert list(found) == ["defaults", "none"]
    assert found["defaults"] == {"20.0": ("R", 1, 1), "120.0": ("R", 1, 1)}
    assert found["none"]["120.0"] == ("M", 0, 1)  # two minutes of slowdown and no discipline: the retry storm sustains itself
    # the letters and counts are the cells' own
    for cell in read_csv(both["cells"]):
        assert found[cell["discipline"]][cell["trigger.for_s"]] == (LETTERS[cell["status"]], int(cell["recovered"]), int(cell["seeds"]))
    assert "  2 recovers" in both["text"].splitlines()
    assert "  1 recovers, 1 metastable" in both["text"].splitlines()


def test_the_first_metastable_seed_of_a_discipline_is_shown_with_both_replays(both):
    lines = both["text"].splitlines()
    heading = next(index for index, line in enumerate(lines) if line.startswith("metastable, "))
    assert lines[heading].startswith("metastable, none seed 0 (late goodput ")
    control, triggered = lines[heading + 1], lines[heading + 2]
    assert control.startswith("  control:   shiftchange sim run ") and "--set nemesis.placed=" in control
    assert triggered.startswith("  triggered: shiftchange sim run ")
    assert sum(line.startswith("metastable, ") for line in lines) == 1  # the defaults recovered everywhere


def test_out_and_cells_write_a_row_per_job_and_a_row_per_cell(both):
    rows, cells = read_csv(both["rows"]), read_csv(both["cells"])
    expected = [("defaults", "20.0"), ("defaults", "120.0"), ("none", "20.0"), ("none", "120.0")]
    assert [(row["discipline"], row["trigger.for_s"]) for row in rows] == expected
    assert [(cell["discipline"], cell["trigger.for_s"]) for cell in cells] == expected
    assert {row["seed"] for row in rows} == {"0"}
    assert "control.digest" in rows[0] and "triggered.replay" in rows[0] and "recovered" not in rows[0]
    assert "recovered" in cells[0] and "seed" not in cells[0]
    assert [row["status"] for row in rows] == [cell["status"] for cell in cells]  # one seed: each cell is its row
    for name in ("rows", "cells", "heatmap"):
        assert f"{name} written to " in both["text"]


def test_json_cells_agree_with_the_cells_file_of_the_same_discipline(both, defaults_json):
    """A map is a function of its jobs: the defaults' cells are the same whether `none` was played beside them or not."""
    played = json.loads(defaults_json[1])
    written = [cell for cell in read_csv(both["cells"]) if cell["discipline"] == "defaults"]
    assert len(played) == len(written) == 2
    for mine, theirs in zip(played, written, strict=True):
        assert set(mine) == set(theirs)
        for column, value in mine.items():
            assert theirs[column] == ("" if value is None else str(value)), column


def test_plot_writes_a_png(both):
    data = both["plot"].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5_000


@pytest.fixture
def nothing_plays(monkeypatch: pytest.MonkeyPatch) -> list:
    """Fail the test if any job is played (`--jobs 1` plays them in this process)."""
    played: list = []

    def play(job):
        played.append(job)
        raise AssertionError("bad input must be refused before any job plays")

    monkeypatch.setattr(phase_module, "play_phase_job", play)
    return played


def without(words: tuple[str, ...], *names: str) -> list[str]:
    """The words with each named option and its value left out."""
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in names:
            skip = True
        else:
            kept.append(word)
    return kept


BAD = [
    ("no trigger", without(TINY, "--trigger"), "needs a trigger"),
    ("three axes", [*TINY, "--axis", "trigger.factor=2,4", "--axis", "trigger.at_s=300"], "one or two --axis, not 3"),
    ("unknown discipline", [*TINY, "--discipline", "defaults", "--discipline", "reckless"], "unknown discipline 'reckless'"),
    ("bad trigger axis value", [*without(TINY, "--axis"), "--axis", "trigger.for_s=20,long"], "takes float values"),
    ("bad setting axis value", [*TINY, "--axis", "workload.arrival_rate_per_s=abc"], "workload.arrival_rate_per_s must be a number"),
    ("negative duration", [*without(TINY, "--axis"), "--axis", "trigger.for_s=20,-5"], "for_s must be a positive finite number"),
    ("plot into a missing folder", [*TINY, "--plot", "{missing}/map.png"], "no directory"),
    ("cells into a missing folder", [*TINY, "--cells", "{missing}/cells.csv"], "no directory"),
    ("rows as parquet", [*TINY, "--out", "{tmp}/rows.parquet"], ".csv file, not 'rows.parquet'"),
    ("an axis twice", [*TINY, "--axis", "trigger.for_s=30"], "given twice"),
]


@pytest.mark.parametrize(("argv", "words"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_input_exits_2_with_one_line_and_no_traceback_before_anything_plays(argv, words, capsys, tmp_path, nothing_plays):
    argv = [word.format(missing=tmp_path / "missing", tmp=tmp_path) for word in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("shiftchange: ")
    assert words in captured.err
    assert "Traceback" not in captured.err
    assert nothing_plays == []
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_plot_name_matplotlib_cannot_draw_is_refused_before_anything_plays(capsys, tmp_path, nothing_plays):
    status = main([*TINY, "--plot", str(tmp_path / "map.xyz")])
    assert status == 2
    assert "cannot draw" in capsys.readouterr().err
    assert nothing_plays == []
