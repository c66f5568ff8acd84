"""Providers in simulated time: a code host and a model provider, with latency, overload, outages, rate limits and a ledger.

A `SimProvider` plays two parts. To the orchestrator it is a
`ProviderAdapter` (`find`, `verdict`, `supports_idempotency`), answered at
once from its ledger: provider truth, as reconciliation and verification
read it. To workers it offers `call`, a SimPy generator that takes simulated
time and can fail in every way the chapter names: refused (503 in an outage,
429 over its rate, 401 with revoked credentials), slowed by load (latency
grows linearly with the calls in flight), or accepted and then timed out,
the case a database key alone cannot deduplicate.

An effect lands when its service time has passed, whether or not the caller
is still waiting: a crashed worker's call still lands. Every call carries the
deadline its grant set, and the provider honours it (deadline propagation, as
gRPC does): a call that arrives after its deadline is dropped unheard, and
work that would finish after it is abandoned, so nothing lands once a call's
deadline has passed. That is the contract reconciliation relies on when it
concludes "not landed" for a call whose deadline is behind it: without it, a
worker paused between its grant and its call could land a push after its
replacement pushed (the simulator found exactly that, in a swarm run). Every
landing is appended to the history as a `Landed` entry, which is all the
checkers see of the provider. `forget` drops a retired task's effects, so the ledger stays as
small as the live set.

Faults strike through the provider's own methods: `outage` (fail fast with
503, or hang: accept the call and never answer before its deadline, landing
nothing), `revoke` (401), `lose_responses`, `slow_down` (service time times a
factor) and `drop_capacity` (the overload point and the rate limit times a
factor below one). Each call's fate (answered with its latency, timed out,
refused) is told to a `CallObserver`, the recorder's feed.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Generator
from typing import Any, Protocol

from shiftchange.core import Effect, ProviderRefused, ProviderTimeout, RateLimitConfig, TokenBucket

from .config import ProviderConfig
from .history import Landed
from .windows import Windows


class CallObserver(Protocol):
    """Who hears each provider call's fate: the recorder."""

    def call_offered(self, dependency: str) -> None: ...

    def call_answered(self, dependency: str, latency_s: float) -> None: ...

    def call_timed_out(self, dependency: str) -> None: ...

    def call_refused(self, dependency: str, domain: str) -> None: ...


class _Unobserved:
    def call_offered(self, dependency: str) -> None:
        pass

    def call_answered(self, dependency: str, latency_s: float) -> None:
        pass

    def call_timed_out(self, dependency: str) -> None:
        pass

    def call_refused(self, dependency: str, domain: str) -> None:
        pass


def _bucket(rate_per_s: float) -> TokenBucket:
    return TokenBucket(RateLimitConfig(rate_per_s=rate_per_s, burst=max(1, int(rate_per_s))), 0.0)


