"""`shiftchange worker`: one worker process that claims Attempts from a shared store and runs the agent workflow for real.

The same protocol as the simulator's worker (`sim/worker.py`), on a real
clock and a real provider:

- It pulls work: `claim_next` takes the longest-admitted Attempt of its
  workspace (FOR UPDATE SKIP LOCKED on PostgreSQL), with a health probe.
- Its heartbeat is a thread of its own, with its own store connection and
  its own `Orchestrator` over the same store, that renews on a fixed
  cadence from the claim, also while the workflow sleeps in a long tool
  call. The moment a renewal is refused (the lease expired, a newer
  generation holds the Attempt) the heartbeat raises a flag, and the
  workflow stops at its next step: before any further grant, provider call
  or completion. A renewal that says cancellation was requested makes the
  workflow acknowledge and stop.
- It acts only through granted keys: every side effect is asked of the tool
  gateway with the worker's fence, performed at the provider with the key
  the gateway minted and the deadline it set, and receipted. A replay
  (the effect already has a receipt) is never performed again.
- It resumes from its predecessor's checkpoint when the plan is unchanged.

What a real process adds to the simulation: a store that does not answer
(the connection was cut, the server restarted) is a call unanswered, as a
lost message is in the simulator. The worker asks again where asking again
is safe (grants, renewals) and otherwise leaves the Attempt to the reaper:
the fences, not the worker's belief, decide what counts. A SIGSTOP freezes
both threads; on SIGCONT the worker carries on believing it owns its
Attempt, and its next fenced call is refused. SIGTERM stops it at its next
step; it exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import random
import signal
import sys
import threading
import zlib
from collections.abc import Callable
from typing import Any

from shiftchange.core import (
    Backoff,
    CoreError,
    InputError,
    Orchestrator,
    ProviderRefused,
    ProviderTimeout,
    ReliabilityConfig,
    StoreError,
)
from shiftchange.core.results import FENCE_CODES
from shiftchange.core.stores import describe, open_store

from .clock import WallClock
from .codehost import HttpProvider
from .config import RuntimeConfig, load_config

__all__ = ["Worker", "head_sha"]

log = logging.getLogger("shiftchange.worker")

UNANSWERED = object()
"""What a contract call returns when the store did not answer (the call may or may not have been recorded)."""


class Stop(Exception):
    """This Attempt's work ends here: refused, failed and reported, cancelled, lease lost, or told to stop."""


def head_sha(task_id: str, hypothesis: str) -> str:
    """The commit an Attempt makes: the simulator's function of task and hypothesis (the same plan makes the same commit)."""
    return hashlib.sha1(f"{task_id}\x1f{hypothesis}".encode()).hexdigest()[:12]


def worker_store_url(url: str, worker_id: str) -> str:
    """The store URL with this worker's name as PostgreSQL's application_name (so an operator, or chaos, can find its sessions)."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}application_name=shiftchange-worker:{worker_id}"


def ask(contract: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a contract; one that could not be answered is UNANSWERED, not a crash.

    The store may not answer (a cut connection, contention past its bound),
    and a contract that reads provider truth (the gateway asking whether an
    unreceipted call landed) may find the provider away.
    """
    try:
        return contract(*args, **kwargs)
    except (StoreError, ProviderTimeout, ProviderRefused) as error:
        log.warning("no answer to %s: %s", getattr(contract, "__name__", "call"), error)
        return UNANSWERED
    except CoreError as error:  # a defect, not a fault: said loudly, but it costs one call, not the process
        log.error("%s raised %s: %s", getattr(contract, "__name__", "call"), type(error).__name__, error)
        return UNANSWERED


class Beat:
    """One Attempt's heartbeat: its fence, the cadence's origin, and the flags the renewals raise for the workflow."""

    def __init__(self, fence: tuple[str, int, str], claimed_at: float) -> None:
        self.fence = fence
        self.claimed_at = claimed_at
        self.done = threading.Event()
        self.lost = threading.Event()
        """A renewal was refused: the lease is gone; stop all work."""
        self.cancel_requested = threading.Event()
        self.interrupted = threading.Event()
        """Set with `lost`, with `cancel_requested` and when the worker is told to stop: what ends local work early."""

    def lose(self) -> None:
        self.lost.set()
        self.interrupted.set()

    def cancel(self) -> None:
        self.cancel_requested.set()
        self.interrupted.set()


