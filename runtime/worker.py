"""`shiftchange worker`: one worker process that drives the agent (`shiftchange.agent`) on threads and sockets, on the wall clock.

The protocol is the agent's, the very one the simulator and the explorer
drive: `Agent` turns a claim and then each answer into the next command, and
holds every decision (what a refusal means, when to ask again, when to give
up, where to resume, what to do when a renewal is refused or cancellation is
asked). This module only carries the commands out, for real:

| command | the worker |
|---|---|
| `Call` | calls that contract of its Orchestrator over the shared store; no answer (a cut connection, the provider away) is None |
| `Perform` | calls the provider over HTTP with the key and deadline the grant set; a `ProviderTimeout` or `ProviderRefused` is the answer |
| `Wait`, `Work` | sleeps (a tool `tool_call_s`, a commit `commit_s`), waking at once for a renewal's interrupt or a stop |
| `Look` | reads the Attempt and its predecessor from the store; None when the store does not answer |
| `Stop` | ends the heartbeat; the worker claims again at once, or after an empty claim once work is announced or `idle_poll_s` passed |

The heartbeat is a thread of its own, with its own store connection and its
own Orchestrator over the same store (a SQLite connection belongs to the
thread that opened it), so a renewal never waits for the workflow's calls.
It renews on the agent's `Cadence` from the moment the claim was heard, also
while the workflow sleeps in a long tool call, and it never touches the
agent: it hands each answer to the workflow thread (`Beat.heard`: a queue,
and the wake event that ends a sleep). The workflow thread hands every
answer heard to `Agent.renewed` before each command and whenever a sleep
wakes, and when the agent says so it drops the command in hand for
`Agent.interrupted`'s.

Time. Every Orchestrator a worker builds judges leases by the clock of its
own store handle (`clock.lease_clock`): on PostgreSQL the server's, read
inside the transaction that handle has open (so the heartbeat's Orchestrator,
over its own handle, reads its own transaction's time); elsewhere this
process's wall clock. The worker's sleeps, its heartbeat cadence, the time
it hands the agent and the time left before a provider call's deadline are
all read on its main handle's clock, the very one its contracts use, with
real waits: a worker whose own clock is minutes off (SHIFTCHANGE_CLOCK_SKEW_S)
behaves on PostgreSQL exactly as one whose clock is right.

What a real process adds: a SIGSTOP freezes both threads; on SIGCONT the
worker carries on believing it owns its Attempt, and the renewal sent at
once, or its next fenced call, is refused. SIGTERM stops the worker before
its next command (the Attempt is left to its lease) and ends any sleep now;
it exits 0.

Metrics (`--metrics-port`, `runtime.metrics`): the worker counts what it
already sees, on the thread that sees it: each contract's answer (the
heartbeat's renewals too), each provider call, each call the agent held back
(its `held_back` grew), and, after a command, at most once a second, its
gateway's breakers and concurrency limits, read at the time it hands the
agent. The agent itself counts nothing.

For tests, everything a worker acts on is handed in: `Worker(orchestrator,
provider, config, worker_id, clock=...)` takes any object with the contracts
as methods (and a `store` for `Look`), any provider with `call`, and any
clock with `now` and `wait` (`SteppingClock` runs a whole Attempt without
sleeping); `Worker.connect` builds the real ones from URLs. `attempt()`
carries out one claim's commands on the calling thread; no heartbeat thread
runs unless `run()` started it, so a test hands renewal answers in itself
(`worker.beat.heard(answer)`, while an Attempt is held).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import queue
import random
import signal
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from shiftchange.agent import Agent, AgentConfig, Cadence, Call, Command, Look, Looked, Perform, Stop, Wait, Work
from shiftchange.agent import agent_config as convert
from shiftchange.core import (
    Backoff,
    CoreError,
    InputError,
    Orchestrator,
    ProviderRefused,
    ProviderTimeout,
    ReliabilityConfig,
    StoreError,
    StoreRetryable,
)
from shiftchange.core.table import Table, table_for
from shiftchange.stores import describe, open_store, wakeup

from .clock import WallClock, judged_by, lease_clock, waiting
from .config import RuntimeConfig, load_config
from .http_provider import HttpProvider
from .metrics import Metrics, start_metrics

__all__ = ["Beat", "Worker", "agent_config", "ask", "call"]

log = logging.getLogger("shiftchange.worker")

WORK_S = {"tool": "tool_call_s", "commit": "commit_s"}
"""How long each kind of `Work` takes: the runtime configuration's field for it."""
DEPENDENCIES_EVERY_S = 1.0
"""How often, at most, the metrics read this worker's breakers and concurrency limits (after a command, on the workflow thread)."""


