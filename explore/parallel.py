"""A breadth-first search over local processes: each owns the states whose shape fingerprint names it, level by level.

The usual design (TLC's, stateright's): the state space is partitioned by
fingerprint, every process expands the states it owns and sends each world
it reaches to the process that owns it. Here the processes are forked from
the one that built the initial world, so they hold the very objects its
snapshots are primed with and load each other's worlds; the worlds a level
sends travel through one file per (sender, owner) in a temporary directory,
which is also where a level too big for memory spills. A level ends when
every process has expanded its share (a barrier), then every process merges
what was sent to it (`levels.Partition.merge`); the coordinator here only
counts, decides when to stop, and shows progress.

Why the results do not depend on the number of processes: see `levels.py`
(ranks, least-ranked arrivals and findings, ownership by shape). A state
bound is checked when a level is merged, so a bounded search may visit a
few more states than the bound; a time limit is checked by every process
between two states.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import ExploreError
from .levels import Counts, Partition

PROCESSES_MAX = 64


class OutOfTime(Exception):
    """The time limit passed."""


@dataclass
class Outcome:
    """What the processes did together."""

    counts: Counts
    tallies: list[dict[str, Any]]
    stopped_by: str | None
    levels: int


def _work(connection: Any, partition: Partition, deadline: float | None, progress_every_s: float) -> None:
    """One process: expand or merge a level when told, and say what it did."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides what an interrupt does
    shown = [time.monotonic()]

    def after_each() -> None:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise OutOfTime
        if now - shown[0] >= progress_every_s:
            shown[0] = now
            connection.send(("progress", partition.counts, None))

    while True:
        command, level, depth_max = connection.recv()
        try:
            if command == "expand":
                partition.begin_level(level)
                try:
                    partition.expand_level(depth_max, after_each)
                    out_of_time = False
                except OutOfTime:
                    out_of_time = True
                partition.end_level()
                connection.send(("expanded", partition.counts, out_of_time))
            elif command == "merge":
                partition.merge_level(level)
                connection.send(("merged", partition.counts, len(partition.current)))
            elif command == "tally":
                connection.send(("tally", partition.tally.counts(), None))
            else:
                connection.send(("stopped", None, None))
                return
        except ExploreError as error:  # a refusal (a path past the abstract clock's horizon) is said in one line, as alone
            connection.send(("refused", str(error), None))
            return
        except BaseException:  # a crash in a process is the search's error, raised by the coordinator with its traceback
            connection.send(("error", traceback.format_exc(), None))
            return


class _Processes:
    """The forked processes, one partition each, and the pipes to them."""

    def __init__(self, partitions: list[Partition], deadline: float | None, progress_every_s: float) -> None:
        context = multiprocessing.get_context("fork")
        self.connections, self.processes = [], []
        for partition in partitions:
            mine, theirs = context.Pipe()
            process = context.Process(target=_work, args=(theirs, partition, deadline, progress_every_s), daemon=True)
            process.start()
            theirs.close()
            self.connections.append(mine)
            self.processes.append(process)
        self.counts = [partition.counts for partition in partitions]

    def ask(self, command: str, level: int, depth_max: int | None, progress: Callable[[], None]) -> list[Any]:
        """Send `command` to every process; wait for every answer, showing progress as the processes report it."""
        for connection in self.connections:
            connection.send((command, level, depth_max))
        answers: list[Any] = [None] * len(self.connections)
        waiting = set(range(len(self.connections)))
        while waiting:
            ready = multiprocessing.connection.wait([self.connections[index] for index in waiting])
            for connection in ready:
                index = self.connections.index(connection)
                kind, payload, extra = connection.recv()
                if kind == "error":
                    raise RuntimeError(f"a search process failed:\n{payload}")
                if kind == "refused":
                    raise ExploreError(payload)
                if kind == "progress":
                    self.counts[index] = payload
                    progress()
                    continue
                if kind in ("expanded", "merged"):
                    self.counts[index] = payload
                answers[index] = (payload, extra)
                waiting.discard(index)
        return answers

    def total(self) -> Counts:
        total = Counts()
        for counts in self.counts:
            total.add(counts)
        return total

    def close(self) -> None:
        for connection in self.connections:
            with contextlib.suppress(OSError):  # a process that failed has closed its end already
                connection.send(("stop", 0, None))
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()


def run(
    partitions: list[Partition],
    depth_max: int | None,
    states_max: int | None,
    deadline: float | None,
    progress: Callable[[Counts], None],
    progress_every_s: float,
) -> Outcome:
    """Search level by level with one process per partition (each given its share of the initial level already)."""
    directory = tempfile.mkdtemp(prefix="shiftchange-explore-")
    for partition in partitions:
        partition.directory = directory
    processes = _Processes(partitions, deadline, progress_every_s)
    stopped_by, level, tallies = None, 0, []
    shown = [time.monotonic()]

    def show() -> None:
        if time.monotonic() - shown[0] >= progress_every_s:
            shown[0] = time.monotonic()
            progress(processes.total())

    try:
        pending = sum(len(partition.current) for partition in partitions)
        while pending:
            expanded = processes.ask("expand", level, depth_max, show)
            if any(out_of_time for _counts, out_of_time in expanded):
                stopped_by = "time"
                break
            merged = processes.ask("merge", level, depth_max, show)  # a violating level's new states count, as in one process
            pending = sum(size for _counts, size in merged)
            if processes.total().findings:
                stopped_by = "violation"
                break
            level += 1
            progress(processes.total())
            if states_max is not None and processes.total().states >= states_max and pending:
                stopped_by = "states"
                break
        tallies = [payload for payload, _extra in processes.ask("tally", level, depth_max, show)]
    except KeyboardInterrupt:
        stopped_by = "interrupted"
    finally:
        total = processes.total()
        processes.close()
        shutil.rmtree(directory, ignore_errors=True)
    return Outcome(total, tallies, stopped_by, level)
