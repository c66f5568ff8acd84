"""`shiftchange.lab.tune`: the lease rule's arithmetic, how it moves with loss and target, its plans, bad input, and the
confirmation in simulation (confirmed, not confirmed, and the same answer on every executor)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from shiftchange.core import InputError
from shiftchange.lab import lease_model, tune
from shiftchange.lab.stats import binomial_interval
from shiftchange.lab.tune import (
    FLIGHT_S,
    MARGIN_S,
    at_risk_per_lease,
    false_expiries_per_lease,
    lease_rule,
    lease_ttl_for,
    leases_to_confirm,
    leases_to_refute,
    tune_lease,
    window_expiry_probability,
)

_DRAWS = random.Random(7)
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "lease-tuning.py"
HOLDS_S = tuple(20.0 + _DRAWS.expovariate(1 / 30) + _DRAWS.expovariate(1 / 30) for _ in range(400))
"""Synthetic holds: about what the baseline gives (two exponential 30 s tool calls, and 20 s of the rest of an Attempt)."""
TINY = {"tool_call_s": 30.0, "renewal_loss": 0.1, "heartbeat_s": 15.0, "tasks": 60, "seeds": [0, 1], "jobs": 1}
"""Two runs of sixty tasks per TTL: about 150 leases each, under a second in all."""


def notebook_rate(ttl_s: float, heartbeat_s: float, loss: float, holds_s) -> float:
    """The notebook's closed form as it wrote it before the rule moved: p^floor(TTL / I) times the mean at-risk windows."""
    at_risk = [(hold_s >= ttl_s) + (1 - loss) * max(0, math.floor((hold_s - ttl_s) / heartbeat_s)) for hold_s in holds_s]
    return loss ** math.floor(ttl_s / heartbeat_s) * sum(at_risk) / len(at_risk)


@pytest.mark.parametrize(("ttl_s", "heartbeat_s", "loss"), [(20.0, 15.0, 0.1), (65.0, 15.0, 0.1), (50.0, 15.0, 0.3), (35.0, 10.0, 0.2)])
def test_the_closed_form_is_the_notebooks(ttl_s, heartbeat_s, loss):
    """Off the knife edge, p^k A(TTL) is the notebook's formula, point by point, and the rule's rate is that formula at its TTL."""
    assert false_expiries_per_lease(ttl_s, heartbeat_s, loss, HOLDS_S) == pytest.approx(notebook_rate(ttl_s, heartbeat_s, loss, HOLDS_S))
    assert loss ** math.floor(ttl_s / heartbeat_s) * at_risk_per_lease(ttl_s, heartbeat_s, loss, HOLDS_S) == pytest.approx(
        notebook_rate(ttl_s, heartbeat_s, loss, HOLDS_S)
    )
    target = notebook_rate(ttl_s, heartbeat_s, loss, HOLDS_S) * 1.0001
    chosen_s, renewals, rate = lease_ttl_for(target, loss, heartbeat_s, HOLDS_S)
    assert (chosen_s - MARGIN_S) % heartbeat_s == 0 and renewals == (chosen_s - MARGIN_S) / heartbeat_s
    assert rate == pytest.approx(notebook_rate(chosen_s, heartbeat_s, loss, HOLDS_S)) and rate <= target
    shorter_s = chosen_s - heartbeat_s
    assert renewals == 1 or notebook_rate(shorter_s, heartbeat_s, loss, HOLDS_S) > target, "the rule's TTL is not the shortest"


def test_the_knife_edge_loses_one_renewal_in_the_first_window_and_half_of_one_later():
    """TTL = nI: p^(n-1) in the claim's window, p^(n-1) (1 + p) / 2 in a renewal's; anywhere else p^floor(TTL / I)."""
    assert window_expiry_probability(45.0, 15.0, 0.3, first_window=True) == pytest.approx(0.3**2)
    assert window_expiry_probability(45.0, 15.0, 0.3, first_window=False) == pytest.approx(0.3**2 * 1.3 / 2)
    assert window_expiry_probability(50.0, 15.0, 0.3, first_window=True) == pytest.approx(0.3**3)
    assert false_expiries_per_lease(60.0, 15.0, 0.1, HOLDS_S) > false_expiries_per_lease(65.0, 15.0, 0.1, HOLDS_S)


