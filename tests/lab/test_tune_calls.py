"""`tune_calls` and `shiftchange sim tune calls`: how a candidate is judged, how the answer is chosen, and small real runs.

The choice rule is tested on hand-built maps (rows as a map's jobs make them, cells from `cells_of`): `_judge` on one
candidate, and `tune_calls` with the map it would play replaced by one built here, so every ranking is exact. The
real runs are small: two candidates, one trigger, one duration, one seed.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from shiftchange.cli.main import main
from shiftchange.cli.tune import render_calls
from shiftchange.core import InputError
from shiftchange.lab import tune_calls as tune_calls_module
from shiftchange.lab.phase import METASTABLE, OVERLOADED, RECOVERS, UNJUDGED, PhaseMap
from shiftchange.lab.tune_calls import CallTuning, Candidate, _judge, tune_calls

TRIGGER = "slowdown model_provider at=400 for=60 factor=4"
AXES = ("trigger.for_s",)
COOL_DOWN = "reliability.breaker.cool_down_s"


def row(
    discipline: str,
    status: str,
    recovery_s: float | None = None,
    for_s: float = 20.0,
    seed: int = 0,
    spend: float = 1.0,
    escalated: int = 0,
    ok: bool = True,
    false_expiries: int = 0,
) -> dict[str, Any]:
    """One job's row, with what `cells_of`, `_judge` and the replays read."""
    if status == RECOVERS and recovery_s is None:
        recovery_s = 60.0
    return {
        "discipline": discipline,
        "trigger": TRIGGER,
        "seed": seed,
        "trigger.for_s": for_s,
        "status": status,
        "why": "",
        "recovery_s": recovery_s if status == RECOVERS else None,
        "late_ratio": 1.0 if status == RECOVERS else 0.1 if status == METASTABLE else None,
        "retry_share": 0.1,
        "abandoned_share": 0.0,
        "control.escalated": 0,
        "triggered.escalated": escalated,
        "control.spend_usd": spend,
        "triggered.spend_usd": spend,
        "control.false_expiries": 0,
        "triggered.false_expiries": false_expiries,
        "control.invariants_ok": True,
        "triggered.invariants_ok": ok,
        "control.replay": f"shiftchange sim run --seed {seed} # {discipline} control for={for_s:g}",
        "triggered.replay": f"shiftchange sim run --seed {seed} # {discipline} triggered for={for_s:g}",
    }


def judged(rows: list[dict[str, Any]], recovery_max_s: float = 480.0, name: str = "c") -> Candidate:
    return _judge(name, ((COOL_DOWN, 10.0),), PhaseMap(AXES, rows), recovery_max_s)


# ------------------------------------------------------------------ one candidate


def test_a_candidate_that_recovers_everywhere_within_the_bound_meets_it():
    candidate = judged([row("c", RECOVERS, 120.0, for_s=20.0), row("c", RECOVERS, 300.0, for_s=120.0)])
    assert candidate.meets and candidate.why == ""
    assert (candidate.cells, candidate.cells_stable, candidate.cells_recovered) == (2, 2, 2)
    assert candidate.recovery_s_max == 300.0
    assert candidate.settings == ((COOL_DOWN, 10.0),) and candidate.invariants_ok


def test_a_metastable_cell_whose_control_held_up_does_not_meet():
    candidate = judged([row("c", RECOVERS, 120.0, for_s=20.0), row("c", METASTABLE, for_s=120.0)])
    assert not candidate.meets
    assert candidate.why == "1 of 2 cells do not recover"
    assert (candidate.cells_stable, candidate.cells_recovered) == (2, 1)
    assert candidate.recovery_s_max == 120.0  # the recovered cell's, still reported


def test_one_metastable_seed_makes_the_cell_and_the_candidate_fail():
    rows = [row("c", RECOVERS, 100.0, seed=0), row("c", METASTABLE, seed=1), row("c", RECOVERS, 90.0, seed=2)]
    candidate = judged(rows)
    assert not candidate.meets and "1 of 1 cells do not recover" in candidate.why


