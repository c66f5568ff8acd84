"""One spec put on trial: the structural check, an exhaustive exploration of small configurations, a simulation, cheapest first.

`run_trial(spec, scale)` judges a `Spec` value by what the project already
owns, in order of cost:

1. **structure**: the core compiles it (its vocabulary is the core's) and
   `spec check`'s properties hold (`spec.checker`), in milliseconds;
2. **explore**: every interleaving of each small configuration of
   `Scale.explore` (the explorer, breadth-first, so a violation found is a
   shortest one), a second or so each;
3. **simulate**: the simulator over `Scale.scenarios` times `Scale.seeds` at
   `Scale.tasks` tasks, each run judged by the same checkers, and a violating
   run shrunk (`lab.shrink`) when `Scale.shrink_runs` allows.

Each check gives a verdict per invariant (per property, for the structure):
"ok", "violated", or "unknown" (a search cut short, or a checker that could
not tell). A violation comes with its counterexample: the explorer's path or
the simulator's run (shrunk when asked), the violating task's timeline, and
the replay commands. `stop_early` ends the trial at the first violation not
in `expected` (a mutation analysis' "killed"): no later check runs, and the
check that found it searches or plays nothing after the configuration or run
that did, so its other verdicts cover only what ran. An unknown verdict (a
search cut short) never kills.

The spec is a value; the explorer and every replay command name a spec by a
folder (`--spec DIR`), so the trial writes the value into a scratch folder for
the explorer, and the replay commands name `label`: a folder or revision that
holds this very spec (the caller's), else the folder under `out` that the
trial writes it to.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED
from shiftchange.spec.checker import check_spec
from shiftchange.spec.loader import SpecError
from shiftchange.spec.model import Spec

from .timelines import explored_timeline, simulated_timeline
from .trial_records import (
    CHECKS,
    COMPILES,
    CRASHED,
    DEFAULT_EXPLORE,
    DEFAULT_SCENARIOS,
    DEFAULT_SEEDS,
    DEFAULT_TASKS,
    EXPLORE,
    EXPLORE_TIME_LIMIT_S,
    FINISHES,
    SIMULATE,
    STRUCTURE,
    CheckRun,
    Counterexample,
    Finding,
    Scale,
    Trial,
    TrialError,
    explore_config,
)
from .write import write_spec

__all__ = [
    "CHECKS",
    "COMPILES",
    "CRASHED",
    "DEFAULT_EXPLORE",
    "DEFAULT_SCENARIOS",
    "DEFAULT_SEEDS",
    "DEFAULT_TASKS",
    "EXPLORE",
    "EXPLORE_TIME_LIMIT_S",
    "FINISHES",
    "SIMULATE",
    "STRUCTURE",
    "CheckRun",
    "Counterexample",
    "Finding",
    "Scale",
    "Trial",
    "TrialError",
    "explore_config",
    "run_trial",
]


def run_trial(
    spec: Spec,
    scale: Scale | None = None,
    *,
    label: str | None = None,
    out: str | Path | None = None,
    stop_early: bool = False,
    expected: Iterable[tuple[str, str]] = (),
    timelines: bool = True,
    coverage: bool = False,
    checks: Sequence[str] = CHECKS,
    skip: Callable[[str, str], bool] | None = None,
) -> Trial:
    """Put `spec` through `checks` (default all three), cheapest first; see the module's docstring.

    `label` names the spec in replay commands (a folder or revision holding it; `None` for the packaged spec
    when `spec` is it): without it, the spec is written to `out`/spec-DIGEST and named so. `expected` are the
    (check, name) verdicts already failing for the base this spec is compared with: they do not kill it.

    `skip(check, unit)` says that a run (an exploration by its text, a simulation by `unit(scenario, seed)`) would play
    exactly as the base's did, so it is not made: the mutation analysis passes it for the runs in which the base never
    presented a changed row's trigger in any of its states (`lab.mutate`). A skipped run finds nothing the base did not.
    """
    scale = Scale() if scale is None else scale
    unknown = [name for name in checks if name not in CHECKS]
    if unknown:
        raise TrialError(f"unknown check {unknown[0]!r}; use one of {', '.join(CHECKS)}")
    if not isinstance(spec, Spec):
        raise TrialError(f"a trial runs a spec.Spec, not {spec!r:.60}")
    label = _label(spec, label, out)
    expected = frozenset(expected)
    began = time.perf_counter()
    runs: list[CheckRun] = []
    killed: Finding | None = None

    def kills(check: str) -> Callable[[str], bool] | None:
        """With `stop_early`: whether a violation of this invariant in `check` kills the spec (so the check may stop there)."""
        return (lambda name: (check, name) not in expected) if stop_early else None

    with tempfile.TemporaryDirectory(prefix="shiftchange-trial-") as scratch:
        steps: dict[str, Callable[[], CheckRun]] = {
            STRUCTURE: lambda: _structure(spec),
            EXPLORE: lambda: _explore(spec, scale, label, Path(scratch), timelines, coverage, kills(EXPLORE), skip),
            SIMULATE: lambda: _simulate(spec, scale, label, timelines, coverage, kills(SIMULATE), skip),
        }
        for name in CHECKS:
            if name not in checks or (name == EXPLORE and not scale.explore) or (name == SIMULATE and not scale.simulations):
                continue  # not asked for, or nothing to run at this scale
            cpu = time.process_time()
            run = steps[name]()
            run = replace(run, cpu_s=time.process_time() - cpu)
            runs.append(run)
            if killed is None:  # a violation kills; an unknown (a search cut short) does not
                killed = next((f for f in run.findings if f.status == VIOLATED and (f.check, f.name) not in expected), None)
            if name == STRUCTURE and any(f.name == COMPILES and not f.ok for f in run.findings):
                break  # a table the core refuses cannot be run
            if stop_early and killed is not None:
                break
    ran_all = not runs or runs[-1].check == _last(scale, checks)
    return Trial(label, spec.digest, scale, tuple(runs), killed, stopped_early=not ran_all, elapsed_s=time.perf_counter() - began)


def _last(scale: Scale, checks: Sequence[str]) -> str:
    """The last check a trial at this scale runs."""
    ran = [name for name in CHECKS if name in checks]
    ran = [name for name in ran if not (name == EXPLORE and not scale.explore) and not (name == SIMULATE and not scale.simulations)]
    return ran[-1] if ran else STRUCTURE


def _label(spec: Spec, label: str | None, out: str | Path | None) -> str:
    if label is not None:
        return label
    from shiftchange.core.table import packaged

    if spec.digest == packaged().digest:
        return packaged().label
    if out is None:
        raise TrialError("a spec value is named in replay commands by a folder: give the trial a label, or an out folder to write it to")
    return str(write_spec(spec, Path(out) / f"spec-{spec.digest}"))


def spec_flag(label: str) -> str:
    """`--spec LABEL` for a replay command, or nothing for the packaged spec."""
    from shiftchange.core.table import packaged

    return "" if label == packaged().label else f" --spec {shlex.quote(label)}"


# ------------------------------------------------------------------ structure


def _structure(spec: Spec) -> CheckRun:
    from shiftchange.core import InputError
    from shiftchange.core.table import Table

    began = time.perf_counter()
    try:
        Table(spec)
    except (SpecError, InputError) as error:
        finding = Finding(STRUCTURE, COMPILES, VIOLATED, str(error))
        return CheckRun(STRUCTURE, (finding,), runs=1, elapsed_s=time.perf_counter() - began)
    findings = [Finding(STRUCTURE, COMPILES, OK)]
    for result in check_spec(spec):
        detail = result.summary if result.ok else "; ".join((result.summary, *result.witness[:1]))
        findings.append(Finding(STRUCTURE, result.name, OK if result.ok else VIOLATED, detail))
    return CheckRun(STRUCTURE, tuple(findings), runs=1, elapsed_s=time.perf_counter() - began)


# ------------------------------------------------------------------ explore


def unit(scenario: str, seed: int) -> str:
    """How a simulation is named to `skip` and in `CheckRun.presented`."""
    return f"{scenario} seed {seed}"


def _explore(
    spec: Spec,
    scale: Scale,
    label: str,
    scratch: Path,
    timelines: bool,
    coverage: bool = False,
    kills: Callable[[str], bool] | None = None,
    skip: Callable[[str, str], bool] | None = None,
) -> CheckRun:
    from shiftchange.checkers.rules import INVARIANTS
    from shiftchange.explore import explore, replay_command, steps_flags

    began = time.perf_counter()
    folder = str(write_spec(spec, scratch / f"spec-{spec.digest}"))
    statuses: dict[str, list[tuple[str, str]]] = {name: [] for name in (*INVARIANTS, FINISHES)}
    examples: list[Counterexample] = []
    fired: dict[str, list[int]] = {}
    presented: dict[str, frozenset[tuple[str, str, str | None]]] = {}
    runs = skipped = 0
    for text in scale.explore:
        if skip is not None and skip(EXPLORE, text):
            skipped += 1
            continue
        config = replace(explore_config(text), spec=folder)
        shown = replace(config, spec=None if label == _packaged_label() else label)
        try:
            result = explore(config, time_limit_s=scale.explore_time_limit_s)
            if coverage:
                counts = result.tally.counts()
                _add(fired, counts["fired"])
                if result.complete and result.counterexample is None:
                    presented[text] = _pairs(counts["presented"])
        except Exception as error:  # a table that makes the core or the agent raise is judged, never a traceback
            statuses.setdefault(CRASHED, []).append((VIOLATED, f"{text}: {type(error).__name__}: {error}"))
            if kills is not None and kills(CRASHED):
                break
            continue
        runs += 1
        found = result.counterexample
        for name in statuses:
            if name == CRASHED:
                continue
            if name == FINISHES:
                statuses[name].append(_finishes(result, text))
                continue
            if found is not None and found.invariant == name:
                statuses[name].append((found.status, f"{text}: {found.example[0] if found.example else ''}"))
            elif result.complete:
                statuses[name].append((OK, ""))
            else:
                why = "stopped at another violation" if found is not None else f"stopped by its {result.stopped_by} bound"
                statuses[name].append((UNKNOWN, f"{text}: {why}"))
        if kills is not None and statuses[FINISHES][-1][0] == VIOLATED and kills(FINISHES):
            break  # stopping early: no run of this configuration finishes the work
        if found is not None:
            drawn = _explored_drawing(config, found) if timelines else None
            examples.append(
                Counterexample(
                    EXPLORE,
                    found.invariant,
                    f"explore {steps_flags(shown)}",
                    len(found.steps),
                    f"{len(found.steps)} steps",
                    tuple(found.example),
                    tuple(found.timeline),
                    drawn,
                    (replay_command(shown, found.steps),),
                )
            )
            if kills is not None and found.status == VIOLATED and kills(found.invariant):
                break  # stopping early: this configuration killed it, the next ones are not searched
    findings = tuple(Finding(EXPLORE, name, *_worst(seen)) for name, seen in statuses.items() if seen)
    spent = time.perf_counter() - began
    return CheckRun(
        EXPLORE, findings, tuple(examples), runs=runs, elapsed_s=spent, fired=_tuples(fired), presented=presented, skipped=skipped
    )


def _finishes(result: Any, text: str) -> tuple[str, str]:
    """This configuration's `work_can_finish` verdict: ok when some ended state has every task done."""
    if result.finishes:
        return OK, ""
    if result.complete:
        return VIOLATED, f"{text}: no run ends with every task done ({result.quiescent:,} ended states, none of them done)"
    return UNKNOWN, f"{text}: the search stopped before it found a run that ends with every task done"


