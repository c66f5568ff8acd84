"""Mutation analysis of a table: every single-point mutant put on trial, cheapest check first, stopped at the first kill.

A mutant is killed when a check fails it that the base passes: a structural
property, an invariant in an exploration, an invariant in a simulation. One
that survives every check is a finding either about the design (the changed
guard, effect or row is not needed: remove it) or about the checks (nothing
the project runs defends it: a hole). The report gives the mutation score
overall, per kind and per row; each kill with its check and invariant; and
each survivor with its row, the change and a one-line reading.

Runs go through the simulator's executors (`sim.sweep`'s: local spawned
processes, or Dask), each mutant a job of its own, module-level and
picklable; every trial is deterministic (the explorer enumerates, the
simulator's seeds are fixed), so one process, a pool and a Dask cluster give
the same verdicts, and the report is sorted by mutant, not by completion.

A mutant is played only where it can differ from the base. The core consults
a row only when a call presents the row's trigger in one of its states, and
every run is deterministic; so a run of the base in which no call presented
the trigger where the mutant's row decides otherwise (its sources; for a
widening, only the state it adds) plays under the mutant call for call as it
did under the base, and cannot kill it. The base's trial records what each of
its runs presented (`CheckRun.presented`), and each mutant skips the runs its
change cannot reach. Three conditions keep this exact: the mutant compiles to
the same derived sets as the base (the fenced triggers, the leased,
expirable and active states, ...: read everywhere, not only at the row), else
it skips nothing; an exploration the base did not search to its end, or that
found a violation, records nothing and is never skipped; and neither is a
simulated run in which a call was rejected (its rolled-back transaction left
no event to count). A survivor no run reached reads so: a hole in the checks,
unless no call can ever present its trigger there.

A mutant killed by the explorer or the simulator has replay commands, which
name it by a folder: it is written under `out`/ID (a survivor too, so a
reviewer can `spec diff` it). A mutant the structural check kills needs none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shiftchange.spec.model import Spec

from .mutants import KINDS, Mutant, check_kinds, mutants_of
from .trial import CHECKS, STRUCTURE, Scale, Trial, run_trial
from .write import write_spec

__all__ = ["KILLED", "SURVIVED", "MutantResult", "MutationReport", "mutate"]

KILLED, SURVIVED = "killed", "survived"
EXECUTORS = ("processes", "dask")


@dataclass(frozen=True)
class _Job:
    """One mutant's trial as a pool or Dask worker receives it: picklable, with the base and the verdicts the base fails."""

    index: int
    base: Spec
    mutant: Mutant
    scale: Scale
    expected: tuple[tuple[str, str], ...]
    out: str | None
    unreached: frozenset[tuple[str, str]] = frozenset()
    """The (check, unit) runs of the base in which no call presented what this mutant changes: they would play as the base's."""


def run_job(job: _Job) -> dict[str, Any]:
    """Put one mutant on trial (module level, so spawned processes and Dask workers call it by name); plain data back."""
    mutant = job.mutant
    spec = mutant.apply(job.base)
    folder = str(Path(job.out) / mutant.id) if job.out is not None else f"<{mutant.id}>"
    unreached = job.unreached
    skip = (lambda check, unit: (check, unit) in unreached) if unreached else None
    trial = run_trial(spec, job.scale, label=folder, stop_early=True, expected=job.expected, timelines=False, skip=skip)
    killed = trial.killed_by
    if job.out is not None and (killed is None or killed.check != STRUCTURE):
        write_spec(spec, folder)  # its replay commands, or a reviewer's `spec diff`, name this folder
    replay: list[str] = []
    if killed is not None:
        example = trial.shortest(killed.name)
        replay = list(example.replay) if example is not None else []
    return {
        "index": job.index,
        "status": KILLED if killed is not None else SURVIVED,
        "check": None if killed is None else killed.check,
        "invariant": None if killed is None else killed.name,
        "detail": "" if killed is None else killed.detail,
        "replay": replay,
        "folder": None if killed is not None and killed.check == STRUCTURE else folder,
        "checks": {
            run.check: {"runs": run.runs, "skipped": run.skipped, "elapsed_s": run.elapsed_s, "cpu_s": run.cpu_s} for run in trial.checks
        },
    }