def test_a_slowest_recovery_past_the_bound_does_not_meet_and_says_so():
    rows = [row("c", RECOVERS, 100.0, for_s=20.0), row("c", RECOVERS, 500.0, for_s=120.0)]
    slow = judged(rows, recovery_max_s=480.0)
    assert not slow.meets
    assert slow.why == "slowest recovery 500 s > 480 s"
    assert slow.recovery_s_max == 500.0 and slow.cells_recovered == 2
    assert judged(rows, recovery_max_s=500.0).meets  # the bound itself is within it


def test_the_slowest_recovery_is_over_seeds_too():
    rows = [row("c", RECOVERS, 100.0, seed=0), row("c", RECOVERS, 481.0, seed=1)]
    candidate = judged(rows, recovery_max_s=480.0)
    assert candidate.recovery_s_max == 481.0 and not candidate.meets and "481 s > 480 s" in candidate.why


def test_overloaded_cells_are_not_judged():
    rows = [
        row("c", RECOVERS, 200.0, for_s=20.0),
        # a cell whose controls fell in two seeds of three is overloaded: its metastable seed says nothing
        row("c", OVERLOADED, for_s=120.0, seed=0),
        row("c", OVERLOADED, for_s=120.0, seed=1),
        row("c", METASTABLE, for_s=120.0, seed=2),
    ]
    candidate = judged(rows)
    assert candidate.meets, candidate.why
    assert (candidate.cells, candidate.cells_stable, candidate.cells_recovered) == (2, 1, 1)
    assert candidate.recovery_s_max == 200.0


def test_a_candidate_whose_every_control_fell_does_not_meet():
    candidate = judged([row("c", OVERLOADED, for_s=20.0), row("c", OVERLOADED, for_s=120.0)])
    assert not candidate.meets
    assert "overloaded without a trigger" in candidate.why
    assert (candidate.cells_stable, candidate.cells_recovered, candidate.recovery_s_max) == (0, 0, None)


def test_an_unjudged_cell_is_not_a_recovery():
    candidate = judged([row("c", RECOVERS, 100.0, for_s=20.0), row("c", UNJUDGED, for_s=120.0)])
    assert not candidate.meets and "1 of 2 cells do not recover" in candidate.why


def test_a_violated_invariant_fails_a_candidate_that_recovers():
    candidate = judged([row("c", RECOVERS, 100.0, for_s=20.0), row("c", RECOVERS, 100.0, for_s=120.0, ok=False)])
    assert not candidate.meets and not candidate.invariants_ok
    assert candidate.why == "an invariant was violated"


def test_only_the_named_candidates_rows_are_counted_and_spend_is_a_mean_per_triggered_run():
    rows = [
        row("c", RECOVERS, 100.0, spend=2.0, escalated=1, false_expiries=1, seed=0),
        row("c", RECOVERS, 100.0, spend=4.0, escalated=2, false_expiries=2, seed=1),
        row("other", METASTABLE, spend=100.0, escalated=50),
    ]
    candidate = judged(rows)
    assert candidate.meets and candidate.cells == 1
    assert candidate.spend_usd_mean == 3.0 and candidate.escalated_mean == 1.5 and candidate.false_expiries == 3


def test_every_reason_is_given_at_once():
    rows = [row("c", RECOVERS, 600.0, for_s=20.0, ok=False), row("c", METASTABLE, for_s=120.0)]
    why = judged(rows).why.split("; ")
    assert why == ["1 of 2 cells do not recover", "slowest recovery 600 s > 480 s", "an invariant was violated"]


# ------------------------------------------------------------------ choosing among candidates


