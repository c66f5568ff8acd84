"""`--report FILE.html` on `sim run` and `chaos`, and the report.html of each run of a sweep's artifacts.

Bad input (a folder, a missing folder, a name that is not .html) is one
line and exit status 2 before anything runs, and nothing is written. A
page written on its own is the page an artifacts folder holds, and its
verdicts are the `--json` report's. The chaos run is a short real one on
SQLite (one worker, four seconds of load): `heavy`, like the other chaos
runs, because it starts real processes on the wall clock.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.lab.report.html import CHAOS_PANELS
from tests.lab.test_html_report import assert_page_in_browser, parsed

RUN = ["sim", "run", "--scenario", "mixed", "--seed", "1", "--tasks", "30"]


def _bad_reports(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "folder.html").mkdir()
    return [
        (str(tmp_path / "folder.html"), "it is a folder"),
        (str(tmp_path / "no-such-folder" / "r.html"), "does not exist"),
        (str(tmp_path / "r.json"), "must end in .html"),
    ]


def test_a_report_that_cannot_be_written_is_one_line_and_status_2_before_the_run(capsys, tmp_path, monkeypatch):
    """Goal: each bad --report path is refused before the world plays: one line on stderr, nothing on stdout, nothing written."""
    import shiftchange.sim.world as world

    played = []
    monkeypatch.setattr(world, "play", lambda *args, **kwargs: played.append(args))
    for path, says in _bad_reports(tmp_path):
        before = sorted(tmp_path.rglob("*"))
        assert main([*RUN, "--report", path]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and says in captured.err, captured.err
        assert captured.err.startswith("shiftchange: ") and "Traceback" not in captured.err
        assert sorted(tmp_path.rglob("*")) == before
    assert played == []


def test_a_page_written_alone_is_the_artifacts_page_with_the_json_reports_verdicts(capsys, tmp_path):
    """Goal: `--report` alone and `--artifacts` draw the same page but for the wall time; its verdicts are the `--json` report's;
    an existing file is replaced whole, with no temporary file left beside it."""
    alone = tmp_path / "alone.html"
    alone.write_text("an older page")
    assert main([*RUN, "--json", "--report", str(alone)]) == 0
    report = json.loads(capsys.readouterr().out)
    both = tmp_path / "both.html"
    assert main([*RUN, "--artifacts", str(tmp_path / "run"), "--report", str(both)]) == 0
    assert "report: " + str(both) in capsys.readouterr().out
    assert both.read_bytes() == (tmp_path / "run" / "report.html").read_bytes()

    def without_wall_time(text: str) -> str:
        return re.sub(r"<tr><th scope=\"row\">wall time</th><td>[^<]*</td></tr>", "", text)

    assert without_wall_time(alone.read_text()) == without_wall_time(both.read_text())
    assert parsed(alone.read_text()).statuses == {name: verdict["status"] for name, verdict in report["invariants"].items()}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["alone.html", "both.html", "run"]


def test_every_run_of_a_sweep_leaves_its_own_page(capsys, tmp_path):
    """Goal: `sim sweep --artifacts` writes report.html beside each run's report.json, with that run's verdicts and seed."""
    words = ["sim", "sweep", "--scenario", "baseline", "--tasks", "10", "--grid", "workers.workers=8,16", "--seeds", "0-1"]
    assert main([*words, "--jobs", "1", "--artifacts", str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 4
    for folder in folders:
        report = json.loads((folder / "report.json").read_text())
        page = (folder / "report.html").read_text()
        assert parsed(page).statuses == {name: verdict["status"] for name, verdict in report["invariants"].items()}
        assert f'<tr><th scope="row">seed</th><td>{report["seed"]}</td></tr>' in page


def test_a_chaos_report_that_cannot_be_written_is_refused_before_any_process_starts(capsys, tmp_path):
    """Goal: chaos checks --report first too: one line, status 2, no run dir made, no store file created."""
    for path, says in _bad_reports(tmp_path):
        store = tmp_path / "store.db"
        argv = ["chaos", "--store", f"sqlite:///{store}", "--duration", "1", "--run-dir", str(tmp_path / "run"), "--report", path]
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and says in captured.err, captured.err
        assert not store.exists() and not (tmp_path / "run").exists()


CHAOS = ["--workers", "1", "--duration", "4", "--rate", "1", "--drain", "30", "--seed", "0"]
CHAOS_FAULTS = ["--kill-every", "2", "--pause-every", "0", "--orchestrator-kill-every", "0", "--drop-every", "1"]


@pytest.mark.heavy
def test_a_chaos_run_writes_a_page_that_says_what_its_report_json_says(tmp_path):
    """Goal: a short real chaos run on SQLite writes a page whose verdicts and metrics are report.json's, with one row per fault
    delivered, one timeline per task submitted (ISO times), and which renders in Chromium at 1280 and 1920 px."""
    run_dir, page_path = tmp_path / "run", tmp_path / "chaos.html"
    argv = ["chaos", "--store", f"sqlite:///{tmp_path / 'store.db'}", *CHAOS, *CHAOS_FAULTS, "--run-dir", str(run_dir)]
    status = main([*argv, "--report", str(page_path)])
    report = json.loads((run_dir / "report.json").read_text())
    assert status == (0 if report["ok"] else 1), report
    text = page_path.read_text()
    page = parsed(text)
    assert page.statuses == {name: verdict["status"] for name, verdict in report["invariants"].items()}
    assert page.metrics == list(report["metrics"])
    assert len(page.tasks) == report["metrics"]["tasks_submitted"] >= 2
    assert all(task.startswith(report["subject"]["task_prefix"]) for task in page.tasks)
    (faults,) = re.findall(r'<table class="faults">.*?<tbody>(.*?)</tbody>', text, re.DOTALL)
    assert faults.count("<tr>") == len(report["faults"]) >= 1
    assert re.search(r"<td>20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(\+\d", text), "times are ISO 8601 with their offset"
    for width in (1280, 1920):
        assert_page_in_browser(page_path, tmp_path, width, len(report["faults"]) * len(CHAOS_PANELS))


def test_the_chaos_help_names_the_report_option(capsys):
    """Goal: `chaos --help` documents --report."""
    with pytest.raises(SystemExit):
        main(["chaos", "--help"])
    assert "--report FILE.html" in capsys.readouterr().out
