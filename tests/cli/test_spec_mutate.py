"""`spec mutate`: every single-point mutant on trial; the same verdicts on one process, two and Dask; bad input is one line.

The default tests run two kinds (negate_guard, unfence: 73 mutants) at a small scale, one exploration (a lost response)
and no simulation, which is enough for every outcome to occur: killed by the structure, killed by the explorer, survived. The
whole table at the default scale is the slow test at the end (and the benchmark figures in docs/design-review.md).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.lab.mutate import KILLED, SURVIVED, mutate, summary_lines, verdicts_of
from shiftchange.lab.page import render
from shiftchange.lab.trial import Scale
from shiftchange.spec.loader import packaged_spec

ROOT = Path(__file__).resolve().parents[2]

KINDS = ("negate_guard", "unfence")
SMALL = Scale(explore=("workers=1 lost_responses=1",), scenarios=())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.heavy
def test_verdicts_are_identical_on_one_process_two_and_a_dask_cluster(tmp_path):
    """Goal: the verdicts are a function of the mutants alone; every outcome occurs, so agreeing is not agreeing on nothing."""
    pytest.importorskip("distributed")
    spec = packaged_spec()
    here = mutate(spec, SMALL, KINDS, label="spec", out=tmp_path / "one", processes=1)
    pooled = mutate(spec, SMALL, KINDS, label="spec", out=tmp_path / "two", processes=2)
    dask = mutate(spec, SMALL, KINDS, label="spec", out=tmp_path / "dask", processes=2, dask="local")
    assert len(here.results) == 73
    outcomes = {(status, check) for _id, status, check, _invariant in verdicts_of(here)}
    assert outcomes == {(KILLED, "structure"), (KILLED, "explore"), (SURVIVED, None)}
    assert verdicts_of(pooled) == verdicts_of(here)
    assert verdicts_of(dask) == verdicts_of(here)
    assert here.per_kind()["unfence"] == (11, 11)  # every unfenced row fails the structure's fenced_worker_writes


@pytest.mark.heavy
def test_the_report_text_json_and_page_agree(tmp_path):
    """Goal: the score, each survivor with its row, change and reading, and the per-check figures, alike in text, JSON and HTML."""
    scale = Scale(explore=("workers=1 lost_responses=1",), scenarios=())
    report = mutate(packaged_spec(), scale, ["negate_guard"], label="spec", out=tmp_path / "mutants", processes=1)
    text, data, page = "\n".join(summary_lines(report)), report.to_json(), render(report)
    score = f"mutation score: {data['killed']} of {data['mutants']} killed"
    assert score in text and score in page
    survivors = [result for result in data["results"] if result["status"] == SURVIVED]
    assert len(survivors) == data["survived"] > 0
    for survivor in survivors:
        assert f"{survivor['machine']} row {survivor['row']} ({survivor['where']})" in text
        assert f"change: {survivor['change']}" in text
        assert survivor["reading"] in text and html.escape(survivor["reading"]) in page
        assert (tmp_path / "mutants" / survivor["id"] / "attempt.toml").is_file()  # written, for a reviewer's spec diff
    readings = {survivor["reading"].split(": ", 1)[-1].split(" (the row fired")[0] for survivor in survivors}
    assert any("a hole in the checks" in survivor["reading"] for survivor in survivors)  # defer: no lost response reaches it
    assert any("(the row fired" in survivor["reading"] for survivor in survivors)  # a row the exploration fires, to no effect
    assert len(readings) > 1
    never = {(row["machine"], row["row"]) for row in data["rows_never_fired"]}
    assert ("attempt", 2) in never and ("attempt", 1) not in never  # defer never fires here; admit always does
    checks = data["per_check"]
    assert checks["structure"]["mutants"] == 62 and checks["simulate"]["mutants"] == 0  # no scenario: nothing simulated
    assert f"ran on {checks['explore']['mutants']:>5,} mutants, {checks['explore']['runs']:>6,} runs" in text


def test_the_command_prints_the_score_and_what_killed_each_mutant(capsys, tmp_path):
    """Goal: the command's text, on the cheapest kind: every unfenced row fails the structure's fenced_worker_writes."""
    argv = ("spec", "mutate", "--kinds", "unfence", "--scenarios", "none", "--processes", "1", "--out", str(tmp_path / "m"))
    status, text, err = run(capsys, *argv, "--explore", "workers=1 lost_responses=1", "-o", str(tmp_path / "page.html"))
    assert status == 0, err
    assert "mutation score: 11 of 11 killed (100.0%)" in text
    assert re.search(r"\n  structure +attempt\.fenced_worker_writes +11\n", text) and "survivors: 0" in text
    assert "mutation score: 11 of 11 killed (100.0%)" in (tmp_path / "page.html").read_text()
    assert not (tmp_path / "m").exists()  # a mutant the structure kills needs no folder: nothing replays it


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--kinds", "drop_state"), "unknown mutant kind 'drop_state'"),
        (("--spec", "nosuch-folder-or-rev"), "'nosuch-folder-or-rev' is not a folder"),
        (("--processes", "0"), "--processes must be at least 1"),
        (("--explore", "pauses"), "an exploration is name=number words"),
        (("-o", "page.txt"), "-o writes an HTML page"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(capsys, tmp_path, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)  # outside a git work tree: a name that is no folder cannot be a revision
    status, out, err = run(capsys, "spec", "mutate", *argv)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("shiftchange: ") and says in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_malformed_spec_is_one_line_naming_its_line(capsys, spec_copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec_copy.replace("attempt.toml", 'trigger = "complete"', 'trigger = "completed"')
    status, out, err = run(capsys, "spec", "mutate", "--spec", str(spec_copy.root))
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "attempt.toml:" in err and "unknown trigger 'completed'" in err, err


@pytest.mark.slow
def test_the_whole_shipped_table_at_the_default_scale(tmp_path):
    """The long variant of the tests above: every kind, the default scale, two processes (the benchmark's run)."""
    report = mutate(packaged_spec(), label="spec", out=tmp_path, processes=2)
    assert len(report.results) == 1167
    assert report.per_kind()["unfence"] == (11, 11)
    assert report.base.killed_by is None
    assert 0.5 < report.score < 1.0
    verdict = (ROOT / "docs" / "mutation-verdict.md").read_text()
    unargued = [result.mutant.id for result in report.survivors if f"`{result.mutant.id}`" not in verdict]
    assert not unargued, f"survivors docs/mutation-verdict.md does not name: {unargued}"
    assert f"{len(report.survivors)} survivors." in verdict