class FakePhase:
    """Stands in for `phase`: records what `tune_calls` asked for and hands back a map built from `plan`.

    `plan[i]` is the rows of the i-th candidate (in grid order), as (status, recovery_s, spend, escalated) per cell.
    """

    def __init__(self, plan: list[list[tuple[str, float | None, float, int]]]) -> None:
        self.plan = plan
        self.calls: list[tuple[tuple, dict]] = []

    def __call__(self, axes, triggers, disciplines, seeds, scenario, **options) -> PhaseMap:
        self.calls.append(((axes, triggers, disciplines, seeds, scenario), options))
        assert len(disciplines) == len(self.plan)
        rows = []
        for name, cells in zip(disciplines, self.plan, strict=True):
            for for_s, (status, recovery_s, spend, escalated) in zip(axes["trigger.for_s"], cells, strict=True):
                rows.append(row(name, status, recovery_s, for_s=for_s, spend=spend, escalated=escalated))
        return PhaseMap(tuple(axes), rows)


def choose(monkeypatch: pytest.MonkeyPatch, plan: list, values: tuple = (10.0, 30.0, 60.0), **options: Any) -> CallTuning:
    fake = FakePhase(plan)
    monkeypatch.setattr(tune_calls_module, "phase", fake)
    arguments = {"triggers": [TRIGGER], "durations_s": [20.0, 120.0], "grid": {COOL_DOWN: values}, "seeds": [0], "arrivals_s": 1500.0}
    result = tune_calls(**{**arguments, **options})
    assert len(fake.calls) == 1
    return result


def test_every_candidate_is_played_as_a_discipline_over_the_durations(monkeypatch):
    fake = FakePhase([[(RECOVERS, 60.0, 1.0, 0)] * 2] * 4)
    monkeypatch.setattr(tune_calls_module, "phase", fake)
    grid = {COOL_DOWN: (10.0, 30.0), "reliability.concurrency.decrease_factor": (0.5, 0.9)}
    result = tune_calls("retry-storm", {"workload.arrival_rate_per_s": 0.05}, [TRIGGER], [20.0, 120.0], 480.0, grid, [3], 1500.0, jobs=1)
    (axes, triggers, disciplines, seeds, scenario), options = fake.calls[0]
    assert axes == {"trigger.for_s": [20.0, 120.0]} and triggers == [TRIGGER] and list(seeds) == [3] and scenario == "retry-storm"
    assert disciplines == {
        "cool_down_s=10.0,decrease_factor=0.5": {COOL_DOWN: 10.0, "reliability.concurrency.decrease_factor": 0.5},
        "cool_down_s=10.0,decrease_factor=0.9": {COOL_DOWN: 10.0, "reliability.concurrency.decrease_factor": 0.9},
        "cool_down_s=30.0,decrease_factor=0.5": {COOL_DOWN: 30.0, "reliability.concurrency.decrease_factor": 0.5},
        "cool_down_s=30.0,decrease_factor=0.9": {COOL_DOWN: 30.0, "reliability.concurrency.decrease_factor": 0.9},
    }
    assert options["overrides"] == [("workload.arrival_rate_per_s", 0.05)] and options["arrivals_s"] == 1500.0 and options["jobs"] == 1
    assert [candidate.name for candidate in result.candidates] == list(disciplines)


def test_the_fastest_worst_recovery_wins_whatever_it_spends(monkeypatch):
    result = choose(
        monkeypatch,
        [
            [(RECOVERS, 100.0, 1.0, 0), (RECOVERS, 200.0, 1.0, 0)],  # worst 200 s, cheap
            [(RECOVERS, 150.0, 9.0, 0), (RECOVERS, 150.0, 9.0, 0)],  # worst 150 s, dear: the answer
            [(RECOVERS, 30.0, 0.5, 0), (METASTABLE, None, 0.5, 0)],  # fastest and cheapest, but one cell stays down
        ],
    )
    assert [candidate.meets for candidate in result.candidates] == [True, True, False]
    assert result.answer is result.candidates[1]
    assert result.answer.settings == ((COOL_DOWN, 30.0),) and result.answer.recovery_s_max == 150.0
    assert result.recovery_max_s == 480.0
    # the answer's slowest row's two arms
    assert result.replays == (
        "shiftchange sim run --seed 0 # cool_down_s=30.0 control for=20",
        "shiftchange sim run --seed 0 # cool_down_s=30.0 triggered for=20",
    )
    words = shlex.split(result.command)
    assert words[:3] == ["shiftchange", "sim", "phase"]
    assert words[words.index("--set") :] == ["--set", f"{COOL_DOWN}=30.0"]
    assert "--axis" in words and words[words.index("--axis") + 1] == "trigger.for_s=20,120"


