"""Every number that tunes the real runtime, named with its unit, in one place; read from and written to JSON.

The simulator's defaults describe a factory of half-hour Attempts; a chaos
run must show leases lost, detected and recovered many times in ten
minutes, so the runtime's defaults are seconds, not minutes. The ratios
the lease-tuning study recommends are kept: a lease of three heartbeats
and a bit, and reaping, reconciliation and the loop on a cadence well
inside one lease.

`RuntimeConfig` carries the core's `CoreConfig` (the lease, the heartbeat,
the deadlines) so that a worker, an orchestrator and the checkers that
judge them all read one lease TTL.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from shiftchange.core import Budget, CoreConfig, InputError
from shiftchange.core.config import require_positive

__all__ = ["RuntimeConfig", "load_config"]


def _core() -> CoreConfig:
    return CoreConfig(lease_ttl_s=4.0, heartbeat_interval_s=1.0, cancel_ack_timeout_s=4.0, timeout_budget_s=120.0, call_deadline_max_s=30.0)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """The cadences of the worker and orchestrator processes, the agent workflow's durations, and the core's configuration."""

    core: CoreConfig = field(default_factory=_core)
    workspace: str = "repo"
    """The one repository every task of a run works in (a worker claims only tasks of its own workspace)."""
    idle_poll_s: float = 0.2
    """How long a worker with nothing to claim waits before asking again."""
    tool_calls: int = 2
    """Slow tool calls per Attempt, as in the simulator's workflow (each a model call, then local work)."""
    tool_call_s: float = 1.5
    """Local work per tool call: the worker sleeps this long while its heartbeat renews from another thread."""
    commit_s: float = 0.2
    model_call_cost_usd: float = 0.01
    """What each model call of the workflow asks the gateway to authorize (the budget's spend)."""
    model_call_tokens: int = 1000
    call_deadline_s: float = 3.0
    """The deadline a worker asks for each provider call; the provider lands nothing past it."""
    gateway_retries_max: int = 4
    """Asks of the gateway per call before the worker reports the Attempt failed (provider domain)."""
    gateway_retry_s: float = 0.5
    reap_interval_s: float = 0.5
    number_events_every_s: float = 1.0
    """How often the orchestrator numbers the history committed since (PostgreSQL numbers it after commit; readers do too)."""
    loop_interval_s: float = 0.3
    """How often the orchestrator reconciles, verifies, decides and approves what is due."""
    admission_interval_s: float = 0.3
    leader_lease_s: float = 3.0
    """The admission leader's lease: a leader that stops renewing (killed, paused) is replaced after this long."""
    ci_s: float = 0.5
    """How long after an Attempt enters Verifying the orchestrator first asks the provider's CI for its verdict."""
    review_s: float = 0.2
    """How long after a task reaches review the reviewer approves it."""
    budget: Budget = field(default_factory=lambda: Budget(attempts_max=8, elapsed_max_s=600.0, cost_max_usd=10.0, tokens_max=1_000_000))

    def __post_init__(self) -> None:
        if not isinstance(self.core, CoreConfig):
            raise InputError(f"RuntimeConfig.core must be a CoreConfig, not {self.core!r:.60}")
        numbers = tuple(item.name for item in fields(self) if item.name not in ("core", "workspace", "budget"))
        require_positive(self, numbers)
        if not isinstance(self.workspace, str) or not self.workspace:
            raise InputError(f"RuntimeConfig.workspace must be a non-empty string, not {self.workspace!r}")
        if self.leader_lease_s <= self.admission_interval_s:
            raise InputError(
                "RuntimeConfig.leader_lease_s must be longer than admission_interval_s, or the leader loses its lease between steps"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuntimeConfig:
        if not isinstance(data, dict):
            raise InputError("a runtime configuration is a JSON object")
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown runtime setting(s) {', '.join(unknown)}; the settings are {', '.join(sorted(known))}")
        values = dict(data)
        try:
            if "core" in values:
                values["core"] = CoreConfig(**values["core"])
            if "budget" in values:
                values["budget"] = Budget(**values["budget"])
            return cls(**values)
        except TypeError as error:
            raise InputError(f"bad runtime configuration: {error}") from None


def load_config(path: str | Path | None) -> RuntimeConfig:
    """The configuration in a JSON file (as `RuntimeConfig.to_json` writes it), or the defaults for None."""
    if path is None:
        return RuntimeConfig()
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise InputError(f"cannot read runtime configuration {path}: {error.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"runtime configuration {path} is not JSON: {error.msg} at line {error.lineno}") from None
    return RuntimeConfig.from_dict(data)
