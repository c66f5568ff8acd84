"""The checkers stand apart from the table under review: an edit of a row cannot narrow its own check.

A driver may run an edited table (spec/edits.py); the checkers judge the run
by the catalogue and the vocabulary's meanings. Three things show it: a write
the edited table no longer fences is still judged (the reference core really
accepts a stale completion under `unfence(..., "complete")` and fenced_writes
reports it); importing the checkers reads no spec at all, and the first rule
that needs a state set reads the packaged spec's files, once; and
fenced_writes decides which writes to judge by their actor, so it judges a
stale checkpoint with no spec to ask, or with a spec whose every row is
unfenced.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shiftchange.checkers import rules
from shiftchange.checkers.history import VIOLATED
from shiftchange.core import Orchestrator, ReliabilityConfig
from shiftchange.core.table import Table
from shiftchange.spec import Spec, load_spec
from shiftchange.spec.edits import unfence
from shiftchange.spec.loader import DEFAULT_DIRECTORY
from tests.checkers.test_checkers import RealRun, story

# ------------------------------------------ (a) a write an edited table leaves unfenced


def test_a_stale_completion_an_unfenced_table_accepts_is_a_fenced_writes_violation():
    """Goal: with `complete` unfenced, the core accepts a completion under a stale generation, and fenced_writes reports it."""
    edited = unfence(load_spec(), "complete")
    assert not any(row.fenced for row in edited.attempt.rows if row.trigger == "complete")
    run = RealRun()
    run.orchestrator = Orchestrator(
        run.store, run.clock, run.provider, run.config, ReliabilityConfig(), table=Table(edited, "complete unfenced")
    )
    attempt_id, generation, _token = run.running(run.dispatched("task-1"), "worker-a")

    result = run.orchestrator.complete_attempt(attempt_id, generation - 1, "not the token", "the test passes", head_sha="sha-1")

    assert result.accepted and result.state == "verifying", result  # the edited table let the stale write through
    verdict = run.history.verdicts()["fenced_writes"]
    assert verdict.status == VIOLATED, verdict
    assert f"accepted complete on {attempt_id} presented generation {generation - 1}" in verdict.example[0]


def test_a_stale_completion_accepted_on_a_synthetic_history_is_violated_whatever_the_rows_say():
    """Goal: the same write, planted by hand: a worker's accepted complete with a stale generation is fenced_writes' to report."""
    s = story().created().dispatched().running(1, 2).at(5).fenced("complete", 1, 1, "verifying")
    verdict = s.history.verdicts()["fenced_writes"]
    assert verdict.status == VIOLATED, verdict
    assert "presented generation 1; the lease it holds is generation 2" in verdict.example[0]


# ------------------------------------------------------ (b) nothing is read at import

_IMPORT = """
import json, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and str(args[0]).endswith(".toml") else None)
import shiftchange.spec as spec_package
import shiftchange.spec.loader as loader
calls = []
real = loader.load_spec
def counted(*args, **kwargs):
    calls.append(repr(args))
    return real(*args, **kwargs)
loader.load_spec = spec_package.load_spec = counted
import shiftchange.checkers
print(json.dumps({"calls": list(calls), "opened": list(opened)}), flush=True)
from shiftchange.checkers.history import CheckContext, History, Retired
from shiftchange.checkers.rules import all_checkers
from shiftchange.core import Budget, Task
for _ in range(2):  # two histories, each asking every rule of final records: the spec is read for the first only
    history = History(all_checkers(CheckContext(30.0, 5.0, 10)))
    history.append(Retired(1.0, Task("task-1", "goal", "tests/", "repo-a", "done", Budget(), 0.0), (), ()))
print(json.dumps({"calls": calls, "opened": opened}))
"""


def test_importing_the_checkers_reads_no_spec_and_the_rules_read_the_packaged_one_once(tmp_path):
    """Goal: `import shiftchange.checkers` neither calls load_spec nor opens a spec file; the state sets are read once, lazily.

    The subprocess runs in a folder holding a `spec/` of its own (a spec under
    review, as `shiftchange spec check` would find it): the checkers never read it.
    """
    (tmp_path / "spec").mkdir()
    for source in DEFAULT_DIRECTORY.glob("*.toml"):
        (tmp_path / "spec" / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _IMPORT], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    assert json.loads(lines[0]) == {"calls": [], "opened": []}, "importing the checkers read a spec"
    assert done.returncode == 0, done.stderr
    after = json.loads(lines[1])
    assert len(after["calls"]) == 1, after  # read once, then kept
    assert after["opened"], "the rules that need a state set read the spec files"
    assert all(str(DEFAULT_DIRECTORY) in path for path in after["opened"]), after["opened"]  # the packaged spec, never ./spec


def test_the_rules_module_holds_no_spec_and_no_fenced_set():
    """Goal: no module-level spec object or set of fenced triggers a table could have narrowed."""
    assert not [name for name, value in vars(rules).items() if isinstance(value, Spec)]
    assert not hasattr(rules, "FENCED")


# ------------------------------------------ (c) the judged writes do not come from rows

_STALE_CHECKPOINT = """
import json, sys
import shiftchange.spec as spec_package
import shiftchange.spec.loader as loader
from shiftchange.spec.edits import unfence
real = loader.load_spec
def no_spec(*args, **kwargs):
    raise AssertionError("a spec was read")
def every_row_unfenced(*args, **kwargs):
    return unfence(real(*args, **kwargs))
given = sys.argv[1]
loader.load_spec = spec_package.load_spec = no_spec if given == "no spec" else every_row_unfenced
from shiftchange.checkers.history import CheckContext, History
from shiftchange.checkers.rules import FencedWrites, all_checkers
from shiftchange.core import Event
context = CheckContext(30.0, 5.0, 10)
history = History([FencedWrites(context)] if given == "no spec" else all_checkers(context))
# Attempt 1 is claimed under generation 3; its worker's checkpoint presents generation 2 and is accepted.
history.append(Event(1, 0.0, "worker", "claim", "task-1", "task-1#1", True, "accepted", "admitted", "claimed", 3, "worker-a"))
history.append(Event(2, 1.0, "worker", "start", "task-1", "task-1#1", True, "accepted", "claimed", "running", 3, "worker-a"))
history.append(Event(3, 4.0, "worker", "checkpoint", "task-1", "task-1#1", True, "accepted", "running", "running", 2, "worker-a"))
verdict = history.verdicts()["fenced_writes"]
print(json.dumps({"status": verdict.status, "example": list(verdict.example)}))
"""


@pytest.mark.parametrize("given", ["no spec", "every row unfenced"])
def test_fenced_writes_judges_a_stale_checkpoint_whatever_it_is_told_about_rows(given):
    """Goal: with no spec to read, or a spec whose every row is unfenced, a worker's stale checkpoint is still reported.

    A fresh process, its loader replaced before the checkers are imported: a
    checker that took its judged triggers from the rows' `fenced` column
    (at import or later) would judge nothing here, or fail to import.
    """
    done = subprocess.run([sys.executable, "-c", _STALE_CHECKPOINT, given], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout.splitlines()[-1])
    assert verdict["status"] == VIOLATED, verdict
    assert "accepted checkpoint on task-1#1 presented generation 2; the lease it holds is generation 3" in verdict["example"][0]
