"""A chaos run's plan and its record: the fault kinds and cadences, the seeded schedule, what was delivered, and the
report (`ChaosReport`, whose JSON is the one record of a run)."""

from __future__ import annotations

import math
import os
import random
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shiftchange.checkers.run import Run
    from shiftchange.core.table import Table


RATE_PER_WORKER_PER_S = 0.2
"""The default submission rate per worker. An Attempt holds its worker about 3.3 s from claim to completion with the runtime's
defaults (two 1.5 s tool calls, a commit, the provider calls), so 0.2 tasks/s per worker keeps the workers some two thirds busy
and leaves headroom for the retries every kill and pause causes, and for the capacity a paused or restarting worker takes away."""
DRAIN_DEFAULT_S = 120.0
STOP_GRACE_S = 10.0
"""How long a process has to exit after SIGTERM before it is SIGKILLed (and counted a straggler)."""
PROVIDER_START_S = 30.0
TICK_S = 0.05
PROGRESS_EVERY_S = 10.0
SUBMIT_TRIES = 5
WORKERS_MAX = 256
SCRAPE_TIMEOUT_S = 5.0
"""How long the harness waits for one process's /metrics (`--metrics`)."""
SKEW_VARIABLE = "SHIFTCHANGE_CLOCK_SKEW_S"
"""What a skewed worker finds in its environment (`shiftchange.runtime.clock`, not imported here: it loads the core)."""
SKEW_MAX_S = 86_400.0
"""The largest skew a process accepts either way (`shiftchange.runtime.clock.SKEW_MAX_S`)."""

KILL, PAUSE, ORCHESTRATOR_KILL, CONN_KILL, DROP, SKEW = "kill", "pause", "orchestrator_kill", "conn_kill", "drop", "skew"
FAULT_KINDS = (KILL, PAUSE, ORCHESTRATOR_KILL, CONN_KILL, DROP, SKEW)
POSTGRES_ONLY = (CONN_KILL, SKEW)
"""The kinds planned only on PostgreSQL: its sessions are what a connection kill ends; its clock is what makes skew harmless."""
_FAULT_NOUNS = {
    KILL: "worker kills",
    PAUSE: "pauses",
    ORCHESTRATOR_KILL: "orchestrator kills",
    CONN_KILL: "connection kills",
    DROP: "dropped responses",
    SKEW: "clock skews",
}
_STRIKES = (KILL, PAUSE, SKEW)
"""The faults that stop a worker, and so strike the Attempt it holds (a skew fault restarts it)."""
_ORCHESTRATOR = "orchestrator"
_PROVIDER = "provider"


class ChaosError(Exception):
    """The harness could not run (a process would not start, the store could not be read): one line, exit status 2."""


@dataclass(frozen=True)
class RunSpec:
    """The spec a run's cores run: as it was named, as a person reads it, its digest, the files read, and its compiled table."""

    source: str | None
    """As named (`--spec`): a folder or a git revision; None for the packaged spec."""
    label: str
    digest: str
    files: tuple[str, ...]
    table: Table = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "label": self.label, "digest": self.digest, "files": list(self.files)}


def resolve_spec(source: str | os.PathLike[str] | None) -> RunSpec:
    """The spec `source` names (None: the packaged one), read and compiled now, before any process starts.

    A name that is neither a spec folder nor a git revision holding one raises
    `shiftchange.spec.source.SpecSourceError` (a ValueError); a malformed file,
    or a table whose vocabulary the core does not implement, the loader's `SpecError`.
    """
    from shiftchange.core.table import Table, packaged
    from shiftchange.spec.source import read_spec

    named = None if source is None else os.fspath(source)
    read = read_spec(named)
    table = packaged() if named is None else Table(read.spec, read.label)
    return RunSpec(named, read.label, table.digest, read.files, table)


@dataclass(frozen=True, slots=True)
class ChaosFaults:
    """The fault cadences (mean seconds between two faults of a kind; 0 turns the kind off) and their sizes."""

    kill_every_s: float = 20.0
    pause_every_s: float = 30.0
    orchestrator_kill_every_s: float = 60.0
    conn_kill_every_s: float = 30.0
    drop_every_s: float = 10.0
    skew_every_s: float = 40.0
    """Planned on PostgreSQL only (see the module docstring)."""
    restart_after_s: tuple[float, float] = (0.5, 2.0)
    """A killed process is started again after a delay drawn from this range (seconds)."""
    pause_leases: tuple[float, float] = (2.0, 3.0)
    """A pause lasts this many lease TTLs (drawn from the range): always past the lease, so the Attempt expires under it."""
    skew_s: float = 300.0
    """How far a skewed worker's clock is set ahead or behind (the direction is drawn): many leases, so no lease survives it."""

    def __post_init__(self) -> None:
        for name in ("kill_every_s", "pause_every_s", "orchestrator_kill_every_s", "conn_kill_every_s", "drop_every_s", "skew_every_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be seconds >= 0 (0 turns it off), not {value!r}")
        skew_s = self.skew_s
        if isinstance(skew_s, bool) or not isinstance(skew_s, int | float) or not 0 < skew_s <= SKEW_MAX_S:
            raise ValueError(f"skew_s must be seconds from 0 (exclusive) to {SKEW_MAX_S:g}, not {skew_s!r}")
        for name, low in (("restart_after_s", 0.0), ("pause_leases", 1.0)):
            pair = getattr(self, name)
            if len(pair) != 2 or not (low <= pair[0] <= pair[1]) or not math.isfinite(pair[1]):
                raise ValueError(f"{name} must be a range (low, high) with {low:g} <= low <= high, not {pair!r}")

    def every_s(self, kind: str) -> float:
        return float(getattr(self, f"{kind}_every_s"))


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault of the schedule: when (seconds into the run), what, at which worker (an index), for how long."""

    at_s: float
    kind: str
    target: int
    """The worker index the schedule drew (the next live one is taken if it is down); unused for the orchestrator and drops."""
    hold_s: float
    """A kill's or a skew's restart delay, or a pause's length; 0 for the others."""
    skew_s: float = 0.0
    """A skew's: the worker's clock is started this far off (+ ahead, - behind); 0 for the others."""


