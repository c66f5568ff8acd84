"""The small world `shiftchange explore` enumerates: the real `Orchestrator` on the memory store, and actors as data.

Exhaustive exploration cannot run SimPy processes (a process cannot be
copied), so every actor here is a small state machine held in plain fields,
and every step any actor may take next is an *action* with a stable label:

- a worker (`worker-1:claim:TASK`, `:claim-next`, `:start`, `:grant`,
  `:perform`, `:receipt`, `:checkpoint`, `:complete`, `:ack`, `:renew`,
  `:timeout`, `:report`, `:fail`) walks the chapter's workflow for one
  Attempt: claim, start, then for each operation a grant from the tool
  gateway, the provider call and its receipt, with a checkpoint between
  operations, then complete. It calls the provider only with the key the
  gateway minted, and only when the grant is not a replay;
- the control plane (`control:admit`, `:reap`, `:reconcile:ID`, `:verify:ID`,
  `:decide:TASK`, `:retry:TASK`, `:approve:TASK`, `:cancel:TASK`,
  `:cancel-attempt:ID`) runs the contracts a scheduler runs, learning what is
  due from the history as the simulator's control plane does;
- the provider (`provider:land:N`, `:land-failing:N`, `:lose:N`, `:drop:N`,
  `:refuse-DOMAIN:N`) answers a call in flight: it lands and answers, lands
  with a CI verdict that will fail, lands and its answer is lost, never
  receives it, or refuses it in a failure domain;
- the network (`network:redeliver:N`) delivers a duplicated request again;
- the nemesis (`worker-1:crash`, `:pause`, `:wake`) breaks a worker;
- the clock (`clock:advance:T`) moves to the next instant that changes
  something: a stale lease's expiry, a cancellation's deadline, a backoff's
  end, a call's deadline.

Time is discrete. Every contract call and provider answer happens at the
current instant; only `clock:advance` moves it. A live worker that is not
paused keeps its lease the way the simulator's heartbeat does: while the
clock moves, it renews every `heartbeat_interval_s` (real `renew_lease`
calls, in the history). So a lease runs out only when its holder crashed,
was paused, or stopped believing it holds it; those expiries are what the
clock can move to. A provider lands nothing past a call's deadline: the
clock never passes the deadline of a call the provider has not answered, and
a call sent after its deadline is void.

Faults are bounded by the configuration (`crashes`, `pauses`,
`lost_requests`, `lost_responses`, `duplicates`, `cancels`, `ci_failures`,
`refusals`); each one the world spends is an action of its own, so the
search reaches every placement of every fault. A crashed worker restarts at
once with empty memory; its calls already sent still land.

The search copies the world (through pickle) for each step it takes from it;
the compiled tables, the configuration and the seams are shared, not copied
(`World.shared`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from shiftchange.checkers.history import CheckContext, Fault, History, Landed, Retired
from shiftchange.checkers.rules import all_checkers
from shiftchange.core import (
    BackoffConfig,
    Budget,
    CoreConfig,
    Event,
    ManualClock,
    MemoryStore,
    Orchestrator,
    Plan,
    ProviderTimeout,
    RateLimitConfig,
    ReliabilityConfig,
)
from shiftchange.core.lease import reapable
from shiftchange.core.machine import ACTIVE, ATTEMPT_TERMINAL, EXPIRABLE, LEASED, SPEC, TASK_RESTING, TASK_TERMINAL
from shiftchange.core.provider import LedgerProvider
from shiftchange.core.results import FENCE_CODES, LATE_CODES

from .antipatterns import AntiPattern
from .worker import Behaviour

TASK_PREFIX, WORKER_PREFIX = "task-", "worker-"
WORKSPACE = "workspace"
DEPENDENCY = "code_host"
AT_REST = TASK_TERMINAL | TASK_RESTING
REFUSALS = {"authorization": "403: the credential was revoked", "configuration": "422: the repository has no such base branch"}
"""The domains a provider refusal is reported in, with what the provider said: neither may be retried automatically."""
LEASE_GONE = FENCE_CODES | LATE_CODES
"""Refusals that mean the worker's lease no longer counts: it stops (the table's other refusals are read by their state)."""
CI_FAILURE = "failed:ci red on the same test"
"""The verdict a `land-failing` call's effect gets: the same signature every time, as a deterministic bug gives."""


class ExploreError(Exception):
    """A configuration or a replayed path the explorer cannot use: one line saying why."""


