"""Every number that tunes a simulated run, named with its unit, with its default in one place.

A run is a function of (code, `SimConfig`, seed). The config is plain frozen
data so a scenario is a value that can be printed, compared and written into
the `--json` report; the nemesis's fault schedule is drawn from the seed and
these rates before the run starts, so the shrinker can remove faults one by
one and replay the rest exactly.

A placed fault (`FaultSpec`) and the nemesis's rates (`NemesisConfig`) are
in `sim.faults`; the simulator's names (faults, contract calls, providers)
and the checks its parts share are in `sim.names`. Both are imported here,
so every part of a `SimConfig` is importable from this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any, get_type_hints

from shiftchange.agent.worker import AgentConfig
from shiftchange.agent.workflow import ChapterWorkflow
from shiftchange.core import AdmissionConfig, Budget, CoreConfig, InputError, ReliabilityConfig
from shiftchange.core.config import require_nonnegative, require_positive, require_probability, require_whole
from shiftchange.core.orchestrator import check_budget

from .faults import (
    FaultSpec,
    NemesisConfig,
)
from .names import (
    ARRIVALS,
    CONTRACTS,
    FAULTS,
    OUTAGE_MODES,
    PLACED_FAULTS,
    PROVIDERS,
    require_at_least_one,
    require_flags,
    require_names,
    require_part,
)


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """What arrives: tasks, each a small agent workflow (plan, slow tool calls, commit, push, pull request, CI)."""

    tasks: int = 1000
    arrival: str = "poisson"
    """One of ARRIVALS: evenly spaced, Poisson, or bursts of `burst_size` every `burst_interval_s`."""
    arrival_rate_per_s: float = 0.25
    arrival_rate_later_per_s: float | None = None
    """From `arrival_rate_changes_at_s` on, steady or Poisson arrivals come at this rate instead (None: one rate throughout):
    a step in demand, for a load spike, or for lowering the load on a world stuck in a metastable state."""
    arrival_rate_changes_at_s: float = 0.0
    """When `arrival_rate_later_per_s` takes over."""
    burst_size: int = 50
    burst_interval_s: float = 300.0
    workspaces: int = 8
    """Bulkhead partitions (repositories); tasks are spread over them evenly."""
    plan_s: float = 6.0
    """Mean duration of the planning model call."""
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
    """A runaway task's model calls before its commit (its workflow's `model_calls`)."""
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
            raise InputError(f"WorkloadConfig.arrival must be one of {', '.join(ARRIVALS)}, not {self.arrival!r}")
        require_whole(self, ("tasks", "burst_size", "workspaces", "runaway_calls", "priorities"))
        require_positive(
            self, ("arrival_rate_per_s", "burst_interval_s", "plan_s", "tool_call_s", "commit_s", "ci_s", "deadline_s", "drain_s")
        )
        require_probability(self, ("wrong_answer_probability", "nonconvergent_probability", "runaway_probability", "cancel_probability"))
        require_at_least_one(self, ("tasks", "workspaces", "priorities"))
        self._check_rate_step()
        if self.arrival_span_s() > ARRIVAL_SPAN_MAX_S:
            raise InputError(
                f"WorkloadConfig.tasks ({self.tasks:,}) would take {self.arrival_span_s():.3g} s to arrive at this rate, longer than"
                f" {ARRIVAL_SPAN_MAX_S:,.0f} s (raise WorkloadConfig.arrival_rate_per_s, or for bursts burst_size; or lower"
                " burst_interval_s)"
            )
        self._check_budget()

    def _check_rate_step(self) -> None:
        require_nonnegative(self, ("arrival_rate_changes_at_s",))
        if self.arrival_rate_later_per_s is None:
            return
        require_positive(self, ("arrival_rate_later_per_s",))
        if self.arrival == "bursts":
            raise InputError("WorkloadConfig.arrival_rate_later_per_s changes a steady or Poisson rate; bursts arrive by burst_size")

    def rate_per_s(self, at_s: float) -> float:
        """The arrival rate at `at_s` of the run."""
        later = self.arrival_rate_later_per_s
        return self.arrival_rate_per_s if later is None or at_s < self.arrival_rate_changes_at_s else later

    def tasks_in(self, span_s: float) -> int:
        """How many tasks arrive, on average, in the first `span_s` seconds (at least one)."""
        later = self.arrival_rate_later_per_s
        if later is None or span_s <= self.arrival_rate_changes_at_s:
            return max(1, round(self.arrival_rate_per_s * span_s))
        before_s = self.arrival_rate_changes_at_s
        return max(1, round(self.arrival_rate_per_s * before_s + later * (span_s - before_s)))

    def arrival_span_s(self) -> float:
        """How long the workload takes to arrive, on average: the span random faults are drawn over."""
        if self.arrival == "bursts":
            return (self.tasks // self.burst_size) * self.burst_interval_s + 1.0
        later, step_s = self.arrival_rate_later_per_s, self.arrival_rate_changes_at_s
        if later is None or self.tasks <= self.arrival_rate_per_s * step_s:
            return self.tasks / self.arrival_rate_per_s
        return step_s + (self.tasks - self.arrival_rate_per_s * step_s) / later

    def _check_budget(self) -> None:
        """The orchestrator's own check, run here so a budget it would refuse at the first task is refused when the config is built."""
        require_part(self, "budget", Budget)
        try:
            check_budget(self.budget)
        except InputError as error:
            raise InputError(f"WorkloadConfig.budget.{error}") from None


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
    lossy_calls: tuple[str, ...] = ()
    """The contract calls (of CONTRACTS) the two loss probabilities apply to; empty: every call (e.g. ("renew_lease",))."""

    def __post_init__(self) -> None:
        require_positive(self, ("latency_s", "request_timeout_s"))
        require_probability(self, ("loss_probability", "response_loss_probability", "duplicate_probability"))
        require_names(self, "lossy_calls", CONTRACTS)


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One provider (a code host, a model provider): latency, overload, rate limit, idempotency."""

    latency_s: float = 1.0
    """Mean service time of one call with nothing else in flight."""
    overload_in_flight: int = 50
    """Calls in progress at which each progresses at half speed (with no contention): latency grows with the load."""
    rate_per_s: float = 50.0
    """The provider's own rate limit; calls beyond it are refused (429, capacity)."""
    supports_idempotency: bool = True
    """Whether the provider deduplicates by operation key; without it, only provider identity (the head SHA) finds an effect."""
    accept_then_timeout_probability: float = 0.0
    """Chance that a call lands but its response never arrives (the caller times out)."""
    contention: float = 0.0
    """How much each call in progress slows the others beyond sharing the provider (locks, cache misses, swapping).

    The calls in progress share the provider, each receiving 1 / (1 + x + contention * x**2) seconds of work per second,
    x = calls in progress / overload_in_flight. With 0 the provider's goodput saturates under load; above 0 it peaks at
    overload_in_flight / sqrt(contention) calls in progress and falls beyond, as real servers' do."""
    works_past_deadline: bool = False
    """Whether the provider keeps working on a call after its caller's deadline passed. The result is discarded (nothing
    lands past a deadline), but the work loads the provider until it is done: the amplifier of a metastable failure.
    False: the provider drops a call when its deadline passes."""
    queue_max: int | None = None
    """The most calls the provider works on at once; a call beyond it is refused at once (503 overloaded, a capacity
    denial). None: unbounded."""

    def __post_init__(self) -> None:
        require_positive(self, ("latency_s", "overload_in_flight", "rate_per_s"))
        require_nonnegative(self, ("contention",))
        require_flags(self, ("supports_idempotency", "works_past_deadline"))
        if self.queue_max is not None:
            require_whole(self, ("queue_max",))
            require_at_least_one(self, ("queue_max",))
        require_probability(self, ("accept_then_timeout_probability",))


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """The execution plane: how many workers, and how they come and go (how they call is `SimConfig.agent`)."""

    workers: int = 48
    restart_s: float = 30.0
    """A crashed worker comes back after this long, with empty memory."""
    open_loop: bool = False
    """Open-loop demand: no admitted Attempt waits for a free worker. When an Attempt is offered and no worker is idle, a
    new one starts for it and stays; `workers` is then the pool the run starts with (and the nemesis's drawn targets)."""

    def __post_init__(self) -> None:
        require_whole(self, ("workers",))
        require_positive(self, ("restart_s",))
        require_at_least_one(self, ("workers",))
        require_flags(self, ("open_loop",))


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


