"""stores.wakeup: idle waits that an admission's NOTIFY ends early, and that fall back to the plain timed wait.

Bounds here are correctness bounds, not speed figures: a wait that should
end early must end well before half its (generous) timeout; a wait that
should run its time must not end early. `benchmarks/wakeup.py` measures how
fast a wake-up is. Every PostgreSQL test takes `make_postgres_store` (skips
in one line without a server, fails under SHIFTCHANGE_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from shiftchange.core import MemoryStore, Plan
from shiftchange.stores import SQLiteStore, wakeup

LONG_S = 5.0
"""The timeout of a wait that something should end early: it must return before half of it."""
SETTLE_S = 5.0
"""The longest a test waits for the listener to reach a state (listening, closed, a notification heard)."""


def eventually(condition, timeout: float = SETTLE_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def timed_wait(store, seconds, stop=None, workspace=None) -> tuple[bool, float]:
    stop = threading.Event() if stop is None else stop
    started = time.monotonic()
    stopped = wakeup.idle_wait(store, seconds, stop, workspace)
    return stopped, time.monotonic() - started


def notify(url: str, store, workspace: str, after_s: float = 0.0) -> threading.Thread:
    """Send the NOTIFY an admission sends, from another connection, after `after_s` seconds, on a thread of its own."""
    import psycopg

    def send() -> None:
        time.sleep(after_s)
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("SELECT pg_notify(%s, %s)", (store.wakeup_channel, workspace))

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def listening_store(make_postgres_store):
    """A store whose listener is up, and whose calling thread has had its first (immediate) wait: its next waits are real."""
    store = make_postgres_store(pool_max=2)
    stopped, took = timed_wait(store, LONG_S)
    assert not stopped and took < LONG_S / 2  # a thread's first wait returns at once: it cannot know what it missed before
    listener = wakeup.listener(store)
    assert listener is not None and listener.ready(SETTLE_S)
    timed_wait(store, 0.0)  # take this thread's mark after the connection's own wake-up
    return store, listener


def backends(url: str, pid: int | None) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        query = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND application_name = %s"
        ((count,),) = connection.execute(query, (pid, wakeup.APPLICATION_NAME)).fetchall()
    return count


# ---- without PostgreSQL


def test_channels_fit_postgresql_and_differ_per_schema():
    """Goal: a channel is at most 63 bytes (PostgreSQL would truncate, and two long schemas could share one) and one per schema."""
    long_a, long_b = "a" * 60 + "x", "a" * 60 + "y"
    assert wakeup.channel("shiftchange") == "shiftchange_work_shiftchange"
    assert all(len(wakeup.channel(name).encode()) <= 63 for name in (long_a, long_b))
    assert wakeup.channel(long_a) != wakeup.channel(long_b)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_other_stores_wait_their_time_and_stop_ends_it(kind, tmp_path):
    """Goal: a store without wake-ups gets the plain timed wait: it runs its time, and a stop set meanwhile ends it."""
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.sqlite")
    try:
        assert wakeup.listener(store) is None
        stopped, took = timed_wait(store, 0.3)
        assert not stopped and took >= 0.29
        stop = threading.Event()
        threading.Timer(0.2, stop.set).start()
        stopped, took = timed_wait(store, LONG_S, stop)
        assert stopped and took < LONG_S / 2
    finally:
        store.close()


@pytest.mark.parametrize("seconds", [float("nan"), -1.0, "soon", None])
def test_a_wait_of_no_sensible_length_returns_at_once_and_never_raises(seconds):
    """Goal: idle_wait is called in a worker's loop: a bad length waits nothing instead of raising (or waiting forever)."""
    stopped, took = timed_wait(MemoryStore(), seconds)
    assert not stopped and took < 1.0


# ---- PostgreSQL


def test_a_notify_wakes_an_idle_wait_early(make_postgres_store):
    """Goal: with the listener up, a NOTIFY of the waiter's workspace from another connection ends its wait long before its time."""
    store, listener = listening_store(make_postgres_store)
    notify(make_postgres_store.url, store, "repo", after_s=0.2)
    stopped, took = timed_wait(store, LONG_S, workspace="repo")
    assert not stopped and 0.15 < took < LONG_S / 2
    assert listener.heard == 1


