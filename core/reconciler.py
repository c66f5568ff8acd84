"""Reconciliation and verification: what happened at the provider decides, never a worker's word.

Reconciliation asks the provider about every operation key of a Suspect or
Reconciling Attempt and classifies the outcome: landed, absent,
contradictory, or pending while calls may still land (DESIGN: reconciling
waits for in-flight calls). Landed effects without a reported result are
partial work: the Attempt fails and Attempt N+1 resumes from them, its grant
of the same key replaying the receipt. Verification needs independent
evidence: every effect found at the provider and passed by its verdict.

Both read the provider through its adapter before they open the write
transaction, then write guarded by the version they read, so no database
lock is held across a provider call; an Attempt that changed meanwhile is
refused (code "changed") rather than decided on stale findings.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .breaker import Breakers
from .context import Context, contract
from .provider import Effect
from .records import Attempt, Intent
from .results import Accepted, Reconciliation, Refused
from .store import Transaction
from .validate import text

Found = list[tuple[Intent, list[Effect]]]


class Reconciler:
    """reconcile_attempt and verify_attempt."""

    __slots__ = ("_breakers", "_context")

    def __init__(self, context: Context, breakers: Breakers) -> None:
        self._context = context
        self._breakers = breakers
        """Told the outcome of settled calls nobody reported, so a half-open probe whose worker vanished still reports."""

    def _findings(self, intents: list[Intent]) -> tuple[Found, bool]:
        """Ask the provider about every operation key; returns the matches and whether every call has settled."""
        provider = self._context.provider
        now = self._context.clock.now()
        found = [(intent, provider.find(intent.key, intent.operation, intent.identity)) for intent in intents]
        settled = all(
            effects or provider.supports_idempotency or intent.deadline_at is None or intent.deadline_at <= now for intent, effects in found
        )
        return found, settled

    def _read(self, attempt_id: Any, then: str | None) -> tuple[int, list[Intent], list[Attempt]] | Refused:
        """The Attempt's version (after firing `then` if it is Suspect), its intents and its task's Attempts, in one transaction.

        The version is read now, as a number: a record a store hands out may be live, and change while the provider is read.
        """
        context = self._context
        with context as tx:
            attempt = context.attempt(tx, attempt_id)
            if then is not None and attempt.state == "suspect":
                context.fire(tx, attempt, then, "orchestrator")
            if then is not None and attempt.state != "reconciling":
                refusal = Refused(f"no reconciliation from {attempt.state!r}", "no_row", state=attempt.state)
                return context.refuse(tx, "orchestrator", "reconcile", attempt.task_id, attempt, attempt.state, refusal)
            return attempt.version, tx.intents_of(attempt.attempt_id), tx.attempts_of(attempt.task_id)

    def _current(self, tx: Transaction, attempt_id: str, seen: int, kind: str) -> Attempt | Refused:
        """The Attempt again, unless another call moved it while the provider was read: then refuse and keep the refusal."""
        context = self._context
        current = context.attempt(tx, attempt_id)
        if current.version == seen:
            return current
        words = "reconciliation" if kind == "reconcile" else "verification"
        refusal = Refused(f"the attempt changed during {words}; {kind} again", "changed", state=current.state)
        return context.refuse(tx, "orchestrator", kind, current.task_id, current, current.state, refusal)

    # ------------------------------------------------------- reconcile

    @contract
    def reconcile(self, attempt_id: Any) -> Refused | Reconciliation:
        """For each operation key, find the matching effect at the provider, record it, and classify the outcome."""
        text(attempt_id, "attempt_id", 220)
        read = self._read(attempt_id, "reconcile")
        if isinstance(read, Refused):
            return read
        seen, intents, attempts = read
        found, settled = self._findings(intents)
        with self._context as tx:
            current = self._current(tx, attempt_id, seen, "reconcile")
            if isinstance(current, Refused):
                return current
            return self._conclude(tx, current, attempts, found, settled)

    def _conclude(self, tx: Transaction, attempt: Attempt, attempts: list[Attempt], found: Found, settled: bool) -> Reconciliation:
        context = self._context
        findings, landed, contradictions = self._record(tx, found)
        words = "; ".join(findings) or "no operation keys"
        if contradictions:
            given = {
                "outcome": "contradictory",
                "evidence": "; ".join(contradictions),
                "domain": "contradictory_evidence",
                "signature": "contradictory:" + contradictions[0],
            }
            context.fire(tx, attempt, "evidence_contradictory", "orchestrator", given, detail=words)
            return Reconciliation("contradictory", attempt.state, tuple(findings))
        outcome = "landed" if landed else "absent"
        # Whether every call has settled is the rows' `calls_settled` guard to decide, not this contract's: a call still
        # in flight leaves the Attempt reconciling, its refusal kept in the history, and the caller asks again later.
        result = self._fail(tx, attempt, attempts, outcome, words, settled)
        if not result.accepted:
            # Still Reconciling, its refusal kept: a call in flight (the rows' calls_settled), or a table with no way out
            # for these findings. Either way nothing is concluded, and the caller asks again.
            return Reconciliation("pending", attempt.state, tuple(findings))
        self._settle(tx, found)
        return Reconciliation(outcome, attempt.state, tuple(findings))

    def _record(self, tx: Transaction, found: Found) -> tuple[list[str], int, list[str]]:
        """The findings in words, how many keys landed once, and the contradictions; a landed effect becomes a receipt."""
        findings, landed, contradictions = [], 0, []
        for intent, effects in found:
            ids = sorted({e.provider_id for e in effects})
            findings.append(f"{intent.key}: {', '.join(ids) if ids else 'absent'}")
            if len(ids) > 1:
                contradictions.append(f"{intent.key} has {len(ids)} effects")
            elif intent.receipt is not None and ids != [intent.receipt]:
                contradictions.append(f"{intent.key} receipt {intent.receipt} not found at the provider")
            elif ids:
                landed += 1
                if intent.receipt is None:
                    fresh = tx.intent(intent.key)
                    tx.update_intent(fresh, receipt=ids[0], result=ids[0])
        return findings, landed, contradictions

    def _settle(self, tx: Transaction, found: Found) -> None:
        """Settled calls nobody reported teach the breakers too (after commit)."""
        context = self._context
        now = context.clock.now()
        for intent, effects in found:
            fresh = tx.intent(intent.key)
            if fresh.outcome is not None:
                continue
            tx.update_intent(fresh, outcome="succeeded" if effects else "failed")
            if effects:
                context.after_commit(partial(self._breakers.record_success, intent.dependency, now))
            else:
                context.after_commit(partial(self._breakers.record_failure, intent.dependency, now, "unknown_result: no effect landed"))

    def _fail(
        self, tx: Transaction, attempt: Attempt, attempts: list[Attempt], outcome: str, findings: str, settled: bool
    ) -> Refused | Accepted:
        """The Attempt fails (or is quarantined, or cancelled) with its findings, if every call settled. Only `complete` verifies."""
        context = self._context
        domain = attempt.failure_domain or "executor"
        landed = outcome == "landed"
        signature = attempt.failure_signature or (f"{domain}:lease lost after effects landed" if landed else f"{domain}:no effect landed")
        given = {"settled": settled, "attempts": attempts, "outcome": outcome, "domain": domain, "signature": signature}
        return context.fire(tx, attempt, f"effects_{outcome}", "orchestrator", given, detail=findings)

    # ---------------------------------------------------------- verify

    @contract
    def verify(self, attempt_id: Any) -> Refused | Accepted:
        """Success needs independent evidence: every effect found at the provider and passed by its verdict."""
        text(attempt_id, "attempt_id", 220)
        read = self._read(attempt_id, None)
        assert not isinstance(read, Refused)
        seen, intents, attempts = read
        found, _settled = self._findings(intents)
        provider = self._context.provider
        verdicts = [(intent, effects, provider.verdict(effects[0].provider_id) if len(effects) == 1 else None) for intent, effects in found]
        with self._context as tx:
            current = self._current(tx, attempt_id, seen, "verify")
            if isinstance(current, Refused):
                return current
            return self._judge(tx, current, attempts, verdicts)

    def _judge(self, tx: Transaction, attempt: Attempt, attempts: list[Attempt], verdicts: list) -> Refused | Accepted:
        context = self._context
        if attempt.state != "verifying":
            refusal = Refused(f"nothing to verify in {attempt.state!r}", "no_row", state=attempt.state)
            return context.refuse(tx, "provider", "verify", attempt.task_id, attempt, attempt.state, refusal)
        evidence = "; ".join(
            f"{i.key}: {','.join(e.provider_id for e in effects) or 'absent'} {v or 'pending'}" for i, effects, v in verdicts
        )
        problems = [f"{i.key}: {len(effects)} effects" for i, effects, _v in verdicts if len(effects) != 1]
        if not verdicts or problems:
            why = "; ".join(problems) or "no effect to verify: the worker's claim alone is not evidence"
            given = {"evidence": why, "domain": "contradictory_evidence", "signature": "evidence:" + why[:200]}
            return context.fire(tx, attempt, "evidence_contradictory", "orchestrator", given, detail=why)
        failed = [v for _i, _e, v in verdicts if v is not None and v != "passed"]
        if failed:
            return self._failed(tx, attempt, attempts, failed[0].removeprefix("failed:"), evidence)
        if any(v is None for _i, _e, v in verdicts):
            reason = "pending: verdict not in yet"
            context.event(tx, "provider", "verify", attempt.task_id, attempt, True, reason, attempt.state, attempt.state, detail=evidence)
            return Accepted(attempt.state, "pending")
        return context.fire(tx, attempt, "verified", "provider", {"evidence": evidence}, detail=evidence)

    def _failed(self, tx: Transaction, attempt: Attempt, attempts: list[Attempt], signature: str, evidence: str) -> Refused | Accepted:
        """The provider's verdict failed the effect: the Attempt fails, or is quarantined when the signature repeats."""
        given = {"attempts": attempts, "evidence": evidence, "domain": attempt.failure_domain or "validation", "signature": signature}
        return self._context.fire(tx, attempt, "verification_failed", "provider", given, detail=evidence)