def _packaged_label() -> str:
    from shiftchange.core.table import packaged

    return packaged().label


def _explored_drawing(config: Any, found: Any) -> str | None:
    try:
        return explored_timeline(config, found.steps, found.example)
    except Exception:  # the drawing is a courtesy: the path, its story and its replay stand without it
        return None


def _worst(seen: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """Violated if any run violated it, else unknown if any could not tell, else ok; with the first such run's detail."""
    for status in (VIOLATED, UNKNOWN):
        details = [detail for each, detail in seen if each == status]
        if details:
            more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
            return status, details[0] + more
    return OK, ""


# ------------------------------------------------------------------ simulate


def _simulate(
    spec: Spec,
    scale: Scale,
    label: str,
    timelines: bool,
    coverage: bool = False,
    kills: Callable[[str], bool] | None = None,
    skip: Callable[[str, str], bool] | None = None,
) -> CheckRun:
    from shiftchange.checkers.rules import INVARIANTS
    from shiftchange.core.table import Table
    from shiftchange.lab.report.coverage import CoverageSink
    from shiftchange.sim.network import rejected_so_far
    from shiftchange.sim.scenarios import scenario_config
    from shiftchange.sim.world import play

    began = time.perf_counter()
    table = Table(spec, label)
    statuses: dict[str, list[tuple[str, str]]] = {name: [] for name in INVARIANTS}
    examples: list[Counterexample] = []
    fired: dict[str, list[int]] = {}
    drawn: set[str] = set()
    presented: dict[str, frozenset[tuple[str, str, str | None]]] = {}
    runs = skipped = 0
    plays = [(scenario, seed) for scenario in scale.scenarios for seed in scale.seeds]
    for scenario, seed in plays:
        if skip is not None and skip(SIMULATE, unit(scenario, seed)):
            skipped += 1
            continue
        config = scenario_config(scenario, seed, scale.tasks)
        where = f"{scenario}, seed {seed}, {scale.tasks:,} tasks"
        runs += 1
        try:
            sink = CoverageSink(spec) if coverage else None
            rejected = rejected_so_far()
            outcome = play(config, seed, scenario, series=False, table=table, history_sink=sink)
            if sink is not None:
                counts = sink.tally.counts()
                _add(fired, counts["fired"])
                if rejected_so_far() == rejected:  # a rejected call rolled back: what it presented left no event to count
                    presented[unit(scenario, seed)] = _pairs(counts["presented"])
        except Exception as error:  # a table that makes the core raise is a failure, not a traceback
            statuses.setdefault(CRASHED, []).append((VIOLATED, f"{where}: {type(error).__name__}: {error}"))
            if kills is not None and kills(CRASHED):
                break
            continue
        for name, verdict in outcome.verdicts.items():
            detail = f"{where}: {verdict.example[0]}" if verdict.status != OK and verdict.example else where
            statuses.setdefault(name, []).append((verdict.status, detail if verdict.status != OK else ""))
        # One counterexample per invariant: the first run that violates it is shrunk and drawn, later ones are not.
        violated = [name for name, verdict in outcome.verdicts.items() if verdict.status == VIOLATED and name not in drawn]
        if violated:
            example, spent = _simulated_example(outcome, violated[0], scale, table, timelines, where)
            runs += spent
            examples.append(example)
            drawn.add(violated[0])
        if kills is not None and any(v.status == VIOLATED and kills(name) for name, v in outcome.verdicts.items()):
            break  # stopping early: this run killed it, the next ones are not played
    findings = tuple(Finding(SIMULATE, name, *_worst(seen)) for name, seen in statuses.items() if seen)
    spent = time.perf_counter() - began
    return CheckRun(
        SIMULATE, findings, tuple(examples), runs=runs, elapsed_s=spent, fired=_tuples(fired), presented=presented, skipped=skipped
    )


def _simulated_example(outcome: Any, invariant: str, scale: Scale, table: Any, timelines: bool, where: str) -> tuple[Counterexample, int]:
    """The counterexample of a violating run: shrunk when the scale allows, with its timeline; and the runs it took."""
    from shiftchange.lab.report import replay_command
    from shiftchange.lab.shrink import shrink
    from shiftchange.sim.world import play

    verdict = outcome.verdicts[invariant]
    replays = [replay_command(outcome, table=table)]
    spent = 0
    best, size_text = outcome, f"{outcome.tasks:,} tasks, {_faults(len(outcome.schedule))} (not shrunk)"
    story: tuple[str, ...] = ()
    if scale.shrink_runs:
        shrunk = shrink(outcome.config, outcome.seed, outcome.scenario, invariant=invariant, budget_runs=scale.shrink_runs, table=table)
        if shrunk is not None:
            spent += shrunk.runs
            best = shrunk.outcome
            size_text = f"{shrunk.tasks:,} tasks, {_faults(len(shrunk.faults_kept))} (shrunk in {shrunk.runs} runs)"
            story = tuple(shrunk.timeline)
            replays.append(replay_command(best, table=table))
    example = best.verdicts[invariant].example if invariant in best.verdicts else verdict.example
    drawn = None
    if timelines:
        config, seed, scenario, kept = best.config, best.seed, best.scenario, best.faults_kept
        try:
            drawn = simulated_timeline(
                lambda sink: play(config, seed, scenario, faults_kept=kept, series=False, history_sink=sink, table=table), example
            )
            spent += 1
        except Exception:  # the drawing is a courtesy: the run's replay stands without it
            drawn = None
    found_in = f"sim run {where}"
    return Counterexample(SIMULATE, invariant, found_in, best.tasks, size_text, tuple(example), story, drawn, tuple(replays)), spent


def _faults(count: int) -> str:
    return f"{count:,} fault{'' if count == 1 else 's'}"


def _add(fired: dict[str, list[int]], counts: Mapping[str, Sequence[int]]) -> None:
    """Add one run's rows fired (per machine, in row order) into `fired`."""
    for machine, each in counts.items():
        total = fired.setdefault(machine, [0] * len(each))
        for number, count in enumerate(each):
            total[number] += count


def _pairs(presented: Mapping[str, Iterable[Sequence[Any]]]) -> frozenset[tuple[str, str, str | None]]:
    """A tally's (trigger, state) pairs per machine as one set of (machine, trigger, state)."""
    return frozenset((machine, trigger, state) for machine, pairs in presented.items() for trigger, state in pairs)


def _tuples(fired: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    return {machine: tuple(counts) for machine, counts in fired.items()}
