"""Minimisation: shrink a violating run to fewer tasks and fewer faults that still violate, and tell it as a short timeline.

A run is replayable from (config, seed, tasks, kept faults), so shrinking is
search over those two knobs with the run itself as the oracle, the way
Hypothesis shrinks an example. First the task count is halved while the run
still violates the same invariant (each count draws its own fault schedule,
exactly as `--tasks` would on replay); then the fault schedule is cut down
with delta debugging (Zeller's ddmin: drop chunks, then single faults) while
the violation persists. The result is the smallest run found within the
budget of runs, not a proven minimum, and is reported as such.

The timeline keeps what a person needs: the faults, and every history entry
of the task the first violation names (or, failing that, the tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shiftchange.checkers.history import Fault, Retired, describe
from shiftchange.core.table import Table
from shiftchange.sim.config import SimConfig
from shiftchange.sim.world import Outcome, play

TIMELINE_LINES_MAX = 60


@dataclass(frozen=True)
class Shrunk:
    """The smallest violating run found: its size, its faults, its outcome and its story."""

    tasks: int
    faults_kept: tuple[int, ...]
    outcome: Outcome
    timeline: list[str]
    runs: int
    invariant: str


def _violated(outcome: Outcome, invariant: str) -> bool:
    verdict = outcome.verdicts.get(invariant)
    return verdict is not None and verdict.status == "violated"


def shrink(
    config: SimConfig,
    seed: int,
    scenario: str,
    antipattern: Any = None,
    invariant: str | None = None,
    budget_runs: int = 40,
    table: Table | None = None,
) -> Shrunk | None:
    """Shrink a violating run of `config`; None if the full run does not violate (`invariant`: the first violated one).

    Every run plays `table`, the spec the violating run was given (default: the packaged one).
    """
    runs = 0

    def attempt(tasks: int, kept: tuple[int, ...] | None) -> Outcome:
        nonlocal runs
        runs += 1
        return play(config.with_tasks(tasks), seed, scenario, antipattern, faults_kept=kept, keep_history=True, table=table)

    tasks = config.workload.tasks
    best = attempt(tasks, None)
    if invariant is None:
        invariant = next((name for name, verdict in best.verdicts.items() if verdict.status == "violated"), None)
    if invariant is None or not _violated(best, invariant):
        return None
    while tasks > 1 and runs < budget_runs:
        smaller = attempt(max(1, tasks // 2), None)
        if not _violated(smaller, invariant):
            break
        tasks, best = max(1, tasks // 2), smaller
    kept = tuple(range(len(best.schedule)))
    chunks = 2
    while kept and runs < budget_runs:
        size = max(1, len(kept) // chunks)
        for start in range(0, len(kept), size):
            candidate = kept[:start] + kept[start + size :]
            trial = attempt(tasks, candidate)
            if _violated(trial, invariant):
                kept, best = candidate, trial
                chunks = max(2, chunks - 1)
                break
            if runs >= budget_runs:
                break
        else:
            if size == 1:
                break
            chunks = min(len(kept), chunks * 2)
    return Shrunk(tasks, kept, best, timeline(best, invariant), runs, invariant)


def timeline(outcome: Outcome, invariant: str) -> list[str]:
    """The faults and the story of the task the violation names, one line per entry, at most TIMELINE_LINES_MAX lines.

    Runs of accepted renewals fold into one line. When the story is still
    too long, it keeps its opening and the stretch that ends a little after
    the entries the violation's example names, which is where it happened.
    """
    verdict = outcome.verdicts[invariant]
    task_id = _task_named(verdict.example)
    lines = [f"invariant {invariant} violated: {verdict.example[0] if verdict.example else ''}"]
    story = [entry for entry in outcome.tail if isinstance(entry, Fault) or (task_id is not None and _about(entry, task_id))]
    if task_id is None:
        story = list(outcome.tail)[-TIMELINE_LINES_MAX:]
    lines += _folded(story)
    if len(lines) <= TIMELINE_LINES_MAX:
        return lines
    shown = set(verdict.example[1:])
    marks = [index for index, line in enumerate(lines) if line in shown]
    end = min(len(lines), (marks[-1] if marks else len(lines) - 1) + 6)
    opening = TIMELINE_LINES_MAX // 4
    start = max(opening, end - (TIMELINE_LINES_MAX - opening - 1))
    if start <= opening:
        return lines[:TIMELINE_LINES_MAX]
    return [*lines[:opening], f"... {start - opening} lines left out ...", *lines[start:end]]


def _folded(entries: list[Any]) -> list[str]:
    """Describe entries, folding each run of accepted renewals into one line."""
    lines: list[str] = []
    run: list[Any] = []
    for entry in [*entries, None]:
        if entry is not None and getattr(entry, "kind", None) == "renew" and getattr(entry, "accepted", False):
            run.append(entry)
            continue
        if len(run) == 1:
            lines.append(describe(run[0]))
        elif run:
            lines.append(f"t={run[0].at:9.2f}  ... {len(run)} renewals accepted until t={run[-1].at:.2f} ...")
        run = []
        if entry is not None:
            lines.append(describe(entry))
    return lines


def _task_named(example: tuple[str, ...]) -> str | None:
    for line in example:
        for word in line.replace("#", " ").replace(":", " ").replace(",", " ").replace("(", " ").replace(")", " ").split():
            if word.startswith("task-"):
                return word.rstrip(":")
    return None


def _about(entry: Any, task_id: str) -> bool:
    if isinstance(entry, Retired):
        return entry.task.task_id == task_id
    return getattr(entry, "task_id", None) == task_id
