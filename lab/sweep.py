"""Sweeps: many seeded runs over a grid of settings, one row per run in a tidy table.

A sweep is the product of a grid (each swept path's values, in the order the
paths were given) with the seeds; each point is a scenario's config with the
fixed overrides and then the point's values applied (`settings.apply`), played
and judged exactly as `sim run` plays one run. Every config is built before
anything runs, so a bad value is one error naming its path and value and no
run, and no file, is started for nothing.

Rows are a function of their run alone: identity (scenario, tasks,
anti-pattern, seed, the digests of its config and of its spec), the swept
values, the metrics flattened with dots, each invariant's verdict, the
history digest and the replay command. Nothing in a row depends on the wall
clock, the executor or the job count, and rows are kept in run order, not
completion order, so the same sweep on one process, a pool or a Dask cluster
gives the same table, and a table can be compared by its digests alone.

A row is keyed by (scenario, tasks, anti-pattern, seed, config digest, spec
digest, swept values), the values compared as formatted text
(`settings.format_value`): that is exactly what makes one run differ from
another in a sweep, it survives a CSV, which keeps only text, and it does
not depend on how the value was spelled on the command line (`1` and `1.0`
are the same drain). The key is what resuming matches: a run whose row is
already in `out` is not played again, and the final file holds the old rows
and the new in run order. A table written with other fixed settings or
another spec (`spec`, `--spec`) holds no row of this sweep, and is refused
rather than resumed.

A sweep of a spec other than the packaged one carries the compiled `Table`
in every `Run`: it is resolved once, before any run, so a bad folder or
revision is one error and no run; a `Table` pickles as its spec, so a pool's
worker or a Dask worker on another machine plays the very spec the sweep
read, needing neither the folder nor the git repository it came from, and
an edit to the folder while the sweep runs changes no run.

The output file is rewritten whole, to a temporary file beside it then
`os.replace`d over it, at most once a second as runs complete and once at
the end: a reader (or an interrupted sweep) only ever sees a complete table,
never half a row, and an interrupted sweep keeps every row it finished.
Appending would be cheaper but could tear the last line and cannot keep run
order; a sweep's table is small beside the runs that fill it.

With a coverage file, each run counts its own events per transition row as
its history streams (`lab/report/coverage.py`) and hands back only the counts, in
its row under `COVERAGE_KEY`; the sweep takes them out before the row is kept,
sums them, and writes the file once, whole, after the last run. Rows resumed
from `out` were not played and cannot be counted, so coverage refuses them.

Local processes are spawned, not forked: a fork of a process that holds
threads (a progress bar's, a Dask client's) can deadlock, and spawned workers
behave the same on every platform.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import itertools
import multiprocessing
import os
import queue
import re
import shlex
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

from tqdm import tqdm

from shiftchange.antipatterns import antipattern as antipattern_named
from shiftchange.core import InputError
from shiftchange.core.table import Table, packaged, table_for
from shiftchange.sim.config import FaultSpec, SimConfig
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import Outcome, play
from shiftchange.spec.coverage import Coverage, CoverageError, check_writable, from_counts, write_coverage
from shiftchange.spec.loader import SpecError
from shiftchange.spec.source import SpecSourceError

from .report import replay_command, spec_given, spec_words
from .report.artifacts import play_with_artifacts, prepare
from .report.coverage import CoverageSink
from .settings import PLACED_PATH, apply, diff, format_value, to_toml
from .settings import get as setting_at
from .summary import counted

__all__ = [
    "EXECUTORS",
    "IDENTITY",
    "RUNS_MAX",
    "Run",
    "build_runs",
    "check_executor",
    "check_jobs",
    "check_seeds",
    "columns",
    "execute",
    "play_run",
    "progress_bar",
    "resolve_table",
    "spec_digest",
    "sweep",
    "sweep_rows",
]

IDENTITY = ("scenario", "tasks", "antipattern", "seed", "config_digest", "spec_digest")
"""The columns that say which run a row is, before the swept paths; `config_digest` names the whole config the run played,
`spec_digest` the transition table (the packaged spec's digest when no spec was given)."""
EXECUTORS = ("processes", "dask")
RUNS_MAX = 100_000
"""A sweep plays at most this many runs (grid points times seeds); every config is built before the first run."""
_TAIL = ("ok", "digest", "replay")
_VERDICT_PREFIXES = ("invariant.", "violations.")
_ZERO_WHEN_MISSING = "final_states."
"""A final state no task of a run reached is a count of zero, not a missing value."""
_TEXT_COLUMNS = frozenset({"scenario", "antipattern", "config_digest", "spec_digest", "digest", "replay"})
_WHOLE_NUMBER = re.compile(r"-?\d+")
WRITE_INTERVAL_S = 1.0
"""The output file is rewritten at most this often (wall seconds) while runs complete, and once at the end."""
COVERAGE_KEY = "coverage"
"""A run asked for coverage hands its counts back inside its row under this key; the sweep takes them out before the row is kept."""
DASK_CONNECT_TIMEOUT_S = 5.0
"""How long a sweep waits to connect to a Dask scheduler (`--scheduler`) before it gives up: a few seconds, not Dask's 30."""
_DASK_MISSING = "the dask executor needs Dask: pip install 'shiftchange[dask]'"
_PARQUET_MISSING = "writing .parquet needs pandas and pyarrow: pip install 'shiftchange[tables]'"


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its place in run order, what identifies it, and the config it plays."""

    index: int
    scenario: str
    seed: int
    antipattern: str | None
    swept: tuple[tuple[str, Any], ...]
    """Each swept path with its typed value, read back from the built config (so `1` and `1.0` agree), in grid order."""
    config: SimConfig
    artifacts: str | None = None
    """The directory this run's artifacts go to, or None for no artifacts."""
    coverage: bool = False
    """Count the run's events per transition row and return the counts with its row (`COVERAGE_KEY`)."""
    table: Table | None = None
    """The spec the run plays (`--spec`), compiled; None for the packaged one. It travels to the worker as its spec."""

    def key(self) -> tuple[str, ...]:
        config = self.config
        identity = (self.scenario, _cell(config.workload.tasks), _cell(self.antipattern), _cell(self.seed), config_digest(config))
        return (*identity, spec_digest(self.table), *(format_value(value) for _, value in self.swept))


def config_digest(config: SimConfig) -> str:
    """A short SHA-256 of the whole config as TOML: two rows with one digest ran the same settings, fixed ones included."""
    return hashlib.sha256(to_toml(config).encode()).hexdigest()[:16]


def spec_digest(table: Table | None) -> str:
    """The digest of what the run's spec decides (`Table.digest`); the packaged spec's for None."""
    return (packaged() if table is None else table).digest


def resolve_table(spec: str | os.PathLike[str] | Table | None) -> Table | None:
    """The table a sweep (or map, or tuning) plays: None stays None (the packaged one), else `core.table.table_for(spec)`.

    A folder or revision that names no spec, or a malformed one, is an `InputError` here, before anything runs.
    """
    if spec is None:
        return None
    try:
        return table_for(spec)
    except (SpecSourceError, SpecError) as error:
        raise InputError(str(error)) from None


# ------------------------------------------------------------------ planning


def build_runs(
    grid: Mapping[str, Iterable[Any]],
    seeds: Iterable[int],
    scenario: str,
    tasks: int | None,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]],
    antipattern: str | None,
    artifacts: str | os.PathLike[str] | None = None,
    faults: tuple[FaultSpec, ...] = (),
    table: Table | None = None,
) -> list[Run]:
    """Every run of the sweep, in run order, each config built and validated; nothing runs.

    `faults` are placed in every run beside those the overrides place (a config file's `[[fault]]` tables); every run
    plays `table` (None: the packaged spec).
    """
    seeds = check_seeds(seeds)
    grid = {path: _values(path, values) for path, values in grid.items()}
    _check_size(grid, seeds)
    fixed = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides)
    pattern = antipattern_named(antipattern) if antipattern is not None else None
    _config(scenario, seeds[0], tasks, fixed, [], faults, pattern, blame="the fixed settings")
    _check_values(grid, scenario, seeds[0], tasks, fixed, faults, pattern)
    runs = []
    for point in itertools.product(*grid.values()):
        assignments = list(zip(grid, point, strict=True))
        for seed in seeds:
            config = _config(scenario, seed, tasks, fixed, assignments, faults, pattern)
            swept = tuple((path, setting_at(config, path)) for path in grid)
            runs.append(Run(len(runs), scenario, seed, antipattern, swept, config, table=table))
    if artifacts is not None:
        folder = prepare(artifacts)
        runs = [_with_artifacts(run, folder) for run in runs]
    _check_distinct(runs)
    return runs


