"""Every number that tunes the core, named with its unit, with its default in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from .errors import InputError


@dataclass(frozen=True, slots=True)
class CoreConfig:
    lease_ttl_s: float = 30.0
    """How long a lease lasts without renewal. Short detects loss fast; long avoids false expiry in long tool calls."""
    heartbeat_interval_s: float = 10.0
    """How often a worker should renew. Two lost heartbeats are survived when the lease exceeds three intervals by more
    than a round trip; at exactly three (these defaults) two lost in a row expire a lease's first window (notebooks/lease-tuning)."""
    cancel_ack_timeout_s: float = 30.0
    """How long the signalled executor has to acknowledge a cancellation before the reaper times it out."""
    timeout_budget_s: float = 1800.0
    """Total time an Attempt may run, set at claim; a tool call that would overrun it is refused before it starts."""
    call_deadline_max_s: float = 600.0
    """The longest deadline a single tool call may ask for."""
    reason_length_min: int = 10
    """A retry's recovery reason must have at least this many characters (Mission Control's rule)."""
    admitted_max: int = 10_000
    """Attempts admitted or holding a lease at once; beyond it admission defers or sheds (backpressure)."""
    store_retries_max: int = 8
    """How many times a contract runs again after losing a race in a store that runs transactions side by side (a deadlock,
    a serialization failure); then it raises StoreContention. Bounded: an unbounded retry turns contention into a livelock."""

    def __post_init__(self) -> None:
        require_positive(self, tuple(item.name for item in fields(self)))
        require_whole(self, ("reason_length_min", "admitted_max", "store_retries_max"))
        if self.heartbeat_interval_s >= self.lease_ttl_s:
            raise InputError(
                f"CoreConfig.heartbeat_interval_s ({self.heartbeat_interval_s!r}) must be shorter than"
                f" CoreConfig.lease_ttl_s ({self.lease_ttl_s!r}), or every lease expires between heartbeats"
            )


BACKOFF_STRATEGIES = ("none", "exponential", "full_jitter", "equal_jitter", "decorrelated_jitter")


@dataclass(frozen=True, slots=True)
class BackoffConfig:
    """Pacing between a classified transient failure and the next claim."""

    strategy: str = "full_jitter"
    """One of BACKOFF_STRATEGIES; full jitter spreads recovering workers furthest for the least total wait."""
    base_s: float = 1.0
    """The first wait (before jitter)."""
    cap_s: float = 60.0
    """No wait exceeds this."""

    def __post_init__(self) -> None:
        if self.strategy not in BACKOFF_STRATEGIES:
            raise InputError(f"BackoffConfig.strategy must be one of {', '.join(BACKOFF_STRATEGIES)}, not {self.strategy!r}")
        require_positive(self, ("base_s", "cap_s"))
        if self.cap_s < self.base_s:
            raise InputError(f"BackoffConfig.cap_s ({self.cap_s!r}) must be at least BackoffConfig.base_s ({self.base_s!r})")


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    """A token bucket for one dependency (a model provider, a code host)."""

    rate_per_s: float = 10.0
    """Tokens added per second: the sustained rate."""
    burst: int = 20
    """Bucket capacity: the most calls admitted at once after a quiet spell."""

    def __post_init__(self) -> None:
        require_positive(self, ("rate_per_s", "burst"))
        require_whole(self, ("burst",))


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    """A circuit breaker for one dependency."""

    failures_to_open: int = 5
    """Consecutive failures with one failure signature that open the circuit."""
    cool_down_s: float = 30.0
    """How long an open circuit refuses every call before it lets probes through (half-open)."""
    probes_half_open: int = 1
    """Calls let through while half-open; one success closes the circuit, one failure reopens it."""
    ramp_s: float = 30.0
    """After closing, the share of calls let through grows from none to all over this long (slow start), so the calls
    held back while it was open do not all return in one instant; 0 lets every call through at once."""

    def __post_init__(self) -> None:
        require_positive(self, ("failures_to_open", "cool_down_s", "probes_half_open"))
        require_whole(self, ("failures_to_open", "probes_half_open"))
        require_nonnegative(self, ("ramp_s",))


