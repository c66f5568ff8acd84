"""The runtime's clocks: a process's skew (SHIFTCHANGE_CLOCK_SKEW_S), and whose clock judges leases (the server's on PostgreSQL).

The PostgreSQL tests take `make_postgres_store` (they skip in one line
without a server, and fail under SHIFTCHANGE_REQUIRE_POSTGRES=1). They run
the worker and the orchestrator process in this process, built as their
commands build them (`Worker.connect`, `ControlProcess`), with the skew in
the environment: a process skewed by minutes must stamp, renew, reap and be
fenced on the server's time, as if its clock were right.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from shiftchange.core import InputError, LedgerProvider, MemoryStore, Orchestrator
from shiftchange.core.machine import LEASED
from shiftchange.runtime import chaos
from shiftchange.runtime.clock import SKEW_MAX_S, SKEW_VARIABLE, Waits, WallClock, lease_clock, process_skew_s, waiting
from shiftchange.runtime.config import RuntimeConfig
from shiftchange.runtime.control import ControlProcess
from shiftchange.runtime.worker import Worker
from shiftchange.runtime.workload import submit
from shiftchange.stores.sqlite import SQLiteStore
from tests.runtime.conftest import schema_url

SKEW_S = 300.0
CONFIG = RuntimeConfig(core=dataclasses.replace(RuntimeConfig().core, lease_ttl_s=1.0, heartbeat_interval_s=0.25))
"""A one-second lease, so a test sees one run out in about a second."""


# ---------------------------------------------------------------- the skew


@pytest.mark.parametrize(("text", "skew_s"), [(None, 0.0), ("", 0.0), ("  ", 0.0), ("300", 300.0), ("+300", 300.0), ("-300.5", -300.5)])
def test_the_skew_is_read_from_the_environment_in_seconds(text, skew_s):
    assert process_skew_s({} if text is None else {SKEW_VARIABLE: text}) == skew_s


@pytest.mark.parametrize("text", ["abc", "5m", "nan", "inf", "-inf", f"{SKEW_MAX_S * 2:g}"])
def test_a_skew_that_is_not_seconds_is_an_input_error_naming_the_variable(text):
    with pytest.raises(InputError, match=SKEW_VARIABLE) as raised:
        process_skew_s({SKEW_VARIABLE: text})
    assert repr(text) in str(raised.value)


def test_the_wall_clock_is_shifted_by_the_process_skew(monkeypatch):
    monkeypatch.setenv(SKEW_VARIABLE, "-300")
    skewed, right = WallClock(), WallClock(0.0)
    assert skewed.skew_s == -300.0 and right.skew_s == 0.0
    assert skewed.now() - right.now() == pytest.approx(-300.0, abs=0.05)
    with pytest.raises(InputError, match="skew_s"):
        WallClock(float("nan"))


def test_the_harness_knows_the_variable_and_the_bound_without_importing_the_clock():
    """Goal: chaos (which must not import the core at load) spells the variable and the bound as runtime.clock does."""
    assert (chaos.SKEW_VARIABLE, chaos.SKEW_MAX_S) == (SKEW_VARIABLE, SKEW_MAX_S)


def test_without_a_clock_of_its_own_a_store_is_judged_on_the_processs_skewed_clock(tmp_path, monkeypatch):
    """Goal: memory and SQLite have no clock of their own (one machine, one clock): leases are judged on this process's, skew and all;
    a clock without a wait of its own is given the real one."""
    monkeypatch.setenv(SKEW_VARIABLE, "300")
    with SQLiteStore(tmp_path / "store.db") as store:
        for over in (store, MemoryStore()):
            clock = lease_clock(over)
            assert isinstance(clock, WallClock) and clock.skew_s == 300.0
            assert waiting(clock) is clock

    class Bare:
        def now(self) -> float:
            return 5.0

    waits = waiting(Bare())
    assert isinstance(waits, Waits) and waits.now() == 5.0


def test_a_worker_with_a_skew_that_is_not_seconds_refuses_in_one_line(tmp_path):
    command = [
        sys.executable,
        "-m",
        "shiftchange",
        "worker",
        "--store",
        f"sqlite:///{tmp_path / 'w.db'}",
        "--provider",
        "http://127.0.0.1:9",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, SKEW_VARIABLE: "five minutes"})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and SKEW_VARIABLE in lines[0] and "Traceback" not in done.stderr, done.stderr


# ---------------------------------------------------------------- leases on the server's clock


def _server_now(store) -> float:
    with store.transaction() as tx:
        return tx.now()


@pytest.mark.parametrize("skew_s", [SKEW_S, -SKEW_S], ids=["ahead", "behind"])
def test_a_worker_and_an_orchestrator_minutes_off_neither_steal_a_live_lease_nor_keep_an_expired_one(
    skew_s, make_postgres_store, provider_url, monkeypatch
):
    """Goal: on PostgreSQL a worker and an orchestrator process whose clocks are 300 s ahead (or behind) stamp a claim on the server's
    time; the skewed reaper leaves the live lease alone (ahead, it would steal it); once the lease has run out by the server, the
    skewed worker's renewal is refused and the skewed reaper takes it (behind, both would keep it for five minutes)."""
    store = make_postgres_store()
    url = schema_url(make_postgres_store.url, store.schema)
    right = Orchestrator(store, store.clock(), LedgerProvider(clock=store.clock()), CONFIG.core)
    for task_id in ("t1", "t2"):
        submit(right, task_id, CONFIG)
    right.run_admission()
    monkeypatch.setenv(SKEW_VARIABLE, f"{skew_s:+g}")
    worker = Worker.connect(url, provider_url, CONFIG, "w-skewed")
    control = ControlProcess(url, provider_url, CONFIG, "o-skewed")
    try:
        mine = worker.orchestrator
        assert mine.clock is mine.store.clock() and control.orchestrator.clock is control.store.clock()
        assert abs(worker.clock.now() - _server_now(store)) < 1.0 and abs(WallClock().now() - _server_now(store) - skew_s) < 1.0
        before = _server_now(store)
        lease = mine.claim_next("w-skewed", CONFIG.workspace).lease
        after = _server_now(store)
        assert before + 1.0 <= store.get_attempt(lease.attempt_id).expires_at <= after + 1.0, "stamped on the server's time"
        fence = (lease.attempt_id, lease.generation, lease.token)
        theirs = right.claim_next("w-right", CONFIG.workspace).lease  # a worker whose clock is right holds the other task
        assert mine.renew_lease(*fence).accepted
        control.reap_step()
        assert store.get_attempt(lease.attempt_id).state in LEASED, "the skewed reaper left the skewed worker's live lease alone"
        assert store.get_attempt(theirs.attempt_id).state in LEASED, "and the right worker's: nothing stolen"
        expires_at = store.get_attempt(lease.attempt_id).expires_at
        give_up = time.monotonic() + 3 * CONFIG.core.lease_ttl_s
        while _server_now(store) <= expires_at + 0.05 and time.monotonic() < give_up:
            time.sleep(0.05)
        assert _server_now(store) > expires_at, "renewed on the server's time, the lease runs out a TTL later (not 300 s)"
        assert not mine.renew_lease(*fence).accepted, "run out by the server's clock: the skewed worker cannot keep it"
        control.reap_step()
        assert store.get_attempt(lease.attempt_id).state == "suspect", "the skewed reaper took the expired lease at once"
        assert store.get_attempt(theirs.attempt_id).state == "suspect", "and the right worker's, expired as well"
    finally:
        worker.close()
        control.close()


def test_the_heartbeat_orchestrator_judges_by_its_own_store_handles_clock(make_postgres_store, provider_url):
    """Goal: the heartbeat thread's Orchestrator has a store handle of its own, and reads that handle's server clock (which reads the
    handle's own transaction), not the workflow's; the worker's sleeps and its provider's deadlines are on the workflow's."""
    store = make_postgres_store()
    worker = Worker.connect(schema_url(make_postgres_store.url, store.schema), provider_url, CONFIG, "w1")
    beat = worker.heartbeat_orchestrator()
    try:
        assert beat.store is not worker.orchestrator.store
        assert beat.clock is beat.store.clock() and beat.clock is not worker.orchestrator.clock
        assert worker.provider.clock is worker.orchestrator.clock and worker.clock.clock is worker.orchestrator.clock
    finally:
        beat.store.close()
        worker.close()
