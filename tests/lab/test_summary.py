"""`shiftchange.lab.summary` and the sweep's plot: groups by swept values, counts pooled over seeds, exact intervals, bad input."""

from __future__ import annotations

import pytest

from shiftchange.core import InputError
from shiftchange.lab.report import plot as plot_module
from shiftchange.lab.report.plot import plot_sweep
from shiftchange.lab.stats import binomial_interval
from shiftchange.lab.summary import MEANS, POOLED_RATES, pooled_rate, summarize, summary
from shiftchange.lab.sweep import sweep_rows
from shiftchange.sim.metrics import Metrics

TTL = "core.lease_ttl_s"


def row(ttl: float, seed: int, leases: int, false_expiries: int, ok: bool = True, **more) -> dict:
    """A hand-built sweep row: the columns summarize reads, every invariant held unless `more` says otherwise."""
    built = {
        "scenario": "baseline",
        "tasks": 10,
        "seed": seed,
        TTL: ttl,
        "tasks_done": 9,
        "leases": leases,
        "lease_windows": 4 * leases,
        "expiries": false_expiries,
        "false_expiries": false_expiries,
        "renewals_sent": 3 * leases,
        "renewals_unanswered": leases // 10,
        "effects": 2 * leases,
        "duplicate_effects": 0,
        "throughput_tasks_per_h": 100.0 + seed,
        "invariant.single_owner": "ok",
        "invariant.no_lost_tasks": "ok",
        "ok": ok,
    }
    built.update(more)
    return built


def test_groups_come_in_the_order_they_first_appear_one_per_swept_value():
    """Rows interleaved 60, 30, 60, 30, 90 give groups 60, 30, 90, each with its own runs."""
    rows = [row(60, 0, 10, 0), row(30, 0, 10, 1), row(60, 1, 10, 0), row(30, 1, 10, 2), row(90, 0, 10, 0)]
    groups = summarize(rows, [TTL])
    assert [(group[TTL], group["runs"]) for group in groups] == [(60, 2), (30, 2), (90, 1)]
    assert [group["sum.false_expiries"] for group in groups] == [0, 3, 0]


def test_two_swept_columns_group_by_their_pair_and_a_string_names_one_column():
    """Groups are the distinct (first, second) pairs; `swept` may be one column's name."""
    rows = [row(30, seed, 10, 0, **{"workers.workers": workers}) for workers in (8, 16) for seed in (0, 1)]
    rows += [row(60, seed, 10, 0, **{"workers.workers": workers}) for workers in (8, 16) for seed in (0, 1)]
    pairs = [(group[TTL], group["workers.workers"], group["runs"]) for group in summarize(rows, [TTL, "workers.workers"])]
    assert pairs == [(30, 8, 2), (30, 16, 2), (60, 8, 2), (60, 16, 2)]
    assert [group["runs"] for group in summarize(rows, TTL)] == [4, 4]


def test_a_value_read_back_as_a_float_is_the_same_group():
    """30 and 30.0 (a resumed CSV gives either) are one group."""
    assert [group["runs"] for group in summarize([row(30, 0, 10, 0), row(30.0, 1, 10, 0)], [TTL])] == [2]


def test_rates_are_pooled_counts_not_the_mean_of_the_runs_rates():
    """1 false expiry in 10 leases and 0 in 990 is 1 per 1,000 pooled (1 in 1,000), not the mean of 100 and 0 per 1,000."""
    groups = summarize([row(30, 0, 10, 1), row(30, 1, 990, 0)], [TTL])
    group = groups[0]
    assert (group["sum.false_expiries"], group["sum.leases"]) == (1, 1000)
    assert group["false_expiries_per_1000_leases"] == pytest.approx(1.0)
    low, high = binomial_interval(1, 1000, 0.95)
    assert group["false_expiries_per_1000_leases.low"] == pytest.approx(1000 * low)
    assert group["false_expiries_per_1000_leases.high"] == pytest.approx(1000 * high)
    assert group["renewals_unanswered_share"] == pytest.approx((1 + 99) / (30 + 2970))
    assert group["expiries_per_1000_lease_windows"] == pytest.approx(1000 * 1 / 4000)