@dataclass(frozen=True, slots=True)
class RetryBudgetConfig:
    """A retry budget for one dependency: retries admitted only while they stay under a share of first calls plus a burst."""

    ratio: float = 0.1
    """Retry credit each first call earns: at most this fraction of calls may be retried, sustained."""
    burst: int = 10
    """The most retry credit kept after a quiet spell: retries beyond ratio x calls that any window may see."""

    def __post_init__(self) -> None:
        require_probability(self, ("ratio",))
        require_whole(self, ("burst",))


@dataclass(frozen=True, slots=True)
class ConcurrencyLimitConfig:
    """An adaptive limit on calls in flight to one dependency (`core/concurrency.py`): AIMD on the calls' answers."""

    initial_calls: int = 16
    """The limit before any answer has moved it."""
    min_calls: int = 1
    """The limit never falls below this: one call always probes the dependency."""
    max_calls: int = 1000
    """The limit never rises above this."""
    increase_calls: float = 1.0
    """Added to the limit for each answered call while at least half the limit is in use (additive increase)."""
    decrease_factor: float = 0.9
    """The limit is multiplied by this for each call that failed or timed out (multiplicative decrease)."""

    def __post_init__(self) -> None:
        require_positive(self, ("initial_calls", "min_calls", "max_calls", "increase_calls", "decrease_factor"))
        require_whole(self, ("initial_calls", "min_calls", "max_calls"))
        if self.decrease_factor >= 1:
            raise InputError(
                f"ConcurrencyLimitConfig.decrease_factor must be below 1, or a failure never lowers the limit, not {self.decrease_factor!r}"
            )
        if not self.min_calls <= self.initial_calls <= self.max_calls:
            raise InputError(
                f"ConcurrencyLimitConfig needs min_calls <= initial_calls <= max_calls, not {self.min_calls!r}, {self.initial_calls!r},"
                f" {self.max_calls!r}"
            )


@dataclass(frozen=True, slots=True)
class AdmissionConfig:
    """Backpressure, bulkheads and load shedding at the queued -> admitted step."""

    queue_depth_max: int = 1000
    """Queued attempts beyond which new work is shed or deferred."""
    queue_age_max_s: float = 600.0
    """When the oldest queued attempt has waited this long, admission applies backpressure."""
    partition_concurrency_max: int = 8
    """Admitted or leased attempts one partition (workspace, repository, workflow family) may hold at once: the bulkhead."""
    shed_past_deadline: bool = True
    """Shed an attempt whose deadline has passed at the first step that sees it. False keeps every promise however late:
    the chapter's silent queue growth (the simulator's silent-queue-growth anti-pattern switches it off)."""

    def __post_init__(self) -> None:
        require_positive(self, ("queue_depth_max", "queue_age_max_s", "partition_concurrency_max"))
        require_whole(self, ("queue_depth_max", "partition_concurrency_max"))
        if not isinstance(self.shed_past_deadline, bool):
            raise InputError(f"AdmissionConfig.shed_past_deadline must be true or false, not {shown(self.shed_past_deadline)}")


# The checks every config object (the core's and the simulator's) applies to its fields in __post_init__.


def require_whole(config: object, names: tuple[str, ...]) -> None:
    """Counts are whole numbers, never negative: a limit of 2.5 (or -1) attempts means nothing."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{type(config).__name__}.{name} must be a whole number, not {value!r}")


def require_nonnegative(config: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
            raise InputError(f"{type(config).__name__}.{name} must be a finite number, not negative, not {value!r}")


def require_positive(config: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise InputError(f"{type(config).__name__}.{name} must be a positive finite number, not {value!r}")


def shown(value: object) -> str:
    """A value as an error message quotes it: its repr, cut short so the message stays one readable line."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:56]} ..."


def require_instance(config: object, name: str, kind: type) -> None:
    """A part of a config is an object of its own class: a dict where a BackoffConfig belongs fails here, not inside a run."""
    value = getattr(config, name)
    if not isinstance(value, kind):
        raise InputError(f"{type(config).__name__}.{name} must be a {kind.__name__}, not a {type(value).__name__} ({shown(value)})")


