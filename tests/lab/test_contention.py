"""Contention: every client wins the record once, races replay from their seed, and Brooker's orderings hold on average."""

from __future__ import annotations

import random

import pytest

from shiftchange.core import BackoffConfig, InputError
from shiftchange.core.config import BACKOFF_STRATEGIES
from shiftchange.lab import contention
from shiftchange.lab.contention import CLIENTS_MAX, COLUMNS, RaceConfig, contend, race

LOCKSTEP = RaceConfig(network_mean_s=0.010, network_sd_s=1e-12)
"""A network whose every trip takes 10 ms, so clients that start together stay together unless their backoff spreads them."""


def _means(clients: int, strategies: tuple[str, ...], seeds: int) -> dict[str, dict[str, float]]:
    table = contend(clients=(clients,), strategies=strategies, seeds=range(seeds))
    return table.groupby("strategy")[["calls", "completion_s"]].mean().to_dict("index")


@pytest.mark.parametrize("strategy", BACKOFF_STRATEGIES)
@pytest.mark.parametrize("clients", [1, 2, 17])
def test_every_client_succeeds_exactly_once(strategy: str, clients: int) -> None:
    """A finished race has one successful write per client, and every other write it sent was a conflict."""
    result = race(clients, BackoffConfig(strategy=strategy, base_s=0.005, cap_s=2.0), seed=3)
    assert result.successes == (1,) * clients
    assert result.calls == clients + result.conflicts
    assert result.calls >= clients
    assert result.completion_s > 0


def test_a_lone_client_writes_once_without_conflict() -> None:
    """With nobody to race, the first write succeeds: one call, no conflict."""
    result = race(1, BackoffConfig(strategy="exponential"), seed=0)
    assert (result.calls, result.conflicts) == (1, 0)


@pytest.mark.parametrize("strategy", ["none", "exponential"])
def test_without_jitter_lockstep_clients_win_one_per_round(strategy: str) -> None:
    """On a network without variance, clients without jitter stay in step: each round one wins, so N(N+1)/2 calls in N rounds."""
    clients = 12
    result = race(clients, BackoffConfig(strategy=strategy, base_s=0.005, cap_s=2.0), seed=0, config=LOCKSTEP)
    assert result.calls == clients * (clients + 1) // 2
    if strategy == "none":
        # A round is four 10 ms trips (read, reply, write, reply), so the last winner hears back after 40 ms per client.
        assert result.completion_s == pytest.approx(0.040 * clients)


def test_jitter_breaks_lockstep() -> None:
    """On the same network full jitter spreads the retries, so it conflicts less than lockstep's one winner a round."""
    clients = 12
    result = race(clients, BackoffConfig(strategy="full_jitter", base_s=0.005, cap_s=2.0), seed=0, config=LOCKSTEP)
    assert result.calls < clients * (clients + 1) // 2


def test_the_same_seed_replays_the_same_race() -> None:
    """A race is a function of its inputs: the same seed gives the same result, another seed another."""
    backoff = BackoffConfig(strategy="decorrelated_jitter", base_s=0.005, cap_s=2.0)
    assert race(30, backoff, seed=7) == race(30, backoff, seed=7)
    assert race(30, backoff, seed=7) != race(30, backoff, seed=8)


def test_a_race_leaves_the_global_random_module_alone() -> None:
    """Every draw comes from the race's own seeded generators, never the module-level one."""
    random.seed(11)
    before = random.getstate()
    race(20, BackoffConfig(strategy="full_jitter"), seed=1)
    assert random.getstate() == before


def test_contend_gives_one_row_per_strategy_clients_and_seed_in_order() -> None:
    """The table holds every (strategy, clients, seed), strategy slowest, and replays exactly."""
    table = contend(clients=(3, 5), strategies=("none", "full_jitter"), seeds=(4, 2))
    assert list(table.columns) == list(COLUMNS)
    keys = list(table[["strategy", "clients", "seed"]].itertuples(index=False, name=None))
    assert keys == [(s, c, seed) for s in ("none", "full_jitter") for c in (3, 5) for seed in (4, 2)]
    assert table.equals(contend(clients=(3, 5), strategies=("none", "full_jitter"), seeds=(4, 2)))
    row = table.iloc[-1]
    assert row["calls"] == race(5, BackoffConfig(strategy="full_jitter", base_s=0.005, cap_s=2.0), seed=2).calls