def test_a_tie_on_recovery_goes_to_the_lower_spend_then_to_fewer_escalations(monkeypatch):
    cheaper = choose(
        monkeypatch,
        [
            [(RECOVERS, 100.0, 3.0, 0), (RECOVERS, 120.0, 3.0, 0)],
            [(RECOVERS, 120.0, 2.0, 5), (RECOVERS, 60.0, 2.0, 5)],  # same worst recovery, less spend: the answer
            [(RECOVERS, 110.0, 2.5, 0), (RECOVERS, 120.0, 2.5, 0)],
        ],
    )
    assert cheaper.answer is cheaper.candidates[1]
    fewer = choose(
        monkeypatch,
        [
            [(RECOVERS, 120.0, 2.0, 3), (RECOVERS, 120.0, 2.0, 3)],
            [(RECOVERS, 120.0, 2.0, 4), (RECOVERS, 120.0, 2.0, 4)],
            [(RECOVERS, 120.0, 2.0, 1), (RECOVERS, 120.0, 2.0, 1)],  # same recovery and spend, fewest escalated
        ],
    )
    assert fewer.answer is fewer.candidates[2]


def test_a_candidate_past_the_bound_loses_however_little_it_spends(monkeypatch):
    result = choose(
        monkeypatch,
        [[(RECOVERS, 400.0, 5.0, 0)] * 2, [(RECOVERS, 481.0, 1.0, 0)] * 2, [(OVERLOADED, None, 0.1, 0)] * 2],
    )
    assert result.answer is result.candidates[0]
    assert result.candidates[1].why == "slowest recovery 481 s > 480 s"
    assert "overloaded" in result.candidates[2].why


def test_no_candidate_meeting_the_bound_gives_no_answer(monkeypatch):
    result = choose(
        monkeypatch,
        [[(METASTABLE, None, 1.0, 0)] * 2, [(RECOVERS, 900.0, 1.0, 0)] * 2, [(OVERLOADED, None, 1.0, 0)] * 2],
    )
    assert result.answer is None and result.replays == ()
    assert not any(candidate.meets for candidate in result.candidates)
    assert all(candidate.why for candidate in result.candidates)
    assert "--set" not in shlex.split(result.command)  # no answer's settings to play
    text = render_calls(result)
    assert text.startswith("no candidate recovers everywhere within 480 s")
    assert "<- the answer" not in text and "its slowest cell:" not in text
    assert "2 of 2 cells do not recover" in text and "slowest recovery 900 s > 480 s" in text


def test_the_report_names_the_answer_and_its_map_and_replays(monkeypatch):
    result = choose(monkeypatch, [[(RECOVERS, 100.0, 1.0, 0)] * 2, [(RECOVERS, 50.0, 2.0, 0)] * 2], values=(10.0, 30.0))
    lines = render_calls(result).splitlines()
    assert lines[0] == (
        f"{COOL_DOWN}=30: recovers in all 2 cells whose control holds up, slowest after 50 s (bound 480 s), $2.00 per triggered run"
    )
    assert [line.split()[0] for line in lines if line.startswith("cool_down_s=")] == ["cool_down_s=10.0", "cool_down_s=30.0"]
    assert sum(line.endswith("meets <- the answer") for line in lines) == 1
    assert next(line for line in lines if line.endswith("<- the answer")).startswith("cool_down_s=30.0 ")
    assert lines[lines.index("the answer's map again:") + 1] == f"  {result.command}"
    assert lines[-2:] == [f"  control:   {result.replays[0]}", f"  triggered: {result.replays[1]}"]


