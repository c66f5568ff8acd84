"""Recoverability maps: how one seed's two arms are judged, how a cell's seeds make its status, planning, and executors."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest

from shiftchange.cli.main import main
from shiftchange.core import InputError
from shiftchange.lab.phase import METASTABLE, OVERLOADED, RECOVERS, UNJUDGED, Judging, build_jobs, cells_of, judge, phase
from shiftchange.sim.config import FaultSpec

TRIGGER = FaultSpec.parse("outage model_provider at=600 for=60 mode=hang")
JUDGING = Judging(baseline_s=300.0, bound_s=240.0, goodput_fraction=0.8, settle_windows=2, late_windows_min=3)
"""Late span from 600 + 60 + 240 = 900 s to the last arrival."""


def outcome(goodput: dict[int, float], arrivals_until_s: float = 1800.0) -> SimpleNamespace:
    """A run's series alone (what the judge reads): one-minute windows, `goodput[minute]` calls answered per second."""
    rows = []
    for minute in range(int(arrivals_until_s // 60) + 5):
        t_s = 60.0 * minute
        answered = goodput.get(minute, goodput.get(-1, 1.0)) * 60
        rows.append(
            {
                "t_s": t_s,
                "window_s": 60.0,
                "arrivals": 1 if t_s < arrivals_until_s else 0,
                "model_provider.answered": answered,
                "model_provider.offered": 80,
                "model_provider.retried": 40,
                "model_provider.timed_out": 20,
                "model_provider.working": 10,
                "model_provider.abandoned": 5,
                "queue_depth": 3,
            }
        )
    return SimpleNamespace(series=rows, config=SimpleNamespace(workload=SimpleNamespace(rate_per_s=lambda _t_s: 1.0)))


STEADY = outcome({-1: 1.0})
COLLAPSED_AFTER_TRIGGER = outcome({**{m: 1.0 for m in range(10)}, -1: 0.05})
BACK_AT_MINUTE_13 = outcome({**{m: 1.0 for m in range(10)}, 10: 0.0, 11: 0.1, 12: 0.2, -1: 1.0})


def test_a_triggered_run_that_stays_down_while_its_control_holds_is_metastable():
    verdict = judge(STEADY, COLLAPSED_AFTER_TRIGGER, TRIGGER, JUDGING)
    assert verdict["status"] == METASTABLE
    assert verdict["late_ratio"] == pytest.approx(0.05)
    assert verdict["recovery_s"] is None
    assert verdict["retry_share"] == 0.5 and verdict["abandoned_share"] == 0.5 and verdict["timeout_share"] == 0.25


def test_a_triggered_run_back_at_the_controls_level_recovers_and_says_when():
    verdict = judge(STEADY, BACK_AT_MINUTE_13, TRIGGER, JUDGING)
    assert verdict["status"] == RECOVERS
    assert verdict["late_ratio"] == pytest.approx(1.0)
    # the trigger ended at 660 s; minutes 13 and 14 are the first two in a row at the level: they end at 900 s
    assert verdict["recovery_s"] == 240.0


def test_one_lucky_window_is_not_a_recovery():
    flicker = outcome({**{m: 1.0 for m in range(10)}, 12: 1.0, -1: 0.1})
    verdict = judge(STEADY, flicker, TRIGGER, JUDGING)
    assert verdict["status"] == METASTABLE and verdict["recovery_s"] is None


def test_a_control_that_falls_without_the_trigger_makes_the_cell_overloaded_whatever_the_triggered_run_did():
    verdict = judge(COLLAPSED_AFTER_TRIGGER, STEADY, TRIGGER, JUDGING)
    assert verdict["status"] == OVERLOADED
    assert "without the trigger" in verdict["why"]


def test_the_late_span_is_judged_against_the_control_not_the_baseline():
    """Demand that falls over the run (the control's goodput halves) does not read as metastable when both arms fall alike."""
    halved = outcome({**{m: 1.0 for m in range(10)}, -1: 0.85})
    assert judge(halved, halved, TRIGGER, JUDGING)["status"] == RECOVERS


def test_a_control_whose_demand_steps_down_is_not_overloaded_for_serving_less():
    stepped = outcome({**{m: 1.0 for m in range(10)}, -1: 0.5})
    stepped.config.workload.rate_per_s = lambda t_s: 1.0 if t_s < 700 else 0.5
    assert judge(stepped, stepped, TRIGGER, JUDGING)["status"] == RECOVERS
    assert judge(stepped, outcome({**{m: 1.0 for m in range(10)}, -1: 0.05}), TRIGGER, JUDGING)["status"] == METASTABLE


def test_a_late_span_shorter_than_the_minimum_cannot_be_judged():
    short = outcome({-1: 1.0}, arrivals_until_s=1000.0)
    verdict = judge(short, short, TRIGGER, JUDGING)
    assert verdict["status"] == UNJUDGED and "arrivals_s" in verdict["why"]


def row(status: str, seed: int, **cell) -> dict:
    return {
        "discipline": "defaults",
        "trigger": str(TRIGGER),
        "x": 1,
        "seed": seed,
        "status": status,
        "recovery_s": 120.0 if status == RECOVERS else None,
        "late_ratio": 1.0 if status == RECOVERS else 0.1 if status == METASTABLE else None,
        "retry_share": 0.1,
        "abandoned_share": 0.0,
        "triggered.escalated": 0,
        "control.escalated": 0,
        "control.invariants_ok": True,
        "triggered.invariants_ok": True,
        **cell,
    }


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ((RECOVERS, RECOVERS, RECOVERS), RECOVERS),
        ((RECOVERS, METASTABLE, RECOVERS), METASTABLE),  # one seed that does not come back is enough
        ((RECOVERS, OVERLOADED, RECOVERS), RECOVERS),  # a seed whose control fell says nothing about recovery
        ((OVERLOADED, OVERLOADED, METASTABLE), OVERLOADED),
        ((UNJUDGED, UNJUDGED, RECOVERS), UNJUDGED),
    ],
)
def test_a_cells_status_over_its_seeds(statuses, expected):
    cells = cells_of([row(status, seed) for seed, status in enumerate(statuses)], ["x"])
    assert len(cells) == 1
    assert cells[0]["status"] == expected
    assert cells[0]["recovered"] == statuses.count(RECOVERS) and cells[0]["seeds"] == 3


