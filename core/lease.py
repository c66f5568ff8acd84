"""The lease: health probes, claim, start, renew, checkpoint, complete, report a failure, and the reaper.

A claim atomically takes the task's admitted Attempt and issues a new lease:
a generation above any the task issued before and an unguessable token, of
which the Attempt keeps only the digest. Every later worker write presents
(attempt id, generation, token) and is fenced (`fence.py`) before its row is
asked. Expiry makes an Attempt Suspect, never Failed: the reaper moves it, and
a late completion (one refused because the lease is gone) triggers the reaper
and reconciliation at once, because a late worker is evidence that effects
may exist. Health probes gate claims; heartbeats (renewals) gate the lease.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from .context import Context, contract
from .policy import classify
from .records import Attempt, Task, new_lease
from .results import Accepted, Claim, Refused, Renewal, Result, new_claim, new_renewal
from .store import Transaction
from .validate import fence_arguments, flag, text


class Leases:
    """Claims and the fenced writes of a lease holder, and the reaper of expired leases."""

    __slots__ = ("_context", "_probes", "_reconcile")

    def __init__(self, context: Context, reconcile: Callable[[str], Any]) -> None:
        self._context = context
        self._reconcile = reconcile
        self._probes: dict[str, tuple[float, bool]] = {}

    # ------------------------------------------------------------ health

    def record_health_probe(self, worker_id: Any, ok: Any) -> None:
        """The platform's cheap check that a worker can do work. Health probes gate claims; heartbeats gate renewals."""
        text(worker_id, "worker_id", 200)
        flag(ok, "ok")
        self._probes[worker_id] = (self._context.clock.now(), ok)

    def _healthy(self, worker_id: str) -> bool:
        """A worker never probed may claim (probing is opt-in); a probed one needs a passing probe no older than the limit."""
        probe = self._probes.get(worker_id)
        if probe is None:
            return True
        at_s, ok = probe
        return ok and self._context.clock.now() - at_s <= self._context.reliability.health_probe_max_age_s

    # ------------------------------------------------------------- claim

    @contract
    def claim(self, task_id: Any, worker_id: Any, workspace: Any, healthy: Any) -> Refused | Claim:
        """Atomically take the task's admitted Attempt and a new lease; a second caller is refused.

        `healthy`, when given, is a health probe taken with the claim: this
        claim is judged by it, and it is recorded when the claim's
        transaction commits (an unknown task records nothing).
        """
        text(task_id, "task_id", 200)
        _claimer(worker_id, workspace, healthy)
        context = self._context
        with context as tx:
            task = context.task(tx, task_id)
            attempts = tx.attempts_of(task.task_id)
            if not attempts:
                self._probed(worker_id, healthy)
                return context.refuse(
                    tx, "worker", "claim", task.task_id, None, None, Refused("no attempt to claim", "not_found"), worker_id=worker_id
                )
            return self._lease(tx, task, attempts, worker_id, workspace, self._probed(worker_id, healthy))

    @contract
    def claim_next(self, worker_id: Any, workspace: Any, healthy: Any) -> Refused | Claim | None:
        """Claim the longest-admitted Attempt of a task in `workspace`, or None when there is none to take.

        The pull form of `claim` for workers that share a store instead of
        being handed offers: the store picks the oldest admitted Attempt of
        the workspace that it can lock at once (`Transaction.claimable`, FOR
        UPDATE SKIP LOCKED on a server), so workers claiming side by side take
        different Attempts instead of queueing on one. The claim itself is
        `claim`'s: an Attempt that is admitted is its task's latest. Nothing to claim is not a call about any record:
        it returns None and records nothing, so an idle worker's polling
        leaves no trace in the history.
        """
        _claimer(worker_id, workspace, healthy)
        with self._context as tx:
            return self._claim_next_in(tx, worker_id, workspace, healthy)

    @contract
    def claim_next_and_start(self, worker_id: Any, workspace: Any, healthy: Any) -> Refused | tuple[Claim, Refused | Accepted] | None:
        """`claim_next` and then `start` under the new lease, in one store transaction, for a worker that starts at once.

        Two rows of the table, two events, one commit: what the worker would
        get from the two calls one after the other, minus a round trip to the
        store and a commit. None when there is nothing to claim; a refused
        claim is returned as it is (nothing started).
        """
        _claimer(worker_id, workspace, healthy)
        with self._context as tx:
            claim = self._claim_next_in(tx, worker_id, workspace, healthy)
            if not isinstance(claim, Claim):
                return claim
            lease = claim.lease
            return claim, self._fenced_in(tx, lease.attempt_id, lease.generation, lease.token, "start")

    def _claim_next_in(self, tx: Transaction, worker_id: str, workspace: str, healthy: bool | None) -> Refused | Claim | None:
        # The oldest admitted Attempt first, unfiltered: the one index read every store does in order, and the answer
        # whenever one workspace is served. Only when it belongs to another workspace is the queue asked for this one.
        for scope in (None, workspace):  # asked one after the other: the second only if the first was another's
            candidate = tx.claim_candidate(("admitted",), scope)
            if candidate is None:
                return None
            _, task, attempts = candidate
            if task.workspace == workspace:
                return self._lease(tx, task, attempts, worker_id, workspace, self._probed(worker_id, healthy))
        return None

    def _probed(self, worker_id: str, healthy: bool | None) -> bool:
        """Whether the claimer counts as healthy: the probe taken with the claim (kept if the claim commits), or its last one."""
        if healthy is None:
            return self._healthy(worker_id)
        context = self._context
        context.after_commit(partial(self._probes.__setitem__, worker_id, (context.clock.now(), healthy)))
        return healthy

    def _lease(
        self, tx: Transaction, task: Task, attempts: list[Attempt], worker_id: str, workspace: str, healthy: bool
    ) -> Refused | Claim:
        context = self._context
        attempt = attempts[-1]
        given = {"attempts": attempts, "worker_id": worker_id, "workspace": workspace, "healthy": healthy}
        out: dict[str, Any] = {}
        result = context.fire(tx, attempt, "claim", "worker", given, out=out, task=task)
        if not result.accepted:
            return result
        lease = new_lease(attempt.attempt_id, task.task_id, worker_id, out["generation"], out["token"], attempt.expires_at)
        return new_claim(lease, out["manifest"])

    # ------------------------------------------------------ fenced writes

    @contract
    def start(self, attempt_id: Any, generation: Any, token: Any) -> Refused | Accepted:
        fence_arguments(attempt_id, generation, token)
        with self._context as tx:
            return self._fenced_in(tx, attempt_id, generation, token, "start")

    @contract
    def renew(self, attempt_id: Any, generation: Any, token: Any) -> Refused | Renewal:
        """Extend expiry under the current fence; tells the worker when cancellation was requested."""
        fence_arguments(attempt_id, generation, token)
        context = self._context
        with context as tx:
            # The Attempt is read (and, on a server store, locked) before the clock is: a renewal that waited for another
            # call on the same Attempt is judged, and stamped, when it is decided, not when it was sent.
            attempt = context.addressed(tx, attempt_id, "renew")
            result = context.fire(tx, attempt, "renew", "worker", None, generation, token)
            if not result.accepted:
                return result
            return new_renewal(attempt.expires_at, attempt.cancel_requested)

    @contract
    def checkpoint(self, attempt_id: Any, generation: Any, token: Any, checkpoint: Any) -> Refused | Accepted:
        fence_arguments(attempt_id, generation, token)
        text(checkpoint, "checkpoint", 10_000)
        with self._context as tx:
            return self._fenced_in(tx, attempt_id, generation, token, "checkpoint", {"checkpoint": checkpoint})

    def _fenced_in(
        self, tx: Transaction, attempt_id: str, generation: int, token: str, trigger: str, given: dict[str, Any] | None = None
    ) -> Refused | Accepted:
        """A worker's call of `trigger` inside the open transaction `tx`: the table fences it, guards it and writes it."""
        context = self._context
        attempt = context.addressed(tx, attempt_id, trigger)
        return context.fire(tx, attempt, trigger, "worker", given, generation, token)

    # ------------------------------------------------------------ ending

    @contract
    def complete(self, attempt_id: Any, generation: Any, token: Any, result: Any, head_sha: Any) -> Result:
        """Accept the worker's result for verification under the current fence; a late one triggers reconciliation."""
        fence_arguments(attempt_id, generation, token)
        text(result, "result", 100_000)
        if head_sha is not None:
            text(head_sha, "head_sha", 200)
        context = self._context
        with context as tx:
            attempt = context.addressed(tx, attempt_id, "complete")
            given = {"result": result, "head_sha": head_sha}
            outcome = context.fire(tx, attempt, "complete", "worker", given, generation, token)
            if outcome.accepted:
                return outcome
            overdue = attempt.state in context.table.expirable and not context.lease_current(attempt)
            addressed = attempt.attempt_id
        if overdue:
            self.reap()
        if context.store.get_attempt(addressed).state == "suspect":
            self._reconcile(addressed)
        return outcome

    @contract
    def report_failure(self, attempt_id: Any, generation: Any, token: Any, domain: Any, signature: Any, detail: Any) -> Result:
        """The worker reports a failure; effects may be in flight, so the Attempt goes to Reconciling, never straight to Failed."""
        fence_arguments(attempt_id, generation, token)
        classify(text(domain, "domain", 100))
        text(signature, "signature", 500)
        text(detail, "detail", 10_000, empty=True)
        context = self._context
        with context as tx:
            attempt = context.addressed(tx, attempt_id, "report_failure")
            given = {"domain": domain, "signature": signature}
            return context.fire(tx, attempt, "report_failure", "worker", given, generation, token, detail)

    # ------------------------------------------------------------ reaper

    def reap(self) -> list[tuple[str, str]]:
        """Expired leases make their Attempts Suspect; unanswered cancellations time out into Reconciling.

        The scan reads and writes nothing it must lock; each Attempt it finds
        due is then moved in a transaction of its own, which reads it again.
        One transaction for the whole sweep would hold every Attempt it had
        moved while waiting for the next one, which a worker may be renewing:
        on a store that runs transactions side by side, that is a deadlock
        waiting to happen on every sweep that finds two leases due.
        """
        context = self._context
        with context.store.transaction() as tx:
            now = context.clock.now()
            due = [
                attempt.attempt_id for attempt in tx.attempts_in(context.table.leased) if reapable(attempt, now, context.table.expirable)
            ]
        moved = []
        for attempt_id in due:
            result = self._reap_attempt(attempt_id)
            if result is not None and result.accepted:
                moved.append((attempt_id, result.state))
        return moved

    @contract
    def _reap_attempt(self, attempt_id: str) -> Refused | Accepted | None:
        context = self._context
        with context as tx:
            attempt = tx.attempt(attempt_id)
            return None if attempt is None else self._reap_one(tx, attempt, context.clock.now())

    def _reap_one(self, tx: Transaction, attempt: Attempt, now: float) -> Refused | Accepted | None:
        context = self._context
        if attempt.state in context.table.expirable and attempt.expires_at is not None and attempt.expires_at <= now:
            return context.fire(tx, attempt, "expire", "reaper")
        if attempt.state == "cancelling" and attempt.cancel_deadline_at is not None and attempt.cancel_deadline_at <= now:
            given = {"acknowledgement": "executor did not acknowledge"}
            return context.fire(tx, attempt, "cancel_timed_out", "reaper", given)
        return None


def _claimer(worker_id: Any, workspace: Any, healthy: Any) -> None:
    """The claimer's arguments, checked before anything is read."""
    text(worker_id, "worker_id", 200)
    text(workspace, "workspace", 200)
    if healthy is not None:
        flag(healthy, "healthy")


def reapable(attempt: Attempt, now: float, expirable: frozenset[str]) -> bool:
    """Whether the reaper has a move for this Attempt now: its lease ran out, or its cancellation went unanswered.

    `expirable` are the states the table's expire rows leave (`Table.expirable`).
    """
    if attempt.state in expirable:
        return attempt.expires_at is not None and attempt.expires_at <= now
    return attempt.state == "cancelling" and attempt.cancel_deadline_at is not None and attempt.cancel_deadline_at <= now
