"""The small world `shiftchange explore` enumerates: the real `Orchestrator` on the memory store, its history, and the actors.

Exhaustive exploration cannot run SimPy processes or threads (neither can be
copied), so every actor is plain data with its enabled steps, each an action
with a stable label `ACTOR:STEP[:ARGUMENT]`:

- the workers (`workers.py`): each an `agent.Agent`, its step the agent's
  command (`worker-1:claim:task-1`, `worker-1:grant`, ...);
- the nemesis (`nemesis.py`): `worker-1:crash`, `:pause`, `:wake`;
- the provider and the network (`network.py`): `provider:land:N`, ...,
  `network:redeliver:N`;
- the control plane (`control.py`): `control:admit`, ..., `control:retry:TASK`;
- the clock (`clock.py`): `clock:advance:T`.

After each step the workers hear every answer that has a single value
(`Worker.settle`), so a step is one choice and the trace has no step
without one. Every committed event goes into the history (judged by the
checkers) and to the control plane's agenda.

The search copies the world (through pickle) for each step it takes from it;
the compiled tables, the configurations, the seams, the agents' workflow and
backoff are shared, not copied (`World.shared`). The world is the workers'
`Wire`: their requests reach the orchestrator through the network, a `Look`
reads the store, a provider call goes in flight.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from shiftchange.agent import Agenda, Agent, Call, Delays, Looked, Perform
from shiftchange.agent.worker import CORRECT
from shiftchange.checkers.history import CheckContext, History, Retired
from shiftchange.checkers.rules import all_checkers
from shiftchange.core import Backoff, Event, ManualClock, MemoryStore, Orchestrator
from shiftchange.core.provider import LedgerProvider

from . import clock, nemesis
from .abstract_time import concrete_row, creation_ranks, record_row, relative
from .config import ABSTRACT, DEPENDENCY, WORKSPACE, ExploreConfig, ExploreError, StepError, task_name, worker_name
from .control import ControlPlane, intake, survey
from .network import Network
from .workers import DUPLICABLE, Worker

_NO_DELAYS = Delays()
"""The control plane acts the instant something is due: CI has answered once an Attempt verifies, the reviewer approves at
once (and the explorer retires nothing: a task's final read is the judge's)."""


class World:
    """The orchestrator, its store and provider, the actors as data, and the history's checkers, all copyable."""

    def __init__(self, config: ExploreConfig, pattern: Any = None) -> None:
        self.config = config
        self.pattern = pattern
        self.clock = ManualClock(0.0)
        self.store = pattern.make_store() if pattern is not None else MemoryStore(keep_events=False)
        self.provider = LedgerProvider(supports_idempotency=config.idempotent_provider)
        core, reliability = config.core(), config.reliability()
        seams = pattern.seams if pattern is not None else None
        base = config.table()
        self.table = pattern.table(base) if pattern is not None else base
        """The transition table the orchestrator runs: the configuration's spec, with the anti-pattern's edit, if any."""
        self.orchestrator = Orchestrator(self.store, self.clock, self.provider, core, reliability, seams=seams, table=self.table)
        backoff = Backoff(reliability.backoff, random.Random(0))  # exponential: it draws nothing
        agent_config, workflow = config.agent(), config.workflow()
        worker_seams = pattern.worker_seams if pattern is not None else CORRECT
        self.workers = [Worker(Agent(worker_name(i), agent_config, backoff, workflow, worker_seams)) for i in range(config.workers)]
        self.network = Network()
        self.control = ControlPlane(Agenda(_NO_DELAYS), blind_loop=pattern is not None and pattern.blind_loop)
        self.budgets = nemesis.Budgets.of(config)
        self.task_budget = config.budget()
        keyless = frozenset() if config.idempotent_provider else frozenset({DEPENDENCY})
        context = CheckContext(core.lease_ttl_s, reliability.attempt_spend_max_usd, core.reason_length_min, keyless)
        self.history = History(all_checkers(context), tail_max=0, digest=False)
        self.step_entries: list[Any] = []
        """What the step being taken appended to the history (the explorer reads it, then clears it); first, the setup's."""
        self.store.subscribe(self._heard)
        for index in range(config.tasks):
            task_id = task_name(index)
            self.orchestrator.create_task(task_id, f"objective of {task_id}", WORKSPACE, budget=self.task_budget)
            if not config.operator_calls:  # with an operator, the task waits in its inbox for its intake step
                intake(self, task_id)

    @property
    def shared(self) -> list[Any]:
        """What every copy of this world shares instead of copying: immutable tables, configurations, rules, the agents' parts.

        The table above all: it pickles as its spec and is compiled again when loaded (`core.table.Table.__reduce__`).
        """
        context = self.orchestrator._context
        table = self.table
        agent = self.workers[0].agent
        return [
            self.config,
            self.pattern,
            self.orchestrator.rng,  # it draws only backoff jitter, and exponential backoff draws none
            table,
            table.spec,
            table.attempt,
            table.task,
            context.config,
            context.reliability,
            context.reliability.admission,
            context.seams,
            context.fence,
            self.history.checkers[0].context,
            agent.config,
            agent.backoff,
            agent.workflow,
            agent.seams,
            _NO_DELAYS,
            self.task_budget,
        ]

    # ------------------------------------------------------------ history

    def _heard(self, event: Event) -> None:
        """Every committed event: into the history, and noted by the control plane's agenda."""
        self.append(event)
        self.control.note(event)

    def append(self, entry: Any) -> None:
        self.history.append(entry)
        self.step_entries.append(entry)

    def retirements(self) -> list[Retired]:
        """Jepsen's final read: every task's records as they stand, as if the run ended now.

        The live records, not copies: the checkers read them at once and keep nothing of them but text.
        """
        now = self.clock.now()
        read = []
        with self.store.transaction() as tx:
            for index in range(self.config.tasks):
                task = tx.task(task_name(index))
                attempts = tx.attempts_of(task.task_id)
                intents = tuple(i for a in attempts for i in tx.intents_of(a.attempt_id))
                read.append(Retired(now, task, tuple(attempts), intents, drained=True))
        return read

    # --------------------------------------------------------- the wire

    def request(self, worker_id: str, call: Call, duplicate: bool) -> Any:
        return self.network.request(self, worker_id, call, duplicate)

    def look(self, attempt_id: str) -> Looked | None:
        return Looked.read(self.store, attempt_id)

    def send(self, worker: Worker, perform: Perform) -> int | None:
        return self.network.send(self, worker, perform)

    # -------------------------------------------------------------- digest

    def digest_parts(self, abstract: bool | None = None) -> tuple[str, list[list[str]], list[str]]:
        """The state as text: the ordered part, the unordered collections (as rows), and one row per worker.

        The search renames the workers in all three, then sorts each
        collection and the workers, so a state and its mirror image give the
        same text. Left out: the history (the checkers judge it on each path),
        event sequence numbers, record versions (a compare-and-set counter that
        decides nothing once the write is in), lease tokens (a fence is its
        Attempt and generation), and the numbers naming calls and duplicates
        (which call a worker awaits is kept as a flag on the call).

        `abstract` (default: the configuration's `time`): every time written
        as the abstract clock writes it, relative to now (`abstract_time.py`);
        else as a number on the clock, with the clock's value first.
        """
        if abstract is None:
            abstract = self.config.time == ABSTRACT
        orchestrator, provider, now = self.orchestrator, self.provider, self.clock.now()
        with self.store.transaction() as tx:
            tasks = [tx.task(task_name(i)) for i in range(self.config.tasks)]
            attempts = [a for t in tasks for a in tx.attempts_of(t.task_id)]
            intents = [i for a in attempts for i in tx.intents_of(a.attempt_id)]
        if abstract:
            ranks = creation_ranks([*tasks, *attempts])

            def row(record: Any) -> tuple:
                return record_row(record, now, ranks)

            def at(value: float | None) -> Any:
                return relative(value, now)
        else:
            row, at = concrete_row, _same
        ordered = (
            None if abstract else now,
            tuple(row(t) for t in tasks),
            tuple(row(a) for a in attempts),
            tuple((a.attempt_id, orchestrator.admission_status(a.attempt_id)) for a in attempts),
            tuple(
                (e.provider_id, e.key, e.operation, e.identity, provider.verdict(e.provider_id), e.provider_id in provider.deleted)
                for e in provider.ledger
            ),
            self.control.row(at),
            self.budgets.row(),
        )
        network = self.network
        calls = [repr(call.row(network.awaited(self, call) is not None, at)) for call in network.calls]
        duplicates = [repr(d.row()) for d in network.duplicates]
        return repr(ordered), [[repr(row(i)) for i in intents], calls, duplicates], [repr(w.row(at, now)) for w in self.workers]

    # ------------------------------------------------------------- actions

    def worker(self, worker_id: str) -> Worker:
        for worker in self.workers:
            if worker.worker_id == worker_id:
                return worker
        raise StepError(f"no worker {worker_id!r}")

    def actions(self) -> list[str]:
        """Every step some actor may take now, by label, in a fixed order."""
        due = survey(self)
        now = self.clock.now()
        labels: list[str] = []
        for worker in self.workers:
            name = worker.worker_id
            for step, argument in worker.steps(due.admitted, now):
                labels.append(f"{name}:{step}{argument}")
                if self.budgets.duplicates and step in DUPLICABLE:
                    labels.append(f"{name}:{step}+dup{argument}")
            labels += [f"{name}:{step}" for step in nemesis.nemesis_steps(worker, self.budgets)]
        labels += self.network.steps(self)
        labels += self.control.steps(self, due)
        target = clock.next_instant(self)
        if target is not None:
            labels.append(f"clock:advance:{target!r}")
        return labels

    def apply(self, label: str, checked: bool = True) -> None:
        """Take one step by its label, then let the workers hear what is due; a label not enabled now is a StepError
        (unchecked: the search's own labels)."""
        if checked and label not in self.actions():
            raise StepError(f"{label} is not a step this world can take now")
        actor, _, rest = label.partition(":")
        action, _, argument = rest.partition(":")
        if actor == "clock":
            self._advance(float(argument))
        elif actor == "provider" and action == "delete":
            self.network.delete(self, argument)
        elif actor == "provider":
            self.network.answer(self, action, int(argument))
        elif actor == "network":
            self.network.redeliver(self, int(argument))
        elif actor == "control":
            self.control.apply(self, action, argument)
        elif actor == "operator":
            self.control.operate(self, action, argument)
        else:
            self._worker_step(self.worker(actor), action, argument)
        now = self.clock.now()
        for worker in self.workers:
            worker.settle(self, now)

    def _advance(self, target: float) -> None:
        """The clock's step; an abstract search stops with an error before a limit measured from a time past could bind
        (`ExploreConfig.horizon_s`, `abstract_time.py`)."""
        if self.config.time == ABSTRACT and target >= _horizon_s(self.config):
            raise ExploreError(
                f"a path reached t={target:g} s, from which a time budget or the admission queue's age limit could bind, and"
                " the abstract clock does not keep how long ago anything began: search with --time concrete"
            )
        clock.advance(self, target)

    def _worker_step(self, worker: Worker, action: str, argument: str) -> None:
        step, _, duplicate = action.partition("+")
        if step in (nemesis.CRASH, nemesis.PAUSE, nemesis.WAKE, nemesis.STALL):
            nemesis.strike(self, worker, step)
        else:
            worker.act(step, argument, self, self.clock.now(), duplicate == "dup")


def _same(value: Any) -> Any:
    return value


@functools.cache
def _horizon_s(config: ExploreConfig) -> float:
    """`config.horizon_s()`, worked out once per configuration (it builds the core's and the admission's configs)."""
    return config.horizon_s()
