"""The provider adapter boundary, and an in-memory provider with a ledger of every effect.

A key in the factory's database cannot by itself deduplicate a provider call:
if the factory timed out after the provider accepted the request, the
database holds no receipt. So the adapter offers two things besides
`perform`: `find`, which looks an effect up by operation key where the
provider keeps keys and by provider identity (a PR by its head SHA) where it
does not, and `verdict`, the provider's independent judgement of an effect
(the CI result of a PR), which verification reads instead of the worker's
claim.

`LedgerProvider` is a real, deterministic implementation for tests and the
simulator: it keeps every effect that landed, can run with or without
idempotency support, and can accept a request while losing its response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ProviderTimeout(Exception):
    """The call's outcome is unknown: it may or may not have landed."""


class ProviderRefused(Exception):
    """The provider refused the call; `domain` names its failure domain (authorization, capacity, provider, ...)."""

    def __init__(self, domain: str, detail: str) -> None:
        super().__init__(f"{domain}: {detail}")
        self.domain = domain
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Effect:
    """One effect that landed at the provider."""

    provider_id: str
    key: str
    operation: str
    identity: str
    request: str
    at_s: float


class ProviderAdapter(Protocol):
    supports_idempotency: bool

    def perform(self, key: str, operation: str, identity: str, request: str) -> Effect:
        """Do the operation; returns the effect, or raises ProviderTimeout / ProviderRefused."""
        ...

    def find(self, key: str, operation: str, identity: str) -> list[Effect]:
        """Every effect matching the key (idempotent providers) or the provider identity (others)."""
        ...

    def verdict(self, provider_id: str) -> str | None:
        """ "passed", "failed:<signature>", or None while pending."""
        ...


class LedgerProvider:
    """An in-memory provider whose ledger is the truth reconciliation and checkers read."""

    def __init__(self, supports_idempotency: bool = True, clock=None) -> None:
        self.supports_idempotency = supports_idempotency
        self.ledger: list[Effect] = []
        self._by_key: dict[str, list[Effect]] = {}
        self._by_identity: dict[tuple[str, str], list[Effect]] = {}
        self._verdicts: dict[str, str | None] = {}
        self._responses_to_lose = 0
        self._refusals: list[ProviderRefused] = []
        self._clock = clock
        self.default_verdict: str | None = "passed"
        self.deleted: set[str] = set()
        """Effects deleted at the provider by someone outside (`delete`): still in the ledger, found by no lookup."""

    def lose_responses(self, count: int = 1) -> None:
        """The next `count` calls land but their responses are lost (the caller sees ProviderTimeout)."""
        self._responses_to_lose += count

    def refuse_next(self, domain: str, detail: str = "refused") -> None:
        """The next call is refused with this failure domain and does not land."""
        self._refusals.append(ProviderRefused(domain, detail))

    def set_verdict(self, provider_id: str, verdict: str | None) -> None:
        self._verdicts[provider_id] = verdict

    def perform(self, key: str, operation: str, identity: str, request: str) -> Effect:
        if self._refusals:
            raise self._refusals.pop(0)
        existing = self._by_key.get(key) if self.supports_idempotency else None
        effect = existing[0] if existing else self._land(key, operation, identity, request)
        if self._responses_to_lose:
            self._responses_to_lose -= 1
            raise ProviderTimeout(f"response to {key} lost")
        return effect

    def find(self, key: str, operation: str, identity: str) -> list[Effect]:
        if self.supports_idempotency:
            return list(self._by_key.get(key, ()))
        return list(self._by_identity.get((operation, identity), ()))

    def verdict(self, provider_id: str) -> str | None:
        return self._verdicts.get(provider_id, self.default_verdict)

    def delete(self, provider_id: str) -> None:
        """Someone outside deletes a landed effect (a pull request closed and deleted): the ledger keeps it as history, but
        no lookup finds it any more, so a receipt that names it names what the provider no longer holds."""
        effect = next(e for e in self.ledger if e.provider_id == provider_id)
        self.deleted.add(provider_id)
        self._by_key[effect.key].remove(effect)
        self._by_identity[(effect.operation, effect.identity)].remove(effect)

    def effects_for(self, operation: str, identity: str) -> list[Effect]:
        """Every landed effect of one logical operation, whatever key it came with (for checkers)."""
        return list(self._by_identity.get((operation, identity), ()))

    def _land(self, key: str, operation: str, identity: str, request: str) -> Effect:
        at_s = self._clock.now() if self._clock is not None else float(len(self.ledger))
        effect = Effect(f"{operation}-{len(self.ledger) + 1}", key, operation, identity, request, at_s)
        self.ledger.append(effect)
        self._by_key.setdefault(key, []).append(effect)
        self._by_identity.setdefault((operation, identity), []).append(effect)
        return effect