class Heartbeat(threading.Thread):
    """The worker's heartbeat thread, for its whole life: renews the current Attempt's lease on a fixed cadence from its claim.

    It keeps its own store connection and its own Orchestrator over the
    same store (a SQLite connection belongs to the thread that opened it),
    so a renewal never waits for the workflow's calls in this process.
    """

    def __init__(self, worker: Worker) -> None:
        super().__init__(name=f"heartbeat-{worker.worker_id}", daemon=True)
        self.worker = worker
        self.current: Beat | None = None
        self.wake = threading.Event()
        self.closed = threading.Event()

    def follow(self, beat: Beat | None) -> None:
        self.current = beat
        self.wake.set()

    def run(self) -> None:
        orchestrator = None
        try:
            while not self.closed.is_set():
                beat = self.current
                if beat is None or beat.done.is_set() or beat.lost.is_set():
                    self.wake.wait(0.5)
                    self.wake.clear()
                    continue
                try:
                    if orchestrator is None:
                        orchestrator = self.worker.new_orchestrator()
                    self._beat(orchestrator, beat)
                except Exception as error:  # the thread must outlive anything one renewal meets
                    # Without renewals this Attempt's lease will run out: stop its work now rather than be fenced later.
                    log.error("heartbeat of %s failed (%s: %s): stopping that Attempt", beat.fence[0], type(error).__name__, error)
                    beat.lose()
                    if orchestrator is not None:
                        with contextlib.suppress(Exception):
                            orchestrator.store.close()
                    orchestrator = None
                    self.closed.wait(self.worker.config.idle_poll_s)
        finally:
            if orchestrator is not None:
                orchestrator.store.close()

    def _beat(self, orchestrator: Orchestrator, beat: Beat) -> None:
        interval_s = self.worker.config.core.heartbeat_interval_s
        clock = self.worker.clock
        beats = 0
        while self.current is beat and not self.closed.is_set():
            beats += 1
            wait_s = beat.claimed_at + beats * interval_s - clock.now()
            if wait_s < 0:  # a pause swallowed beats: they are not sent late in a burst; the next goes now
                beats = int((clock.now() - beat.claimed_at) // interval_s)
                wait_s = 0.0
            if beat.done.wait(wait_s):
                return
            renewal = ask(orchestrator.renew_lease, *beat.fence)
            self.worker.counts["renewals"] += 1
            if renewal is UNANSWERED:
                continue
            if not renewal.accepted:
                log.info("renewal of %s refused (%s): stopping", beat.fence[0], renewal.code)
                beat.lose()
                return
            if renewal.cancel_requested:
                beat.cancel()


class Worker:
    """One worker: a loop of claim, workflow, release; at most one Attempt at a time."""

    def __init__(self, store_url: str, provider_url: str, config: RuntimeConfig, worker_id: str) -> None:
        self.store_url = worker_store_url(store_url, worker_id)
        self.config = config
        self.worker_id = worker_id
        self.clock = WallClock()
        self.stopping = threading.Event()
        store = open_store(self.store_url)  # first: a bad store URL is the first thing said
        self.provider = HttpProvider(provider_url)
        self.reliability = ReliabilityConfig()
        self.orchestrator = self.new_orchestrator(store)
        self.backoff = Backoff(self.reliability.backoff, random.Random(zlib.crc32(worker_id.encode())))
        """Paces retries of a timed-out provider call; seeded by the worker's id, never the global stream."""
        self.heartbeat = Heartbeat(self)
        self.beat: Beat | None = None
        """The Attempt this worker believes it owns, as its heartbeat follows it."""
        self.counts = {"claims": 0, "renewals": 0, "completed": 0, "stopped": 0}

    def new_orchestrator(self, store: Any = None) -> Orchestrator:
        """An Orchestrator over a store connection of its own (one for the workflow, one for the heartbeat thread)."""
        store = open_store(self.store_url) if store is None else store
        return Orchestrator(store, self.clock, self.provider, self.config.core, self.reliability)

    def close(self) -> None:
        self.heartbeat.closed.set()
        self.heartbeat.follow(None)
        if self.heartbeat.is_alive():
            self.heartbeat.join(timeout=5.0)
        self.orchestrator.store.close()

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        config = self.config
        self.heartbeat.start()
        while not self.stopping.is_set():
            claim = ask(self.orchestrator.claim_next, self.worker_id, config.workspace, True)
            if claim is UNANSWERED or claim is None or not claim.accepted:
                self.stopping.wait(config.idle_poll_s)
                continue
            self.counts["claims"] += 1
            try:
                self._attempt(claim)
            except Exception:  # a defect in one Attempt's work: said with its traceback; the worker takes the next
                log.exception("attempt %s ended by an unexpected error", claim.lease.attempt_id)
                self.counts["stopped"] += 1

    def _attempt(self, claim: Any) -> None:
        lease = claim.lease
        fence = (lease.attempt_id, lease.generation, lease.token)
        beat = self.beat = Beat(fence, self.clock.now())
        self.heartbeat.follow(beat)  # the cadence runs from the claim
        log.info("claimed %s generation %d", lease.attempt_id, lease.generation)
        try:
            if self._started(fence):
                self._workflow(fence, claim.manifest)
                self.counts["completed"] += 1
        except Stop as stop:
            self.counts["stopped"] += 1
            log.info("attempt %s stopped: %s", lease.attempt_id, stop)
        finally:
            beat.done.set()
            self.heartbeat.follow(None)
            self.beat = None

    def _started(self, fence: tuple[str, int, str]) -> bool:
        """Start the Attempt; an unanswered start may have landed, so ask again: refused from running means it had."""
        started = self._call(self.orchestrator.start_attempt, *fence)
        if started is UNANSWERED:
            started = self._call(self.orchestrator.start_attempt, *fence)
            if started is UNANSWERED:
                return False  # the store is away: leave the Attempt to its lease
            if not started.accepted:
                return started.state == "running" and started.code not in FENCE_CODES
        return started.accepted

    def _checkpoint_step(self) -> None:
        """Between any two steps: stop the moment the lease is gone, acknowledge a cancellation, or leave when told to stop."""
        beat = self.beat
        if beat is None:
            return
        if beat.lost.is_set():
            raise Stop("a renewal was refused: the lease is gone")
        if beat.cancel_requested.is_set():
            self._call(self.orchestrator.acknowledge_cancel, *beat.fence, check=False)
            raise Stop("cancellation requested: acknowledged")
        if self.stopping.is_set():
            raise Stop("the worker is stopping")

    def _call(self, contract: Callable[..., Any], *args: Any, check: bool = True, **kwargs: Any) -> Any:
        if check:
            self._checkpoint_step()
        return ask(contract, *args, **kwargs)

    def _sleep(self, seconds: float) -> None:
        """Local work: sleep, but wake at once if the lease is lost, cancellation is asked, or the worker is told to stop."""
        beat = self.beat
        if beat is not None:
            beat.interrupted.wait(seconds)
        else:
            self.stopping.wait(seconds)
        self._checkpoint_step()

    def stop(self) -> None:
        """SIGTERM: stop at the next step, and end any local work now."""
        self.stopping.set()
        beat = self.beat
        if beat is not None:
            beat.interrupted.set()

    # ------------------------------------------------------------ workflow

    def _workflow(self, fence: tuple[str, int, str], manifest: Any) -> None:
        config = self.config
        attempt_id = fence[0]
        task_id = manifest.task_id
        resume = self._resume(attempt_id, manifest.hypothesis)
        if resume is None:
            for step in range(1 + config.tool_calls):
                self._effect(fence, task_id, "model-call", f"{attempt_id}:step-{step}", "model_provider")
                if step > 0:
                    self._sleep(config.tool_call_s)  # the slow tool; the heartbeat renews meanwhile
            self._checkpoint(fence, "tools-done")
        sha = head_sha(task_id, manifest.hypothesis)
        if resume != "pushed":
            self._sleep(config.commit_s)
            self._effect(fence, task_id, "push", f"{task_id}:{sha}", "code_host")
            self._checkpoint(fence, "pushed")
        self._effect(fence, task_id, "model-call", f"{attempt_id}:describe-pr", "model_provider")
        self._effect(fence, task_id, "create-pr", f"{task_id}:{sha}", "code_host")
        done = self._call(self.orchestrator.complete_attempt, *fence, f"pull request for {sha}", head_sha=sha)
        if done is not UNANSWERED and not done.accepted:
            raise Stop(f"completion refused: {done.reason}")

    def _resume(self, attempt_id: str, hypothesis: str) -> str | None:
        """The predecessor's last fenced checkpoint, when this Attempt keeps its plan (read outside any contract)."""
        try:
            store = self.orchestrator.store
            attempt = store.get_attempt(attempt_id)
            if attempt is None or attempt.previous_attempt_id is None:
                return None
            previous = store.get_attempt(attempt.previous_attempt_id)
        except StoreError:
            return None  # start over: the keys make every repeated effect a replay
        if previous is None or previous.hypothesis != hypothesis:
            return None
        return previous.checkpoint

    def _checkpoint(self, fence: tuple[str, int, str], checkpoint: str) -> None:
        answer = self._call(self.orchestrator.checkpoint, *fence, checkpoint)
        if answer is not UNANSWERED and not answer.accepted:
            self._refused(fence, answer)

    def _effect(self, fence: tuple[str, int, str], task_id: str, operation: str, identity: str, dependency: str) -> str:
        """Ask the gateway, call the provider only when authorized and not a replay, record the receipt."""
        config = self.config
        orchestrator = self.orchestrator
        model = dependency == "model_provider"
        failure = ("provider", f"provider:{operation} unanswered after {config.gateway_retries_max + 1} asks")
        timeouts = held_back = 0
        for _ask in range(config.gateway_retries_max + 1):
            grant = self._call(
                orchestrator.grant_tool,
                *fence,
                operation,
                identity,
                call_deadline_s=config.call_deadline_s,
                cost_usd=0.01 if model else 0.0,
                tokens=1000 if model else 0,
                spans_attempts=not model,
                dependency=dependency,
            )
            if grant is UNANSWERED:
                self._sleep(config.gateway_retry_s)  # maybe granted, maybe not: asking again is safe
                continue
            if not grant.accepted:
                wait_s, failure = self._refused(fence, grant, held_back)
                held_back += grant.domain == "provider"
                self._sleep(wait_s)
                continue
            if grant.replay is not None:
                return grant.replay  # the effect exists: never call the provider again
            self._checkpoint_step()
            try:
                effect = self.provider.call(grant.key, operation, identity, task_id, self.worker_id, grant.deadline_at)
            except ProviderTimeout:
                # It may have landed: the breaker hears of it; after a backoff the gateway asks provider truth first.
                self._call(orchestrator.report_call_failure, *fence, grant.key, f"timeout:{dependency} gave no answer by the deadline")
                failure = ("provider", f"provider:{operation} timed out {timeouts + 1} times")
                self._sleep(self.backoff.delay_s(timeouts))
                timeouts += 1
                continue
            except ProviderRefused as refusal:
                signature = f"{refusal.domain}:{refusal.detail}"
                self._call(orchestrator.report_call_failure, *fence, grant.key, signature)
                self._fail(fence, refusal.domain, signature)
            # Unchecked: the effect has landed, so its receipt is worth recording even if the worker was just told to stop;
            # the fence, not this process, decides whether it still counts.
            self._call(orchestrator.record_receipt, *fence, grant.key, effect.provider_id, check=False)
            return effect.provider_id
        self._fail(fence, *failure)
        return ""  # unreachable: _fail raises Stop

    def _refused(self, fence: tuple[str, int, str], answer: Any, held_back: int = 0) -> tuple[float, tuple[str, str]]:
        """Read a gateway refusal by its data: how long to wait before asking again, or stop (the simulator worker's rules)."""
        failed = answer.guards
        config = self.config
        if answer.domain == "capacity":
            return config.gateway_retry_s, ("capacity", "capacity:rate limit at the gateway")
        if "no_call_in_flight" in failed:
            return config.call_deadline_s, ("unknown_result", "unknown_result:an earlier call may still land")
        if answer.domain == "provider":
            signature = "provider:circuit open" if "circuit_allows" in failed else "provider:retry budget spent"
            wait_s = max(config.gateway_retry_s, self.backoff.delay_s(held_back), answer.retry_after_s or 0.0)
            return min(wait_s, config.core.lease_ttl_s), ("provider", signature)
        if "spend_within_budget" in failed:
            self._fail(fence, "capacity", "budget:spend ceiling reached")
        if "timeout_budget_left" in failed:
            self._fail(fence, "executor", "executor:timeout budget exhausted")
        if answer.state == "cancelling" and answer.code not in FENCE_CODES:
            self._call(self.orchestrator.acknowledge_cancel, *fence, check=False)
        raise Stop(answer.reason)  # the lease is gone or the Attempt left running: stop without another word

    def _fail(self, fence: tuple[str, int, str], domain: str, signature: str) -> None:
        self._call(self.orchestrator.report_failure, *fence, domain, signature, check=False)
        raise Stop(signature)


# ---------------------------------------------------------------- the command


def run_worker(args: argparse.Namespace) -> int:
    _logging()
    config = load_config(args.config)
    worker_id = args.id or f"worker-{os.getpid()}"
    if args.store.strip() == "memory:":
        raise InputError("a worker needs a store other processes can share: sqlite:///path or postgresql://...")
    worker = Worker(args.store, args.provider, config, worker_id)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    log.info("worker %s started on %s", worker_id, describe(args.store))
    try:
        worker.run()
    finally:
        worker.close()
    log.info("worker %s stopped: %s", worker_id, worker.counts)
    return 0


def _logging() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
