"""PostgreSQL throughput: shiftchange claim-renew-complete cycles/s against pgqueuer dequeue-and-ack jobs/s, 1 to 16 processes.

    python benchmarks/postgres.py [--url URL] [--seconds S] [--processes 1,4,16]
                                  [--skip-pgqueuer] [--pgqueuer-python PATH] [--pgqueuer-mode strict,manager]

What is measured, for each process count N, on one server in one run (the
two sides alternate per N, so drift in the machine's load hits both):

- shiftchange: N worker OS processes, each opening its own store
  (`shiftchange.stores.open_store(URL?schema=...)`, or until that
  exists `PostgresStore(URL, schema=...)` with its default pool, of which a
  single-threaded worker uses one connection) and its own `Orchestrator` (a
  wall clock, `now()` = `time.time()`; `CoreConfig` defaults but
  `admitted_max`, admission limits out of the way: bulkheads, queue depth
  and age are not what this measures), repeat one cycle as fast as they
  can: `claim_next_and_start` (the store's claim queue: the oldest admitted
  Attempt, FOR NO KEY UPDATE SKIP LOCKED on PostgreSQL, claimed and started
  in one transaction, two contracts), then `renew_lease`,
  `complete_attempt`, each one transaction: 3 commits a cycle.
  `start_attempt` is not one of the claim-renew-complete contracts but the
  protocol needs it (complete needs a running Attempt), so it is inside the
  timed cycle. The tasks are created, accepted and dispatched by the
  workers, then admitted by one orchestrator's `run_admission`, all before
  the window and untimed. When `claim_next` does not exist or the store
  cannot serve it, each worker claims its own tasks by id with
  `claim_attempt` (no queue pick; the output says so). After the run the
  stored history says how many contracts ran again after losing a race in
  the store (`Event.retries`).
- pgqueuer, in a separate interpreter (`--pgqueuer-python`, its own venv:
  it is never a dependency of this project): N consumer processes on its
  schema as `pgq install` makes it (`Queries.install()`, durability
  "durable": every table logged), jobs pre-enqueued in bulk
  (`Queries.enqueue` with lists, 10,000 per statement) before the window.
  Mode "strict" (the comparison the target judges): each process holds one
  asyncpg connection and loops `Queries.dequeue(batch_size=1)` (pgqueuer's
  own pick-and-claim statement, FOR UPDATE SKIP LOCKED, no concurrency
  limits, no per-worker budget) then `Queries.log_jobs([(job,
  "successful")])` (its own acknowledgement: delete from the queue and
  insert the log row), each awaited before the next, each one autocommit
  statement, so one job per transaction and 2 commits per job, nothing
  buffered. Mode "manager" (information, no target): pgqueuer's own
  consumer, `QueueManager.run(batch_size=1, max_concurrent_tasks=2)` with a
  no-op entrypoint. That cannot be made one-at-a-time: `run` refuses a
  `max_concurrent_tasks` below twice the batch size, so 2 jobs may be in
  flight per process, and acknowledgements go through `JobStatusLogBuffer`
  (max_size = batch_size = 1), written by a background task after the job
  returns, so acks that finish in the same event-loop turn share one
  statement. The output prints how many acks each ack statement carried.
  Every other `run` argument is its default (dequeue_timeout 30 s,
  heartbeat_timeout 30 s, log aggregation every 30 s, which never fires in a
  window this short). In both modes pgqueuer's schema is unchanged, so its
  trigger still sends a NOTIFY for every statement on the queue table: that
  is part of what a pgqueuer commit costs. The strict loop passes
  heartbeat_timeout 30 s to `dequeue` as `run` would (it only decides when a
  picked job counts as abandoned) and sends no heartbeats: a job lives a
  millisecond.

The window: all N processes start together; the first `--warmup` seconds
are not counted (connections, caches, plans), then `--seconds` are. A
shiftchange cycle counts when its `complete_attempt` returns inside the
window; its latencies are those cycles'. pgqueuer's jobs/s is counted from
the database (successful rows of its log table, read at the window's start
and end); the consumers' own tally is printed beside it as a check. Latency
is per call as the calling process sees it (`time.perf_counter`), p50 and
p99 over every process's calls in the window.

Server settings: `SHOW server_version`, `synchronous_commit` and `fsync` are
read on a fresh connection before anything runs (the run stops, status 2,
unless both are on), then again on one of every shiftchange worker's pooled
store connections and on every pgqueuer consumer's session, and printed.
Nothing is batched on the shiftchange side and no setting is changed on
either side.

How many tasks/jobs: enough for warm-up and window at the rate the previous
count reached, extrapolated linearly in N (at most doubled), with a margin; a
run whose pool ran dry before the window ended (for pgqueuer: no queued job
left at its end) is measured again with a larger pool.

Each measurement uses fresh schemas (`bench_sc_*`, `bench_pgq_*`), dropped
afterwards. Target: shiftchange cycles/s at 16 processes >= pgqueuer
(strict) jobs/s at 16 (or at the largest count given). Exit status 0 on
PASS, 1 on FAIL or when the target could not be judged, 2 on bad input or an
unreachable server.

The pgqueuer half is started as `PGQUEUER_PYTHON benchmarks/postgres.py
--pgqueuer-driver ...`, so this file imports only the standard library at
its top; shiftchange is imported where it is used. Development without a
PostgreSQL server: `--url sqlite://` (a temporary directory) or
`sqlite:///relative/dir`, `sqlite:////absolute/dir` (open_store's
convention) runs the shiftchange half on SQLiteStore files, one per
measurement, and skips pgqueuer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import multiprocessing
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from common import verdict

URL_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
SECONDS_DEFAULT = 10.0
WARMUP_DEFAULT = 1.0
PROCESSES_DEFAULT = "1,4,16"
PGQUEUER_PYTHON_DEFAULT = "/tmp/pgq-venv/bin/python"
PGQUEUER_VENV_HINT = "python3 -m venv /tmp/pgq-venv && /tmp/pgq-venv/bin/pip install pgqueuer 'psycopg[binary]' asyncpg"
PGQUEUER_MODES = ("strict", "manager")
TARGET_PROCESSES = 16
FLAT_FRACTION = 0.95
"""From 4 to 16 processes throughput must rise or stay flat: at 16, at least this share of the 4-process rate (noise)."""
P99_FACTOR = 2.0
"""Cycle p99 at 16 processes at most this many times pgqueuer's dequeue+ack p99: four contracts against two statements."""
WORKSPACE = "bench/repo"
SC_CONTRACTS = ("claim", "start", "renew", "complete")
"""The contracts of one shiftchange cycle, each a row of the table and an event."""
SC_CALLS = ("claim+start", "renew", "complete")
"""The timed calls of one cycle, each one store transaction: `claim_next_and_start` (two contracts), renew, complete."""
COMMITS_PER_CYCLE = len(SC_CALLS)
PGQ_ENTRYPOINT = "bench"
ENQUEUE_CHUNK = 10_000
POOL_MARGIN = 1.4
"""Tasks or jobs prepared per measurement, as a multiple of what the estimated rate needs for warm-up plus window."""
POOL_GROWTH_MAX = 2.0
"""The estimate for N processes: the previous count's rate times N / N_previous, but at most this factor (a dry pool is retried)."""
FIRST_RATE_PER_PROCESS = {"shiftchange": 300.0, "pgqueuer": 1000.0}
"""The guess per process before anything was measured; a pool that runs dry is measured again, larger."""
POOL_MIN = {"shiftchange": 200, "pgqueuer": 20_000}
DRY_RETRIES = 2
REFUSED_CLAIMS_MAX = 1_000
"""A worker whose claims are refused this many times stops the run: something other than load is wrong."""
INTAKE_BATCH = 500
"""Tasks per submit_many call when a worker prepares its tasks (untimed)."""
START_DELAY_S = 0.3
"""From the parent's go to the workers' first call, so every process leaves its wait before any is counted."""
JOIN_TIMEOUT_S = 600.0
"""The longest the parent waits for a child at any step; only a broken run reaches it."""
SPAWN = multiprocessing.get_context("spawn")


