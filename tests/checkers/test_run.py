"""One record of a run: the simulator's run, a search and a chaos run print the same JSON shape, which reads back whole."""

from __future__ import annotations

import json
import shlex

import pytest

from shiftchange.checkers import VIOLATED, Verdict
from shiftchange.checkers.run import KEYS, SCHEMA_VERSION, Run, RunRecordError, from_json, invariants_json
from shiftchange.explore import ExploreConfig, explore
from shiftchange.explore.report import to_record
from shiftchange.lab.report import to_json
from shiftchange.runtime.chaos import ChaosFaults, ChaosReport, Delivered
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play


def _sim() -> dict:
    return to_json(play(scenario_config("mixed", 1, 20), 1, "mixed"), 0.5)


def _explore() -> dict:
    return to_record(explore(ExploreConfig(workers=1))).to_json()


def _chaos() -> dict:
    """A chaos report as its harness assembles it (a real run is the runtime's tests' business, minutes long)."""
    held = Verdict("single_owner", "ok", 0, ())
    report = ChaosReport(
        store="sqlite:///store.db",
        task_prefix="run-1-",
        run_dir="/tmp/run",
        workers=2,
        duration_s=10.0,
        seed=3,
        rate_per_s=1.0,
        idempotency=True,
        faults=ChaosFaults(),
        config={"core": {"lease_ttl_s": 4.0}},
        verdicts={"single_owner": held},
        metrics={"tasks_submitted": 9, "tasks_lost": 0},
        delivered=[Delivered(at=12.5, kind="kill", target="worker-1", hold_s=0.0)],
        rerun="shiftchange chaos --store sqlite:///store.db --seed 3",
    )
    return report.to_json()


DRIVERS = {"sim": _sim, "explore": _explore, "chaos": _chaos}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_every_driver_prints_the_one_shape_and_it_reads_back_whole(driver):
    """Goal: the same keys in the same order for every driver, its name in `driver`, and from_json(to_json) the same object."""
    record = DRIVERS[driver]()
    assert tuple(record) == KEYS and record["driver"] == driver and record["schema_version"] == SCHEMA_VERSION
    assert json.loads(json.dumps(record)) == record, "plain JSON, nothing a reader could not load"
    assert from_json(record).to_json() == record
    for found in record["invariants"].values():
        assert set(found) == {"ok", "status", "violations", "example"} and found["ok"] is (found["status"] == "ok")


def test_what_each_driver_says_lands_where_a_reader_looks():
    """Goal: a run's faults are records with their times, its replay plays it, and only a search has a `search`."""
    sim, search, chaos = _sim(), _explore(), _chaos()
    assert sim["search"] is None and chaos["search"] is None and search["search"]["complete"] is True
    assert sim["scenario"] == "mixed" and sim["tasks"] == 20 and sim["subject"]["digest"]
    assert all({"index", "at_s", "kind", "target"} <= set(fault) for fault in sim["faults"]) and len(sim["faults"]) >= 1
    assert chaos["faults"] == [{"at": 12.5, "kind": "kill", "target": "worker-1", "hold_s": 0.0, "detail": "", "skew_s": 0.0,
                                "attempt_id": None, "detect_s": None, "recover_s": None}]  # fmt: skip
    assert chaos["tasks"] == 9 and chaos["subject"]["task_prefix"] == "run-1-" and chaos["replay"].startswith("shiftchange chaos")
    assert search["faults"] == [] and search["replay"].startswith("shiftchange explore --workers 1 ")
    assert sim["replay"].startswith("shiftchange sim run --scenario mixed --seed 1 --tasks 20")


def test_a_searchs_replay_searches_the_same_way_again(capsys):
    """Goal: a search's `replay` carries its bounds and its reduction, so running it gives the same search, stopped alike."""
    from shiftchange.cli.main import main

    record = to_record(explore(ExploreConfig(crashes=1, pauses=1), states_max=20, por=True)).to_json()
    assert record["replay"].endswith(" --states 20 --por")
    assert main([*shlex.split(record["replay"])[1:], "--json"]) == 3
    again = json.loads(capsys.readouterr().out)
    assert again["search"]["stopped_by"] == record["search"]["stopped_by"] == "states" and again["search"]["por"] is True
    assert again["replay"] == record["replay"]


def test_an_unknown_verdict_is_not_ok_in_the_record():
    """Goal: `ok` is true only for a verdict that held; unknown and violated are both false, told apart by `status`."""
    judged = invariants_json(
        {"a": Verdict("a", "ok", 0, ()), "b": Verdict("b", "unknown", 0, ("why",)), "c": Verdict("c", VIOLATED, 2, ("x",))}
    )
    assert [(found["ok"], found["status"]) for found in judged.values()] == [(True, "ok"), (False, "unknown"), (False, "violated")]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.update(schema_version=1), "schema version 4, not 1"),
        (lambda r: r.pop("subject"), "has no subject"),
        (lambda r: r.update(driver="jepsen"), "not 'jepsen'"),
        (lambda r: r["invariants"].update(single_owner={"status": "ok"}), "invariants are malformed"),
        (lambda r: r["invariants"]["single_owner"].update(status="fine"), "is 'fine', not one of ok, violated, unknown"),
    ],
)
def test_a_record_of_another_shape_is_refused_with_why(change, message):
    record = _chaos()
    change(record)
    with pytest.raises(RunRecordError, match=message):
        from_json(record)


def test_a_verdict_filed_under_another_name_is_refused():
    with pytest.raises(RunRecordError, match="not that invariant's Verdict"):
        Run("sim", True, {}, {}, {"single_owner": Verdict("fenced_writes", "ok", 0, ())}, {}, "shiftchange sim run")
