"""Every number that tunes the real runtime, named with its unit, in one place; read from and written to JSON.

The simulator's defaults describe a factory of half-hour Attempts; a chaos
run must show leases lost, detected and recovered many times in ten
minutes, so the runtime's defaults are seconds, not minutes. The ratios
the lease-tuning study recommends are kept: a lease of three heartbeats
and a bit, and reaping, reconciliation and the loop on a cadence well
inside one lease.

`RuntimeConfig` carries the core's `CoreConfig` (the lease, the heartbeat,
the deadlines) so that a worker, an orchestrator and the checkers that
judge them all read one lease TTL, and the agent's `AgentConfig` and
workflow as the simulator's config holds them.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from shiftchange.agent.worker import AgentConfig
from shiftchange.agent.workflow import ChapterWorkflow
from shiftchange.core import Budget, CoreConfig, InputError
from shiftchange.core.config import require_instance, require_positive

__all__ = ["RuntimeConfig", "load_config"]


_RECORDS = ("core", "budget", "agent", "workflow")
"""The parts that are configs of their own, each a JSON object in the file."""
_PARTS = (*_RECORDS, "workspace")
_MOVED = {
    "call_deadline_s": "agent",
    "gateway_retries_max": "agent",
    "gateway_retry_s": "agent",
    "tool_calls": "workflow",
    "model_call_cost_usd": "workflow",
    "model_call_tokens": "workflow",
}
"""Settings that were flat in a runtime configuration before the agent's and workflow's settings became parts of it."""
"""The fields that are not one number: the parts (each a config of its own) and the workspace's name."""


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
    agent: AgentConfig = field(default_factory=lambda: AgentConfig(call_deadline_s=3.0, gateway_retries_max=4, gateway_retry_s=0.5))
    """How each worker calls (the agent's settings, as every driver's config holds them): a provider call's deadline (the
    provider lands nothing past it), asks of the gateway per call before the Attempt fails (provider domain), the pause
    between them."""
    workflow: ChapterWorkflow = field(default_factory=ChapterWorkflow)
    """What each Attempt does, as in the simulator: model calls (each asking the gateway to authorize its cost), slow tool
    calls, then the commit and the pull request."""
    tool_call_s: float = 1.5
    """Local work per tool call: the worker sleeps this long while its heartbeat renews from another thread."""
    commit_s: float = 0.2
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
        require_instance(self, "agent", AgentConfig)
        require_instance(self, "workflow", ChapterWorkflow)
        numbers = tuple(item.name for item in fields(self) if item.name not in _PARTS)
        require_positive(self, numbers)
        self.agent.check_against(self.core, "RuntimeConfig")
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
            moved = [f"{name} (now {_MOVED[name]}.{name})" for name in unknown if name in _MOVED]
            hint = f"; moved: {', '.join(moved)}" if moved else ""
            raise InputError(f"unknown runtime setting(s) {', '.join(unknown)}{hint}; the settings are {', '.join(sorted(known))}")
        values = dict(data)
        defaults = cls()
        for name in _RECORDS:
            if name in values:
                given = values[name]
                if not isinstance(given, dict):
                    raise InputError(f"RuntimeConfig.{name} is a JSON object of its settings, not {given!r:.60}")
                try:  # what a part leaves out keeps the runtime's own default, not the part's class default
                    values[name] = replace(getattr(defaults, name), **given)
                except TypeError as error:
                    raise InputError(f"bad runtime configuration: RuntimeConfig.{name}: {error}") from None
                except InputError as error:
                    raise InputError(
                        re.sub(rf"\b{type(getattr(defaults, name)).__name__}\.", f"RuntimeConfig.{name}.", str(error))
                    ) from None
        try:
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
