"""Typed errors of the core: bad input, unknown records, store conflicts.

Expected refusals (a stale fence, a second claimer, a retry the policy forbids)
are not exceptions: they come back as `Refused` results and are kept in the
history as refused events. Exceptions are for input that should never have
been sent (`InputError`, `NotFound`) and for a write that lost a race inside
the store (`StoreConflict`); each leaves the store unchanged.
"""

from __future__ import annotations


class CoreError(Exception):
    """Base of every error the core raises on purpose."""


class InputError(CoreError, ValueError):
    """An argument has the wrong type or an absurd value; nothing was changed."""


class NotFound(CoreError, KeyError):
    """An id names no record; nothing was changed."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else "not found"


class StoreConflict(CoreError):
    """A guarded write found the record changed since it was read; the transaction was rolled back."""


class StoreRetryable(StoreConflict):
    """A transaction lost a race that the same contract may win if run again from its start.

    A server database running transactions side by side raises this for a
    deadlock, a serialization failure, or a guarded write whose row another
    transaction changed after an unlocked read. The transaction was rolled
    back; the contracts run again a bounded number of times
    (`CoreConfig.store_retries_max`) and then raise `StoreContention`.
    """


class StoreError(CoreError):
    """The store cannot be opened or used (bad path, wrong schema, corrupt file)."""


class StoreUnavailable(StoreError):
    """The store could not be reached, or the connection was lost mid-transaction.

    A transaction lost before its commit was sent was rolled back; one lost
    while committing may or may not have committed. Callers treat it as an
    unanswered call: the protocol's fences make asking again safe.
    """


class StoreContention(StoreError):
    """A contract lost its race `retries` times in a row (`CoreConfig.store_retries_max`); nothing of it was recorded."""

    def __init__(self, message: str, retries: int) -> None:
        super().__init__(message)
        self.retries = retries
