"""The world: one SimPy environment holding the core and every role around it, and `run`, which plays it and judges it.

A run is a function of (code, config, seed, anti-pattern, fault schedule).
Randomness comes from one `random.Random` per role, each seeded from the run
seed and the role's name, so removing a fault or a task changes only what
depends on it; the core gets its own seeded generator for backoff jitter.
Nothing reads the wall clock: the core's clock is the SimPy clock.

The store is a `MemoryStore` that keeps no history of its own: every event
goes straight to the checkers, the metrics and the control plane, and
retired tasks are forgotten, so memory follows the live set and not the run.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from shiftchange.core import InputError, MemoryStore, Orchestrator

from .checkers import all_checkers
from .config import SimConfig
from .control import ControlPlane
from .history import CheckContext, Fault, History, Verdict
from .metrics import Metrics
from .nemesis import draw_schedule, unleash
from .network import Transport
from .provider import Providers, SimProvider
from .worker import Behaviour, Worker
from .workload import arrivals, ci_verdict


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes (the benchmark's denominator)."""

    def __init__(self) -> None:
        super().__init__()
        self.processed = 0

    def step(self) -> None:
        self.processed += 1
        super().step()


@dataclass
class Outcome:
    """Everything a run produced: the verdicts, the metrics, and what identifies it."""

    scenario: str
    seed: int
    tasks: int
    antipattern: str | None
    config: SimConfig
    verdicts: dict[str, Verdict]
    metrics: dict[str, Any]
    digest: str
    schedule: list[Fault]
    faults_kept: tuple[int, ...] | None
    events_processed: int
    history_entries: int
    tail: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(verdict.ok for verdict in self.verdicts.values())


class World:
    """The roles of DESIGN.md in one environment: workload, workers, transport, providers, nemesis, control plane, checkers."""

    def __init__(self, config: SimConfig, seed: int, antipattern: Any = None, keep_history: bool = False) -> None:
        if antipattern is not None:
            config = antipattern.configure(config)
        self.config = config
        self.seed = seed
        self.antipattern = antipattern
        self.env = CountingEnvironment()
        self.rng_workload = _stream(seed, "workload")
        self.rng_work = _stream(seed, "work")
        self.profiles: dict[str, Any] = {}
        self.arrivals_done_at: float | None = None
        self.slow_tools_until = -1.0
        self.behaviour = antipattern.behaviour if antipattern is not None else Behaviour()
        context = CheckContext(config.core.lease_ttl_s, config.reliability.attempt_spend_max_usd, config.core.reason_length_min)
        self.history = History(all_checkers(context), keep_all=keep_history)
        self.metrics = Metrics(self)
        self.transport = Transport(self.env, config.network, _stream(seed, "network"))
        code_host = SimProvider(
            self.env, "code_host", config.code_host, _stream(seed, "code_host"), self._landed, lambda *a: ci_verdict(self, *a)
        )
        model = SimProvider(self.env, "model_provider", config.model_provider, _stream(seed, "model"), self._landed, lambda *a: "passed")
        self.providers = Providers(code_host, model)
        self.store = antipattern.make_store() if antipattern is not None else MemoryStore(keep_events=False)
        orchestrator_class = antipattern.orchestrator if antipattern is not None else Orchestrator
        self.orchestrator = orchestrator_class(
            self.store, _SimClock(self.env), self.providers, config.core, config.reliability, rng=_stream(seed, "core")
        )
        self.control = ControlPlane(self)
        self.store.subscribe(self._event)
        self.dispatch = simpy.Store(self.env)
        self.workers = [Worker(self, f"worker-{index:03d}") for index in range(config.workers.workers)]
        self._workers = {worker.worker_id: worker for worker in self.workers}

    # ------------------------------------------------------------ wiring

    def _event(self, event: Any) -> None:
        self.history.append(event)
        self.metrics.event(event)
        self.control.note(event)

    def _landed(self, landed: Any) -> None:
        self.history.append(landed)
        self.metrics.landed(landed)

    def record(self, retired: Any) -> None:
        self.history.append(retired)
        self.metrics.retired(retired)

    def stream(self, role: str) -> random.Random:
        return _stream(self.seed, role)

    def worker(self, worker_id: str) -> Worker:
        return self._workers[worker_id]

    def tool_time_s(self) -> float:
        """One slow tool call's local work; a slow-tool tail multiplies it."""
        work_s = self.rng_work.expovariate(1.0 / self.config.workload.tool_call_s)
        return work_s * self.config.nemesis.slow_tools_factor if self.env.now < self.slow_tools_until else work_s

    def peek(self, attempt_id: str) -> Any:
        """The live Attempt record, read-only (no copy): for the control plane's cheap questions."""
        with self.store.transaction() as tx:
            return tx.attempt(attempt_id)

    def peek_latest(self, task_id: str) -> Any:
        with self.store.transaction() as tx:
            return tx.attempts_of(task_id)[-1]

    def peek_task_state(self, task_id: str) -> str | None:
        with self.store.transaction() as tx:
            task = tx.task(task_id)
            return None if task is None else task.state

    def live_tasks(self) -> list[str]:
        return list(self.profiles)

    def forget(self, task_id: str) -> None:
        self.profiles.pop(task_id, None)

    def _retired_everything(self) -> bool:
        return self.arrivals_done_at is not None and not self.profiles

    # ------------------------------------------------------------ the run

    def run(self, schedule: list[Fault], progress: Callable[[float, int, int], None] | None = None) -> None:
        """Play the workload under the schedule until every task retired or the drain ran out, then drain.

        `progress`, if given, is called every few simulated minutes with (simulated seconds, tasks retired, tasks).
        """
        env = self.env
        for worker in self.workers:
            worker.start()
        env.process(arrivals(self))
        env.process(unleash(self, schedule))
        env.process(self.control.admission())
        env.process(self.control.reaper())
        env.process(self.control.loop())
        horizon_s = self.config.workload.drain_s
        check_s = self.config.control.loop_interval_s * 10
        while True:
            env.run(until=env.now + check_s)
            if progress is not None:
                progress(env.now, self.metrics.tasks_retired, self.config.workload.tasks)
            if self._retired_everything():
                break
            if self.arrivals_done_at is not None and env.now >= self.arrivals_done_at + horizon_s:
                break
        self.control.drain()

    def calls(self) -> dict[str, int]:
        return {name: provider.calls for name, provider in self.providers.by_name.items()}


