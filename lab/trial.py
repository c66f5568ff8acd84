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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED
from shiftchange.spec.checker import check_spec
from shiftchange.spec.loader import SpecError
from shiftchange.spec.model import Spec

from .timelines import explored_timeline, simulated_timeline
from .write import write_spec

__all__ = [
    "CHECKS",
    "DEFAULT_EXPLORE",
    "CheckRun",
    "Counterexample",
    "Finding",
    "Scale",
    "Trial",
    "TrialError",
    "explore_config",
    "run_trial",
]

STRUCTURE, EXPLORE, SIMULATE = "structure", "explore", "simulate"
CHECKS = (STRUCTURE, EXPLORE, SIMULATE)
"""The checks, cheapest first."""
COMPILES = "compiles"
"""The structure check's first verdict: the core compiles the table (its vocabulary and states are the core's)."""
FINISHES = "work_can_finish"
"""The explorer's liveness verdict beside the invariants: in every configuration some run of the world ends with every
task done. The invariants are safety properties, which a table that refuses every grant, or leads every Attempt to
failure, satisfies; this asks that the work can still be finished (CTL's EF done, over the states where nothing can
happen any more). Violated when a search ran to its end and never got there."""
CRASHED = "crashed"
"""A check that raised: the run could not be judged, and a table that makes the core raise is a failure all the same."""

DEFAULT_EXPLORE: tuple[str, ...] = (
    "workers=2 pauses=1",
    "workers=2 crashes=1",
    "workers=2 cancels=1",
    "workers=1 cancels=2",
    "workers=1 stalls=1 cancels=1",
    "workers=2 duplicates=1",
    "workers=1 lost_responses=1",
    "workers=1 lost_requests=1",
    "workers=1 refusals=1",
    "workers=1 ci_failures=2 retries=2",
    "workers=1 ci_failures=1 retries=0 operator_calls=2",
    "workers=1 deletions=1 operator_calls=2",
    "workers=1 ci_failures=2 retries=1 operator_calls=1",
    "workers=1 deletions=1 crashes=1",
    "workers=1 refusals=1 cancels=1",
    "workers=1 pauses=1 refusals=1 operations=2",
    "workers=1 pauses=1 cancels=1 idempotent_provider=0 call_deadline_s=5",
    "workers=1 pauses=2 idempotent_provider=0 call_deadline_s=5 operations=2",
    "workers=1 crashes=1 cancels=1 idempotent_provider=0 call_deadline_s=5 operations=2",
    "workers=1 pauses=1 idempotent_provider=0 call_deadline_s=5 operator_calls=1",
)
"""The explorer's default configurations, about one fault kind each (one task), each searched to the end in a few seconds.

A stale worker needs two workers and a pause (the unfenced `complete` is found in 19 steps); each other fault the explorer
places reaches rows the pause does not (recovery after a crash, cancellation and a second one of the same Attempt, a slow
holder that renews while claimed, running and cancelling, duplicate delivery, lost calls and answers, refusals, failing CI
and its retries, an operator who accepts, approves or releases at any moment (a task in its inbox, out of turn, or a task
the budget stopped, blocked or quarantined), a pull request deleted outside the system (evidence that contradicts a
receipt), and a provider's refusal crossing a cancellation). The last five are the late writes and the unsettled calls
the mutation analysis found no other configuration presents: a paused holder whose checkpoint (two operations), failure
report or acknowledgement comes after its lease ran out, and, at a code host that ignores keys with call deadlines past
the lease, reconciliation reached while a call is still in flight (after a pause, two pauses, a crash, with a
cancellation or an operator's call). Together they fire all but a few of the shipped table's rows; the simulator's
scenarios reach those (admission's defer and shed)."""
DEFAULT_SCENARIOS = ("mixed", "zombie-worker", "capacity-overload", "cancel-storm")
"""The simulator's default scenarios: the main job; stale workers (the aimed pause that catches an unfenced completion
comes up from 300 tasks); admission under overload, the only world that defers and sheds (the mutation analysis found
every mutant of those rows unreached without it); and cancellation mid-run at scale."""
DEFAULT_SEEDS = (0,)
DEFAULT_TASKS = 300
EXPLORE_TIME_LIMIT_S = 10.0
"""A configuration's search stops here, said as unknown: the issue's bound on the exploration per mutant."""


class TrialError(ValueError):
    """A trial that cannot be run as asked (a bad scale, a spec value with nowhere to write it): one line."""


