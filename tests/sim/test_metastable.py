"""The world that can go metastable: a processor-sharing provider with contention, work past deadlines, a bounded queue,
open-loop workers, retries counted, and the goodput_recovers judgement."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import simpy

from shiftchange.checkers.history import Fault
from shiftchange.core import InputError, ProviderRefused, ProviderTimeout
from shiftchange.sim import World, recovery, scenario_config
from shiftchange.sim.config import ProviderConfig, RecoveryConfig
from shiftchange.sim.provider import SimProvider


def _provider(**changes):
    env = simpy.Environment()
    landed: list = []
    config = replace(ProviderConfig(latency_s=1.0, overload_in_flight=10, rate_per_s=1e6), **changes)
    return env, SimProvider(env, "code_host", config, random.Random(1), landed.append, lambda *a: "passed"), landed


def _calls(env, provider, count: int, deadline_at: float, key: str = "k") -> list:
    outcomes: list = []

    def caller(index: int):
        started = env.now
        try:
            yield from provider.call(f"{key}-{index}", "push", f"t:{index}", f"t{index}", "worker-1", deadline_at)
            outcomes.append(("answered", env.now - started))
        except (ProviderTimeout, ProviderRefused) as error:
            outcomes.append((type(error).__name__, env.now - started))

    for index in range(count):
        env.process(caller(index))
    return outcomes


def test_a_call_alone_takes_its_work_slowed_by_its_own_share_of_the_load():
    """One call in progress: rate 1 / (1 + 1/O + contention/O**2); its latency is its work (the first draw) over that rate."""
    env, provider, _ = _provider(contention=4.0)
    outcomes = _calls(env, provider, 1, deadline_at=1000.0)
    env.run()
    work_s = random.Random(1).expovariate(1.0)
    assert outcomes[0][0] == "answered"
    assert outcomes[0][1] == pytest.approx(work_s * (1 + 1 / 10 + 4.0 / 100))


def _makespan(calls: int, contention: float) -> float:
    env, provider, landed = _provider(contention=contention)
    outcomes = _calls(env, provider, calls, deadline_at=1e9)
    env.run()
    assert len(landed) == calls and all(kind == "answered" for kind, _ in outcomes)
    return max(latency for _, latency in outcomes)


def test_with_contention_goodput_falls_past_its_peak_and_without_it_does_not():
    """Calls per second of makespan: with contention 1 twenty calls at once do more per second than eighty; with none, not less."""
    assert 80 / _makespan(80, 1.0) < 0.7 * (20 / _makespan(20, 1.0))
    assert 80 / _makespan(80, 0.0) >= 0.95 * (20 / _makespan(20, 0.0))


def test_a_call_past_its_deadline_is_dropped_unless_the_provider_works_on():
    """Without works_past_deadline the provider lets go at the deadline; with it, the work stays, abandoned, then is wasted."""
    for works_on in (False, True):
        env, provider, landed = _provider(latency_s=100.0, works_past_deadline=works_on)
        outcomes = _calls(env, provider, 1, deadline_at=0.5)
        env.run(until=0.6)
        assert outcomes == [("ProviderTimeout", 0.5)]
        assert (provider.in_flight, provider.abandoned) == ((1, 1) if works_on else (0, 0))
        env.run()
        assert (provider.in_flight, provider.abandoned, provider.wasted) == (0, 0, 1 if works_on else 0)
        assert landed == []


def test_work_past_deadlines_slows_the_calls_that_follow():
    """An abandoned call keeps its share: a later call alone finishes sooner when the provider dropped the first."""
    latencies = {}
    for works_on in (False, True):
        env, provider, _ = _provider(latency_s=50.0, works_past_deadline=works_on, contention=1.0)
        _calls(env, provider, 5, deadline_at=1.0, key="first")
        env.run(until=2.0)
        later = _calls(env, provider, 1, deadline_at=1e9, key="later")
        env.run()
        latencies[works_on] = later[0][1]
    assert latencies[True] > latencies[False]


def test_a_bounded_queue_refuses_beyond_it_at_once_as_a_capacity_denial():
    env, provider, landed = _provider(latency_s=10.0, queue_max=2)
    outcomes = _calls(env, provider, 3, deadline_at=1e9)
    env.run()
    assert sorted(kind for kind, _ in outcomes) == ["ProviderRefused", "answered", "answered"]
    assert provider.refusals == {"capacity": 1} and len(landed) == 2


def test_a_call_with_a_key_seen_before_is_counted_as_a_retry_until_the_task_is_forgotten():
    env, provider, _ = _provider()
    for _ in range(3):
        _calls(env, provider, 1, deadline_at=1e9, key="same")
        env.run()
    assert provider.retries == 2
    provider.forget("t0")
    _calls(env, provider, 1, deadline_at=1e9, key="same")
    env.run()
    assert provider.retries == 2


@pytest.mark.parametrize("bad", [{"contention": -1.0}, {"queue_max": 0}, {"queue_max": 2.5}, {"works_past_deadline": "yes"}])
def test_bad_provider_settings_are_typed_errors(bad):
    with pytest.raises(InputError):
        replace(ProviderConfig(), **bad)


def test_an_open_loop_world_starts_a_worker_whenever_an_offer_finds_none_idle():
    """Two workers for a burst of tasks: closed, the pool stays two; open, it grows, and every task still comes to rest."""
    pools = {}
    for open_loop in (False, True):
        config = scenario_config("baseline", 0, 30)
        config = replace(
            config,
            workload=replace(config.workload, arrival="bursts", burst_size=30),
            workers=replace(config.workers, workers=2, open_loop=open_loop),
        )
        world = World(config, 0)
        outcome = world.play()
        assert outcome.ok, outcome.verdicts
        pools[open_loop] = len(world.workers)
    assert pools[False] == 2 and pools[True] > 10


# ------------------------------------------------------------------ goodput_recovers


def _rows(answered: list[int], arrivals: int = 1, **columns) -> list[dict]:
    rows = []
    for index, count in enumerate(answered):
        row = {"t_s": 60.0 * index, "window_s": 60.0, "arrivals": arrivals, "queue_depth": 0}
        for fate in ("offered", "retried", "timed_out", "working", "abandoned"):
            row[f"model_provider.{fate}"] = columns.get(fate, [0] * len(answered))[index]
        row["model_provider.answered"] = count
        rows.append(row)
    return rows


TRIGGER = Fault(300.0, "slowdown", "model_provider", 420.0, placed=True)
CHECK = RecoveryConfig(baseline_s=300.0, bound_s=300.0, goodput_fraction=0.8)


def test_goodput_that_comes_back_within_the_bound_recovers():
    rows = _rows([60] * 5 + [0, 0, 10, 50, 60, 60, 60, 60, 60])
    verdict, judged = recovery.judge(rows, [TRIGGER], CHECK)
    assert verdict.status == "ok" and judged[0].recovered_after_s == 120.0
    assert recovery.metrics(judged)["recovery_s"] == 120.0


def test_goodput_that_stays_down_is_metastable_and_names_what_sustains_it():
    n = 14
    rows = _rows(
        [60] * 5 + [2] * (n - 5),
        offered=[60] * 5 + [100] * (n - 5),
        retried=[0] * 5 + [70] * (n - 5),
        timed_out=[0] * 5 + [90] * (n - 5),
        working=[5] * 5 + [200] * (n - 5),
        abandoned=[0] * 5 + [150] * (n - 5),
    )
    verdict, judged = recovery.judge(rows, [TRIGGER], CHECK)
    assert verdict.status == "violated" and verdict.violations == 1
    text = verdict.example[0]
    assert "not back" in text and "retry amplification" in text and "abandoned work" in text and "timed out" in text
    assert recovery.metrics(judged)["recovery_s"] is None


def test_a_run_whose_arrivals_stop_before_the_bound_cannot_tell():
    rows = _rows([60] * 5 + [0] * 9)
    for row in rows[6:]:
        row["arrivals"] = 0
    verdict, _ = recovery.judge(rows, [TRIGGER], CHECK)
    assert verdict.status == "unknown"


def test_without_a_placed_provider_fault_there_is_nothing_to_judge():
    drawn = replace(TRIGGER, placed=False)
    crash = Fault(300.0, "crash", "worker-001", 330.0, placed=True)
    assert recovery.judge(_rows([60] * 10), [drawn, crash], CHECK)[0].status == "unknown"


@pytest.mark.parametrize("bad", [{"bound_s": 0}, {"goodput_fraction": 1.5}, {"baseline_s": -1.0}])
def test_bad_recovery_settings_are_typed_errors(bad):
    with pytest.raises(InputError):
        RecoveryConfig(**bad)


# ------------------------------------------------------------- the review's edges


class _Fixed:
    """A provider's random stream that draws this much work for every call and never loses a response."""

    def __init__(self, work_s: float) -> None:
        self.work_s = work_s

    def expovariate(self, _rate: float) -> float:
        return self.work_s

    def random(self) -> float:
        return 0.99


