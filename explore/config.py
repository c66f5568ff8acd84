"""What a search enumerates: the small configuration (actors, fault bounds, workflow, timings), its errors, and its names.

Every count has a small upper bound: the state space grows with the product
of the faults, and a configuration the search cannot finish proves nothing.
The timings are the core's, the agent's and the backoff's, each a field here
with its default once; `core()`, `reliability()`, `agent()` and `workflow()`
turn them into the objects the orchestrator and the agent take, and
`table()` is the transition table the orchestrator runs (`spec`: a folder or
git revision, read as `shiftchange spec check` reads one; None for the
packaged spec), before any anti-pattern's edit of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shiftchange.agent import AgentConfig, OperationsWorkflow, agent_config
from shiftchange.agent.workflow import CODE_HOST
from shiftchange.core import BackoffConfig, Budget, CoreConfig, InputError, RateLimitConfig, ReliabilityConfig
from shiftchange.core.table import Table, table_for

from .abstract_time import dyadic

TASK_PREFIX, WORKER_PREFIX = "task-", "worker-"
WORKSPACE = "workspace"
DEPENDENCY = CODE_HOST
"""Where every operation of the explored workflow lands."""

_COUNTS = {
    "workers": (1, 4),
    "tasks": (1, 3),
    "crashes": (0, 4),
    "pauses": (0, 4),
    "stalls": (0, 4),
    "lost_requests": (0, 4),
    "lost_responses": (0, 4),
    "duplicates": (0, 4),
    "cancels": (0, 2),
    "operator_calls": (0, 2),
    "ci_failures": (0, 4),
    "refusals": (0, 4),
    "deletions": (0, 2),
    "retries": (0, 4),
    "gateway_retries_max": (0, 3),
}
"""Each count's (least, greatest) value."""
_TIMINGS = (
    "lease_ttl_s",
    "heartbeat_interval_s",
    "call_deadline_s",
    "cancel_ack_timeout_s",
    "backoff_base_s",
    "backoff_cap_s",
    "gateway_retry_s",
)
TIMING_MAX_S = 3600
ABSTRACT, CONCRETE = "abstract", "concrete"
TIME_MODES = (ABSTRACT, CONCRETE)
CLOCK_READERS = frozenset({"timestamp-keys"})
"""Anti-patterns whose broken core reads the clock's value, not a difference (timestamp-keys mints a key from it, and
whether two keys are equal then depends on when both were minted): only the concrete clock searches them soundly."""
OPERATIONS_MAX, OPERATION_NAME_MAX = 3, 40


class ExploreError(InputError):
    """A configuration or a replayed path the explorer cannot use: one line saying why."""


class StepError(Exception):
    """An action label that names no enabled step of this world (a replay that does not fit)."""


