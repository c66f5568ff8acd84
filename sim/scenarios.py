"""Named scenarios: each a world that stresses one part of the protocol, plus the mixed run and swarm testing.

A scenario is a function from seed to `SimConfig`: most ignore the seed (it
drives the run, not the setup); swarm uses it to switch on a random subset
of the faults and settings, as swarm testing does, so that over many seeds
faults meet in combinations nobody thought to write down. `mixed` is the
main job: every kind of fault at a moderate rate.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from shiftchange.core import InputError

from .config import FAULTS, FaultSpec, NemesisConfig, NetworkConfig, RecoveryConfig, SimConfig, WorkloadConfig

BASE = SimConfig()


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    summary: str
    build: Callable[[int], SimConfig]


def _nemesis(*faults: str, **rates: float) -> NemesisConfig:
    return replace(NemesisConfig(faults=faults), **rates)


def _with(config: SimConfig = BASE, **parts: object) -> SimConfig:
    return replace(config, **parts)


def _workload(**changes: object) -> WorkloadConfig:
    return replace(BASE.workload, **changes)


def _swarm(seed: int) -> SimConfig:
    """A random subset of every fault, and random provider idempotency, drawn from the seed."""
    rng = random.Random(f"shiftchange:{seed}:swarm")
    faults = tuple(fault for fault in FAULTS if rng.random() < 0.5)
    network = replace(
        BASE.network,
        loss_probability=rng.choice((0.0, 0.01)),
        response_loss_probability=rng.choice((0.0, 0.02)),
        duplicate_probability=rng.choice((0.0, 0.05)),
    )
    idempotent = rng.random() < 0.5
    return _with(
        nemesis=_nemesis(*faults, crash_interval_s=300.0, pause_interval_s=600.0, partition_interval_s=600.0, outage_interval_s=900.0),
        network=network,
        code_host=replace(BASE.code_host, supports_idempotency=idempotent),
        workload=_workload(cancel_probability=rng.choice((0.02, 0.2))),
    )


STORM_TRIGGER = FaultSpec.parse("slowdown model_provider at=400 for=120 factor=4")
"""The retry-storm scenario's trigger: for two minutes every call the model provider starts needs four times its work."""
STORM = _with(
    workload=_workload(
        arrival_rate_per_s=0.1,
        budget=replace(BASE.workload.budget, attempts_max=8, repeated_signatures_max=3),
    ),
    model_provider=replace(BASE.model_provider, overload_in_flight=12, contention=1.0, works_past_deadline=True),
    workers=replace(BASE.workers, open_loop=True),
    agent=replace(BASE.agent, call_deadline_s=30.0),
    nemesis=NemesisConfig(placed=(STORM_TRIGGER,)),
    recovery=RecoveryConfig(baseline_s=300.0, bound_s=480.0),
)
"""A world that can go metastable: open-loop arrivals keep a small model provider (goodput peaks at 12 calls in progress,
about 1 call/s, and falls beyond) about half busy; it keeps working on calls whose callers gave up (after 30 s).
A slowdown of two minutes makes calls time out; retried at once, each timeout leaves abandoned work behind. Tasks may take
eight Attempts and repeat a failure signature three times, so the slowdown builds a backlog instead of dead-lettering
the tasks it hits."""

SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "mixed",
            "the main job: every kind of fault at a moderate rate, the workers loaded to about two thirds",
            lambda _seed: _with(nemesis=_nemesis(*FAULTS, slow_tools_interval_s=1800.0, slow_tools_factor=3.0)),
        ),
        Scenario("baseline", "no faults: the workload alone (wrong answers, nonconvergent tasks, cancellations)", lambda _seed: BASE),
        Scenario(
            "partition",
            "groups of workers cut off from the orchestrator for two minutes at a time",
            lambda _seed: _with(nemesis=_nemesis("partition", partition_interval_s=240.0, partition_workers=6)),
        ),
        Scenario(
            "duplicate-delivery",
            "requests delivered twice, responses lost, bursts of duplicates",
            lambda _seed: _with(
                network=NetworkConfig(duplicate_probability=0.15, response_loss_probability=0.05, loss_probability=0.02),
                nemesis=_nemesis("duplicate_burst", "lost_responses", duplicate_interval_s=300.0, lost_responses_interval_s=300.0),
            ),
        ),
        Scenario(
            "slow-tools",
            "tool calls with long tails: eight times slower for five minutes at a time",
            lambda _seed: _with(nemesis=_nemesis("slow_tools", slow_tools_interval_s=400.0)),
        ),
        Scenario(
            "provider-outage",
            "provider outages, revoked credentials and accepted-then-timed-out calls, at a code host without idempotency keys",
            lambda _seed: _with(
                nemesis=_nemesis(
                    "outage",
                    "revoked_credentials",
                    "lost_responses",
                    outage_interval_s=240.0,
                    outage_s=120.0,
                    lost_responses_interval_s=300.0,
                ),
                code_host=replace(BASE.code_host, supports_idempotency=False, accept_then_timeout_probability=0.05),
            ),
        ),
        Scenario(
            "zombie-worker",
            "stop-the-world pauses longer than the lease: workers wake believing they still own their Attempt",
            lambda _seed: _with(nemesis=_nemesis("pause", "crash", pause_interval_s=60.0, pause_s=80.0, crash_interval_s=200.0)),
        ),
        Scenario(
            "crash-restart",
            "a worker crashes every ten seconds, anywhere in its workflow (one code-host call in ten loses its response)",
            lambda _seed: _with(
                nemesis=_nemesis("crash", crash_interval_s=10.0), code_host=replace(BASE.code_host, accept_then_timeout_probability=0.1)
            ),
        ),
        Scenario(
            "retry-storm",
            "a model provider half busy, which works on after its callers give up, is four times slower for two minutes",
            lambda _seed: STORM,
        ),
        Scenario(
            "cancel-storm",
            "operators cancel half of all tasks, most of them mid-run",
            lambda _seed: _with(workload=_workload(cancel_probability=0.5, cancel_after_s=60.0), nemesis=_nemesis("crash", "pause")),
        ),
        Scenario(
            "capacity-overload",
            "arrivals at about four times what the workers can serve, with four-minute deadlines: backpressure and load shedding",
            lambda _seed: _with(
                workload=_workload(arrival_rate_per_s=2.0, deadline_s=240.0),
                reliability=replace(
                    BASE.reliability, admission=replace(BASE.reliability.admission, queue_depth_max=60, queue_age_max_s=120.0)
                ),
            ),
        ),
        Scenario(
            "budget-burn",
            "a fifth of the tasks are hostile inputs whose agents keep calling the model",
            lambda _seed: _with(workload=_workload(runaway_probability=0.2)),
        ),
        Scenario("swarm", "each seed switches on a random subset of the faults and settings (swarm testing)", _swarm),
    )
}


def scenario_config(name: str, seed: int, tasks: int | None = None) -> SimConfig:
    """The config of scenario `name` for this seed, with `tasks` tasks if given."""
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise InputError(f"unknown scenario {name!r}; use one of {', '.join(SCENARIOS)}")
    config = scenario.build(seed)
    return config if tasks is None else config.with_tasks(tasks)
