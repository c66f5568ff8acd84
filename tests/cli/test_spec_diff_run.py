"""`spec diff OLD NEW --run`: both specs on trial; exit 1 when the proposal breaks an invariant the base holds, with its story.

The issue's example: the worker's `complete` row unfenced. The structure check already fails it; the run adds what it
does (a stale completion accepted over the retry), found by the explorer in 19 steps and drawn as the task's timeline on
the review page. A harmless proposal (dropping `lease_issued` from `cancel_acknowledged`, a guard no check of the
default scale needs: `spec mutate` lists it among the survivors) exits 0. The scale is the smallest that shows it (one
exploration, no simulation), so each test takes seconds; the default scale is the benchmark's (docs/design-review.md).
"""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.spec import DEFAULT_DIRECTORY
from tests.browser import inspect

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--explore", "workers=2 pauses=1", "--scenarios", "none")
COMPLETE_FENCED = ('trigger = "complete"\nsource = "running"\ndest = "verifying"\nactor = "worker"\nguards = ["lease_current"]\n'
                   'effects = ["record_result", "revoke_authority"]\nfenced = true')  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def in_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # HEAD names the checkout's spec/ at its last commit


@pytest.fixture(scope="module")
def unfenced(tmp_path_factory) -> tuple[int, str, str, Path, Path]:
    """`spec diff HEAD PROPOSAL --run --review DIR` with `complete` unfenced: (status, out, err, the proposal, the review)."""
    root = tmp_path_factory.mktemp("unfenced")
    proposal, review = root / "proposal", root / "review"
    proposal.mkdir()
    for source in DEFAULT_DIRECTORY.glob("*.toml"):
        shutil.copy(source, proposal / source.name)
    text = (proposal / "attempt.toml").read_text()
    assert text.count(COMPLETE_FENCED) == 1
    (proposal / "attempt.toml").write_text(text.replace(COMPLETE_FENCED, COMPLETE_FENCED.replace("fenced = true", "fenced = false")))
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
        patch.chdir(ROOT)  # HEAD names the checkout's spec/ at its last commit
        status = main(["spec", "diff", "HEAD", str(proposal), "--run", *SMALL, "--review", str(review)])
    return status, out.getvalue(), err.getvalue(), proposal, review


@pytest.mark.heavy
def test_the_unfenced_complete_exits_1_and_its_review_page_shows_the_counterexample(unfenced):
    """Goal: exit 1; the text and the page name the broken invariant, its 19-step path, the task's timeline and the replay."""
    status, out, err, proposal, review = unfenced
    assert status == 1, err
    assert "explore   fenced_writes" in out and "ok -> violated BROKEN" in out
    assert "fenced_writes broken: shortest counterexample 19 steps" in out
    page = (review / "review.html").read_text()
    assert '<section id="what-this-change-does">' in page
    assert "Recovery timeline of task task-1" in page
    assert "worker-1 gen 1     complete             running -&gt; verifying" in page  # the stale completion, accepted
    assert f"--spec {proposal} --replay" in page
    markdown = (review / "review.md").read_text()
    assert "## What this change does" in markdown and "Recovery timeline of task task-1" in markdown


SEEN = """
const section = document.getElementById("what-this-change-does");
const timeline = [...(section ? section.querySelectorAll("pre") : [])].find((pre) => pre.textContent.includes("Recovery timeline"));
const box = timeline ? timeline.getBoundingClientRect() : null;
window.verdict = {
  section: section !== null,
  timeline: box !== null && box.height > 0 && box.width > 0,
  inside: box !== null && box.left >= 0 && box.right <= window.innerWidth,
  page_scrolls_sideways: document.documentElement.scrollWidth > window.innerWidth,
  first_section: document.querySelector("section") === section,
};
"""


@pytest.mark.heavy
@pytest.mark.parametrize("width", [1280, 1920])
def test_the_counterexample_is_on_screen_in_a_browser(unfenced, tmp_path, width):
    """Goal: in headless Chromium at 1,280 and 1,920 px, the section opens the page and its timeline is drawn within the window."""
    seen = inspect(unfenced[4] / "review.html", SEEN, tmp_path, width=width)
    assert seen["errors"] == []
    assert seen["verdict"] == {"section": True, "timeline": True, "inside": True, "page_scrolls_sideways": False, "first_section": True}


@pytest.mark.heavy
def test_a_harmless_proposal_exits_0_with_every_verdict_held(capsys, spec_copy, in_checkout):
    spec_copy.replace("attempt.toml", 'guards = ["lease_issued", "lease_current"]\neffects = ["record_acknowledgement"',
                      'guards = ["lease_current"]\neffects = ["record_acknowledgement"')  # fmt: skip
    status, out, err = run(capsys, "spec", "diff", "HEAD", str(spec_copy.root), "--run", *SMALL, "--json")
    assert status == 0, err
    report = json.loads(out)
    assert report["machines"]["attempt"]["rows"]["changed"], "the proposal changes a row"
    assert report["run"]["broken"] == [] and report["run"]["counterexamples"] == []
    assert {v["proposal"] for v in report["run"]["verdicts"]} == {"ok"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--tasks", "10"), "--tasks is for a trial; give --run too"),
        (("--run", "--scenarios", "nosuch"), "unknown scenario 'nosuch'"),
        (("--run", "--explore", "workers=9"), "workers must be a whole number from 1 to 4"),
        (("--run", "--seeds", "x"), "--seeds takes whole numbers, not 'x'"),
    ],
)
def test_bad_trial_flags_are_one_line_and_exit_2_before_anything_runs(capsys, tmp_path, in_checkout, argv, says):
    status, out, err = run(capsys, "spec", "diff", "HEAD", "HEAD", *argv, "--review", str(tmp_path / "page"))
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and says in err, err
    assert not (tmp_path / "page").exists()


@pytest.mark.heavy
def test_spec_review_run_judges_the_reviewed_spec_against_its_base(capsys, tmp_path, in_checkout, unfenced):
    """Goal: `spec review --spec PROPOSAL --run --base HEAD` exits 1 and its page opens with the same counterexample."""
    proposal = unfenced[3]
    status, out, err = run(capsys, "spec", "review", "--spec", str(proposal), "--run", "--base", "HEAD", *SMALL, "-o", str(tmp_path))
    assert status == 1, err
    assert "run: base HEAD:spec and proposal" in out and "fenced_writes broken: shortest counterexample 19 steps" in out
    page = (tmp_path / "review.html").read_text()
    assert '<section id="what-this-change-does">' in page and "Recovery timeline of task task-1" in page


def test_spec_review_run_of_the_base_itself_breaks_nothing(capsys, tmp_path, in_checkout):
    """Goal: the shipped spec reviewed against itself exits 0, and the page says the proposal breaks nothing."""
    status, out, err = run(capsys, "spec", "review", "--spec", str(ROOT / "spec"), "--run", "--base", "HEAD", *SMALL, "-o", str(tmp_path))
    assert status == 0, err
    assert "the proposal breaks no verdict the base holds" in out
    assert '<section id="what-this-change-does">' in (tmp_path / "review.html").read_text()


@pytest.mark.parametrize("argv", [("--base", "HEAD"), ("--tasks", "10")])
def test_spec_review_trial_flags_need_run(capsys, tmp_path, argv):
    status, out, err = run(capsys, "spec", "review", *argv, "-o", str(tmp_path / "page"))
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "is for a trial; give --run too" in err, err
    assert not (tmp_path / "page").exists()
