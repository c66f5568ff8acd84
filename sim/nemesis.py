"""What breaks: a fault schedule drawn from the seed before the run, then applied on time and written into the history.

Drawing the whole schedule up front (Jepsen's nemesis generator, made
deterministic) is what lets the shrinker work: it removes faults from the
list and replays the rest exactly, with everything else drawn from streams
the schedule does not touch. Each switched-on kind of fault strikes as a
Poisson process over the arrival window, so the drain that follows is calm
and a correct core can bring every task to rest.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .history import Fault

if TYPE_CHECKING:
    from .world import World


def arrival_window_s(world: World) -> float:
    """How long the workload takes to arrive, on average: the span faults are drawn over."""
    workload = world.config.workload
    if workload.arrival == "bursts":
        return (workload.tasks // workload.burst_size) * workload.burst_interval_s + 1.0
    return workload.tasks / workload.arrival_rate_per_s


def draw_schedule(world: World) -> list[Fault]:
    """Every fault of the run, in time order, from the nemesis's own random stream."""
    nemesis = world.config.nemesis
    window_s = arrival_window_s(world)
    workers = [worker.worker_id for worker in world.workers]
    faults: list[Fault] = []
    plans = {
        "crash": (nemesis.crash_interval_s, lambda: world.config.workers.restart_s),
        "pause": (nemesis.pause_interval_s, lambda: nemesis.pause_s),
        "partition": (nemesis.partition_interval_s, lambda: nemesis.partition_s),
        "duplicate_burst": (nemesis.duplicate_interval_s, lambda: nemesis.duplicate_burst_s),
        "outage": (nemesis.outage_interval_s, lambda: nemesis.outage_s),
        "slow_tools": (nemesis.slow_tools_interval_s, lambda: nemesis.slow_tools_s),
        "revoked_credentials": (nemesis.revoked_interval_s, lambda: nemesis.revoked_s),
        "lost_responses": (nemesis.lost_responses_interval_s, lambda: nemesis.lost_responses_s),
    }
    for kind in nemesis.faults:
        rng = world.stream(f"nemesis:{kind}")  # one stream per kind: a shorter run draws a prefix of each kind's faults
        interval_s, duration = plans[kind]
        at = rng.expovariate(1.0 / interval_s)
        while at < window_s:
            faults.append(_fault(kind, at, at + duration(), rng, workers, nemesis))
            at += rng.expovariate(1.0 / interval_s)
    faults.sort(key=lambda fault: (fault.at, fault.kind, fault.target))
    return faults


def _fault(kind: str, at: float, until: float, rng: Any, workers: list[str], nemesis: Any) -> Fault:
    if kind in ("crash", "pause"):
        return Fault(at, kind, rng.choice(workers), until)
    if kind == "partition":
        group = sorted(rng.sample(workers, min(nemesis.partition_workers, len(workers))))
        return Fault(at, kind, ",".join(group), until)
    if kind in ("outage", "lost_responses"):
        return Fault(at, kind, rng.choice(("code_host", "model_provider")), until)
    if kind == "revoked_credentials":
        return Fault(at, kind, "code_host", until)
    return Fault(at, kind, "network" if kind == "duplicate_burst" else "workers", until)


def unleash(world: World, schedule: list[Fault]) -> Generator[Any, Any, None]:
    """The nemesis process: apply each fault at its time and record it."""
    env = world.env
    for fault in schedule:
        if fault.at > env.now:
            yield env.timeout(fault.at - env.now)
        fault = _aim(world, fault)
        apply(world, fault)
        world.history.append(fault)


def _aim(world: World, fault: Fault) -> Fault:
    """A crash or pause of an idle worker tests nothing: it falls on the next busy worker after its target, if any."""
    if fault.kind not in ("crash", "pause") or world.worker(fault.target).holding is not None:
        return fault
    workers = world.workers
    start = next(index for index, worker in enumerate(workers) if worker.worker_id == fault.target)
    for step in range(1, len(workers)):
        worker = workers[(start + step) % len(workers)]
        if worker.holding is not None and worker.alive:
            return replace(fault, target=worker.worker_id)
    return fault


def apply(world: World, fault: Fault) -> None:
    nemesis = world.config.nemesis
    if fault.kind == "crash":
        worker = world.worker(fault.target)
        if worker.alive:
            world.metrics.crashed(worker, world.env.now)
            worker.crash()
            restart = world.env.timeout(fault.until - fault.at)
            restart.callbacks.append(lambda _event: worker.start())
    elif fault.kind == "pause":
        world.worker(fault.target).pause(fault.until)
    elif fault.kind == "partition":
        world.transport.cut(fault.target.split(","), fault.until)
    elif fault.kind == "duplicate_burst":
        world.transport.duplicate_until = fault.until
        world.transport.duplicate_probability = nemesis.duplicate_burst_probability
    elif fault.kind == "outage":
        world.providers.by_name[fault.target].down_until = fault.until
    elif fault.kind == "revoked_credentials":
        world.providers.by_name[fault.target].revoked_until = fault.until
    elif fault.kind == "lost_responses":
        provider = world.providers.by_name[fault.target]
        provider.lossy_until = fault.until
        provider.lossy_probability = nemesis.lost_responses_probability
    elif fault.kind == "slow_tools":
        world.slow_tools_until = fault.until
