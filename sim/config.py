"""Every number that tunes a simulated run, named with its unit, with its default in one place.

A run is a function of (code, `SimConfig`, seed). The config is plain frozen
data so a scenario is a value that can be printed, compared and written into
the `--json` report; the nemesis's fault schedule is drawn from the seed and
these rates before the run starts, so the shrinker can remove faults one by
one and replay the rest exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from shiftchange.core import AdmissionConfig, Budget, CoreConfig, InputError, ReliabilityConfig
from shiftchange.core.config import require_positive, require_probability, require_whole

ARRIVALS = ("steady", "poisson", "bursts")
FAULTS = ("crash", "pause", "partition", "duplicate_burst", "outage", "slow_tools", "revoked_credentials", "lost_responses")


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """What arrives: tasks, each a small agent workflow (plan, slow tool calls, commit, push, pull request, CI)."""

    tasks: int = 1000
    arrival: str = "poisson"
    """One of ARRIVALS: evenly spaced, Poisson, or bursts of `burst_size` every `burst_interval_s`."""
    arrival_rate_per_s: float = 0.25
    burst_size: int = 50
    burst_interval_s: float = 300.0
    workspaces: int = 8
    """Bulkhead partitions (repositories); tasks are spread over them evenly."""
    plan_s: float = 6.0
    """Mean duration of the planning model call."""
    tool_calls: int = 2
    """Slow tool calls per Attempt (each a model call, then local work while the lease is renewed from inside it)."""
    tool_call_s: float = 30.0
    """Mean local work per tool call (exponentially distributed)."""
    commit_s: float = 2.0
    ci_s: float = 60.0
    """How long CI takes to judge a pull request after it lands."""
    wrong_answer_probability: float = 0.15
    """Chance that one hypothesis is wrong: CI fails it, a validation failure answered by a changed hypothesis."""
    nonconvergent_probability: float = 0.03
    """Chance that a task fails CI the same way whatever the hypothesis (the loop must stop or escalate)."""
    runaway_probability: float = 0.0
    """Chance that a task is a hostile input: its agent keeps calling the model (budgets must stop it)."""
    runaway_calls: int = 400
    model_call_cost_usd: float = 0.04
    model_call_tokens: int = 3000
    cancel_probability: float = 0.02
    """Chance that an operator cancels a task some time after it arrives."""
    cancel_after_s: float = 60.0
    """Mean delay from arrival to that cancellation."""
    deadline_s: float = 3600.0
    """Each task's deadline, after its arrival: work that cannot start by then is not worth doing."""
    priorities: int = 3
    budget: Budget = field(default_factory=lambda: Budget(attempts_max=5, elapsed_max_s=7200.0, cost_max_usd=4.0, tokens_max=400_000))
    drain_s: float = 3 * 3600.0
    """After the last arrival the run drains for at most this long; a task not at rest by then was lost."""

    def __post_init__(self) -> None:
        if self.arrival not in ARRIVALS:
            raise InputError(f"arrival must be one of {', '.join(ARRIVALS)}, not {self.arrival!r}")
        require_whole(self, ("tasks", "burst_size", "workspaces", "tool_calls", "runaway_calls", "model_call_tokens", "priorities"))
        require_positive(
            self, ("arrival_rate_per_s", "burst_interval_s", "plan_s", "tool_call_s", "commit_s", "ci_s", "deadline_s", "drain_s")
        )
        require_probability(self, ("wrong_answer_probability", "nonconvergent_probability", "runaway_probability", "cancel_probability"))
        if self.tasks < 1 or self.workspaces < 1 or self.priorities < 1:
            raise InputError("tasks, workspaces and priorities must be at least 1")


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """The transport between workers and the orchestrator."""

    latency_s: float = 0.02
    """Mean one-way latency (exponentially distributed around it, so messages also reorder)."""
    loss_probability: float = 0.0
    """Chance that a request is lost on the way in (the call never happens)."""
    response_loss_probability: float = 0.0
    """Chance that a response is lost on the way back (the call happened; the caller does not know)."""
    duplicate_probability: float = 0.0
    """Chance that a request is delivered a second time, a little later (its response is dropped)."""
    request_timeout_s: float = 5.0
    """How long a caller waits for a response before it gives up on the call."""

    def __post_init__(self) -> None:
        require_positive(self, ("latency_s", "request_timeout_s"))
        require_probability(self, ("loss_probability", "response_loss_probability", "duplicate_probability"))


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One provider (a code host, a model provider): latency, overload, rate limit, idempotency."""

    latency_s: float = 1.0
    """Mean service time of one call with nothing else in flight."""
    overload_in_flight: int = 50
    """In-flight calls at which latency has doubled: latency grows linearly with load beyond nothing."""
    rate_per_s: float = 50.0
    """The provider's own rate limit; calls beyond it are refused (429, capacity)."""
    supports_idempotency: bool = True
    """Whether the provider deduplicates by operation key; without it, only provider identity (the head SHA) finds an effect."""
    accept_then_timeout_probability: float = 0.0
    """Chance that a call lands but its response never arrives (the caller times out)."""

    def __post_init__(self) -> None:
        require_positive(self, ("latency_s", "overload_in_flight", "rate_per_s"))
        require_probability(self, ("accept_then_timeout_probability",))


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """The execution plane: how many workers, and how they call."""

    workers: int = 48
    restart_s: float = 30.0
    """A crashed worker comes back after this long, with empty memory."""
    call_deadline_s: float = 60.0
    """The deadline a worker asks for on each provider call."""
    gateway_retries_max: int = 3
    """How often a worker asks the gateway again (a lost response, a rate denial) before it reports a failure."""
    gateway_retry_s: float = 2.0
    """Pause between those asks."""

    def __post_init__(self) -> None:
        require_whole(self, ("workers", "gateway_retries_max"))
        require_positive(self, ("restart_s", "call_deadline_s", "gateway_retry_s"))
        if self.workers < 1:
            raise InputError("workers must be at least 1")