def test_an_admission_by_another_handle_wakes_an_idle_wait(make_postgres_store):
    """Goal: the store's own announcement works end to end: run_admission on another handle ends a worker's wait early."""
    from shiftchange.core import AdmissionConfig, CoreConfig, LedgerProvider, Orchestrator, ReliabilityConfig

    store, _ = listening_store(make_postgres_store)
    admitting = make_postgres_store(schema=store.schema, pool_max=2)
    clock = admitting.clock()
    limits = AdmissionConfig(queue_depth_max=100, queue_age_max_s=1e9, partition_concurrency_max=100)
    core = Orchestrator(admitting, clock, LedgerProvider(clock=clock), CoreConfig(), ReliabilityConfig(admission=limits))
    core.create_task("t1", "wake a worker", "repo")
    core.accept_task("t1")
    core.dispatch("t1", Plan("p"))
    threading.Timer(0.2, core.run_admission).start()
    stopped, took = timed_wait(store, LONG_S, workspace="repo")
    assert not stopped and took < LONG_S / 2
    assert Orchestrator(store, store.clock(), LedgerProvider(clock=clock)).claim_next("w1", "repo").lease is not None


def test_a_notification_heard_between_waits_ends_the_next_wait_at_once(make_postgres_store):
    """Goal: work admitted after a worker's empty claim but before its wait begins is not missed: the wait returns at once."""
    store, listener = listening_store(make_postgres_store)
    notify(make_postgres_store.url, store, "repo").join(SETTLE_S)
    assert eventually(lambda: listener.heard == 1)  # heard while no thread waited (the worker was claiming)
    stopped, took = timed_wait(store, LONG_S, workspace="repo")
    assert not stopped and took < LONG_S / 2
    stopped, took = timed_wait(store, 0.3, workspace="repo")  # heard once, woken once: the next wait runs its time
    assert not stopped and took >= 0.29


def test_a_wait_for_one_workspace_sleeps_through_another_workspaces_notifications(make_postgres_store):
    """Goal: a worker that claims only in `repo` is not woken for `other`; a worker of any workspace is."""
    store, listener = listening_store(make_postgres_store)
    notify(make_postgres_store.url, store, "other", after_s=0.1)
    stopped, took = timed_wait(store, 0.8, workspace="repo")
    assert not stopped and took >= 0.79
    assert listener.heard == 1
    notify(make_postgres_store.url, store, "other", after_s=0.1)
    stopped, took = timed_wait(store, LONG_S, workspace=None)
    assert not stopped and took < LONG_S / 2


def test_stop_ends_an_idle_wait_on_a_listening_store(make_postgres_store):
    """Goal: a worker told to stop while idle stops within the stop-poll granularity, not at its wait's end."""
    store, _ = listening_store(make_postgres_store)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    stopped, took = timed_wait(store, LONG_S, stop, "repo")
    assert stopped and took < LONG_S / 2
    stopped, took = timed_wait(store, LONG_S, stop, "repo")  # already set: at once
    assert stopped and took < LONG_S / 2


def test_threads_share_one_listener_connection_and_one_notify_wakes_them_all(make_postgres_store):
    """Goal: one LISTEN connection per store handle, whatever the number of idle threads; a notification wakes every one."""
    store, listener = listening_store(make_postgres_store)
    results: list[tuple[bool, float]] = []
    primed = threading.Barrier(4)

    def idle() -> None:
        timed_wait(store, 0.0)  # each thread's first wait returns at once and gives it its mark
        primed.wait(SETTLE_S)
        results.append(timed_wait(store, LONG_S, workspace="repo"))

    threads = [threading.Thread(target=idle) for _ in range(3)]
    for thread in threads:
        thread.start()
    primed.wait(SETTLE_S)
    notify(make_postgres_store.url, store, "repo", after_s=0.2)
    for thread in threads:
        thread.join(LONG_S + SETTLE_S)
    assert len(results) == 3 and all(not stopped and took < LONG_S / 2 for stopped, took in results)
    assert wakeup.listener(store) is listener and backends(make_postgres_store.url, listener.backend_pid) == 1


