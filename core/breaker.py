"""Circuit breakers: one per dependency, closed, open or half-open, checked before every dependency call.

A breaker is closed while calls succeed. It counts consecutive failures with
the same failure signature (a different signature restarts the count at 1, a
success resets it) and opens when the count reaches `failures_to_open`. An
open breaker refuses every call for `cool_down_s`, then turns half-open and
lets `probes_half_open` calls through in total; the first of them to report
decides: a success closes the breaker, a failure reopens it with a fresh
cool-down. While open, the loop stops or takes a prequalified fallback.

Slow start. A breaker that closes would let every call held back while it was
open through in one instant: the synchronised return that knocks a recovering
dependency over again and opens the circuit once more, a limit cycle rather
than recovery. So for `ramp_s` after closing it lets through a share of the
calls asked for that grows linearly from none to all: each ask adds the share
at that instant to a credit, and a call is let through when the credit
reaches one (deterministic, so the same asks are let through on every
replay). The calls it turns away are held back, as an open circuit's are.

Prior art and the choice made: Nygard's circuit breaker (Release It!, 2007)
and its library forms (Hystrix, resilience4j, Polly) trip on an error count
or an error rate over a sliding window. The chapter trips it on the failure
signature counter instead: a run of the same failure says one thing keeps
breaking, while assorted unrelated failures (a bad prompt here, a 404 there)
do not condemn the dependency. A rate window would also need a minimum call
volume to mean anything, one more number to tune.

What the breaker cannot tell: it does not know which call a report belongs
to. A report that cannot be a probe's (the breaker is open, or half-open with
no probe let through yet) comes from a call admitted before the breaker
opened and changes nothing: the cool-down stands. Once a probe is out, the
next report is taken as the probe's.

Every refusal is kept as a `Refusal` ("circuit open until T") so the gateway
can write why on the Attempt's refused event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .config import BreakerConfig
from .errors import InputError

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"
STATES = (CLOSED, OPEN, HALF_OPEN)
RAMPING = "ramping"
"""A refusal's state when a circuit that closed again is still letting calls back in (`BreakerConfig.ramp_s`)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a breaker refused a call, for the refused event on the Attempt."""

    state: str
    """OPEN, HALF_OPEN or RAMPING: what refused."""
    until_s: float | None
    """When an open breaker starts letting probes through; None when half-open, which waits for a probe's report."""
    reason: str