@dataclass(frozen=True)
class MutantResult:
    mutant: Mutant
    status: str
    check: str | None
    invariant: str | None
    detail: str
    replay: tuple[str, ...]
    folder: str | None
    checks: Mapping[str, Mapping[str, float]] = field(compare=False)

    @property
    def reached(self) -> bool:
        """Whether any exploration or simulation was played for it: a run of the base presented what it changes."""
        return any(spent["runs"] for check, spent in self.checks.items() if check != STRUCTURE)

    def verdict(self) -> tuple[str, str, str | None, str | None]:
        """What must agree between executors: the mutant, whether it died, and by which check and invariant."""
        return (self.mutant.id, self.status, self.check, self.invariant)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.mutant.to_json()
        data |= {"status": self.status, "check": self.check, "invariant": self.invariant, "detail": self.detail}
        data |= {"replay": list(self.replay), "folder": self.folder, "reached": self.reached}
        return data


@dataclass(frozen=True)
class MutationReport:
    """The base's trial, every mutant's result (in mutant order), the scale, and what the run cost."""

    label: str
    digest: str
    scale: Scale
    kinds: tuple[str, ...]
    base: Trial
    results: tuple[MutantResult, ...]
    executor: str
    processes: int
    elapsed_s: float = field(compare=False)
    scheduler: str | None = None
    """The Dask scheduler's address, when not a local cluster."""

    def fired(self, machine: str, row: int) -> tuple[int, int]:
        """How often the base's trial fired this row: (in the explorations, in the simulations)."""
        counts = []
        for check in ("explore", "simulate"):
            run = self.base.check(check)
            each = run.fired.get(machine, ()) if run is not None else ()
            counts.append(each[row - 1] if row - 1 < len(each) else 0)
        return counts[0], counts[1]

    def reading(self, result: MutantResult) -> str:
        """The survivor's one-line reading, told by whether any run of the base's trial reached what it changes."""
        mutant = result.mutant
        explored, simulated = self.fired(mutant.machine, mutant.row)
        if not result.reached:
            states = mutant.argument if mutant.kind == "widen_source" else "any state the row leaves"
            return (
                f"no run of the base presents {mutant.trigger} in {states} ({mutant.machine} row {mutant.row}), so every run plays"
                " as the base's: a hole in the checks (no configuration or scenario reaches it), unless no call can ever"
                " present it there (docs/mutation-verdict.md argues which)"
            )
        return f"{mutant.reading()} (the row fired {explored:,} times in the explorations, {simulated:,} in the simulations)"

    @property
    def killed(self) -> tuple[MutantResult, ...]:
        return tuple(result for result in self.results if result.status == KILLED)

    @property
    def survivors(self) -> tuple[MutantResult, ...]:
        return tuple(result for result in self.results if result.status == SURVIVED)

    @property
    def score(self) -> float:
        return len(self.killed) / len(self.results) if self.results else 1.0

    def by(self, key: Callable[[MutantResult], Any]) -> dict[Any, tuple[int, int]]:
        """(killed, mutants) per key, in first-seen order."""
        counts: dict[Any, list[int]] = {}
        for result in self.results:
            entry = counts.setdefault(key(result), [0, 0])
            entry[0] += result.status == KILLED
            entry[1] += 1
        return {name: (killed, total) for name, (killed, total) in counts.items()}

    def per_kind(self) -> dict[str, tuple[int, int]]:
        counts = self.by(lambda result: result.mutant.kind)
        return {kind: counts[kind] for kind in KINDS if kind in counts}

    def per_row(self) -> dict[tuple[str, int], tuple[int, int]]:
        return self.by(lambda result: (result.mutant.machine, result.mutant.row))

    def per_check(self) -> dict[str, dict[str, float]]:
        """Per check: the mutants it ran on, the runs it made (searches, simulations), its time, and the mutants it killed."""
        totals = {check: {"mutants": 0, "runs": 0, "skipped": 0, "elapsed_s": 0.0, "cpu_s": 0.0, "killed": 0} for check in CHECKS}
        for result in self.results:
            for check, spent in result.checks.items():
                totals[check]["mutants"] += 1
                totals[check]["runs"] += int(spent["runs"])
                totals[check]["skipped"] += int(spent.get("skipped", 0))
                totals[check]["elapsed_s"] += float(spent["elapsed_s"])
                totals[check]["cpu_s"] += float(spent.get("cpu_s", 0.0))
            if result.check is not None:
                totals[result.check]["killed"] += 1
        return totals

    def killed_by(self) -> dict[tuple[str, str], int]:
        return {key: count for key, (count, _total) in self.by(lambda result: (result.check, result.invariant)).items() if key[0]}

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": {"label": self.label, "digest": self.digest},
            "scale": self.scale.to_json(),
            "kinds": list(self.kinds),
            "base": {"killed_by": None if self.base.killed_by is None else [self.base.killed_by.check, self.base.killed_by.name]},
            "mutants": len(self.results),
            "killed": len(self.killed),
            "survived": len(self.survivors),
            "score": round(self.score, 4),
            "per_kind": {kind: {"killed": killed, "mutants": total} for kind, (killed, total) in self.per_kind().items()},
            "per_row": [
                {"machine": machine, "row": row, "killed": killed, "mutants": total}
                for (machine, row), (killed, total) in self.per_row().items()
            ],
            "per_check": {
                check: {**spent, "elapsed_s": round(spent["elapsed_s"], 3), "cpu_s": round(spent["cpu_s"], 3)}
                for check, spent in self.per_check().items()
            },
            "executor": self.executor,
            "processes": self.processes,
            "scheduler": self.scheduler,
            "elapsed_s": round(self.elapsed_s, 3),
            "results": [
                result.to_json() | ({"reading": self.reading(result)} if result.status == SURVIVED else {}) for result in self.results
            ],
            "rows_never_fired": [
                {"machine": machine, "row": row} for (machine, row) in self.per_row() if self.fired(machine, row) == (0, 0)
            ],
        }