@pytest.mark.heavy
def test_a_killed_listener_falls_back_to_timed_waits_says_so_once_and_recovers(make_postgres_store, caplog):
    """Goal: a terminated listener session never raises out of idle_wait; while it cannot reconnect, waits run their time and
    NOTIFYs are not heard; the loss is logged once; once it reconnects, waiters are woken and NOTIFYs wake them again."""
    caplog.set_level(logging.WARNING, logger="shiftchange.wakeup")
    store, listener = listening_store(make_postgres_store)
    good = listener._connect_args
    listener._connect_args = ("postgresql://postgres@127.0.0.1:1/none", {**good[1], "connect_timeout": 2})  # reconnects now fail
    import psycopg

    with psycopg.connect(make_postgres_store.url, autocommit=True) as connection:
        connection.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
    assert eventually(lambda: not listener.listening and listener.losses == 1)
    notify(make_postgres_store.url, store, "repo", after_s=0.1)
    stopped, took = timed_wait(store, 0.8, workspace="repo")  # nobody listens: the plain timed wait, no error
    assert not stopped and took >= 0.79
    lost = [record for record in caplog.records if "lost its connection" in record.getMessage()]
    assert len(lost) == 1 and lost[0].levelno == logging.WARNING
    cannot = [record for record in caplog.records if "cannot listen" in record.getMessage()]
    assert len(cannot) <= 1  # failed reconnects are not logged one by one
    listener._connect_args = good
    stopped, took = timed_wait(store, 2 * wakeup.RECONNECT_MAX_S, workspace="repo")  # the reconnection wakes the waiter
    assert not stopped and took < wakeup.RECONNECT_MAX_S + SETTLE_S and listener.listening
    notify(make_postgres_store.url, store, "repo", after_s=0.2)
    stopped, took = timed_wait(store, LONG_S, workspace="repo")
    assert not stopped and took < LONG_S / 2


def test_closing_the_store_ends_its_listener_and_later_waits_are_plain(make_postgres_store):
    """Goal: the listener's connection lives no longer than its store (even before PostgresStore.close calls wakeup.close)."""
    store, listener = listening_store(make_postgres_store)
    pid = listener.backend_pid
    assert backends(make_postgres_store.url, pid) == 1
    store.close()
    assert eventually(lambda: listener.closed and backends(make_postgres_store.url, pid) == 0)
    assert wakeup.listener(store) is None
    stopped, took = timed_wait(store, 0.3)
    assert not stopped and took >= 0.29


def test_wakeup_close_ends_the_listener_at_once_and_a_later_wait_opens_another(make_postgres_store):
    """Goal: `wakeup.close(store)` (the hook for PostgresStore.close) ends the connection within its bound; the handle may listen anew."""
    store, listener = listening_store(make_postgres_store)
    pid = listener.backend_pid
    wakeup.close(store)
    assert listener.closed and not listener._thread.is_alive()
    assert eventually(lambda: backends(make_postgres_store.url, pid) == 0)
    again = wakeup.listener(store)
    assert again is not None and again is not listener and again.ready(SETTLE_S)


def test_the_listener_outlives_a_servers_idle_session_timeout(make_postgres_store):
    """Goal: a listener is idle by design: a server (or role) that ends idle sessions after 300 ms must not end it."""
    url = make_postgres_store.url
    store = make_postgres_store(conninfo=url + ("&" if "?" in url else "?") + "options=-c%20idle_session_timeout%3D300", pool_max=1)
    timed_wait(store, 0.0)
    listener = wakeup.listener(store)
    assert listener is not None and listener.ready(SETTLE_S)
    time.sleep(1.0)
    assert listener.losses == 0 and listener.listening and backends(url, listener.backend_pid) == 1
