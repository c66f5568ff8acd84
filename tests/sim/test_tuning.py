"""The simulator as a tuning instrument: faults placed in time, loss of one kind of call, exact lease ground truth, heartbeats
on a fixed cadence, the time series, run artifacts, and roles that get only what they use.

Each test builds a small world with exactly the knobs it needs (`dataclasses.replace`
on the defaults) so a failure names one mechanism, not a scenario.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from shiftchange.core import CoreConfig, InputError
from shiftchange.sim.config import ControlConfig, FaultSpec, NetworkConfig, SeriesConfig, SimConfig
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import World, play

SIM = Path(__file__).resolve().parents[2] / "sim"


def _quiet(tasks: int = 20, **workload: object) -> SimConfig:
    """The baseline: no faults, no cancellations, no wrong answers, so any expiry or refusal is the test's own doing."""
    base = SimConfig()
    return replace(
        base,
        workload=replace(
            base.workload, tasks=tasks, cancel_probability=0.0, wrong_answer_probability=0.0, nonconvergent_probability=0.0, **workload
        ),
    )


def _placed(config: SimConfig, *faults: str) -> SimConfig:
    return replace(config, nemesis=replace(config.nemesis, placed=tuple(FaultSpec.parse(text) for text in faults)))


# ------------------------------------------------------------------ faults placed in time


@pytest.mark.parametrize(
    "text",
    [
        "crash busy at=200 for=30",
        "pause worker-003 at=150 for=40",
        "partition worker-001,worker-002 at=120 for=60",
        "duplicate_burst network at=100 for=50 probability=0.9",
        "outage model_provider at=300 for=120",
        "outage code_host at=300 for=120 mode=hang",
        "revoked_credentials code_host at=250 for=60",
        "lost_responses code_host at=200 for=90 probability=0.7",
        "slow_tools workers at=100 for=200 factor=5",
        "slowdown model_provider at=200 for=100 factor=6",
        "capacity_drop model_provider at=200 for=100 factor=0.2",
        "message_loss network at=150 for=60 probability=0.5 calls=renew_lease",
    ],
)
def test_a_placed_fault_happens_at_its_time_and_ends_after_its_span(text):
    """Every kind can be placed: the history records it at t=at with until=at+for, with its parameters, and the run holds."""
    spec = FaultSpec.parse(text)
    world = World(_placed(_quiet(40), text), 3, keep_history=True)
    outcome = world.play()
    faults = [entry for entry in outcome.tail if type(entry).__name__ == "Fault"]
    assert len(faults) == 1, faults
    assert faults[0].at == pytest.approx(spec.at_s) and faults[0].until == pytest.approx(spec.at_s + spec.for_s)
    assert faults[0].kind == spec.kind and dict(faults[0].parameters) == spec.parameters() and faults[0].placed
    assert outcome.ok, {name: v.example[:2] for name, v in outcome.verdicts.items() if not v.ok}


def test_an_outage_refuses_calls_only_inside_its_window():
    """A fail-fast outage of the model provider at 600 s for 120 s: refusals in exactly the windows it covers, none before or after."""
    config = replace(_placed(_quiet(200), "outage model_provider at=600 for=120"), series=SeriesConfig(window_s=60.0))
    rows = play(config, 1).series
    refused = {row["t_s"]: row["model_provider.refused"] for row in rows}
    assert all(count > 0 for t, count in refused.items() if 600 <= t < 720)
    assert all(count == 0 for t, count in refused.items() if t < 600 or t >= 720)


def test_a_hanging_outage_times_calls_out_instead_of_refusing_them():
    """mode=hang: calls are accepted and never answered, so the window shows time-outs and no refusals, and nothing lands then."""
    config = replace(_placed(_quiet(200), "outage model_provider at=600 for=120 mode=hang"), series=SeriesConfig(window_s=60.0))
    rows = [row for row in play(config, 1).series if 600 <= row["t_s"] < 720]
    assert sum(row["model_provider.refused"] for row in rows) == 0
    assert sum(row["model_provider.timed_out"] for row in rows) > 0
    assert sum(row["model_provider.landed"] for row in rows[1:]) == 0  # the first window may land calls begun before 600 s


