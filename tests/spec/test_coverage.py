"""Transition coverage: the rows a history fired, counted once each, merged, kept in a file, refused against another spec, reviewed."""

from __future__ import annotations

import json
import re

import pytest

from shiftchange.cli.main import main
from shiftchange.core import Event, MemoryStore
from shiftchange.lab.report.coverage import CoverageSink
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play
from shiftchange.spec import load_spec
from shiftchange.spec.coverage import (
    FORMAT_VERSION,
    CoverageError,
    Tally,
    coverage_of,
    merged,
    read_coverage,
    write_coverage,
)

SPEC = load_spec()
SMALL_RUN = ("--scenario", "mixed", "--seed", "1", "--tasks", "30")
"""A run of thirty tasks under mixed faults: under a second, and it leaves rows both fired and never fired."""


def number(machine: str, trigger: str, source: str) -> int:
    """The number (#N) of the one row of `machine` that moves `source` on `trigger`."""
    (row,) = [r for r in SPEC.machines[machine].rows if r.trigger == trigger and source in r.sources]
    return row.index + 1


class History:
    """A hand-built history of core events, each with the fields coverage reads and a running sequence number."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def task(self, kind: str, before: str | None, after: str | None, accepted: bool = True, reason: str = "accepted") -> History:
        return self._add(kind, None, before, after, accepted, reason)

    def attempt(self, kind: str, before: str | None, after: str | None, accepted: bool = True, reason: str = "accepted") -> History:
        return self._add(kind, "t-1/1", before, after, accepted, reason)

    def _add(self, kind: str, attempt_id: str | None, before: str | None, after: str | None, accepted: bool, reason: str) -> History:
        seq = len(self.events) + 1
        self.events.append(Event(seq, float(seq), "orchestrator", kind, "t-1", attempt_id, accepted, reason, before, after))
        return self


def one_task_that_succeeds() -> History:
    """One task through one Attempt to done, with a refused claim before any Attempt existed and one refused renewal."""
    h = History().task("create", None, "inbox").task("accept", "inbox", "ready").task("claim", None, None, False, "no attempt to claim")
    h.task("dispatch", "ready", "in_progress").attempt("append", None, "queued").attempt("admit", "queued", "admitted")
    h.attempt("claim", "admitted", "claimed").attempt("start", "claimed", "running").attempt("renew", "running", "running")
    h.attempt("renew", "running", "running").attempt("renew", "verifying", "verifying", False, "late: no 'renew' from 'verifying'")
    h.attempt("complete", "running", "verifying").attempt("verified", "verifying", "succeeded")
    h.task("attempt_succeeded", "in_progress", "review").attempt("decide", "review", "review", reason="verify")
    return h.task("approve", "review", "done")


def test_a_hand_built_history_hits_exactly_the_rows_it_took():
    """Each accepted event lands on the one row it names; refusals count per trigger; create, append and decide are counted apart."""
    history = one_task_that_succeeds()
    coverage = coverage_of(SPEC, history.events)
    attempt_rows = {number("attempt", t, s): n for t, s, n in [("admit", "queued", 1), ("claim", "admitted", 1), ("start", "claimed", 1)]}
    attempt_rows |= {number("attempt", "renew", "running"): 2, number("attempt", "complete", "running"): 1}
    attempt_rows[number("attempt", "verified", "verifying")] = 1
    task_rows = {number("task", t, s): 1 for t, s in [("accept", "inbox"), ("dispatch", "ready"), ("attempt_succeeded", "in_progress")]}
    task_rows[number("task", "approve", "review")] = 1
    for machine, expected in (("attempt", attempt_rows), ("task", task_rows)):
        fired = {position + 1: count for position, count in enumerate(coverage.fired[machine]) if count}
        assert fired == expected, machine
    assert coverage.refused == {"attempt": {"claim": 1, "renew": 1}, "task": {}}
    assert coverage.other == {"create": 1, "append": 1, "decide": 1}
    assert (coverage.unmatched, coverage.events, coverage.runs) == ((), len(history.events), 1)


def test_an_accepted_event_that_matches_no_row_is_reported_not_dropped():
    """A move no row allows (complete from queued) is unmatched, with the reason it was recorded with, and fires no row."""
    h = one_task_that_succeeds().attempt("complete", "queued", "succeeded", reason="a broken core")
    h.attempt("complete", "queued", "succeeded", reason="again")
    coverage = coverage_of(SPEC, h.events)
    (entry,) = coverage.unmatched
    assert (entry.machine, entry.trigger, entry.from_state, entry.to_state, entry.events) == (
        "attempt",
        "complete",
        "queued",
        "succeeded",
        2,
    )
    assert entry.example == "a broken core"
    assert coverage.count("attempt", number("attempt", "complete", "running")) == 1


def test_a_real_runs_history_counts_each_accepted_trigger_event_once():
    """Over a real run, each machine's row counts plus its unmatched events equal its accepted events of its triggers."""
    events: list[Event] = []
    play(scenario_config("mixed", 1, 30), 1, "mixed", history_sink=lambda entry: events.append(entry) if type(entry) is Event else None)
    coverage = coverage_of(SPEC, events)
    for name, machine in SPEC.machines.items():
        accepted = [e for e in events if e.accepted and e.kind in machine.triggers and (e.attempt_id is not None) == (name == "attempt")]
        unmatched = sum(entry.events for entry in coverage.unmatched if entry.machine == name)
        assert sum(coverage.fired[name]) + unmatched == len(accepted) > 0, name
        assert 0 < coverage.rows_fired(name) < len(machine.rows), name
    assert coverage.events == len(events)