def test_cells_are_grouped_by_discipline_trigger_and_axis_values_in_first_seen_order():
    rows = [row(RECOVERS, 0, x=2), row(RECOVERS, 0, x=1), row(METASTABLE, 1, x=2), row(RECOVERS, 0, x=1, discipline="none")]
    cells = cells_of(rows, ["x"])
    assert [(cell["discipline"], cell["x"], cell["status"]) for cell in cells] == [
        ("defaults", 2, METASTABLE),
        ("defaults", 1, RECOVERS),
        ("none", 1, RECOVERS),
    ]


BAD_MAPS = [
    ({"axes": {}}, "at least one axis"),
    ({"axes": {"trigger.colour": [1]}}, "trigger axis is one of"),
    ({"axes": {"trigger.for_s": ["long"]}}, "takes float values"),
    ({"axes": {"workload.arrival_rate_per_s": []}}, "one or more values"),
    ({"axes": {"workload.arrival_rate_per_s": [0.1, 0.1]}}, "a value twice"),
    ({"axes": {"workload.arrival_rate_per_s": [-1.0]}}, "cell workload.arrival_rate_per_s=-1.0"),
    ({"axes": {"no.such.path": [1]}}, "no.such.path"),
    ({"triggers": []}, "needs a trigger"),
    ({"triggers": ["crash busy at=10 for=5"]}, "strikes a provider"),
    ({"disciplines": ["reckless"]}, "unknown discipline 'reckless'"),
    ({"seeds": [0, 0]}, "given twice"),
    ({"arrivals_s": 0}, "arrivals_s must be"),
]


