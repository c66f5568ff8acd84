"""`check_store(make_store, reopen=...)`: the transactional contract of a `Store`, one suite for every implementation.

What the suite holds a store to is what `shiftchange.core.store` promises
and every contract of the core relies on: a transaction commits whole on
success and leaves nothing on any exception (records, indexes and history
alike); writes are guarded by the version they read and refused for a
terminal Attempt; a transaction reads its own writes; transactions do not
nest; the history is numbered 1..N in commit order with no gap left by a
rolled-back transaction; reads outside transactions are copies; and every
record comes back exactly as it was written, after an insert and after an
update, field by field, type by type, awkward text included. Every method
of the protocol is called: the claim queue (`claimable`, and the reference
core's `claim_next` over it), the control plane's `tasks_in`, the leader
leases (`leader`, `put_leader`, and the runtime's `Leadership` over them),
each promised order (code-point order of ids, as Python's `sorted` gives),
and ids that differ by a prefix, by case or by Unicode normalisation, which
must never alias.

`make_store()` must return a fresh, empty store on every call; the suite
closes each store it made. The first check proves that, and when it fails the
report holds that check alone (every other check would fail for the same
reason). Error messages are not part of the contract, only the error types
(`StoreConflict`, `NotFound`, `InputError`). A store whose Transaction leaves
out the optional `tasks_in` or the leader leases (a port the runtime does not
run on) has those checks skipped, not failed.

Two handles: a store that several processes share is given a second
callable, `reopen(store)`, which opens another handle on the very data
`store` holds (another connection, as another process would). Then the
suite also checks isolation between the two (a transaction's writes are
invisible to the other handle until it commits, a rolled-back one never
visible), that a writer on one handle waits for the other's write
transaction instead of failing, and that two claimers, one per handle, side
by side, never take the same Attempt. The second handle is opened, used and
closed on a thread of its own (an SQLite connection belongs to the thread
that opened it). Without `reopen` those checks are skipped. Each wait for
the other handle is bounded (`SETTLE_S` to see that it has not failed yet,
`DONE_WAIT_S` for it to finish), so a broken store fails, never hangs.

The suite's modules, in its order (each check joins its list as its module is
imported): `records` (the factory, round trips, guarded writes),
`transactions` (atomicity, isolation), `history` (the history, the claim
queue, the control plane's reads), `fields` (fields written by update, ids),
`shared` (two handles); `builders` holds the records and helpers the checks
and a port's own tests use, `registry` the lists and what every check shares.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..checks import Check, CheckResult, Report, run_checks
from . import atomicity, clock, durability, fields, history, records, scale, shared, transactions, values
from .builders import event_fields, fresh, make_attempt, make_intent, make_task, minimal_attempt, minimal_task, seed
from .registry import AWKWARD_TEXT, UNENCODABLE_TEXT, Reopen, SharedStore, StoreFactory

_CHECKS: list[Check] = [
    *records.CHECKS,
    *transactions.CHECKS,
    *history.CHECKS,
    *fields.CHECKS,
    *values.CHECKS,
    *scale.CHECKS,
    *atomicity.CHECKS,
    *clock.CHECKS,
    *durability.CHECKS,
]
"""Every check through one handle, in the suite's order: the factory's first (it runs alone when it fails)."""
_SHARED_CHECKS: list[Check] = list(shared.CHECKS)
"""The checks through two handles, in order: whether the second handle shares the store first."""

__all__ = [
    "AWKWARD_TEXT",
    "UNENCODABLE_TEXT",
    "SharedStore",
    "check_store",
    "event_fields",
    "fresh",
    "make_attempt",
    "make_intent",
    "make_task",
    "minimal_attempt",
    "minimal_task",
    "seed",
    "shared_store_checks",
    "store_checks",
]


def store_checks() -> tuple[Check, ...]:
    """Every check of the store contract through one handle, in the suite's order (each is a function of `make_store`)."""
    return tuple(_CHECKS)


def shared_store_checks() -> tuple[Check, ...]:
    """The checks through two handles on one store, in the suite's order (each is a function of a `SharedStore`)."""
    return tuple(_SHARED_CHECKS)


def check_store(make_store: StoreFactory, *, reopen: Reopen | None = None) -> Report:
    """Run the whole store contract against stores from `make_store` (a fresh, empty store per call).

    `reopen(store)`, for a store several processes share, opens a second
    handle on the data `store` holds; with it the isolation checks run too,
    without it they are skipped. A factory that does not make fresh stores is
    reported by its one check alone, and a `reopen` whose handle does not share
    the store by its one check, the other two-handle checks skipped.
    """
    first = run_checks("store", _CHECKS[:1], make_store)
    if not first.ok:
        return first
    results = first.results + run_checks("store", _CHECKS[1:], make_store).results
    if reopen is None:
        why = "needs a second handle on the store: check_store(make_store, reopen=...) for a store several processes share"
        return Report("store", results + _skipped(_SHARED_CHECKS, why))
    shared = SharedStore(make_store, reopen)
    opening = run_checks("store", _SHARED_CHECKS[:1], shared)
    if not opening.ok:
        why = f"the second handle does not share the store ({_SHARED_CHECKS[0].name} failed)"
        return Report("store", results + opening.results + _skipped(_SHARED_CHECKS[1:], why))
    return Report("store", results + opening.results + run_checks("store", _SHARED_CHECKS[1:], shared).results)


def _skipped(checks: Iterable[Check], why: str) -> tuple[CheckResult, ...]:
    return tuple(CheckResult(check.name, check.goal, True, why, skipped=True) for check in checks)