@dataclass(frozen=True, slots=True)
class ControlConfig:
    """The control plane's cadences: how often admission, the reaper and the loop decisions run."""

    admission_interval_s: float = 1.0
    """How often admission looks for a change (an Attempt queued or ended) to act on."""
    admission_idle_s: float = 10.0
    """The longest admission goes without a step even when nothing changed (backoffs end, deadlines pass)."""
    reap_interval_s: float = 5.0
    loop_interval_s: float = 2.0
    """How often pending reconciliations, verifications and decisions are worked off."""
    redispatch_s: float = 30.0
    """An admitted Attempt nobody claimed within this long is offered to the workers again."""
    review_s: float = 30.0
    """A reviewer approves a task that reached review after this long."""
    retire_grace_s: float = 900.0
    """A task at rest stays in the store this long, so late calls about it are still judged, before it retires."""

    def __post_init__(self) -> None:
        require_positive(self, tuple(f.name for f in fields(self)))


@dataclass(frozen=True, slots=True)
class NemesisConfig:
    """What breaks: which faults are switched on, how often each strikes and how long it lasts."""

    faults: tuple[str, ...] = ()
    crash_interval_s: float = 600.0
    """Mean time between worker crashes (across all workers)."""
    pause_interval_s: float = 900.0
    pause_s: float = 90.0
    """A stop-the-world pause: longer than the lease, so the worker wakes up believing it still owns its Attempt."""
    partition_interval_s: float = 900.0
    partition_s: float = 120.0
    partition_workers: int = 3
    """How many workers one partition cuts off from the orchestrator."""
    duplicate_interval_s: float = 600.0
    duplicate_burst_s: float = 60.0
    duplicate_burst_probability: float = 0.5
    """During a duplicate-delivery burst, the chance each request arrives twice."""
    outage_interval_s: float = 1800.0
    outage_s: float = 180.0
    slow_tools_interval_s: float = 900.0
    slow_tools_s: float = 300.0
    slow_tools_factor: float = 8.0
    """During a slow-tool tail, tool calls take this many times longer."""
    revoked_interval_s: float = 3600.0
    revoked_s: float = 120.0
    lost_responses_interval_s: float = 900.0
    lost_responses_s: float = 120.0
    lost_responses_probability: float = 0.5
    """During such a window, the chance that a provider call lands but its response is lost."""

    def __post_init__(self) -> None:
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown:
            raise InputError(f"unknown fault {unknown[0]!r}; use any of {', '.join(FAULTS)}")
        require_whole(self, ("partition_workers",))
        require_probability(self, ("duplicate_burst_probability", "lost_responses_probability"))
        require_positive(self, tuple(f.name for f in fields(self) if f.name.endswith("_s") or f.name.endswith("_factor")))


@dataclass(frozen=True)
class SimConfig:
    """One simulated world: workload, transport, providers, workers, control plane, nemesis, and the core's own config."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    code_host: ProviderConfig = field(default_factory=ProviderConfig)
    model_provider: ProviderConfig = field(default_factory=lambda: ProviderConfig(latency_s=4.0, overload_in_flight=40, rate_per_s=20.0))
    workers: WorkerConfig = field(default_factory=WorkerConfig)
    control: ControlConfig = field(default_factory=ControlConfig)
    nemesis: NemesisConfig = field(default_factory=NemesisConfig)
    core: CoreConfig = field(default_factory=lambda: CoreConfig(lease_ttl_s=60.0, heartbeat_interval_s=15.0, cancel_ack_timeout_s=45.0))
    reliability: ReliabilityConfig = field(
        default_factory=lambda: ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=12))
    )
    """Twelve per partition: an Attempt holds its slot through CI as well as its run, so eight would queue work 48 workers could take."""

    def with_tasks(self, tasks: int) -> SimConfig:
        if isinstance(tasks, bool) or not isinstance(tasks, int) or not 1 <= tasks <= 10_000_000:
            raise InputError(f"tasks must be a whole number from 1 to 10,000,000, not {tasks!r}")
        return replace(self, workload=replace(self.workload, tasks=tasks))

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the JSON report."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


__all__ = [
    "ARRIVALS",
    "FAULTS",
    "ControlConfig",
    "NemesisConfig",
    "NetworkConfig",
    "ProviderConfig",
    "SimConfig",
    "WorkerConfig",
    "WorkloadConfig",
]