def worker_store_url(url: str, worker_id: str) -> str:
    """The store URL with this worker's name as PostgreSQL's application_name (so an operator, or chaos, can find its sessions)."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}application_name=shiftchange-worker:{worker_id}"


def agent_config(config: RuntimeConfig) -> AgentConfig:
    """The agent's settings from the runtime's, through the agent's one converter (`shiftchange.agent.agent_config`)."""
    return convert(config.core, config.agent)


def ask(contract: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a contract; one that could not be answered is None, not a crash.

    The store may not answer (a cut connection, contention past its bound),
    and a contract that reads provider truth (the gateway asking whether an
    unreceipted call landed) may find the provider away.
    """
    return _asked(contract, args, kwargs)[0]


def _asked(contract: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """`ask`, and whether an answer came back (a contract may answer None: `claim_next` with nothing to claim)."""
    try:
        return contract(*args, **kwargs), True
    except (StoreError, StoreRetryable, ProviderTimeout, ProviderRefused) as error:
        log.warning("no answer to %s: %s", getattr(contract, "__name__", "call"), error)
        return None, False
    except CoreError as error:  # a defect, not a fault: said loudly, but it costs one call, not the process
        log.error("%s raised %s: %s", getattr(contract, "__name__", "call"), type(error).__name__, error)
        return None, False


def call(orchestrator: Any, command: Call, metrics: Metrics | None = None) -> Any:
    """Carry out a `Call` on `orchestrator`: the contract's answer, or None when none came back (counted in `metrics`, if given)."""
    answer, answered = _asked(getattr(orchestrator, command.contract), command.args, command.kwargs)
    if metrics is not None:
        if answered:
            metrics.answered(command.contract, answer)
        else:
            metrics.unanswered(command.contract)
    return answer


class Beat:
    """One Attempt's heartbeat: the renewal the agent sends, its cadence from the claim, and the answers heard for the workflow."""

    def __init__(self, renewal: Call, cadence: Cadence, wake: threading.Event) -> None:
        self.renewal = renewal
        self.cadence = cadence
        self.done = threading.Event()
        """Set by the workflow thread when the Attempt's work ends: the heartbeat stops renewing it."""
        self._answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._wake = wake

    @property
    def fence(self) -> tuple:
        return self.renewal.args

    def heard(self, answer: Any) -> None:
        """A renewal was answered: queue the answer for the workflow thread and wake it from any sleep."""
        self._answers.put(answer)
        self._wake.set()

    def take(self) -> list[Any]:
        """Every answer heard since the last take, oldest first."""
        answers = []
        with contextlib.suppress(queue.Empty):
            while True:
                answers.append(self._answers.get_nowait())
        return answers


class Heartbeat(threading.Thread):
    """The worker's heartbeat thread, for its whole life: renews the current Attempt's lease on its cadence from the claim."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(name=f"heartbeat-{worker.worker_id}", daemon=True)
        self.worker = worker
        self.current: Beat | None = None
        self.wake = threading.Event()
        self.closed = threading.Event()

    def follow(self, beat: Beat | None) -> None:
        self.current = beat
        self.wake.set()

    def run(self) -> None:
        orchestrator = None
        try:
            while not self.closed.is_set():
                beat = self.current
                if beat is None or beat.done.is_set():
                    self.wake.wait(0.5)
                    self.wake.clear()
                    continue
                try:
                    if orchestrator is None:
                        orchestrator = self.worker.heartbeat_orchestrator()
                    self._renew(orchestrator, beat)
                except Exception as error:  # the thread must outlive anything one renewal meets; the lease decides the rest
                    log.error("heartbeat of %s failed (%s: %s): starting afresh", beat.fence[0], type(error).__name__, error)
                    self._close(orchestrator)
                    orchestrator = None
                    self.closed.wait(self.worker.config.idle_poll_s)
        finally:
            self._close(orchestrator)

    def _renew(self, orchestrator: Any, beat: Beat) -> None:
        clock = self.worker.clock
        while self.current is beat and not self.closed.is_set():
            if clock.wait(beat.done, beat.cadence.next_at() - clock.now()):
                return
            beat.cadence.beat(clock.now())  # a pause swallowed beats: they are not sent late in a burst; the next goes now
            answer = call(orchestrator, beat.renewal, self.worker.metrics)
            self.worker.counts["renewals"] += 1
            if answer is not None:
                beat.heard(answer)

    def _close(self, orchestrator: Any) -> None:
        if orchestrator is not None and orchestrator is not self.worker.orchestrator:
            with contextlib.suppress(Exception):
                orchestrator.store.close()


class Worker:
    """One worker: claim, carry out the agent's commands until it stops, claim again; at most one Attempt at a time."""

    def __init__(
        self,
        orchestrator: Any,
        provider: Any,
        config: RuntimeConfig,
        worker_id: str,
        *,
        clock: Any = None,
        open_orchestrator: Callable[[], Any] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`open_orchestrator` gives the heartbeat thread an Orchestrator over a connection of its own; None shares `orchestrator`.

        `metrics` counts what the worker sees (`runtime.metrics`); None counts nothing."""
        self.orchestrator = orchestrator
        self.metrics = Metrics("worker") if metrics is None else metrics
        self._dependencies_at = -math.inf
        self.provider = provider
        self.config = config
        self.worker_id = worker_id
        self.clock = WallClock() if clock is None else clock
        self._open_orchestrator = open_orchestrator
        self.stopping = threading.Event()
        self.wake = threading.Event()
        """Set by a renewal answer heard and by `stop`: what ends a sleep early."""
        self.backoff = Backoff(ReliabilityConfig().backoff, random.Random(zlib.crc32(worker_id.encode())))
        """Paces retries of a timed-out provider call; seeded by the worker's id, never the global stream."""
        self.agent = self._new_agent()
        self.heartbeat = Heartbeat(self)
        self.beat: Beat | None = None
        """The Attempt this worker believes it owns, as its heartbeat follows it."""
        self.counts = {"claims": 0, "renewals": 0, "stopped": 0, "left": 0}
        """Claims taken, renewals sent, Attempts the agent stopped, Attempts left to their lease (told to stop, or a defect)."""

    @classmethod
    def connect(
        cls,
        store_url: str,
        provider_url: str,
        config: RuntimeConfig,
        worker_id: str,
        table: Table | None = None,
        metrics: Metrics | None = None,
    ) -> Worker:
        """A worker over the shared store at `store_url` and the provider at `provider_url`, on the store's clock (or the wall clock).

        Every Orchestrator it builds (its own, its heartbeat's) runs `table` (`core.table.table_for`); None: the packaged spec.
        """
        table = table_for(table)
        url = worker_store_url(store_url, worker_id)
        store = open_store(url)  # first: a bad store URL is the first thing said
        try:
            clock = lease_clock(store)
            provider = HttpProvider(provider_url, clock=clock)
        except BaseException:
            store.close()
            raise
        reliability = ReliabilityConfig()

        def orchestrator(over: Any = None) -> Orchestrator:
            """An Orchestrator over `over` (None: a store handle of its own), judging leases by that handle's clock."""
            if over is not None:
                return Orchestrator(over, clock, provider, config.core, reliability, table=table)
            own = open_store(url)
            try:
                return Orchestrator(own, lease_clock(own), provider, config.core, reliability, table=table)
            except BaseException:
                own.close()
                raise

        return cls(orchestrator(store), provider, config, worker_id, clock=waiting(clock), open_orchestrator=orchestrator, metrics=metrics)

    def _new_agent(self) -> Agent:
        return Agent(self.worker_id, agent_config(self.config), self.backoff, self.config.workflow)

    def heartbeat_orchestrator(self) -> Any:
        return self.orchestrator if self._open_orchestrator is None else self._open_orchestrator()

    def close(self) -> None:
        self.heartbeat.closed.set()
        self.heartbeat.follow(None)
        if self.heartbeat.is_alive():
            self.heartbeat.join(timeout=5.0)
        store = self.orchestrator.store
        wakeup.close(store)  # the idle waits' listener, if they opened one (nothing for other stores)
        store.close()

    def stop(self) -> None:
        """SIGTERM: stop before the next command, and end any sleep now."""
        self.stopping.set()
        self.wake.set()

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        """Claim and work until told to stop, with the heartbeat on its own thread."""
        self.heartbeat.start()
        while not self.stopping.is_set():
            try:
                claimed = self.attempt()
            except Exception:  # a defect in one Attempt's work: said with its traceback; the worker takes the next
                log.exception("an Attempt's work ended by an unexpected error; its lease decides what became of it")
                self.counts["left"] += 1
                self.agent = self._new_agent()  # the old one is mid-Attempt
                claimed = True
            if not claimed:  # woken by an admission's announcement, if the store makes one; the poll is the safety net
                wakeup.idle_wait(getattr(self.orchestrator, "store", None), self.config.idle_poll_s, self.stopping, self.config.workspace)

    def attempt(self) -> bool:
        """One claim's commands, on this thread, until the agent stops (or the worker is told to); False when nothing was claimed."""
        agent = self.agent
        command = self._answer(agent.claim(self.config.workspace))
        if not agent.holding:
            return False
        self.counts["claims"] += 1
        self.metrics.lease_held(True)
        renewal = agent.renewal()
        log.info("claimed %s generation %d", renewal.args[0], renewal.args[1])
        self._follow(renewal)
        try:
            while not isinstance(command, Stop) and not self.stopping.is_set():
                interrupt = self._heard()
                command = self._answer(command) if interrupt is None else interrupt
        finally:
            self._release()
        if isinstance(command, Stop):
            self.counts["stopped"] += 1
            log.info("attempt %s stopped: %s", renewal.args[0], command.reason)
        else:
            self.counts["left"] += 1
            log.info("attempt %s left to its lease: the worker is stopping", renewal.args[0])
        return True

    def _follow(self, renewal: Call) -> None:
        """The heartbeat starts the moment the claim is heard, before the Attempt is started."""
        self.beat = Beat(renewal, Cadence(self.clock.now(), self.config.core.heartbeat_interval_s), self.wake)
        self.heartbeat.follow(self.beat)

    def _release(self) -> None:
        if self.beat is not None:
            self.beat.done.set()
        self.heartbeat.follow(None)
        self.beat = None
        self.metrics.lease_held(False)

    def _heard(self) -> Command | None:
        """Hand the agent every renewal answer heard since it last asked: the command an interrupt asks for, or None."""
        beat = self.beat
        if beat is None:
            return None
        interrupted = False
        for answer in beat.take():
            interrupted = self.agent.renewed(beat.fence, answer) or interrupted
        return self.agent.interrupted() if interrupted else None

    # ------------------------------------------------------------ commands

    def _answer(self, command: Command) -> Command:
        """Carry out one command and hand its answer to the agent: the next command."""
        if isinstance(command, Wait | Work):
            seconds = command.seconds if isinstance(command, Wait) else getattr(self.config, WORK_S[command.kind])
            interrupt = self._sleep(seconds)
            if interrupt is not None:
                return interrupt
            answer = None
        elif isinstance(command, Call):
            answer = call(self.orchestrator, command, self.metrics)
        elif isinstance(command, Perform):
            answer = self._perform(command)
        elif isinstance(command, Look):
            answer = self._look(command)
        else:
            raise AssertionError(f"{self.worker_id} cannot carry out {command!r}")
        held_back, now = self.agent.held_back, self.clock.now()
        following = self.agent.on(answer, now)
        if self.metrics.on:
            self._count(command, answer, held_back, now)
        return following

    def _count(self, command: Command, answer: Any, held_back: int, now: float) -> None:
        """What the metrics take from a command the agent has just read: a call it held back, and (at most every
        DEPENDENCIES_EVERY_S) the breakers and concurrency limits of this worker's gateway, read at the time the agent was handed."""
        if isinstance(command, Call) and self.agent.held_back > held_back:
            dependency = str(command.kwargs.get("dependency") or "unknown")
            self.metrics.held_back(dependency, getattr(answer, "guards", ()), self.agent.held_back - held_back)
        if now < self._dependencies_at + DEPENDENCIES_EVERY_S:
            return
        self._dependencies_at = now
        orchestrator = self.orchestrator
        try:
            names = tuple(orchestrator.reliability.rate_limits)
            breakers = {name: orchestrator.breakers.state(name, now) for name in names}
            limits = {name: _limit(orchestrator.concurrency.limit(name), now) for name in names}
        except (CoreError, AttributeError) as error:  # an orchestrator without them (a test's stand-in), or a clock that stepped back
            log.debug("dependencies not read for the metrics: %s", error)
            return
        self.metrics.dependencies(breakers, limits)

    def _perform(self, command: Perform) -> Any:
        began = time.monotonic()
        try:
            answer = self.provider.call(
                command.key, command.operation, command.identity, command.task_id, self.worker_id, command.deadline_at, command.via_gateway
            )
            outcome = "landed"
        except ProviderTimeout as error:
            answer, outcome = error, "timeout"  # the provider's answer: the agent reads it
        except ProviderRefused as error:
            answer, outcome = error, "refused"
        self.metrics.performed(command.dependency, outcome, time.monotonic() - began)
        return answer

    def _look(self, command: Look) -> Looked | None:
        try:
            return Looked.read(self.orchestrator.store, command.attempt_id)
        except (StoreError, StoreRetryable):
            return None  # start over: the keys make every repeated effect a replay

    def _sleep(self, seconds: float) -> Command | None:
        """Sleep `seconds`, handing the agent each renewal answer heard meanwhile: an interrupt's command, or None once the time
        has passed or the worker is told to stop."""
        until = self.clock.now() + seconds
        while not self.stopping.is_set():
            interrupt = self._heard()
            if interrupt is not None:
                return interrupt
            remaining = until - self.clock.now()
            if remaining <= 0:
                return None
            self.clock.wait(self.wake, remaining)
            self.wake.clear()  # an answer heard before this is in the queue: the next `_heard` takes it
        return None


def _limit(limit: Any, now: float) -> tuple[float, int]:
    return limit.limit, limit.in_flight(now)


# ---------------------------------------------------------------- the command


def run_worker(args: argparse.Namespace) -> int:
    _logging()
    config = load_config(args.config)
    worker_id = args.id or f"worker-{os.getpid()}"
    if args.store.strip() == "memory:":
        raise InputError("a worker needs a store other processes can share: sqlite:///path or postgresql://...")
    table = table_for(getattr(args, "spec", None))  # a bad --spec is said before the store is opened
    # Then the metrics: a missing prometheus_client or a port taken is said before the store is opened (SQLite would create it).
    metrics = start_metrics("worker", getattr(args, "metrics_port", None), getattr(args, "metrics_host", "127.0.0.1"))
    try:
        worker = Worker.connect(args.store, args.provider, config, worker_id, table, metrics)
        metrics.identify(worker_id, table.label, table.digest)
        signal.signal(signal.SIGTERM, lambda *_: worker.stop())
        log.info(
            "worker %s started on %s, %s; running %s (digest %s)",
            worker_id,
            describe(args.store),
            judged_by(worker.orchestrator.clock),
            table.label,
            table.digest,
        )
        try:
            worker.run()
        finally:
            worker.close()
    finally:
        metrics.close()
    log.info("worker %s stopped: %s", worker_id, worker.counts)
    return 0


def _logging() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