def test_a_recovered_cell_without_a_measured_recovery_time_does_not_crash_the_report(monkeypatch):
    plan = [[(RECOVERS, 100.0, 1.0, 0)] * 2, [(RECOVERS, 100.0, 1.0, 0)] * 2]
    fake = FakePhase(plan)

    def unmeasured(*arguments, **options):
        played = fake(*arguments, **options)
        for job_row in played.rows:
            if job_row["discipline"] == "cool_down_s=30.0":
                job_row["recovery_s"] = None  # recovered by its late goodput, no settle span found
        return PhaseMap(played.axes, played.rows)

    monkeypatch.setattr(tune_calls_module, "phase", unmeasured)
    result = tune_calls(triggers=[TRIGGER], durations_s=[20.0, 120.0], grid={COOL_DOWN: (10.0, 30.0)}, seeds=[0])
    assert result.answer is not None
    render_calls(result)


# ------------------------------------------------------------------ bad input


@pytest.fixture
def nothing_plays(monkeypatch: pytest.MonkeyPatch) -> None:
    def phase(*_arguments, **_options):
        raise AssertionError("bad input must be refused before the map plays")

    monkeypatch.setattr(tune_calls_module, "phase", phase)


BAD_TUNINGS = [
    ({"recovery_max_s": 0}, "recovery_max_s must be"),
    ({"recovery_max_s": -1.0}, "recovery_max_s must be"),
    ({"recovery_max_s": float("inf")}, "recovery_max_s must be"),
    ({"recovery_max_s": float("nan")}, "recovery_max_s must be"),
    ({"recovery_max_s": True}, "recovery_max_s must be"),
    ({"grid": {}}, "at least one setting"),
    ({"grid": {COOL_DOWN: []}}, f"{COOL_DOWN} needs one or more values"),
    ({"grid": {COOL_DOWN: (10.0,), "reliability.concurrency.decrease_factor": ()}}, "decrease_factor needs one or more values"),
    ({"grid": {COOL_DOWN: "10"}}, "needs one or more values"),
    ({"grid": {COOL_DOWN: 10.0}}, "needs one or more values"),
]


@pytest.mark.parametrize(("change", "words"), BAD_TUNINGS, ids=[str(change) for change, _ in BAD_TUNINGS])
def test_bad_input_raises_input_error_before_anything_plays(change, words, nothing_plays):
    with pytest.raises(InputError, match=words.replace(".", r"\.")):
        tune_calls(**{"triggers": [TRIGGER], "durations_s": [20.0], "seeds": [0], **change})


def test_a_grid_value_given_twice_is_bad_input(monkeypatch):
    monkeypatch.setattr(tune_calls_module, "phase", FakePhase([[(RECOVERS, 60.0, 1.0, 0)]]))
    with pytest.raises(InputError):
        tune_calls(triggers=[TRIGGER], durations_s=[20.0], grid={COOL_DOWN: ("10", "10")}, seeds=[0])


def test_a_bad_map_is_refused_by_the_real_map_before_it_plays():
    with pytest.raises(InputError, match="for_s must be a positive finite number"):
        tune_calls(triggers=[TRIGGER], durations_s=[-5.0], grid={COOL_DOWN: (10.0,)}, seeds=[0], jobs=1)
    with pytest.raises(InputError, match="needs a trigger"):
        tune_calls(triggers=[], durations_s=[20.0], grid={COOL_DOWN: (10.0,)}, seeds=[0], jobs=1)


# ------------------------------------------------------------------ real runs


@pytest.fixture(scope="module")
def tuned() -> CallTuning:
    """Two candidates, one trigger, one duration, one seed: two jobs, four runs."""
    return tune_calls(triggers=[TRIGGER], durations_s=[20.0], grid={COOL_DOWN: (10.0, 30.0)}, seeds=[0], arrivals_s=1500.0, jobs=1)