def mutate(
    base: Spec,
    scale: Scale | None = None,
    kinds: Iterable[str] = (),
    *,
    label: str,
    out: str | Path | None = None,
    processes: int = 1,
    dask: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    skip_unreached: bool = True,
) -> MutationReport:
    """Every single-point mutant of `base` (of `kinds`, default all) on trial; see the module's docstring.

    `processes` local processes (1: here), or `dask`: a scheduler's address, or "local" for a `LocalCluster` of
    `processes` workers. `out` is where the mutants with replay commands are written (None: nowhere, and their
    replays name `<ID>`). The base is tried first, with every check: what it already fails kills no mutant.
    `skip_unreached=False` plays every run for every mutant (the same verdicts, at the full cost: the module says why).
    """
    from shiftchange.lab.executor import check_executor, execute

    scale = Scale() if scale is None else scale
    chosen = check_kinds(kinds)
    executor = "dask" if dask is not None else "processes"
    scheduler = None if dask in (None, "local") else dask
    check_executor(executor, scheduler)
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a whole number, at least 1, not {processes!r}")
    began = time.perf_counter()
    base_trial = run_trial(base, scale, label=label, timelines=False, coverage=True)
    expected = tuple(sorted(key for key, finding in base_trial.verdicts().items() if not finding.ok))
    mutants = mutants_of(base, chosen)
    root = None if out is None else str(Path(out).resolve())
    presented = {(run.check, name): pairs for run in base_trial.checks for name, pairs in run.presented.items()}
    derived = _derived(base) if skip_unreached else None
    jobs = [
        _Job(index, base, mutant, scale, expected, root, _unreached(base, mutant, presented, derived))
        for index, mutant in enumerate(mutants)
    ]
    rows: dict[int, dict[str, Any]] = {}
    for index, row in execute(jobs, processes, executor, scheduler, run_job):
        rows[index] = row
        if progress is not None:
            progress(len(rows), len(jobs))
    results = tuple(_result(mutants[index], rows[index], root, out) for index in range(len(jobs)))
    return MutationReport(
        label, base.digest, scale, chosen, base_trial, results, executor, processes, time.perf_counter() - began, scheduler
    )


def _derived(spec: Spec) -> tuple[Any, ...] | None:
    """What the core reads of a table besides the row a call presents: its state sets and trigger sets (None: no table)."""
    from shiftchange.core import InputError
    from shiftchange.core.table import Table
    from shiftchange.spec.loader import SpecError

    try:
        table = Table(spec)
    except (SpecError, InputError):
        return None
    attempt, task = table.attempt, table.task
    return (
        attempt.fenced_triggers, attempt.triggers, task.triggers, attempt.initial, task.initial, table.leased, table.expirable,
        table.active, table.attempt_terminal, table.task_terminal, table.task_resting, table.task_dispatchable,
    )  # fmt: skip


def _unreached(
    base: Spec, mutant: Mutant, presented: Mapping[tuple[str, str], frozenset[tuple[str, str, str | None]]], derived: Any
) -> frozenset[tuple[str, str]]:
    """The runs of the base's trial in which no call presented the mutant's trigger in a state its row leaves (see the module)."""
    if derived is None or _derived(mutant.apply(base)) != derived:
        return frozenset()  # it compiles to other state or trigger sets (or not at all: the structure check settles it)
    row = base.machines[mutant.machine].rows[mutant.row - 1]
    # A widened row decides as before in its own sources: only the state it adds can play otherwise.
    states = {mutant.argument} if mutant.kind == "widen_source" else set(row.sources)
    changed = {(mutant.machine, mutant.trigger, state) for state in states}
    return frozenset(key for key, pairs in presented.items() if changed.isdisjoint(pairs))