def check_seeds(seeds: Iterable[int]) -> list[int]:
    """The seeds as a list: at least one, each a whole number from 0, none twice (else InputError)."""
    listed = list(seeds)
    if not listed:
        raise InputError("a sweep needs at least one seed")
    for seed in listed:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"a seed must be a whole number, not negative, not {seed!r}")
    if len(set(listed)) != len(listed):
        repeated = next(seed for seed in listed if listed.count(seed) > 1)
        raise InputError(f"seed {repeated} is given twice")
    return listed


def _values(path: str, values: Iterable[Any]) -> list[Any]:
    listed = None if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable) else list(values)
    if not listed:
        raise InputError(f"the grid's {path} needs a list of one or more values, not {values!r}")
    return listed


def _check_values(
    grid: dict[str, list[Any]], scenario: str, seed: int, tasks: int | None, fixed: list, faults: tuple, pattern: Any
) -> None:
    """Each grid value on its own (after the fixed overrides, already checked), so an error names the one bad value."""
    for path, values in grid.items():
        for value in values:
            _config(scenario, seed, tasks, fixed, [(path, value)], faults, pattern, blame=f"grid value {path}={value}")


def _check_size(grid: dict[str, list[Any]], seeds: list[int]) -> None:
    size = len(seeds)
    for values in grid.values():
        size *= len(values)
    if size > RUNS_MAX:
        raise InputError(f"the sweep has {size:,} runs (grid points times seeds), more than the {RUNS_MAX:,} one sweep may play")


