"""Wake-ups: an idle worker learns of admitted work without polling the claim queue.

A PostgreSQL store's admitting transactions send `pg_notify(channel(schema),
workspace)` with their COMMIT (see `shiftchange.stores.postgres`), and the
server delivers it once the commit is visible. `idle_wait(store, seconds,
stop)` is what an idle worker calls after a claim found nothing:

- For a `PostgresStore` it waits on the store's listener: ONE dedicated
  autocommit connection per store handle that LISTENs on the channel, read
  by one daemon thread and shared by every thread of the process that waits
  on that handle. It is opened on the first idle wait, not with the store,
  and closed with the store (`close(store)`, or when the thread sees the
  store closed, or when the handle is garbage-collected). The wait ends
  when a notification for the waiter's workspace (any, if None) arrives,
  when `stop` is set (checked every STOP_POLL_S), or when `seconds` pass.
- No notification is lost between a worker's empty claim and its wait: each
  thread remembers how far it had heard when its last idle wait returned,
  and a notification heard since (while the thread was claiming) ends the
  next wait at once. A thread's first idle wait on a handle returns at once
  (it cannot know what it missed before it had a mark), and so does every
  wait in progress when the listener (re)connects, since what was sent while
  nothing listened is gone: the worker claims once more, then waits.
- A lost listener connection (a server restart, `pg_terminate_backend`, a
  network cut found by TCP keepalives or a periodic ping) never raises out
  of `idle_wait`: waits fall back to the plain timed wait, the loss is
  logged once (and its end once), and the thread reconnects with backoff.
- Every other store: the plain timed wait (`stop.wait(seconds)`).

A spurious wake-up costs one empty claim; a missed one costs at most
`seconds`, the caller's poll, which stays the safety net for work that no
admission announces (a lease that expires, a store that sends no NOTIFY).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import threading
import time
import weakref
from typing import Any

__all__ = ["CHANNEL_PREFIX", "Listener", "channel", "close", "idle_wait", "listener"]

log = logging.getLogger("shiftchange.wakeup")

CHANNEL_PREFIX = "shiftchange_work_"
STOP_POLL_S = 0.05
"""How often a waiting thread looks at its `stop` event (a threading.Event cannot wake a Condition)."""
TICK_S = 0.25
"""How long the listener thread waits on the socket before it looks whether it should close."""
PING_S = 30.0
"""A quiet listener sends `SELECT 1` this often, so a connection the network dropped is found even without keepalives."""
RECONNECT_MIN_S, RECONNECT_MAX_S = 0.5, 10.0
"""Backoff between attempts to open the listener connection again, doubling from the first to the second."""
CLOSE_JOIN_S = 2.0
"""How long `close` waits for the listener thread to end (it ends on its own after at most TICK_S, or a connect timeout)."""
WORKSPACES_MAX = 4096
"""Workspaces whose latest notification a listener remembers; past that it forgets them all and wakes every waiter once."""
IDLE_WAIT_MAX_S = 3600.0
"""The longest one idle wait lasts, whatever it is asked (no wait is unbounded)."""
APPLICATION_NAME = "shiftchange-wakeup"
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel a PostgreSQL store's admissions are announced on (at most 63 bytes, PostgreSQL's limit)."""
    name = CHANNEL_PREFIX + schema
    if len(name) <= 63:
        return name
    return CHANNEL_PREFIX + hashlib.sha256(schema.encode()).hexdigest()[:40]


def idle_wait(store: Any, seconds: float, stop: threading.Event, workspace: str | None = None) -> bool:
    """Wait until work may be waiting in `store` (in `workspace`, or any), `stop` is set, or `seconds` pass; whether `stop` was set.

    Never raises for the store's sake: whatever goes wrong with the listener, the wait is the plain timed one.
    """
    try:
        seconds = min(max(float(seconds), 0.0), IDLE_WAIT_MAX_S)
    except (TypeError, ValueError):
        seconds = 0.0
    if math.isnan(seconds):
        seconds = 0.0
    deadline = time.monotonic() + seconds
    try:
        heard = listener(store)
        if heard is not None:
            return heard.wait(seconds, stop, workspace)
    except Exception as error:  # a defect here must not stop a worker: it waits as it would without a listener
        _complain_once(error)
    return stop.wait(max(0.0, deadline - time.monotonic()))