class SimProvider:
    """One provider's behaviour and its ledger of every effect that landed."""

    def __init__(
        self,
        env: Any,
        name: str,
        config: ProviderConfig,
        rng: Any,
        record: Callable[[Landed], None],
        verdict_of: Callable[[str, str, float], str | None],
        observer: CallObserver | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self.config = config
        self.rng = rng
        self.supports_idempotency = config.supports_idempotency
        self._record = record
        self._verdict_of = verdict_of
        self._observer: CallObserver = observer if observer is not None else _Unobserved()
        self._bucket = _bucket(config.rate_per_s)
        self._by_key: dict[str, list[Effect]] = {}
        self._by_identity: dict[tuple[str, str], list[Effect]] = {}
        self._of_task: dict[str, list[Effect]] = {}
        self._task_of: dict[str, str] = {}
        self._count = 0
        self.in_flight = 0
        """Calls whose work is under way (they load the provider and slow every other call)."""
        self.open_calls = 0
        """Calls a caller is waiting on, hung ones included."""
        self._outages = Windows()
        """Open outages, each with its mode (fail or hang)."""
        self._revoked = Windows()
        self._lossy = Windows()
        """Windows in which a call lands but its response is lost, each with its probability."""
        self._slow = Windows()
        self._dropped = Windows()
        """Capacity drops, each with the share of capacity left and the rate bucket that share allows."""
        self.calls = 0
        self.refusals: dict[str, int] = {}
        self.effects = 0

    # ---------------------------------------------------------- the adapter

    def find(self, key: str, operation: str, identity: str) -> list[Effect]:
        if self.supports_idempotency:
            return list(self._by_key.get(key, ()))
        return list(self._by_identity.get((operation, identity), ()))

    def verdict(self, provider_id: str) -> str | None:
        task_id = self._task_of.get(provider_id)
        if task_id is None:
            return None
        effect = next(e for e in self._of_task[task_id] if e.provider_id == provider_id)
        return self._verdict_of(task_id, effect.identity, effect.at_s)

    # ------------------------------------------------------------- faults

    def outage(self, until: float, mode: str = "fail") -> None:
        """Until `until`, every call is refused at once (503, mode fail), or accepted and never answered (mode hang)."""
        self._outages.add(self.env.now, until, mode)

    def revoke(self, until: float) -> None:
        """Revoked credentials: every call is refused (401) until `until`."""
        self._revoked.add(self.env.now, until)

    def lose_responses(self, until: float, probability: float) -> None:
        """Until `until`, a call lands but its response is lost with this probability."""
        self._lossy.add(self.env.now, until, probability)

    def slow_down(self, until: float, factor: float) -> None:
        """Until `until`, every call's service time is `factor` times longer."""
        self._slow.add(self.env.now, until, factor)

    def drop_capacity(self, until: float, factor: float) -> None:
        """Until `until`, the provider has `factor` of its capacity: overload point and rate limit both scaled by it."""
        self._dropped.add(self.env.now, until, (factor, _bucket(self.config.rate_per_s * factor)))

    # ------------------------------------------------------------- calls

    def call(
        self, key: str, operation: str, identity: str, task_id: str, worker_id: str, deadline_at: float, via_gateway: bool = True
    ) -> Generator[Any, Any, Effect]:
        """A worker's call, due by `deadline_at`: returns the effect, or raises ProviderRefused / ProviderTimeout, after simulated time."""
        self.calls += 1
        self._observer.call_offered(self.name)
        self.open_calls += 1
        try:
            return (yield from self._serve(key, operation, identity, task_id, worker_id, deadline_at, via_gateway))
        except ProviderTimeout:
            self._observer.call_timed_out(self.name)
            raise
        except ProviderRefused as refusal:
            self._observer.call_refused(self.name, refusal.domain)
            raise
        finally:
            self.open_calls -= 1

    def _serve(
        self, key: str, operation: str, identity: str, task_id: str, worker_id: str, deadline_at: float, via_gateway: bool
    ) -> Generator[Any, Any, Effect]:
        env, config, rng = self.env, self.config, self.rng
        now = env.now
        if now >= deadline_at:  # sent after its deadline: dropped unheard, nothing lands
            self.refusals["deadline"] = self.refusals.get("deadline", 0) + 1
            raise ProviderTimeout(f"{self.name}: {key} arrived after its deadline t={deadline_at:g}")
        deadline_s = deadline_at - now
        outage = self._outages.at(now)
        if outage == "hang":  # accepted, never answered: the caller learns nothing before its deadline
            yield env.timeout(deadline_s)
            raise ProviderTimeout(f"{self.name}: {key} hung in an outage until its deadline")
        dropped = self._dropped.at(now)
        refusal = self._refusal(now, outage, dropped)
        if refusal is not None:
            self.refusals[refusal.domain] = self.refusals.get(refusal.domain, 0) + 1
            yield env.timeout(min(deadline_s, rng.expovariate(10.0 / config.latency_s)))
            raise refusal
        overload_in_flight = config.overload_in_flight * (dropped[0] if dropped is not None else 1.0)
        service_s = rng.expovariate(1.0 / config.latency_s) * (1.0 + self.in_flight / overload_in_flight)
        service_s *= self._slow.at(now) or 1.0
        lossy_probability = self._lossy.at(now)
        lossy = lossy_probability is not None and rng.random() < lossy_probability
        lost = lossy or rng.random() < config.accept_then_timeout_probability
        existing = self._by_key.get(key) if self.supports_idempotency else None
        in_time = service_s < deadline_s
        landed: list[Effect] = []
        landing = env.timeout(service_s)
        if existing:  # an idempotent provider answers with what it already holds
            landed.append(existing[0])
        elif in_time:  # work that would end after the deadline is abandoned and never lands
            self.in_flight += 1
            landing.callbacks.append(lambda _event: landed.append(self._land(key, operation, identity, task_id, worker_id, via_gateway)))
        if lost or not in_time:
            yield env.timeout(deadline_s)
            raise ProviderTimeout(f"{self.name}: no response to {key} within {deadline_s:g}s")
        yield landing
        self._observer.call_answered(self.name, service_s)
        return landed[0]

    def _refusal(self, now: float, outage: str | None, dropped: tuple[float, TokenBucket] | None) -> ProviderRefused | None:
        if outage is not None:
            return ProviderRefused("provider", f"{self.name} 503: outage")
        if self._revoked.at(now) is not None:
            return ProviderRefused("authorization", f"{self.name} 401: credential revoked")
        bucket = dropped[1] if dropped is not None else self._bucket
        if not bucket.try_acquire(now):
            return ProviderRefused("capacity", f"{self.name} 429: rate limited")
        return None

    def _land(self, key: str, operation: str, identity: str, task_id: str, worker_id: str, via_gateway: bool) -> Effect:
        self.in_flight -= 1
        existing = self._by_key.get(key) if self.supports_idempotency else None
        if existing:  # two calls with one key raced: the provider keeps one effect
            return existing[0]
        self._count += 1
        self.effects += 1
        now = self.env.now
        effect = Effect(f"{self.name}-{self._count}", key, operation, identity, "", now)
        self._by_key.setdefault(key, []).append(effect)
        self._by_identity.setdefault((operation, identity), []).append(effect)
        self._of_task.setdefault(task_id, []).append(effect)
        self._task_of[effect.provider_id] = task_id
        self._record(Landed(now, self.name, effect.provider_id, key, operation, identity, task_id, worker_id, via_gateway))
        return effect

    def forget(self, task_id: str) -> None:
        """Drop a retired task's effects."""
        for effect in self._of_task.pop(task_id, ()):
            del self._task_of[effect.provider_id]
            _drop(self._by_key, effect.key, effect)
            _drop(self._by_identity, (effect.operation, effect.identity), effect)


def _drop(index: dict, name: Any, effect: Effect) -> None:
    effects = index.get(name)
    if effects is None:
        return
    effects[:] = [e for e in effects if e is not effect]
    if not effects:
        del index[name]


class Providers:
    """The orchestrator's one adapter over both providers: model calls go to the model provider, the rest to the code host."""

    def __init__(self, code_host: SimProvider, model_provider: SimProvider) -> None:
        self.code_host = code_host
        self.model_provider = model_provider
        self.by_name = {code_host.name: code_host, model_provider.name: model_provider}
        # Absence is authoritative only where every provider keeps keys.
        self.supports_idempotency = code_host.supports_idempotency and model_provider.supports_idempotency

    def route(self, operation: str) -> SimProvider:
        return self.model_provider if operation == "model-call" else self.code_host

    def find(self, key: str, operation: str, identity: str) -> list[Effect]:
        return self.route(operation).find(key, operation, identity)

    def verdict(self, provider_id: str) -> str | None:
        provider = self.model_provider if provider_id.startswith(self.model_provider.name) else self.code_host
        return provider.verdict(provider_id)

    def forget(self, task_id: str) -> None:
        self.code_host.forget(task_id)
        self.model_provider.forget(task_id)


def unit_draw(*parts: object) -> float:
    """A deterministic draw in [0, 1) from its inputs alone (CRC-32), for judgements that must not depend on call order."""
    return zlib.crc32(":".join(map(str, parts)).encode()) / 2**32
