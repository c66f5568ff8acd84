"""The spec commands read the spec being edited: `spec/` beside the current directory (a checkout's), else the packaged one."""

from __future__ import annotations

import json
import shutil

import pytest

from shiftchange.cli.main import main
from shiftchange.spec import DEFAULT_DIRECTORY, editing_directory, shown_directory
from shiftchange.spec.loader import FILES

START_ROW = "\n".join(
    [
        'trigger = "start"',
        'source = "claimed"',
        'dest = "running"',
        'actor = "worker"',
        'guards = ["lease_current"]',
        'effects = ["record_start"]',
        "fenced = true",
    ]
)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A folder holding a copy of the packaged spec as spec/, made the current directory."""
    folder = tmp_path / "spec"
    folder.mkdir()
    for name in FILES.values():
        shutil.copy(DEFAULT_DIRECTORY / name, folder / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def unfence_start(folder) -> None:
    path = folder / "spec" / FILES["attempt"]
    text = path.read_text(encoding="utf-8")
    assert START_ROW in text, "the packaged attempt machine's start row changed: update this test's copy of it"
    path.write_text(text.replace(START_ROW, START_ROW.replace("fenced = true", "fenced = false")), encoding="utf-8")


def test_spec_check_reads_the_checkouts_spec_and_says_so(checkout, capsys):
    unfence_start(checkout)
    status = main(["spec", "check"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert out.splitlines()[0] == "read spec: " + ", ".join(FILES.values())
    assert "FAIL  attempt.fenced_worker_writes" in out
    assert "spec/attempt.toml:" in out  # the witness names the edited file, relative


def test_spec_flag_wins_over_the_checkout(checkout, tmp_path, capsys):
    unfence_start(checkout)
    status = main(["spec", "check", "--spec", str(DEFAULT_DIRECTORY)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[0].startswith("read the packaged spec (shiftchange.spec): ")


def test_outside_a_checkout_the_packaged_spec_is_read(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / FILES["attempt"]).write_text("not the whole spec", encoding="utf-8")  # a spec/ without every file
    assert editing_directory() is None
    assert main(["spec", "check"]) == 0
    assert capsys.readouterr().out.startswith("read the packaged spec (shiftchange.spec): ")


def test_review_page_shows_the_edit_and_no_absolute_path(checkout, capsys):
    unfence_start(checkout)
    assert main(["spec", "review", "-o", "review"]) == 1  # the edit fails a property: the page is written and the status says so
    page = (checkout / "review" / "review.html").read_text(encoding="utf-8")
    assert "fenced_worker_writes" in page and "unfenced worker write: start: claimed -&gt; running" in page
    assert str(checkout) not in page and str(DEFAULT_DIRECTORY) not in page
    assert "Generated from <code>spec</code>" in page


def test_diagram_reads_the_checkouts_spec(checkout, capsys):
    unfence_start(checkout)
    assert main(["spec", "diagram", "--machine", "attempt", "--format", "mermaid", "-o", "edited.mmd"]) == 0
    assert capsys.readouterr().out.startswith("read spec: ")
    packaged_args = ["--spec", str(DEFAULT_DIRECTORY), "--machine", "attempt", "--format", "mermaid", "-o", "packaged.mmd"]
    assert main(["spec", "diagram", *packaged_args]) == 0
    edited, packaged = ((checkout / name).read_text(encoding="utf-8") for name in ("edited.mmd", "packaged.mmd"))
    assert 'claimed ==>|"start' in packaged and 'claimed -->|"start' in edited  # a fenced row is drawn bold; the edit is not


def test_shown_directory_never_prints_the_installed_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_directory(DEFAULT_DIRECTORY) == "the packaged spec (shiftchange.spec)"
    assert shown_directory(tmp_path / "spec") == "spec"
    assert shown_directory("/elsewhere/spec") == "/elsewhere/spec"


def test_spec_check_json_names_the_spec_and_every_property(checkout, capsys):
    unfence_start(checkout)
    status = main(["spec", "check", "--json"])
    found = json.loads(capsys.readouterr().out)  # nothing but the object on stdout
    assert status == 1 and found["ok"] is False and found["spec"] == "spec"
    failed = [prop for prop in found["properties"] if not prop["ok"]]
    assert [prop["name"] for prop in failed] == ["attempt.fenced_worker_writes"]
    assert failed[0]["witness"][0].startswith("unfenced worker write: start: claimed -> running")
    assert found["held"] == len(found["properties"]) - 1 and set(found["machines"]) == {"attempt", "task"}
