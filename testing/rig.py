"""How the kit builds an orchestrator to test: the factory protocol, the reference factory, and the world a contract check drives.

The protocol is the smallest thing a port can plug in. The kit owns time and
provider truth, so it creates the clock (a `ManualClock` it advances), the
provider (a `LedgerProvider` whose ledger is the truth the checks read) and
the configuration the rules are stated against; the factory owns everything
else, its store first of all:

    def make_orchestrator(*, clock, provider, config, reliability):
        return MyOrchestrator(MyStore(...), clock, provider, config, reliability)

The object it returns has the public contract methods of
`shiftchange.core.Orchestrator` (create_task ... cancel_task, reap,
record_health_probe) and a `store` attribute: the `Store` it writes, which
the kit reads records and the history from, and closes when a check ends.
A port of the store alone plugs its store factory into the reference core
with `reference_orchestrator(make_store)`.

The core's own tests drive the same `World` over one store of each kind,
built with `World.over(store, reliability)`: the reference core over a store
the caller opened, with the reliability configuration and the seed of its
backoff jitter the test states.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from shiftchange.core import (
    Attempt,
    BackoffConfig,
    Budget,
    Claim,
    Clock,
    CoreConfig,
    Event,
    Grant,
    Lease,
    LedgerProvider,
    ManualClock,
    Orchestrator,
    Plan,
    ProviderAdapter,
    Refused,
    ReliabilityConfig,
    Store,
)

from .checks import expect, expect_equal

__all__ = ["OrchestratorFactory", "World", "appends", "fence", "reference_orchestrator", "states_passed"]

WORKSPACE = "repo-a"
FIRST_HYPOTHESIS = "the fixture leaks a port between tests"
CHANGED_HYPOTHESIS = "the port is reused because SO_REUSEADDR is missing"
REASON = "lease lost and reconciliation found nothing"


class OrchestratorFactory(Protocol):
    """Builds the orchestrator under test from what the kit controls; called once per check or per stateful example."""

    def __call__(self, *, clock: Clock, provider: ProviderAdapter, config: CoreConfig, reliability: ReliabilityConfig) -> Any: ...


def reference_orchestrator(make_store: Callable[[], Store]) -> OrchestratorFactory:
    """The reference `Orchestrator` over a fresh store from `make_store` each time: how a port of the store alone is checked."""

    def make(*, clock: Clock, provider: ProviderAdapter, config: CoreConfig, reliability: ReliabilityConfig) -> Orchestrator:
        return Orchestrator(make_store(), clock, provider, config, reliability)

    make.__qualname__ = make.__name__ = f"reference_orchestrator({getattr(make_store, '__qualname__', repr(make_store))})"
    return make


class World:
    """One orchestrator from the factory, a manual clock and a ledger provider, with steps that drive Attempts.

    The steps that must succeed check that they did, so a broken step fails
    where it broke, with a message saying which.
    """

    def __init__(
        self,
        make: OrchestratorFactory,
        supports_idempotency: bool = True,
        provider: Callable[[ManualClock], LedgerProvider] | None = None,
        reliability: ReliabilityConfig | None = None,
        **config: float,
    ) -> None:
        """`provider`, if given, builds the provider from the world's clock (a `LedgerProvider` subclass that misbehaves on purpose).

        `config` are `CoreConfig` fields. Without `reliability` there is no backoff: the contract checks claim a retry at
        once; pacing is the reliability suite's to prove, with the configuration it passes.
        """
        self.clock = ManualClock()
        if provider is None:
            self.provider = LedgerProvider(supports_idempotency=supports_idempotency, clock=self.clock)
        else:
            self.provider = provider(self.clock)
        self.config = CoreConfig(**config)
        self.reliability = reliability if reliability is not None else ReliabilityConfig(backoff=BackoffConfig(strategy="none"))
        self.orchestrator = make(clock=self.clock, provider=self.provider, config=self.config, reliability=self.reliability)
        self.store: Store = self.orchestrator.store
        self.task_ids: list[str] = []

    @classmethod
    def over(cls, store: Store, reliability: ReliabilityConfig | None = None, *, seed: int = 0, **options: Any) -> World:
        """The reference `Orchestrator` over `store`, already open, its backoff jitter drawn from `random.Random(seed)`.

        `options` are those of `World()`. Closing the world closes `store`.
        """

        def make(*, clock: Clock, provider: ProviderAdapter, config: CoreConfig, reliability: ReliabilityConfig) -> Orchestrator:
            return Orchestrator(store, clock, provider, config, reliability, random.Random(seed))

        return cls(make, reliability=reliability, **options)

    def close(self) -> None:
        self.store.close()

    # ---- steps that must succeed

    def task(self, task_id: str = "task-1", budget: Budget | None = None, *, workspace: str = WORKSPACE, **options: Any) -> str:
        """Create and accept a task; `options` are create_task's (priority, deadline_at)."""
        self.orchestrator.create_task(task_id, "make the flaky test pass", workspace, scope="tests/", budget=budget, **options)
        expect(self.orchestrator.accept_task(task_id).accepted, f"accept_task({task_id!r}) of a task in the inbox was refused")
        self.task_ids.append(task_id)
        return task_id

    def dispatched(self, task_id: str = "task-1", budget: Budget | None = None, *, workspace: str = WORKSPACE, **options: Any) -> str:
        self.task(task_id, budget, workspace=workspace, **options)
        result = self.orchestrator.dispatch(task_id, Plan(FIRST_HYPOTHESIS))
        expect(result.accepted, f"the first dispatch of ready {task_id} was refused: {result}")
        return f"{task_id}#1"

    def claimed(self, attempt_id: str, worker_id: str = "worker-a", *, workspace: str = WORKSPACE) -> Lease:
        """Admit the Attempt if it is queued (one admission already let through is claimed as it is), then claim it."""
        state = self.attempt(attempt_id).state
        if state == "queued":
            admitted = self.orchestrator.admit(attempt_id)
            state = getattr(admitted, "state", None)
            expect(state == "admitted", f"admit({attempt_id!r}) of a queued Attempt did not admit it: {admitted}")
        expect_equal(state, "admitted", f"the state of {attempt_id}, to be claimed")
        claim = self.orchestrator.claim_attempt(attempt_id.split("#")[0], worker_id, workspace)
        expect(isinstance(claim, Claim), f"a claim of admitted {attempt_id} by {worker_id} was refused: {claim}")
        return claim.lease

    def started(self, attempt_id: str, worker_id: str = "worker-a", *, workspace: str = WORKSPACE) -> Lease:
        lease = self.claimed(attempt_id, worker_id, workspace=workspace)
        result = self.orchestrator.start_attempt(*fence(lease))
        expect_equal(getattr(result, "state", result), "running", f"start_attempt of claimed {attempt_id} with its lease")
        return lease

    def running(
        self,
        task_id: str = "task-1",
        worker_id: str = "worker-a",
        budget: Budget | None = None,
        *,
        workspace: str = WORKSPACE,
        **options: Any,
    ) -> Lease:
        return self.started(self.dispatched(task_id, budget, workspace=workspace, **options), worker_id, workspace=workspace)

    def requeued(self, task_id: str = "task-1", hypothesis: str = FIRST_HYPOTHESIS, reason: str = REASON) -> Attempt:
        """Retry is accepted and appends the next Attempt, queued (it may still have a backoff to sleep out: see eligible_at)."""
        attempts = self.store.get_attempts(task_id)
        result = self.orchestrator.retry(task_id, reason, Plan(hypothesis))
        expect(result.accepted, f"a retry of {task_id} after a failed Attempt was refused: {result}")
        attempt = self.attempt(f"{task_id}#{len(attempts) + 1}")
        expect_equal(attempt.state, "queued", f"the state of {attempt.attempt_id}, appended by the retry")
        return attempt

    def retried(self, task_id: str = "task-1", hypothesis: str = FIRST_HYPOTHESIS, worker_id: str = "worker-b") -> Lease:
        """Retry, then admit, claim and start the next Attempt at once (no backoff to wait out)."""
        return self.started(self.requeued(task_id, hypothesis).attempt_id, worker_id)

    def started_when_eligible(self, attempt: Attempt, worker_id: str = "worker-b") -> Lease:
        """Wait out the Attempt's backoff, then admit, claim and start it."""
        if attempt.eligible_at is not None:
            self.clock.set(attempt.eligible_at)
        return self.started(attempt.attempt_id, worker_id)

    def renewed(self, lease: Lease) -> None:
        result = self.orchestrator.renew_lease(*fence(lease))
        expect(result.accepted, f"the renewal of {lease.attempt_id} by its lease holder was refused: {result}")

    def failed(self, lease: Lease, domain: str = "executor", signature: str = "worker crashed") -> Attempt:
        """The worker reports a failure; reconciliation finds nothing landed and the Attempt ends failed (or quarantined)."""
        reported = self.orchestrator.report_failure(*fence(lease), domain, signature)
        expect_equal(getattr(reported, "state", reported), "reconciling", f"report_failure by the holder of {lease.attempt_id}")
        reconciled = self.orchestrator.reconcile_attempt(lease.attempt_id)
        state = getattr(reconciled, "state", reconciled)
        expect(state in ("failed", "quarantined"), f"reconciling {lease.attempt_id} with nothing landed ended {state}, not failed")
        return self.attempt(lease.attempt_id)

    def expired(self, lease: Lease) -> None:
        """The worker vanishes: its lease runs out and the reaper makes the Attempt Suspect."""
        self.clock.advance(self.config.lease_ttl_s + 1)
        moved = self.orchestrator.reap()
        expect((lease.attempt_id, "suspect") in moved, f"the reaper did not make {lease.attempt_id} suspect after expiry: {moved}")

    def landed(self, lease: Lease, identity: str = "sha-1") -> tuple[Grant, str]:
        """Grant create-pr, let it land at the provider, and record the receipt."""
        grant = self.orchestrator.grant_tool(*fence(lease), "create-pr", identity, request="open the pull request")
        expect(isinstance(grant, Grant), f"create-pr for {lease.attempt_id} under its current lease was refused: {grant}")
        effect = self.provider.perform(grant.key, "create-pr", identity, "open the pull request")
        recorded = self.orchestrator.record_receipt(*fence(lease), grant.key, effect.provider_id, f"url of {effect.provider_id}")
        expect(recorded.accepted, f"the receipt of {grant.key} from the lease holder was refused: {recorded}")
        return grant, effect.provider_id

    # ---- calls that may be refused, and what the history says

    def grant(self, lease: Lease, identity: str, operation: str = "model-call", **options: Any) -> Grant | Refused:
        """grant_tool under the lease; `options` are its keywords (dependency, cost_usd, call_deadline_s, ...)."""
        return self.orchestrator.grant_tool(*fence(lease), operation, identity, **options)

    def attempt(self, attempt_id: str) -> Attempt:
        found = self.store.get_attempt(attempt_id)
        expect(found is not None, f"the store has no Attempt {attempt_id}")
        return found

    def last_event(self, kind: str, attempt_id: str | None = None) -> Event:
        """The latest event of `kind` in the history (of `attempt_id`'s, if given)."""
        matching = [e for e in self.store.events() if e.kind == kind and attempt_id in (None, e.attempt_id)]
        expect(matching, f"the history has no {kind!r} event" + (f" of {attempt_id}" if attempt_id else ""))
        return matching[-1]

    def refused(self, kind: str, guard: str, attempt_id: str | None = None) -> Event:
        """The latest `kind` event is a refusal whose reason names `guard`."""
        event = self.last_event(kind, attempt_id)
        expect(not event.accepted and guard in event.reason, f"the latest {kind!r} event is not a refusal naming {guard}: {event}")
        return event

    def snapshot(self) -> tuple:
        """Everything the store holds for the tasks of this world, plus the provider's ledger."""
        attempts = [self.store.get_attempts(t) for t in self.task_ids]
        intents = [self.store.get_intents(a.attempt_id) for group in attempts for a in group]
        tasks = [self.store.get_task(t) for t in self.task_ids]
        return self.store.events(), tasks, attempts, intents, list(self.provider.ledger)


