"""A worker: claims an admitted Attempt, heartbeats from inside long tool calls, acts only through granted keys, stops when told.

The workflow of one Attempt is the chapter's small agent task: plan (a model
call), slow tool calls (a model call, then local work while the lease is
renewed from inside it), commit, push, describe the pull request (a model
call), create it, complete. Each
side effect is asked of the tool gateway with the worker's fence; the worker
calls the provider only with the key the gateway minted, and only when the
grant is not a replay of a recorded result. A worker resumes from its
predecessor's checkpoint when it was handed one.

Heartbeats keep a fixed cadence from the claim. The moment a worker hears
its claim accepted its heartbeat starts, before `start_attempt`, and sends a
renewal every heartbeat_interval_s (I) after that; each renewal is its own
process, so a lost or slow one never delays the next. A lease granted or
renewed at g runs out at g + TTL, and the renewals that count are those that
reach the orchestrator before then. Let d be how much later than g + I the
next renewal arrives: in the first window a round trip (the claim's answer,
then that renewal's way in), in later ones the difference of two one-way
delays, about nothing. With no loss, floor((TTL - d) / I) renewals land
inside a lease, and one fewer may be lost in a row before it expires (when
TTL is a multiple of I, jitter decides whether the last one is in time). A
pause freezes the heartbeat: the beats it swallowed are not sent in a burst
when it ends; the next one goes at once, then the cadence goes on.
When a renewal is refused the worker stops all work at once (the heartbeat
interrupts the workflow); when a renewal says cancellation was requested, it
acknowledges and stops. A crash interrupts the worker and wipes its memory;
a pause freezes it at its next step, after which it carries on believing it
still owns the Attempt, and the fences must refuse it.

A provider call that times out may have landed, so the worker reports the
timeout (the breaker counts it), waits a backoff drawn from the core's
`reliability.backoff` (retry n of the call draws from retry n's interval)
and asks the gateway again, which asks provider truth before it grants the
call anew and may refuse it on the dependency's retry budget. A refusal
for an open circuit or a spent retry budget holds the call back, not the
Attempt: the worker waits (an open circuit says how long) and asks again.
All of these count against `gateway_retries_max`, the per-call limit; when
it runs out the worker reports the Attempt failed, in the provider domain.

What a worker holds and when it lets go, its renewals and its pauses are
reported to the lease ground truth (`metrics.Metrics`), which judges each
expiry false or true at the instant the lease ran out.

Anti-pattern switches the worker honours (set by `sim/antipatterns.py`):
`mints_own_keys` (it presents a key of its own making), `bypasses_gateway`
(operations it performs at the provider without asking), `ignores_cancel`
(a cancellation request is a flag it never reads), `ignores_checkpoint`
(recovery reruns the workflow from step one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol

from simpy import Interrupt

from shiftchange.core import Accepted, Backoff, BackoffConfig, ProviderRefused, ProviderTimeout
from shiftchange.core.results import FENCE_CODES

from .config import WorkerConfig, WorkloadConfig

CRASH, LEASE_LOST, CANCELLED = "crash", "lease lost", "cancelled"


class Stop(Exception):
    """This Attempt's work ends here (refused, failed and reported, or cancelled)."""


@dataclass(slots=True)
class Offer:
    """An admitted Attempt offered to the workers, with the checkpoint its predecessor left if the plan is the same."""

    task_id: str
    attempt_id: str
    workspace: str
    resume: str | None


@dataclass(slots=True)
class Behaviour:
    """How workers misbehave under an anti-pattern; all False is the correct worker."""

    mints_own_keys: bool = False
    bypasses_gateway: tuple[str, ...] = ()
    ignores_cancel: bool = False
    ignores_checkpoint: bool = False


class LeaseObserver(Protocol):
    """Who hears what a worker holds, lets go of, and how its renewals fare (the lease ground truth)."""

    def holding(self, worker_id: str, attempt_id: str, at: float) -> None: ...

    def released(self, worker_id: str, attempt_id: str, at: float) -> None: ...

    def paused(self, worker_id: str, at: float, until: float) -> None: ...

    def crashed(self, worker_id: str, attempt_id: str | None, at: float) -> None: ...

    def renewal(self, outcome: str) -> None:
        """One renewal's fate as the worker saw it: sent, unanswered (the request or its answer lost, or late), accepted or refused."""
        ...


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What a worker uses of the world: the clock, the orchestrator across the network, the providers, the offers, its work."""

    env: Any
    orchestrator: Any
    transport: Any
    providers: Any
    offers: Any
    """The simpy.Store the control plane puts admitted Attempts into."""
    bench: Any
    """The workload's `Workbench`: task natures, tool and commit times."""
    leases: LeaseObserver
    behaviour: Behaviour
    workload: WorkloadConfig
    calls: WorkerConfig
    heartbeat_interval_s: float
    backoff: BackoffConfig
    """The core's backoff, which also paces a worker's retries of a timed-out provider call."""
    rng: Any
    """The workers' random stream (their backoff jitter)."""