def test_a_streamed_count_equals_a_count_of_the_whole_history():
    """The sim's sink, counting as the history streams, gives the same coverage as counting the kept history afterwards."""
    events: list[Event] = []
    sink = CoverageSink()

    def both(entry: object) -> None:
        sink(entry)
        if type(entry) is Event:
            events.append(entry)

    play(scenario_config("mixed", 2, 20), 2, "mixed", history_sink=both)
    assert sink.tally.coverage() == coverage_of(SPEC, events)


def test_a_history_with_no_events_is_refused_not_counted_as_zeros():
    """A store that keeps no events has no history to count: that is an error naming keep_events, never a file of zeros."""
    with pytest.raises(CoverageError, match=r"no events to count.*keep_events"):
        coverage_of(SPEC, MemoryStore(keep_events=False).events())


def test_merging_sums_every_count():
    """Two histories merged: row counts, refusals, other kinds, unmatched moves, events and runs all add up."""
    first = coverage_of(SPEC, one_task_that_succeeds().events, ["first"])
    second = coverage_of(SPEC, one_task_that_succeeds().attempt("complete", "queued", "failed").events, ["second"])
    total = merged([first, second])
    for name in SPEC.machines:
        assert total.fired[name] == tuple(a + b for a, b in zip(first.fired[name], second.fired[name], strict=True))
    assert total.refused["attempt"] == {"claim": 2, "renew": 2}
    assert total.other == {"create": 2, "append": 2, "decide": 2}
    assert [entry.events for entry in total.unmatched] == [1]
    assert (total.events, total.runs, total.recorded_by) == (first.events + second.events, 2, ("first", "second"))


def test_a_coverage_file_reads_back_equal(tmp_path):
    """Written and read back, a coverage is the same value: counts, identity, recorded_by and all."""
    coverage = coverage_of(SPEC, one_task_that_succeeds().attempt("complete", "queued", "failed").events, ["hand-built"])
    path = write_coverage(coverage, tmp_path / "coverage.json")
    assert read_coverage(path) == coverage
    data = json.loads(path.read_text())
    assert (data["version"], data["runs"], data["recorded_by"]) == (FORMAT_VERSION, 1, ["hand-built"])
    assert [row["row"] for row in data["machines"]["task"]["rows"]] == list(range(1, len(SPEC.task.rows) + 1))
    assert list(tmp_path.iterdir()) == [path]