EXPLORED_OPERATIONS = ("push-branch", "create-pr", "post-comment")
"""The workflow `operations=N` names: its first N side effects, ending with the pull request where N is one or two."""


def explore_config(text: str) -> Any:
    """An `ExploreConfig` from `name=number` words: `workers=2 pauses=1`.

    The counts as the explorer's flags name them, with `_`; a timing in seconds (`call_deadline_s=5`);
    `operations=N`, a workflow of N side effects (`EXPLORED_OPERATIONS`, the default one being the pull request);
    `idempotent_provider=0`, a code host that ignores operation keys (`--no-idempotency`).
    """
    from shiftchange.explore import ExploreConfig, ExploreError

    given: dict[str, Any] = {}
    for word in text.replace(",", " ").split():
        name, equals, value = word.partition("=")
        name, value = name.strip().replace("-", "_"), value.strip()
        if not equals or not value.replace(".", "", 1).isdigit():
            raise TrialError(f"an exploration is name=number words (workers=2 pauses=1), not {word!r} in {text!r}")
        if name == "spec" or name == "antipattern" or name not in ExploreConfig.__dataclass_fields__:
            raise TrialError(f"unknown count {name!r} in the exploration {text!r}; use workers, tasks, crashes, pauses, ...")
        number = float(value) if "." in value else int(value)
        if name == "operations":
            if not isinstance(number, int) or not 1 <= number <= len(EXPLORED_OPERATIONS):
                raise TrialError(f"operations=N names 1 to {len(EXPLORED_OPERATIONS)} side effects, not {value!r} in {text!r}")
            given[name] = ("create-pr",) if number == 1 else EXPLORED_OPERATIONS[:number]
        elif name == "idempotent_provider":
            if number not in (0, 1):
                raise TrialError(f"idempotent_provider is 0 or 1, not {value!r} in {text!r}")
            given[name] = bool(number)
        else:
            given[name] = number
    if not given:
        raise TrialError("an exploration needs at least one name=number word (workers=2 pauses=1)")
    try:
        return ExploreConfig(**given)
    except (ExploreError, TypeError) as error:
        raise TrialError(f"exploration {text!r}: {error}") from None


@dataclass(frozen=True)
class Scale:
    """What a trial runs: the explorer's configurations, and the simulator's scenarios, seeds and size."""

    explore: tuple[str, ...] = DEFAULT_EXPLORE
    """Each an `explore_config` text: `workers=2 pauses=1`."""
    scenarios: tuple[str, ...] = DEFAULT_SCENARIOS
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    tasks: int = DEFAULT_TASKS
    shrink_runs: int = 0
    """Runs the shrinker may spend on a violating simulation (0: the full run is the counterexample)."""
    explore_time_limit_s: float = EXPLORE_TIME_LIMIT_S

    def __post_init__(self) -> None:
        from shiftchange.sim.scenarios import SCENARIOS

        for text in self.explore:
            explore_config(text)
        for scenario in self.scenarios:
            if scenario not in SCENARIOS:
                raise TrialError(f"unknown scenario {scenario!r}; use one of {', '.join(SCENARIOS)}")
        if not all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in self.seeds):
            raise TrialError(f"seeds are whole numbers from 0, not {self.seeds!r}")
        if isinstance(self.tasks, bool) or not isinstance(self.tasks, int) or not 1 <= self.tasks <= 100_000:
            raise TrialError(f"tasks must be a whole number from 1 to 100,000, not {self.tasks!r}")
        if isinstance(self.shrink_runs, bool) or not isinstance(self.shrink_runs, int) or not 0 <= self.shrink_runs <= 1000:
            raise TrialError(f"shrink_runs must be a whole number from 0 to 1,000, not {self.shrink_runs!r}")
        if not self.explore and not (self.scenarios and self.seeds):
            raise TrialError("a trial needs an exploration or a simulation (a scenario and a seed) besides the structural check")

    @property
    def simulations(self) -> int:
        return len(self.scenarios) * len(self.seeds)

    def lines(self) -> list[str]:
        """What the trial runs, as a person reads it (and as the flags that set it name it)."""
        explored = "; ".join(self.explore) or "none"
        scenarios = ", ".join(self.scenarios) or "none"
        seeds = ", ".join(str(seed) for seed in self.seeds) or "none"
        shrink = f", violations shrunk in at most {self.shrink_runs} runs" if self.shrink_runs else ""
        explore = f"{explored} (each searched to the end, at most {self.explore_time_limit_s:g} s)" if self.explore else "none"
        simulate = f"scenarios {scenarios} x seeds {seeds}, {self.tasks:,} tasks each{shrink}" if self.simulations else "none"
        return [
            "structure: the core compiles the table, and every property of `spec check` holds",
            f"explore:   {explore}",
            f"simulate:  {simulate}",
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "explore": list(self.explore),
            "scenarios": list(self.scenarios),
            "seeds": list(self.seeds),
            "tasks": self.tasks,
            "shrink_runs": self.shrink_runs,
            "explore_time_limit_s": self.explore_time_limit_s,
        }


