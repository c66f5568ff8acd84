"""The fence: which Attempt a fenced call addresses, whether it proves the current lease, and whether that lease is honoured.

A fenced call presents (attempt id, generation, token). It is accepted only
if the generation is the Attempt's current one and the token's digest
matches in constant time; otherwise it is kept as a refused event and changes
nothing. Only a stale generation is late (a lease that once was real); an
Attempt that never had a lease, or a token that does not match, never proved
anything. Whether a lease is still honoured is asked separately, of its
expiry, by the table's `lease_current` guard.

`LeaseFence` is the rule. It is a seam (`Seams.fence`) so that a port can
keep its tokens elsewhere, and so that the simulator can switch fencing off
(the no-fencing anti-pattern) without reaching into the contracts.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from typing import Protocol

from .records import Attempt
from .store import Transaction

TOKENS_REMEMBERED_MAX = 4096
"""How many lease tokens' digests a process remembers: about one per lease it serves at once, with room to spare."""


@functools.lru_cache(maxsize=TOKENS_REMEMBERED_MAX)
def token_digest(token: str) -> str:
    """What an Attempt keeps of its lease token: the SHA-256, so a leaked database cannot forge a fence.

    Every fenced call hashes the token it presents, and a lease holder
    presents the same token on each renewal, grant, receipt and checkpoint:
    the digests of the most recent tokens are remembered (a bounded cache in
    this process's memory, which holds the tokens it is sent anyway; the store
    still keeps digests only).
    """
    return hashlib.sha256(token.encode()).hexdigest()


class Fence(Protocol):
    """What a fenced contract asks before it fires its row."""

    def address(self, tx: Transaction, attempt_id: str) -> Attempt | None:
        """The Attempt the call may touch (the one it names), or None when there is none."""
        ...

    def check(self, attempt: Attempt, generation: int, token: str) -> tuple[str, str] | None:
        """None when the call proves the Attempt's current lease; else (refusal code, reason)."""
        ...

    def honoured(self, attempt: Attempt, now: float) -> bool:
        """Whether the Attempt's lease still gives authority at `now` (the `lease_current` guard)."""
        ...


class LeaseFence:
    """The reference fence: the named Attempt, its current generation, its token's digest, its expiry."""

    __slots__ = ()

    def address(self, tx: Transaction, attempt_id: str) -> Attempt | None:
        return tx.attempt(attempt_id)

    def check(self, attempt: Attempt, generation: int, token: str) -> tuple[str, str] | None:
        current = attempt.generation
        if attempt.token_digest is None:
            return "unfenced", "unfenced: no lease was issued for this attempt"
        if generation != current:
            return "stale_fence", f"late: stale fence, generation {generation} presented, current is {current}"
        if not hmac.compare_digest(token_digest(token), attempt.token_digest):
            return "forged", "forged: the token does not match the lease"
        return None

    def honoured(self, attempt: Attempt, now: float) -> bool:
        expires_at = attempt.expires_at
        return expires_at is not None and now < expires_at


LEASE_FENCE = LeaseFence()