def _config(
    scenario: str,
    seed: int,
    tasks: int | None,
    fixed: list,
    assignments: list,
    faults: tuple,
    pattern: Any,
    blame: str | None = None,
) -> SimConfig:
    """One run's config; a setting the anti-pattern overrides itself is refused (the row would name a value the run never used)."""
    base = scenario_config(scenario, seed, tasks)
    try:
        config = apply(base, [*fixed, *assignments])
        if faults:
            config = apply(config, {PLACED_PATH: config.nemesis.placed + faults})
        if pattern is not None:
            overridden = sorted(set(diff(config, pattern.configure(config))) & {path for path, _ in [*fixed, *assignments]})
            if overridden:
                raise InputError(f"the anti-pattern {pattern.name} sets {overridden[0]} itself, so sweeping or setting it measures nothing")
        return config
    except InputError as error:
        where = blame or "grid point " + ", ".join(f"{path}={value}" for path, value in assignments)
        raise InputError(f"{where}: {error}") from None


def _check_distinct(runs: list[Run]) -> None:
    """Two runs with one key would be one row: a grid value given twice (`1` and `1.0`) is bad input."""
    seen: dict[tuple[str, ...], Run] = {}
    for run in runs:
        earlier = seen.setdefault(run.key(), run)
        if earlier is not run:
            values = ", ".join(f"{path}={format_value(value)}" for path, value in run.swept)
            raise InputError(f"the grid names the same run twice ({values}, seed {run.seed}): give each value once")


def _with_artifacts(run: Run, directory: Path) -> Run:
    """Each run's artifacts in their own directory, named for the run's key so a person can find it.

    The name ends in the config's digest (and a given spec's), so two sweeps with other fixed settings, or of another
    spec, never write into one folder.
    """
    words = [run.scenario, *([run.antipattern] if run.antipattern else []), f"seed{run.seed}"]
    words += [f"{path}={format_value(value)}" for path, value in run.swept]
    words.append(config_digest(run.config)[:8])
    if spec_given(run.table):
        words.append(f"spec{spec_digest(run.table)[:8]}")
    name = re.sub(r"[^A-Za-z0-9._=-]", "_", "-".join(words))
    return replace(run, artifacts=str(directory / name))


# ------------------------------------------------------------------ one run


def play_run(run: Run) -> dict[str, Any]:
    """Play one run of a sweep and return its row (module level, so pools and Dask workers can call it by name).

    With `run.coverage` the row also holds, under `COVERAGE_KEY`, the run's counts per transition row: a few
    dozen numbers, so the run's history never leaves the process that played it.
    """
    pattern = antipattern_named(run.antipattern) if run.antipattern is not None else None
    counted = CoverageSink(None if run.table is None else run.table.spec) if run.coverage else None
    if run.artifacts is None:
        outcome = play(run.config, run.seed, run.scenario, pattern, history_sink=counted, table=run.table)
    else:
        directory = Path(run.artifacts)
        outcome = play_with_artifacts(run.config, run.seed, run.scenario, pattern, directory, history_sink=counted, table=run.table)
    row = _row(run, outcome)
    if counted is not None:
        row[COVERAGE_KEY] = counted.tally.counts()
    return row