@contextmanager
def world_of(make: OrchestratorFactory, **options: Any) -> Iterator[World]:
    """A world whose store is closed when the block ends."""
    world = World(make, **options)
    try:
        yield world
    finally:
        world.close()


def fence(lease: Lease) -> tuple[str, int, str]:
    return lease.attempt_id, lease.generation, lease.token


@contextmanager
def appends(store: Store, count: int, what: str = "the call") -> Iterator[list[Event]]:
    """The block must append exactly `count` events to the history; yields the list they are gathered into."""
    history = store.events()
    last = history[-1].seq if history else 0
    appended: list[Event] = []
    yield appended
    appended.extend(store.events(after_seq=last))
    shown = [(e.kind, e.accepted, e.reason) for e in appended]
    expect(len(appended) == count, f"{what} must append {count} event(s) to the history, but appended {len(appended)}: {shown}")


def states_passed(store: Store, attempt_id: str) -> list[str]:
    """The Attempt's path through its machine, read only from the history's accepted events."""
    path: list[str] = []
    for event in store.events():
        if event.attempt_id == attempt_id and event.accepted and event.to_state is not None and event.to_state not in path[-1:]:
            path.append(event.to_state)
    return path


def refused_on(result: Any, guard: str) -> bool:
    """Refused, naming `guard` among the guards that failed: its `guards` field where the result has one, else its readable reason."""
    if result.accepted:
        return False
    guards = getattr(result, "guards", None)
    return guard in guards if guards is not None else guard in result.reason