class BenchError(Exception):
    """A condition the benchmark cannot measure under: one line for the user, exit status 2."""


# ------------------------------------------------------------------ shared figures


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `samples` (seconds); NaN when there are none."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))]


def ms(seconds: float) -> str:
    return "   n/a" if math.isnan(seconds) else f"{1e3 * seconds:6.2f}"


@dataclass
class Measurement:
    """One side's result at one process count."""

    processes: int
    rate: float
    counted: int
    window_s: float
    pool: int
    latencies: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dry: bool = False
    drained_rate: float | None = None
    """For a pool that ran dry: how fast it emptied (pool / seconds from the start to the last worker finding it empty)."""


def pool_size(side: str, processes: int, window_s: float, previous: Measurement | None) -> int:
    if previous is None:
        rate = FIRST_RATE_PER_PROCESS[side] * processes
    else:
        rate = previous.rate * min(max(1.0, processes / previous.processes), POOL_GROWTH_MAX)
    return max(POOL_MIN[side], math.ceil(POOL_MARGIN * rate * window_s))


def retry_pool(measurement: Measurement, window_s: float) -> int:
    """After a dry run: what the rate it emptied at says the window needs, and at least twice what it had (three times, rate unknown)."""
    if measurement.drained_rate is None:
        return 3 * measurement.pool
    return max(2 * measurement.pool, math.ceil(POOL_MARGIN * measurement.drained_rate * window_s))


# ------------------------------------------------------------------ the server