def _result(mutant: Mutant, row: Mapping[str, Any], root: str | None, out: str | Path | None) -> MutantResult:
    """A job's row as a result, its folders named as the caller named `out` (the job had the absolute path)."""

    def shown(text: str) -> str:
        return text if root is None or out is None else text.replace(root, str(out))

    folder = row["folder"]
    return MutantResult(
        mutant,
        row["status"],
        row["check"],
        row["invariant"],
        shown(row["detail"]),
        tuple(shown(line) for line in row["replay"]),
        None if folder is None else shown(folder),
        row["checks"],
    )


def summary_lines(report: MutationReport) -> list[str]:
    """The text report: what ran, the score overall, per kind, per check, what killed the mutants, and every survivor."""
    total, killed = len(report.results), len(report.killed)
    where = f"{report.processes} local process{'es' if report.processes > 1 else ''}"
    if report.executor == "dask":
        where = f"Dask at {report.scheduler}" if report.scheduler else f"Dask ({report.processes} workers on a local cluster)"
    lines = [
        f"spec mutate: {report.label} (digest {report.digest}), kinds {', '.join(report.kinds)}",
        *(f"  {line}" for line in report.scale.lines()),
        f"  {total:,} mutants on {where}, {report.elapsed_s:,.1f} s in all",
    ]
    if report.base.killed_by is not None:
        failing = sorted({f"{f.check} {f.name}" for f in report.base.verdicts().values() if not f.ok})
        lines.append(f"  the base itself fails {', '.join(failing)}: those verdicts kill no mutant")
    lines += ["", f"mutation score: {killed:,} of {total:,} killed ({percent(killed, total)})", "", "per kind:"]
    width = max(len(kind) for kind in KINDS)
    for kind, (dead, count) in report.per_kind().items():
        lines.append(f"  {kind:<{width}}  {dead:>4} of {count:<4} killed  {percent(dead, count):>6}")
    lines += ["", "per check (cheapest first; each mutant runs until the first that kills it):"]
    cpu = 0.0
    for check, spent in report.per_check().items():
        mean = spent["cpu_s"] / spent["mutants"] if spent["mutants"] else 0.0
        cpu += spent["cpu_s"]
        lines.append(
            f"  {check:<9}  ran on {spent['mutants']:>5,} mutants, {spent['runs']:>6,} runs, {spent['elapsed_s']:>8,.1f} s"
            f" ({spent['cpu_s']:,.1f} s CPU, {mean:.2f} s a mutant), killed {spent['killed']:,}"
            + (f"; {spent['skipped']:,} runs skipped as the base's own" if spent["skipped"] else "")
        )
    lines.append(f"  {cpu:,.1f} s of CPU in all the trials: {cpu / 2:,.0f} s on two idle cores")
    lines += ["", "killed by:"]
    for (check, invariant), count in sorted(report.killed_by().items(), key=lambda item: (CHECKS.index(item[0][0]), -item[1])):
        lines.append(f"  {check:<9}  {invariant:<40} {count:>5,}")
    weak = [(key, counts) for key, counts in report.per_row().items() if counts[0] < counts[1]]
    lines += ["", f"rows with survivors: {len(weak)} of {len(report.per_row())}"]
    for (machine, row), (dead, count) in weak:
        lines.append(f"  {machine} row {row:<3} {dead:>3} of {count:<3} killed")
    never = [f"{machine} {row}" for (machine, row) in report.per_row() if report.fired(machine, row) == (0, 0)]
    lines += ["", f"rows no check fires in the base's trial: {len(never)}" + (f" ({', '.join(never)})" if never else "")]
    survivors = report.survivors
    lines += ["", f"survivors: {len(survivors)}"]
    for result in survivors:
        mutant = result.mutant
        lines.append(f"  {mutant.machine} row {mutant.row} ({mutant.where}): {mutant.row_text}")
        lines.append(f"      change: {mutant.change}")
        lines.append(f"      reading: {report.reading(result)}")
        if result.folder is not None:
            lines.append(f"      spec: {result.folder}")
    return lines


def killed_lines(report: MutationReport) -> list[str]:
    """Every killed mutant, one line each: its row, the change, the check and the invariant (the long listing)."""
    lines = []
    for result in report.killed:
        mutant = result.mutant
        lines.append(f"  {mutant.id:<48} {result.check:<9} {result.invariant}")
    return lines


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def verdicts_of(report: MutationReport) -> Sequence[tuple[str, str, str | None, str | None]]:
    """The verdicts every executor must agree on, in mutant order."""
    return [result.verdict() for result in report.results]
