"""Providers in simulated time: a code host and a model provider, with latency, overload, outages, rate limits and a ledger.

A `SimProvider` plays two parts. To the orchestrator it is a
`ProviderAdapter` (`find`, `verdict`, `supports_idempotency`), answered at
once from its ledger: provider truth, as reconciliation and verification
read it. To workers it offers `call`, a SimPy generator that takes simulated
time and can fail in every way the chapter names: refused (503 in an outage,
429 over its rate, 401 with revoked credentials), slowed by load (latency
grows with the calls in progress), or accepted and then timed out,
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

Load. The provider shares itself among the calls in progress (processor
sharing): each call has its work (exponential, mean `latency_s`, times a
slowdown's factor when it starts) and all of them progress at one rate,
1 / (1 + x + contention * x**2) seconds of work per second, where x is the
calls in progress over `overload_in_flight` (the rate is recomputed whenever
a call starts, finishes or is dropped, and when a capacity drop begins or ends). With `contention` 0 (the default)
goodput saturates under load; above 0 it peaks and then falls, so past
capacity the provider does less useful work the more it is given. By
default the provider drops a call when its deadline passes; with
`works_past_deadline` it works on after the caller gave up (counted in
`abandoned`, thrown away when done, `wasted`), loading the provider like
any other call: the amplifier of a metastable failure, where timed-out calls
are retried and the abandoned work keeps every new call slow enough to time
out too. `queue_max` bounds the calls in progress; one beyond it is refused
at once (503, a capacity denial), which is the provider's own defence. A
call with a key the provider has seen before for a live task is counted as a
retry (`retries`).

Faults strike through the provider's own methods: `outage` (fail fast with
503, or hang: accept the call and never answer before its deadline, landing
nothing), `revoke` (401), `lose_responses`, `slow_down` (service time times a
factor) and `drop_capacity` (the overload point and the rate limit times a
factor below one). Each call's fate (answered with its latency, timed out,
refused) is told to a `CallObserver`, the recorder's feed.
"""

from __future__ import annotations

import heapq
import itertools
import zlib
from collections.abc import Callable, Generator
from typing import Any, Protocol

from shiftchange.checkers.history import Landed
from shiftchange.core import Effect, ProviderRefused, ProviderTimeout, RateLimitConfig, TokenBucket

from .config import ProviderConfig
from .windows import Windows


class CallObserver(Protocol):
    """Who hears each provider call's fate: the recorder."""

    def call_offered(self, dependency: str) -> None: ...

    def call_retried(self, dependency: str) -> None:
        """The call offered just now uses a key the provider was called with before."""
        ...

    def call_answered(self, dependency: str, latency_s: float) -> None: ...

    def call_timed_out(self, dependency: str) -> None: ...

    def call_refused(self, dependency: str, domain: str) -> None: ...


class _Unobserved:
    def call_offered(self, dependency: str) -> None:
        pass

    def call_retried(self, dependency: str) -> None:
        pass

    def call_answered(self, dependency: str, latency_s: float) -> None:
        pass

    def call_timed_out(self, dependency: str) -> None:
        pass

    def call_refused(self, dependency: str, domain: str) -> None:
        pass


_WORK_EPSILON_S = 1e-9
"""Work within this of done is done: the shared work clock is a float sum."""