def _fixed(work_s: float, **changes):
    env = simpy.Environment()
    landed: list = []
    config = replace(ProviderConfig(latency_s=1.0, overload_in_flight=1, rate_per_s=1e6), **changes)
    return env, SimProvider(env, "code_host", config, _Fixed(work_s), landed.append, lambda *a: "passed"), landed


@pytest.mark.parametrize("works_on", [False, True])
def test_work_that_ends_exactly_at_its_deadline_is_counted_once(works_on):
    """Rate 1/2 alone on a provider of one: 5 s of work ends at t=10, its deadline; nothing lands, no counter goes negative."""
    env, provider, landed = _fixed(5.0, works_past_deadline=works_on)
    outcomes = _calls(env, provider, 1, deadline_at=10.0)
    env.run()
    assert outcomes == [("ProviderTimeout", 10.0)] and landed == []
    assert (provider.in_flight, provider.abandoned) == (0, 0)
    after = _calls(env, provider, 1, deadline_at=1e9)  # the provider still serves
    env.run()
    assert after[0][0] == "answered" and len(landed) == 1


@pytest.mark.parametrize("works_on", [False, True])
def test_a_call_whose_caller_was_interrupted_is_still_dropped_or_abandoned_at_its_deadline(works_on):
    env, provider, _ = _fixed(100.0, works_past_deadline=works_on)

    def caller():
        try:
            yield from provider.call("k", "push", "t:1", "t1", "worker-1", 10.0)
        except simpy.Interrupt:
            return

    process = env.process(caller())
    env.run(until=1.0)
    process.interrupt("crash")
    env.run(until=11.0)
    assert (provider.in_flight, provider.abandoned) == ((1, 1) if works_on else (0, 0))


def test_a_capacity_drop_slows_calls_only_while_it_lasts():
    """10 s of work, one call on a provider of ten, a drop to a hundredth for the first 5 s: done at 5 + 9.5455 * 1.1 s."""
    env = simpy.Environment()
    config = ProviderConfig(latency_s=1.0, overload_in_flight=10, rate_per_s=1e6)
    provider = SimProvider(env, "code_host", config, _Fixed(10.0), [].append, lambda *a: "passed")
    provider.drop_capacity(until=5.0, factor=0.01)
    outcomes = _calls(env, provider, 1, deadline_at=1e9)
    env.run()
    done_by_drop = 5.0 / (1 + 10)
    assert outcomes[0] == ("answered", pytest.approx(5.0 + (10.0 - done_by_drop) * 1.1))


def test_a_recovery_bound_shorter_than_two_windows_is_refused():
    from shiftchange.sim import SimConfig

    with pytest.raises(InputError, match="bound_s"):
        SimConfig(recovery=RecoveryConfig(bound_s=90.0))
    with pytest.raises(InputError, match="baseline_s"):
        SimConfig(recovery=RecoveryConfig(baseline_s=30.0))