def test_a_small_real_tuning_plays_each_candidate_and_names_its_map_and_replays(tuned):
    assert isinstance(tuned, CallTuning)
    assert [candidate.name for candidate in tuned.candidates] == ["cool_down_s=10.0", "cool_down_s=30.0"]
    assert [row["discipline"] for row in tuned.map.rows] == ["cool_down_s=10.0", "cool_down_s=30.0"]
    for candidate in tuned.candidates:
        assert candidate.cells == 1 and candidate.invariants_ok
        assert candidate.meets == (candidate.why == "")
    assert tuned.answer is not None and tuned.answer in tuned.candidates and tuned.answer.meets
    words = shlex.split(tuned.command)
    assert tuned.command.startswith("shiftchange sim phase ")
    assert words[words.index("--seeds") + 1] == "0" and words[words.index("--arrivals-s") + 1] == "1500"
    assert words[words.index("--trigger") + 1] == TRIGGER
    assert words[words.index("--set") :] == ["--set", f"{COOL_DOWN}={tuned.answer.settings[0][1]}"]
    assert len(tuned.replays) == 2
    for replay in tuned.replays:
        assert shlex.split(replay)[:3] == ["shiftchange", "sim", "run"]
    assert "--fault" in shlex.split(tuned.replays[1]) and "--fault" not in shlex.split(tuned.replays[0])


def test_the_answers_command_plays_the_answers_cells_again(tuned, capsys):
    words = shlex.split(tuned.command)
    assert main([*words[1:], "--jobs", "1", "--json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)
    answered = next(cell for cell in tuned.map.cells if cell["discipline"] == tuned.answer.name)
    assert cell["discipline"] == "defaults"  # the answer's settings come as --set
    for column in ("status", "recovery_s_max", "late_ratio_min", "retry_share_mean", "escalated_triggered_mean"):
        assert cell[column] == answered[column], column


def test_the_answers_triggered_replay_is_its_slowest_run(tuned, capsys):
    slowest = next(row for row in tuned.map.rows if row["triggered.replay"] == tuned.replays[1])
    assert slowest["discipline"] == tuned.answer.name and slowest["control.replay"] == tuned.replays[0]
    assert main([*shlex.split(tuned.replays[1])[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["subject"]["digest"] == slowest["triggered.digest"]


# ------------------------------------------------------------------ the command


def test_the_command_refuses_durations_that_are_not_numbers(capsys, nothing_plays):
    assert main(["sim", "tune", "calls", "--durations-s", "abc"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "shiftchange: --durations-s takes seconds split at commas, not 'abc'\n"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--durations-s", "20,,60"], "--durations-s takes seconds"),
        (["--recovery-max-s", "0"], "recovery_max_s must be"),
        (["--recovery-max-s", "soon"], "must be a number, not 'soon'"),
        (["--candidate", f"{COOL_DOWN}=10,"], "has an empty value"),
        (["--seeds", "x"], "seeds are a range"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(argv, words, capsys, nothing_plays):
    assert main(["sim", "tune", "calls", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and words in captured.err
    assert "Traceback" not in captured.err


def test_the_command_answers_a_tiny_question(capsys):
    """Two candidates over the default triggers (a hang outage and a slowdown) of 20 s, one seed: four jobs, eight runs."""
    argv = ["sim", "tune", "calls", "--seeds", "0", "--durations-s", "20", "--candidate", f"{COOL_DOWN}=10,30", "--jobs", "1"]
    status = main(argv)
    captured = capsys.readouterr()
    assert (status, captured.err) == (0, "")
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"{COOL_DOWN}=") and "cells whose control holds up" in lines[0] and "(bound 480 s)" in lines[0]
    candidates = [line for line in lines if line.startswith("cool_down_s=")]
    assert [line.split()[0] for line in candidates] == ["cool_down_s=10", "cool_down_s=30"]
    assert sum(line.endswith("<- the answer") for line in candidates) == 1
    command = shlex.split(lines[lines.index("the answer's map again:") + 1])
    assert command[:3] == ["shiftchange", "sim", "phase"]
    assert [command[index + 1] for index, word in enumerate(command) if word == "--trigger"] == [
        "outage model_provider at=400 for=60 mode=hang",
        "slowdown model_provider at=400 for=60 factor=4",
    ]
    assert "trigger.for_s=20" in command
    control, triggered = lines[-2:]
    assert control.startswith("  control:   shiftchange sim run ") and triggered.startswith("  triggered: shiftchange sim run ")