@dataclass(frozen=True)
class ExploreConfig:
    """A small configuration to enumerate: actors, fault bounds, the workflow, and the timings (all in seconds)."""

    workers: int = 2
    tasks: int = 1
    crashes: int = 0
    pauses: int = 0
    stalls: int = 0
    """Slow spells of a worker holding a lease: for one lease's length it takes no step, while its heartbeat renews on
    cadence (the slow worker the chapter's Suspect is careful not to call dead; its lease outlives the stall)."""
    lost_requests: int = 0
    """Calls the provider never receives: nothing lands, and the caller hears nothing until the deadline."""
    lost_responses: int = 0
    duplicates: int = 0
    """Worker requests the network may deliver a second time, later."""
    cancels: int = 0
    """Operator cancellations: of a task (with its active Attempt), or of one active Attempt."""
    operator_calls: int = 0
    """An operator's calls made at any moment, whatever the task's state: accept it, approve it, release it with one
    more Attempt of budget, or ask admission for one of its Attempts. The table must refuse those out of turn; a release
    of a resting task hands it back to the loop, which decides again."""
    ci_failures: int = 0
    """Effects whose CI verdict fails (with one signature): validation failures the loop must answer."""
    refusals: int = 0
    """Provider calls refused outright, in the authorization domain (a revoked credential) or the configuration domain."""
    deletions: int = 0
    """Effects deleted at the code host by someone outside the system (a pull request closed and deleted): the Attempt's
    receipt then names what the provider no longer holds, evidence that contradicts the records."""
    retries: int = 1
    """Automatic retries per task: the task's budget allows `retries + 1` Attempts."""
    operations: tuple[str, ...] = ("create-pr",)
    """The workflow's side effects, in order, each at the code host under a key that spans Attempts."""
    idempotent_provider: bool = True
    """The code host honours operation keys; without, it is found by identity (a PR by its head) and repeats a call."""
    gateway_retries_max: int = 1
    """How often a worker asks the gateway again for one call (after a timeout, or an earlier call's deadline) before it
    reports the Attempt failed: the agent's `gateway_retries_max`."""
    lease_ttl_s: float = 3.0
    heartbeat_interval_s: float = 1.0
    call_deadline_s: float = 2.0
    cancel_ack_timeout_s: float = 2.0
    backoff_base_s: float = 1.0
    """The first backoff, doubling: between Attempts (the core's) and between a call's retries (the agent's)."""
    backoff_cap_s: float = 4.0
    gateway_retry_s: float = 2.0
    """The worker's pause before asking the gateway again after a lost answer or a rate denial: the agent's
    `gateway_retry_s`."""
    antipattern: str | None = None
    spec: str | None = None
    """The spec the core runs: a folder or a git revision naming one (`spec.source.read_spec`); None for the packaged spec."""
    time: str = ABSTRACT
    """What a state is known by (`abstract_time.py`): "abstract", its times to come relative to the clock and those
    reached as reached; "concrete", every time as a number on the clock. The steps, and so the paths, are the same."""

    def __post_init__(self) -> None:
        if self.spec is not None and (not isinstance(self.spec, str) or not self.spec.strip()):
            raise ExploreError(f"spec must name a spec folder or a git revision, not {self.spec!r:.60}")
        for name, (low, high) in _COUNTS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ExploreError(f"{name} must be a whole number from {low} to {high}, not {value!r}")
        self._check_operations()
        for name in _TIMINGS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= TIMING_MAX_S:
                raise ExploreError(f"{name} must be a positive number of seconds up to {TIMING_MAX_S}, not {value!r}")
        if self.heartbeat_interval_s >= self.lease_ttl_s:
            raise ExploreError(
                f"heartbeat_interval_s ({self.heartbeat_interval_s:g}) must be shorter than lease_ttl_s ({self.lease_ttl_s:g})"
            )
        if self.backoff_cap_s < self.backoff_base_s:
            raise ExploreError(f"backoff_cap_s ({self.backoff_cap_s:g}) must be at least backoff_base_s ({self.backoff_base_s:g})")
        self._check_time()

    def _check_time(self) -> None:
        if self.time not in TIME_MODES:
            raise ExploreError(f"time must be {' or '.join(TIME_MODES)}, not {self.time!r:.60}")
        if self.time == ABSTRACT and self.antipattern in CLOCK_READERS:
            raise ExploreError(
                f"the {self.antipattern} core reads the clock's value, which the abstract clock does not keep:"
                " search it with --time concrete"
            )
        if self.time == ABSTRACT:
            for name in _TIMINGS:
                if not dyadic(getattr(self, name)):
                    raise ExploreError(
                        f"{name} ({getattr(self, name)!r}) is not a whole multiple of 1/1024 s, which the abstract clock needs"
                        " to add times exactly: round it, or search with --time concrete"
                    )

    def concrete(self) -> ExploreConfig:
        """This configuration on the concrete clock: what a replay plays every path on."""
        return replace(self, time=CONCRETE)

    def horizon_s(self) -> float:
        """The clock's bound on an abstract search: before it no Attempt's time budget, no task's elapsed budget and no
        admission queue's age limit can bind, however long ago anything began (`abstract_time.py`, point 2)."""
        core, budget, admission = self.core(), self.budget(), self.reliability().admission
        attempts = budget.attempts_max + self.operator_calls  # each operator release may allow one Attempt more
        return min(core.timeout_budget_s - core.call_deadline_max_s, budget.elapsed_max_s / attempts, admission.queue_age_max_s)

    def _check_operations(self) -> None:
        operations = self.operations
        if not isinstance(operations, tuple) or not operations or len(operations) > OPERATIONS_MAX:
            raise ExploreError(f"operations must name one to {OPERATIONS_MAX} side effects, not {operations!r}")
        for operation in operations:
            named = isinstance(operation, str) and 0 < len(operation) <= OPERATION_NAME_MAX and operation.replace("-", "").isalnum()
            if not named:
                raise ExploreError(
                    f"an operation is a name of up to {OPERATION_NAME_MAX} letters, digits and dashes, not {operation!r:.60}"
                )
        if len(set(operations)) != len(operations):
            raise ExploreError(f"operations must differ from each other: {', '.join(operations)}")

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
        no circuit breaker, retry budget or concurrency limit, whose counts would be state
        the digest does not hold.
        """
        return ReliabilityConfig(
            backoff=BackoffConfig(strategy="exponential", base_s=self.backoff_base_s, cap_s=self.backoff_cap_s),
            rate_limits={DEPENDENCY: RateLimitConfig(rate_per_s=1e6, burst=1_000_000)},
            breaker=None,
            retry_budget=None,
            concurrency=None,
        )

    def budget(self) -> Budget:
        return Budget(attempts_max=self.retries + 1, interruptions_max=max(3, self.cancels + 1))

    def agent(self) -> AgentConfig:
        """The worker's timings as an `AgentConfig` (the explorer's flags are its settings, flat), through the agent's one
        converter."""
        held = AgentConfig(
            call_deadline_s=self.call_deadline_s, gateway_retries_max=self.gateway_retries_max, gateway_retry_s=self.gateway_retry_s
        )
        return agent_config(self.core(), held)

    def workflow(self) -> OperationsWorkflow:
        return OperationsWorkflow(self.operations, DEPENDENCY)

    def table(self) -> Table:
        """The transition table `spec` names (the packaged one for None), compiled once per process and shared by every world.

        A bad name is a `spec.source.SpecSourceError`, a malformed spec a `spec.SpecError` naming its line.
        """
        return table_for(self.spec)


def worker_name(index: int) -> str:
    return f"{WORKER_PREFIX}{index + 1}"


def task_name(index: int) -> str:
    return f"{TASK_PREFIX}{index + 1}"
