"""The one text renderer: every driver's run printed from its record alone, the same from a report.json read back."""

from __future__ import annotations

import json
from dataclasses import replace

from shiftchange.checkers.rules import INVARIANTS
from shiftchange.checkers.run import from_json
from shiftchange.explore import ExploreConfig, explore
from shiftchange.explore.report import to_record as search_record
from shiftchange.lab.report import render, to_record
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play


def _read_back(record):
    """The record as a reader of report.json gets it: through JSON text and `from_json`."""
    return from_json(json.loads(json.dumps(record.to_json())))


def test_a_simulated_run_prints_the_same_from_its_record_and_from_its_json_read_back():
    """Goal: the text reads only the record, so a saved report prints what the run printed; a changed setting is counted."""
    config = scenario_config("mixed", 1, 30)
    config = replace(config, core=replace(config.core, lease_ttl_s=config.core.lease_ttl_s + 1.0))
    record = to_record(play(config, 1, "mixed"), 0.25)
    text = render(record)
    assert render(_read_back(record)) == text
    assert text.startswith("shiftchange sim run: scenario mixed with 1 setting changed, seed 1, 30 tasks;")
    assert record.subject["settings_changed"] == ["core.lease_ttl_s"]
    assert "\ninvariants\n" in text and "\nmetrics\n" in text and "  renewals " in text
    assert ("replay: " in text) == (not record.ok)


def test_a_failing_simulated_run_prints_its_replay():
    """Goal: a run that did not pass ends its text with the command that plays it again (the record's replay)."""
    from shiftchange.antipatterns import ANTIPATTERNS

    pattern = ANTIPATTERNS["no-fencing"]
    outcome = play(scenario_config(pattern.scenario, 0, 60), 0, pattern.scenario, pattern)
    assert not outcome.ok, "the anti-pattern's own scenario is expected to catch it"
    record = to_record(outcome, 1.0)
    assert render(record).rstrip().endswith(f"replay: {record.replay}")


def test_a_complete_search_prints_its_search_its_coverage_and_a_proof():
    """Goal: a search's text is the same renderer's: its search figures, the rows it never reached, and the closing claim."""
    record = search_record(explore(ExploreConfig(workers=1)))
    text = render(record)
    assert render(_read_back(record)) == text
    assert text.startswith("explore --workers 1 ") and "\nsearch\n" in text
    assert "the search completed: every reachable state was visited" in text and "never reached: " in text
    assert f"all {len(INVARIANTS)} invariants hold" in text
    assert text.rstrip().endswith("no invariant is violated in any reachable state")


def test_a_search_stopped_by_a_bound_says_so_once_and_claims_no_proof():
    """Goal: every verdict of a bounded search is unknown for one reason, said once under the table; the ending is no proof."""
    record = search_record(explore(ExploreConfig(crashes=1, pauses=1), states_max=20))
    text = render(record)
    assert render(_read_back(record)) == text
    assert f"({len(INVARIANTS)} could not tell: held in the " in text and text.count("could not tell") == 1 + len(INVARIANTS)
    assert "INCOMPLETE: the state bound of 20 was reached" in text
    assert text.rstrip().endswith("(the search did not complete, so this is not a proof)")


def test_a_counterexample_says_which_clock_searched_it_and_whether_it_replays_on_the_concrete_one():
    """Goal: the title names the clock; a path that does not show its violation on the concrete clock is labelled so."""
    from shiftchange.explore import exposing_config

    result = explore(exposing_config("no-fencing"))
    text = render(search_record(result))
    assert "abstract clock (states that differ only in when things happened are one)" in text.splitlines()[2]
    assert result.counterexample.replays and "does not show the violation" not in text
    result.counterexample = replace(result.counterexample, replays=False)
    record = search_record(result)
    assert record.subject["counterexample"]["replays_on_concrete_clock"] is False
    assert "this path does not show the violation when played on the concrete clock" in render(_read_back(record))
    concrete = render(search_record(explore(exposing_config("no-fencing", time="concrete"))))
    assert concrete.splitlines()[2].endswith("workers interchangeable, concrete clock")