def _row(run: Run, outcome: Outcome) -> dict[str, Any]:
    row: dict[str, Any] = {
        "scenario": run.scenario,
        "tasks": outcome.tasks,
        "antipattern": outcome.antipattern,
        "seed": run.seed,
        "config_digest": config_digest(run.config),
        "spec_digest": spec_digest(run.table),
    }
    row.update(run.swept)
    row.update(_flatten(outcome.metrics))
    for name, verdict in outcome.verdicts.items():
        row[f"invariant.{name}"] = verdict.status
        row[f"violations.{name}"] = verdict.violations
    row.update(ok=outcome.ok, digest=outcome.digest, replay=replay_command(outcome, table=run.table))
    return row


def _flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in metrics.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


# ------------------------------------------------------------------ executors


def execute(
    runs: Sequence[Any], jobs: int, executor: str, scheduler: str | None, play: Callable[[Any], dict[str, Any]] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each run's (index, row), in completion order; `play` (a module-level function of one run, default `play_run`) makes the row.

    Anything with an `index` that pickles can be a run: the recoverability maps (`lab/phase.py`) run their jobs here too.
    """
    play = play or play_run
    if executor == "dask":
        yield from _on_dask(runs, jobs, scheduler, play)
    elif jobs == 1 or len(runs) <= 1:
        for run in runs:
            yield run.index, play(run)
    else:
        yield from _on_processes(runs, jobs, play)


def _on_processes(runs: Sequence[Any], jobs: int, play: Callable[[Any], dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each run's (index, row) from a pool of spawned processes, in completion order; Ctrl-C stops the pool, then raises here.

    While the pool runs, SIGINT is held for this loop (`_Interrupts`) rather than raised wherever the main thread happens to
    be: a KeyboardInterrupt raised inside the pool's own waiting (between a condition's release and re-acquire, in
    `as_completed`) ended in `RuntimeError: release unlocked lock`, a traceback and status 1 instead of one line and 130.
    Completed futures and a Ctrl-C meet in one queue, which the loop alone reads. The workers are spawned with SIGINT
    blocked, and so are born blind to it: a terminal's Ctrl-C reaches the whole group, and a worker still importing its
    modules, before the initializer has run, would otherwise print a traceback of its own.
    """
    context = multiprocessing.get_context("spawn")
    arrivals: queue.SimpleQueue[Any] = queue.SimpleQueue()
    pool = None
    finished = False
    with _Interrupts(arrivals) as interrupts:
        try:
            with _sigint_blocked():
                pool = ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=context, initializer=_leave_interrupts_to_the_sweep)
                futures = {pool.submit(play, run): run.index for run in runs}
            for future in futures:
                future.add_done_callback(arrivals.put)
            for _ in range(len(futures)):
                arrived = arrivals.get()
                if arrived is _INTERRUPTED:
                    break
                yield futures[arrived], arrived.result()
            else:
                finished = True
        finally:
            if pool is not None:
                if not finished:
                    _stop_workers(pool)  # Ctrl-C or an error: nobody will read the runs in flight, so they are not waited for
                pool.shutdown(cancel_futures=True)
    if interrupts.caught:
        raise KeyboardInterrupt


_INTERRUPTED = object()
"""What a held Ctrl-C puts in the pool loop's queue, beside the completed futures."""


class _Interrupts:
    """While entered (on the main thread, with Python's own SIGINT handler in place): Ctrl-C is recorded and queued, not raised.

    `caught` says whether one came; the caller raises KeyboardInterrupt itself, where no lock is half taken. A handler
    someone else installed (an IDE's, a notebook kernel's) or an ignored SIGINT is left alone, and so is any thread but
    the main one, which cannot set handlers.
    """

    def __init__(self, arrivals: queue.SimpleQueue[Any]) -> None:
        self.arrivals = arrivals
        self.caught = False
        self.previous: Any = None

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._held)
        return self

    def _held(self, _signum: int, _frame: Any) -> None:
        self.caught = True
        self.arrivals.put(_INTERRUPTED)  # SimpleQueue.put is reentrant: safe in a handler, even mid-get

    def __exit__(self, *_exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked for this thread while inside, and for any process started meanwhile (the mask is inherited)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):  # (Windows has none)
        yield
        return
    # The resource tracker, started by the pool's first lock unless already running, unblocks SIGINT after spawning itself.
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)  # one held meanwhile is delivered now, to _Interrupts