@pytest.mark.parametrize(
    "text, column",
    [
        ("revoked_credentials code_host at=600 for=120", "code_host.refused"),
        ("capacity_drop model_provider at=600 for=120 factor=0.02", "model_provider.refused"),
        ("lost_responses code_host at=600 for=120 probability=1", "code_host.timed_out"),
    ],
)
def test_a_provider_fault_shows_in_its_column_only_inside_its_window(text, column):
    """Each provider fault's mark (401s, 429s, responses lost) falls inside [at, at + for) and nowhere else."""
    config = replace(_placed(_quiet(200), text), series=SeriesConfig(window_s=60.0))
    counts = {row["t_s"]: row[column] for row in play(config, 1).series}
    assert sum(count for t, count in counts.items() if 600 <= t < 720) > 0
    assert all(count == 0 for t, count in counts.items() if t < 600 or t >= 780)  # a timed-out call is counted at its deadline


def test_a_short_fault_inside_a_long_one_does_not_end_it_early():
    """Two outages of one provider overlap: 100 s to 500 s, and 150 s to 160 s. Calls are refused until 500 s, not 160 s."""
    config = _placed(_quiet(200), "outage model_provider at=100 for=400", "outage model_provider at=150 for=10")
    config = replace(config, series=SeriesConfig(window_s=50.0))
    rows = {row["t_s"]: row for row in play(config, 1).series}
    span = (200.0, 250.0, 300.0, 350.0, 400.0)  # a call offered as one window closes may be refused as the next opens
    assert all(rows[t]["model_provider.refused"] > 0 for t in (*span, 450.0))
    assert sum(rows[t]["model_provider.refused"] for t in span) == sum(rows[t]["model_provider.offered"] for t in span)


def test_the_later_fault_sets_the_parameter_while_two_overlap():
    """A hanging outage inside a failing one hangs calls (no refusals) while it lasts, then the failing one refuses again."""
    config = _placed(_quiet(200), "outage model_provider at=100 for=600", "outage model_provider at=300 for=200 mode=hang")
    config = replace(config, series=SeriesConfig(window_s=50.0))
    rows = {row["t_s"]: row for row in play(config, 1).series}
    assert all(rows[t]["model_provider.refused"] == 0 for t in (300.0, 350.0, 400.0, 450.0))
    assert rows[550.0]["model_provider.refused"] > 0 and rows[200.0]["model_provider.refused"] > 0


def test_a_placed_crash_strikes_at_its_time():
    """crash worker-000 at 30 s: the worker holding task-0000000#1 dies then, and its lease expires about a TTL later."""
    config = _placed(_quiet(1, tool_call_s=400.0), "crash worker-000 at=30 for=20")
    outcome = play(config, 0, keep_history=True)
    expire = next(e for e in outcome.tail if type(e).__name__ == "Event" and e.kind == "expire")
    assert outcome.metrics["crashes"] == 1 and outcome.metrics["crashes_holding"] == 1
    assert 30 + config.core.lease_ttl_s <= expire.at <= 30 + config.core.lease_ttl_s + config.control.reap_interval_s + 1


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"agent.call_deadline_s": 1000}, "agent.call_deadline_s (1000.0) must be at most core.call_deadline_max_s (600.0)"),
        ({"series.window_s": 0.01}, "series.window_s must be at least 1"),
        ({"workload.arrival_rate_per_s": 1e-9}, "workload.tasks (1,000) would take"),
        ({"nemesis.placed": "pause worker-048 at=1 for=2"}, "worker-000 to worker-047"),
    ],
)
def test_a_config_that_could_not_run_as_meant_is_refused_when_built(overrides, words):
    from shiftchange.lab.settings import apply

    with pytest.raises(InputError, match=re.escape(words)):
        apply(SimConfig(), overrides)


def test_a_slowdown_multiplies_provider_latency_for_its_span():
    """slowdown factor=8 on the model provider: its p50 latency inside the window is several times the p50 outside it."""
    config = replace(_placed(_quiet(200), "slowdown model_provider at=600 for=300 factor=8"), series=SeriesConfig(window_s=100.0))
    rows = play(config, 2).series
    inside = [row["model_provider.latency_s_p50"] for row in rows if 700 <= row["t_s"] < 900 and row["model_provider.latency_s_p50"]]
    outside = [row["model_provider.latency_s_p50"] for row in rows if row["t_s"] < 500 and row["model_provider.latency_s_p50"]]
    assert inside and outside and min(inside) > 3 * max(outside)


