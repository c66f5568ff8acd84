"""Rate limiting: a token bucket per dependency, asked at admission and at the tool gateway.

A bucket holds at most `burst` tokens and gains `rate_per_s` tokens each
second; a call takes its tokens or is denied, and a denial takes nothing.
Over any window of w seconds a bucket therefore admits at most
rate_per_s * w + burst tokens, which is the property the tests check.

Why a token bucket: it states both limits a provider publishes (a sustained
rate and a burst) in two numbers and keeps two floats of state. The
alternatives: a fixed-window counter admits twice its limit across a window
edge; a sliding log keeps one timestamp per call; a leaky bucket used as a
queue delays calls instead of refusing them, which would hide capacity
exhaustion inside a sans-I/O core that cannot wait; GCRA admits exactly the
same calls as a token bucket, stored as a theoretical arrival time, and reads
less plainly.

A denial is not a defect of the caller or of the dependency: the caller
records it in the failure domain `DENIAL_DOMAIN` ("capacity"), whose policy
is back off and retry, or defer at admission.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .config import RateLimitConfig
from .errors import InputError

DENIAL_DOMAIN = "capacity"
"""The failure domain of a rate-limit denial (spec/failure_domains.toml)."""


class TokenBucket:
    """One dependency's token bucket; it starts full at `now_s`, and its time never goes backwards."""

    __slots__ = ("_burst", "_last_s", "_rate_per_s", "_tokens")

    def __init__(self, config: RateLimitConfig, now_s: float) -> None:
        if not isinstance(config, RateLimitConfig):
            raise InputError(f"expected a RateLimitConfig, not {type(config).__name__}")
        if not math.isfinite(config.rate_per_s) or not math.isfinite(config.burst):
            raise InputError("RateLimitConfig.rate_per_s and burst must be finite; leave a dependency out of the limiter to not limit it")
        self._rate_per_s = float(config.rate_per_s)
        self._burst = float(config.burst)
        self._tokens = self._burst
        self._last_s = _check_time(now_s)

    def available(self, now_s: float) -> float:
        """Tokens in the bucket at `now_s`."""
        self._refill(now_s)
        return self._tokens

    def try_acquire(self, now_s: float, tokens: float = 1) -> bool:
        """Take `tokens` if the bucket holds them at `now_s`; on a denial take nothing and return False."""
        if isinstance(tokens, bool) or not isinstance(tokens, int | float) or not 0 < tokens <= self._burst:
            # More than burst could never be admitted: refusing forever would hide the caller's mistake.
            raise InputError(f"tokens must be a number in (0, burst={self._burst:g}], not {tokens!r}")
        self._refill(now_s)
        if self._tokens < tokens:
            return False
        self._tokens -= tokens
        return True

    def refund(self, tokens: float = 1) -> None:
        """Give back tokens taken for a call that was never made (its grant rolled back), up to the burst."""
        self._tokens = min(self._burst, self._tokens + tokens)

    def _refill(self, now_s: float) -> None:
        now_s = _check_time(now_s)
        if now_s < self._last_s:
            raise InputError(f"time went backwards: now_s={now_s!r} is before the last seen {self._last_s!r}")
        self._tokens = min(self._burst, self._tokens + (now_s - self._last_s) * self._rate_per_s)
        self._last_s = now_s


class RateLimiter:
    """One token bucket per dependency name (a model provider, a code host), all starting full at `now_s`."""

    __slots__ = ("_buckets",)

    def __init__(self, configs: Mapping[str, RateLimitConfig], now_s: float) -> None:
        for name in configs:
            if not isinstance(name, str) or not name:
                raise InputError(f"a dependency name must be a non-empty string, not {name!r}")
        self._buckets = {name: TokenBucket(config, now_s) for name, config in configs.items()}

    def available(self, dependency: str, now_s: float) -> float:
        """Tokens in the dependency's bucket at `now_s`."""
        return self._bucket(dependency).available(now_s)

    def try_acquire(self, dependency: str, now_s: float, tokens: float = 1) -> bool:
        """Take `tokens` from the dependency's bucket; False is a denial in the domain DENIAL_DOMAIN."""
        return self._bucket(dependency).try_acquire(now_s, tokens)

    def refund(self, dependency: str, tokens: float = 1) -> None:
        self._bucket(dependency).refund(tokens)

    def _bucket(self, dependency: str) -> TokenBucket:
        bucket = self._buckets.get(dependency)
        if bucket is None:
            known = ", ".join(sorted(self._buckets)) or "none"
            raise InputError(f"no rate limit configured for dependency {dependency!r}; configured: {known}")
        return bucket


def _check_time(now_s: float) -> float:
    if isinstance(now_s, bool) or not isinstance(now_s, int | float) or not math.isfinite(now_s):
        raise InputError(f"now_s must be a finite number of seconds, not {now_s!r}")
    return float(now_s)
