"""`spec diff OLD NEW --run`: both specs on trial; exit 1 when the proposal breaks an invariant the base holds, with its story.

The issue's example: the worker's `complete` row unfenced. The structure check already fails it; the run adds what it
does (a stale completion accepted over the retry), found by the explorer in 19 steps and drawn as the task's timeline on
the review page. A harmless proposal (dropping `lease_issued` from `cancel_acknowledged`, a guard no check of the
default scale needs: `spec mutate` lists it among the survivors) exits 0. The scale is the smallest that shows it (one
exploration, no simulation), so each test takes seconds; the default scale is the benchmark's (docs/design-review.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shiftchange.cli.main import main

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


@pytest.mark.heavy
def test_the_unfenced_complete_exits_1_and_its_review_page_shows_the_counterexample(capsys, spec_copy, tmp_path, in_checkout):
    """Goal: exit 1; the text and the page name the broken invariant, its 19-step path, the task's timeline and the replay."""
    spec_copy.replace("attempt.toml", COMPLETE_FENCED, COMPLETE_FENCED.replace("fenced = true", "fenced = false"))
    review = tmp_path / "review"
    status, out, err = run(capsys, "spec", "diff", "HEAD", str(spec_copy.root), "--run", *SMALL, "--review", str(review))
    assert status == 1, err
    assert "explore   fenced_writes" in out and "ok -> violated BROKEN" in out
    assert "fenced_writes broken: shortest counterexample 19 steps" in out
    page = (review / "review.html").read_text()
    assert '<section id="what-this-change-does">' in page
    assert "Recovery timeline of task task-1" in page
    assert "worker-1 gen 1     complete             running -&gt; verifying" in page  # the stale completion, accepted
    assert f"--spec {spec_copy.root} --replay" in page
    markdown = (review / "review.md").read_text()
    assert "## What this change does" in markdown and "Recovery timeline of task task-1" in markdown


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