def test_a_placed_fault_naming_an_unknown_worker_is_refused_before_the_run():
    """A crash of worker-999 in a world of 48 workers is bad input when the config is built, not a fault that does nothing."""
    with pytest.raises(InputError, match="worker-999"):
        _placed(_quiet(5), "crash worker-999 at=10 for=5")


@pytest.mark.parametrize(
    "text, words",
    [
        ("outage nowhere at=1 for=2", "target"),
        ("crash worker-001 at=1 for=2 factor=3", "take"),
        ("slowdown code_host at=1", "for="),
        ("message_loss network at=1 for=2 calls=renew", "renew"),
        ("capacity_drop code_host at=1 for=2 factor=3", "at most 1"),
        ("wobble code_host at=1 for=2", "unknown fault kind"),
    ],
)
def test_a_malformed_fault_is_one_clear_error(text, words):
    with pytest.raises(InputError, match=words):
        FaultSpec.parse(text)


def test_a_fault_spec_prints_as_the_text_that_parses_back_to_it():
    for text in ("outage code_host at=300 for=120 mode=hang", "message_loss network at=0 for=5 probability=0.25 calls=renew_lease"):
        spec = FaultSpec.parse(text)
        assert FaultSpec.parse(str(spec)) == spec


# ------------------------------------------------------------------ loss of one kind of call


def test_renewal_only_loss_drops_renewals_and_nothing_else():
    """lossy_calls=(renew_lease,): every request lost on the way in was a renewal, and renewals were lost."""
    base = _quiet(60)
    config = replace(base, network=NetworkConfig(loss_probability=0.3, response_loss_probability=0.3, lossy_calls=("renew_lease",)))
    world = World(config, 4)
    outcome = world.play()
    assert set(world.transport.lost_by_call) == {"renew_lease"} and world.transport.lost_by_call["renew_lease"] > 0
    assert outcome.metrics["renewals_unanswered"] > 0 and outcome.ok


def test_a_message_loss_fault_drops_only_the_calls_it_names():
    """message_loss of complete_attempt for a window: only completions are lost, and only inside the window."""
    world = World(_placed(_quiet(120), "message_loss network at=100 for=200 probability=1 calls=complete_attempt"), 5)
    outcome = world.play()
    assert set(world.transport.lost_by_call) == {"complete_attempt"}
    assert outcome.ok


# ------------------------------------------------------------------ exact lease ground truth


def _reaped_late(seed: int = 0) -> SimConfig:
    """One long Attempt whose renewals are all lost for 40 s of a 30 s lease, with a reaper that looks only every 120 s."""
    config = _quiet(1, tool_call_s=400.0)
    config = replace(
        config,
        core=CoreConfig(lease_ttl_s=30.0, heartbeat_interval_s=10.0, cancel_ack_timeout_s=45.0),
        control=replace(ControlConfig(), reap_interval_s=120.0),
    )
    return _placed(config, "message_loss network at=60 for=40 probability=1 calls=renew_lease")


def test_a_renewal_that_lands_after_expiry_but_before_the_reap_is_a_false_expiry():
    """The worker was alive, unpaused and renewing when its lease ran out; its next renewal is refused before the reaper runs.

    Judged when the reaper runs (the old way) the worker had already stopped, so this expiry was scored true; judged at the
    instant of expiry it is false.
    """
    world = World(_reaped_late(), 0, keep_history=True)
    outcome = world.play()
    events = [entry for entry in outcome.tail if type(entry).__name__ == "Event" and entry.attempt_id == "task-0000000#1"]
    refused = [e for e in events if e.kind == "renew" and not e.accepted]
    expired = [e for e in events if e.kind == "expire" and e.accepted]
    assert refused and expired and refused[0].at < expired[0].at, "the renewal must be refused before the reap"
    assert outcome.metrics["expiries"] == 1 and outcome.metrics["false_expiries"] == 1


