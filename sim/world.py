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
from dataclasses import dataclass, field, replace
from typing import Any

import simpy

from shiftchange.agent import AgentConfig, ChapterWorkflow, WorkerSeams
from shiftchange.agent import agent_config as convert
from shiftchange.checkers import recovery
from shiftchange.checkers.history import UNKNOWN, CheckContext, Fault, History, Verdict
from shiftchange.checkers.rules import all_checkers
from shiftchange.core import InputError, MemoryStore, Orchestrator, Seams
from shiftchange.core.table import Table, table_for

from .config import PROVIDERS, SimConfig
from .control import ControlContext, ControlPlane
from .metrics import Metrics
from .nemesis import Aimed, Targets, draw_schedule, unleash
from .network import Transport
from .provider import Providers, SimProvider
from .recorder import Recorder
from .worker import Worker, WorkerContext
from .workload import Workbench, arrivals, ci_verdict


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
    series: list[dict[str, Any]] = field(default_factory=list)
    """The recorder's rows, one per window of `config.series.window_s` (empty when the run recorded none)."""

    @property
    def ok(self) -> bool:
        return all(verdict.ok for verdict in self.verdicts.values())


class World:
    """The roles of DESIGN.md in one environment: workload, workers, transport, providers, nemesis, control plane, recorder, checkers.

    The world builds the roles and wires them; each role gets a small
    context of what it uses, never the world. After `play`, a study may read
    the roles (`orchestrator`, `store`, `metrics`, `recorder`, `providers`,
    `transport`, `workers`) of the run it just played.
    """

    def __init__(
        self,
        config: SimConfig,
        seed: int,
        antipattern: Any = None,
        keep_history: bool = False,
        series: bool = True,
        history_sink: Callable[[Any], None] | None = None,
        table: Table | None = None,
    ) -> None:
        if antipattern is not None:
            config = antipattern.configure(config)
        base = table_for(table)
        self.table = antipattern.table(base) if antipattern is not None else base
        """The transition table this world's orchestrator runs: the one given (default: the packaged), edited by an anti-pattern."""
        self.config = config
        self.seed = seed
        self.antipattern = antipattern
        self.env = env = CountingEnvironment()
        keyless = frozenset(name for name in PROVIDERS if not getattr(config, name).supports_idempotency)
        context = CheckContext(config.core.lease_ttl_s, config.reliability.attempt_spend_max_usd, config.core.reason_length_min, keyless)
        self.history = History(all_checkers(context), keep_all=keep_history, sink=history_sink)
        self.bench = Workbench(env, config.workload, self.stream("work"))
        self.recorder = Recorder(env, config.series.window_s, PROVIDERS, self._gauges, self.table.leased) if series else None
        self.metrics = Metrics(config.core.lease_ttl_s, self.recorder)
        self.transport = Transport(env, config.network, self.stream("network"))
        workload = config.workload
        self._workflow = config.workflow
        self._runaway = replace(self._workflow, model_calls=workload.runaway_calls)
        observer = self.recorder
        code_host = SimProvider(
            env,
            "code_host",
            config.code_host,
            self.stream("code_host"),
            self._landed,
            lambda *found: ci_verdict(self.bench, seed, *found),
            observer,
        )
        model = SimProvider(
            env, "model_provider", config.model_provider, self.stream("model"), self._landed, lambda *found: "passed", observer
        )
        self.providers = Providers(code_host, model)
        self.store = antipattern.make_store() if antipattern is not None else MemoryStore(keep_events=False)
        seams = antipattern.seams if antipattern is not None else Seams()
        self.orchestrator = Orchestrator(
            self.store,
            _SimClock(env),
            self.providers,
            config.core,
            config.reliability,
            rng=self.stream("core"),
            seams=seams,
            table=self.table,
        )
        offers = _OpenLoopOffers(env, self._hire) if config.workers.open_loop else simpy.Store(env)
        self.control = ControlPlane(
            ControlContext(
                env,
                self.orchestrator,
                self.store,
                offers,
                self.bench,
                self.metrics,
                self._retired,
                self._forget,
                config.control,
                config.workload.ci_s,
                blind_loop=antipattern is not None and antipattern.blind_loop,
            )
        )
        self.store.subscribe(self._event)
        self.aimed = Aimed(self.history.append)
        """Pauses armed to strike a worker just before it sends a named call (`before=`), as the nemesis arms them."""
        worker_context = WorkerContext(
            env,
            self.orchestrator,
            self.store,
            self.transport,
            self.providers.by_name,
            offers,
            self.bench,
            self._workflow_of,
            self.metrics,
            antipattern.worker_seams if antipattern is not None else WorkerSeams(),
            agent_config(config),
            config.core.heartbeat_interval_s,
            config.reliability.backoff,
            self.stream("workers"),
            self.aimed,
        )
        self._worker_context = worker_context
        self.workers = [Worker(worker_context, f"worker-{index:03d}") for index in range(config.workers.workers)]
        """The pool: the workers the run starts with, then (open loop) every worker started for an offer, in order."""
        self.schedule = draw_schedule(
            config.nemesis, config.workload, config.workers.restart_s, [worker.worker_id for worker in self.workers], self.stream
        )
        """Every fault of the run, drawn from the seed and placed by the config, in time order: what `--faults` indexes."""

    # ------------------------------------------------------------ wiring

    def _hire(self) -> None:
        """Open loop: an Attempt is being offered and no worker is idle, so one more joins the pool for it."""
        worker = Worker(self._worker_context, f"worker-{len(self.workers):03d}")
        self.workers.append(worker)
        worker.start()

    def _workflow_of(self, task_id: str) -> ChapterWorkflow:
        """The chapter's workflow as the workload sizes it; a runaway task's agent keeps calling the model.

        An offer may outlive its task (offered again, then retired): its claim is refused, whatever the workflow.
        """
        profile = self.bench.profiles.get(task_id)
        return self._runaway if profile is not None and profile.runaway else self._workflow

    def _event(self, event: Any) -> None:
        self.history.append(event)
        self.metrics.event(event)
        self.control.note(event)
        if self.aimed.waiting:
            self.aimed.heard(event)
        if self.recorder is not None:
            self.recorder.event(event, self._spend)

    def _landed(self, landed: Any) -> None:
        self.history.append(landed)
        self.metrics.landed(landed)
        if self.recorder is not None:
            self.recorder.landed(landed)

    def _retired(self, retired: Any) -> None:
        self.history.append(retired)
        self.metrics.retired(retired)
        if self.recorder is not None:
            self.recorder.retired(retired)

    def _forget(self, task_id: str) -> None:
        self.store.forget(task_id)
        self.providers.forget(task_id)
        self.bench.forget(task_id)

    def _spend(self, attempt_id: str) -> tuple[float, int]:
        attempt = self.control.peek(attempt_id)
        return (attempt.cost_usd, attempt.tokens) if attempt is not None else (0.0, 0)

    def _gauges(self, now: float) -> dict[str, Any]:
        """What the recorder samples as a window closes: queue, calls open at each provider, each breaker's state."""
        admission = self.orchestrator.admission
        gauges: dict[str, Any] = {"queue_depth": admission.queue_depth(), "queue_age_s": round(admission.queue_age_s(now), 6)}
        for name, provider in self.providers.by_name.items():
            gauges[f"{name}.in_flight"] = provider.open_calls
            gauges[f"{name}.working"] = provider.in_flight
            gauges[f"{name}.abandoned"] = provider.abandoned
            gauges[f"{name}.breaker"] = self.orchestrator.breakers.state(name, now)
        return gauges

    def stream(self, role: str) -> random.Random:
        return _stream(self.seed, role)

    # ------------------------------------------------------------ the run

    def kept(self, faults_kept: tuple[int, ...] | None) -> list[Fault]:
        """The faults of the schedule a run plays: all, or those `faults_kept` indexes (bad indices are bad input)."""
        schedule = self.schedule
        if faults_kept is None:
            return schedule
        if any(not 0 <= index < len(schedule) for index in faults_kept):
            has = f"{len(schedule)} (indices 0 to {len(schedule) - 1})" if schedule else "none"
            raise InputError(f"--faults names a fault outside this seed's schedule of faults, which has {has}")
        return [schedule[index] for index in sorted(set(faults_kept))]

    def run(self, schedule: list[Fault], progress: Callable[[float, int, int], None] | None = None) -> None:
        """Play the workload under the schedule until every task retired or the drain ran out, then drain.

        `progress`, if given, is called every few simulated minutes with (simulated seconds, tasks retired, tasks).
        """
        env = self.env
        for worker in self.workers:
            worker.start()
        env.process(arrivals(self.bench, self.orchestrator, self.stream("workload"), self.control.cancel))
        targets = Targets(env, self.workers, self.transport, self.providers, self.bench, self.history.append, self.aimed)
        env.process(unleash(targets, schedule))
        env.process(self.control.admission())
        env.process(self.control.reaper())
        env.process(self.control.loop())
        if self.recorder is not None:
            env.process(self.recorder.run())
        horizon_s = self.config.workload.drain_s
        check_s = self.config.control.loop_interval_s * 10
        while True:
            env.run(until=env.now + check_s)
            if progress is not None:
                progress(env.now, self.metrics.tasks_retired, self.config.workload.tasks)
            if self.bench.all_retired():
                break
            done_at = self.bench.arrivals_done_at
            if done_at is not None and env.now >= done_at + horizon_s:
                break
        self.control.drain()
        if self.recorder is not None:
            self.recorder.close()

    def play(
        self,
        scenario: str = "custom",
        faults_kept: tuple[int, ...] | None = None,
        progress: Callable[[float, int, int], None] | None = None,
    ) -> Outcome:
        """Run this world under its schedule (or the kept part of it) and judge it.

        A KeyboardInterrupt (Ctrl-C) while it runs becomes `Interrupted`, whose `partial()` judges what was played.
        """
        kept = self.kept(faults_kept)
        try:
            self.run(kept, progress)
        except KeyboardInterrupt:
            raise Interrupted(self, scenario, faults_kept) from None
        return self.judge(scenario, faults_kept, kept)

    def judge(self, scenario: str, faults_kept: tuple[int, ...] | None, kept: list[Fault] | None) -> Outcome:
        """The Outcome of what this world played so far; `kept=None` (the run did not end) leaves recovery unjudged."""
        verdicts = self.history.verdicts()
        metrics = self.metrics.summary(self.env.now, self.calls())
        if self.config.recovery is not None and kept is None:
            verdicts[recovery.NAME] = Verdict(recovery.NAME, UNKNOWN, 0, ("the run was interrupted before its time series ended",))
        elif self.config.recovery is not None:
            verdicts[recovery.NAME], judged = recovery.judge(self.recorder.rows if self.recorder else [], kept, self.config.recovery)
            metrics.update(recovery.metrics(judged))
        return Outcome(
            scenario=scenario,
            seed=self.seed,
            tasks=self.config.workload.tasks,
            antipattern=None if self.antipattern is None else self.antipattern.name,
            config=self.config,
            verdicts=verdicts,
            metrics=metrics,
            digest=self.history.digest(),
            schedule=self.schedule,
            faults_kept=faults_kept,
            events_processed=self.env.processed,
            history_entries=self.history.count,
            tail=list(self.history.tail),
            series=[] if self.recorder is None else self.recorder.rows,
        )

    def calls(self) -> dict[str, int]:
        return {name: provider.calls for name, provider in self.providers.by_name.items()}


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `World.play`: still a KeyboardInterrupt, but holding the world, so what it played can be judged."""

    def __init__(self, world: World, scenario: str, faults_kept: tuple[int, ...] | None) -> None:
        super().__init__(f"interrupted at simulated second {world.env.now:.0f}")
        self.world = world
        self.scenario = scenario
        self.faults_kept = faults_kept

    def partial(self) -> Outcome:
        """The run judged as far as it went: checkers of final records are unknown while tasks live; nothing is drained."""
        return self.world.judge(self.scenario, self.faults_kept, None)


class _OpenLoopOffers(simpy.Store):
    """The offers of an open-loop world: putting one when no worker waits for it starts a new worker first."""

    def __init__(self, env: Any, hire: Callable[[], None]) -> None:
        super().__init__(env)
        self._hire = hire

    def put(self, item: Any) -> Any:
        if len(self.get_queue) <= len(self.items):  # every idle worker already has an offer waiting for it
            self._hire()
        return super().put(item)


def agent_config(config: SimConfig) -> AgentConfig:
    """What the simulator's agents run with: the config's `agent`, through the agent's one converter."""
    return convert(config.core, config.agent)


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
    series: bool = True,
    history_sink: Callable[[Any], None] | None = None,
    table: Table | str | None = None,
) -> Outcome:
    """Build a world, play its fault schedule (or keep only `faults_kept` of it), and judge it.

    `series=False` records no time series; `history_sink`, if given, receives every history entry as it happens.
    `table` is the spec the orchestrator runs (a `Table`, a spec folder or git revision; default: the packaged one).
    """
    world = World(config, seed, antipattern, keep_history, series, history_sink, table_for(table))
    return world.play(scenario, faults_kept, progress)


__all__ = ["CountingEnvironment", "Interrupted", "Outcome", "World", "play"]
