"""The simulator's vocabulary (the arrivals, the faults, the contract calls, the providers) and the checks every part of
its config applies to its fields (beside the core's `core.config` checks). `sim.config` and `sim.faults` import them."""

from __future__ import annotations

from shiftchange.core import InputError
from shiftchange.core.config import require_instance

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