@dataclass(frozen=True)
class ExploreConfig:
    """A small configuration to enumerate: actors, fault bounds, the workflow, and the timings (all in seconds)."""

    workers: int = 2
    tasks: int = 1
    crashes: int = 0
    pauses: int = 0
    lost_requests: int = 0
    """Calls the provider never receives: nothing lands, and the caller hears nothing until the deadline."""
    lost_responses: int = 0
    duplicates: int = 0
    """Worker requests the network may deliver a second time, later."""
    cancels: int = 0
    """Operator cancellations: of a task (with its active Attempt), or of one active Attempt."""
    ci_failures: int = 0
    """Effects whose CI verdict fails (with one signature): validation failures the loop must answer."""
    refusals: int = 0
    """Provider calls refused outright, in the authorization domain (a revoked credential) or the configuration domain."""
    retries: int = 1
    """Automatic retries per task: the task's budget allows `retries + 1` Attempts."""
    operations: tuple[str, ...] = ("create-pr",)
    """The workflow's side effects, in order, each at the code host under a key that spans Attempts."""
    idempotent_provider: bool = True
    """The code host honours operation keys; without, it is found by identity (a PR by its head) and repeats a call."""
    gateway_retries_max: int = 1
    """How often a worker asks the gateway again after a call timed out before it reports the Attempt failed."""
    lease_ttl_s: float = 3.0
    heartbeat_interval_s: float = 1.0
    call_deadline_s: float = 2.0
    cancel_ack_timeout_s: float = 2.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 4.0
    antipattern: str | None = None

    def __post_init__(self) -> None:
        counts = {
            "workers": (1, 4),
            "tasks": (1, 3),
            "crashes": (0, 4),
            "pauses": (0, 4),
            "lost_requests": (0, 4),
            "lost_responses": (0, 4),
            "duplicates": (0, 4),
            "cancels": (0, 2),
            "ci_failures": (0, 4),
            "refusals": (0, 4),
            "retries": (0, 4),
            "gateway_retries_max": (0, 3),
        }
        for name, (low, high) in counts.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ExploreError(f"{name} must be a whole number from {low} to {high}, not {value!r}")
        if not isinstance(self.operations, tuple) or not self.operations or len(self.operations) > 3:
            raise ExploreError(f"operations must name one to three side effects, not {self.operations!r}")
        for operation in self.operations:
            if not isinstance(operation, str) or not 0 < len(operation) <= 40 or not operation.replace("-", "").isalnum():
                raise ExploreError(f"an operation is a name of up to 40 letters, digits and dashes, not {operation!r:.60}")
        if len(set(self.operations)) != len(self.operations):
            raise ExploreError(f"operations must differ from each other: {', '.join(self.operations)}")
        for name in ("lease_ttl_s", "heartbeat_interval_s", "call_deadline_s", "cancel_ack_timeout_s", "backoff_base_s", "backoff_cap_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
                raise ExploreError(f"{name} must be a positive number of seconds up to 3600, not {value!r}")
        if self.heartbeat_interval_s >= self.lease_ttl_s:
            raise ExploreError(
                f"heartbeat_interval_s ({self.heartbeat_interval_s:g}) must be shorter than lease_ttl_s ({self.lease_ttl_s:g})"
            )
        if self.backoff_cap_s < self.backoff_base_s:
            raise ExploreError(f"backoff_cap_s ({self.backoff_cap_s:g}) must be at least backoff_base_s ({self.backoff_base_s:g})")

    def core(self) -> CoreConfig:
        return CoreConfig(
            lease_ttl_s=self.lease_ttl_s,
            heartbeat_interval_s=self.heartbeat_interval_s,
            cancel_ack_timeout_s=self.cancel_ack_timeout_s,
            call_deadline_max_s=max(self.call_deadline_s, 1.0),
        )

    def reliability(self) -> ReliabilityConfig:
        """Deterministic pacing and no controls that count: exploration asks about interleavings, not capacity.

        Exponential backoff draws nothing; the rate limit never binds; there is
        no circuit breaker and no retry budget, whose counts would be state
        the digest does not hold.
        """
        return ReliabilityConfig(
            backoff=BackoffConfig(strategy="exponential", base_s=self.backoff_base_s, cap_s=self.backoff_cap_s),
            rate_limits={DEPENDENCY: RateLimitConfig(rate_per_s=1e6, burst=1_000_000)},
            breaker=None,
            retry_budget=None,
        )

    def budget(self) -> Budget:
        return Budget(attempts_max=self.retries + 1, interruptions_max=max(3, self.cancels + 1))


def worker_name(index: int) -> str:
    return f"{WORKER_PREFIX}{index + 1}"


def task_name(index: int) -> str:
    return f"{TASK_PREFIX}{index + 1}"


def head_of(task_id: str, hypothesis: str) -> str:
    """The commit an Attempt makes: a function of its task and hypothesis alone, so the same plan makes the same commit."""
    return f"{task_id}@{hashlib.sha1(hypothesis.encode()).hexdigest()[:8]}"


# ------------------------------------------------------------------ actors

IDLE, CLAIMED, GRANT, PERFORM, WAITING, LOST, RECEIPT, CHECKPOINT, COMPLETE, ACK, REPORT, FAIL = (
    "idle",
    "claimed",
    "grant",
    "perform",
    "waiting",
    "lost",
    "receipt",
    "checkpoint",
    "complete",
    "ack",
    "report",
    "fail",
)


@dataclass(slots=True)
class WorkerState:
    """One worker as data: where it is in its workflow, the fence it believes it holds, and its call in flight."""

    worker_id: str
    pc: str = IDLE
    paused: bool = False
    fence: tuple[str, int, str] | None = None
    task_id: str | None = None
    head: str | None = None
    operation: int = 0
    """Index into the workflow's operations of the one being worked on."""
    key: str | None = None
    via_gateway: bool = True
    deadline_at: float | None = None
    call: int | None = None
    """The sequence number of the provider call this worker waits on."""
    answer: str | None = None
    failure: tuple[str, str] | None = None
    """(domain, signature) of the failure the worker will report."""
    wait_until: float | None = None
    """When a refused grant may be asked again (an earlier call of its key could still land until then)."""
    renewed_at: float = 0.0
    paused_at: float = 0.0
    """When the pause began: for the history's record of it, not part of the state (the digest leaves it out)."""
    timeouts: int = 0
    incarnation: int = 0
    """Bumped by a crash: answers to an earlier incarnation's calls are dropped."""

    def holding(self) -> bool:
        return self.fence is not None

    def stop(self) -> None:
        """This Attempt's work ends here: memory of it is dropped (its calls in flight still land)."""
        self.pc, self.fence, self.task_id, self.head = IDLE, None, None, None
        self.operation, self.key, self.via_gateway, self.deadline_at = 0, None, True, None
        self.call, self.answer, self.failure, self.timeouts, self.wait_until = None, None, None, 0, None

    def digest_row(self) -> tuple:
        fence = None if self.fence is None else self.fence[:2]
        return (
            self.worker_id,
            self.pc,
            self.paused,
            fence,
            self.task_id,
            self.head,
            self.operation,
            self.key,
            self.via_gateway,
            self.deadline_at,
            self.call is not None,
            self.answer,
            self.failure,
            self.wait_until,
            self.renewed_at,
            self.timeouts,
        )


@dataclass(frozen=True, slots=True)
class Call:
    """A provider call in flight: sent by a worker, not yet answered."""

    seq: int
    worker_id: str
    incarnation: int
    key: str
    operation: str
    identity: str
    task_id: str
    deadline_at: float | None
    via_gateway: bool


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A worker's request the network will deliver a second time; the duplicate's answer is dropped."""

    seq: int
    worker_id: str
    method: str
    args: tuple
    kwargs: tuple[tuple[str, Any], ...]

    def digest_row(self) -> tuple:
        # A fenced call's third argument is the lease token: random, and named already by (attempt, generation).
        args = self.args if self.method in ("claim_attempt", "claim_next") else self.args[:2] + self.args[3:]
        return (self.worker_id, self.method, args, self.kwargs)


# -------------------------------------------------------------------- world


class StepError(Exception):
    """An action label that names no enabled step of this world (a replay that does not fit)."""


_FIELDS: dict[type, tuple[str, ...]] = {}


def _record_row(record: Any) -> tuple:
    """A store record as plain values, in field order; a lease token's digest counts only as issued or not."""
    kind = type(record)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(item.name for item in fields(kind))
    return tuple(
        (getattr(record, name) is not None) if name == "token_digest" else getattr(record, name) for name in names if name != "version"
    )


@dataclass
class Budgets:
    """The faults the world may still spend."""

    crashes: int
    pauses: int
    lost_requests: int
    lost_responses: int
    duplicates: int
    cancels: int
    ci_failures: int
    refusals: int

    def row(self) -> tuple:
        return (
            self.crashes, self.pauses, self.lost_requests, self.lost_responses, self.duplicates, self.cancels, self.ci_failures,
            self.refusals,
        )  # fmt: skip


@dataclass
class Control:
    """What the control plane has learnt from the history is due: a loop decision, or the retry it decided."""

    decide_due: dict[str, None] = field(default_factory=dict)
    retry_due: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    """task -> (reason, hypothesis, blind) of the retry the loop decided (blind: the blind-retry anti-pattern's, undecided)."""


class World:
    """The orchestrator, its store and provider, the actors as data, and the history's checkers, all copyable."""

    def __init__(self, config: ExploreConfig, pattern: AntiPattern | None = None) -> None:
        self.config = config
        self.pattern = pattern
        self.behaviour = pattern.worker_seams if pattern is not None else Behaviour()
        self.blind_loop = pattern.blind_loop if pattern is not None else False
        self.clock = ManualClock(0.0)
        self.store = pattern.make_store() if pattern is not None else MemoryStore(keep_events=False)
        self.provider = LedgerProvider(supports_idempotency=config.idempotent_provider)
        core, reliability = config.core(), config.reliability()
        seams = pattern.seams if pattern is not None else None
        self.orchestrator = Orchestrator(self.store, self.clock, self.provider, core, reliability, seams=seams)
        self.workers = [WorkerState(worker_name(i)) for i in range(config.workers)]
        self.calls: list[Call] = []
        self.duplicates: list[Duplicate] = []
        self.control = Control()
        self.budgets = Budgets(
            config.crashes,
            config.pauses,
            config.lost_requests,
            config.lost_responses,
            config.duplicates,
            config.cancels,
            config.ci_failures,
            config.refusals,
        )
        self.sequence = 0
        context = CheckContext(core.lease_ttl_s, reliability.attempt_spend_max_usd, core.reason_length_min)
        self.history = History(all_checkers(context), tail_max=0, digest=False)
        self.step_entries: list[Any] = []
        """What the step being taken appended to the history (the explorer reads it, then clears it); first, the setup's."""
        self.store.subscribe(self._heard)
        for index in range(config.tasks):
            task_id = task_name(index)
            self.orchestrator.create_task(task_id, f"objective of {task_id}", WORKSPACE, budget=config.budget())
            self.orchestrator.accept_task(task_id)
            self.orchestrator.dispatch(task_id, Plan(f"hypothesis 1 for {task_id}"))

    @property
    def shared(self) -> list[Any]:
        """What every copy of this world shares instead of copying: immutable tables, configuration and rules."""
        context = self.orchestrator._context
        return [
            self.config,
            self.pattern,
            self.behaviour,
            SPEC,
            context.attempt_machine,
            context.task_machine,
            context.config,
            context.reliability,
            context.seams,
            context.fence,
            self.history.checkers[0].context,
        ]

    # ------------------------------------------------------------ history

    def _heard(self, event: Event) -> None:
        """Every committed event: into the history, and noted by the control plane as the simulator's is."""
        self._append(event)
        if not event.accepted or event.from_state == event.to_state or event.attempt_id is None or event.kind == "decide":
            return
        if event.to_state in ATTEMPT_TERMINAL:
            self.control.decide_due[event.task_id] = None

    def _append(self, entry: Any) -> None:
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

    # -------------------------------------------------------------- digest

    def digest_parts(self) -> tuple[str, list[list[str]], list[str]]:
        """The state as text: the ordered part, the unordered collections (as rows), and one row per worker.

        The search renames the workers in all three, then sorts each
        collection and the workers, so a state and its mirror image give the
        same text. Left out: the history (the checkers judge it on each path),
        event sequence numbers, record versions (a compare-and-set counter that
        decides nothing once the write is in), lease tokens (a fence is its
        Attempt and generation), and the sequence numbers naming calls and
        duplicates (which call a worker awaits is kept as a flag on the call).
        """
        orchestrator = self.orchestrator
        with self.store.transaction() as tx:
            tasks = [tx.task(task_name(i)) for i in range(self.config.tasks)]
            attempts = [a for t in tasks for a in tx.attempts_of(t.task_id)]
            intents = [repr(_record_row(i)) for a in attempts for i in tx.intents_of(a.attempt_id)]
        ordered = (
            self.clock.now(),
            tuple(_record_row(t) for t in tasks),
            tuple(_record_row(a) for a in attempts),
            tuple((a.attempt_id, orchestrator.admission_status(a.attempt_id)) for a in attempts),
            tuple((e.provider_id, e.key, e.operation, e.identity, self.provider.verdict(e.provider_id)) for e in self.provider.ledger),
            tuple(self.control.decide_due),
            tuple(sorted(self.control.retry_due.items())),
            self.budgets.row(),
        )
        calls = [repr((c.worker_id, c.key, c.operation, c.identity, c.deadline_at, c.via_gateway, self._awaited(c))) for c in self.calls]
        duplicates = [repr(d.digest_row()) for d in self.duplicates]
        return repr(ordered), [intents, calls, duplicates], [repr(w.digest_row()) for w in self.workers]

    def _awaited(self, call: Call) -> bool:
        worker = self.worker(call.worker_id)
        return worker.incarnation == call.incarnation and worker.call == call.seq

    # ------------------------------------------------------------- actions

    def worker(self, worker_id: str) -> WorkerState:
        for worker in self.workers:
            if worker.worker_id == worker_id:
                return worker
        raise StepError(f"no worker {worker_id!r}")

    def actions(self) -> list[str]:
        """Every step some actor may take now, by label, in a fixed order."""
        labels: list[str] = []
        admitted, queued, reap_due, to_reconcile, to_verify, in_review, live_tasks, active = self._survey()
        for worker in self.workers:
            name = worker.worker_id
            if worker.paused:
                labels.append(f"{name}:wake")
            else:
                for step, argument in self._worker_steps(worker, admitted):
                    labels.append(f"{name}:{step}{argument}")
                    if self.budgets.duplicates and step in _DUPLICABLE:
                        labels.append(f"{name}:{step}+dup{argument}")
                if worker.holding() and worker.renewed_at < self.clock.now():
                    labels.append(f"{name}:renew")
                if worker.holding() and self.budgets.pauses:
                    labels.append(f"{name}:pause")
            if self.budgets.crashes and (worker.holding() or worker.pc != IDLE):
                labels.append(f"{name}:crash")
        for call in self.calls:
            labels.append(f"provider:land:{call.seq}")
            if self.budgets.ci_failures and not self._landed_before(call):
                labels.append(f"provider:land-failing:{call.seq}")
            if self.budgets.lost_requests:
                labels.append(f"provider:drop:{call.seq}")
            if self.budgets.lost_responses and self._awaited(call):  # an answer nobody awaits is lost by itself
                labels.append(f"provider:lose:{call.seq}")
            if self.budgets.refusals:
                labels += [f"provider:refuse-{domain}:{call.seq}" for domain in REFUSALS]
        labels += [f"network:redeliver:{d.seq}" for d in self.duplicates]
        if queued:
            labels.append("control:admit")
        if reap_due:
            labels.append("control:reap")
        labels += [f"control:reconcile:{a}" for a in to_reconcile]
        labels += [f"control:verify:{a}" for a in to_verify]
        labels += [f"control:decide:{t}" for t in self.control.decide_due]
        labels += [f"control:retry:{t}" for t in self.control.retry_due]
        labels += [f"control:approve:{t}" for t in in_review]
        if self.budgets.cancels:
            labels += [f"control:cancel:{t}" for t in live_tasks]
            labels += [f"control:cancel-attempt:{a}" for a in active]
        target = self.next_instant()
        if target is not None:
            labels.append(f"clock:advance:{target!r}")
        return labels

    def _survey(self) -> tuple:
        now = self.clock.now()
        with self.store.transaction() as tx:
            admitted = sorted({a.task_id for a in tx.attempts_in(("admitted",))})
            queued = bool(tx.attempts_in(("queued",)))
            due = any(reapable(a, now) for a in tx.attempts_in(LEASED))  # the reaper's own scan and rule
            to_reconcile = [a.attempt_id for a in tx.attempts_in(("suspect", "reconciling"))]
            to_verify = [a.attempt_id for a in tx.attempts_in(("verifying",))]
            tasks = [tx.task(task_name(i)) for i in range(self.config.tasks)]
            active = [a.attempt_id for a in tx.attempts_in(ACTIVE)] if self.budgets.cancels else []
        in_review = [t.task_id for t in tasks if t.state == "review"]
        live = [t.task_id for t in tasks if t.state not in AT_REST]
        return admitted, queued, due, sorted(to_reconcile), sorted(to_verify), in_review, live, sorted(active)

    def _worker_steps(self, worker: WorkerState, admitted: list[str]) -> list[tuple[str, str]]:
        """The workflow step this worker would take next, as (step, ":argument" or ""): an idle one may claim any admitted task."""
        pc = worker.pc
        if pc == IDLE:
            # The claim a worker handed an offer makes, for each admitted task, and the pull a worker on a shared store makes.
            return [("claim", f":{task_id}") for task_id in admitted] + ([("claim-next", "")] if admitted else [])
        if pc == CLAIMED:
            return [("start", "")]
        if pc == GRANT and worker.wait_until is not None and self.clock.now() < worker.wait_until:
            return []  # waiting out an earlier call's deadline before asking again
        if pc in (GRANT, PERFORM, RECEIPT, CHECKPOINT, COMPLETE, ACK, REPORT, FAIL):
            return [(pc, "")]
        if pc == LOST and worker.deadline_at is not None and self.clock.now() >= worker.deadline_at:
            return [("timeout", "")]
        return []  # waiting for the provider's answer, or for a lost one's deadline

    def _landed_before(self, call: Call) -> bool:
        """Whether this call would find its effect already there (an idempotent provider answers with it)."""
        return bool(self.provider.find(call.key, call.operation, call.identity)) and self.provider.supports_idempotency

    def next_instant(self) -> float | None:
        """The next instant at which something changes by itself, or None; never past an unanswered call's deadline."""
        now = self.clock.now()
        held = {w.fence[:2] for w in self.workers if w.fence is not None and not w.paused}
        candidates = []
        with self.store.transaction() as tx:
            for attempt in tx.attempts_in(EXPIRABLE):
                if attempt.expires_at is not None and (attempt.attempt_id, attempt.generation) not in held:
                    candidates.append(attempt.expires_at)
            for attempt in tx.attempts_in(("cancelling",)):
                if attempt.cancel_deadline_at is not None:
                    candidates.append(attempt.cancel_deadline_at)
            for attempt in tx.attempts_in(("queued",)):
                if attempt.eligible_at is not None:
                    candidates.append(attempt.eligible_at)
            for attempt in tx.attempts_in(("reconciling",)):
                candidates += [i.deadline_at for i in tx.intents_of(attempt.attempt_id) if i.deadline_at is not None and i.receipt is None]
        candidates += [w.deadline_at for w in self.workers if w.pc in (LOST, GRANT) and w.deadline_at is not None]
        candidates += [w.wait_until for w in self.workers if w.pc == GRANT and w.wait_until is not None]
        future = [at for at in candidates if at > now]
        if not future:
            return None
        target = min(future)
        limits = [c.deadline_at for c in self.calls if c.deadline_at is not None]
        if limits and target >= min(limits):
            return None  # the provider answers (or loses) a call before its deadline passes
        return target

    def apply(self, label: str, checked: bool = True) -> None:
        """Take one step by its label; a label that is not enabled now is a StepError (unchecked: the search's own labels)."""
        if checked and label not in self.actions():
            raise StepError(f"{label} is not a step this world can take now")
        actor, _, rest = label.partition(":")
        action, _, argument = rest.partition(":")
        if actor == "clock":
            self._advance(float(argument))
        elif actor == "provider":
            self._answer(action, int(argument))
        elif actor == "network":
            self._redeliver(int(argument))
        elif actor == "control":
            self._control(action, argument)
        else:
            self._worker_act(self.worker(actor), action, argument)

    # ------------------------------------------------------------- workers

    def _call(self, worker: WorkerState, duplicate: bool, method: str, *args: Any, **kwargs: Any) -> Any:
        if duplicate:
            self.budgets.duplicates -= 1
            self.sequence += 1
            self.duplicates.append(Duplicate(self.sequence, worker.worker_id, method, args, tuple(sorted(kwargs.items()))))
        return getattr(self.orchestrator, method)(*args, **kwargs)

    def _worker_act(self, worker: WorkerState, action: str, argument: str) -> None:
        step, _, dup = action.partition("+")
        duplicate = dup == "dup"
        if step == "wake":
            worker.paused = False
            self._append(Fault(worker.paused_at, "pause", worker.worker_id, self.clock.now(), "frozen, it carries on where it stopped"))
        elif step == "pause":
            self.budgets.pauses -= 1
            worker.paused, worker.paused_at = True, self.clock.now()
        elif step == "crash":
            self.budgets.crashes -= 1
            self._fault("crash", worker.worker_id, "it restarts at once, its memory gone")
            worker.stop()
            worker.paused = False
            worker.incarnation += 1
        elif step == "renew":
            self._renew(worker)
        elif step == "claim":
            self._claim(worker, duplicate, argument)
        elif step == "claim-next":
            self._claim(worker, duplicate, None)
        else:
            _STEPS[step](self, worker, duplicate)

    def _claim(self, worker: WorkerState, duplicate: bool, task_id: str | None) -> None:
        """Claim the task's admitted Attempt (`claim_attempt`), or with no task the longest-admitted one (`claim_next`)."""
        if task_id is None:
            claim = self._call(worker, duplicate, "claim_next", worker.worker_id, WORKSPACE, True)
        else:
            claim = self._call(worker, duplicate, "claim_attempt", task_id, worker.worker_id, WORKSPACE, True)
        if claim is None or not claim.accepted:
            return
        lease = claim.lease
        worker.fence = (lease.attempt_id, lease.generation, lease.token)
        worker.task_id = lease.task_id
        worker.head = head_of(lease.task_id, claim.manifest.hypothesis)
        worker.renewed_at = self.clock.now()
        worker.pc = CLAIMED
        worker.operation = self._resume_at(lease.attempt_id)

    def _resume_at(self, attempt_id: str) -> int:
        """Where the workflow resumes: after the operation the predecessor checkpointed, if the plan is the same."""
        if self.behaviour.ignores_checkpoint:
            return 0
        with self.store.transaction() as tx:
            attempt = tx.attempt(attempt_id)
            previous = tx.attempt(attempt.previous_attempt_id) if attempt.previous_attempt_id else None
        if previous is None or previous.hypothesis != attempt.hypothesis or previous.checkpoint not in self.config.operations:
            return 0
        return self.config.operations.index(previous.checkpoint) + 1

    def _start(self, worker: WorkerState, duplicate: bool) -> None:
        answer = self._call(worker, duplicate, "start_attempt", *worker.fence)
        if not answer.accepted:
            self._refused(worker, answer)
            return
        self._next_operation(worker)

    def _next_operation(self, worker: WorkerState) -> None:
        worker.key, worker.answer, worker.deadline_at, worker.timeouts, worker.via_gateway = None, None, None, 0, True
        worker.wait_until = None
        worker.pc = GRANT if worker.operation < len(self.config.operations) else COMPLETE

    def _operation(self, worker: WorkerState) -> tuple[str, str]:
        operation = self.config.operations[worker.operation]
        return operation, worker.head

    def _grant(self, worker: WorkerState, duplicate: bool) -> None:
        operation, identity = self._operation(worker)
        if operation in self.behaviour.bypasses_gateway:
            worker.key, worker.via_gateway = f"{operation}:{worker.worker_id}:{identity}", False
            worker.deadline_at, worker.pc = self.clock.now() + self.config.call_deadline_s, PERFORM
            return
        presented = f"{operation}:{worker.worker_id}:{worker.fence[0]}:{identity}" if self.behaviour.mints_own_keys else None
        grant = self._call(
            worker,
            duplicate,
            "grant_tool",
            *worker.fence,
            operation,
            identity,
            call_deadline_s=self.config.call_deadline_s,
            key=presented,
            dependency=DEPENDENCY,
        )
        if not grant.accepted:
            if "no_call_in_flight" in grant.guards:
                # An earlier call may still land: wait a call deadline and ask again, counting the ask (as the simulator's worker).
                worker.timeouts += 1
                if worker.timeouts > self.config.gateway_retries_max:
                    worker.failure, worker.pc = ("unknown_result", "unknown_result:an earlier call may still land"), FAIL
                else:
                    worker.wait_until = self.clock.now() + self.config.call_deadline_s
                return
            if "spend_within_budget" in grant.guards:
                worker.failure, worker.pc = ("capacity", "budget:spend ceiling reached"), FAIL
                return
            if "timeout_budget_left" in grant.guards:
                worker.failure, worker.pc = ("executor", "executor:timeout budget exhausted"), FAIL
                return
            self._refused(worker, grant)
            return
        if grant.replay is not None:
            worker.key, worker.answer = grant.key, grant.replay  # the effect exists: never call again
            self._after_effect(worker)
            return
        worker.key, worker.deadline_at, worker.pc = grant.key, grant.deadline_at, PERFORM

    def _perform(self, worker: WorkerState, _duplicate: bool) -> None:
        operation, identity = self._operation(worker)
        if worker.deadline_at is not None and self.clock.now() >= worker.deadline_at:
            # Sent after its deadline (the worker was paused between grant and call): the provider lands nothing past
            # it, so the call is void, and the worker, hearing nothing, times out.
            self._append(Fault(self.clock.now(), "void-call", worker.worker_id, self.clock.now(), f"{worker.key} sent past its deadline"))
            worker.pc = LOST
            return
        self.sequence += 1
        call = Call(
            self.sequence,
            worker.worker_id,
            worker.incarnation,
            worker.key,
            operation,
            identity,
            worker.task_id,
            worker.deadline_at,
            worker.via_gateway,
        )
        self.calls.append(call)
        worker.call, worker.pc = call.seq, WAITING

    def _receipt(self, worker: WorkerState, duplicate: bool) -> None:
        answer = self._call(worker, duplicate, "record_receipt", *worker.fence, worker.key, worker.answer)
        if not answer.accepted and answer.code in LEASE_GONE:
            self._refused(worker, answer)
            return
        self._after_effect(worker)

    def _after_effect(self, worker: WorkerState) -> None:
        """Checkpoint between operations; after the last one, complete (as the simulator's worker does).

        A checkpoint after the last effect would let Attempt N+1 resume with
        nothing left to ask the gateway, so no effect would be handed to it and
        verification would find nothing of its own to verify: the task would end
        blocked on contradictory evidence instead of done.
        """
        if worker.operation + 1 < len(self.config.operations):
            worker.pc = CHECKPOINT
        else:
            worker.operation += 1
            self._next_operation(worker)

    def _checkpoint(self, worker: WorkerState, duplicate: bool) -> None:
        operation, _identity = self._operation(worker)
        answer = self._call(worker, duplicate, "checkpoint", *worker.fence, operation)
        if not answer.accepted:
            self._refused(worker, answer)
            return
        worker.operation += 1
        self._next_operation(worker)

    def _complete(self, worker: WorkerState, duplicate: bool) -> None:
        self._call(worker, duplicate, "complete_attempt", *worker.fence, f"pull request for {worker.head}", head_sha=worker.head)
        worker.stop()

    def _ack(self, worker: WorkerState, duplicate: bool) -> None:
        self._call(worker, duplicate, "acknowledge_cancel", *worker.fence)
        worker.stop()

    def _report(self, worker: WorkerState, duplicate: bool) -> None:
        """A refused call is reported to the gateway first (its breaker counts the signature), then the Attempt fails."""
        answer = self._call(worker, duplicate, "report_call_failure", *worker.fence, worker.key, worker.failure[1])
        if not answer.accepted and answer.code in LEASE_GONE:
            self._refused(worker, answer)
            return
        worker.pc = FAIL

    def _fail(self, worker: WorkerState, duplicate: bool) -> None:
        domain, signature = worker.failure or (
            "provider",
            f"provider:{self._operation(worker)[0]} unanswered after {worker.timeouts} timeouts",
        )
        self._call(worker, duplicate, "report_failure", *worker.fence, domain, signature)
        worker.stop()

    def _timeout(self, worker: WorkerState, duplicate: bool) -> None:
        """The call's deadline passed with no answer: it may have landed. Report it, then ask the gateway again (or give up)."""
        signature = f"timeout:{DEPENDENCY} gave no answer by the deadline"
        answer = self._call(worker, duplicate, "report_call_failure", *worker.fence, worker.key, signature)
        if not answer.accepted and answer.code in LEASE_GONE:
            self._refused(worker, answer)
            return
        worker.timeouts += 1
        worker.call = None
        worker.pc = GRANT if worker.timeouts <= self.config.gateway_retries_max else FAIL

    def _renew(self, worker: WorkerState) -> None:
        renewal = self.orchestrator.renew_lease(*worker.fence)
        if not renewal.accepted:
            worker.stop()  # a refused renewal stops all work at once
            return
        worker.renewed_at = self.clock.now()
        if renewal.cancel_requested and not self.behaviour.ignores_cancel and worker.pc != ACK:
            worker.pc = ACK

    def _refused(self, worker: WorkerState, answer: Any) -> None:
        """A refusal read by its data: acknowledge when the Attempt is cancelling, otherwise stop without another word."""
        if answer.state == "cancelling" and answer.code not in FENCE_CODES and not self.behaviour.ignores_cancel:
            worker.pc = ACK
            return
        worker.stop()

    # ------------------------------------------------------------ provider

    def _answer(self, how: str, seq: int) -> None:
        call = next(c for c in self.calls if c.seq == seq)
        self.calls.remove(call)
        if how.startswith("refuse-"):
            self._refuse(call, how.removeprefix("refuse-"))
            return
        if how == "drop":
            self.budgets.lost_requests -= 1
            self._fault("lost-request", call.worker_id, f"the call {call.key} never reaches the code host")
            worker = self.worker(call.worker_id)
            if self._awaits(worker, call):
                worker.call, worker.pc = None, LOST  # it hears nothing, and times out at the deadline
            return
        before = len(self.provider.ledger)
        if how == "lose":
            self.budgets.lost_responses -= 1
            self.provider.lose_responses(1)
            self._fault("lost-response", call.worker_id, f"the answer to {call.key} is lost")
        try:
            effect = self.provider.perform(call.key, call.operation, call.identity, "")
            answered = effect.provider_id
        except ProviderTimeout:
            answered = None
        for effect in self.provider.ledger[before:]:
            if how == "land-failing":
                self.budgets.ci_failures -= 1
                self.provider.set_verdict(effect.provider_id, CI_FAILURE)
            landed = Landed(
                self.clock.now(), DEPENDENCY, effect.provider_id, effect.key, effect.operation, effect.identity,
                call.task_id, call.worker_id, call.via_gateway,
            )  # fmt: skip
            self._append(landed)
        worker = self.worker(call.worker_id)
        if not self._awaits(worker, call):
            return  # that worker crashed or stopped: the answer reaches no one
        worker.call = None
        if answered is None:
            worker.pc = LOST
        elif call.via_gateway:
            worker.answer, worker.pc = answered, RECEIPT
        else:
            worker.answer = answered
            self._after_effect(worker)

    def _refuse(self, call: Call, domain: str) -> None:
        """The provider refuses the call: nothing lands, and the worker reports it in the refusal's domain."""
        self.budgets.refusals -= 1
        said = REFUSALS[domain]
        self._fault("refusal", call.worker_id, f"the code host refuses {call.key}: {said}")
        worker = self.worker(call.worker_id)
        if not self._awaits(worker, call):
            return
        worker.call = None
        worker.failure = (domain, f"{domain}:{said}")
        worker.pc = REPORT if call.via_gateway else FAIL

    def _awaits(self, worker: WorkerState, call: Call) -> bool:
        return worker.incarnation == call.incarnation and worker.call == call.seq and worker.pc == WAITING

    def _redeliver(self, seq: int) -> None:
        duplicate = next(d for d in self.duplicates if d.seq == seq)
        self.duplicates.remove(duplicate)
        self._fault("duplicate", duplicate.worker_id, f"{duplicate.method} delivered again")
        getattr(self.orchestrator, duplicate.method)(*duplicate.args, **dict(duplicate.kwargs))

    # ------------------------------------------------------------- control

    def _control(self, action: str, argument: str) -> None:
        orchestrator = self.orchestrator
        if action == "admit":
            orchestrator.run_admission()
        elif action == "reap":
            orchestrator.reap()
        elif action == "reconcile":
            orchestrator.reconcile_attempt(argument)
        elif action == "verify":
            orchestrator.verify_attempt(argument)
        elif action == "decide":
            self.control.decide_due.pop(argument)
            self._decide(argument)
        elif action == "retry":
            reason, hypothesis, blind = self.control.retry_due.pop(argument)
            result = orchestrator.retry(argument, reason, Plan(hypothesis))
            if blind and not result.accepted:  # the blind loop asks the loop only once its blind retry is refused
                with self.store.transaction() as tx:
                    latest = tx.attempts_of(argument)[-1]
                self._decide_by_policy(argument, latest)
        elif action == "approve":
            orchestrator.approve(argument)
        elif action == "cancel":
            self.budgets.cancels -= 1
            orchestrator.cancel_task(argument, "operator cancelled the task")
        elif action == "cancel-attempt":
            self.budgets.cancels -= 1
            orchestrator.cancel_attempt(argument, "operator cancelled this attempt")
        else:
            raise StepError(f"unknown control step {action!r}")

    def _decide(self, task_id: str) -> None:
        """The loop's decision after an Attempt ended; a retry or correction it decides is the control plane's next step."""
        with self.store.transaction() as tx:
            latest = tx.attempts_of(task_id)[-1]
        if self.blind_loop and latest.state == "failed":
            self.control.retry_due[task_id] = (f"blind retry after {latest.attempt_id} failed", latest.hypothesis, True)
            return
        self._decide_by_policy(task_id, latest)

    def _decide_by_policy(self, task_id: str, latest: Any) -> None:
        decision = self.orchestrator.decide(task_id)
        kind = getattr(decision, "kind", None)
        if kind in ("retry", "correct"):
            hypothesis = latest.hypothesis if kind == "retry" else f"hypothesis {latest.number + 1} for {task_id}"
            self.control.retry_due[task_id] = (f"{kind}: {decision.reason}", hypothesis, False)

    # --------------------------------------------------------------- clock

    def _advance(self, target: float) -> None:
        """Move to `target` (the label's, which `apply` checked is the next instant); live, unpaused holders renew on their
        cadence on the way, as their heartbeats would."""
        now = self.clock.now()
        while now < target:
            now = min(target, now + self.config.heartbeat_interval_s)
            self.clock.set(now)
            for worker in self.workers:
                if worker.holding() and not worker.paused:
                    self._renew(worker)

    def _fault(self, kind: str, target: str, detail: str = "") -> None:
        """An instant fault, into the history (a pause is recorded when it ends, with its span)."""
        now = self.clock.now()
        self._append(Fault(now, kind, target, now, detail))


_STEPS: dict[str, Callable[[World, WorkerState, bool], None]] = {
    "start": World._start,
    "grant": World._grant,
    "perform": World._perform,
    "receipt": World._receipt,
    "checkpoint": World._checkpoint,
    "complete": World._complete,
    "ack": World._ack,
    "report": World._report,
    "fail": World._fail,
    "timeout": World._timeout,
}
_DUPLICABLE = frozenset({"claim", "claim-next", "start", "grant", "receipt", "checkpoint", "complete", "ack", "report", "fail", "timeout"})
"""Worker steps that are a request on the wire (a provider call is the provider's to duplicate, and is not)."""