def _leave_interrupts_to_the_sweep() -> None:
    """A worker ignores Ctrl-C: the sweep keeps the rows it finished and stops its workers itself, with no worker's traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End every worker process now; before Python 3.14's `terminate_workers` the pool has no public way to."""
    for process in list(pool._processes.values()):
        process.terminate()


def _on_dask(
    runs: Sequence[Any], jobs: int, scheduler: str | None, play: Callable[[Any], dict[str, Any]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    distributed = _distributed()
    cluster = None if scheduler else distributed.LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True)
    if cluster is not None:
        client = distributed.Client(cluster)
    else:
        try:
            client = distributed.Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)
        except Exception as error:  # whatever stops the greeting (a timeout, a server speaking another protocol): no scheduler there
            raise InputError(f"cannot use the Dask scheduler at {scheduler}: {type(error).__name__}: {error}") from None
    try:
        futures = client.map(play, runs, pure=False)
        indices = {future.key: run.index for future, run in zip(futures, runs, strict=True)}
        for future, row in distributed.as_completed(futures, with_results=True):
            yield indices[future.key], row
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _distributed() -> Any:
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise InputError(_DASK_MISSING) from None


# ------------------------------------------------------------------ the table


def columns(rows: Iterable[Mapping[str, Any]], swept: Sequence[str]) -> list[str]:
    """The union of the rows' columns in a stable order: identity, swept paths, metrics, verdicts, digest, replay.

    Metrics keep the order they first appear in (the run order and the metrics' own order), with the
    members of one nested metric (`final_states.*`) sorted, so a state first reached late in a sweep
    still sits beside its siblings.
    """
    fixed = {*IDENTITY, *swept, *_TAIL}
    seen = [column for column in dict.fromkeys(column for row in rows for column in row) if column not in fixed]
    verdicts = [column for column in seen if column.startswith(_VERDICT_PREFIXES)]
    groups: dict[str, list[str]] = {}
    for column in seen:
        if not column.startswith(_VERDICT_PREFIXES):
            groups.setdefault(column.split(".", 1)[0], []).append(column)
    metrics = [column for group in groups.values() for column in sorted(group)]
    return [*IDENTITY, *swept, *metrics, *verdicts, *_TAIL]