@dataclass(frozen=True)
class Finding:
    """One invariant's (or property's) verdict in one check."""

    check: str
    name: str
    status: str
    """ok, violated or unknown (`checkers.history`)."""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass(frozen=True)
class Counterexample:
    """A violation, as a reviewer replays it: where it was found, its size, what the checker saw, the task's timeline."""

    check: str
    invariant: str
    found_in: str
    """The configuration (explore) or the run (simulate) that shows it."""
    size: int
    """Steps of the explorer's path, or tasks of the simulated run: the smaller, the shorter."""
    size_text: str
    example: tuple[str, ...]
    story: tuple[str, ...]
    """The explorer's steps with what each appended, or the shrunk run's faults and events of the task."""
    timeline: str | None
    """The violating task's recovery timeline (`core.timeline.render_timeline`), or None when no task could be drawn."""
    replay: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "invariant": self.invariant,
            "found_in": self.found_in,
            "size": self.size,
            "size_text": self.size_text,
            "example": list(self.example),
            "story": list(self.story),
            "timeline": self.timeline,
            "replay": list(self.replay),
        }


@dataclass(frozen=True)
class CheckRun:
    """What one check did: its verdicts, its counterexamples, how many runs (searches, simulations) and how long."""

    check: str
    findings: tuple[Finding, ...]
    counterexamples: tuple[Counterexample, ...] = ()
    runs: int = 0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    """The CPU time this process spent on the check: what it costs, whatever else shares the machine (the wall time does not)."""
    fired: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """With `coverage`: per machine, how often each row fired (accepted events), in row order; else empty."""
    presented: Mapping[str, frozenset[tuple[str, str, str | None]]] = field(default_factory=dict)
    """With `coverage`: per run (`unit`: an exploration's text, a simulation's "scenario seed N"), every (machine, trigger,
    state) a call presented to the table, accepted or refused, in a search that ran to its end or a run played whole."""
    skipped: int = 0
    """Runs not made because `skip` showed them to be the base's own (see `run_trial`)."""

    def failed(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.status != OK)

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "verdicts": {finding.name: {"status": finding.status, "detail": finding.detail} for finding in self.findings},
            "counterexamples": [example.to_json() for example in self.counterexamples],
            "runs": self.runs,
            "elapsed_s": round(self.elapsed_s, 3),
            "cpu_s": round(self.cpu_s, 3),
        }


@dataclass(frozen=True)
class Trial:
    """A spec's trial: which spec, at what scale, each check run (in order), and the first violation that killed it, if any."""

    label: str
    digest: str
    scale: Scale
    checks: tuple[CheckRun, ...]
    killed_by: Finding | None = None
    """The first finding, in check order, that is not ok and not expected (None: the spec survived every check run)."""
    stopped_early: bool = False
    elapsed_s: float = field(default=0.0, compare=False)

    def check(self, name: str) -> CheckRun | None:
        return next((run for run in self.checks if run.check == name), None)

    def verdicts(self) -> dict[tuple[str, str], Finding]:
        return {(finding.check, finding.name): finding for run in self.checks for finding in run.findings}

    def shortest(self, invariant: str) -> Counterexample | None:
        """The shortest counterexample of `invariant`: the explorer's when it found one (a shortest path), else the simulator's."""
        found = [example for run in self.checks for example in run.counterexamples if example.invariant == invariant]
        if not found:
            return None
        return min(found, key=lambda example: (CHECKS.index(example.check), example.size))

    def to_json(self) -> dict[str, Any]:
        killed = None if self.killed_by is None else {"check": self.killed_by.check, "invariant": self.killed_by.name}
        return {
            "spec": {"label": self.label, "digest": self.digest},
            "scale": self.scale.to_json(),
            "checks": [run.to_json() for run in self.checks],
            "killed_by": killed,
            "stopped_early": self.stopped_early,
            "elapsed_s": round(self.elapsed_s, 3),
        }


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