class Breaker:
    """The circuit breaker of one dependency; its time never goes backwards."""

    __slots__ = (
        "_closed_s",
        "_config",
        "_failure_count",
        "_failure_signature",
        "_last_refusal",
        "_last_s",
        "_opened_s",
        "_probes_let_through",
        "_ramp_credit",
        "_state",
    )

    def __init__(self, config: BreakerConfig) -> None:
        if not isinstance(config, BreakerConfig):
            raise InputError(f"expected a BreakerConfig, not {type(config).__name__}")
        for name in ("failures_to_open", "probes_half_open"):
            if not isinstance(getattr(config, name), int):
                raise InputError(f"BreakerConfig.{name} counts calls and must be an integer, not {getattr(config, name)!r}")
        self._config = config
        self._state = CLOSED
        self._failure_signature: str | None = None
        self._failure_count = 0
        self._opened_s = -math.inf
        self._probes_let_through = 0
        self._last_refusal: Refusal | None = None
        self._last_s = -math.inf
        self._closed_s = -math.inf
        self._ramp_credit = 0.0

    @property
    def last_refusal(self) -> Refusal | None:
        """Why the latest `allow` refused, or None if it allowed (or was never asked)."""
        return self._last_refusal

    def state(self, now_s: float) -> str:
        """CLOSED, OPEN or HALF_OPEN at `now_s` (an open breaker whose cool-down has passed is half-open)."""
        self._advance(now_s)
        return self._state

    def allow(self, now_s: float) -> bool:
        """Whether a call to the dependency may start now; ask before every call."""
        self._advance(now_s)
        if self._state == OPEN:
            until_s = self._opened_s + self._config.cool_down_s
            self._last_refusal = Refusal(OPEN, until_s, f"circuit open until {until_s}")
            return False
        if self._state == HALF_OPEN:
            if self._probes_let_through >= self._config.probes_half_open:
                reason = f"circuit half-open: {self._probes_let_through} probe(s) let through, waiting for one to report"
                self._last_refusal = Refusal(HALF_OPEN, None, reason)
                return False
            self._probes_let_through += 1
        elif self._ramping(now_s):
            ramp_s = self._config.ramp_s
            share = (now_s - self._closed_s) / ramp_s
            self._ramp_credit += share
            if self._ramp_credit < 1:
                until_s = self._closed_s + ramp_s
                self._last_refusal = Refusal(RAMPING, None, f"circuit closed again: {share:.0%} of calls let through, all by {until_s}")
                return False
            self._ramp_credit -= 1
        self._last_refusal = None
        return True

    def _ramping(self, now_s: float) -> bool:
        return self._state == CLOSED and now_s < self._closed_s + self._config.ramp_s

    def release_probe(self) -> None:
        """A half-open probe `allow` let through was never made (its grant rolled back): another call may take its place."""
        if self._state == HALF_OPEN and self._probes_let_through > 0:
            self._probes_let_through -= 1

    def record_success(self, now_s: float) -> None:
        """A call succeeded: the failure count resets, and a half-open breaker closes."""
        self._advance(now_s)
        if self._predates_opening():
            return
        if self._state == HALF_OPEN:
            self._closed_s, self._ramp_credit = float(now_s), 0.0
        self._state = CLOSED
        self._failure_signature = None
        self._failure_count = 0

    def record_failure(self, now_s: float, signature: str) -> None:
        """A call failed with this failure signature: count it, open at the threshold, reopen a half-open breaker."""
        if not isinstance(signature, str) or not signature:
            raise InputError(f"a failure signature must be a non-empty string, not {signature!r}")
        self._advance(now_s)
        if self._predates_opening():
            return
        if signature == self._failure_signature:
            self._failure_count += 1
        else:
            self._failure_signature = signature
            self._failure_count = 1
        if self._state == HALF_OPEN or self._failure_count >= self._config.failures_to_open:
            self._open(now_s)

    def _predates_opening(self) -> bool:
        """A report arriving now cannot be a probe's: its call was admitted before the breaker opened."""
        return self._state == OPEN or (self._state == HALF_OPEN and self._probes_let_through == 0)

    def _open(self, now_s: float) -> None:
        self._state = OPEN
        self._opened_s = float(now_s)
        self._probes_let_through = 0

    def _advance(self, now_s: float) -> None:
        """Check the time, and let an open breaker whose cool-down has passed turn half-open."""
        if isinstance(now_s, bool) or not isinstance(now_s, int | float) or not math.isfinite(now_s):
            raise InputError(f"now_s must be a finite number of seconds, not {now_s!r}")
        if now_s < self._last_s:
            raise InputError(f"time went backwards: now_s={now_s!r} is before the last seen {self._last_s!r}")
        self._last_s = float(now_s)
        if self._state == OPEN and now_s >= self._opened_s + self._config.cool_down_s:
            self._state = HALF_OPEN
            self._probes_let_through = 0


class NoBreaker:
    """A dependency whose breaker is switched off (`ReliabilityConfig.breaker` None): always closed, learns nothing."""

    __slots__ = ()
    last_refusal = None

    def state(self, now_s: float) -> str:
        return CLOSED

    def allow(self, now_s: float) -> bool:
        return True

    def release_probe(self) -> None:
        pass

    def record_success(self, now_s: float) -> None:
        pass

    def record_failure(self, now_s: float, signature: str) -> None:
        if not isinstance(signature, str) or not signature:
            raise InputError(f"a failure signature must be a non-empty string, not {signature!r}")


class Breakers:
    """One circuit breaker per dependency name, all starting closed; a config of None switches that breaker off."""

    __slots__ = ("_breakers",)

    def __init__(self, configs: Mapping[str, BreakerConfig | None]) -> None:
        for name in configs:
            if not isinstance(name, str) or not name:
                raise InputError(f"a dependency name must be a non-empty string, not {name!r}")
        self._breakers = {name: NoBreaker() if config is None else Breaker(config) for name, config in configs.items()}

    def allow(self, dependency: str, now_s: float) -> bool:
        """Whether a call to the dependency may start now; on False, `last_refusal` says why."""
        return self.breaker(dependency).allow(now_s)

    def release_probe(self, dependency: str) -> None:
        self.breaker(dependency).release_probe()

    def record_success(self, dependency: str, now_s: float) -> None:
        self.breaker(dependency).record_success(now_s)

    def record_failure(self, dependency: str, now_s: float, signature: str) -> None:
        self.breaker(dependency).record_failure(now_s, signature)

    def state(self, dependency: str, now_s: float) -> str:
        return self.breaker(dependency).state(now_s)

    def last_refusal(self, dependency: str) -> Refusal | None:
        return self.breaker(dependency).last_refusal

    def breaker(self, dependency: str) -> Breaker | NoBreaker:
        """The dependency's breaker; an unconfigured dependency is bad input."""
        breaker = self._breakers.get(dependency)
        if breaker is None:
            known = ", ".join(sorted(self._breakers)) or "none"
            raise InputError(f"no circuit breaker configured for dependency {dependency!r}; configured: {known}")
        return breaker