def test_a_coverage_of_another_spec_is_refused_naming_the_row(spec_copy, tmp_path, capsys):
    """A row whose dest changed since the coverage was recorded: refused with the row there and here, exit 2 in review."""
    coverage = coverage_of(SPEC, one_task_that_succeeds().events)
    spec_copy.replace(
        "task.toml", 'trigger = "approve"\nsource = "review"\ndest = "done"', 'trigger = "approve"\nsource = "review"\ndest = "ready"'
    )
    changed = load_spec(spec_copy.root)
    with pytest.raises(CoverageError, match=r"another spec: task row #9 approve: review -> done there, #9 approve: review -> ready here"):
        coverage.check_against(changed)
    path = write_coverage(coverage, tmp_path / "coverage.json")
    status = main(["spec", "review", "--spec", str(spec_copy.root), "-o", str(tmp_path / "review"), "--coverage", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "another spec" in err
    assert not (tmp_path / "review").exists()


def test_a_spec_whose_rows_an_event_cannot_tell_apart_cannot_be_counted(spec_copy):
    """Two shed rows from queued to failed, told apart only by guards: no event can say which fired, so counting refuses."""
    spec_copy.append(
        "attempt.toml",
        '[[transition]]\ntrigger = "shed"\nsource = "queued"\ndest = "failed"\nactor = "orchestrator"\n'
        'guards = ["capacity_available", "selected_for_shedding"]\n',
    )
    with pytest.raises(CoverageError, match=r"rows #3 and #33 both move queued -> failed on 'shed'"):
        Tally(load_spec(spec_copy.root))


@pytest.mark.parametrize("command", [["sim", "run", "--tasks", "5"], ["sim", "sweep", "--seeds", "0-1", "--tasks", "5", "--jobs", "1"]])
def test_recording_coverage_of_such_a_spec_is_one_line_exit_2_before_any_run(command, spec_copy, tmp_path, capsys, monkeypatch):
    """The core runs the packaged spec, which a user may have edited into one coverage cannot count: refused up front, no traceback."""
    spec_copy.append(
        "attempt.toml",
        '[[transition]]\ntrigger = "shed"\nsource = "queued"\ndest = "failed"\nactor = "orchestrator"\n'
        'guards = ["capacity_available", "selected_for_shedding"]\n',
    )
    monkeypatch.setattr("shiftchange.lab.report.coverage.SPEC", load_spec(spec_copy.root))
    extra = ["--out", str(tmp_path / "rows.csv")] if command[1] == "sweep" else []
    assert main([*command, *extra, "--coverage", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "both move queued -> failed" in err[0]
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "rows.csv").exists()


def review_rows(page: str) -> dict[str, dict[int, str]]:
    """Each machine's transitions table in review.md: row number -> its fired cell."""
    tables: dict[str, dict[int, str]] = {}
    machine = None
    for line in page.splitlines():
        heading = re.match(r"^## The (\w+) machine", line)
        if heading:
            machine = heading.group(1)
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if machine and re.match(r"^\| \d+ \| `", line):
            tables.setdefault(machine, {})[int(cells[0])] = cells[4]
    return tables


def test_sim_run_coverage_then_review_shows_the_fired_column(tmp_path, capsys):
    """`sim run --coverage` then `spec review --coverage`: each row's count from the file, never-fired rows marked and listed."""
    path = tmp_path / "coverage.json"
    assert main(["sim", "run", *SMALL_RUN, "--coverage", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"written to {path}" in out.splitlines()[-1]
    data = json.loads(path.read_text())
    assert data["recorded_by"] == ["shiftchange sim run --scenario mixed --seed 1 --tasks 30"] and data["runs"] == 1
    assert main(["spec", "review", "-o", str(tmp_path / "review"), "--renderer", "matplotlib", "--coverage", str(path)]) == 0
    page = (tmp_path / "review" / "review.md").read_text()
    assert "| # | trigger | from | to | fired | actor |" in page
    tables = review_rows(page)
    for name, machine in data["machines"].items():
        fired = {row["row"]: row["fired"] for row in machine["rows"]}
        never = [n for n, count in fired.items() if count == 0]
        assert never and len(never) < len(fired), name
        assert {n: cell for n, cell in tables[name].items() if n in never} == dict.fromkeys(never, "**never**")
        busiest = max(fired, key=fired.__getitem__)
        assert tables[name][busiest] == f"{fired[busiest]:,}"
        assert f"**{len(fired) - len(never)} of {len(fired)} rows fired in 1 run.**" in page
    first_never = next(row for row in data["machines"]["attempt"]["rows"] if row["fired"] == 0)
    assert f"- #{first_never['row']} `{first_never['trigger']}`: {', '.join(first_never['sources'])} -> {first_never['dest']}" in page


def test_a_review_without_coverage_has_no_fired_column(tmp_path):
    assert main(["spec", "review", "-o", str(tmp_path), "--renderer", "matplotlib"]) == 0
    page = (tmp_path / "review.md").read_text()
    assert "| # | trigger | from | to | actor |" in page and "fired" not in page


def test_a_sweeps_coverage_is_the_sum_of_its_runs(tmp_path, capsys):
    """Two runs of a sweep on one process: the file holds what the same two runs, each recorded by `sim run`, sum to."""
    swept = tmp_path / "sweep.json"
    argv = ["sim", "sweep", "--scenario", "baseline", "--tasks", "15", "--seeds", "0-1", "--jobs", "1", "--coverage", str(swept)]
    assert main(argv) == 0
    assert f"{swept}: transition coverage of 2 runs" in capsys.readouterr().out
    singles = []
    for seed in ("0", "1"):
        path = tmp_path / f"seed{seed}.json"
        assert main(["sim", "run", "--scenario", "baseline", "--tasks", "15", "--seed", seed, "--coverage", str(path)]) == 0
        singles.append(read_coverage(path))
    total, expected = read_coverage(swept), merged(singles)
    assert (total.fired, total.refused, total.other, total.events, total.runs) == (
        expected.fired,
        expected.refused,
        expected.other,
        expected.events,
        2,
    )
    assert total.recorded_by == ("shiftchange sim sweep --scenario baseline --tasks 15 --seeds 0-1",)


def test_a_sweep_resuming_from_rows_it_would_not_play_refuses_coverage(tmp_path, capsys):
    """Resumed rows are not played, so they cannot be counted: --coverage with them is refused before any run, one line."""
    out = tmp_path / "rows.csv"
    base = ["sim", "sweep", "--scenario", "baseline", "--tasks", "5", "--seeds", "0", "--jobs", "1", "--out", str(out)]
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base, "--coverage", str(tmp_path / "coverage.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not count them" in err
    assert not (tmp_path / "coverage.json").exists()


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (None, "no coverage file at"),
        ("{not json", "is not JSON"),
        (json.dumps({"format": "shiftchange-coverage", "version": 99}), "version 99"),
        (json.dumps({"rows": []}), "not a shiftchange coverage file"),
        (json.dumps({"format": "shiftchange-coverage", "version": FORMAT_VERSION, "machines": []}), "malformed"),
    ],
)
def test_a_bad_coverage_file_is_one_line_exit_2(tmp_path, capsys, content, named):
    """Missing, not JSON, another version, another format or a broken body: one line on stderr, exit 2, no page written."""
    path = tmp_path / "coverage.json"
    if content is not None:
        path.write_text(content)
    assert main(["spec", "review", "-o", str(tmp_path / "review"), "--coverage", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and err.startswith("shiftchange: ")
    assert not (tmp_path / "review").exists()


@pytest.mark.parametrize("where", ["missing/coverage.json", "."])
def test_an_unwritable_coverage_file_is_one_line_exit_2_before_the_run(tmp_path, capsys, monkeypatch, where):
    """A folder that does not exist, or a folder given as the file: refused before anything plays, nothing written."""
    import shiftchange.sim.world as world

    monkeypatch.setattr(world, "play", lambda *args, **kwargs: pytest.fail("the run must not start"))
    status = main(["sim", "run", *SMALL_RUN, "--coverage", str(tmp_path / where)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "cannot write" in err
    assert list(tmp_path.iterdir()) == []
