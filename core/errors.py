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


class StoreError(CoreError):
    """The store cannot be opened or used (bad path, wrong schema, corrupt file)."""