def with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "schema"] + [("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def without_schema(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "schema"])))


def server_facts(url: str) -> dict[str, str]:
    """The server's version and the durability settings a fresh session gets; BenchError when it cannot be reached."""
    try:
        import psycopg
    except ImportError as error:
        raise BenchError(f"psycopg is not installed in {sys.executable}'s environment ({error})") from None
    try:
        with psycopg.connect(without_schema(url), connect_timeout=5, autocommit=True) as connection:
            facts = {}
            for name in ("server_version", "synchronous_commit", "fsync"):
                (facts[name],) = connection.execute(f"SHOW {name}").fetchone()
            return facts
    except psycopg.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BenchError(f"cannot reach PostgreSQL at {shown(url)}: {first}") from None


FLOOR_SAMPLES = 400
"""Round trips timed per kind by `server_floor`."""


def server_floor(url: str) -> dict[str, float]:
    """The server's own floor, p50 ms, on one connection with nothing else of ours running: a round trip that does nothing
    (SELECT 1), one locking read (BEGIN, SELECT ... FOR NO KEY UPDATE, the clock), and a durable commit of one row's
    update with one history row (what renew's second trip does, in plain SQL). A cycle at one process cannot be faster
    than the sum of its trips' floors; what it spends beyond them is client and statement CPU."""
    import psycopg

    table = f"bench_floor_{os.getpid()}_{secrets.token_hex(3)}"
    trips = {
        "round trip": "SELECT 1",
        "locking read": f"BEGIN; SELECT * FROM {table} WHERE id = 'a' FOR NO KEY UPDATE; SELECT clock_timestamp(); ROLLBACK",
        "durable commit": f"BEGIN; UPDATE {table} SET v = v + 1 WHERE id = 'a'; INSERT INTO {table}_log (v) VALUES (1); COMMIT",
    }
    found: dict[str, float] = {}
    with psycopg.connect(without_schema(url), connect_timeout=5, autocommit=True) as connection:
        cursor = connection.cursor()
        cursor.execute(f"CREATE TABLE public.{table} (id text PRIMARY KEY, v bigint); INSERT INTO public.{table} VALUES ('a', 0)")
        cursor.execute(f"CREATE TABLE public.{table}_log (pos bigserial PRIMARY KEY, v bigint)")
        try:
            cursor.execute("SET search_path = public")
            for name, text in trips.items():
                spent = []
                for _ in range(FLOOR_SAMPLES):
                    began = time.perf_counter()
                    cursor.execute(text)
                    spent.append(time.perf_counter() - began)
                found[name] = 1000 * statistics.median(spent)
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS public.{table}, public.{table}_log")
    return found


def new_schema(side: str, processes: int) -> str:
    return f"bench_{side}_{processes}_{os.getpid()}_{secrets.token_hex(3)}"


def shown(url: str) -> str:
    """`url` fit to print: its password replaced, as `shiftchange.stores.describe` does."""
    try:
        from shiftchange.stores import describe
    except ImportError:
        return url
    return describe(url)


def sqlite_path(url: str) -> str:
    """What follows the third slash of `sqlite:///...` (so `sqlite:////tmp/x` is absolute), as `open_store` reads it."""
    return unquote(urlsplit(url).path[1:])


def processes_text(count: int) -> str:
    return f"{count} process" if count == 1 else f"{count} processes"


# ------------------------------------------------------------------ shiftchange: store and orchestrator


class WallClock:
    """The deployment clock: seconds since the epoch."""

    def now(self) -> float:
        return time.time()


def open_store(url: str) -> Any:
    """`shiftchange.stores.open_store(url)`; until that exists, `PostgresStore` or `SQLiteStore` opened here from the URL."""
    from shiftchange.core import InputError, StoreError

    try:
        if importlib.util.find_spec("shiftchange.stores") is not None:
            from shiftchange.stores import open_store as core_open_store

            return core_open_store(url)
        parts = urlsplit(url)
        if parts.scheme == "sqlite":
            from shiftchange.stores.sqlite import SQLiteStore

            return SQLiteStore(sqlite_path(url))
        from shiftchange.stores.postgres import PostgresStore

        return PostgresStore(without_schema(url), schema=dict(parse_qsl(parts.query)).get("schema", "shiftchange"))
    except (StoreError, InputError) as error:
        raise BenchError(f"cannot open the store at {shown(url)}: {error}") from None


def orchestrator_for(store: Any) -> Any:
    """An Orchestrator whose admission limits are out of the way: bulkheads, queue depth and age are not what this measures."""
    from shiftchange.core import AdmissionConfig, CoreConfig, LedgerProvider, Orchestrator, ReliabilityConfig

    clock = store.clock() or WallClock()  # leases on the server's clock, as the runtime judges them on PostgreSQL
    unlimited = AdmissionConfig(queue_depth_max=10**9, queue_age_max_s=1e9, partition_concurrency_max=10**9)
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(admitted_max=10**9), ReliabilityConfig(admission=unlimited))


def session_setting(store: Any, name: str) -> str | None:
    """A setting as the store's own sessions see it, read on one of its pooled connections; None for a store without a pool.

    This peeks at `PostgresStore._pool` on purpose: the point is to check the
    very connections the contracts commit on, not a fresh one of our own.
    """
    pool = getattr(store, "_pool", None)
    if pool is None or not callable(getattr(pool, "connection", None)):
        return None
    with pool.connection() as connection:
        (value,) = connection.execute(f"SHOW {name}").fetchone()
        connection.rollback()
    return str(value)


def shiftchange_worker(url: str, index: int, tasks: int, barrier: Any, go: Any, times: Any, messages: Any) -> None:
    """One worker process: its own store and orchestrator; prepare its tasks, wait for go, cycle until the window closes."""
    try:
        messages.put(("done", index, _shiftchange_worker(url, index, tasks, barrier, go, times, messages)))
    except BaseException as error:
        messages.put(("error", index, f"{type(error).__name__}: {error}"))


def _shiftchange_worker(url: str, index: int, tasks: int, barrier: Any, go: Any, times: Any, messages: Any) -> dict[str, Any]:
    from shiftchange.core import Claim, Plan, StoreContention, Submission

    store = open_store(url)
    try:
        orchestrator = orchestrator_for(store)  # built on an empty store, so its admission rebuild reads nothing
        barrier.wait(timeout=JOIN_TIMEOUT_S)
        began = time.perf_counter()
        task_ids = [f"w{index}-{number}" for number in range(tasks)]
        for start in range(0, len(task_ids), INTAKE_BATCH):
            chunk = task_ids[start : start + INTAKE_BATCH]
            batch = [Submission(task_id, "benchmark the PostgreSQL store", WORKSPACE, Plan("the store keeps up")) for task_id in chunk]
            for task_id, outcome in zip(task_ids[start:], orchestrator.submit_many(batch), strict=False):
                if not outcome.accepted:
                    raise RuntimeError(f"preparing {task_id} was refused: {outcome}")
        settings = {name: session_setting(store, name) for name in ("synchronous_commit", "fsync")}
        messages.put(("prepared", index, {"prepare_s": time.perf_counter() - began, "settings": settings}))
        if not go.wait(timeout=JOIN_TIMEOUT_S):
            raise RuntimeError("no go from the parent")
        go_at, window_start, window_end = times[0], times[1], times[2]
        claim_next = getattr(orchestrator, "claim_next", None)
        fallback = "" if claim_next is not None else "Orchestrator.claim_next does not exist"
        own = iter(task_ids)
        worker_id = f"worker-{index}"
        spent: dict[str, list[float]] = {name: [] for name in (*SC_CALLS, "cycle")}
        trips_before = getattr(store, "round_trips", 0)
        refused: dict[str, int] = {}
        counted, tried, contention, dry, dry_reason, dry_at = 0, 0, 0, False, "", None
        trips_in = trips_out = None
        cycles_in = cycles_out = 0
        while time.monotonic() < go_at:
            time.sleep(0.001)
        while time.monotonic() < window_end:
            t0 = time.perf_counter()
            try:
                if not fallback:
                    try:
                        claimed = orchestrator.claim_next_and_start(worker_id, WORKSPACE)
                    except (AttributeError, NotImplementedError) as error:
                        if tried:
                            raise
                        fallback = f"claim_next failed on this store ({type(error).__name__}: {error})"
                        continue
                    if claimed is None:
                        dry, dry_reason, dry_at = True, "claim_next found nothing to claim", time.monotonic()
                        break
                    claim, started = claimed if isinstance(claimed, tuple) else (claimed, None)
                else:
                    task_id = next(own, None)
                    if task_id is None:
                        dry, dry_reason, dry_at = True, "every task of this worker was claimed", time.monotonic()
                        break
                    claim = orchestrator.claim_attempt(task_id, worker_id, WORKSPACE)
                    started = None
                tried += 1
                if not isinstance(claim, Claim):
                    refused["claim"] = refused.get("claim", 0) + 1
                    if refused["claim"] > REFUSED_CLAIMS_MAX:
                        raise RuntimeError(f"{REFUSED_CLAIMS_MAX} claims refused, the last: {claim.code}: {claim.reason}")
                    continue
                fence = (claim.lease.attempt_id, claim.lease.generation, claim.lease.token)
                outcomes = [orchestrator.start_attempt(*fence) if started is None else started]
                t2 = time.perf_counter()
                outcomes.append(orchestrator.renew_lease(*fence))
                t3 = time.perf_counter()
                outcomes.append(orchestrator.complete_attempt(*fence, "benchmark result", head_sha="b" * 40))
                t4 = time.perf_counter()
            except StoreContention:
                contention += 1
                continue
            failed = [name for name, outcome in zip(SC_CONTRACTS[1:], outcomes, strict=True) if not outcome.accepted]
            if window_start <= time.monotonic() <= window_end and trips_in is None:
                trips_in, cycles_in = getattr(store, "round_trips", 0), counted
            for name in failed:
                refused[name] = refused.get(name, 0) + 1
            finished = time.monotonic()
            if not failed and window_start <= finished <= window_end:
                counted += 1
                for name, spent_s in zip((*SC_CALLS, "cycle"), (t2 - t0, t3 - t2, t4 - t3, t4 - t0), strict=True):
                    spent[name].append(spent_s)
                trips_out, cycles_out = getattr(store, "round_trips", 0), counted
        del trips_before
        trips = (
            None if trips_in is None or trips_out is None or cycles_out <= cycles_in else (trips_out - trips_in) / (cycles_out - cycles_in)
        )
        return {
            "counted": counted,
            "trips_per_cycle": trips,
            "latencies": spent,
            "refused": refused,
            "contention": contention,
            "dry": dry,
            "dry_reason": dry_reason,
            "dry_at": dry_at,
            "fallback": fallback,
            "settings": settings,
        }
    finally:
        store.close()


def history_notes(store_url: str) -> list[str]:
    """What the stored history says about races: contracts that ran again after losing one (`Event.retries`), whole run."""
    store = open_store(store_url)
    try:
        events = [event for event in store.events() if event.kind in SC_CONTRACTS]
    finally:
        store.close()
    again = {kind: sum(1 for event in events if event.kind == kind and event.retries) for kind in SC_CONTRACTS}
    total = sum(event.retries for event in events)
    if not total:
        return [f"history: {len(events):,} claim/start/renew/complete events, none ran again after losing a race in the store"]
    parts = ", ".join(f"{kind} {again[kind]:,}" for kind in SC_CONTRACTS)
    return [f"history: of {len(events):,} claim/start/renew/complete events, ran again after a lost race: {parts} ({total:,} runs again)"]


def collect(messages: Any, workers: list[Any], kind: str, count: int) -> dict[int, Any]:
    """Wait for `count` messages of `kind` from the children; a child's error or death is a BenchError."""
    found: dict[int, Any] = {}
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while len(found) < count:
        try:
            message_kind, index, payload = messages.get(timeout=1.0)
        except Exception:
            dead = [worker for worker in workers if worker.exitcode not in (None, 0)]
            if dead:
                raise BenchError(f"a worker process died (exit code {dead[0].exitcode}) before reporting '{kind}'") from None
            if time.monotonic() > deadline:
                raise BenchError(f"workers did not report '{kind}' within {JOIN_TIMEOUT_S:.0f} s") from None
            continue
        if message_kind == "error":
            raise BenchError(f"worker {index} failed: {payload}")
        if message_kind != kind:
            raise BenchError(f"worker {index} said {message_kind!r} where {kind!r} was expected")
        found[index] = payload
    return found


def shiftchange_measure(store_url: str, processes: int, tasks_total: int, seconds: float, warmup: float) -> Measurement:
    """One measurement on a fresh store: N workers prepare, one orchestrator admits, all cycle through the window."""
    setup = open_store(store_url)  # creates the schema before any worker races to
    setup.close()
    per_worker = math.ceil(tasks_total / processes)
    barrier, go, times, messages = SPAWN.Barrier(processes), SPAWN.Event(), SPAWN.Array("d", 3), SPAWN.Queue()
    workers = [
        SPAWN.Process(target=shiftchange_worker, args=(store_url, index, per_worker, barrier, go, times, messages), daemon=True)
        for index in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        began = time.perf_counter()
        prepared = collect(messages, workers, "prepared", processes)
        prepare_s = time.perf_counter() - began
        began = time.perf_counter()
        store = open_store(store_url)
        try:
            admitted = orchestrator_for(store).run_admission()
        finally:
            store.close()
        admit_s = time.perf_counter() - began
        admitted_count = sum(1 for result in admitted.values() if result.accepted and result.state == "admitted")
        if admitted_count != per_worker * processes:
            raise BenchError(f"admission admitted {admitted_count} of {per_worker * processes} tasks")
        go_at = time.monotonic() + START_DELAY_S
        times[0], times[1], times[2] = go_at, go_at + warmup, go_at + warmup + seconds
        go.set()
        done = collect(messages, workers, "done", processes)
        for worker in workers:
            worker.join(timeout=JOIN_TIMEOUT_S)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join()
    latencies: dict[str, list[float]] = {name: [] for name in (*SC_CALLS, "cycle")}
    refused: dict[str, int] = {}
    for result in done.values():
        for name, samples in result["latencies"].items():
            latencies[name].extend(samples)
        for name, number in result["refused"].items():
            refused[name] = refused.get(name, 0) + number
    counted = sum(result["counted"] for result in done.values())
    measurement = Measurement(processes, counted / seconds, counted, seconds, per_worker * processes, latencies)
    notes = measurement.notes
    notes.append(
        f"{per_worker * processes:,} tasks; untimed setup: submit_many {prepare_s:.1f} s in {processes_text(processes)},"
        f" admission {admit_s:.1f} s"
    )
    trips = [result["trips_per_cycle"] for result in done.values() if result.get("trips_per_cycle") is not None]
    if trips:
        notes.append(
            f"where the time goes: {sum(trips) / len(trips):.1f} round trips to the server per cycle, {COMMITS_PER_CYCLE} of them commits"
            " (every round trip carries several statements; see the per-call latencies)"
        )
    fallbacks = sorted({result["fallback"] for result in done.values() if result["fallback"]})
    if fallbacks:
        notes.append(f"{fallbacks[0]}: each worker claimed its own tasks by id (claim_attempt), no queue pick")
    else:
        notes.append("claim: Orchestrator.claim_next_and_start (the store's queue pick, and the start in the same transaction)")
    seen = {value for result in prepared.values() for value in result["settings"].values()}
    if seen != {None}:
        values = {name: sorted({str(result["settings"][name]) for result in prepared.values()}) for name in ("synchronous_commit", "fsync")}
        notes.append(f"store sessions: synchronous_commit {'/'.join(values['synchronous_commit'])}, fsync {'/'.join(values['fsync'])}")
    if refused:
        notes.append("refused: " + ", ".join(f"{name} {number}" for name, number in sorted(refused.items())))
    notes.extend(history_notes(store_url))
    contention = sum(result["contention"] for result in done.values())
    if contention:
        notes.append(f"{contention} cycles lost to StoreContention (a contract lost its race store_retries_max times)")
    dry = [result["dry_reason"] for result in done.values() if result["dry"]]
    if dry:
        measurement.dry = True
        measurement.drained_rate = measurement.pool / max(1e-3, max(result["dry_at"] for result in done.values() if result["dry"]) - go_at)
        notes.append(f"{len(dry)} of {processes} workers ran dry before the window closed ({dry[0]})")
    return measurement


# ------------------------------------------------------------------ pgqueuer: the driver, run under --pgqueuer-python


def pgqueuer_queries(connection: Any, schema: str) -> Any:
    """pgqueuer's Queries over one asyncpg connection, every object in `schema`."""
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.adapters.persistence.qb import DBSettings, QueryBuilderEnvironment, QueryQueueBuilder, QuerySchedulerBuilder
    from pgqueuer.queries import Queries

    settings = DBSettings(db_schema=schema)
    return Queries(
        AsyncpgDriver(connection),
        qbe=QueryBuilderEnvironment(settings),
        qbq=QueryQueueBuilder(settings),
        qbs=QuerySchedulerBuilder(settings),
    )


def pgqueuer_consumer(url: str, schema: str, mode: str, index: int, go: Any, times: Any, messages: Any) -> None:
    try:
        messages.put(("done", index, asyncio.run(_pgqueuer_consumer(url, schema, mode, index, go, times, messages))))
    except BaseException as error:
        messages.put(("error", index, f"{type(error).__name__}: {error}"))


async def _pgqueuer_consumer(url: str, schema: str, mode: str, index: int, go: Any, times: Any, messages: Any) -> dict[str, Any]:
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        settings = {name: await connection.fetchval(f"SHOW {name}") for name in ("synchronous_commit", "fsync")}
        queries = pgqueuer_queries(connection, schema)
        messages.put(("prepared", index, {"settings": settings}))
        if not go.wait(timeout=JOIN_TIMEOUT_S):
            raise RuntimeError("no go from the driver")
        go_at, window_start, window_end = times[0], times[1], times[2]
        await asyncio.sleep(max(0.0, go_at - time.monotonic()))
        if mode == "strict":
            return await _strict_loop(queries, window_start, window_end) | {"settings": settings}
        return await _manager_loop(queries, window_end) | {"settings": settings}
    finally:
        await connection.close()


async def _strict_loop(queries: Any, window_start: float, window_end: float) -> dict[str, Any]:
    """Dequeue one job, acknowledge it, await both, repeat: pgqueuer's statements, one job per transaction, nothing buffered."""
    from pgqueuer.ports.repository import EntrypointExecutionParameter

    entrypoints = {PGQ_ENTRYPOINT: EntrypointExecutionParameter(concurrency_limit=0)}
    manager_id = uuid.uuid4()
    heartbeat_timeout = timedelta(seconds=30)  # QueueManager.run's default
    spent: dict[str, list[float]] = {"dequeue": [], "ack": [], "dequeue+ack": []}
    counted, dry = 0, False
    while time.monotonic() < window_end:
        t0 = time.perf_counter()
        jobs = await queries.dequeue(
            batch_size=1,
            entrypoints=entrypoints,
            queue_manager_id=manager_id,
            global_concurrency_limit=None,
            heartbeat_timeout=heartbeat_timeout,
        )
        t1 = time.perf_counter()
        if not jobs:
            dry = True
            break
        await queries.log_jobs([(jobs[0], "successful", None)])
        t2 = time.perf_counter()
        if window_start <= time.monotonic() <= window_end:
            counted += 1
            spent["dequeue"].append(t1 - t0)
            spent["ack"].append(t2 - t1)
            spent["dequeue+ack"].append(t2 - t0)
    return {"counted": counted, "latencies": spent, "dry": dry, "ack_statements": None}


async def _manager_loop(queries: Any, window_end: float) -> dict[str, Any]:
    """pgqueuer's own consumer, as close to one at a time as it allows; counts how many acks each ack statement carried."""
    from pgqueuer.qm import QueueManager

    acks_per_statement: list[int] = []
    log_jobs = queries.log_jobs

    async def counting_log_jobs(job_status: list[Any]) -> None:
        acks_per_statement.append(len(job_status))
        await log_jobs(job_status)

    queries.log_jobs = counting_log_jobs
    manager = QueueManager(queries)

    @manager.entrypoint(PGQ_ENTRYPOINT)
    async def bench(job: Any) -> None:
        return None

    loop = asyncio.get_running_loop()
    loop.call_later(max(0.0, window_end - time.monotonic()), manager.shutdown.set)
    await manager.run(batch_size=1, max_concurrent_tasks=2)
    return {"counted": None, "latencies": {}, "dry": False, "ack_statements": acks_per_statement}


async def _pgqueuer_drive(url: str, processes: int, seconds: float, warmup: float, jobs: int, mode: str) -> dict[str, Any]:
    import asyncpg

    schema = new_schema("pgq", processes)
    try:
        connection = await asyncpg.connect(url, timeout=5)
    except (OSError, asyncpg.PostgresError) as error:
        raise BenchError(f"cannot reach PostgreSQL: {error}") from None
    try:
        facts = {name: await connection.fetchval(f"SHOW {name}") for name in ("server_version", "synchronous_commit", "fsync")}
        queries = pgqueuer_queries(connection, schema)
        await queries.install()
        began = time.perf_counter()
        for offset in range(0, jobs, ENQUEUE_CHUNK):
            size = min(ENQUEUE_CHUNK, jobs - offset)
            await queries.enqueue([PGQ_ENTRYPOINT] * size, [None] * size, [0] * size)
        enqueue_s = time.perf_counter() - began
        await connection.execute("ANALYZE " + queries.qbe.settings.qualified.queue_table)
        log_table = queries.qbe.settings.qualified.queue_table_log
        count_successful = f"SELECT count(*) FROM {log_table} WHERE status = 'successful'"
        count_queued = f"SELECT count(*) FROM {queries.qbe.settings.qualified.queue_table} WHERE status = 'queued'"

        go, times, messages = SPAWN.Event(), SPAWN.Array("d", 3), SPAWN.Queue()
        consumers = [
            SPAWN.Process(target=pgqueuer_consumer, args=(url, schema, mode, index, go, times, messages), daemon=True)
            for index in range(processes)
        ]
        for consumer in consumers:
            consumer.start()
        try:
            prepared = await asyncio.to_thread(collect, messages, consumers, "prepared", processes)
            go_at = time.monotonic() + START_DELAY_S
            times[0], times[1], times[2] = go_at, go_at + warmup, go_at + warmup + seconds
            go.set()
            await asyncio.sleep(max(0.0, times[1] - time.monotonic()))
            start_count, start_at = await connection.fetchval(count_successful), time.monotonic()
            await asyncio.sleep(max(0.0, times[2] - time.monotonic()))
            end_count, end_at = await connection.fetchval(count_successful), time.monotonic()
            queued_left = await connection.fetchval(count_queued)
            done = await asyncio.to_thread(collect, messages, consumers, "done", processes)
            for consumer in consumers:
                await asyncio.to_thread(consumer.join, JOIN_TIMEOUT_S)
        finally:
            for consumer in consumers:
                if consumer.is_alive():
                    consumer.kill()
                    consumer.join()
        latencies: dict[str, list[float]] = {}
        for result in done.values():
            for name, samples in result["latencies"].items():
                latencies.setdefault(name, []).extend(samples)
        tallies = [result["counted"] for result in done.values()]
        acks = [size for result in done.values() for size in (result["ack_statements"] or [])]
        return {
            "facts": facts,
            "version": _pgqueuer_version(),
            "consumer_settings": [result["settings"] for result in prepared.values()],
            "jobs": jobs,
            "enqueue_s": enqueue_s,
            "db_counted": end_count - start_count,
            "db_window_s": end_at - start_at,
            "tally": None if None in tallies else sum(tallies),
            "latencies": latencies,
            "dry": queued_left == 0 or any(result["dry"] for result in done.values()),
            "ack_statements": len(acks),
            "acks_total": sum(acks),
            "acks_max": max(acks, default=0),
        }
    finally:
        with contextlib.suppress(Exception):
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await connection.close()


def _pgqueuer_version() -> str:
    from importlib.metadata import version

    return version("pgqueuer")


def pgqueuer_driver_main(argv: list[str]) -> int:
    """The pgqueuer half, as its own process under pgqueuer's interpreter: one JSON line on stdout, or one error line, status 2."""
    parser = argparse.ArgumentParser(prog="postgres.py --pgqueuer-driver")
    parser.add_argument("--url", required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--warmup", type=float, required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--mode", choices=PGQUEUER_MODES, required=True)
    arguments = parser.parse_args(argv)
    missing = [name for name in ("pgqueuer", "asyncpg") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"{sys.executable} lacks {', '.join(missing)}; create it with: {PGQUEUER_VENV_HINT}", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(
            _pgqueuer_drive(arguments.url, arguments.processes, arguments.seconds, arguments.warmup, arguments.jobs, arguments.mode)
        )
    except BenchError as error:
        print(error, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


def pgqueuer_measure(
    python: str, url: str, processes: int, jobs: int, seconds: float, warmup: float, mode: str
) -> tuple[Measurement, dict]:
    command = [python, str(Path(__file__).resolve()), "--pgqueuer-driver", "--url", without_schema(url)]
    command += ["--processes", str(processes), "--seconds", str(seconds), "--warmup", str(warmup), "--jobs", str(jobs), "--mode", mode]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=JOIN_TIMEOUT_S + 10 * seconds, check=False)
    if finished.returncode != 0:
        lines = [line for line in finished.stderr.strip().splitlines() if line.strip()]
        raise BenchError(f"the pgqueuer {mode} measurement at {processes} processes failed: {lines[-1] if lines else finished.returncode}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    rate = result["db_counted"] / result["db_window_s"]
    measurement = Measurement(processes, rate, result["db_counted"], result["db_window_s"], jobs, result["latencies"], dry=result["dry"])
    notes = measurement.notes
    tally = "" if result["tally"] is None else f"; the consumers' own tally {result['tally'] / seconds:,.0f} jobs/s"
    notes.append(f"{jobs:,} jobs enqueued in {result['enqueue_s']:.1f} s (untimed); {rate:,.0f} jobs/s counted in its log table{tally}")
    sessions = result["consumer_settings"]
    values = {name: sorted({str(each[name]) for each in sessions}) for name in ("synchronous_commit", "fsync")}
    notes.append(f"consumer sessions: synchronous_commit {'/'.join(values['synchronous_commit'])}, fsync {'/'.join(values['fsync'])}")
    if result["ack_statements"]:
        mean = result["acks_total"] / result["ack_statements"]
        notes.append(
            f"what stayed batched: {result['acks_total']:,} acks went out in {result['ack_statements']:,} statements,"
            f" {mean:.2f} per statement (max {result['acks_max']}), written after the job returned; up to 2 jobs in flight per process"
        )
    if measurement.dry:
        notes.append("the queue ran dry before the window closed")
    return measurement, result


# ------------------------------------------------------------------ the run


def processes_list(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated process counts such as 1,4,16, not {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"process counts must be at least 1: {text!r}")
    return counts


def seconds_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def modes_list(text: str) -> list[str]:
    modes = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [mode for mode in modes if mode not in PGQUEUER_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(PGQUEUER_MODES)}, not {text!r}")
    return modes


def measure_with_retries(measure: Any, side: str, processes: int, window_s: float, previous: Measurement | None) -> Any:
    """Run `measure(pool)` with a pool sized from the previous count; again, larger, while it runs dry."""
    pool = pool_size(side, processes, window_s, previous)
    for attempt in range(DRY_RETRIES + 1):
        outcome = measure(pool)
        measurement = outcome[0] if isinstance(outcome, tuple) else outcome
        if not measurement.dry or attempt == DRY_RETRIES:
            return outcome
        print(f"  ({side} at {processes_text(processes)} ran dry with {pool:,}; measuring again with more)", flush=True)
        pool = retry_pool(measurement, window_s)
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--pgqueuer-driver"]:
        return pgqueuer_driver_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=URL_DEFAULT, help=f"PostgreSQL URL (default {URL_DEFAULT}); sqlite://[/DIR] for development")
    parser.add_argument(
        "--seconds", type=seconds_value, default=SECONDS_DEFAULT, help=f"window per measurement (default {SECONDS_DEFAULT:g})"
    )
    parser.add_argument("--warmup", type=seconds_value, default=WARMUP_DEFAULT, help=f"uncounted start (default {WARMUP_DEFAULT:g})")
    parser.add_argument(
        "--processes", type=processes_list, default=processes_list(PROCESSES_DEFAULT), help=f"(default {PROCESSES_DEFAULT})"
    )
    parser.add_argument("--skip-pgqueuer", action="store_true", help="measure shiftchange only")
    parser.add_argument("--skip-intake", action="store_true", help="do not measure bulk intake (benchmarks/intake.py)")
    parser.add_argument("--skip-wakeup", action="store_true", help="do not measure wake-ups (benchmarks/wakeup.py)")
    parser.add_argument(
        "--pgqueuer-python", default=None, help=f"interpreter with pgqueuer and asyncpg (default {PGQUEUER_PYTHON_DEFAULT} if it exists)"
    )
    parser.add_argument(
        "--pgqueuer-mode", type=modes_list, default=list(PGQUEUER_MODES), help="strict (judged), manager (information); default both"
    )
    arguments = parser.parse_args(argv)
    try:
        return run(arguments)
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run(arguments: argparse.Namespace) -> int:
    url: str = arguments.url
    scheme = urlsplit(url).scheme
    if scheme not in ("postgresql", "postgres", "sqlite"):
        raise BenchError(f"--url must be postgresql://... (or sqlite:// for development), not {shown(url)!r}")
    window_s = arguments.warmup + arguments.seconds
    if scheme != "sqlite":
        facts = server_facts(url)
        where = shown(without_schema(url))
        verified = f"SHOW synchronous_commit = {facts['synchronous_commit']}, SHOW fsync = {facts['fsync']}"
        print(f"PostgreSQL {facts['server_version']} at {where}: {verified}")
        if facts["fsync"] != "on":
            raise BenchError("fsync is off on this server: commits are not durable, so the comparison means nothing")
        if facts["synchronous_commit"] != "on":
            raise BenchError(f"synchronous_commit is {facts['synchronous_commit']}, not on: the comparison needs durable commits")
    pgq_python = pgqueuer_interpreter(arguments, scheme)
    with tempfile.TemporaryDirectory(prefix="shiftchange-pg-bench-") as scratch:
        if scheme == "sqlite":
            directory = Path(sqlite_path(url) or scratch)
            if not directory.is_dir():
                raise BenchError(f"{directory} is not a directory (sqlite:///DIRECTORY, one file per measurement)")
            print(f"development run on SQLiteStore files in {directory}: no server, pgqueuer skipped")
        if scheme != "sqlite":
            floor = server_floor(url)
            arguments.floor = floor
            print("server floor, p50 on one connection: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in floor.items()))
        print(
            f"window {arguments.seconds:g} s after {arguments.warmup:g} s warm-up; processes {', '.join(map(str, arguments.processes))};"
            f" shiftchange: {COMMITS_PER_CYCLE} commits per cycle (claim+start in one, renew, complete: 4 contracts)"
            + ("; pgqueuer strict: 2 per job (dequeue, ack)" if pgq_python else ""),
            flush=True,
        )
        sc: dict[int, Measurement] = {}
        pgq: dict[str, dict[int, Measurement]] = {mode: {} for mode in arguments.pgqueuer_mode}
        previous_sc: Measurement | None = None
        previous_pgq: dict[str, Measurement | None] = dict.fromkeys(arguments.pgqueuer_mode)
        for number, processes in enumerate(arguments.processes):

            def measure_sc(pool: int, processes: int = processes, number: int = number) -> Measurement:
                return shiftchange_one(url, scheme, scratch if scheme == "sqlite" else None, processes, number, pool, arguments)

            sc[processes] = previous_sc = measure_with_retries(measure_sc, "shiftchange", processes, window_s, previous_sc)
            report_sc(sc[processes])
            if pgq_python is None:
                continue
            for mode in arguments.pgqueuer_mode:

                def measure_pgq(pool: int, processes: int = processes, mode: str = mode) -> tuple[Measurement, dict]:
                    return pgqueuer_measure(pgq_python, url, processes, pool, arguments.seconds, arguments.warmup, mode)

                measurement, result = measure_with_retries(measure_pgq, "pgqueuer", processes, window_s, previous_pgq[mode])
                pgq[mode][processes] = previous_pgq[mode] = measurement
                report_pgq(mode, measurement, result)
        status = summary(sc, pgq, pgq_python is not None, getattr(arguments, "floor", None))
        if scheme == "sqlite":
            return status
        print()
        more = extras(url, arguments)
        return status if all(more) else 1


def pgqueuer_interpreter(arguments: argparse.Namespace, scheme: str) -> str | None:
    if arguments.skip_pgqueuer:
        print("pgqueuer: skipped (--skip-pgqueuer)")
        return None
    if scheme == "sqlite":
        return None
    python = arguments.pgqueuer_python
    if python is None:
        if not Path(PGQUEUER_PYTHON_DEFAULT).exists():
            print(f"pgqueuer: skipped, {PGQUEUER_PYTHON_DEFAULT} does not exist; create it with: {PGQUEUER_VENV_HINT}")
            return None
        python = PGQUEUER_PYTHON_DEFAULT
    elif not Path(python).exists():
        raise BenchError(f"--pgqueuer-python {python} does not exist; create one with: {PGQUEUER_VENV_HINT}")
    probe = subprocess.run(
        [python, "-c", "import asyncpg, pgqueuer, importlib.metadata as m; print(m.version('pgqueuer'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        raise BenchError(f"{python} cannot import pgqueuer and asyncpg; create a venv with: {PGQUEUER_VENV_HINT}")
    print(f"pgqueuer {probe.stdout.strip()} under {python}")
    return python


def shiftchange_one(
    url: str, scheme: str, scratch: str | None, processes: int, number: int, pool: int, arguments: argparse.Namespace
) -> Measurement:
    if scheme == "sqlite":
        directory = Path(sqlite_path(url) or str(scratch))
        path = directory / f"bench-{processes}-{number}-{secrets.token_hex(3)}.sqlite"
        try:
            return shiftchange_measure(f"sqlite:///{path}", processes, pool, arguments.seconds, arguments.warmup)
        finally:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{path}{suffix}").unlink()
    schema = new_schema("sc", processes)
    try:
        return shiftchange_measure(with_schema(url, schema), processes, pool, arguments.seconds, arguments.warmup)
    finally:
        drop_schema(url, schema)


def drop_schema(url: str, schema: str) -> None:
    """Drop a measurement's schema; a server gone by then is said in one line, not a traceback."""
    import psycopg

    try:
        with psycopg.connect(without_schema(url), connect_timeout=5, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error as error:
        print(f"warning: could not drop schema {schema}: {str(error).strip().splitlines()[0]}", file=sys.stderr)


def pair(samples: list[float]) -> str:
    """p50 / p99 in milliseconds, compact."""
    return f"{ms(percentile(samples, 0.5)).strip()} / {ms(percentile(samples, 0.99)).strip()}"


def latency_line(latencies: dict[str, list[float]], names: tuple[str, ...]) -> str:
    parts = (f"{name} {ms(percentile(latencies[name], 0.5))} / {ms(percentile(latencies[name], 0.99))}" for name in names)
    return "  latency p50 / p99 ms: " + ",  ".join(parts)


def report_sc(measurement: Measurement) -> None:
    m = measurement
    commits = f"{COMMITS_PER_CYCLE * m.rate:,.0f} commits/s"
    print(f"shiftchange      {processes_text(m.processes):>12} {m.rate:>10,.0f} cycles/s   ({m.counted:,} cycles, {commits})")
    for note in m.notes:
        print(f"  {note}")
    print(latency_line(m.latencies, (*SC_CALLS, "cycle")), flush=True)


def report_pgq(mode: str, measurement: Measurement, result: dict) -> None:
    m = measurement
    print(f"pgqueuer {mode:<7} {processes_text(m.processes):>12} {m.rate:>10,.0f} jobs/s     ({m.counted:,} jobs in {m.window_s:.2f} s)")
    for note in m.notes:
        print(f"  {note}")
    if m.latencies:
        print(latency_line(m.latencies, ("dequeue", "ack", "dequeue+ack")), flush=True)
    else:
        print("  latency: not measured (acknowledgements are written by a background task, after the job returns)", flush=True)


def summary(
    sc: dict[int, Measurement], pgq: dict[str, dict[int, Measurement]], pgq_ran: bool, floor: dict[str, float] | None = None
) -> int:
    print()
    modes = [mode for mode in pgq if pgq[mode]]
    header = "processes  shiftchange cycles/s" + "".join(f"  pgqueuer {mode} jobs/s  ratio" for mode in modes)
    print(header)
    for processes, measurement in sc.items():
        row = f"{processes:>9}  {measurement.rate:>20,.0f}"
        for mode in modes:
            other = pgq[mode].get(processes)
            width = len(f"  pgqueuer {mode} jobs/s")
            if other is None:
                row += f"{'n/a':>{width}}  {'n/a':>5}"
            else:
                row += f"{other.rate:>{width},.0f}  {measurement.rate / other.rate if other.rate else math.inf:>5.2f}"
        print(row)
    print()
    columns = [*SC_CALLS, "cycle"] + (["pgqueuer dequeue+ack"] if "strict" in modes else [])
    print("latency p50 / p99 ms" + "".join(f"{name:>{max(18, len(name) + 2)}}" for name in columns))
    for processes, measurement in sc.items():
        cells = [measurement.latencies[name] for name in (*SC_CALLS, "cycle")]
        if "strict" in modes:
            strict_at = pgq["strict"].get(processes)
            cells.append(strict_at.latencies.get("dequeue+ack", []) if strict_at else [])
        row = "".join(f"{pair(cell):>{max(18, len(name) + 2)}}" for name, cell in zip(columns, cells, strict=True))
        print(f"{processes:>9}{'':11}{row}")
    print()
    strict = pgq.get("strict", {})
    if not strict:
        reason = "pgqueuer was not measured" if not pgq_ran else "pgqueuer strict was not measured"
        print(f"targets: shiftchange against pgqueuer strict: not judged ({reason})")
        return 1
    verdicts = []
    for processes, measurement in sc.items():
        other = strict.get(processes)
        if other is None:
            continue
        ok = measurement.rate >= other.rate and not measurement.dry and not other.dry
        ratio = measurement.rate / other.rate if other.rate else math.inf
        print(
            f"target: cycles/s >= pgqueuer strict jobs/s at {processes_text(processes)}:"
            f" {measurement.rate:,.0f} vs {other.rate:,.0f}, ratio {ratio:.2f} (>= 1.00)   {verdict(ok)}"
        )
        verdicts.append(ok)
    if 4 in sc and TARGET_PROCESSES in sc:
        ok = sc[TARGET_PROCESSES].rate >= FLAT_FRACTION * sc[4].rate
        print(
            f"target: cycles/s rising or flat from 4 to {TARGET_PROCESSES} processes: {sc[4].rate:,.0f} -> {sc[TARGET_PROCESSES].rate:,.0f}"
            f" (at least {FLAT_FRACTION:.0%} of the 4-process rate)   {verdict(ok)}"
        )
        verdicts.append(ok)
    judged_at = TARGET_PROCESSES if TARGET_PROCESSES in sc else max(sc)
    other = strict.get(judged_at)
    if other is not None and other.latencies.get("dequeue+ack") and sc[judged_at].latencies.get("cycle"):
        ours, theirs = percentile(sc[judged_at].latencies["cycle"], 0.99), percentile(other.latencies["dequeue+ack"], 0.99)
        ok = ours <= P99_FACTOR * theirs
        print(
            f"target: cycle p99 at {processes_text(judged_at)} <= {P99_FACTOR:g} x pgqueuer dequeue+ack p99 (four contracts against two"
            f" statements): {1e3 * ours:.2f} ms, limit {1e3 * P99_FACTOR * theirs:.2f} ms (pgqueuer {1e3 * theirs:.2f} ms)   {verdict(ok)}"
        )
        verdicts.append(ok)
    if not all(verdicts):
        lat = sc[judged_at].latencies
        parts = ", ".join(f"{name} {1e3 * percentile(lat[name], 0.5):.2f} ms" for name in SC_CALLS)
        print(f"  hint: shiftchange p50 per call at {judged_at} processes: {parts}")
    if floor and 1 in sc and sc[1].latencies.get("cycle"):
        read_ms, commit_ms = floor["locking read"], floor["durable commit"]
        ours_floor = COMMITS_PER_CYCLE * (read_ms + commit_ms)
        cycle_ms = 1e3 * percentile(sc[1].latencies["cycle"], 0.5)
        print(
            f"where the time goes at 1 process: cycle p50 {cycle_ms:.2f} ms; its trips' floor on this server"
            f" {COMMITS_PER_CYCLE} x ({read_ms:.2f} ms locking read + {commit_ms:.2f} ms durable commit) = {ours_floor:.2f} ms,"
            f" the other {cycle_ms - ours_floor:.2f} ms client and statement CPU"
        )
        theirs = strict.get(1)
        if theirs is not None and theirs.latencies.get("dequeue+ack"):
            job_ms = 1e3 * percentile(theirs.latencies["dequeue+ack"], 0.5)
            print(
                f"  pgqueuer dequeue+ack p50 {job_ms:.2f} ms against a floor of 2 durable commits, {2 * commit_ms:.2f} ms: a cycle of"
                f" {COMMITS_PER_CYCLE} commits with nothing but its floor would reach {job_ms / ours_floor:.2f} x pgqueuer's rate"
            )
    return 0 if verdicts and all(verdicts) else 1


def extras(url: str, arguments: argparse.Namespace) -> list[bool]:
    """Bulk intake and wake-ups (benchmarks/intake.py, benchmarks/wakeup.py), each printed with its target; their verdicts."""
    found = []
    for module, function, flag in (("intake", "measure_intake", "skip_intake"), ("wakeup", "measure_wakeup", "skip_wakeup")):
        if getattr(arguments, flag):
            print(f"{module}: skipped (--{flag.replace('_', '-')})")
            continue
        try:
            measure = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError) as error:
            print(f"{module}: not measured ({error})")
            found.append(False)
            continue
        try:
            figures = measure(url)
        except Exception as error:  # each module's BenchError: a figure not measured is a target not met, said in one line
            if type(error).__name__ != "BenchError":
                raise
            print(f"{module}: not measured ({error})")
            found.append(False)
            continue
        for line in figures.get("lines", []):
            print(f"  {line}")
        print(figures["target"])
        found.append(bool(figures["ok"]))
    return found


if __name__ == "__main__":
    sys.exit(main())