@pytest.mark.parametrize(("change", "words"), BAD_MAPS, ids=[words for _, words in BAD_MAPS])
def test_bad_input_is_one_error_before_anything_runs(change, words):
    arguments = {
        "axes": {"workload.arrival_rate_per_s": [0.1]},
        "triggers": [str(TRIGGER)],
        "disciplines": ["defaults"],
        "seeds": [0],
        "scenario": "retry-storm",
        "tasks": None,
        "arrivals_s": 1200.0,
        "overrides": {},
        "judging": None,
    }
    arguments.update(change)
    with pytest.raises(InputError, match=words.replace(".", r"\.").replace("(", r"\(")):
        build_jobs(**arguments)


def test_the_control_has_no_placed_fault_and_the_triggered_run_only_the_cells_trigger():
    jobs = build_jobs({"trigger.for_s": [30, 90]}, [str(TRIGGER)], ["defaults", "none"], [4], "retry-storm", None, 1200.0, {}, None)
    assert [(job.discipline, dict(job.cell)["trigger.for_s"]) for job in jobs] == [
        ("defaults", 30.0),
        ("defaults", 90.0),
        ("none", 30.0),
        ("none", 90.0),
    ]
    assert {job.template for job in jobs} == {TRIGGER}
    for job in jobs:
        assert job.control.nemesis.placed == ()
        assert job.triggered.nemesis.placed == (job.trigger,)
        assert job.trigger.for_s == dict(job.cell)["trigger.for_s"] and job.trigger.mode == "hang"
    assert jobs[2].control.reliability.concurrency is None and jobs[0].control.reliability.concurrency is not None
    assert jobs[0].control.workload.tasks == round(jobs[0].control.workload.arrival_rate_per_s * 1200.0)


SMALL = {
    "axes": {"trigger.for_s": [20.0, 120.0]},
    "triggers": ["slowdown model_provider at=400 for=60 factor=4"],
    "disciplines": ["defaults"],
    "seeds": [0],
    "arrivals_s": 1500.0,
    "judging": Judging(bound_s=300.0),
}
"""Two cells of one seed of the retry-storm world, a few hundred simulated seconds to judge."""


def test_a_small_map_plays_both_arms_and_keeps_every_invariant():
    result = phase(**SMALL, jobs=1)
    assert [row["trigger.for_s"] for row in result.rows] == [20.0, 120.0]
    for job_row in result.rows:
        assert job_row["status"] in (RECOVERS, METASTABLE, OVERLOADED)
        assert job_row["control.invariants_ok"] and job_row["triggered.invariants_ok"]
        assert job_row["control.digest"] != job_row["triggered.digest"]
        assert "--set nemesis.placed=" in job_row["control.replay"]  # the scenario's own trigger is dropped


def test_each_arms_replay_command_plays_that_arm_again(capsys):
    """The control drops the scenario's own placed trigger: its replay must say so, or it would replay the storm."""
    job_row = phase(**{**SMALL, "axes": {"trigger.for_s": [20.0]}}, jobs=1).rows[0]
    for arm in ("control", "triggered"):
        words = shlex.split(job_row[f"{arm}.replay"])
        assert words[:3] == ["shiftchange", "sim", "run"]
        main([*words[1:], "--json"])
        assert json.loads(capsys.readouterr().out)["subject"]["digest"] == job_row[f"{arm}.digest"], arm


@pytest.mark.heavy
def test_rows_are_identical_in_process_on_a_pool_and_on_dask():
    pytest.importorskip("distributed")
    here = phase(**SMALL, jobs=1).rows
    assert phase(**SMALL, jobs=2).rows == here
    assert phase(**SMALL, jobs=2, executor="dask").rows == here
