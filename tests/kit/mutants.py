"""Mutants of the reference core: each breaks one rule, through the public API only, so the stateful machine can be shown to catch it.

A mutant wraps the reference `Orchestrator` (every contract it does not
break is delegated) and, where the break needs it, writes through the store's
public `Transaction` interface. None reaches into the core's modules, so the
mutants stay true while the core's insides change. The first four are the
rules issue 12 names; the rest are its input defects, reintroduced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from shiftchange.core import MemoryStore, Orchestrator
from shiftchange.spec import load_spec

TERMINAL = frozenset(load_spec().attempt.terminal_states)


class Mutant:
    """The reference core with one contract broken; everything else is the reference's."""

    def __init__(self, inner: Orchestrator) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _holds_the_fence(self, attempt_id: Any, generation: Any, token: Any) -> bool:
        """Whether (generation, token) is the named Attempt's current lease, read from its public record."""
        attempt = self._inner.store.get_attempt(attempt_id) if isinstance(attempt_id, str) else None
        return (
            attempt is not None
            and attempt.token_digest is not None
            and isinstance(token, str)
            and generation == attempt.generation
            and hashlib.sha256(token.encode()).hexdigest() == attempt.token_digest
        )


class LateCompletion(Mutant):
    """Accepts complete_attempt after the lease expired but before the reaper ran: it revives the lease for the call."""

    def complete_attempt(self, attempt_id: Any, generation: Any, token: Any, result: Any, head_sha: Any = None) -> Any:
        store, now = self._inner.store, self._inner.clock.now()
        attempt = store.get_attempt(attempt_id) if isinstance(attempt_id, str) else None
        overdue = attempt is not None and attempt.state == "running" and attempt.expires_at is not None and attempt.expires_at <= now
        if overdue and isinstance(result, str) and self._holds_the_fence(attempt_id, generation, token):
            with store.transaction() as tx:
                tx.update_attempt(tx.attempt(attempt_id), expires_at=now + 1.0)
        return self._inner.complete_attempt(attempt_id, generation, token, result, head_sha=head_sha)


class StaleRenewal(Mutant):
    """Renews a lease presented with a stale (or any) generation: the fence checks the token and ignores the generation."""

    def renew_lease(self, attempt_id: Any, generation: Any, token: Any) -> Any:
        attempt = self._inner.store.get_attempt(attempt_id) if isinstance(attempt_id, str) else None
        if attempt is not None and type(generation) is int:
            generation = attempt.generation
        return self._inner.renew_lease(attempt_id, generation, token)


class GrantAfterCancel(Mutant):
    """Grants tool calls to a cancelling Attempt: cancellation is a flag the gateway does not read."""

    def grant_tool(self, attempt_id: Any, generation: Any, token: Any, *args: Any, **kwargs: Any) -> Any:
        store = self._inner.store
        attempt = store.get_attempt(attempt_id) if isinstance(attempt_id, str) else None
        plain = isinstance(kwargs.get("dependency", "code_host"), str) and kwargs.get("cost_usd", 0.0) >= 0
        if attempt is None or attempt.state != "cancelling" or not plain or not self._holds_the_fence(attempt_id, generation, token):
            return self._inner.grant_tool(attempt_id, generation, token, *args, **kwargs)
        with store.transaction() as tx:
            tx.update_attempt(tx.attempt(attempt_id), state="running")
        try:
            return self._inner.grant_tool(attempt_id, generation, token, *args, **kwargs)
        finally:
            with store.transaction() as tx:
                tx.update_attempt(tx.attempt(attempt_id), state="cancelling")


class TerminalRewrite(Mutant):
    """A late completion rewrites the result of an Attempt that already ended (through the memory store's live record)."""

    def complete_attempt(self, attempt_id: Any, generation: Any, token: Any, result: Any, head_sha: Any = None) -> Any:
        outcome = self._inner.complete_attempt(attempt_id, generation, token, result, head_sha=head_sha)
        store = self._inner.store
        attempt = store.get_attempt(attempt_id) if isinstance(attempt_id, str) else None
        if not outcome.accepted and attempt is not None and attempt.state in TERMINAL and isinstance(result, str):
            with store.transaction() as tx:
                tx.attempt(attempt_id).result = result
        return outcome


class AdmitsBeforeValidating(Mutant):
    """admit(None) or admit of an unknown Attempt raises, but first runs an admission step (issue 12's first input defect)."""

    def admit(self, attempt_id: Any) -> Any:
        if not isinstance(attempt_id, str) or self._inner.store.get_attempt(attempt_id) is None:
            self._inner.run_admission()
        return self._inner.admit(attempt_id)


class ProbeBeforeLookup(Mutant):
    """claim_attempt of an unknown task raises NotFound, but has already recorded the health probe it was given."""

    def claim_attempt(self, task_id: Any, worker_id: Any, workspace: Any, healthy: Any = None) -> Any:
        if isinstance(worker_id, str) and isinstance(healthy, bool):
            self._inner.record_health_probe(worker_id, healthy)
            healthy = None
        return self._inner.claim_attempt(task_id, worker_id, workspace, healthy)


class FenceBeforeArguments(Mutant):
    """record_receipt with a forged token and no key returns Refused and appends an event: the fence is checked before the arguments."""

    def record_receipt(self, attempt_id: Any, generation: Any, token: Any, key: Any, provider_id: Any, result: Any = "") -> Any:
        if not isinstance(key, str) and not self._holds_the_fence(attempt_id, generation, token):
            return self._inner.checkpoint(attempt_id, generation, token, "receipt")
        return self._inner.record_receipt(attempt_id, generation, token, key, provider_id, result)


class UnhashableDependency(Mutant):
    """grant_tool(..., dependency=["code_host"]) raises TypeError instead of InputError."""

    def grant_tool(self, *args: Any, dependency: Any = "code_host", **kwargs: Any) -> Any:
        if not isinstance(dependency, str):
            raise TypeError(f"unhashable type: {type(dependency).__name__!r}")
        return self._inner.grant_tool(*args, dependency=dependency, **kwargs)


MUTANTS: dict[str, type[Mutant]] = {
    "complete-after-expiry": LateCompletion,
    "renew-with-stale-generation": StaleRenewal,
    "grant-after-cancel": GrantAfterCancel,
    "terminal-attempt-rewritten": TerminalRewrite,
    "admit-runs-admission-before-validating": AdmitsBeforeValidating,
    "claim-records-probe-before-lookup": ProbeBeforeLookup,
    "receipt-checks-fence-before-arguments": FenceBeforeArguments,
    "grant-raises-type-error-for-a-list": UnhashableDependency,
}


def mutant_factory(mutant: type[Mutant]) -> Callable[..., Mutant]:
    """A factory (the kit's protocol) for the mutant over a fresh memory store."""

    def make(*, clock: Any, provider: Any, config: Any, reliability: Any) -> Mutant:
        return mutant(Orchestrator(MemoryStore(), clock, provider, config, reliability))

    make.__name__ = mutant.__name__
    return make