@pytest.mark.parametrize("clients", [0, -1, True, 2.5, "10", CLIENTS_MAX + 1])
def test_a_bad_client_count_is_an_input_error(clients: object) -> None:
    """Clients are a whole number from 1 to CLIENTS_MAX."""
    with pytest.raises(InputError, match="clients"):
        race(clients, BackoffConfig(), seed=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [-1, 1.5, None, False])
def test_a_bad_seed_is_an_input_error(seed: object) -> None:
    """A seed is a whole number, not negative."""
    with pytest.raises(InputError, match="seed"):
        race(3, BackoffConfig(), seed=seed)  # type: ignore[arg-type]


def test_race_refuses_what_is_not_a_config() -> None:
    """The backoff and the network are config objects; a dict or a strategy name fails with the type named."""
    with pytest.raises(InputError, match="BackoffConfig"):
        race(3, "full_jitter", seed=0)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="RaceConfig"):
        race(3, BackoffConfig(), seed=0, config={"network_mean_s": 0.01})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "fields",
    [{"network_mean_s": 0}, {"network_sd_s": -0.001}, {"calls_max": 0}, {"calls_max": 2.5}, {"network_mean_s": float("inf")}],
)
def test_a_bad_race_config_is_an_input_error(fields: dict[str, object]) -> None:
    """Every RaceConfig field is a positive finite number, and calls_max a whole one."""
    with pytest.raises(InputError, match="RaceConfig"):
        RaceConfig(**fields)  # type: ignore[arg-type]


def test_a_race_over_its_calls_limit_stops_with_an_input_error() -> None:
    """calls_max bounds a race's work: twenty clients with no backoff need far more than five writes."""
    with pytest.raises(InputError, match="calls_max"):
        race(20, BackoffConfig(strategy="none"), seed=0, config=RaceConfig(calls_max=5))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"strategies": ("full_jitter", "bounded_jitter")}, "unknown backoff strategy 'bounded_jitter'"),
        ({"strategies": "full_jitter"}, "must be a list"),
        ({"strategies": ()}, "at least one"),
        ({"clients": (10, 0)}, "clients"),
        ({"clients": (10, 10)}, "twice"),
        ({"seeds": (1, -2)}, "seed"),
        ({"seeds": []}, "at least one"),
        ({"base_s": 0.0}, "base_s"),
        ({"base_s": 3.0, "cap_s": 2.0}, "cap_s"),
    ],
)
def test_contend_checks_every_input_before_any_race(monkeypatch: pytest.MonkeyPatch, arguments: dict, message: str) -> None:
    """A bad strategy, client count, seed or backoff bound is one InputError, raised before the first race runs."""
    raced: list[object] = []
    monkeypatch.setattr(contention, "race", lambda *args, **kwargs: raced.append(args))
    with pytest.raises(InputError, match=message):
        contend(**{"clients": (2,), "seeds": (0,), **arguments})
    assert raced == []


def test_brookers_orderings_hold_at_fifty_clients() -> None:
    """At 50 clients, averaged over 100 seeds: full < equal < exponential <= none in calls; decorrelated is fastest of the backoffs."""
    means = _means(50, BACKOFF_STRATEGIES, seeds=100)
    calls = {name: means[name]["calls"] for name in BACKOFF_STRATEGIES}
    time_s = {name: means[name]["completion_s"] for name in BACKOFF_STRATEGIES}
    assert calls["full_jitter"] < calls["equal_jitter"] < calls["exponential"] <= calls["none"], calls
    assert calls["decorrelated_jitter"] < calls["exponential"], calls
    assert time_s["decorrelated_jitter"] < time_s["full_jitter"] < time_s["equal_jitter"] < time_s["exponential"], time_s


def test_decorrelated_jitter_does_a_little_more_work_than_full_jitter_at_a_hundred_clients() -> None:
    """At 100 clients decorrelated jitter sends more writes than full jitter, and finishes sooner."""
    means = _means(100, ("full_jitter", "decorrelated_jitter"), seeds=40)
    assert means["full_jitter"]["calls"] < means["decorrelated_jitter"]["calls"] < 1.5 * means["full_jitter"]["calls"], means
    assert means["decorrelated_jitter"]["completion_s"] < means["full_jitter"]["completion_s"], means