WINDOW_MIN_S = 1.0
"""The narrowest window the recorder keeps a row for."""
ARRIVAL_SPAN_MAX_S = 30 * 86400.0
"""The longest a workload may take to arrive (tasks over the arrival rate, or bursts times their interval): a month."""


@dataclass(frozen=True, slots=True)
class SeriesConfig:
    """The recorder: time series of a run, one row per window of simulated time."""

    window_s: float = 60.0
    """The width of one window of the time series, at least WINDOW_MIN_S."""

    def __post_init__(self) -> None:
        require_positive(self, ("window_s",))
        if self.window_s < WINDOW_MIN_S:
            raise InputError(
                f"SeriesConfig.window_s must be at least {WINDOW_MIN_S:g} s, not {self.window_s!r}: a row per shorter span costs memory"
                " and says nothing the history does not"
            )


@dataclass(frozen=True, slots=True)
class RecoveryConfig:
    """The goodput_recovers check (checkers/recovery.py): after each placed provider fault, that provider's goodput comes back."""

    baseline_s: float = 600.0
    """The span before the trigger whose goodput is the level to recover to."""
    bound_s: float = 600.0
    """How long after the trigger ends goodput may take to come back before the world counts as metastable."""
    goodput_fraction: float = 0.8
    """The share of the baseline goodput one series window must reach to count as recovered."""

    def __post_init__(self) -> None:
        require_positive(self, ("baseline_s", "bound_s", "goodput_fraction"))
        if self.goodput_fraction > 1:
            raise InputError(f"RecoveryConfig.goodput_fraction is a share of the baseline, at most 1, not {self.goodput_fraction!r}")


