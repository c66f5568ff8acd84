"""How the lab plays many runs: on this machine's cores (a process pool that Ctrl-C stops cleanly, every finished
row kept) or on a Dask cluster, and the checks of how many jobs, which executor, which seeds; a progress bar.

The sweep, the phase maps, the tuners and the mutation analysis all play their jobs through `execute`."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import queue
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import resource_tracker
from typing import Any

from tqdm import tqdm

from shiftchange.core import InputError

EXECUTORS = ("processes", "dask")
DASK_CONNECT_TIMEOUT_S = 5.0
"""How long a sweep waits to connect to a Dask scheduler (`--scheduler`) before it gives up: a few seconds, not Dask's 30."""
_DASK_MISSING = "the dask executor needs Dask: pip install 'shiftchange[dask]'"


# ------------------------------------------------------------------ executors


def execute(
    runs: Sequence[Any], jobs: int, executor: str, scheduler: str | None, play: Callable[[Any], dict[str, Any]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each run's (index, row), in completion order; `play` (a module-level function of one run: the sweep's `play_run`) makes the row.

    Anything with an `index` that pickles can be a run: the recoverability maps (`lab/phase.py`) run their jobs here too.
    """
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