def answer_held_back(answer: Any) -> bool:
    """A gateway refusal that holds a call back while its dependency is failing: an open circuit or a spent retry budget.

    The gateway counts such a refusal in the provider domain only when nothing else stood in the way.
    """
    return answer.domain == "provider"


def _table_refused_in(answer: Any, state: str) -> bool:
    """A refusal the table gave while the worker's fence held and the Attempt was in `state`."""
    return answer.state == state and answer.code not in FENCE_CODES


def head_sha(task_id: str, hypothesis: str) -> str:
    """The commit an Attempt makes is a function of its task and hypothesis: the same plan makes the same commit."""
    return hashlib.sha1(f"{task_id}\x1f{hypothesis}".encode()).hexdigest()[:12]


class Worker:
    """One worker process, restartable, with at most one Attempt at a time."""

    def __init__(self, context: WorkerContext, worker_id: str) -> None:
        self.context = context
        self.env = context.env
        self.worker_id = worker_id
        self.alive = True
        self.paused_until = -1.0
        self.holding: str | None = None
        """The Attempt this worker believes it owns."""
        self._main: Any = None
        self._heartbeat: Any = None
        self._waiting: Any = None
        self._stopping = False
        """A renewal already told the workflow to stop: later answers change nothing."""
        self._backoff = Backoff(context.backoff, context.rng)
        """Paces retries of a timed-out provider call (retry 0 starts a fresh sequence for each call)."""

    # ---------------------------------------------------------- lifecycle

    def start(self) -> None:
        self.alive = True
        self._main = self.env.process(self._run())

    def crash(self, restart_s: float) -> None:
        """The process dies: it stops, memory is gone, calls already sent still land; it restarts after `restart_s`."""
        if not self.alive:
            return
        self.alive = False
        self.context.leases.crashed(self.worker_id, self.holding, self.env.now)
        if self.holding is not None:
            self.context.leases.released(self.worker_id, self.holding, self.env.now)
        self.holding = None
        if self._waiting is not None and not self._waiting.triggered:
            self._waiting.cancel()  # a dead worker takes no more offers
        for process in (self._main, self._heartbeat):
            if process is not None and process.is_alive:
                process.interrupt(CRASH)
        restart = self.env.timeout(restart_s)
        restart.callbacks.append(lambda _event: self.start())

    def pause(self, until: float) -> None:
        """A stop-the-world pause: both the workflow and the heartbeat freeze at their next step until `until`."""
        self.context.leases.paused(self.worker_id, self.env.now, until)
        self.paused_until = max(self.paused_until, until)

    def _frozen(self) -> Generator[Any, Any, None]:
        """A stop-the-world pause takes effect at the next step of either process."""
        if self.env.now < self.paused_until:
            yield self.env.timeout(self.paused_until - self.env.now)

    def _run(self) -> Generator[Any, Any, None]:
        while True:
            try:
                self._waiting = self.context.offers.get()
                offer = yield self._waiting
                self._waiting = None
                yield from self._frozen()
                yield from self._attempt(offer)
            except Interrupt as interrupt:
                if interrupt.cause == CRASH:
                    return  # the worker restarts later, with empty memory

    # ------------------------------------------------------------ calls

    def _call(self, contract: Any, *args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        answer = yield from self.context.transport.call(self.worker_id, contract, *args, **kwargs)
        yield from self._frozen()
        return answer

    def _attempt(self, offer: Offer) -> Generator[Any, Any, None]:
        orchestrator = self.context.orchestrator
        claim = yield from self._call(orchestrator.claim_attempt, offer.task_id, self.worker_id, offer.workspace)
        if claim is None or not claim.accepted:
            return
        lease = claim.lease
        fence = (lease.attempt_id, lease.generation, lease.token)
        self.holding = lease.attempt_id
        self._stopping = False
        self.context.leases.holding(self.worker_id, lease.attempt_id, self.env.now)
        self._heartbeat = self.env.process(self._beat(fence, self._main))  # the cadence runs from the claim
        try:
            started = yield from self._call(orchestrator.start_attempt, *fence)
            if started is None:  # the start may have landed: ask again; a refusal from running means it had
                started = yield from self._call(orchestrator.start_attempt, *fence)
                if started is not None and not started.accepted and _table_refused_in(started, "running"):
                    started = Accepted("running")
            if started is not None and started.accepted:
                yield from self._workflow(fence, claim.manifest, offer)
        except Stop:
            pass
        except Interrupt as interrupt:
            if interrupt.cause == CRASH:
                raise
            if interrupt.cause == CANCELLED:
                yield from self._call(orchestrator.acknowledge_cancel, *fence)
        finally:
            if self._heartbeat is not None and self._heartbeat.is_alive:
                self._heartbeat.interrupt(None)
            self._heartbeat = None
            if self.holding is not None:
                self.context.leases.released(self.worker_id, self.holding, self.env.now)
            self.holding = None

    def _beat(self, fence: tuple, main: Any) -> Generator[Any, Any, None]:
        """Send a renewal every `heartbeat_interval_s` from the claim, each in its own process, whatever became of the last."""
        interval_s = self.context.heartbeat_interval_s
        began = self.env.now
        beats = 0
        try:
            while True:
                beats += 1
                yield self.env.timeout(began + beats * interval_s - self.env.now)
                if self.env.now < self.paused_until:
                    yield from self._frozen()
                    beats = int((self.env.now - began) // interval_s)  # the beats a pause swallowed are not sent late
                self.env.process(self._renew(fence, main))
        except Interrupt:
            return

    def _renew(self, fence: tuple, main: Any) -> Generator[Any, Any, None]:
        """One renewal: a refusal stops the workflow; an answer that says cancellation was requested asks it to acknowledge."""
        leases = self.context.leases
        leases.renewal("sent")
        renewal = yield from self._call(self.context.orchestrator.renew_lease, *fence)
        if renewal is None:
            leases.renewal("unanswered")
            return
        leases.renewal("accepted" if renewal.accepted else "refused")
        if self.holding != fence[0] or self._stopping or not main.is_alive:
            return  # this Attempt's work already ended, or is already stopping
        if not renewal.accepted:
            self._stopping = True
            main.interrupt(LEASE_LOST)  # stop all work the moment a renewal is refused
        elif renewal.cancel_requested and not self.context.behaviour.ignores_cancel:
            self._stopping = True
            main.interrupt(CANCELLED)

    # ---------------------------------------------------------- workflow

    def _workflow(self, fence: tuple, manifest: Any, offer: Offer) -> Generator[Any, Any, None]:
        context, env = self.context, self.env
        workload = context.workload
        orchestrator = context.orchestrator
        task_id = manifest.task_id
        attempt_id = fence[0]
        resume = None if context.behaviour.ignores_checkpoint else offer.resume
        profile = context.bench.profile(task_id)
        if resume is None:
            calls = workload.runaway_calls if profile.runaway else 1 + workload.tool_calls
            for step in range(calls):
                yield from self._effect(fence, task_id, "model-call", f"{attempt_id}:step-{step}", "model_provider")
                if 0 < step <= workload.tool_calls:
                    yield env.timeout(context.bench.tool_time_s())  # the slow tool; the heartbeat renews meanwhile
                    yield from self._frozen()
            yield from self._checkpoint(fence, "tools-done")
        sha = head_sha(task_id, manifest.hypothesis)
        if resume != "pushed":
            yield env.timeout(context.bench.commit_time_s())
            yield from self._frozen()
            yield from self._effect(fence, task_id, "push", f"{task_id}:{sha}", "code_host")
            yield from self._checkpoint(fence, "pushed")
        yield from self._effect(fence, task_id, "model-call", f"{attempt_id}:describe-pr", "model_provider")  # the PR's description
        yield from self._effect(fence, task_id, "create-pr", f"{task_id}:{sha}", "code_host")
        yield from self._call(orchestrator.complete_attempt, *fence, f"pull request for {sha}", head_sha=sha)

    def _checkpoint(self, fence: tuple, checkpoint: str) -> Generator[Any, Any, None]:
        answer = yield from self._call(self.context.orchestrator.checkpoint, *fence, checkpoint)
        if answer is not None and not answer.accepted:
            yield from self._refused(fence, answer)

    def _effect(self, fence: tuple, task_id: str, operation: str, identity: str, dependency: str) -> Generator[Any, Any, str]:
        """Ask the gateway, call the provider only when authorized and not a replay, record the receipt."""
        context = self.context
        provider = context.providers.by_name[dependency]
        config = context.calls
        model = dependency == "model_provider"
        cost_usd = context.workload.model_call_cost_usd if model else 0.0
        tokens = context.workload.model_call_tokens if model else 0
        if operation in context.behaviour.bypasses_gateway:
            key = f"{operation}:{self.worker_id}:{identity}"
            try:
                deadline_at = self.env.now + config.call_deadline_s  # no grant, so the worker sets its own deadline
                effect = yield from self._provider_call(provider, key, operation, identity, task_id, deadline_at, via_gateway=False)
            except (ProviderTimeout, ProviderRefused) as error:
                raise Stop(str(error)) from error
            return effect.provider_id
        key = f"{operation}:{self.worker_id}:{fence[0]}:{identity}" if context.behaviour.mints_own_keys else None
        failure = ("provider", f"provider:{operation} unanswered after {config.gateway_retries_max + 1} asks")
        timeouts = held_back = 0
        for _ask in range(config.gateway_retries_max + 1):
            grant = yield from self._call(
                context.orchestrator.grant_tool,
                *fence,
                operation,
                identity,
                call_deadline_s=config.call_deadline_s,
                cost_usd=cost_usd,
                tokens=tokens,
                spans_attempts=not model,
                key=key,
                dependency=dependency,
            )
            if grant is None:
                yield self.env.timeout(config.gateway_retry_s)  # maybe granted, maybe not: asking again is safe
                continue
            if not grant.accepted:
                wait_s, failure = yield from self._refused(fence, grant, held_back)
                held_back += answer_held_back(grant)
                yield self.env.timeout(wait_s)
                yield from self._frozen()
                continue
            if grant.replay is not None:
                return grant.replay  # the effect exists: never call the provider again
            try:
                effect = yield from self._provider_call(
                    provider, grant.key, operation, identity, task_id, grant.deadline_at, via_gateway=True
                )
            except ProviderTimeout:
                # The effect may have landed: the breaker hears of the timeout, and after a backoff the intent is retried
                # (the gateway asks provider truth first, and its retry budget may refuse).
                signature = f"timeout:{dependency} gave no answer by the deadline"
                yield from self._call(context.orchestrator.report_call_failure, *fence, grant.key, signature)
                failure = ("provider", f"provider:{operation} timed out {timeouts + 1} times")
                yield self.env.timeout(self._backoff.delay_s(timeouts))
                timeouts += 1
                yield from self._frozen()
                continue
            except ProviderRefused as refusal:
                signature = f"{refusal.domain}:{refusal.detail}"
                yield from self._call(context.orchestrator.report_call_failure, *fence, grant.key, signature)
                yield from self._fail(fence, refusal.domain, signature)
            yield from self._call(context.orchestrator.record_receipt, *fence, grant.key, effect.provider_id)
            return effect.provider_id
        yield from self._fail(fence, *failure)
        return ""  # unreachable: _fail raises Stop

    def _provider_call(
        self, provider: Any, key: str, operation: str, identity: str, task_id: str, deadline_at: float, via_gateway: bool
    ) -> Generator:
        """Call the provider with the deadline the grant set; the provider lands nothing past it."""
        effect = yield from provider.call(key, operation, identity, task_id, self.worker_id, deadline_at, via_gateway)
        yield from self._frozen()
        return effect

    def _refused(self, fence: tuple, answer: Any, held_back: int = 0) -> Generator[Any, Any, tuple[float, tuple[str, str]]]:
        """Read a gateway refusal by its data (domain, failed guards, state): how long to wait before asking again
        (and what to report if asking runs out), or stop.

        An open circuit or a spent retry budget holds the call back, not the Attempt: the worker backs off (the core's
        backoff, `held_back` counting such refusals of this call) and asks again, so an outage builds a backlog of
        waiting work instead of failing it; only when its asks run out does it report the failure.
        """
        failed = answer.guards
        config = self.context.calls
        if answer.domain == "capacity":
            return config.gateway_retry_s, ("capacity", "capacity:rate limit at the gateway")
        if "no_call_in_flight" in failed:
            return config.call_deadline_s, ("unknown_result", "unknown_result:an earlier call may still land")
        if answer_held_back(answer):
            signature = "provider:circuit open" if "circuit_allows" in failed else "provider:retry budget spent"
            wait_s = max(config.gateway_retry_s, self._backoff.delay_s(held_back), answer.retry_after_s or 0.0)
            return wait_s, ("provider", signature)
        if "spend_within_budget" in failed:
            yield from self._fail(fence, "capacity", "budget:spend ceiling reached")
        if "timeout_budget_left" in failed:
            yield from self._fail(fence, "executor", "executor:timeout budget exhausted")
        if _table_refused_in(answer, "cancelling") and not self.context.behaviour.ignores_cancel:
            yield from self._call(self.context.orchestrator.acknowledge_cancel, *fence)
        raise Stop(answer.reason)  # the lease is gone or the Attempt left running: stop without another word

    def _fail(self, fence: tuple, domain: str, signature: str) -> Generator[Any, Any, None]:
        yield from self._call(self.context.orchestrator.report_failure, *fence, domain, signature)
        raise Stop(signature)
