"""A worker in simulated time: a SimPy driver of the agent (`shiftchange.agent.Agent`), which makes every decision.

The worker protocol (claim, resume, start, the workflow's steps through the
tool gateway, retries inside an Attempt, reading refusals, completing,
acknowledging a cancellation) lives once, in `shiftchange.agent`, for the
simulator, the explorer and the real runtime alike. This driver only turns
the agent's commands into SimPy events and hands the answers back:

| command | here |
|---|---|
| `Call` | the contract, across the `Transport` (latency, loss, duplicates, partitions) |
| `Perform` | the `SimProvider`'s `call`; a timeout or refusal is the answer, not an exception |
| `Wait` | a timeout of `seconds` |
| `Work` | a timeout of the workbench's time for that kind of work (`tool_time_s`, `commit_time_s`) |
| `Look` | `Looked.read` on the store, at once: reading a record has no network cost here |

It never reads a refusal's code or failed guards (`tests/project/test_layers.py`
reads its source for them): a decision found here would belong in the agent.

Heartbeats keep the agent's `Cadence` from the moment the claim is heard
accepted (`shiftchange.agent.heartbeat` says why and how many land inside a
lease). They run as a chain of timer callbacks rather than a process: a
renewal is three events (the beat, the request's way in, the answer's way
back), where a process per renewal cost five. The agent reads each answer
(`Agent.renewed`); when it says so the heartbeat interrupts the workflow's
process, which asks `Agent.interrupted` what to do instead of the command it
was carrying out.

A crash interrupts the worker and wipes its memory: it restarts with a
fresh `Agent`, while calls it sent still land and are judged by their
fences. A stop-the-world pause freezes the driver, never the agent: every
answer heard during the pause, the workflow's and the heartbeat's, is handed
over when the pause ends, and the beats it swallowed are not sent late. The
worker then carries on believing it owns its Attempt, and the fences must
refuse it.

What a worker holds and when it lets go, its renewals, pauses and crashes
are reported to a `LeaseObserver` (`metrics.Metrics`, the lease ground
truth), which judges each expiry false or true at the instant the lease ran
out.

The driver needs no `World`: any object with the orchestrator's contract
methods, any provider with `call`, any store with `get_attempt` will do, so
a unit test can feed it scripted answers and read back the contract calls it
made (`tests/sim/test_world.py`, "the worker drives the agent against a
scripted orchestrator"; `tests/agent/test_drivers.py` feeds the very same
script to the three drivers).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from simpy import Interrupt

from shiftchange.agent import Agent, AgentConfig, Cadence, Call, Look, Looked, Perform, Stop, Wait, Work, WorkerSeams, Workflow
from shiftchange.core import Backoff, BackoffConfig, ProviderRefused, ProviderTimeout

from .nemesis import wakes_when_replaced

CRASH, RENEWED = "crash", "renewed"
"""Why the workflow's process is interrupted: the worker died, or a renewal's answer told the agent to stop what it does."""


@dataclass(frozen=True, slots=True)
class Offer:
    """An admitted Attempt offered to the workers (the agent looks up its predecessor itself once it holds the claim)."""

    task_id: str
    attempt_id: str
    workspace: str


class LeaseObserver(Protocol):
    """Who hears what a worker holds, lets go of, and how its renewals fare (the lease ground truth)."""

    def holding(self, worker_id: str, attempt_id: str, at: float) -> None: ...

    def released(self, worker_id: str, attempt_id: str, at: float) -> None: ...

    def paused(self, worker_id: str, at: float, until: float) -> None: ...

    def crashed(self, worker_id: str, attempt_id: str | None, at: float) -> None: ...

    def renewal(self, outcome: str) -> None:
        """One renewal's fate as the worker saw it: sent, unanswered (the request or its answer lost, or late), accepted or refused."""
        ...


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a worker uses of the world: the clock, the orchestrator across the network, the store it reads, the providers,
    the offers, its local work, and how its agent is configured."""

    env: Any
    orchestrator: Any
    """Anything with the orchestrator's contract methods (the `Orchestrator`, or a scripted fake in a unit test)."""
    store: Any
    """What a `Look` reads (`get_attempt`)."""
    transport: Any
    providers: Mapping[str, Any]
    """Each provider by dependency name ("code_host", "model_provider"): an object with `call`, like `SimProvider`."""
    offers: Any
    """The simpy.Store the control plane puts admitted Attempts into."""
    bench: Any
    """The workload's `Workbench`: how long each kind of local work takes (`tool_time_s()`, `commit_time_s()`)."""
    workflow_of: Callable[[str], Workflow]
    """Each task's workflow (a runaway task's agent keeps calling the model)."""
    leases: LeaseObserver
    seams: WorkerSeams
    """How the agent misbehaves under an anti-pattern (the defaults: it does not)."""
    agent: AgentConfig
    heartbeat_interval_s: float
    """The core's heartbeat interval: how often the agent renews the lease it holds."""
    backoff: BackoffConfig
    """The core's backoff, which also paces the agent's retries of a timed-out provider call."""
    rng: Any
    """The workers' random stream (their backoff jitter)."""
    aimed: Any = None
    """The nemesis's pauses armed for a moment (`Aimed.take(worker_id, call, now)`), or None: none are ever aimed."""