def test_no_events_in_the_pool_bound_the_rate_by_the_closed_form():
    """0 false expiries in 3,594 leases: the rate 0, its upper bound 1000 * (1 - 0.025^(1/3594)), about 1.03 per 1,000."""
    group = summarize([row(75, seed, 3594 // 6, 0) for seed in range(6)], [TTL])[0]
    assert group["false_expiries_per_1000_leases"] == 0.0
    assert group["false_expiries_per_1000_leases.low"] == 0.0
    assert group["false_expiries_per_1000_leases.high"] == pytest.approx(1000 * (1 - 0.025 ** (1 / 3594)))


def test_the_confidence_sets_every_interval():
    """At 90% each interval is the 90% one, and narrower than at 99%."""
    rows = [row(30, 0, 200, 3), row(30, 1, 300, 4, ok=False)]
    at_90, at_99 = summarize(rows, [TTL], 0.90)[0], summarize(rows, [TTL], 0.99)[0]
    low, high = binomial_interval(7, 500, 0.90)
    assert (at_90["false_expiries_per_1000_leases.low"], at_90["false_expiries_per_1000_leases.high"]) == pytest.approx(
        (1000 * low, 1000 * high)
    )
    assert at_99["false_expiries_per_1000_leases.low"] < at_90["false_expiries_per_1000_leases.low"]
    assert at_99["false_expiries_per_1000_leases.high"] > at_90["false_expiries_per_1000_leases.high"]
    assert (at_90["runs_ok.low"], at_90["runs_ok.high"]) == pytest.approx(binomial_interval(1, 2, 0.90))


def test_runs_ok_counts_the_runs_that_held_every_invariant_with_its_interval():
    """Three runs of four held: runs_ok 3, share 0.75, the exact interval for 3 of 4."""
    rows = [row(30, seed, 10, 0, ok=seed != 2) for seed in range(4)]
    group = summarize(rows, [TTL])[0]
    assert (group["runs"], group["runs_ok"], group["runs_ok.share"]) == (4, 3, 0.75)
    assert (group["runs_ok.low"], group["runs_ok.high"]) == pytest.approx(binomial_interval(3, 4, 0.95))


def test_an_invariants_share_is_of_the_runs_that_judged_it():
    """ok, violated, unknown, ok: held by 2 of the 3 runs that judged it; an invariant no run judged has no share."""
    statuses = ["ok", "violated", "unknown", "ok"]
    rows = [
        row(30, seed, 10, 0, **{"invariant.no_lost_tasks": status, "invariant.single_owner": "unknown"})
        for seed, status in enumerate(statuses)
    ]
    group = summarize(rows, [TTL])[0]
    assert (group["invariant.no_lost_tasks.held"], group["invariant.no_lost_tasks.judged"]) == (2, 3)
    assert group["invariant.no_lost_tasks.share"] == pytest.approx(2 / 3)
    assert (group["invariant.no_lost_tasks.low"], group["invariant.no_lost_tasks.high"]) == pytest.approx(binomial_interval(2, 3))
    assert (group["invariant.single_owner.held"], group["invariant.single_owner.judged"]) == (0, 0)
    assert group["invariant.single_owner.share"] is None


def test_means_are_over_the_runs_that_have_a_value():
    """throughput 100 and 102 average to 101; a run with no value (None) is left out, not counted as zero."""
    rows = [row(30, 0, 10, 0), row(30, 2, 10, 0), row(30, 1, 10, 0, throughput_tasks_per_h=None)]
    group = summarize(rows, [TTL])[0]
    assert group["mean.throughput_tasks_per_h"] == pytest.approx(101.0)
    assert "mean.queue_age_s_p99" not in group


def test_a_rate_without_trials_is_none_and_a_rate_the_rows_cannot_give_is_left_out():
    """No leases at all: no false-expiry rate (None, not 0); rows with no tasks column give no tasks-done share."""
    rows = [row(30, 0, 0, 0)]
    del rows[0]["tasks"]
    group = summarize(rows, [TTL])[0]
    assert group["false_expiries_per_1000_leases"] is None
    assert group["false_expiries_per_1000_leases.high"] is None
    assert group["sum.leases"] == 0
    assert "tasks_done_share" not in group


def test_a_dataframe_summarizes_as_its_rows_do_and_summary_returns_one():
    """The same rows as a DataFrame (numpy integers, NaN for a missing mean) give the same groups; `summary` is a DataFrame."""
    pandas = pytest.importorskip("pandas")
    rows = [row(30, 0, 10, 1), row(30, 1, 990, 0, throughput_tasks_per_h=None), row(60, 0, 500, 0, ok=False)]
    assert summarize(pandas.DataFrame(rows), [TTL]) == summarize(rows, [TTL])
    table = summary(rows, [TTL])
    assert list(table[TTL]) == [30, 60]
    assert list(table["runs"]) == [2, 1]


def test_every_pooled_rate_and_mean_names_columns_a_run_has():
    """The table of rates names real metrics: renaming one in sim/metrics.py without this table fails here, not silently."""
    columns = {"tasks", *Metrics(1.0).summary(0.0, {})}
    for rate in POOLED_RATES:
        assert {rate.numerator, rate.denominator} <= columns, rate
    assert set(MEANS) <= columns


def test_a_real_sweeps_summary_sums_its_rows():
    """On a tiny real sweep the pooled sums are the rows' sums and every invariant was judged by every run."""
    rows = sweep_rows(
        {TTL: [30, 45]}, range(2), "baseline", 30, {"network.loss_probability": 0.1, "network.lossy_calls": "renew_lease"}, jobs=1
    )
    groups = summarize(rows, [TTL])
    assert [group[TTL] for group in groups] == [30.0, 45.0]
    for group in groups:
        members = [one for one in rows if one[TTL] == group[TTL]]
        assert group["sum.leases"] == sum(one["leases"] for one in members) > 0
        assert group["sum.false_expiries"] == sum(one["false_expiries"] for one in members)
        assert group["runs_ok"] == sum(one["ok"] for one in members) == 2
        invariants = [column for column in rows[0] if column.startswith("invariant.")]
        assert invariants and all(group[f"{column}.judged"] == 2 for column in invariants)


@pytest.mark.parametrize(
    ("rows", "swept", "confidence", "named"),
    [
        ([], [TTL], 0.95, "no rows"),
        ([row(30, 0, 10, 0)], ["core.lease_tll_s"], 0.95, "no column 'core.lease_tll_s'"),
        ([row(30, 0, 10, 0)], [TTL], 0.0, "confidence"),
        ([row(30, 0, 10, 0)], [TTL], 1.0, "confidence"),
        ([row(30, 0, 10, 0)], [TTL], 1.5, "confidence"),
        ([row(30, 0, 10, 0)], [TTL], "0.95", "confidence"),
        ([row(30, 0, 10, 0)], [TTL], True, "confidence"),
        ([row(30, 0, 10, 12)], [TTL], 0.95, "more events than trials"),
        ([row(30, 0, 10, -1)], [TTL], 0.95, "false_expiries must be a count"),
        ([row(30, 0, 10, 1.5)], [TTL], 0.95, "false_expiries must be a count"),
        ([row(30, 0, 10, 0), row(30, 1, 10, 0, renewals_sent=None)], [TTL], 0.95, "no value for 'renewals_sent'"),
        ([{TTL: 30}], [TTL], 0.95, "no column 'ok'"),
        ({TTL: [30]}, [TTL], 0.95, "a list of dicts or a DataFrame"),
        ([[30]], [TTL], 0.95, "each row must be a mapping"),
    ],
)
def test_bad_input_is_one_line_naming_what_is_wrong(rows, swept, confidence, named):
    """No rows, an unknown column, a confidence outside (0, 1), a count that is no count: one InputError line naming it."""
    with pytest.raises(InputError, match=named) as caught:
        summarize(rows, swept, confidence)
    assert "\n" not in str(caught.value)


def test_pooled_rate_on_its_own_gives_counts_value_and_bounds():
    """pooled_rate is the one pooling rule: events and trials summed, the scaled rate and its exact bounds."""
    rate = next(rate for rate in POOLED_RATES if rate.name == "renewals_unanswered_share")
    pooled = pooled_rate(rate, [row(30, 0, 10, 0), row(30, 1, 20, 0)], 0.95)
    low, high = binomial_interval(3, 90, 0.95)
    assert pooled == pytest.approx({"events": 3, "trials": 90, "value": 3 / 90, "low": low, "high": high})


# ------------------------------------------------------------------ the sweep's plot


@pytest.fixture
def drawn(monkeypatch):
    """The figures plot_sweep draws, kept for the test to read instead of closed (and closed after it)."""
    import matplotlib.pyplot as plt

    close, figures = plt.close, []
    monkeypatch.setattr(plt, "close", figures.append)
    yield figures
    for figure in figures:
        close(figure)


def axis_of(figures) -> object:
    assert len(figures) == 1
    return figures[0].axes[0]


def test_a_pooled_rate_is_drawn_with_its_exact_interval_as_error_bars(drawn, tmp_path):
    """Plotting false_expiries_per_1000_leases draws the pooled rate at each TTL, the bars spanning its exact interval."""
    rows = [row(30, 0, 10, 1), row(30, 1, 990, 0), row(60, 0, 500, 2), row(60, 1, 500, 0)]
    plot_sweep(rows, TTL, "false_expiries_per_1000_leases", tmp_path / "p.png")
    axis = axis_of(drawn)
    bars = [container for container in axis.containers if type(container).__name__ == "ErrorbarContainer"]
    assert len(bars) == 1
    line, _caps, (segments,) = bars[0]
    assert list(line.get_ydata()) == pytest.approx([1.0, 2.0])
    bounds = [(segment[0][1], segment[1][1]) for segment in segments.get_segments()]
    expected = [tuple(1000 * bound for bound in binomial_interval(k, 1000)) for k in (1, 2)]
    assert bounds == [pytest.approx(pair) for pair in expected]
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_wide_span_of_values_gets_a_log_axis_and_a_narrow_one_stays_linear(drawn, tmp_path):
    """Throughputs 1 to 5,000 (over three decades) are drawn on a log axis; 100 to 150 on a linear one."""
    wide = [row(ttl, 0, 10, 0, throughput_tasks_per_h=value) for ttl, value in ((30, 1.0), (60, 50.0), (90, 5000.0))]
    narrow = [row(ttl, 0, 10, 0, throughput_tasks_per_h=value) for ttl, value in ((30, 100.0), (60, 120.0), (90, 150.0))]
    plot_sweep(wide, TTL, "throughput_tasks_per_h", tmp_path / "wide.png")
    plot_sweep(narrow, TTL, "throughput_tasks_per_h", tmp_path / "narrow.png")
    assert [figure.axes[0].get_yscale() for figure in drawn] == ["log", "linear"]


def test_a_zero_among_values_spanning_decades_keeps_its_place_on_a_symmetric_log_axis(drawn, tmp_path):
    """213, 17, 0.8 and 0 per 1,000: a log axis that still shows the zero (symlog), not one that drops it."""
    rows = [row(30, 0, 1000, 213), row(45, 0, 1000, 17), row(60, 0, 5000, 4), row(75, 0, 1000, 0)]
    plot_sweep(rows, TTL, "false_expiries_per_1000_leases", tmp_path / "p.png")
    axis = axis_of(drawn)
    assert axis.get_yscale() == "symlog"
    assert axis.get_ylim()[0] == 0
    assert "log scale" in axis.get_ylabel()


def test_two_decades_or_fewer_stay_linear_even_with_a_zero(drawn, tmp_path):
    """Values 0, 1 and 90 span under two decades among the positives: the axis stays linear."""
    rows = [row(ttl, 0, 10, 0, throughput_tasks_per_h=value) for ttl, value in ((30, 0.0), (60, 1.0), (90, 90.0))]
    plot_sweep(rows, TTL, "throughput_tasks_per_h", tmp_path / "p.png")
    assert axis_of(drawn).get_yscale() == "linear"


def test_a_target_is_a_labelled_horizontal_line(drawn, tmp_path):
    """--target 1 draws y = 1 across the plot, named in the legend."""
    rows = [row(30, 0, 100, 5), row(60, 0, 100, 0)]
    plot_sweep(rows, TTL, "false_expiries_per_1000_leases", tmp_path / "p.png", target=1.0)
    axis = axis_of(drawn)
    targets = [line for line in axis.get_lines() if line.get_label() == "target = 1"]
    assert len(targets) == 1
    assert list(targets[0].get_ydata()) == [1.0, 1.0]
    assert "target = 1" in [text.get_text() for text in axis.get_legend().get_texts()]


def test_a_metric_that_is_not_a_pooled_rate_has_no_error_bars(drawn, tmp_path):
    """A mean of the seeds (throughput) is a line and a band, with no interval drawn for it."""
    rows = [row(30, 0, 10, 0), row(30, 1, 10, 0), row(60, 0, 10, 0)]
    plot_sweep(rows, TTL, "throughput_tasks_per_h", tmp_path / "p.png")
    axis = axis_of(drawn)
    assert not [container for container in axis.containers if type(container).__name__ == "ErrorbarContainer"]
    assert list(axis.get_lines()[0].get_ydata()) == pytest.approx([100.5, 100.0])


def test_the_plot_refuses_a_bad_confidence(tmp_path):
    """The plot's intervals take the summary's confidence rule."""
    with pytest.raises(InputError, match="confidence"):
        plot_module.plot_sweep([row(30, 0, 10, 0)], TTL, "false_expiries_per_1000_leases", tmp_path / "p.png", confidence=2)
