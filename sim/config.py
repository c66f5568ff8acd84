"""Every number that tunes a simulated run, named with its unit, with its default in one place.

A run is a function of (code, `SimConfig`, seed). The config is plain frozen
data so a scenario is a value that can be printed, compared and written into
the `--json` report; the nemesis's fault schedule is drawn from the seed and
these rates before the run starts, so the shrinker can remove faults one by
one and replay the rest exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any, get_type_hints

from shiftchange.agent.worker import AgentConfig
from shiftchange.agent.workflow import ChapterWorkflow
from shiftchange.core import AdmissionConfig, Budget, CoreConfig, InputError, ReliabilityConfig
from shiftchange.core.config import require_instance, require_nonnegative, require_positive, require_probability, require_whole, shown
from shiftchange.core.orchestrator import check_budget

FROM_PLAIN_DATA = 'to build a config from plain data (a report\'s "config"), use shiftchange.lab.settings.from_dict'


def require_names(config: object, name: str, known: tuple[str, ...]) -> None:
    """A tuple field whose every item is one of `known` (a list is accepted and kept as a tuple)."""
    value = getattr(config, name)
    if isinstance(value, list):
        value = tuple(value)
        object.__setattr__(config, name, value)
    if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{type(config).__name__}.{name} must be a list of names, not {value!r}")
    unknown = [item for item in value if item not in known]
    if unknown:
        raise InputError(f"{type(config).__name__}.{name} names {unknown[0]!r}; use any of {', '.join(known)}")


def require_at_least_one(config: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if value < 1:
            raise InputError(f"{type(config).__name__}.{name} must be at least 1, not {value!r}")


def require_flags(config: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, bool):
            raise InputError(f"{type(config).__name__}.{name} must be true or false, not {value!r}")


def require_part(config: object, name: str, kind: type) -> None:
    """`require_instance`, with the way out for a part given as plain data (the usual mistake: a dict from a JSON report)."""
    try:
        require_instance(config, name, kind)
    except InputError as error:
        raise InputError(f"{error}; {FROM_PLAIN_DATA}") from None


ARRIVALS = ("steady", "poisson", "bursts")
FAULTS = ("crash", "pause", "partition", "duplicate_burst", "outage", "slow_tools", "revoked_credentials", "lost_responses")
"""The kinds of fault the nemesis can draw at random (`NemesisConfig.faults`)."""
PLACED_FAULTS = (*FAULTS, "slowdown", "capacity_drop", "message_loss")
"""Every kind of fault that can be placed at a chosen time (`NemesisConfig.placed`, `--fault`): the random kinds and three more."""
CONTRACTS = (
    "claim_attempt",
    "start_attempt",
    "renew_lease",
    "grant_tool",
    "record_receipt",
    "report_call_failure",
    "checkpoint",
    "complete_attempt",
    "report_failure",
    "acknowledge_cancel",
)
"""The contract calls a worker sends over the network (what `lossy_calls` and a `message_loss` fault may name)."""
WORKER_CALLS = tuple(call for call in CONTRACTS if call != "renew_lease")
"""The calls a worker's workflow sends (the heartbeat sends the renewals): what a pause's `before=` may wait for."""
PROVIDERS = ("code_host", "model_provider")
OUTAGE_MODES = ("fail", "hang")
"""An outage refuses every call at once (503), or accepts it and never answers until its deadline passes."""


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


DUPLICATE_BURST_PROBABILITY = 0.5
"""During a duplicate-delivery burst, the chance each request arrives twice (drawn and placed bursts alike, unless set)."""
LOST_RESPONSES_PROBABILITY = 0.5
"""During a lost-responses window, the chance a provider call lands but its response is lost."""
SLOW_TOOLS_FACTOR = 8.0
"""During a slow-tool tail, how many times longer a tool call takes."""
SLOWDOWN_FACTOR = 4.0
"""During a placed provider slowdown, how many times longer each call's service takes."""
CAPACITY_LEFT = 0.25
"""During a placed capacity drop, the share of a provider's capacity (overload point and rate limit) left."""
MESSAGE_LOSS_PROBABILITY = 1.0
"""During a placed message-loss window, the chance each request of the named calls is lost."""