@dataclass(frozen=True)
class SimConfig:
    """One simulated world: workload, transport, providers, workers, control plane, nemesis, and the core's own config."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    code_host: ProviderConfig = field(default_factory=ProviderConfig)
    model_provider: ProviderConfig = field(default_factory=lambda: ProviderConfig(latency_s=4.0, overload_in_flight=40, rate_per_s=20.0))
    workers: WorkerConfig = field(default_factory=WorkerConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    """How each worker calls (the agent's settings, as every driver's config holds them)."""
    workflow: ChapterWorkflow = field(default_factory=lambda: ChapterWorkflow(model_call_cost_usd=0.04, model_call_tokens=3000))
    """What each Attempt does: model calls, tool calls, then the commit and the pull request (the agent's workflow)."""
    control: ControlConfig = field(default_factory=ControlConfig)
    nemesis: NemesisConfig = field(default_factory=NemesisConfig)
    core: CoreConfig = field(default_factory=lambda: CoreConfig(lease_ttl_s=60.0, heartbeat_interval_s=15.0, cancel_ack_timeout_s=45.0))
    reliability: ReliabilityConfig = field(
        default_factory=lambda: ReliabilityConfig(admission=AdmissionConfig(partition_concurrency_max=12))
    )
    """Twelve per partition: an Attempt holds its slot through CI as well as its run, so eight would queue work 48 workers could take."""
    series: SeriesConfig = field(default_factory=SeriesConfig)
    recovery: RecoveryConfig | None = None
    """Judge goodput_recovers after each placed provider fault (None: the check does not run)."""

    def __post_init__(self) -> None:
        for name, kind in _part_kinds().items():
            if name == "recovery":
                if self.recovery is not None:
                    require_part(self, name, RecoveryConfig)
                continue
            require_part(self, name, kind)
        missing = [provider for provider in PROVIDERS if provider not in self.reliability.rate_limits]
        if missing:
            raise InputError(
                f"SimConfig.reliability.rate_limits has no entry for {missing[0]!r}: every provider the simulator calls"
                f" ({', '.join(PROVIDERS)}) needs its token bucket"
            )
        self.agent.check_against(self.core, "SimConfig")
        for spec in self.nemesis.placed:
            self._check_workers_named(spec)
        self._check_recovery()

    def _check_recovery(self) -> None:
        """goodput_recovers reads whole series windows: a baseline or bound shorter than they are could never be judged."""
        recovery, window_s = self.recovery, self.series.window_s
        if recovery is None:
            return
        if recovery.baseline_s < window_s:
            raise InputError(f"SimConfig.recovery.baseline_s ({recovery.baseline_s!r}) must be at least series.window_s ({window_s!r})")
        if recovery.bound_s < 2 * window_s:
            raise InputError(
                f"SimConfig.recovery.bound_s ({recovery.bound_s!r}) must be at least twice series.window_s ({window_s!r}):"
                " recovery is read at the end of the first whole window after the trigger"
            )

    def _check_workers_named(self, spec: FaultSpec) -> None:
        """A placed crash, pause or partition names workers this world has (worker-000 to worker-(workers - 1)), or `busy`."""
        if spec.kind not in ("crash", "pause", "partition"):
            return
        workers = self.workers.workers
        for name in spec.target.split(","):
            number = name.removeprefix("worker-")
            known = number.isdigit() and number.isascii() and name == f"worker-{int(number):03d}" and int(number) < workers
            if name != "busy" and not known:
                raise InputError(
                    f"SimConfig.nemesis.placed: fault {str(spec)!r} names {name!r}, but the workers are worker-000 to"
                    f" worker-{workers - 1:03d} (SimConfig.workers.workers is {workers})"
                )

    def with_tasks(self, tasks: int) -> SimConfig:
        if isinstance(tasks, bool) or not isinstance(tasks, int) or not 1 <= tasks <= 10_000_000:
            raise InputError(f"tasks must be a whole number from 1 to 10,000,000, not {tasks!r}")
        return replace(self, workload=replace(self.workload, tasks=tasks))

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the JSON report."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@cache
def _part_kinds() -> dict[str, type]:
    """The class of each part of a SimConfig, read from its annotations once."""
    return get_type_hints(SimConfig)


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
    "CONTRACTS",
    "FAULTS",
    "OUTAGE_MODES",
    "PLACED_FAULTS",
    "PROVIDERS",
    "ControlConfig",
    "FaultSpec",
    "NemesisConfig",
    "NetworkConfig",
    "ProviderConfig",
    "RecoveryConfig",
    "SeriesConfig",
    "SimConfig",
    "WorkerConfig",
    "WorkloadConfig",
]
