"""The server's clock: leases of a PostgreSQL store are judged on it, never on the local wall clock."""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import PostgresStore

# ---- the server's clock


class ServerClock:
    """The PostgreSQL server's clock as the core's Clock: the one time every process sharing the server judges leases by.

    Inside this thread's open transaction on the store, `now()` is the
    server's `clock_timestamp()` read in that transaction after its latest
    locking read (it rides in the same round trip as the read, so a contract
    that waited for a row lock is judged at the time it got it), or read on
    first ask when the transaction has locked nothing. Outside a transaction
    it is the server's time as last heard by this store handle plus the
    local `time.monotonic()` since, never the local wall clock: a process
    whose wall clock is minutes off reads the server's time all the same.
    It never goes backwards for one handle (a reading a few milliseconds
    behind an earlier estimate is held at the estimate).
    """

    __slots__ = ("_last", "_lock", "_offset", "_store")

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._offset: float | None = None
        self._last = -math.inf
        self._lock = threading.Lock()
        """Threads of a process share a handle's clock (a worker's heartbeat paces itself on it): `_last` moves under it."""

    def now(self) -> float:
        tx = getattr(self._store._local, "tx", None)
        if tx is not None and tx._cursor is not None:
            reading = tx.now()
        else:
            if self._offset is None:
                with self._store.transaction() as fresh:
                    fresh.now()
            reading = time.monotonic() + self._offset  # type: ignore[operator]
        with self._lock:
            if reading < self._last:
                return self._last
            self._last = reading
        return reading

    def heard(self, server_s: float, monotonic_s: float) -> None:
        """A transaction read the server's time `server_s` at local monotonic time `monotonic_s`."""
        self._offset = server_s - monotonic_s

    def __repr__(self) -> str:
        return f"ServerClock({self._store.where})"
