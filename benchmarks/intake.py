"""Bulk intake: tasks/s through `Orchestrator.submit_many` (create, accept and first dispatch, one transaction per batch).

    python benchmarks/intake.py [--url URL] [--tasks 20000] [--batch 500]

What is measured, on one fresh store (PostgreSQL: a fresh schema
`bench_intake_<pid>_<hex>`, dropped afterwards; `sqlite://` or
`sqlite:///DIR`: a fresh SQLiteStore file in a temporary directory or DIR,
removed afterwards; `memory:` a MemoryStore, the core's own cost):

- submit_many: `tasks` tasks in batches of `batch` Submissions (the last
  batch may be smaller), each batch one call and one store transaction
  (per task: a Task inserted, accepted and dispatched, Attempt 1 appended,
  four events), submitted back to back by one thread on one orchestrator.
  tasks/s is `tasks` over the wall time of the whole loop; the batch latency
  is per call (`time.perf_counter`), p50 and p99 by nearest rank. Before the
  loop one batch is submitted untimed (connections, prepared statements,
  caches), and the figures count only the loop.
- For comparison, one by one: `ONE_BY_ONE_TASKS` further tasks (at most
  `tasks`) through `create_task`, `accept_task` and `dispatch`, three
  contracts and three commits per task, in the same store after the loop.

Every call's results are checked (a refused entry stops the run: it would
not be intake), and so is the end: the admission queue holds one waiting
Attempt per task submitted. The orchestrator reads the wall clock and keeps
admission limits out of the way, as benchmarks/postgres.py does; no
admission step runs. On PostgreSQL the server's version and the
`synchronous_commit` and `fsync` settings are read on one of the store's own
pooled connections and printed; the target is judged only when both are on
(a commit that does not wait for the disk is not the figure asked for).

Target: submit_many >= 2,000 tasks/s on PostgreSQL. Exit status 0 on PASS,
1 on FAIL or when the target could not be judged (any store but
PostgreSQL), 2 on bad input or an unreachable server.

`measure_intake(url, tasks, batch)` returns the figures as a dict, with
`lines` (what to print), `target` (the target's line) and `ok` (its
verdict); benchmarks/postgres.py prints it beside its own. This file imports
only the standard library at its top; shiftchange is imported where it is
used.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from common import positive, verdict

URL_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
TASKS_DEFAULT = 20_000
BATCH_DEFAULT = 500
TARGET_TASKS_PER_S = 2_000.0
ONE_BY_ONE_TASKS = 1_000
"""How many tasks the one-by-one comparison submits (at most `tasks`): three commits each, so it is the slow half of the run."""
WORKSPACES = 8
"""The tasks are spread over this many workspaces (bulkhead partitions), round robin."""
OBJECTIVE = "benchmark bulk intake"
HYPOTHESIS = "the store keeps up with intake"


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


def shown(url: str) -> str:
    """`url` fit to print, its password replaced."""
    from shiftchange.stores import describe

    return describe(url)


def store_kind(url: Any) -> str:
    if not isinstance(url, str):
        raise BenchError(f"the URL must be a string, not {type(url).__name__}")
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    if scheme == "sqlite":
        return "sqlite"
    if url == "memory:":
        return "memory"
    raise BenchError(f"the URL must be postgresql://..., sqlite://[/DIR] or memory:, not {url!r:.80}")


def check_counts(tasks: Any, batch: Any) -> None:
    from shiftchange.core import SUBMISSIONS_MAX

    for name, value in (("tasks", tasks), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BenchError(f"{name} must be a whole number of at least 1, not {value!r}")
    if batch > SUBMISSIONS_MAX:
        raise BenchError(f"batch must be at most {SUBMISSIONS_MAX:,} (SUBMISSIONS_MAX, what one submit_many call takes), not {batch:,}")


@contextlib.contextmanager
def fresh_store(url: str, kind: str):
    """A fresh, empty store for one measurement; its schema or file is removed afterwards."""
    from shiftchange.core import InputError, MemoryStore, StoreError
    from shiftchange.stores import open_store

    if kind == "memory":
        yield MemoryStore()
        return
    with contextlib.ExitStack() as cleanup:
        if kind == "sqlite":
            given = unquote(urlsplit(url).path[1:])
            directory = Path(given) if given else Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="shiftchange-intake-")))
            if not directory.is_dir():
                raise BenchError(f"{directory} is not a directory (sqlite:///DIRECTORY: the benchmark makes a fresh file in it)")
            path = directory / f"bench-intake-{os.getpid()}-{secrets.token_hex(3)}.sqlite"
            target = f"sqlite:///{path}"
            for suffix in ("", "-wal", "-shm"):
                cleanup.callback(lambda name=f"{path}{suffix}": Path(name).unlink(missing_ok=True))
        else:
            target = with_schema(url, f"bench_intake_{os.getpid()}_{secrets.token_hex(3)}")
        try:
            store = open_store(target)
        except (StoreError, InputError) as error:
            raise BenchError(f"cannot open the store at {shown(url)}: {error}") from None
        try:
            yield store
        finally:
            drop = getattr(store, "drop_schema", None)
            if kind == "postgresql" and drop is not None:
                try:
                    drop()
                except Exception as error:  # the figures are measured: say the schema is left, do not hide them
                    print(f"warning: could not drop schema {store.schema}: {error}", file=sys.stderr)
            else:
                store.close()


def orchestrator_for(store: Any) -> Any:
    """An Orchestrator on the wall clock whose admission limits are out of the way (no admission step runs here anyway)."""
    from shiftchange.core import AdmissionConfig, CoreConfig, LedgerProvider, Orchestrator, ReliabilityConfig

    clock = WallClock()
    unlimited = AdmissionConfig(queue_depth_max=10**9, queue_age_max_s=1e9, partition_concurrency_max=10**9)
    return Orchestrator(store, clock, LedgerProvider(clock=clock), CoreConfig(admitted_max=10**9), ReliabilityConfig(admission=unlimited))


def server_settings(store: Any) -> dict[str, str]:
    """The server's version and durability settings as the store's own sessions see them; {} for a store without a pool.

    This peeks at `PostgresStore._pool` on purpose, as benchmarks/postgres.py
    does: the settings that count are those of the connections the batches commit on.
    """
    pool = getattr(store, "_pool", None)
    if pool is None or not callable(getattr(pool, "connection", None)):
        return {}
    found = {}
    with pool.connection() as connection:
        for name in ("server_version", "synchronous_commit", "fsync"):
            (found[name],) = connection.execute(f"SHOW {name}").fetchone()
        connection.rollback()
    return {name: str(value) for name, value in found.items()}


def submissions(prefix: str, count: int) -> list[Any]:
    from shiftchange.core import Plan, Submission

    plan = Plan(HYPOTHESIS)
    return [Submission(f"{prefix}-{n}", OBJECTIVE, f"bench/repo-{n % WORKSPACES}", plan) for n in range(count)]


def submit(orchestrator: Any, entries: list[Any]) -> None:
    results = orchestrator.submit_many(entries)
    refused = [(entry.task_id, result) for entry, result in zip(entries, results, strict=True) if not result.accepted]
    if refused:
        task_id, result = refused[0]
        raise RuntimeError(f"{len(refused)} of {len(entries)} entries were refused, the first {task_id}: {result.code}: {result.reason}")


def measure_intake(url: str, tasks: int = TASKS_DEFAULT, batch: int = BATCH_DEFAULT) -> dict:
    """Bulk intake on a fresh store at `url`: `tasks` tasks through submit_many in batches of `batch`, and one by one for comparison.

    Returns the figures (`tasks_per_s`, `batches`, `batch_p50_ms`,
    `batch_p99_ms`, `one_by_one_tasks`, `one_by_one_per_s`, `speedup`, ...)
    with `lines` to print, `target` (the target's line) and `ok` (its
    verdict). BenchError on bad input or a store that cannot be opened.
    """
    kind = store_kind(url)
    check_counts(tasks, batch)
    with fresh_store(url, kind) as store:
        orchestrator = orchestrator_for(store)
        settings = server_settings(store)
        submit(orchestrator, submissions("warm", min(batch, tasks)))
        entries = submissions("intake", tasks)
        chunks = [entries[start : start + batch] for start in range(0, tasks, batch)]
        trips_before = getattr(store, "round_trips", None)
        spent: list[float] = []
        began = time.perf_counter()
        for chunk in chunks:
            t0 = time.perf_counter()
            submit(orchestrator, chunk)
            spent.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - began
        trips = None if trips_before is None else (store.round_trips - trips_before) / len(chunks)
        sample = min(ONE_BY_ONE_TASKS, tasks)
        single = submissions("single", sample)
        began = time.perf_counter()
        for entry in single:
            orchestrator.create_task(entry.task_id, entry.objective, entry.workspace)
            accepted = orchestrator.accept_task(entry.task_id)
            dispatched = orchestrator.dispatch(entry.task_id, entry.plan) if accepted.accepted else accepted
            if not dispatched.accepted:
                raise RuntimeError(f"one by one, {entry.task_id} was refused: {dispatched.code}: {dispatched.reason}")
        single_s = time.perf_counter() - began
        queued = orchestrator.admission.queue_depth()
        expected = min(batch, tasks) + tasks + sample
        if queued != expected:
            raise RuntimeError(f"the admission queue holds {queued:,} Attempts after the run, not the {expected:,} submitted")
        last = store.get_task(entries[-1].task_id)
        if last is None or last.state != "in_progress":
            raise RuntimeError(f"the last task submitted is {last!r:.80} in the store, not in progress")
    rate = tasks / elapsed
    single_rate = sample / single_s
    figures: dict[str, Any] = {
        "store": kind,
        "tasks": tasks,
        "batch": batch,
        "batches": len(chunks),
        "seconds": elapsed,
        "tasks_per_s": rate,
        "batch_p50_ms": 1e3 * percentile(spent, 0.5),
        "batch_p99_ms": 1e3 * percentile(spent, 0.99),
        "round_trips_per_batch": trips,
        "one_by_one_tasks": sample,
        "one_by_one_per_s": single_rate,
        "speedup": rate / single_rate,
        "settings": settings,
    }
    figures["lines"] = report_lines(figures)
    figures["target"], figures["ok"] = judged(figures)
    return figures


STORE_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLiteStore", "memory": "MemoryStore"}


def report_lines(figures: dict[str, Any]) -> list[str]:
    f = figures
    where = STORE_NAMES[f["store"]]
    settings = f["settings"]
    if settings:
        where += f" {settings['server_version']} (synchronous_commit = {settings['synchronous_commit']}, fsync = {settings['fsync']})"
    trips = "" if f["round_trips_per_batch"] is None else f", {f['round_trips_per_batch']:,.0f} round trips a batch"
    return [
        f"intake on {where}: {f['tasks']:,} tasks in {f['batches']:,} submit_many calls of {f['batch']:,} (one transaction each)",
        f"submit_many: {f['tasks_per_s']:,.0f} tasks/s in {f['seconds']:.2f} s; batch p50 {f['batch_p50_ms']:.1f} ms,"
        f" p99 {f['batch_p99_ms']:.1f} ms{trips}",
        f"one by one (create_task, accept_task, dispatch: 3 commits a task), {f['one_by_one_tasks']:,} tasks:"
        f" {f['one_by_one_per_s']:,.0f} tasks/s; submit_many {f['speedup']:.1f} x that",
    ]


def judged(figures: dict[str, Any]) -> tuple[str, bool]:
    """The target's line and its verdict: judged on PostgreSQL with durable commits only."""
    head = f"target: submit_many >= {TARGET_TASKS_PER_S:,.0f} tasks/s on PostgreSQL:"
    if figures["store"] != "postgresql":
        return f"{head} not judged ({figures['tasks_per_s']:,.0f} tasks/s on {STORE_NAMES[figures['store']]})", False
    settings = figures["settings"]
    durable = settings.get("synchronous_commit") == "on" and settings.get("fsync") == "on"
    if not durable:
        shown_settings = ", ".join(f"{name} = {settings.get(name, '?')}" for name in ("synchronous_commit", "fsync"))
        return f"{head} not judged ({shown_settings}: commits are not durable)", False
    ok = figures["tasks_per_s"] >= TARGET_TASKS_PER_S
    return f"{head} {figures['tasks_per_s']:,.0f} tasks/s   {verdict(ok)}", ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=URL_DEFAULT, help=f"store URL (default {URL_DEFAULT}); sqlite://[/DIR] or memory: for development")
    parser.add_argument("--tasks", type=positive, default=TASKS_DEFAULT, help=f"tasks in the timed loop (default {TASKS_DEFAULT:,})")
    parser.add_argument("--batch", type=positive, default=BATCH_DEFAULT, help=f"Submissions per submit_many call (default {BATCH_DEFAULT})")
    arguments = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        figures = measure_intake(arguments.url, arguments.tasks, arguments.batch)
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