def listener(store: Any) -> Listener | None:
    """The wake-up listener of `store`, started if it was not; None for a store that is not an open PostgresStore."""
    postgres = _postgres_module()
    if postgres is None or not isinstance(store, postgres.PostgresStore) or _is_closed(store):
        return None
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(store)
        if found is not None and found.pid == os.getpid() and not found.closed:
            return found
        if found is not None and found.pid != os.getpid():
            _INHERITED.append(found)  # a forked child must never close (and so end) its parent's session: keep it, unused
        made = Listener(store)
        _REGISTRY[store] = made
    made.start()
    return made


def close(store: Any) -> None:
    """Close `store`'s listener, if it has one (PostgresStore.close calls this); idle waits on the store then wait their time."""
    with _REGISTRY_LOCK:
        found = _REGISTRY.pop(store, None) if _hashable(store) else None
    if found is not None and found.pid == os.getpid():
        found.close()


class Listener:
    """One store handle's LISTEN connection and the thread that reads it; threads wait on it with `wait`."""

    def __init__(self, store: Any) -> None:
        from .postgres import unescape_text

        pool = store._pool
        if pool is None:
            raise RuntimeError(f"store {store!r} is closed")
        self.channel = store.wakeup_channel
        self.where = store.where
        self.pid = os.getpid()
        conninfo = getattr(store, "conninfo", None) or pool.conninfo
        options = dict(pool.kwargs or {})
        options.update(KEEPALIVES, autocommit=True, application_name=APPLICATION_NAME)
        self._connect_args = (conninfo, options)
        self._unescape = unescape_text
        self._store = weakref.ref(store)
        self._changed = threading.Condition()
        self._seq = 0
        """Notifications heard and (re)connections, counted together: a waiter's mark is a value of it."""
        self._reset = 0
        """`_seq` when every waiter was last woken (a (re)connection, or forgotten workspaces)."""
        self._by_workspace: dict[str, int] = {}
        """Each workspace's latest notification, as a value of `_seq`."""
        self._local = threading.local()
        self._closing = threading.Event()
        self._up = threading.Event()
        self.backend_pid: int | None = None
        """The server process of the current listener connection (None while there is none)."""
        self.heard = 0
        """Notifications heard, all workspaces."""
        self.losses = 0
        """Times a listening connection was lost."""
        self._thread = threading.Thread(target=self._run, name=f"shiftchange-wakeup-{store.schema}", daemon=True)
        weakref.finalize(store, self.close, wait=False)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "listening" if self.listening else "not listening"
        return f"Listener({self.where}, channel={self.channel!r}, {state})"

    def start(self) -> None:
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closing.is_set()

    @property
    def listening(self) -> bool:
        """Whether LISTEN is in force right now (a notification committed now will be heard)."""
        return self._up.is_set()

    def ready(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for LISTEN to be in force; whether it is."""
        deadline = time.monotonic() + timeout
        while not self._closing.is_set():
            if self._up.wait(min(STOP_POLL_S, max(0.0, deadline - time.monotonic()))):
                return True
            if time.monotonic() >= deadline:
                return False
        return False

    def close(self, wait: bool = True) -> None:
        """End the thread and its connection (the thread closes it within TICK_S); safe to call twice, from any thread."""
        self._closing.set()
        with self._changed:
            self._changed.notify_all()
        if wait and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(CLOSE_JOIN_S)

    # ---- the waiting side

    def wait(self, seconds: float, stop: threading.Event, workspace: str | None = None) -> bool:
        """See `idle_wait`; whether `stop` was set."""
        deadline = time.monotonic() + seconds
        seen = getattr(self._local, "seen", None)
        with self._changed:
            try:
                if seen is not None:  # a thread's first wait returns at once: it has no mark to know what it missed
                    while not (self._moved(seen, workspace) or stop.is_set() or self._closing.is_set()):
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._changed.wait(min(left, STOP_POLL_S))
            finally:
                self._local.seen = self._seq
        if self._closing.is_set() and not stop.is_set():  # closed under the waiter: the rest is the plain wait
            return stop.wait(max(0.0, deadline - time.monotonic()))
        return stop.is_set()

    def _moved(self, seen: int, workspace: str | None) -> bool:
        if self._reset > seen:
            return True
        return (self._seq if workspace is None else self._by_workspace.get(workspace, 0)) > seen

    # ---- the listening thread

    def _store_gone(self) -> bool:
        store = self._store()
        return store is None or _is_closed(store)

    def _run(self) -> None:
        delay, lost_since = RECONNECT_MIN_S, None
        try:
            while not (self._closing.is_set() or self._store_gone()):
                try:
                    connection = self._open()
                except Exception as error:
                    if lost_since is None:
                        lost_since = time.monotonic()
                        log.warning(
                            "wake-up listener on %s cannot listen (%s: %s); idle workers wait out their poll until it can",
                            self.where,
                            type(error).__name__,
                            _first_line(error),
                        )
                    self._closing.wait(delay)
                    delay = min(2 * delay, RECONNECT_MAX_S)
                    continue
                if lost_since is not None:
                    log.warning("wake-up listener on %s listens again after %.1f s", self.where, time.monotonic() - lost_since)
                delay, lost_since = RECONNECT_MIN_S, None
                try:
                    self._listen(connection)
                except Exception as error:
                    if not self._closing.is_set():
                        self.losses += 1
                        lost_since = time.monotonic()
                        log.warning(
                            "wake-up listener on %s lost its connection (%s: %s); idle workers wait out their poll until it is back",
                            self.where,
                            type(error).__name__,
                            _first_line(error),
                        )
                finally:
                    self._up.clear()
                    self.backend_pid = None
                    with contextlib.suppress(Exception):
                        connection.close()
        finally:
            self._closing.set()
            with self._changed:
                self._changed.notify_all()

    def _open(self) -> Any:
        import psycopg
        from psycopg import sql

        conninfo, options = self._connect_args
        connection = psycopg.connect(conninfo, **options)
        try:
            if connection.info.server_version >= 140000:  # a server that ends idle sessions must not end this one, idle by design
                connection.execute("SET idle_session_timeout = 0")
            connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except BaseException:
            connection.close()
            raise
        self.backend_pid = connection.info.backend_pid
        with self._changed:
            # What was committed while nothing listened was never heard: every waiter claims once more.
            self._seq += 1
            self._reset = self._seq
            self._changed.notify_all()
        self._up.set()
        return connection

    def _listen(self, connection: Any) -> None:
        quiet_since = time.monotonic()
        while not (self._closing.is_set() or self._store_gone()):
            for note in connection.notifies(timeout=TICK_S):
                quiet_since = time.monotonic()
                if note.channel == self.channel:
                    self._heard(note.payload)
                if self._closing.is_set():
                    return
            if time.monotonic() - quiet_since >= PING_S:
                connection.execute("SELECT 1")  # a notification that arrives meanwhile waits in psycopg's backlog
                quiet_since = time.monotonic()

    def _heard(self, payload: str) -> None:
        workspace = self._unescape(payload)
        with self._changed:
            self._seq += 1
            self.heard += 1
            if workspace not in self._by_workspace and len(self._by_workspace) >= WORKSPACES_MAX:
                self._by_workspace.clear()
                self._reset = self._seq
            self._by_workspace[workspace] = self._seq
            self._changed.notify_all()


# ---- the registry: one listener per store handle and process

_REGISTRY: weakref.WeakKeyDictionary[Any, Listener] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()
_INHERITED: list[Listener] = []
_complained = False


def _postgres_module() -> Any:
    try:
        from . import postgres
    except ImportError:  # pragma: no cover - the module imports without psycopg; anything else is a broken install
        return None
    return postgres


def _is_closed(store: Any) -> bool:
    return getattr(store, "_pool", None) is None


def _hashable(store: Any) -> bool:
    try:
        hash(store)
    except TypeError:
        return False
    return True


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _complain_once(error: BaseException) -> None:
    global _complained
    if not _complained:
        _complained = True
        log.warning("idle wait without wake-ups (%s: %s); waiting out the poll instead", type(error).__name__, _first_line(error))