def require_probability(config: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InputError(f"{type(config).__name__}.{name} must be a probability from 0 to 1, not {value!r}")


@dataclass(frozen=True, slots=True)
class Fallback:
    """A prequalified substitute for a dependency, declared before it is needed, never improvised."""

    dependency: str
    substitute: str
    semantic_equivalence: str
    """What stays the same when the substitute answers (e.g. "same API, smaller model: plans, no refactors")."""
    cost_factor: float
    latency_factor: float
    quality: str
    autonomy_ceiling: str
    """The most an Attempt on the substitute may do without a human (e.g. "draft PR only")."""

    def __post_init__(self) -> None:
        require_positive(self, ("cost_factor", "latency_factor"))
        if self.dependency == self.substitute:
            raise InputError(f"Fallback.substitute ({self.substitute!r}) must differ from Fallback.dependency ({self.dependency!r})")


def _default_rate_limits() -> dict[str, RateLimitConfig]:
    return {"code_host": RateLimitConfig(rate_per_s=10.0, burst=20), "model_provider": RateLimitConfig(rate_per_s=5.0, burst=10)}


@dataclass(frozen=True)
class ReliabilityConfig:
    """The reliability controls the orchestrator applies at admission and at the tool gateway."""

    backoff: BackoffConfig = field(default_factory=BackoffConfig)
    rate_limits: dict[str, RateLimitConfig] = field(default_factory=_default_rate_limits)
    """One token bucket per dependency; a call to a dependency not named here is bad input."""
    breaker: BreakerConfig | None = field(default_factory=BreakerConfig)
    """One circuit breaker per dependency, all with this config; None: no breaker (every call is let through)."""
    retry_budget: RetryBudgetConfig | None = field(default_factory=RetryBudgetConfig)
    """One retry budget per dependency, all with this config; None: retries are bounded only by the caller's own limit."""
    concurrency: ConcurrencyLimitConfig | None = field(default_factory=ConcurrencyLimitConfig)
    """One adaptive concurrency limit per dependency, all with this config; None: calls in flight are not limited."""
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    admission_rate: RateLimitConfig | None = None
    """A token bucket on admissions themselves (None: admission is bounded by capacity alone)."""
    fallbacks: tuple[Fallback, ...] = ()
    attempt_spend_max_usd: float = 5.0
    """Spend ceiling of one Attempt, whatever its task's budget has left: the denial-of-wallet stop inside a run."""
    health_probe_max_age_s: float = 60.0
    """A worker may claim only if its last health probe passed at most this long ago; heartbeats are separate."""

    def __post_init__(self) -> None:
        for name, kind in (("backoff", BackoffConfig), ("admission", AdmissionConfig)):
            require_instance(self, name, kind)
        optional = (
            ("breaker", BreakerConfig),
            ("retry_budget", RetryBudgetConfig),
            ("concurrency", ConcurrencyLimitConfig),
            ("admission_rate", RateLimitConfig),
        )
        for name, kind in optional:
            if getattr(self, name) is not None:
                require_instance(self, name, kind)
        self._check_rate_limits()
        self._check_fallbacks()
        require_positive(self, ("attempt_spend_max_usd", "health_probe_max_age_s"))

    def _check_rate_limits(self) -> None:
        require_instance(self, "rate_limits", dict)
        for name, limit in self.rate_limits.items():
            if not isinstance(name, str) or not isinstance(limit, RateLimitConfig):
                raise InputError(f"ReliabilityConfig.rate_limits maps dependency names to RateLimitConfig, not {name!r} to {shown(limit)}")

    def _check_fallbacks(self) -> None:
        if isinstance(self.fallbacks, list):
            object.__setattr__(self, "fallbacks", tuple(self.fallbacks))
        require_instance(self, "fallbacks", tuple)
        for fallback in self.fallbacks:
            if not isinstance(fallback, Fallback):
                raise InputError(f"ReliabilityConfig.fallbacks must hold Fallback values, not {shown(fallback)}")
            for name in (fallback.dependency, fallback.substitute):
                if name not in self.rate_limits:
                    configured = ", ".join(self.rate_limits) or "none"
                    raise InputError(
                        f"ReliabilityConfig.fallbacks names dependency {name!r}, which has no ReliabilityConfig.rate_limits entry"
                        f" (configured: {configured})"
                    )