_FAULT_PARAMETERS: dict[str, dict[str, Any]] = {
    "crash": {},
    "pause": {"before": None, "wake": None},
    "partition": {},
    "duplicate_burst": {"probability": DUPLICATE_BURST_PROBABILITY},
    "outage": {"mode": "fail"},
    "revoked_credentials": {},
    "lost_responses": {"probability": LOST_RESPONSES_PROBABILITY},
    "slow_tools": {"factor": SLOW_TOOLS_FACTOR},
    "slowdown": {"factor": SLOWDOWN_FACTOR},
    "capacity_drop": {"factor": CAPACITY_LEFT},
    "message_loss": {"probability": MESSAGE_LOSS_PROBABILITY, "calls": ()},
}
"""Which parameters each kind of placed fault takes, with their defaults (any other is bad input)."""


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault placed at a chosen time: `KIND TARGET at=SECONDS for=SECONDS [key=value ...]`.

    Targets by kind: a worker id or `busy` (the next worker holding an
    Attempt) for crash and pause (`for` is the time to restart, or the pause);
    comma-separated worker ids for partition; a provider (code_host,
    model_provider) for outage, revoked_credentials, lost_responses, slowdown
    and capacity_drop; `network` for duplicate_burst and message_loss;
    `workers` for slow_tools. Parameters: `probability` (duplicate_burst,
    lost_responses, message_loss), `factor` (slow_tools and slowdown multiply
    time by it; capacity_drop multiplies capacity by it, at most 1), `mode`
    (outage: fail or hang), `calls` (message_loss: contract names joined by
    commas; empty means every call), `before` (pause: a worker's contract
    call; the pause waits, from `at`, for the next worker about to send that
    call, the target or any busy one, and freezes it just before it sends,
    for `for` seconds), `wake` (an aimed pause: `replaced` ends it early, the
    moment another worker starts the task's next Attempt, the zombie's worst
    moment to wake). A parameter left out takes its default.
    """

    kind: str
    target: str
    at_s: float
    for_s: float
    probability: float | None = None
    factor: float | None = None
    mode: str | None = None
    calls: tuple[str, ...] | None = None
    before: str | None = None
    wake: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in _FAULT_PARAMETERS:
            raise InputError(f"unknown fault kind {self.kind!r}; use any of {', '.join(PLACED_FAULTS)}")
        allowed = _FAULT_PARAMETERS[self.kind]
        for name in ("probability", "factor", "mode", "calls", "before", "wake"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, allowed.get(name))
            elif name not in allowed:
                takes = ", ".join(allowed) or "no parameters"
                raise InputError(f"{self.kind} faults take {takes}, not {name}")
        if not isinstance(self.target, str) or not self.target:
            raise InputError(f"a fault's target must be a non-empty string, not {self.target!r}")
        require_nonnegative(self, ("at_s",))
        require_positive(self, ("for_s",))
        self._check_target()
        if self.probability is not None:
            require_probability(self, ("probability",))
        if self.factor is not None:
            require_positive(self, ("factor",))
            if self.kind == "capacity_drop" and self.factor > 1:
                raise InputError(f"a capacity_drop's factor is the share of capacity left, at most 1, not {self.factor!r}")
            if self.kind in ("slowdown", "slow_tools") and self.factor < 1:
                raise InputError(f"a {self.kind}'s factor multiplies time and must be at least 1, not {self.factor!r}")
        if self.mode is not None and self.mode not in OUTAGE_MODES:
            raise InputError(f"an outage's mode must be one of {', '.join(OUTAGE_MODES)}, not {self.mode!r}")
        if self.calls is not None:
            if isinstance(self.calls, list):
                object.__setattr__(self, "calls", tuple(self.calls))
            require_names(self, "calls", CONTRACTS)
        if self.before is not None and self.before not in WORKER_CALLS:
            raise InputError(f"a pause's before= names a worker's contract call, one of {', '.join(WORKER_CALLS)}; not {self.before!r}")
        if self.wake is not None and (self.wake != "replaced" or self.before is None):
            raise InputError(f"a pause's wake= is 'replaced', and only with before= (an aimed pause); not {self.wake!r}")

    def _check_target(self) -> None:
        kind, target = self.kind, self.target
        if kind in ("outage", "revoked_credentials", "lost_responses", "slowdown", "capacity_drop"):
            expected: tuple[str, ...] = PROVIDERS
        elif kind in ("duplicate_burst", "message_loss"):
            expected = ("network",)
        elif kind == "slow_tools":
            expected = ("workers",)
        else:
            ids = target.split(",") if kind == "partition" else [target]
            if all((part == "busy" and kind != "partition") or part.startswith("worker-") for part in ids):
                return
            raise InputError(f"{kind} faults target {'worker ids' if kind == 'partition' else 'a worker id or busy'}, not {target!r}")
        if target not in expected:
            raise InputError(f"{kind} faults target {' or '.join(expected)}, not {target!r}")

    @property
    def until_s(self) -> float:
        return self.at_s + self.for_s

    def parameters(self) -> dict[str, Any]:
        """The parameters this kind takes, with their values (one whose default is none, left out, is not listed)."""
        return {name: value for name in _FAULT_PARAMETERS[self.kind] if (value := getattr(self, name)) is not None}

    def __str__(self) -> str:
        """The `--fault` text that parses back to this spec."""
        words = [self.kind, self.target, f"at={_number_text(self.at_s)}", f"for={_number_text(self.for_s)}"]
        for name, value in self.parameters().items():
            words.append(f"{name}={','.join(value) if isinstance(value, tuple) else value}")
        return " ".join(words)

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """`KIND TARGET at=SECONDS for=SECONDS [key=value ...]`, e.g. `outage model_provider at=600 for=120 mode=hang`."""
        words = text.split()
        if len(words) < 4:
            raise InputError(f"a fault is 'KIND TARGET at=SECONDS for=SECONDS [key=value ...]', not {text!r}")
        kind, target, *pairs = words
        values: dict[str, Any] = {}
        for pair in pairs:
            name, equals, value = pair.partition("=")
            if not equals or (not value and name != "calls"):
                raise InputError(f"fault parameter {pair!r} in {text!r} is not key=value")
            name = {"at": "at_s", "for": "for_s"}.get(name, name)
            if name in values:
                raise InputError(f"fault parameter {name} given twice in {text!r}")
            values[name] = value
        for name in ("at_s", "for_s"):
            if name not in values:
                raise InputError(f"fault {text!r} needs {name[:-2]}=SECONDS")
        typed: dict[str, Any] = {}
        for name, value in values.items():
            if name in ("at_s", "for_s", "probability", "factor"):
                typed[name] = _number(name, value, text)
            elif name == "calls":
                typed[name] = tuple(part for part in value.split(",") if part)
            elif name in ("mode", "before", "wake"):
                typed[name] = value
            else:
                raise InputError(f"unknown fault parameter {name!r} in {text!r}")
        try:
            return cls(kind, target, **typed)
        except InputError as error:
            raise InputError(f"{_in_fault_words(str(error))} (in {text!r})") from None


def _in_fault_words(message: str) -> str:
    """A check's message in the words the fault's text uses: `FaultSpec.for_s must be ...` is `for= must be ...`."""
    return re.sub(r"\bFaultSpec\.(\w+)", lambda found: f"{_FAULT_WORDS.get(found[1], found[1])}=", message)


_FAULT_WORDS = {"at_s": "at", "for_s": "for"}
"""The fields whose word in a fault's text (`at=600 for=120`) is not their name."""