class Worker:
    """One worker process, restartable, with at most one Attempt at a time."""

    def __init__(self, context: WorkerContext, worker_id: str) -> None:
        self.context = context
        self.env = context.env
        self.worker_id = worker_id
        self.alive = True
        self.paused_until = -1.0
        self.holding: str | None = None
        """The Attempt this worker believes it owns."""
        self.agent: Agent | None = None
        self._main: Any = None
        self._waiting: Any = None
        self._heartbeat: _Heartbeat | None = None

    # ---------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start (or restart, after a crash) with an agent that remembers nothing."""
        context = self.context
        self.alive = True
        self.agent = Agent(self.worker_id, context.agent, Backoff(context.backoff, context.rng), seams=context.seams)
        self._main = self.env.process(self._run(self.agent))

    def crash(self, restart_s: float) -> None:
        """The process dies: it stops, memory is gone, calls already sent still land; it restarts after `restart_s`."""
        if not self.alive:
            return
        self.alive = False
        self.context.leases.crashed(self.worker_id, self.holding, self.env.now)
        self._let_go()
        if self._waiting is not None and not self._waiting.triggered:
            self._waiting.cancel()  # a dead worker takes no more offers
        if self._main is not None and self._main.is_alive:
            self._main.interrupt(CRASH)
        self.env.timeout(restart_s).callbacks.append(lambda _event: self.start())

    def pause(self, until: float) -> None:
        """A stop-the-world pause: the workflow and the heartbeat freeze at their next step until `until`."""
        self.context.leases.paused(self.worker_id, self.env.now, until)
        self.paused_until = max(self.paused_until, until)

    def _frozen(self, struck: Any) -> Generator[Any, Any, None]:
        """An aimed pause holds this worker, its call in hand, until it ends (`wake=replaced`: or its task is replaced)."""
        env, agent = self.env, self.agent
        self.pause(struck.until)
        ends = env.timeout(struck.until - env.now)
        if not wakes_when_replaced(struck) or agent is None or agent.task_id is None:
            yield ends
            return
        aimed = self.context.aimed
        woken = env.event()
        aimed.wake_when_replaced(agent.task_id, agent.fence[0], woken)
        yield ends | woken
        aimed.waiting.pop(agent.task_id, None)
        self.paused_until = min(self.paused_until, env.now)  # the heartbeat wakes at the pause's planned end, as it was told

    # ---------------------------------------------------------- the driver

    def _run(self, agent: Agent) -> Generator[Any, Any, None]:
        """Take offers one at a time and carry out the agent's commands for each until it stops."""
        env, context = self.env, self.context
        try:
            while True:
                self._waiting = context.offers.get()
                offer = yield self._waiting
                self._waiting = None
                if env.now < self.paused_until:
                    yield env.timeout(self.paused_until - env.now)
                command = agent.claim(offer.workspace, offer.task_id, context.workflow_of(offer.task_id))
                while type(command) is not Stop:
                    try:
                        answer = yield from self._carry(command)
                        if env.now < self.paused_until:
                            yield env.timeout(self.paused_until - env.now)  # what was heard during a pause is read after it
                        command = agent.on(answer, env.now)
                    except Interrupt as interrupt:
                        if interrupt.cause == CRASH:
                            raise
                        command = agent.interrupted()
                    if self.holding is None and agent.holding:
                        self._hold(agent)
                self._let_go()
        except Interrupt as interrupt:
            assert interrupt.cause == CRASH, interrupt.cause  # the worker restarts later, with empty memory

    def _carry(self, command: Any) -> Generator[Any, Any, Any]:
        """Carry out one command in simulated time; returns the answer the agent reads."""
        kind = type(command)
        if kind is Call:
            context = self.context
            aimed = context.aimed
            if aimed is not None and aimed.armed:
                struck = aimed.take(self.worker_id, command.contract, self.env.now)
                if struck is not None:  # an aimed pause: frozen with the call in hand, which leaves when the pause ends
                    yield from self._frozen(struck)
            contract = getattr(context.orchestrator, command.contract)
            return (yield from context.transport.call(self.worker_id, contract, *command.args, **command.kwargs))
        if kind is Perform:
            provider = self.context.providers[command.dependency]
            deadline_at, via_gateway = command.deadline_at, command.via_gateway
            try:
                return (
                    yield from provider.call(
                        command.key, command.operation, command.identity, command.task_id, self.worker_id, deadline_at, via_gateway
                    )
                )
            except (ProviderTimeout, ProviderRefused) as failure:
                return failure
        if kind is Wait:
            yield self.env.timeout(command.seconds)
            return None
        if kind is Work:
            yield self.env.timeout(getattr(self.context.bench, f"{command.kind}_time_s")())  # tool_time_s, commit_time_s
            return None
        assert kind is Look, command
        return Looked.read(self.context.store, command.attempt_id)

    # ---------------------------------------------------------- the lease

    def _hold(self, agent: Agent) -> None:
        """The claim was heard accepted: the worker holds the Attempt, and its heartbeat starts now."""
        self.holding = agent.attempt_id
        self.context.leases.holding(self.worker_id, self.holding, self.env.now)
        self._heartbeat = _Heartbeat(self, agent)

    def _let_go(self) -> None:
        """The Attempt's work ended (or the worker died): the heartbeat stops, and the observer hears it."""
        if self._heartbeat is not None:
            self._heartbeat.stopped = True
            self._heartbeat = None
        if self.holding is not None:
            self.context.leases.released(self.worker_id, self.holding, self.env.now)
        self.holding = None