def test_a_crashed_holder_makes_a_true_expiry():
    """A crash of the busy worker: its lease expires and the expiry is true (the holder was dead), with one crash counted."""
    config = _placed(replace(_reaped_late(), nemesis=replace(SimConfig().nemesis)), "crash busy at=60 for=30")
    outcome = play(config, 0)
    metrics = outcome.metrics
    assert metrics["crashes"] == 1 and metrics["crashes_holding"] == 1 and metrics["crash_detect_count"] == 1
    assert metrics["expiries"] == 1 and metrics["false_expiries"] == 0


def test_a_paused_holder_makes_a_true_expiry():
    """A stop-the-world pause longer than the lease: the holder could not renew, so the expiry is not false."""
    config = _placed(replace(_reaped_late(), nemesis=replace(SimConfig().nemesis)), "pause busy at=60 for=90")
    metrics = play(config, 0).metrics
    assert metrics["expiries"] == 1 and metrics["false_expiries"] == 0


@pytest.mark.parametrize("lease_ttl_s", [11.0, 15.0, 20.0, 40.0])
def test_with_no_loss_and_no_pause_no_lease_expires_falsely_at_any_ttl_above_interval_plus_delay(lease_ttl_s):
    """Heartbeat every 10 s, one-way delay about 20 ms: any TTL above 10 s plus the delay keeps every live lease."""
    config = replace(_quiet(60), core=CoreConfig(lease_ttl_s=lease_ttl_s, heartbeat_interval_s=10.0, cancel_ack_timeout_s=45.0))
    metrics = play(config, 6).metrics
    assert metrics["renewals_sent"] > 100 and metrics["renewals_unanswered"] == 0
    assert metrics["false_expiries"] == 0 and metrics["expiries"] == 0


def test_a_mean_over_no_crash_stands_beside_a_count_of_zero():
    metrics = play(_quiet(10), 1).metrics
    assert metrics["crashes"] == 0 and metrics["crash_detect_count"] == 0 and metrics["crash_detect_s_mean"] is None


# ------------------------------------------------------------------ heartbeats on a fixed cadence


def test_heartbeats_keep_their_cadence_from_the_claim_whatever_became_of_the_last():
    """With a third of all renewals lost, every renewal that arrives still sits on the claim's grid of heartbeat_interval_s.

    The old worker waited out the request timeout after a lost renewal, which slid every later beat off the grid.
    """
    config = _quiet(4, tool_call_s=300.0)
    config = replace(config, network=NetworkConfig(loss_probability=0.3, lossy_calls=("renew_lease",)))
    outcome = play(config, 2, keep_history=True)
    interval_s = config.core.heartbeat_interval_s
    events = [e for e in outcome.tail if type(e).__name__ == "Event"]
    checked = 0
    for claim in [e for e in events if e.kind == "claim" and e.accepted]:
        renewals = [e.at for e in events if e.kind == "renew" and e.attempt_id == claim.attempt_id]
        phases = [((at - claim.at) % interval_s) for at in renewals]
        assert not phases or max(phases) < 1.0, f"{claim.attempt_id}: renewals off the cadence by {max(phases):.2f} s"
        checked += len(renewals) >= 5
    assert checked >= 2 and outcome.metrics["renewals_unanswered"] >= 5


def test_the_first_heartbeat_does_not_wait_for_start_attempt():
    """When start_attempt's request is lost the worker waits out a request timeout, yet its first renewal still goes one interval
    after the claim."""
    config = _quiet(1, tool_call_s=100.0)
    config = replace(
        config,
        core=CoreConfig(lease_ttl_s=12.0, heartbeat_interval_s=4.0, cancel_ack_timeout_s=45.0),
        network=NetworkConfig(loss_probability=1.0, lossy_calls=("start_attempt",), request_timeout_s=10.0),
    )
    outcome = play(config, 1, keep_history=True)
    events = [e for e in outcome.tail if type(e).__name__ == "Event" and e.attempt_id == "task-0000000#1"]
    claim = next(e for e in events if e.kind == "claim" and e.accepted)
    first_renewal = next(e for e in events if e.kind == "renew")
    assert first_renewal.at - claim.at < 4.0 + 1.0


# ------------------------------------------------------------------ the time series


