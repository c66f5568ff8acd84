"""The admission leader: among several orchestrator processes, exactly one runs admission, by a lease of its own in the store.

Why a lease, not a lock held by a connection: a process frozen by SIGSTOP
keeps its connection, and a session lock would let it keep admission for
ever. A lease expires; a frozen leader is replaced once its lease runs out,
and when it wakes its generation is stale.

Why fenced inside the transaction: checking "am I the leader?" and then
admitting in a second transaction leaves a window in which the lease can
pass to another process. So the admission step's own transaction reads the
lease row (locked on a server store, so a takeover waits for the step to
commit) and refuses to run unless this process's holder and generation
still hold it and it has not expired: the same fence a worker's lease is.

The row lives in the store (`Transaction.leader` / `put_leader`), beside the
records it guards, so one database is the whole truth; and the lease is
judged by the store's clock when it has one (`clock.lease_clock`: the
PostgreSQL server's, read inside the transaction after the row is locked),
so leaders on machines whose clocks disagree still take turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import CoreError
from .store import Store

__all__ = ["FencedStore", "Leadership", "NotLeader"]


class NotLeader(CoreError):
    """This process does not hold the leader lease (now, inside this transaction); nothing was done."""


class Leadership:
    """One process's claim on the named leader lease: acquire or renew it, and check it inside a transaction."""

    def __init__(self, store: Store, name: str, holder: str, ttl_s: float, clock: Any) -> None:
        self.store = store
        self.name = name
        self.holder = holder
        self.ttl_s = ttl_s
        self.clock = clock
        self.generation: int | None = None

    def hold(self) -> bool:
        """Renew the lease if this process holds it, take it if it is free or expired; True when this process leads now."""
        with self.store.transaction() as tx:
            current = tx.leader(self.name)
            now = self.clock.now()  # after the row is read (locked, on a server store): judged when the lock is held
            if current is not None and current.holder == self.holder and current.generation == self.generation and current.expires_at > now:
                tx.put_leader(self.name, self.holder, current.generation, now + self.ttl_s)
                return True
            if current is None or current.expires_at <= now:
                generation = 1 if current is None else current.generation + 1
                tx.put_leader(self.name, self.holder, generation, now + self.ttl_s)
                self.generation = generation
                return True
            self.generation = None
            return False

    def check(self, tx: Any) -> None:
        """Inside `tx`: raise NotLeader unless this process's generation still holds an unexpired lease."""
        current = tx.leader(self.name)
        if (
            self.generation is None
            or current is None
            or current.holder != self.holder
            or current.generation != self.generation
            or current.expires_at <= self.clock.now()
        ):
            raise NotLeader(f"{self.holder} does not hold the {self.name} lease (generation {self.generation})")


class FencedStore(Store):
    """A store whose every transaction first proves the leader lease: an orchestrator over it acts only while it leads."""

    def __init__(self, store: Store, leadership: Leadership) -> None:
        self._store = store
        self._leadership = leadership
        # What the wrapped store declares is this store's too: the core enforces its limits, the kit reads the rest.
        self.races = store.races
        self.numbers_on_append = store.numbers_on_append
        self.limits = getattr(store, "limits", self.limits)
        self.lock_timeout_s = getattr(store, "lock_timeout_s", None)
        self.clock_epoch_offset_s = getattr(store, "clock_epoch_offset_s", 0.0)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._store.transaction() as tx:
            self._leadership.check(tx)
            yield tx

    def events(self, task_id: str | None = None, after_seq: int = 0) -> list:
        return self._store.events(task_id, after_seq)

    def clock(self) -> Any | None:
        """The wrapped store's clock: a fenced transaction is the wrapped store's own."""
        return self._store.clock()

    def durability(self) -> Any:
        return self._store.durability()