class _Heartbeat:
    """One Attempt's heartbeat: a renewal on the agent's cadence, each a chain of timer callbacks, until the Attempt ends."""

    __slots__ = ("agent", "cadence", "stopped", "worker")

    def __init__(self, worker: Worker, agent: Agent) -> None:
        self.worker = worker
        self.agent = agent
        self.cadence = Cadence(worker.env.now, worker.context.heartbeat_interval_s)
        self.stopped = False
        self._wake(self.cadence.next_at())

    def _wake(self, at: float) -> None:
        env = self.worker.env
        env.timeout(at - env.now).callbacks.append(self._beat)

    def _beat(self, _event: Any) -> None:
        """A beat is due: send the agent's renewal, unless a pause holds it back (then it goes when the pause ends)."""
        if self.stopped:
            return
        worker = self.worker
        now = worker.env.now
        if now < worker.paused_until:
            self._wake(worker.paused_until)
            return
        renewal = self.agent.renewal()
        if renewal is None:
            return
        self.cadence.beat(now)
        context = worker.context
        context.leases.renewal("sent")
        contract = getattr(context.orchestrator, renewal.contract)
        context.transport.send(
            worker.worker_id, contract, renewal.args, renewal.kwargs, lambda answer: self._answered(renewal.args, answer)
        )
        self._wake(self.cadence.next_at())

    def _answered(self, fence: tuple, answer: Any) -> None:
        """A renewal's answer (None: none came) reaches the agent, after any pause; it may stop the workflow at once."""
        worker = self.worker
        env = worker.env
        if env.now < worker.paused_until:
            env.timeout(worker.paused_until - env.now).callbacks.append(lambda _event: self._answered(fence, answer))
            return
        worker.context.leases.renewal("unanswered" if answer is None else "accepted" if answer.accepted else "refused")
        if worker.alive and worker.agent is self.agent and self.agent.renewed(fence, answer):
            worker._main.interrupt(RENEWED)
