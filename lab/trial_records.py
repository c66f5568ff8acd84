"""A trial's question and answer as values: the checks and their defaults, the scale a trial runs at (`Scale`), what it
found (`Finding`, `Counterexample`), each check's run (`CheckRun`) and the whole trial (`Trial`). `lab.trial` runs
the checks and imports these back; a reader of a trial's report needs only this module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shiftchange.checkers.history import OK

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
    `idempotent_provider=0`, a code host that ignores operation keys (`--no-idempotency`). It searches on the abstract
    clock, unless a timing given is not a whole multiple of 1/1024 s, which only the concrete clock can search (the same
    verdicts, more states: `explore.abstract_time`).
    """
    from shiftchange.explore import ExploreConfig, ExploreError
    from shiftchange.explore.abstract_time import dyadic

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
    if any(isinstance(value, float) and not dyadic(value) for value in given.values()):
        given["time"] = "concrete"
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
