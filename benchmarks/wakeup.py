"""Wake-ups: how soon an idle worker learns of admitted work (LISTEN/NOTIFY against polling), and what the NOTIFY costs.

    python benchmarks/wakeup.py [--url URL] [--samples 200] [--poll-samples 50] [--cost-seconds 2]

What is measured, on one fresh PostgreSQL schema `bench_wake_<pid>_<hex>`
(dropped afterwards):

- Wake-up. An idle worker in an OS process of its own (spawned, its own
  store handle and Orchestrator on the wall clock) runs `Worker.run`'s
  loop: `claim_next` in its workspace; when that finds nothing, it waits in
  `shiftchange.stores.wakeup.idle_wait(store, WAIT_S, stop, workspace)`,
  then claims again. The admitting process (this one, another store
  handle) takes one sample at a time: once the worker says it is idle, it
  creates, accepts and dispatches one task (no NOTIFY: nothing is admitted
  yet), waits a random 5-30 ms (so the wait is surely under way), then
  calls `run_admission`, whose one transaction admits the Attempt and
  sends the store's `pg_notify` with its COMMIT. Figures, on `time.monotonic`, which
  on Linux and macOS is one clock for every process of the machine:
  "wake-up" is from `run_admission`'s return (the admitting side has heard
  its commit) to `idle_wait`'s return in the worker; "claimed" is to the
  worker's `claim_next` returning the Attempt. The notification travels
  with the commit, so a wake-up can come a little before the admitting
  call returns: such a sample is negative and kept as it is. `WARMUP`
  samples are taken first and not counted.
- The polling baseline: the same worker and protocol, but its idle wait is
  `stop.wait(idle_poll_s)`, the runtime's default poll (`RuntimeConfig`,
  0.2 s), with the admission a random 0..idle_poll_s after the worker went
  idle (the task made before that pause): the expected claim delay is
  about half the poll, plus a claim.
- The cost of the NOTIFY. PostgresStore sends it with every admitting
  commit and it cannot be switched off, so it is measured directly on
  plain connections to the same server: a transaction that updates one row
  of its own (`BEGIN; UPDATE; COMMIT` in one round trip, as the store
  sends a commit) against the same transaction with `SELECT pg_notify(...)`
  before COMMIT, while a connection LISTENs on the channel and drains it.
  Each arm runs `--cost-seconds` on fresh threads, one connection each, in
  COST_ROUNDS turns taken round robin with the others (median of the turns):
  1 connection, plain and notifying; 8 connections all plain; 8 all
  notifying (what it would cost if claims and completions notified too);
  7 plain beside 1 notifying (the store's case: one admission leader),
  judged against 7/8 of the 8-plain rate, since the 8th connection takes
  its share of the machine whether it notifies or not. NOTIFY takes a
  database-wide lock from its pre-commit until its commit is done (the WAL
  flush included), so notifying commits cannot share a flush with each
  other, while plain commits can (group commit); plain transactions do not
  wait for the lock. The `run_admission` call time of the wake-up samples
  is printed too: an admitting commit as the store sends it.

The server's version and its `synchronous_commit` and `fsync` settings are
printed (read on one of the store's pooled connections); nothing is changed.

Target: wake-up p50 <= 50 ms (and every sample woken within WAIT_S).
Exit status 0 on PASS, 1 on FAIL, 2 on bad input or an unreachable server.

`measure_wakeup(url, samples)` returns the figures as a dict, with `lines`
(what to print), `target` (the target's line) and `ok` (its verdict);
benchmarks/postgres.py prints it beside its own. This file imports only the
standard library at its top; shiftchange is imported where it is used.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import queue
import random
import secrets
import statistics
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from common import positive, verdict

URL_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
SAMPLES_DEFAULT = 200
POLL_SAMPLES_DEFAULT = 50
"""Polling samples: each takes about a poll, so fewer than the NOTIFY's; enough for a p50."""
COST_SECONDS_DEFAULT = 3.0
WARMUP = 5
TARGET_P50_MS = 50.0
WAIT_S = 5.0
"""The idle wait's timeout in the worker: a NOTIFY sample that has not woken it by then is a miss."""
GATE_S = (0.005, 0.03)
"""The random pause between the worker saying it is idle and the admission (NOTIFY arm)."""
MESSAGE_TIMEOUT_S = 30.0
"""The longest the admitting side waits for any word from the worker; only a broken run reaches it."""
COST_CONNECTIONS = 8
COST_ROUNDS = 3
"""Each cost arm runs this many times, its `--cost-seconds` split between them; each figure is the median of its runs."""
WORKSPACE = "bench/repo"
OBJECTIVE = "benchmark wake-ups"
SPAWN = multiprocessing.get_context("spawn")


