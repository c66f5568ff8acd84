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

import secrets
from collections.abc import Callable
from functools import partial
from typing import Any

from .context import Context, contract
from .fence import token_digest
from .machine import EXPIRABLE, LEASED
from .policy import classify
from .records import Attempt, Manifest, Plan, Task, new_lease, new_manifest
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
            started = self._fenced_in(tx, lease.attempt_id, lease.generation, lease.token, "start", started_at=self._context.clock.now())
            return claim, started

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
        now = context.clock.now()
        generation = max(a.generation for a in attempts) + 1
        token = secrets.token_urlsafe(32)
        manifest = _manifest(task, attempt)
        holds = {
            "workspace_matches": workspace == task.workspace,
            "worker_healthy": healthy,
            "backoff_elapsed": attempt.eligible_at is None or now >= attempt.eligible_at,
        }
        result = context.fire(
            tx,
            attempt,
            "claim",
            "worker",
            holds,
            None,
            worker_id=worker_id,
            generation=generation,
            token_digest=token_digest(token),
            claimed_at=now,
            heartbeat_at=now,
            expires_at=now + context.config.lease_ttl_s,
            manifest_digest=manifest.digest(),
            worktree=manifest.worktree,
            base_sha=manifest.base_sha,
            timeout_budget_s=context.config.timeout_budget_s,
        )
        if not result.accepted:
            return result
        return new_claim(new_lease(attempt.attempt_id, task.task_id, worker_id, generation, token, attempt.expires_at), manifest)

    # ------------------------------------------------------ fenced writes

    @contract
    def start(self, attempt_id: Any, generation: Any, token: Any) -> Refused | Accepted:
        fence_arguments(attempt_id, generation, token)
        context = self._context
        with context as tx:
            # The start time read inside the transaction, once the Attempt is read: on a store with its own clock
            # (PostgreSQL) that is the server's time, as every lease decision is.
            attempt = context.addressed(tx, attempt_id)
            return self._fenced_in(tx, attempt_id, generation, token, "start", attempt=attempt, started_at=context.clock.now())

    @contract
    def renew(self, attempt_id: Any, generation: Any, token: Any) -> Refused | Renewal:
        """Extend expiry under the current fence; tells the worker when cancellation was requested."""
        fence_arguments(attempt_id, generation, token)
        context = self._context
        with context as tx:
            attempt = context.addressed(tx, attempt_id)
            # The time is read once the Attempt is read (and, on a server store, locked): a renewal that waited for
            # another call on the same Attempt is judged, and stamped, when it is decided, not when it was sent.
            now = context.clock.now()
            refused = context.fenced(tx, attempt, "renew", generation, token)
            if refused is not None:
                return refused
            holds = {"lease_current": context.lease_current(attempt)}
            result = context.fire(
                tx, attempt, "renew", "worker", holds, generation, heartbeat_at=now, expires_at=now + context.config.lease_ttl_s
            )
            if not result.accepted:
                return result
            return new_renewal(attempt.expires_at, attempt.cancel_requested)

    @contract
    def checkpoint(self, attempt_id: Any, generation: Any, token: Any, checkpoint: Any) -> Refused | Accepted:
        fence_arguments(attempt_id, generation, token)
        text(checkpoint, "checkpoint", 10_000)
        return self._fenced_write(attempt_id, generation, token, "checkpoint", checkpoint=checkpoint)

    def _fenced_write(self, attempt_id: str, generation: int, token: str, trigger: str, **changes: Any) -> Refused | Accepted:
        """A fenced call whose only guard is a current lease, in a transaction of its own."""
        with self._context as tx:
            return self._fenced_in(tx, attempt_id, generation, token, trigger, **changes)

    def _fenced_in(
        self, tx: Transaction, attempt_id: str, generation: int, token: str, trigger: str, attempt: Attempt | None = None, **changes: Any
    ) -> Refused | Accepted:
        """Fence, then fire `trigger` with `changes`, inside the open transaction `tx`."""
        context = self._context
        if attempt is None:
            attempt = context.addressed(tx, attempt_id)
        refused = context.fenced(tx, attempt, trigger, generation, token)
        if refused is not None:
            return refused
        return context.fire(tx, attempt, trigger, "worker", {"lease_current": context.lease_current(attempt)}, generation, **changes)

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
            attempt = context.addressed(tx, attempt_id)
            refused = context.fenced(tx, attempt, "complete", generation, token)
            if refused is None:
                now = context.clock.now()
                holds = {"lease_current": context.lease_current(attempt)}
                changes = {"result": result, "head_sha": head_sha, "ended_at": now, "elapsed_s": context.elapsed_s(attempt, now)}
                outcome = context.fire(tx, attempt, "complete", "worker", holds, generation, **changes)
                if outcome.accepted:
                    return outcome
                refused = outcome
            overdue = attempt.state in EXPIRABLE and not context.lease_current(attempt)
            addressed = attempt.attempt_id
        if overdue:
            self.reap()
        if context.store.get_attempt(addressed).state == "suspect":
            self._reconcile(addressed)
        return refused

    @contract
    def report_failure(self, attempt_id: Any, generation: Any, token: Any, domain: Any, signature: Any, detail: Any) -> Result:
        """The worker reports a failure; effects may be in flight, so the Attempt goes to Reconciling, never straight to Failed."""
        fence_arguments(attempt_id, generation, token)
        classify(text(domain, "domain", 100))
        text(signature, "signature", 500)
        text(detail, "detail", 10_000, empty=True)
        context = self._context
        with context as tx:
            attempt = context.addressed(tx, attempt_id)
            refused = context.fenced(tx, attempt, "report_failure", generation, token)
            if refused is not None:
                return refused
            now = context.clock.now()
            return context.fire(
                tx,
                attempt,
                "report_failure",
                "worker",
                {"lease_current": context.lease_current(attempt)},
                generation,
                detail=detail,
                failure_domain=domain,
                failure_signature=signature,
                ended_at=now,
                elapsed_s=context.elapsed_s(attempt, now),
            )

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
            due = [attempt.attempt_id for attempt in tx.attempts_in(LEASED) if reapable(attempt, now)]
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
        if attempt.state in EXPIRABLE and attempt.expires_at is not None and attempt.expires_at <= now:
            holds = {"lease_expired": True}
            return context.fire(tx, attempt, "expire", "reaper", holds, ended_at=now, elapsed_s=context.elapsed_s(attempt, now))
        if attempt.state == "cancelling" and attempt.cancel_deadline_at is not None and attempt.cancel_deadline_at <= now:
            holds = {"lease_issued": attempt.token_digest is not None, "cancel_deadline_passed": True}
            return context.fire(tx, attempt, "cancel_timed_out", "reaper", holds, detail="executor did not acknowledge", ended_at=now)
        return None


def _claimer(worker_id: Any, workspace: Any, healthy: Any) -> None:
    """The claimer's arguments, checked before anything is read."""
    text(worker_id, "worker_id", 200)
    text(workspace, "workspace", 200)
    if healthy is not None:
        flag(healthy, "healthy")


def reapable(attempt: Attempt, now: float) -> bool:
    """Whether the reaper has a move for this Attempt now: its lease ran out, or its cancellation went unanswered."""
    if attempt.state in EXPIRABLE:
        return attempt.expires_at is not None and attempt.expires_at <= now
    return attempt.state == "cancelling" and attempt.cancel_deadline_at is not None and attempt.cancel_deadline_at <= now


def _manifest(task: Task, attempt: Attempt) -> Manifest:
    """The frozen inputs handed to the worker with its lease."""
    plan = attempt.plan or Plan(attempt.hypothesis)
    return new_manifest(
        task.task_id,
        attempt.number,
        task.objective,
        task.scope,
        task.workspace,
        f"{task.workspace}/{task.task_id}/attempt-{attempt.number}",
        plan.hypothesis,
        plan.base_sha,
        plan.executor,
        plan.model,
        plan.context_version,
        plan.policy_version,
        task.budget,
    )