def test_the_rule_lengthens_with_loss_and_shortens_with_a_looser_target():
    """More loss never shortens the TTL the rule picks; a looser target never lengthens it; and each step is one heartbeat."""
    losses = [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7]
    by_loss = [lease_rule(1.0, loss, HOLDS_S, heartbeat_s=15.0).lease_ttl_s for loss in losses]
    assert by_loss == sorted(by_loss) and by_loss[0] == 15.0 + MARGIN_S and by_loss[-1] > by_loss[3]
    targets = [0.01, 0.1, 1.0, 10.0, 100.0, 500.0]
    by_target = [lease_rule(target, 0.1, HOLDS_S, heartbeat_s=15.0).lease_ttl_s for target in targets]
    assert by_target == sorted(by_target, reverse=True) and by_target[0] > by_target[-1]
    assert all((ttl_s - MARGIN_S) % 15.0 == 0 for ttl_s in by_loss + by_target)


def test_with_a_detection_bound_the_rule_takes_the_longest_heartbeat_that_meets_it():
    """The chosen heartbeat's TTL is detected within the bound in the worst case, and one second longer would not be."""
    reap_s = 5.0
    rule = lease_rule(1.0, 0.1, HOLDS_S, detect_max_s=120.0, reap_interval_s=reap_s)
    assert rule.detect_feasible and rule.detect_bound_s == rule.lease_ttl_s + reap_s + FLIGHT_S <= 120.0
    longer = lease_rule(1.0, 0.1, HOLDS_S, heartbeat_s=rule.heartbeat_interval_s + 1, reap_interval_s=reap_s)
    assert longer.detect_bound_s > 120.0
    tight = lease_rule(0.001, 0.5, HOLDS_S, detect_max_s=30.0, reap_interval_s=reap_s)
    assert not tight.detect_feasible and "none meets" in tight.heartbeat_rule


def test_plans_need_the_fewest_leases_whose_bound_reaches_the_target():
    """With no event the plan is the smallest n whose exact upper bound is at or below the target; a rate at or above it, none."""
    needed = leases_to_confirm(0.0, 0.001, 0.95)
    assert binomial_interval(0, needed, 0.95)[1] <= 0.001 < binomial_interval(0, needed - 1, 0.95)[1]
    assert leases_to_confirm(0.0002, 0.001, 0.95) > needed
    assert leases_to_confirm(0.001, 0.001, 0.95) is None and leases_to_refute(0.001, 0.001, 0.95) is None
    assert leases_to_refute(0.01, 0.001, 0.95) < leases_to_refute(0.003, 0.001, 0.95)
    assert leases_to_confirm(0.000999, 0.001, 0.95, leases_max=100_000) is None


BAD = [
    ({"tool_call_s": 0}, "tool-call mean"),
    ({"tool_call_s": math.nan}, "tool-call mean"),
    ({"tool_call_s": "30"}, "tool-call mean"),
    ({"renewal_loss": 1.0}, "renewal loss"),
    ({"renewal_loss": -0.1}, "renewal loss"),
    ({"target_per_1000_leases": 0}, "target"),
    ({"target_per_1000_leases": 1000}, "target"),
    ({"confidence": 1.0}, "confidence"),
    ({"heartbeat_s": 0}, "heartbeat"),
    ({"detect_max_s": 10.0}, "no lease is detected within 10 s"),
    ({"detect_max_s": 25.0, "heartbeat_s": 15.0}, "a 15 s heartbeat"),
    ({"tool_calls": 0}, "tool calls"),
    ({"tasks": 2.5}, "tasks"),
    ({"jobs": 0}, "jobs"),
    ({"executor": "threads"}, "processes, dask"),
    ({"seeds": []}, "at least one seed"),
    ({"seeds": [1, 1]}, "seed 1 is given twice"),
    ({"seeds": [-1]}, "not negative"),
]


