"""Adaptive concurrency limits: calls in flight to one dependency, bounded by what the dependency delivers.

A rate limit and a breaker both act on counts the orchestrator chose in
advance. Neither knows how much a dependency can take right now: a provider
slowed four times serves a quarter of the calls at the same rate limit, and a
breaker that closes lets every waiting call through at once. A concurrency
limit measures instead. It holds the calls granted to a dependency and not
yet answered (receipted, reported failed, or past their deadline), and grants
another only while that count is under the limit. The limit moves with the
answers, additive increase and multiplicative decrease, as TCP's congestion
window does: each answered call adds `increase_calls`, and each failure (a
timeout, a refusal the worker reports) multiplies it by `decrease_factor`. It
stays within [`min_calls`, `max_calls`].

Why this bounds a retry storm: the amplifier of a metastable failure is more
calls in progress than the provider can serve, each slower for the others.
Past the provider's knee, calls time out, and each timeout lowers the limit,
so fewer calls are started while the abandoned work drains; after the trigger
the limit grows back with the answers that come back, admitting load as the
dependency shows it can take it instead of all the calls held back at once. Calls refused for the limit are
held back by the worker (they wait and ask again), not failed: the
dependency, not the Attempt, is what stands in the way.

Two refinements, both from Netflix's concurrency-limits AIMD limit: the limit
grows only while at least half of it is in use (a limit nobody tests says
nothing about the dependency, and would let a burst through later); and it
starts at `initial_calls`, not at its maximum.

A call whose worker died is never answered; it counts until its deadline,
which is when the provider would have given up on it too (deadline
propagation). A timeout is reported just after the deadline, when the call no
longer counts, so a call past its deadline is remembered as *overdue* for
`OVERDUE_KEEP_S` more: its failure still lowers the limit (the timeout is the
signal that matters most), and a call nobody ever answers is forgotten. Like the breakers, limits are this process's memory of its
dependencies and start afresh when it restarts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .config import ConcurrencyLimitConfig
from .errors import InputError

OVERDUE_KEEP_S = 600.0
"""How long past its deadline a call's failure report still lowers the limit (the longest call deadline the core allows)."""


class ConcurrencyLimit:
    """One dependency's limit and the calls it holds in flight (operation key -> deadline)."""

    __slots__ = ("_config", "_in_flight", "_limit", "_overdue")

    def __init__(self, config: ConcurrencyLimitConfig) -> None:
        if not isinstance(config, ConcurrencyLimitConfig):
            raise InputError(f"expected a ConcurrencyLimitConfig, not {type(config).__name__}")
        self._config = config
        self._limit = float(config.initial_calls)
        self._in_flight: dict[str, float] = {}
        self._overdue: dict[str, float] = {}
        """Calls past their deadline and never answered, kept OVERDUE_KEEP_S so a late timeout report still counts."""

    @property
    def limit(self) -> float:
        """The current limit, fractions included (a call is granted while in flight < floor(limit))."""
        return self._limit

    def in_flight(self, now_s: float) -> int:
        """Calls granted, not yet answered, and not past their deadline at `now_s`."""
        self._expire(now_s)
        return len(self._in_flight)

    def allows(self, now_s: float) -> bool:
        """Whether one more call may start now (asking holds nothing)."""
        return self.in_flight(now_s) < max(self._config.min_calls, math.floor(self._limit))

    def start(self, key: str, deadline_s: float) -> None:
        """A call under `key` was granted and lasts at most until `deadline_s`."""
        self._in_flight[key] = float(deadline_s)

    def forget(self, key: str) -> None:
        """A grant that was rolled back: the call never started."""
        self._in_flight.pop(key, None)
        self._overdue.pop(key, None)

    def succeeded(self, key: str, now_s: float) -> None:
        """The call under `key` was answered: additive increase, while the limit is being used."""
        used = self.in_flight(now_s)
        self._overdue.pop(key, None)
        if self._in_flight.pop(key, None) is None:
            return  # not a call this limit let through (a replay, a call from before a restart), or a late one: it says nothing
        if 2 * used >= self._limit:
            self._limit = min(float(self._config.max_calls), self._limit + self._config.increase_calls)

    def failed(self, key: str, now_s: float) -> None:
        """The call under `key` failed (a timeout, reported just past its deadline, or a refusal): multiplicative decrease."""
        self._expire(now_s)
        if self._in_flight.pop(key, None) is None and self._overdue.pop(key, None) is None:
            return
        self._limit = max(float(self._config.min_calls), self._limit * self._config.decrease_factor)

    def _expire(self, now_s: float) -> None:
        if isinstance(now_s, bool) or not isinstance(now_s, int | float) or not math.isfinite(now_s):
            raise InputError(f"now_s must be a finite number of seconds, not {now_s!r}")
        over = [key for key, deadline_s in self._in_flight.items() if deadline_s <= now_s]
        for key in over:
            self._overdue[key] = self._in_flight.pop(key)
        if self._overdue:
            stale = [key for key, deadline_s in self._overdue.items() if deadline_s + OVERDUE_KEEP_S < now_s]
            for key in stale:
                del self._overdue[key]


class _Unlimited:
    """A dependency without a concurrency limit: every call may start."""

    __slots__ = ()
    limit = math.inf

    def in_flight(self, now_s: float) -> int:
        return 0

    def allows(self, now_s: float) -> bool:
        return True

    def start(self, key: str, deadline_s: float) -> None:
        pass

    def forget(self, key: str) -> None:
        pass

    def succeeded(self, key: str, now_s: float) -> None:
        pass

    def failed(self, key: str, now_s: float) -> None:
        pass


class ConcurrencyLimits:
    """One concurrency limit per dependency name; `config` None switches them all off."""

    __slots__ = ("_limits",)

    def __init__(self, names: Iterable[str], config: ConcurrencyLimitConfig | None) -> None:
        if isinstance(names, str):
            raise InputError(f"ConcurrencyLimits takes a collection of dependency names, not the one string {names!r}")
        listed = list(names)
        for name in listed:
            if not isinstance(name, str) or not name:
                raise InputError(f"a dependency name must be a non-empty string, not {name!r}")
        self._limits = {name: (_Unlimited() if config is None else ConcurrencyLimit(config)) for name in listed}

    def limit(self, dependency: str) -> ConcurrencyLimit | _Unlimited:
        """The dependency's limit; an unconfigured dependency is bad input."""
        found = self._limits.get(dependency)
        if found is None:
            known = ", ".join(sorted(self._limits)) or "none"
            raise InputError(f"no concurrency limit configured for dependency {dependency!r}; configured: {known}")
        return found

    def allows(self, dependency: str, now_s: float) -> bool:
        return self.limit(dependency).allows(now_s)