class _Job:
    """One call the provider is working on."""

    __slots__ = ("abandoned", "call", "cancelled", "deadline_at", "done", "existing", "finish_s", "finished", "lost")

    def __init__(self, done: Any, deadline_at: float, call: tuple, existing: Effect | None, lost: bool) -> None:
        self.done = done
        """What the caller waits on: succeeds with the effect when the work is done in time, or with None at the deadline."""
        self.deadline_at = deadline_at
        self.call = call
        self.lost = lost
        """The call lands but its answer never reaches the caller, who hears nothing before the deadline."""
        self.existing = existing
        """What an idempotent provider already holds under the call's key: the answer, with nothing new landing."""
        self.finish_s = 0.0
        """The shared work clock's reading at which this call is done."""
        self.abandoned = False
        self.cancelled = False
        self.finished = False


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
        self.abandoned = 0
        """Calls whose work is under way though their callers gave up (`works_past_deadline`)."""
        self.wasted = 0
        """Calls whose work finished after their deadline and was thrown away."""
        self._jobs: list[tuple[float, int, _Job]] = []
        """Calls in progress by the shared work clock's reading at which each is done (cancelled ones dropped lazily)."""
        self._sequence = itertools.count()
        self._work_done_s = 0.0
        """Processor sharing: the work each call in progress has received since the run began, all alike."""
        self._work_at = 0.0
        self._wake_token = 0
        self._wake_at: float | None = None
        """When the pending wake-up (the one `_wake_token` names) fires; None when none is pending."""
        self._deadlines: list[tuple[float, int, _Job]] = []
        """Calls whose caller may still hear of them, by deadline (answered ones dropped lazily)."""
        self._deadline_token = 0
        self._deadline_wake_at: float | None = None
        self._rate_now = 1.0
        """The per-call rate in force since the load last changed."""
        self._asked: dict[str, set[str]] = {}
        """The keys each live task has called with: a call with one of them again is a retry."""
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
        self.retries = 0
        """Calls with a key this provider was called with before: retries of one operation."""
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
        self._advance()
        self._dropped.add(self.env.now, until, (factor, _bucket(self.config.rate_per_s * factor)))
        self._reschedule()
        end = self.env.timeout(until - self.env.now)
        end.callbacks.append(lambda _event: self._capacity_changed())

    # ------------------------------------------------------------- calls

    def call(
        self, key: str, operation: str, identity: str, task_id: str, worker_id: str, deadline_at: float, via_gateway: bool = True
    ) -> Generator[Any, Any, Effect]:
        """A worker's call, due by `deadline_at`: returns the effect, or raises ProviderRefused / ProviderTimeout, after simulated time."""
        self.calls += 1
        self._observer.call_offered(self.name)
        asked = self._asked.setdefault(task_id, set())
        if key in asked:
            self.retries += 1
            self._observer.call_retried(self.name)
        else:
            asked.add(key)
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
        if refusal is None and config.queue_max is not None and self.in_flight >= config.queue_max:
            refusal = ProviderRefused("capacity", f"{self.name} 503: overloaded, {self.in_flight} calls in progress")
        if refusal is not None:
            self.refusals[refusal.domain] = self.refusals.get(refusal.domain, 0) + 1
            yield env.timeout(min(deadline_s, rng.expovariate(10.0 / config.latency_s)))
            raise refusal
        work_s = rng.expovariate(1.0 / config.latency_s) * (self._slow.at(now) or 1.0)
        lossy_probability = self._lossy.at(now)
        lossy = lossy_probability is not None and rng.random() < lossy_probability
        lost = lossy or rng.random() < config.accept_then_timeout_probability
        existing = self._by_key.get(key) if self.supports_idempotency else None
        call = (key, operation, identity, task_id, worker_id, via_gateway)
        job = _Job(env.event(), deadline_at, call, existing[0] if existing else None, lost)
        self._start(job, work_s)
        self._watch(job)
        effect = yield job.done
        if effect is None:
            raise ProviderTimeout(f"{self.name}: no response to {key} within {deadline_s:g}s")
        self._observer.call_answered(self.name, env.now - now)
        return effect

    # ------------------------------------------------- processor sharing

    def _rate(self) -> float:
        """Work done per second on each call in progress: all share the provider, and contention slows every one."""
        dropped = self._dropped.at(self.env.now)
        load = self.in_flight / (self.config.overload_in_flight * (dropped[0] if dropped is not None else 1.0))
        return 1.0 / (1.0 + load + self.config.contention * load * load)

    def _advance(self) -> None:
        """Bring the shared work clock to now, at the rate that held since it was last moved (set by `_reschedule`)."""
        now = self.env.now
        self._work_done_s += (now - self._work_at) * self._rate_now
        self._work_at = now

    # ------------------------------------------------------------ deadlines

    def _watch(self, job: _Job) -> None:
        """Keep the call's deadline. The provider keeps every deadline itself, on one timer for the earliest, so a caller
        that crashed or was interrupted meanwhile leaves its call dropped (or abandoned) all the same; and a call answered
        in time costs no event at its deadline."""
        heapq.heappush(self._deadlines, (job.deadline_at, next(self._sequence), job))
        if self._deadline_wake_at is None or job.deadline_at < self._deadline_wake_at:
            self._wake_for_deadline(job.deadline_at)

    def _wake_for_deadline(self, at: float) -> None:
        self._deadline_token += 1
        token = self._deadline_token
        self._deadline_wake_at = at
        self.env.timeout(at - self.env.now).callbacks.append(lambda _event: self._deadlines_passed(token))

    def _deadlines_passed(self, token: int) -> None:
        """Every call whose deadline has come and whose caller heard nothing: it times out, and its work is dropped or
        abandoned; then wait for the earliest deadline of a call still unanswered."""
        if token != self._deadline_token:
            return  # an earlier deadline came in since this wake-up was set
        self._deadline_wake_at = None
        now, deadlines = self.env.now, self._deadlines
        while deadlines and (deadlines[0][2].done.triggered or deadlines[0][0] <= now):
            _deadline_at, _sequence, job = heapq.heappop(deadlines)
            if not job.done.triggered:
                self._deadline_passed(job)
        if deadlines:
            self._wake_for_deadline(deadlines[0][0])

    def _deadline_passed(self, job: _Job) -> None:
        """A call's deadline passed with no answer heard: the caller times out; work not done is dropped, or carried on
        abandoned (`works_past_deadline`)."""
        job.done.succeed(None)
        if job.finished or job.cancelled:
            return
        if self.config.works_past_deadline:
            job.abandoned = True
            self.abandoned += 1
        else:
            self._cancel(job)

    def _capacity_changed(self) -> None:
        """A capacity drop began or ended: the work so far at the old rate, the rest at the new one."""
        self._advance()
        self._reschedule()

    def _start(self, job: _Job, work_s: float) -> None:
        self._advance()
        job.finish_s = self._work_done_s + work_s
        heapq.heappush(self._jobs, (job.finish_s, next(self._sequence), job))
        self.in_flight += 1
        self._reschedule()

    def _cancel(self, job: _Job) -> None:
        """The provider drops a call at its deadline (deadline propagation): its share of the work goes to the others."""
        self._advance()
        job.cancelled = True
        self.in_flight -= 1
        self._reschedule()

    def _reschedule(self) -> None:
        """Wake when the call closest to done finishes at the present rate. A change of load that brings that sooner sets a
        new wake-up; one that puts it later leaves the pending wake-up, which then looks again (one event, not two)."""
        jobs = self._jobs
        while jobs and jobs[0][2].cancelled:
            heapq.heappop(jobs)
        self._rate_now = self._rate()
        if not jobs:
            return
        delay_s = max(0.0, (jobs[0][0] - self._work_done_s) / self._rate_now)
        wake_at = self.env.now + delay_s
        if self._wake_at is not None and self._wake_at <= wake_at:
            return  # the pending wake-up comes first: it looks again then
        self._wake_token += 1
        self._wake_at = wake_at
        token = self._wake_token
        self.env.timeout(delay_s).callbacks.append(lambda _event: self._wake(token))

    def _wake(self, token: int) -> None:
        if token != self._wake_token:
            return  # the load grew lighter since this wake-up was set: a sooner one replaced it
        self._wake_at = None
        self._advance()
        jobs = self._jobs
        while jobs and (jobs[0][2].cancelled or jobs[0][0] <= self._work_done_s + _WORK_EPSILON_S):
            _finish_s, _sequence, job = heapq.heappop(jobs)
            if not job.cancelled:
                self._finish(job)
        self._reschedule()

    def _finish(self, job: _Job) -> None:
        """A call's work is done: it lands if its deadline has not passed, and is thrown away if it has."""
        job.finished = True
        self.in_flight -= 1
        if job.abandoned:
            self.abandoned -= 1
        if self.env.now >= job.deadline_at:
            self.wasted += 1
            return
        effect = job.existing if job.existing is not None else self._land(*job.call)
        if not job.lost:
            job.done.succeed(effect)

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
        """Drop a retired task's effects and the keys it called with."""
        self._asked.pop(task_id, None)
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
