"""The clock: the next instant that changes something by itself, and the move there (`clock:advance:T`).

Time is discrete. Every contract call and provider answer happens at the
current instant; only this step moves it, and only to the next instant at
which something changes by itself: a lease no live worker renews runs out, a
cancellation's deadline passes, a backoff between Attempts ends, a
reconciliation's in-flight call passes its deadline, a worker's `Wait` ends
or its lost call's deadline passes. It never moves to or past the deadline
of a call still in flight: the provider answers (or loses) it first.

A live worker that is not paused keeps its lease the way its heartbeat
would: while the clock moves, it renews every `heartbeat_interval_s` (real
`renew_lease` calls, into the history, their answers to the agent). So a
lease runs out only when its holder crashed, was paused, or stopped
believing it holds it; renewals are not lost.
"""

from __future__ import annotations

from typing import Any


def next_instant(world: Any) -> float | None:
    """The next instant at which something changes by itself, or None; never at or past an unanswered call's deadline."""
    now = world.clock.now()
    held = {w.agent.fence[:2] for w in world.workers if w.holding and not w.paused}
    candidates = _record_deadlines(world.store, held, world.table.expirable)
    candidates += [w.wait_until for w in world.workers if w.wait_until is not None]
    candidates += [w.stalled_until for w in world.workers if w.stalled_until is not None]
    future = [at for at in candidates if at > now]
    if not future:
        return None
    target = min(future)
    limits = [call.perform.deadline_at for call in world.network.calls]
    if limits and target >= min(limits):
        return None  # the provider answers (or loses) a call before its deadline passes
    return target


def _record_deadlines(store: Any, held: set[tuple[str, int]], expirable: frozenset[str]) -> list[float]:
    """The instants the records name: unrenewed expiries (in the table's `expirable` states), cancellation deadlines,
    backoffs' ends, in-flight calls' deadlines."""
    candidates = []
    with store.transaction() as tx:
        for attempt in tx.attempts_in(expirable):
            if attempt.expires_at is not None and (attempt.attempt_id, attempt.generation) not in held:
                candidates.append(attempt.expires_at)
        for attempt in tx.attempts_in(("cancelling",)):
            if attempt.cancel_deadline_at is not None:
                candidates.append(attempt.cancel_deadline_at)
        for attempt in tx.attempts_in(("queued",)):
            if attempt.eligible_at is not None:
                candidates.append(attempt.eligible_at)
        for attempt in tx.attempts_in(("reconciling",)):
            candidates += [i.deadline_at for i in tx.intents_of(attempt.attempt_id) if i.deadline_at is not None and i.receipt is None]
    return candidates


def advance(world: Any, target: float) -> None:
    """Move to `target` (the label's, which `World.apply` checked is the next instant); live, unpaused holders renew on
    their cadence on the way, as their heartbeats would."""
    now = world.clock.now()
    interval_s = world.config.heartbeat_interval_s
    while now < target:
        now = min(target, now + interval_s)
        world.clock.set(now)
        for worker in world.workers:
            if worker.holding and not worker.paused:
                worker.renew(world, now)
