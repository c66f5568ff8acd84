"""Which of the chapter's anti-patterns exploration exposes, in what small configuration, and which it cannot and why.

Ten of the thirteen are a matter of interleaving: a crash, a lost answer, a
pause or a cancellation at the wrong point, which the search places at every
point. The other three are quantitative by nature (rates, load, sums) and
are measured by the simulator instead. The switches themselves are shared
(`shiftchange.antipatterns`, apart from every driver), so the explorer and
the simulator break the very same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shiftchange.antipatterns import ANTIPATTERNS, AntiPattern

from .config import CLOCK_READERS, CONCRETE, ExploreConfig, ExploreError


@dataclass(frozen=True)
class Exposure:
    """The small configuration in which an anti-pattern's interleaving exists, and the invariant that must catch it."""

    changes: dict[str, Any]
    invariant: str
    window: str
    """The interleaving, in a line: what must happen, in what order."""


EXPOSURES: dict[str, Exposure] = {
    "no-fencing": Exposure(
        {"pauses": 1},
        "fenced_writes",
        "a worker paused after its claim wakes once its task is retried, and its write lands on its replacement's Attempt",
    ),
    "timestamp-keys": Exposure(
        {"lost_responses": 1},
        "one_effect_per_operation",
        "a call lands and its answer is lost; asked again after a backoff, the gateway mints a new key and the provider lands it anew",
    ),
    "db-only-dedup": Exposure(
        {"lost_responses": 1, "idempotent_provider": False},
        "one_effect_per_operation",
        "a call lands and its answer is lost; the gateway finds no receipt, asks no provider, and grants it again",
    ),
    "worker-minted-keys": Exposure(
        {"crashes": 1},
        "one_effect_per_operation",
        "a worker crashes between an effect landing and its receipt; its replacement's own key does not find the effect",
    ),
    "restart-from-scratch": Exposure(
        {"crashes": 1},
        "one_effect_per_operation",
        "a worker crashes after an effect landed; Attempt 2 reruns from step one under keys of its own",
    ),
    "cancel-as-flag": Exposure(
        {"cancels": 1},
        "cancel_is_final",
        "a task is cancelled, and its queued Attempt is admitted all the same: the flag prevents nothing",
    ),
    "conflated-task-attempt": Exposure(
        {"ci_failures": 1}, "append_only_attempts", "CI fails, the loop corrects, and the retry rewrites the ended Attempt"
    ),
    "unrecorded-effects": Exposure(
        {"operations": ("push", "create-pr")}, "complete_audit", "the worker pushes without asking the gateway: an effect with no intent"
    ),  # the anti-pattern bypasses the gateway for "push" only, so the workflow pushes first
    "context-as-state": Exposure(
        {}, "complete_audit", "an effect lands whose intent the durable record does not list (only the transcript knew)"
    ),
    "blind-retry": Exposure(
        {"ci_failures": 1},
        "classified_retry",
        "CI fails and the blind loop retries the same hypothesis without a decision",
    ),
}
"""The anti-patterns that are a matter of interleaving, each with the configuration that exposes it."""

OUT_OF_SCOPE: dict[str, str] = {
    "retry-storm": "a matter of rates: many workers retrying one outage together overload it again; a few calls in every order do not"
    " (`sim run --antipattern retry-storm` measures goodput)",
    "silent-queue-growth": "a matter of load: queue age climbs past deadlines under sustained arrivals, which a configuration of"
    " a few tasks cannot hold (`sim run --antipattern silent-queue-growth`)",
    "budget-burn": "a matter of sums: spend drains a budget over many calls; every interleaving of a few cheap calls stays inside"
    " it (`sim run --antipattern budget-burn`)",
}
"""The anti-patterns that are quantitative by nature, with the reason exhaustive exploration is not the tool for them."""

if set(EXPOSURES) | set(OUT_OF_SCOPE) != set(ANTIPATTERNS) or set(EXPOSURES) & set(OUT_OF_SCOPE):
    raise RuntimeError("explore/exposures.py must say of every anti-pattern whether exploration exposes it (EXPOSURES) or not")


def in_scope(name: str) -> AntiPattern:
    """The anti-pattern named, if exploration exposes it; an unknown or out-of-scope name is an ExploreError."""
    if name in OUT_OF_SCOPE:
        raise ExploreError(f"{name} is out of scope for exploration: {OUT_OF_SCOPE[name]}")
    if name not in EXPOSURES:
        raise ExploreError(f"unknown anti-pattern {name!r}; use one of {', '.join(ANTIPATTERNS)}")
    return ANTIPATTERNS[name]


def exposing_config(name: str, **overrides: Any) -> ExploreConfig:
    """The configuration that exposes anti-pattern `name`, with `overrides` on top; an out-of-scope one is refused. One
    whose core reads the clock's value (`CLOCK_READERS`) is searched on the concrete clock unless told otherwise."""
    in_scope(name)
    clock = {"time": CONCRETE} if name in CLOCK_READERS else {}
    return ExploreConfig(**{**EXPOSURES[name].changes, **clock, **overrides, "antipattern": name})


def pattern_of(config: ExploreConfig) -> AntiPattern | None:
    """The anti-pattern `config` breaks the core with, or None for the reference core."""
    return None if config.antipattern is None else in_scope(config.antipattern)