def test_the_series_covers_the_run_in_contiguous_windows_and_adds_up_to_the_metrics():
    outcome = play(scenario_config("mixed", 2, 150), 2, "mixed")
    rows, metrics = outcome.series, outcome.metrics
    assert rows and all(later["t_s"] == pytest.approx(earlier["t_s"] + earlier["window_s"]) for earlier, later in itertools.pairwise(rows))
    assert set().union(*(row.keys() for row in rows)) == set(rows[0])
    assert sum(row["arrivals"] for row in rows) == 150 and sum(row["tasks_done"] for row in rows) == metrics["tasks_done"]
    assert sum(row[column] for row in rows for column in row if column.startswith("retired.")) == 150
    assert sum(row["renewals_sent"] for row in rows) == metrics["renewals_sent"]
    assert sum(row["false_expiries"] for row in rows) == metrics["false_expiries"]
    assert sum(row["expiries"] for row in rows) == metrics["expiries"]
    assert sum(row["model_provider.offered"] for row in rows) == metrics["provider_calls"]["model_provider"]
    assert sum(row["spend_usd"] for row in rows) == pytest.approx(metrics["spend_usd"], abs=0.05)
    assert {row["code_host.breaker"] for row in rows} <= {"closed", "open", "half_open", "half-open"}


def test_recording_the_series_changes_nothing_the_run_does():
    """The recorder only watches: with and without it, one seed gives the same history digest."""
    config = scenario_config("mixed", 3, 60)
    assert play(config, 3, series=False).digest == play(config, 3).digest
    assert play(config, 3, series=False).series == []


# ------------------------------------------------------------------ run artifacts


def test_run_artifacts_hold_the_report_config_series_plot_and_whole_history(tmp_path):
    from shiftchange.lab.report.artifacts import FILES, play_with_artifacts
    from shiftchange.lab.settings import load

    config = _placed(scenario_config("mixed", 1, 40), "outage code_host at=30 for=20")
    outcome = play_with_artifacts(config, 1, "mixed", None, tmp_path / "run")
    folder = tmp_path / "run"
    assert sorted(path.name for path in folder.iterdir()) == sorted(FILES)
    report = json.loads((folder / "report.json").read_text())
    assert report["schema_version"] == 4 and report["driver"] == "sim" and report["subject"]["digest"] == outcome.digest
    assert report["subject"]["files"] == list(FILES)
    placed = [fault for fault in report["faults"] if fault["placed"]]
    assert placed == [
        {
            "index": placed[0]["index"],
            "at_s": 30.0,
            "kind": "outage",
            "target": "code_host",
            "until_s": 50.0,
            "placed": True,
            "mode": "fail",
        }
    ]
    lines = (folder / "history.jsonl").read_text().splitlines()
    assert len(lines) == outcome.history_entries and json.loads(lines[0])["type"] in {"event", "landed", "fault", "retired"}
    assert "issued" in (folder / "history.jsonl").read_text() and not re.search(r'"token_digest":"[0-9a-f]{64}"', lines[-1])
    assert load(folder / "config.toml") == outcome.config
    assert (folder / "series.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((folder / "series.csv").read_text().splitlines()) == len(outcome.series) + 1


def test_artifacts_into_a_file_are_refused(tmp_path):
    from shiftchange.lab.report.artifacts import play_with_artifacts

    blocker = tmp_path / "taken"
    blocker.write_text("")
    with pytest.raises(InputError, match="is a file"):
        play_with_artifacts(_quiet(2), 1, "custom", None, blocker)


# ------------------------------------------------------------------ roles with narrow contexts


@pytest.mark.parametrize("role", ["worker", "control", "nemesis", "metrics", "workload", "recorder", "network", "provider"])
def test_no_role_reaches_for_the_world(role):
    """Each role gets a small context of what it uses; none imports the world or holds it (the service locator is gone)."""
    source = (SIM / f"{role}.py").read_text()
    assert "from .world import" not in source and not re.search(r"\bworld\.[a-z_]", source), role


def test_the_world_hands_back_its_roles_after_a_run():
    """A study can read the world it played: the orchestrator, the recorder, the transport and the workers."""
    world = World(_quiet(5), 1)
    outcome = world.play()
    assert outcome.ok and world.recorder.rows == outcome.series and len(world.workers) == SimConfig().workers.workers
    assert world.orchestrator.store is world.store and world.transport.sent > 0