class BenchError(Exception):
    """A condition the benchmark cannot measure under (bad input, no server): one line for the user, exit status 2."""


class WallClock:
    """The deployment clock: seconds since the epoch."""

    def now(self) -> float:
        return time.time()


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `samples`; NaN when there are none."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))]


def with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "schema"] + [("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def without_schema(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode([(key, value) for key, value in parse_qsl(parts.query) if key != "schema"])))


def shown(url: str) -> str:
    """`url` fit to print, its password replaced."""
    from shiftchange.stores import describe

    return describe(url)


def check_input(url: Any, samples: Any, poll_samples: Any, cost_s: Any) -> None:
    if not isinstance(url, str) or urlsplit(url).scheme.lower() not in ("postgresql", "postgres"):
        raise BenchError(f"the URL must be postgresql://... (wake-ups are PostgreSQL's LISTEN/NOTIFY), not {url!r:.80}")
    for name, value in (("samples", samples), ("poll_samples", poll_samples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BenchError(f"{name} must be a whole number of at least 1, not {value!r}")
    if isinstance(cost_s, bool) or not isinstance(cost_s, int | float) or not 0 < cost_s <= 600:
        raise BenchError(f"cost_s must be a number of seconds in (0, 600], not {cost_s!r}")


def orchestrator_for(store: Any) -> Any:
    """An Orchestrator on the wall clock whose admission limits are out of the way, as benchmarks/postgres.py builds it."""
    from shiftchange.core import AdmissionConfig, CoreConfig, LedgerProvider, Orchestrator, ReliabilityConfig

    clock = WallClock()
    unlimited = AdmissionConfig(queue_depth_max=10**9, queue_age_max_s=1e9, partition_concurrency_max=10**9)
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(admitted_max=10**9), ReliabilityConfig(admission=unlimited))


def server_settings(store: Any) -> dict[str, str]:
    """The server's version and durability settings as the store's own sessions see them (peeks at `_pool`, as intake.py does)."""
    found = {}
    with store._pool.connection() as connection:
        for name in ("server_version", "synchronous_commit", "fsync"):
            (found[name],) = connection.execute(f"SHOW {name}").fetchone()
        connection.rollback()
    return {name: str(value) for name, value in found.items()}


@contextlib.contextmanager
def fresh_store(url: str):
    """A store in a fresh schema `bench_wake_<pid>_<hex>`, dropped afterwards; its URL with the schema."""
    from shiftchange.core import InputError, StoreError
    from shiftchange.stores import open_store

    target = with_schema(url, f"bench_wake_{os.getpid()}_{secrets.token_hex(3)}")
    try:
        store = open_store(target)
    except (StoreError, InputError) as error:
        raise BenchError(f"cannot open the store at {shown(url)}: {error}") from None
    try:
        yield store, target
    finally:
        try:
            store.drop_schema()
        except Exception as error:  # the figures are measured: say the schema is left, do not hide them
            print(f"warning: could not drop schema {store.schema}: {error}", file=sys.stderr)


# ------------------------------------------------------------------ the idle worker (its own process)


def idle_worker(url: str, mode: str, poll_s: float, reports: Any, stop: Any) -> None:
    """Worker.run's idle loop on a store handle of its own: claim, and when nothing is there, wait (`mode`: notify or poll)."""
    try:
        _idle_worker(url, mode, poll_s, reports, stop)
    except BaseException as error:
        reports.put(("error", f"{type(error).__name__}: {error}"))
        raise


def _idle_worker(url: str, mode: str, poll_s: float, reports: Any, stop: Any) -> None:
    from shiftchange.stores import open_store, wakeup

    store = open_store(url)
    try:
        core = orchestrator_for(store)
        if mode == "notify":
            wakeup.idle_wait(store, 0.0, stop, WORKSPACE)  # starts the listener; a thread's first wait returns at once
            listener = wakeup.listener(store)
            if listener is None or not listener.ready(MESSAGE_TIMEOUT_S):
                raise RuntimeError(f"the wake-up listener of {store!r} is not listening")
            wakeup.idle_wait(store, 0.0, stop, WORKSPACE)  # this thread's mark, after the listener's own wake-up
        reports.put(("up", os.getpid()))
        woke, waited, empty = time.monotonic(), False, 0
        while not stop.is_set():
            claim = core.claim_next("bench-worker", WORKSPACE)
            claimed = time.monotonic()
            lease = getattr(claim, "lease", None)
            if lease is not None:
                reports.put(("claimed", lease.attempt_id, woke, claimed))
                waited = False
                continue
            empty += waited  # a wait that ended with nothing to claim: a timeout, or (NOTIFY) a spurious wake-up
            reports.put(("idle", claimed))
            if mode == "notify":
                wakeup.idle_wait(store, WAIT_S, stop, WORKSPACE)
            else:
                stop.wait(poll_s)
            woke, waited = time.monotonic(), True
        reports.put(("done", empty))
    finally:
        store.close()


# ------------------------------------------------------------------ the admitting side


def next_message(reports: Any, worker: Any) -> tuple:
    try:
        message = reports.get(timeout=MESSAGE_TIMEOUT_S)
    except queue.Empty:
        alive = "alive" if worker.is_alive() else f"gone (exit status {worker.exitcode})"
        raise RuntimeError(f"no word from the idle worker in {MESSAGE_TIMEOUT_S:g} s (it is {alive})") from None
    if message[0] == "error":
        raise RuntimeError(f"the idle worker failed: {message[1]}")
    return message


def wake_samples(store: Any, url: str, mode: str, samples: int, poll_s: float) -> dict[str, Any]:
    """`samples` admissions, one at a time, each timed from its commit to the idle worker's wake-up and claim."""
    from shiftchange.core import Plan

    core = orchestrator_for(store)
    reports, stop = SPAWN.Queue(), SPAWN.Event()
    worker = SPAWN.Process(target=idle_worker, args=(url, mode, poll_s, reports, stop), name=f"idle-{mode}", daemon=True)
    worker.start()
    woken, since_start, claimed, admitting, missed = [], [], [], [], 0
    pace = random.Random(f"wakeup {mode}")
    try:
        while next_message(reports, worker)[0] != "up":
            pass
        for number in range(WARMUP + samples):
            while next_message(reports, worker)[0] != "idle":
                pass
            task_id = f"{mode}-{number}"
            core.create_task(task_id, OBJECTIVE, WORKSPACE)
            core.accept_task(task_id)
            dispatched = core.dispatch(task_id, Plan("an idle worker hears of it"))
            if not dispatched.accepted:
                raise RuntimeError(f"dispatch of {task_id} was refused: {dispatched.code}: {dispatched.reason}")
            time.sleep(pace.uniform(*GATE_S) if mode == "notify" else pace.uniform(0.0, poll_s))
            began = time.monotonic()
            decided = core.run_admission()
            done = time.monotonic()
            attempt_id = f"{task_id}#1"
            if not getattr(decided.get(attempt_id), "accepted", False):
                raise RuntimeError(f"run_admission did not admit {attempt_id}: {decided.get(attempt_id)!r:.200}")
            while (message := next_message(reports, worker))[0] != "claimed":
                pass
            if message[1] != attempt_id:
                raise RuntimeError(f"the idle worker claimed {message[1]}, not {attempt_id}")
            if number < WARMUP:
                continue
            _, _, woke, took = message
            if mode == "notify" and woke - done >= WAIT_S:
                missed += 1
            woken.append(woke - done)
            since_start.append(woke - began)
            claimed.append(took - done)
            admitting.append(done - began)
        stop.set()
        while (message := next_message(reports, worker))[0] != "done":
            pass
        empty = message[1]
    finally:
        stop.set()
        worker.join(MESSAGE_TIMEOUT_S)
        if worker.is_alive():
            worker.kill()
            worker.join(MESSAGE_TIMEOUT_S)
    return {"woken": woken, "since_start": since_start, "claimed": claimed, "admitting": admitting, "missed": missed, "empty": empty}


# ------------------------------------------------------------------ the cost of the NOTIFY


def commit_rates(url: str, schema: str, plain: int, notifying: int, seconds: float) -> dict[str, Any]:
    """`plain` and `notifying` connections committing one-row updates as fast as they can for `seconds`: commits/s of each kind."""
    import psycopg
    from psycopg import sql

    from shiftchange.stores import wakeup

    channel = wakeup.channel(schema + "_cost")
    table = sql.Identifier(schema, "notify_cost")
    counts = [0] * (plain + notifying)
    latencies: list[list[float]] = [[] for _ in counts]
    start = threading.Barrier(len(counts) + 1)
    errors: list[BaseException] = []
    window: list[float] = []

    def run(index: int, connection: Any) -> None:
        text = sql.SQL("BEGIN; UPDATE {} SET n = n + 1 WHERE id = {}; {}COMMIT").format(
            table,
            sql.Literal(index),
            sql.SQL("SELECT pg_notify({}, 'admitted'); ").format(sql.Literal(channel)) if index >= plain else sql.SQL(""),
        )
        query = text.as_string(connection)
        cursor = psycopg.ClientCursor(connection)
        try:
            start.wait(MESSAGE_TIMEOUT_S)
            end = window[0] + seconds
            while (began := time.perf_counter()) < end:
                cursor.execute(query)
                while cursor.nextset():
                    pass
                latencies[index].append(time.perf_counter() - began)
                counts[index] += 1
        except BaseException as error:
            errors.append(error)

    with contextlib.ExitStack() as cleanup:
        listening = cleanup.enter_context(psycopg.connect(url, autocommit=True))
        listening.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        draining = threading.Event()

        def drain() -> None:
            while not draining.is_set():
                for _ in listening.notifies(timeout=0.1):
                    pass

        connections = [cleanup.enter_context(psycopg.connect(url, autocommit=True)) for _ in counts]
        threads = [threading.Thread(target=run, args=(index, connection)) for index, connection in enumerate(connections)]
        drainer = threading.Thread(target=drain)
        drainer.start()
        cleanup.callback(drainer.join, MESSAGE_TIMEOUT_S)
        cleanup.callback(draining.set)
        for thread in threads:
            thread.start()
        window.append(time.perf_counter())
        start.wait(MESSAGE_TIMEOUT_S)
        for thread in threads:
            thread.join(seconds + MESSAGE_TIMEOUT_S)
    if errors:
        raise RuntimeError(f"a committing connection failed: {type(errors[0]).__name__}: {errors[0]}")
    flat = {
        kind: [value for index in indices for value in latencies[index]]
        for kind, indices in (("plain", range(plain)), ("notifying", range(plain, len(counts))))
    }
    return {
        "plain_per_s": sum(counts[:plain]) / seconds,
        "notifying_per_s": sum(counts[plain:]) / seconds,
        "plain_p50_ms": 1e3 * percentile(flat["plain"], 0.5),
        "notifying_p50_ms": 1e3 * percentile(flat["notifying"], 0.5),
    }


def notify_cost(url: str, schema: str, seconds: float) -> dict[str, dict[str, Any]]:
    """The arms of the cost measurement (see the module docstring), on a table of its own in the benchmark's schema."""
    import psycopg
    from psycopg import sql

    n = COST_CONNECTIONS
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, n bigint NOT NULL)").format(sql.Identifier(schema, "notify_cost"))
        )
        connection.execute(
            sql.SQL("INSERT INTO {} SELECT id, 0 FROM generate_series(0, %s) AS id").format(sql.Identifier(schema, "notify_cost")), (n,)
        )
    arms = {
        "1 plain": (1, 0),
        "1 notifying": (0, 1),
        f"{n} plain": (n, 0),
        f"{n} notifying": (0, n),
        f"{n - 1} plain + 1 notifying": (n - 1, 1),
    }
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
    for _ in range(COST_ROUNDS):  # the arms in turn, round after round: drift in the machine's load hits each alike
        for name, (plain, notifying) in arms.items():
            rounds[name].append(commit_rates(url, schema, plain, notifying, seconds / COST_ROUNDS))
    return {name: {key: statistics.median(run[key] for run in runs) for key in runs[0]} for name, runs in rounds.items()}


# ------------------------------------------------------------------ the measurement


def measure_wakeup(
    url: str, samples: int = SAMPLES_DEFAULT, *, poll_samples: int = POLL_SAMPLES_DEFAULT, cost_s: float = COST_SECONDS_DEFAULT
) -> dict:
    """Wake-up delays by NOTIFY and by polling, and the NOTIFY's cost, on a fresh schema at `url` (see the module docstring).

    Returns the figures (`wake_p50_ms`, `wake_p99_ms`, `claim_p50_ms`,
    `poll_claim_p50_ms`, `cost`, ...) with `lines` to print, `target` (the
    target's line) and `ok` (its verdict). BenchError on bad input or a
    server that cannot be reached.
    """
    check_input(url, samples, poll_samples, cost_s)
    from shiftchange.runtime.config import RuntimeConfig

    poll_s = RuntimeConfig().idle_poll_s
    with fresh_store(without_schema(url)) as (store, target):
        settings = server_settings(store)
        notified = wake_samples(store, target, "notify", samples, poll_s)
        polled = wake_samples(store, target, "poll", poll_samples, poll_s)
        cost = notify_cost(without_schema(url), store.schema, float(cost_s))
    figures: dict[str, Any] = {
        "samples": samples,
        "poll_samples": poll_samples,
        "idle_poll_s": poll_s,
        "settings": settings,
        "wake_p50_ms": 1e3 * percentile(notified["woken"], 0.5),
        "wake_p99_ms": 1e3 * percentile(notified["woken"], 0.99),
        "wake_max_ms": 1e3 * max(notified["woken"]),
        "wake_from_start_p50_ms": 1e3 * percentile(notified["since_start"], 0.5),
        "claim_p50_ms": 1e3 * percentile(notified["claimed"], 0.5),
        "claim_p99_ms": 1e3 * percentile(notified["claimed"], 0.99),
        "admission_p50_ms": 1e3 * percentile(notified["admitting"], 0.5),
        "admission_p99_ms": 1e3 * percentile(notified["admitting"], 0.99),
        "missed": notified["missed"],
        "empty_wakes": notified["empty"],
        "poll_claim_p50_ms": 1e3 * percentile(polled["claimed"], 0.5),
        "poll_claim_p99_ms": 1e3 * percentile(polled["claimed"], 0.99),
        "cost": cost,
    }
    figures["lines"] = report_lines(figures)
    figures["target"], figures["ok"] = judged(figures)
    return figures


def report_lines(figures: dict[str, Any]) -> list[str]:
    f = figures
    s = f["settings"]
    lines = [
        f"wake-ups on PostgreSQL {s['server_version']} (synchronous_commit = {s['synchronous_commit']}, fsync = {s['fsync']}):"
        f" an idle worker in its own process, one admission at a time",
        f"NOTIFY ({f['samples']} samples): wake-up p50 {f['wake_p50_ms']:.2f} ms, p99 {f['wake_p99_ms']:.2f} ms,"
        f" max {f['wake_max_ms']:.2f} ms after run_admission returned (p50 {f['wake_from_start_p50_ms']:.2f} ms after it began);"
        f" claimed p50 {f['claim_p50_ms']:.2f} ms,"
        f" p99 {f['claim_p99_ms']:.2f} ms; {f['missed']} missed,"
        f" {f['empty_wakes']} waits ended with nothing to claim",
        f"polling every {f['idle_poll_s']:g} s ({f['poll_samples']} samples): claimed p50 {f['poll_claim_p50_ms']:.2f} ms,"
        f" p99 {f['poll_claim_p99_ms']:.2f} ms; NOTIFY claims {f['poll_claim_p50_ms'] / max(f['claim_p50_ms'], 1e-3):.0f} x sooner (p50)",
        f"the admitting commit (run_admission, one Attempt, with its NOTIFY): p50 {f['admission_p50_ms']:.2f} ms,"
        f" p99 {f['admission_p99_ms']:.2f} ms",
        "cost of pg_notify in a one-row commit (commits/s; p50 commit ms):",
    ]
    for name, arm in f["cost"].items():
        parts = []
        if arm["plain_per_s"]:
            parts.append(f"plain {arm['plain_per_s']:,.0f}/s ({arm['plain_p50_ms']:.2f} ms)")
        if arm["notifying_per_s"]:
            parts.append(f"notifying {arm['notifying_per_s']:,.0f}/s ({arm['notifying_p50_ms']:.2f} ms)")
        lines.append(f"  {name + ':':<26} {', '.join(parts)}")
    n = COST_CONNECTIONS
    c = f["cost"]
    alone = c["1 notifying"]["notifying_per_s"] / c["1 plain"]["plain_per_s"]
    every = c[f"{n} notifying"]["notifying_per_s"] / c[f"{n} plain"]["plain_per_s"]
    # Against the same 8 connections all plain, counting 7 of them: the 8th costs its share of the machine either way.
    beside = c[f"{n - 1} plain + 1 notifying"]["plain_per_s"] / (c[f"{n} plain"]["plain_per_s"] * (n - 1) / n)
    lines.append(
        f"  one connection notifying: {alone:.2f} x the plain rate; {n} all notifying: {every:.2f} x;"
        f" {n - 1} plain beside one notifier: {beside:.2f} x"
        f" their rate beside a plain 8th"
    )
    return lines


def judged(figures: dict[str, Any]) -> tuple[str, bool]:
    ok = figures["wake_p50_ms"] <= TARGET_P50_MS and figures["missed"] == 0
    missed = "" if not figures["missed"] else f", {figures['missed']} samples not woken within {WAIT_S:g} s"
    return (
        f"target: wake-up p50 <= {TARGET_P50_MS:g} ms: {figures['wake_p50_ms']:.2f} ms"
        f" (polling every {figures['idle_poll_s']:g} s: claimed p50 {figures['poll_claim_p50_ms']:.2f} ms){missed}   {verdict(ok)}",
        ok,
    )


def server_reachable(url: str) -> None:
    try:
        import psycopg
    except ImportError as error:
        raise BenchError(f"psycopg is not installed in {sys.executable}'s environment ({error})") from None
    try:
        with psycopg.connect(without_schema(url), connect_timeout=5, autocommit=True) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BenchError(f"cannot reach PostgreSQL at {shown(url)}: {first}") from None


def seconds_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"must be in (0, 600] seconds, not {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=URL_DEFAULT, help=f"PostgreSQL URL (default {URL_DEFAULT}); a fresh schema is made in it")
    parser.add_argument("--samples", type=positive, default=SAMPLES_DEFAULT, help=f"NOTIFY wake-up samples (default {SAMPLES_DEFAULT})")
    parser.add_argument(
        "--poll-samples", type=positive, default=POLL_SAMPLES_DEFAULT, help=f"polling samples (default {POLL_SAMPLES_DEFAULT})"
    )
    parser.add_argument(
        "--cost-seconds",
        type=seconds_value,
        default=COST_SECONDS_DEFAULT,
        help=f"seconds per NOTIFY cost arm (default {COST_SECONDS_DEFAULT:g})",
    )
    arguments = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_input(arguments.url, arguments.samples, arguments.poll_samples, arguments.cost_seconds)
        server_reachable(arguments.url)
        figures = measure_wakeup(arguments.url, arguments.samples, poll_samples=arguments.poll_samples, cost_s=arguments.cost_seconds)
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    for line in figures["lines"]:
        print(line)
    print(figures["target"])
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