@pytest.mark.parametrize(("change", "says"), BAD)
def test_bad_input_is_one_line_before_anything_runs(monkeypatch, change, says):
    """Each bad argument raises InputError naming it, in one line, and no run is played or sweep started."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("a run was started for bad input")

    monkeypatch.setattr(lease_model, "play", refuse)  # the hold times are measured there
    monkeypatch.setattr(tune, "sweep_rows", refuse)
    arguments = {"tool_call_s": 30.0, "renewal_loss": 0.1, "target_per_1000_leases": 1.0, **change}
    with pytest.raises(InputError) as raised:
        tune_lease(**arguments)
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_a_loose_target_is_confirmed_with_every_run_behind_it():
    """At 30 per 1,000 two small runs per TTL suffice for the rule's TTL; too few to show the shorter one misses, which is said."""
    result = tune_lease(target_per_1000_leases=30.0, **TINY)
    best, shorter = result.checks
    assert (result.lease_ttl_s, result.heartbeat_interval_s, result.renewals_per_window) == (50.0, 15.0, 3)
    assert result.confirmed and result.false_expiry_target_met and result.invariants_held and result.leases_needed is None
    assert best.interval_high_per_1000_leases <= 30.0 < shorter.closed_form_per_1000_leases
    assert shorter.interval_low_per_1000_leases <= 30.0 and any("not shown to miss the target" in note for note in result.notes)
    low, high = binomial_interval(best.false_expiries, best.leases, 0.95)
    assert (best.interval_low_per_1000_leases, best.interval_high_per_1000_leases) == (1000 * low, 1000 * high)
    assert shorter.lease_ttl_s == 35.0 and best.closed_form_per_1000_leases == result.closed_form_per_1000_leases
    assert len(best.replays) == 2 and all("--set core.lease_ttl_s=50.0" in command for command in best.replays)
    assert all("--fault 'crash busy" in command for command in best.replays) and best.crashes_detected == 2
    assert best.detect_s_max <= best.detect_bound_s == 56.0 and result.detect_target_met is None
    assert result.answer.startswith("lease TTL 50 s, heartbeat 15 s (rule: the lease-tuning closed form")


def test_a_target_the_runs_cannot_reach_is_reported_with_the_leases_it_would_take():
    """At 20 per 1,000 the same runs bound the rate only below 24.1: not confirmed, and the plan says how many leases would do."""
    result = tune_lease(target_per_1000_leases=20.0, **TINY)
    best = result.checks[0]
    assert not result.confirmed and not result.false_expiry_target_met and result.lease_ttl_s == 50.0
    assert best.false_expiries == 0 and best.interval_high_per_1000_leases > 20.0
    assert result.leases_needed > best.leases and result.leases_needed >= leases_to_confirm(0.0, 0.02, 0.95)
    assert any(f"takes about {result.leases_needed:,} leases" in note for note in result.notes)


def test_a_detection_bound_is_judged_on_the_measured_crashes_and_the_worst_case():
    """A bound above the TTL's worst case is met; one between the measured detections and the worst case is not."""
    met = tune_lease(target_per_1000_leases=30.0, detect_max_s=60.0, **TINY)
    assert met.detect_target_met and met.confirmed and met.detect_bound_s == 56.0
    missed = tune_lease(target_per_1000_leases=30.0, detect_max_s=55.0, **TINY)
    assert missed.checks[0].detect_s_max <= 55.0 and missed.detect_target_met is False and not missed.confirmed


@pytest.mark.heavy
def test_processes_and_one_process_give_the_same_answer_and_runs():
    """Rows depend on their run alone, so two local processes give a result equal, field by field, to one process's."""
    here = tune_lease(target_per_1000_leases=30.0, **TINY)
    pooled = tune_lease(target_per_1000_leases=30.0, **{**TINY, "jobs": 2})
    assert pooled == here


@pytest.mark.heavy
def test_a_dask_cluster_gives_the_same_answer_and_runs():
    """And so does a local Dask cluster of two workers."""
    pytest.importorskip("distributed")
    here = tune_lease(target_per_1000_leases=30.0, **{**TINY, "seeds": [0]})
    dask = tune_lease(target_per_1000_leases=30.0, **{**TINY, "seeds": [0], "jobs": 2, "executor": "dask"})
    assert dask == here


def test_the_notebook_takes_its_rule_from_here():
    """The rule is written once: the lease-tuning notebook imports it instead of defining its own."""
    source = NOTEBOOK.read_text()
    assert "from shiftchange.lab.tune import" in source
    for name in ("lease_ttl_for", "at_risk_per_lease", "window_expiry_probability"):
        assert f"def {name}(" not in source, name