class _SimClock:
    """The core's clock, read from SimPy's."""

    __slots__ = ("_env",)

    def __init__(self, env: Any) -> None:
        self._env = env

    def now(self) -> float:
        return self._env.now


def _stream(seed: int, role: str) -> random.Random:
    """An independent random stream for one role (string seeds hash with SHA-512: stable across processes)."""
    return random.Random(f"shiftchange:{seed}:{role}")


def play(
    config: SimConfig,
    seed: int,
    scenario: str = "custom",
    antipattern: Any = None,
    faults_kept: tuple[int, ...] | None = None,
    keep_history: bool = False,
    progress: Callable[[float, int, int], None] | None = None,
) -> Outcome:
    """Build a world, draw its fault schedule (or keep only `faults_kept` of it), run it, and judge it."""
    world = World(config, seed, antipattern, keep_history)
    schedule = draw_schedule(world)
    if faults_kept is not None and any(not 0 <= index < len(schedule) for index in faults_kept):
        has = f"{len(schedule)} (indices 0 to {len(schedule) - 1})" if schedule else "none"
        raise InputError(f"--faults names a fault outside this seed's schedule of faults, which has {has}")
    played = schedule if faults_kept is None else [schedule[index] for index in sorted(set(faults_kept))]
    world.run(played, progress)
    verdicts = world.history.verdicts()
    return Outcome(
        scenario=scenario,
        seed=seed,
        tasks=world.config.workload.tasks,
        antipattern=None if antipattern is None else antipattern.name,
        config=world.config,
        verdicts=verdicts,
        metrics=world.metrics.summary(world.env.now, world.calls()),
        digest=world.history.digest(),
        schedule=schedule,
        faults_kept=faults_kept,
        events_processed=world.env.processed,
        history_entries=world.history.count,
        tail=list(world.history.tail),
    )


__all__ = ["CountingEnvironment", "Outcome", "World", "play"]
