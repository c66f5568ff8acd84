"""Every number that tunes the core, named with its unit, with its default in one place."""

from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import InputError


@dataclass(frozen=True, slots=True)
class CoreConfig:
    lease_ttl_s: float = 30.0
    """How long a lease lasts without renewal. Short detects loss fast; long avoids false expiry in long tool calls."""
    heartbeat_interval_s: float = 10.0
    """How often a worker should renew; a third of the lease leaves room for two lost heartbeats."""
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

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InputError(f"CoreConfig.{item.name} must be a positive number, not {value!r}")
        if self.heartbeat_interval_s >= self.lease_ttl_s:
            raise InputError("CoreConfig.heartbeat_interval_s must be shorter than lease_ttl_s, or every lease expires between heartbeats")
