"""A fault placed at a chosen time, and the nemesis's rates: what breaks in a simulated run, and how its text form reads.

`FaultSpec` is one fault as a value (`crash busy at=1 for=5`, `--fault`), with the parameters its kind takes and their
defaults; `NemesisConfig` holds the rates the seed's schedule is drawn from and the faults placed over it. Both are parts
of `SimConfig` (`sim.config`), which imports them back."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

from shiftchange.core import InputError
from shiftchange.core.config import require_nonnegative, require_positive, require_probability, require_whole, shown

from .names import CONTRACTS, FAULTS, OUTAGE_MODES, PLACED_FAULTS, PROVIDERS, WORKER_CALLS, require_names

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