def _number_text(value: float) -> str:
    """The shortest text that reads back as exactly this number: 600 for 600.0, and every digit a fraction needs."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _number(name: str, text: str, fault: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"fault parameter {name} must be a number, not {text!r} (in {fault!r})") from None


@dataclass(frozen=True, slots=True)
class NemesisConfig:
    """What breaks: which faults are switched on, how often each strikes and how long it lasts."""

    faults: tuple[str, ...] = ()
    crash_interval_s: float = 600.0
    """Mean time between worker crashes (across all workers)."""
    pause_interval_s: float = 900.0
    pause_s: float = 90.0
    """A stop-the-world pause: longer than the lease, so the worker wakes up believing it still owns its Attempt."""
    pause_before_complete_interval_s: float = 900.0
    """Mean time between aimed pauses, drawn beside the random ones whenever pauses are on: each waits for the next busy
    worker about to report its result, freezes it just before it sends `complete_attempt`, and wakes it (at the latest
    after `pause_s`) the moment another worker starts the task's next Attempt: the stale worker that writes "success"
    over its replacement's work."""
    partition_interval_s: float = 900.0
    partition_s: float = 120.0
    partition_workers: int = 3
    """How many workers one partition cuts off from the orchestrator."""
    duplicate_interval_s: float = 600.0
    duplicate_burst_s: float = 60.0
    duplicate_burst_probability: float = DUPLICATE_BURST_PROBABILITY
    """During a duplicate-delivery burst, the chance each request arrives twice."""
    outage_interval_s: float = 1800.0
    outage_s: float = 180.0
    slow_tools_interval_s: float = 900.0
    slow_tools_s: float = 300.0
    slow_tools_factor: float = SLOW_TOOLS_FACTOR
    """During a slow-tool tail, tool calls take this many times longer."""
    revoked_interval_s: float = 3600.0
    revoked_s: float = 120.0
    lost_responses_interval_s: float = 900.0
    lost_responses_s: float = 120.0
    lost_responses_probability: float = LOST_RESPONSES_PROBABILITY
    """During such a window, the chance that a provider call lands but its response is lost."""
    placed: tuple[FaultSpec, ...] = ()
    """Faults placed at chosen times, played beside the random schedule (`--fault`, `[[fault]]` in a config file)."""

    def __post_init__(self) -> None:
        require_names(self, "faults", FAULTS)
        if len(set(self.faults)) != len(self.faults):
            repeated = next(kind for kind in self.faults if self.faults.count(kind) > 1)
            raise InputError(f"NemesisConfig.faults names {repeated!r} twice: each kind is drawn once, at its own rate")
        if isinstance(self.placed, list):
            object.__setattr__(self, "placed", tuple(self.placed))
        strange = next((spec for spec in self.placed if not isinstance(spec, FaultSpec)), None)
        if strange is not None:
            raise InputError(f"NemesisConfig.placed must hold FaultSpec values (FaultSpec.parse reads the text form), not {shown(strange)}")
        require_whole(self, ("partition_workers",))
        require_probability(self, ("duplicate_burst_probability", "lost_responses_probability"))
        require_positive(self, tuple(f.name for f in fields(self) if f.name.endswith("_s") or f.name.endswith("_factor")))


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