def _complete(rows: list[Mapping[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    return [{column: row.get(column, 0 if column.startswith(_ZERO_WHEN_MISSING) else None) for column in order} for row in rows]


def _cell(value: Any) -> str:
    """A value as CSV text that `_parsed` reads back to the same value (floats print their shortest exact form)."""
    return "" if value is None else str(value)


def _parsed(column: str, text: str) -> Any:
    if text == "":
        return None
    if column in _TEXT_COLUMNS or column.startswith("invariant."):
        return text
    if text in ("True", "False"):
        return text == "True"
    if _WHOLE_NUMBER.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _texts(row: Mapping[str, Any], swept: Sequence[str]) -> dict[str, str]:
    """A row as the text a CSV holds: swept values as `--set` spells them, the rest as `_cell` does."""
    return {column: format_value(value) if column in swept else _cell(value) for column, value in row.items()}


def _write_csv(path: Path, rows: list[dict[str, Any]], order: list[str], swept: Sequence[str]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=order)
        writer.writeheader()
        writer.writerows(_texts(row, swept) for row in rows)


def _read_csv(path: Path, swept: Sequence[str]) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write_parquet(path: Path, rows: list[dict[str, Any]], order: list[str], swept: Sequence[str]) -> None:
    pandas = _parquet_modules()[0]
    pandas.DataFrame(rows, columns=order).to_parquet(path, index=False)


def _read_parquet(path: Path, swept: Sequence[str]) -> list[dict[str, str]]:
    parquet = _parquet_modules()[1]
    return [_texts(row, swept) for row in parquet.read_table(path).to_pylist()]


def _parquet_modules() -> tuple[Any, Any]:
    try:
        return importlib.import_module("pandas"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise InputError(_PARQUET_MISSING) from None


_FORMATS = {".csv": (_read_csv, _write_csv), ".parquet": (_read_parquet, _write_parquet)}


class _Output:
    """The sweep's file: what it already holds (for resuming), and its atomic, throttled rewrites."""

    def __init__(self, path: Path, swept: Sequence[str]) -> None:
        if path.suffix not in _FORMATS:
            raise InputError(f"--out must end in .csv or .parquet, not {path.name!r}")
        if path.suffix == ".parquet":
            _parquet_modules()
        self.path = path
        self.swept = list(swept)
        self.read, self._write = _FORMATS[path.suffix]
        self.written_at = -WRITE_INTERVAL_S
        self.rows_written = 0
        """How many rows the file holds: it is rewritten only when a run has added one."""
        self._probe()

    def _probe(self) -> None:
        """Fail before any run if the file could never be written."""
        try:
            with tempfile.TemporaryFile(dir=self.path.parent):
                pass
        except OSError as error:
            raise InputError(f"cannot write {self.path}: {error.strerror or error}") from None

    def resume(self, runs: list[Run]) -> dict[int, dict[str, Any]]:
        """The rows the file already holds, by run index; a row that is no run of this sweep is bad input."""
        if not self.path.exists():
            return {}
        try:
            texts = self.read(self.path, self.swept)
        except (OSError, ValueError, csv.Error) as error:
            raise InputError(f"cannot resume from {self.path}: {error}") from None
        by_key = {run.key(): run for run in runs}
        done = {}
        for text in texts:
            run = by_key.get(self._key(text))
            if run is None:
                raise InputError(
                    f"{self.path} holds a row that is no run of this sweep ({self._describe(text)}; a different config_digest means"
                    " other fixed settings, a different spec_digest another spec): choose another --out"
                )
            done[run.index] = self._typed(text, run)
        self.rows_written = len(done)
        return done

    def _key(self, text: Mapping[str, str]) -> tuple[str, ...]:
        missing = [column for column in (*IDENTITY, *self.swept) if column not in text]
        if missing:
            raise InputError(f"{self.path} is not a table of this sweep: it has no column {missing[0]!r}; choose another --out")
        return tuple(text[column] for column in (*IDENTITY, *self.swept))

    def _describe(self, text: Mapping[str, str]) -> str:
        return ", ".join(f"{column} {text[column] or '-'}" for column in (*IDENTITY, *self.swept))

    def _typed(self, text: Mapping[str, str], run: Run) -> dict[str, Any]:
        """An old row as the values a fresh run would give: the swept values are the run's own, the rest parsed from text."""
        row = {column: _parsed(column, value) for column, value in text.items()}
        row.update(run.swept)
        return row

    def flush(self, done: Mapping[int, dict[str, Any]], force: bool = False) -> None:
        """Rewrite the file with every row so far, in run order, if a row is new and a second has passed (or `force`)."""
        if len(done) == self.rows_written or (not force and time.monotonic() - self.written_at < WRITE_INTERVAL_S):
            return
        rows = [done[index] for index in sorted(done)]
        order = columns(rows, self.swept)
        self._replace(lambda temporary: self._write(temporary, _complete(rows, order), order, self.swept))
        self.written_at, self.rows_written = time.monotonic(), len(done)

    def _replace(self, write: Callable[[Path], None]) -> None:
        """Write beside the file, then rename over it: readers see the old table or the new, never a torn one."""
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        try:
            write(temporary)
            os.replace(temporary, self.path)
        except OSError as error:
            raise InputError(f"cannot write {self.path}: {error.strerror or error}") from None
        finally:
            temporary.unlink(missing_ok=True)


# ------------------------------------------------------------------ the sweep


def sweep_rows(
    grid: Mapping[str, Iterable[Any]] | None = None,
    seeds: Iterable[int] = range(1),
    scenario: str = "mixed",
    tasks: int | None = None,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    antipattern: str | None = None,
    jobs: int | None = None,
    executor: str = "processes",
    scheduler: str | None = None,
    out: str | os.PathLike[str] | None = None,
    artifacts: str | os.PathLike[str] | None = None,
    progress: bool = False,
    faults: Iterable[str | FaultSpec] = (),
    log: Callable[[str], None] | None = None,
    coverage: str | os.PathLike[str] | None = None,
    spec: str | os.PathLike[str] | Table | None = None,
) -> list[dict[str, Any]]:
    """Run the sweep (see `sweep`) and return its rows as dicts, in run order, every row with every column.

    `log`, if given, is told once how many runs the sweep has, how many `out` already held, and how many it plays.
    `coverage`, if given, is a JSON file written once every run has played: the sum of the runs' transition coverage.
    """
    grid = dict(grid or {})
    jobs = check_jobs(jobs)
    check_executor(executor, scheduler)
    table = resolve_table(spec)
    placed = tuple(fault if isinstance(fault, FaultSpec) else FaultSpec.parse(fault) for fault in faults)
    runs = build_runs(grid, seeds, scenario, tasks, overrides, antipattern, artifacts, placed, table)
    output = _Output(Path(out), list(grid)) if out is not None else None
    done = output.resume(runs) if output is not None else {}
    counting = _Counting(coverage, runs, done, output, table) if coverage is not None else None
    pending = [run if counting is None else replace(run, coverage=True) for run in runs if run.index not in done]
    if log is not None:
        held = f", {len(done):,} of them already in {output.path}" if done else ""
        log(f"{counted(len(runs), 'run')}{held}; playing {len(pending):,}")
    bar = progress_bar(len(runs), len(done), progress)
    try:
        for index, row in execute(pending, jobs, executor, scheduler):
            counts = row.pop(COVERAGE_KEY, None)
            if counting is not None:
                counting.add(counts)
            done[index] = row
            bar.update()
            if output is not None:
                output.flush(done)
    finally:
        bar.close()
        if output is not None:
            output.flush(done, force=True)
    if counting is not None:
        counting.write(_sweep_command(scenario, tasks, antipattern, runs, overrides, placed, table))
    rows = [done[index] for index in sorted(done)]
    return _complete(rows, columns(rows, list(grid)))


class _Counting:
    """The sweep's coverage: each run's counts summed as it completes, written once, whole, when every run has played."""

    def __init__(
        self, path: str | os.PathLike[str], runs: list[Run], done: Mapping[int, Any], output: _Output | None, table: Table | None
    ) -> None:
        try:
            check_writable(path)
            sink = CoverageSink(None if table is None else table.spec)  # refuses, here and not in a worker, rows no event tells apart
        except CoverageError as error:
            raise InputError(str(error)) from None
        if done:
            raise InputError(
                f"{len(done):,} of the sweep's {counted(len(runs), 'run')} {'is' if len(done) == 1 else 'are'} already in"
                f" {output.path if output else 'the table'} and would not"
                " be played, so --coverage could not count them: choose another --out, or give no --coverage"
            )
        self.path = path
        self.identity = sink.tally.identity
        self.total: Coverage | None = None

    def add(self, counts: Mapping[str, Any] | None) -> None:
        assert counts is not None, "a run asked for coverage returned its row without counts"
        try:
            one = from_counts(self.identity, counts)
        except CoverageError as error:
            raise InputError(str(error)) from None
        self.total = one if self.total is None else self.total.merge(one)

    def write(self, recorded_by: str) -> None:
        if self.total is None:
            raise InputError(f"no run was played, so there is no coverage to write to {self.path}")
        try:
            write_coverage(self.total.relabelled([recorded_by]), self.path)
        except CoverageError as error:
            raise InputError(str(error)) from None


def _sweep_command(
    scenario: str,
    tasks: int | None,
    antipattern: str | None,
    runs: list[Run],
    overrides: Any,
    faults: tuple[FaultSpec, ...],
    table: Table | None = None,
) -> str:
    """A `shiftchange sim sweep` command for what a coverage file counted: the scenario, seeds, grid, spec, fixed settings, faults."""
    words = ["shiftchange", "sim", "sweep", "--scenario", scenario]
    words += ["--tasks", str(tasks)] if tasks is not None else []
    words += ["--antipattern", antipattern] if antipattern is not None else []
    words += spec_words(table)
    words += ["--seeds", _seed_ranges(sorted({run.seed for run in runs}))]
    for path in dict(runs[0].swept):
        values = dict.fromkeys(format_value(dict(run.swept)[path]) for run in runs)
        words += ["--grid", f"{path}={','.join(values)}"]
    fixed = overrides.items() if isinstance(overrides, Mapping) else overrides
    words += [word for path, value in fixed for word in ("--set", f"{path}={format_value(value)}")]
    words += [word for fault in faults for word in ("--fault", str(fault))]
    return shlex.join(words)


def _seed_ranges(seeds: list[int]) -> str:
    """Sorted seeds as `--seeds` takes them: runs of consecutive seeds as A-B, the rest listed."""
    parts: list[str] = []
    for _, group in itertools.groupby(enumerate(seeds), key=lambda pair: pair[1] - pair[0]):
        members = [seed for _, seed in group]
        parts.append(str(members[0]) if len(members) == 1 else f"{members[0]}-{members[-1]}")
    return ",".join(parts)


def sweep(
    grid: Mapping[str, Iterable[Any]] | None = None,
    seeds: Iterable[int] = range(1),
    scenario: str = "mixed",
    tasks: int | None = None,
    overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
    antipattern: str | None = None,
    jobs: int | None = None,
    executor: str = "processes",
    scheduler: str | None = None,
    out: str | os.PathLike[str] | None = None,
    artifacts: str | os.PathLike[str] | None = None,
    progress: bool = False,
    faults: Iterable[str | FaultSpec] = (),
    coverage: str | os.PathLike[str] | None = None,
    spec: str | os.PathLike[str] | Table | None = None,
) -> Any:
    """Play every run of a grid of settings times the seeds; one row per run, in run order.

    `grid` maps dotted setting paths to the values to try (typed, or text parsed by the field's type);
    `overrides` are fixed settings applied first (a config file's: `settings.read_overrides(path)`); `faults` are placed in
    every run (`FaultSpec`s or their text, "outage model_provider at=600 for=120"). `jobs` local processes (default: every CPU; 1 runs
    here, in this process) or `executor="dask"` on a `LocalCluster` of `jobs` workers, or on the
    scheduler at `scheduler`. `out` (.csv or .parquet) is rewritten as runs complete and resumed
    from: rows already in it are not run again. `coverage` is a JSON file written at the end with the sum
    of every run's transition coverage (`shiftchange spec review --coverage` shows it); it needs every run
    played, so an `out` that already holds rows is refused. `spec` is the transition table every run plays: a spec
    folder, a git revision (`REV` or `REV:folder`, read as `shiftchange spec check` reads one), a `Spec` or a `Table`
    (default: the packaged spec); rows carry its digest, and replays name it. Returns a pandas DataFrame when pandas is
    importable, else a list of dicts. Bad input raises `InputError` before anything runs.
    """
    rows = sweep_rows(
        grid, seeds, scenario, tasks, overrides, antipattern, jobs, executor, scheduler, out, artifacts, progress, faults, None, coverage,
        spec,
    )  # fmt: skip
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


def check_jobs(jobs: int | None) -> int:
    """How many runs at once: the given whole number from 1, or one per CPU for None (else InputError)."""
    if jobs is None:
        return os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a whole number, at least 1, not {jobs!r}")
    return jobs


def check_executor(executor: str, scheduler: str | None) -> None:
    """An executor of `EXECUTORS`, a scheduler only for Dask, and Dask installed and its scheduler answering (else InputError)."""
    if executor not in EXECUTORS:
        raise InputError(f"the executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if scheduler is not None and executor != "dask":
        raise InputError("a scheduler address needs the dask executor")
    if executor == "dask":
        _distributed()
        if scheduler is not None:
            _reachable(scheduler)


def _reachable(scheduler: str) -> None:
    """A scheduler address that parses, and a scheduler there that answers within `DASK_CONNECT_TIMEOUT_S`.

    Checked before anything is planned or played: Dask's own client retries a refused connection for 30 s (its default
    connect timeout), raises a parse error as a traceback, and waits without end for the greeting of a server that never
    sends one (a dashboard's HTTP port, one off from the scheduler's). A Dask scheduler greets a connection first, so on
    tcp the first bytes are waited for; on tls (whose client speaks first) only the connection is. Other schemes are left
    to Dask.
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(scheduler)
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as error:
        raise InputError(f"a Dask scheduler address is [tcp://]HOST:PORT (e.g. tcp://10.0.0.5:8786), not {scheduler!r}: {error}") from None
    if scheme not in ("tcp", "tls"):
        return
    waited = f"waited {DASK_CONNECT_TIMEOUT_S:g} s"
    try:
        with socket.create_connection((host or "127.0.0.1", port), timeout=DASK_CONNECT_TIMEOUT_S) as connection:
            if scheme == "tcp" and not connection.recv(1):
                raise InputError(f"no Dask scheduler at {scheduler}: the server there closed the connection without a word")
    except TimeoutError:
        raise InputError(f"no Dask scheduler answers at {scheduler} ({waited})") from None
    except OSError as error:
        raise InputError(f"cannot reach the Dask scheduler at {scheduler}: {error.strerror or error}") from None


def progress_bar(total: int, done: int, shown: bool) -> tqdm:
    """The runs' progress bar on stderr (tqdm), drawn only when `shown`."""
    return tqdm(total=total, initial=done, unit="run", file=sys.stderr, disable=not shown, dynamic_ncols=True)