@dataclass(slots=True)
class Delivered:
    """A fault as it was delivered: when (on the store's clock, the history's), what, to whom, and what it did."""

    at: float
    kind: str
    target: str
    hold_s: float
    detail: str = ""
    skew_s: float = 0.0
    """For a skew: how far off the worker's clock was started (+ ahead, - behind)."""
    attempt_id: str | None = None
    """For a kill, pause or skew of a worker: the Attempt it held a lease on at that instant, if any (read from the history)."""
    detect_s: float | None = None
    recover_s: float | None = None


@dataclass(slots=True)
class ChaosReport:
    """What a chaos run found: the verdicts, the figures, the faults delivered, and whether it passed."""

    store: str
    """The store URL with any password masked."""
    task_prefix: str
    """Every task this run submitted has an id starting with it (a store may hold other runs' tasks)."""
    run_dir: str
    workers: int
    duration_s: float
    seed: int
    rate_per_s: float
    idempotency: bool
    faults: ChaosFaults
    config: dict[str, Any]
    verdicts: dict[str, Any]
    """Invariant name -> `Verdict` (status ok, violated or unknown; violations; example lines)."""
    metrics: dict[str, Any]
    delivered: list[Delivered] = field(default_factory=list)
    wall_s: float = 0.0
    spec: dict[str, Any] = field(default_factory=dict)
    """The spec every core of the run ran (`RunSpec.to_json`): source as named, label, digest, files read."""
    rerun: str = ""
    """The command that runs this configuration again (a fresh run dir; the store's password masked)."""
    scraped: dict[str, Any] | None = None
    """With metrics on: per process, each sample of its /metrics summed over its labels (or `error`); None when off."""

    @property
    def ok(self) -> bool:
        return all(verdict.status == "ok" for verdict in self.verdicts.values()) and self.metrics["tasks_lost"] == 0

    def to_record(self) -> Run:
        """This run as the one record every driver's run is (`checkers.run.Run`): the faults it delivered, with their
        times on the store's clock, are its faults; its rerun command is its replay; the store, the task prefix, the run
        folder, the load, the fault cadences and what was scraped from each process identify it (its `subject`)."""
        from shiftchange.checkers.run import Run

        return Run(
            driver="chaos",
            ok=self.ok,
            config=self.config,
            spec=self.spec,
            verdicts=self.verdicts,
            metrics=self.metrics,
            replay=self.rerun,
            seed=self.seed,
            tasks=self.metrics.get("tasks_submitted"),
            faults=tuple(asdict(item) for item in self.delivered),
            wall_s=self.wall_s,
            subject={
                "store": self.store,
                "task_prefix": self.task_prefix,
                "run_dir": self.run_dir,
                "workers": self.workers,
                "duration_s": self.duration_s,
                "rate_per_s": self.rate_per_s,
                "idempotency": self.idempotency,
                "fault_cadences": asdict(self.faults),
                "scraped": self.scraped,
            },
        )

    def to_json(self) -> dict[str, Any]:
        """The `--json` report and report.json: the record's one JSON shape (`checkers.run.Run.to_json`)."""
        return self.to_record().to_json()


# ------------------------------------------------------------------ the schedule


def plan_faults(duration_s: float, faults: ChaosFaults, workers: int, seed: int, lease_ttl_s: float, postgres: bool) -> list[Fault]:
    """The seeded fault schedule over the run: each kind on its own stream, gaps drawn from 0.5 to 1.5 times its cadence.

    Each kind draws from a stream of its own (seeded by the seed and the kind's
    name), so changing one cadence leaves the other kinds' schedules as they were.
    Connection kills and clock skews are planned only on PostgreSQL, and a pause
    only if it ends before the duration does (the drain continues every paused
    worker). A skew's direction is drawn, ahead or behind, evens.
    """
    planned: list[Fault] = []
    for kind in FAULT_KINDS:
        every_s = faults.every_s(kind)
        if every_s <= 0 or (kind in POSTGRES_ONLY and not postgres):
            continue
        rng = random.Random(f"shiftchange-chaos:{seed}:{kind}")
        at_s = every_s * rng.uniform(0.5, 1.5)
        while at_s < duration_s:
            target = rng.randrange(workers)
            skew_s = 0.0
            if kind in (KILL, ORCHESTRATOR_KILL, SKEW):
                hold_s = rng.uniform(*faults.restart_after_s)
            elif kind == PAUSE:
                hold_s = lease_ttl_s * rng.uniform(*faults.pause_leases)
            else:
                hold_s = 0.0
            if kind == SKEW:
                skew_s = faults.skew_s if rng.random() < 0.5 else -faults.skew_s
            if kind != PAUSE or at_s + hold_s < duration_s:  # a pause the drain would cut short never outlives the lease
                planned.append(Fault(round(at_s, 3), kind, target, round(hold_s, 3), skew_s))
            at_s += every_s * rng.uniform(0.5, 1.5)
    planned.sort(key=lambda fault: (fault.at_s, FAULT_KINDS.index(fault.kind)))
    return planned
