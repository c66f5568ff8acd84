"""`shiftchange chaos --store URL`: real processes under real faults, judged by the simulator's own checkers.

The harness starts the provider (`shiftchange provider`), one orchestrator
and N workers as OS processes over one shared store, submits a workload at a
steady rate for the run's duration, and meanwhile, on a seeded schedule:

- SIGKILLs a worker and restarts it after a short delay, under the same id
  (its history stays attributable; the new process remembers nothing);
- SIGSTOPs a worker for two to three leases, then SIGCONTs it: it wakes
  believing it owns its Attempt, and the fences must refuse it;
- SIGKILLs the orchestrator and restarts it;
- terminates a worker's PostgreSQL sessions (`pg_terminate_backend`, found
  by their `application_name`; not applicable on SQLite);
- tells the provider to drop its next response (the effect lands, the
  caller hears nothing);
- skews a worker's clock: SIGKILLs it and starts it again with its wall
  clock `skew_s` (300 s) ahead or behind (SHIFTCHANGE_CLOCK_SKEW_S in its
  environment), which it keeps across later restarts until another skew
  fault sets it again. On PostgreSQL only: leases are judged on the
  server's clock there, so a worker whose clock is minutes off must claim,
  renew and be fenced exactly as the others; on SQLite one machine has one
  clock by contract, and a skewed process would break leases there.

Only a fault actually delivered is counted: a pause of a worker that is
already down is skipped, and said so. A paused worker is continued on time
by a keeper thread that never waits for the store: on SQLite a worker paused
inside a write transaction holds the file's lock until it is continued, and
the harness's own submissions wait for that lock, so continuing it from the
main thread would wait for ever on the very pause it is to end. Processes
are started only from the main thread: the kernel's parent-death signal,
which keeps a child from outliving the harness, fires when the thread that
started it ends. When the duration ends, the faults
stop (every paused worker is continued, every killed process restarted),
submission stops, and the processes run on until every submitted task is at
rest (terminal, or truthfully blocked, escalated or quarantined) or the
drain limit passes. Then every process gets SIGTERM, and SIGKILL if it does
not exit in time.

Judgement. The store's history (this run's tasks only: a store may hold
earlier runs) and the provider's ledger on disk are judged by
`shiftchange.checkers.judge`, the checkers `sim run` uses, with the final
read of every task. The report adds the figures: tasks done, at rest and
lost; stale writes refused (late refusals) and accepted (`fenced_writes`
violations); faults delivered; the measures the simulator reports too, from
the same fold (`shiftchange.checkers.measures`): duplicate effects in the
ledger, time to detect (from a kill, pause or skew restart of a worker holding a
lease to that Attempt's `expire`) and to recover (to the next accepted claim of a
later Attempt of the task); events written and transactions retried, per
second. Which Attempt a fault struck is read off the history: the worker's
last accepted claim before the fault, if that Attempt had not left its lease
by then. As in `sim run`, an unknown verdict is not a pass; the run passes
(exit 0) only when every invariant holds and no task was lost.

Metrics. With `metrics` (`--metrics`), the orchestrator and every worker
are started with `--metrics-port 0` (each logs the URL it serves on), and
when the drain ends, before any process is stopped, the harness scrapes each
one's `/metrics` and keeps, per process, each sample summed over its labels
(`scraped` in the report; docs/metrics.md says what each means). A process
killed and restarted starts its counters afresh: a scrape counts its last
incarnation only.

Every process writes its stdout and stderr to its own log in the run
directory (`logs/NAME.log`, appended to across restarts, each start marked);
the directory also holds `config.json` (the `RuntimeConfig` every process
reads), the provider's `ledger.jsonl` and `report.json`. It is kept.

The spec. Every core of the run (the harness's own, the orchestrator's, each
worker's) runs one table: the packaged spec, or the one `spec` names (a
folder or a git revision, read as `shiftchange spec check` reads one:
`resolve_spec`). A named spec is copied into the run directory (`spec/`) as
it was read, and the children are started with `--spec` naming that copy, so
a folder edited or a branch moved mid-run cannot change what a restarted
process runs. The report records the spec's label and digest, and the
command that runs the same configuration again (`rerun`) carries `--spec`.

This module imports only the standard library at load time: `shiftchange`
builds its whole parser before it runs any command, and must not compile the
spec to do so. The runtime and the checkers are imported when a run starts.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from shiftchange.checkers import LedgerEntry, Measures
    from shiftchange.checkers.run import Run
    from shiftchange.core import Event
    from shiftchange.core.table import Table
    from shiftchange.runtime.config import RuntimeConfig

__all__ = [
    "FAULT_KINDS",
    "ChaosError",
    "ChaosFaults",
    "ChaosReport",
    "Fault",
    "RunSpec",
    "ledger_entries",
    "plan_faults",
    "render_text",
    "resolve_spec",
    "run_chaos",
]

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


# ------------------------------------------------------------------ processes


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, a preexec hook that has the kernel SIGKILL the child when the harness dies, so no process outlives a killed harness."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return hook


class _Child:
    """One OS process of the run (the provider, the orchestrator, a worker): how to start it, its log, its state."""

    def __init__(
        self, name: str, argv: list[str], log_path: Path, preexec: Callable[[], None] | None, now: Callable[[], float] = time.time
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.preexec = preexec
        self.now = now
        """The harness's clock, for the start marks in the log."""
        self.env: dict[str, str] = {}
        """Set in this process's environment at every start (a skew fault's SHIFTCHANGE_CLOCK_SKEW_S), over the harness's own."""
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.paused_until: float | None = None
        self.restart_at: float | None = None
        self.exits: list[int] = []
        """Exit statuses of incarnations that ended while the harness was not stopping or killing them."""

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            told = "".join(f"{name}={value} " for name, value in sorted(self.env.items()))
            mark = f"=== shiftchange chaos: start {self.starts} of {self.name} at {self.now():.3f}: {told}{' '.join(self.argv)}\n"
            log.write(mark.encode())
            log.flush()
            self.process = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.env} if self.env else None,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the harness only; the harness stops its children itself
                preexec_fn=self.preexec,
            )
        self.restart_at = None
        self.paused_until = None

    def signal(self, number: int) -> bool:
        """Send a signal to the running process; False if there is none (it exited meanwhile)."""
        if not self.running:
            return False
        try:
            self.process.send_signal(number)  # type: ignore[union-attr]
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> bool:
        """SIGKILL the process and reap it; False if it was not running."""
        if not self.signal(signal.SIGKILL):
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5.0)  # type: ignore[union-attr]
        self.process = None
        self.paused_until = None
        return True

    def tail(self, lines: int = 5) -> list[str]:
        try:
            text = self.log_path.read_bytes()[-8192:].decode(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-lines:]


def _python(*words: str) -> list[str]:
    return [sys.executable, "-m", *words]


# ------------------------------------------------------------------ store URLs


def _masked(url: str) -> str:
    """The URL with any password replaced by ***, for printing."""
    from shiftchange.stores import describe

    return describe(url)


def _kind_of(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    if url.startswith("sqlite:///"):
        return "sqlite"
    if url.strip() == "memory:":
        raise ValueError("chaos needs a store its processes can share: sqlite:///path or postgresql://... (memory: is one process's)")
    raise ValueError(f"not a store URL: {_masked(url)!r}; chaos takes sqlite:///path or postgresql://USER@HOST/DB")


def _admin_conninfo(url: str) -> str:
    """A libpq URL for the harness's own session: the store URL without the store's own query settings, named shiftchange-chaos."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key not in ("schema", "application_name")]
    query.append(("application_name", "shiftchange-chaos"))
    return urlunsplit(parts._replace(scheme="postgresql", query=urlencode(query)))


# ------------------------------------------------------------------ the run


class _Run:
    """One chaos run's state: its processes, its store session, its schedule and what was delivered."""

    def __init__(
        self,
        store_url: str,
        workers: int,
        duration_s: float,
        seed: int,
        rate_per_s: float,
        run_dir: Path,
        faults: ChaosFaults,
        idempotency: bool,
        config: RuntimeConfig,
        drain_s: float,
        progress: Callable[[str], None] | None,
        spec: RunSpec | None = None,
        metrics: bool = False,
    ) -> None:
        """`spec` is what every core of the run runs (`resolve_spec`); None: the packaged spec, resolved when the run is prepared.
        `metrics`: the orchestrator and workers serve Prometheus metrics, scraped when the drain ends (`scrape`)."""
        from shiftchange.runtime.clock import WallClock

        self.wall = WallClock()
        """The harness's own clock: its schedule, its restarts and pauses (this process is never skewed by its faults)."""
        self.judged: Any = self.wall
        """The store's clock once the store is open (`lease_clock`): what a delivered fault is stamped on, as the history is."""
        self.store_url = store_url
        self.kind = _kind_of(store_url)
        self.workers = workers
        self.duration_s = duration_s
        self.seed = seed
        self.rate_per_s = rate_per_s
        self.run_dir = run_dir
        self.faults = faults
        self.idempotency = idempotency
        self.config = config
        self.drain_s = drain_s
        self.progress = progress
        self.logs = run_dir / "logs"
        self.ledger_path = run_dir / "ledger.jsonl"
        self.config_path = run_dir / "config.json"
        self.spec = spec
        self.metrics = metrics
        self.scraped: dict[str, Any] | None = None
        self.spec_dir: Path | None = None
        """The copy of a named spec the children run (`--spec`); None: they run the packaged one."""
        self.url_file = run_dir / "provider.url"
        self.prefix = f"chaos-{secrets.token_hex(3)}-"
        """This run's task ids start with it: the history of a store holding earlier runs is judged for this run's tasks only."""
        self.preexec = _die_with_parent()
        self.children: dict[str, _Child] = {}
        self.workers_by_index: list[_Child] = []
        self.store: Any = None
        self.orchestrator: Any = None
        self.provider: Any = None
        self.provider_url = ""
        self.admin: Any = None
        self.admin_error = ""
        self.task_ids: list[str] = []
        self.pending: set[str] = set()
        """Submitted tasks not yet seen at rest."""
        self.submit_failures: list[str] = []
        self.delivered: list[Delivered] = []
        self.skipped: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self.backends_terminated = 0
        self.unexpected: list[dict[str, Any]] = []
        self.stragglers: list[str] = []
        self.unclean: list[dict[str, Any]] = []
        self.provider_counters: dict[str, Any] = {}
        self.stopping = False
        self.lock = threading.Lock()
        """Held while the processes' state changes: by the keeper as it continues one, by the main thread otherwise."""
        self.keeper: threading.Thread | None = None
        self.keeper_stop = threading.Event()
        self.keeper_error = ""
        self.began = 0.0
        self.load_ended = 0.0
        self.drain_ended = 0.0
        self.drained = False
        self.at_rest: frozenset[str] = frozenset()

    # -------------------------------------------------------------- set-up

    def prepare(self) -> None:
        from shiftchange.core import CoreError
        from shiftchange.core.states import TASK_AT_REST
        from shiftchange.runtime.clock import lease_clock
        from shiftchange.stores import open_store

        self.at_rest = TASK_AT_REST
        if self.spec is None:
            self.spec = resolve_spec(None)
        if self.ledger_path.exists():
            raise ChaosError(f"{self.run_dir} already holds a run (its ledger.jsonl exists): give chaos a fresh --run-dir")
        try:
            self.logs.mkdir(parents=True, exist_ok=True)
            self.config_path.write_text(self.config.to_json() + "\n", encoding="utf-8")
            self.url_file.unlink(missing_ok=True)  # a URL left by an earlier, aborted run would be read as this provider's
        except OSError as error:
            raise ChaosError(f"cannot write the run into {self.run_dir}: {error.strerror or error}") from None
        if self.spec.source is not None:
            self.spec_dir = _copy_spec(self.spec, self.run_dir.absolute() / "spec")
        try:
            self.store = open_store(self.store_url)
            self.judged = lease_clock(self.store)
        except CoreError as error:
            raise ChaosError(f"cannot open the store {_masked(self.store_url)}: {error}") from None
        if self.kind == "postgresql":
            try:
                import psycopg

                self.admin = psycopg.connect(_admin_conninfo(self.store_url), autocommit=True, connect_timeout=10)
            except Exception as error:  # the connection kills are skipped, and the report says why
                self.admin_error = f"{type(error).__name__}: {error}"
        self._say(f"chaos: spec {self.spec.label}, digest {self.spec.digest}; read {', '.join(self.spec.files)}")

    def start_processes(self) -> None:
        from shiftchange.core import Orchestrator
        from shiftchange.runtime.http_provider import HttpProvider

        provider_argv = _python(
            "shiftchange", "provider", "--ledger", str(self.ledger_path), "--port", "0", "--url-file", str(self.url_file)
        )
        if not self.idempotency:
            provider_argv.append("--no-idempotency")
        provider = self._child(_PROVIDER, provider_argv)
        provider.start()
        self.provider_url = self._await_provider(provider)
        port = str(urlsplit(self.provider_url).port)
        provider.argv[provider.argv.index("--port") + 1] = port  # a restarted provider keeps its URL (and reloads its ledger)
        self.provider = HttpProvider(self.provider_url, clock=self.judged)
        self.orchestrator = Orchestrator(self.store, self.judged, self.provider, self.config.core, table=self._table)
        common = ["--store", self.store_url, "--provider", self.provider_url, "--config", str(self.config_path)]
        if self.spec_dir is not None:
            common += ["--spec", str(self.spec_dir)]
        if self.metrics:
            common += ["--metrics-port", "0"]  # any free port, logged; a restarted process binds another
        self._child(_ORCHESTRATOR, _python("shiftchange", "orchestrator", *common, "--id", _ORCHESTRATOR)).start()
        for index in range(self.workers):
            name = f"worker-{index + 1}"
            child = self._child(name, _python("shiftchange", "worker", *common, "--id", name))
            self.workers_by_index.append(child)
            child.start()

    @property
    def _table(self) -> Table:
        if self.spec is None:
            self.spec = resolve_spec(None)
        return self.spec.table

    def _child(self, name: str, argv: list[str]) -> _Child:
        child = self.children[name] = _Child(name, argv, self.logs / f"{name}.log", self.preexec, self.wall.now)
        return child

    def _await_provider(self, provider: _Child) -> str:
        deadline = time.monotonic() + PROVIDER_START_S
        while time.monotonic() < deadline:
            if self.url_file.exists():
                url = self.url_file.read_text(encoding="utf-8").strip()
                if url:
                    return url
            if not provider.running:
                break
            time.sleep(0.05)
        tail = " | ".join(provider.tail(3)) or "no output"
        raise ChaosError(f"the provider did not start (see {provider.log_path}): {tail}")

    # -------------------------------------------------------------- the load

    def play(self) -> None:
        schedule = plan_faults(
            self.duration_s, self.faults, self.workers, self.seed, self.config.core.lease_ttl_s, self.kind == "postgresql"
        )
        self.began = self.wall.now()
        self._start_keeper()
        next_fault = 0
        next_progress = self.began + PROGRESS_EVERY_S
        self._say(
            f"chaos: {self.workers} workers on {_masked(self.store_url)}, {self.duration_s:g} s at {self.rate_per_s:g} tasks/s,"
            f" {len(schedule)} faults planned; run dir {self.run_dir}"
        )
        while True:
            now = self.wall.now()
            elapsed_s = now - self.began
            if elapsed_s >= self.duration_s:
                break
            self._check_keeper()
            with self.lock:
                self._tend(now)
                while next_fault < len(schedule) and schedule[next_fault].at_s <= elapsed_s:
                    self._deliver(schedule[next_fault], self.wall.now())
                    next_fault += 1
            due = min(math.floor(elapsed_s * self.rate_per_s) + 1, math.ceil(self.duration_s * self.rate_per_s))
            submitted_now = 0
            while len(self.task_ids) < due and submitted_now < 10:
                self._submit(f"{self.prefix}{len(self.task_ids) + 1:06d}")
                submitted_now += 1
            if now >= next_progress:
                self._check_pending()
                self._say(self._progress_line(elapsed_s))
                next_progress = now + PROGRESS_EVERY_S
            time.sleep(TICK_S)
        self.load_ended = self.wall.now()

    def drain(self) -> None:
        """Faults off; everything running again; wait until every submitted task is at rest or the drain limit passes."""
        now = self.wall.now()
        with self.lock:
            for child in self.children.values():
                if child.paused:
                    self._continue(child)
                if child.restart_at is not None:
                    child.restart_at = now
        with contextlib.suppress(Exception):
            self.provider.set_faults(clear=True)
        self._say(f"chaos: load ended with {len(self.task_ids)} tasks submitted; draining (at most {self.drain_s:g} s)")
        deadline = now + self.drain_s
        next_check = 0.0
        while True:
            now = self.wall.now()
            self._check_keeper()
            with self.lock:
                self._tend(now)
            if now >= next_check:
                self._check_pending()
                if not self.pending:
                    self.drained = True
                    break
                next_check = now + 1.0
            if now >= deadline:
                break
            time.sleep(TICK_S * 4)
        self.drain_ended = self.wall.now()
        self._say(
            f"chaos: drained in {self.drain_ended - self.load_ended:.1f} s"
            if self.drained
            else f"chaos: drain limit reached with {len(self.pending)} tasks not at rest"
        )

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _progress_line(self, elapsed_s: float) -> str:
        counts = {kind: 0 for kind in FAULT_KINDS}
        for item in self.delivered:
            counts[item.kind] += 1
        kinds = [kind for kind in FAULT_KINDS if kind not in POSTGRES_ONLY or self.kind == "postgresql"]
        faults = ", ".join(f"{counts[kind]} {_FAULT_NOUNS[kind]}" for kind in kinds)
        at_rest = len(self.task_ids) - len(self.pending)
        return f"chaos: t={elapsed_s:.0f}/{self.duration_s:g} s, {len(self.task_ids)} submitted, {at_rest} at rest; {faults}"

    def _submit(self, task_id: str) -> None:
        """Create, accept and dispatch one task; after a store error, finish whatever of it did not land."""
        from shiftchange.core import Plan, StoreError
        from shiftchange.runtime.workload import first_hypothesis, submit

        last = ""
        for attempt in range(SUBMIT_TRIES):
            try:
                task = None if attempt == 0 else self.store.get_task(task_id)
                if task is None:
                    submit(self.orchestrator, task_id, self.config)
                elif task.state == "inbox":
                    self.orchestrator.accept_task(task_id)
                    self.orchestrator.dispatch(task_id, Plan(first_hypothesis(task_id)))
                elif task.state == "ready" and not self.store.get_attempts(task_id):
                    self.orchestrator.dispatch(task_id, Plan(first_hypothesis(task_id)))
                self.task_ids.append(task_id)
                self.pending.add(task_id)
                return
            except StoreError as error:
                last = f"{type(error).__name__}: {error}"
                time.sleep(0.2)
        self.submit_failures.append(f"{task_id}: {last}")
        with contextlib.suppress(StoreError):
            if self.store.get_task(task_id) is not None:  # created, but not seen through: it is judged like the rest
                self.task_ids.append(task_id)
                self.pending.add(task_id)

    def _check_pending(self) -> None:
        from shiftchange.core import StoreError

        for task_id in sorted(self.pending):
            try:
                task = self.store.get_task(task_id)
            except StoreError:
                return  # asked again at the next check
            if task is not None and task.state in self.at_rest:
                self.pending.discard(task_id)

    # -------------------------------------------------------------- processes

    def _start_keeper(self) -> None:
        self.keeper = threading.Thread(target=self._keep, name="chaos-keeper", daemon=True)
        self.keeper.start()

    def _keep(self) -> None:
        """The keeper thread: continue every paused process whose pause is over, whatever the main thread is waiting for."""
        try:
            while not self.keeper_stop.wait(TICK_S):
                with self.lock:
                    self._continue_due(self.wall.now())
        except Exception as error:  # said by the main thread, which stops the run
            self.keeper_error = f"{type(error).__name__}: {error}"

    def _check_keeper(self) -> None:
        if self.keeper_error:
            raise ChaosError(f"the harness could not continue a paused process: {self.keeper_error}")

    def _stop_keeper(self) -> None:
        self.keeper_stop.set()
        if self.keeper is not None:
            self.keeper.join()

    def _continue_due(self, now: float) -> None:
        for child in self.children.values():
            if child.paused_until is not None and child.paused_until <= now:
                self._continue(child)

    def _tend(self, now: float) -> None:
        """Notice processes that exited on their own (restart them), and start those whose restart is due (main thread only)."""
        for child in self.children.values():
            if child.process is not None and child.process.poll() is not None:
                status = child.process.returncode
                child.exits.append(status)
                self.unexpected.append({"process": child.name, "status": status, "at": round(now, 3), "log": child.tail(3)})
                child.process = None
                child.paused_until = None
                child.restart_at = now + 1.0
                self._say(f"chaos: {child.name} exited on its own with status {status}; restarting it (see {child.log_path})")
            if child.process is None and child.restart_at is not None and child.restart_at <= now:
                child.start()

    def _continue(self, child: _Child) -> None:
        child.signal(signal.SIGCONT)
        child.paused_until = None

    def _worker_for(self, target: int, eligible: Callable[[_Child], bool]) -> _Child | None:
        """The drawn worker if it can take the fault, else the next one that can (round robin), else None."""
        count = len(self.workers_by_index)
        for step in range(count):
            child = self.workers_by_index[(target + step) % count]
            if eligible(child):
                return child
        return None

    def _deliver(self, fault: Fault, now: float) -> None:
        """Deliver `fault` at `now` (the harness's clock); what was delivered is stamped on the store's clock, as the history is."""
        kind = fault.kind
        at = self.judged.now()
        delivered: Delivered | None = None
        if kind == KILL:
            child = self._worker_for(fault.target, lambda c: c.running and not c.paused)
            if child is not None and child.kill():
                child.restart_at = now + fault.hold_s
                delivered = Delivered(at, kind, child.name, fault.hold_s, f"restart after {fault.hold_s:g} s")
        elif kind == PAUSE:
            child = self._worker_for(fault.target, lambda c: c.running and not c.paused)
            if child is not None and child.signal(signal.SIGSTOP):
                child.paused_until = now + fault.hold_s
                delivered = Delivered(at, kind, child.name, fault.hold_s, f"SIGSTOP for {fault.hold_s:g} s")
        elif kind == ORCHESTRATOR_KILL:
            child = self.children[_ORCHESTRATOR]
            if child.kill():
                child.restart_at = now + fault.hold_s
                delivered = Delivered(at, kind, child.name, fault.hold_s, f"restart after {fault.hold_s:g} s")
        elif kind == CONN_KILL:
            child = self._worker_for(fault.target, lambda c: c.running)
            if child is not None:
                terminated = self._terminate_backends(child.name)
                if terminated:
                    self.backends_terminated += terminated
                    delivered = Delivered(at, kind, child.name, 0.0, f"{terminated} session(s) terminated")
        elif kind == DROP:
            try:
                self.provider.set_faults(drop_responses=1)
                delivered = Delivered(at, kind, _PROVIDER, 0.0, "the next response dropped")
            except Exception as error:
                self._say(f"chaos: could not ask the provider to drop a response: {type(error).__name__}: {error}")
        elif kind == SKEW:
            child = self._worker_for(fault.target, lambda c: c.running and not c.paused)
            if child is not None and child.kill():
                child.env[SKEW_VARIABLE] = f"{fault.skew_s:+g}"
                child.restart_at = now + fault.hold_s
                detail = f"restart after {fault.hold_s:g} s with its clock {fault.skew_s:+g} s"
                delivered = Delivered(at, kind, child.name, fault.hold_s, detail, fault.skew_s)
        if delivered is None:
            self.skipped[kind] += 1
        else:
            self.delivered.append(delivered)

    def _terminate_backends(self, worker_id: str) -> int:
        if self.admin is None:
            return 0
        try:
            rows = self.admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
                (f"shiftchange-worker:{worker_id}",),
            ).fetchall()
        except Exception as error:
            self.admin_error = f"{type(error).__name__}: {error}"
            return 0
        return sum(1 for (done,) in rows if done)

    def scrape(self) -> None:
        """Each running orchestrator's and worker's /metrics, at the URL its log gave since its latest start: per process, each
        sample summed over its labels (none of the `_created` or `_bucket` ones), or the error that kept it from being read."""
        if not self.metrics:
            return
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        scraped: dict[str, Any] = {}
        for child in self.children.values():
            if child.name == _PROVIDER or not child.running:
                continue
            try:
                url = _metrics_url(child.log_path)
                with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as answer:
                    text = answer.read().decode("utf-8")
                samples: dict[str, float] = {}
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if not sample.name.endswith(("_created", "_bucket")) and family.type != "info":
                            samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
                scraped[child.name] = {"url": url, "samples": dict(sorted(samples.items()))}
            except (OSError, ValueError) as error:
                scraped[child.name] = {"error": f"{type(error).__name__}: {error}"}
        self.scraped = scraped
        read = sum(1 for found in scraped.values() if "samples" in found)
        self._say(f"chaos: scraped the metrics of {read} of {len(scraped)} processes")

    def stop_all(self) -> None:
        """SIGCONT what is paused, SIGTERM the workers and the orchestrator, then the provider; SIGKILL whatever outlives the grace."""
        self.stopping = True
        self._stop_keeper()
        for child in self.children.values():
            child.restart_at = None
            if child.paused:
                self._continue(child)
        if self.provider is not None:
            with contextlib.suppress(Exception):
                self.provider_counters = self.provider.faults()["counters"]
        for group in (
            [c for c in self.children.values() if c.name != _PROVIDER],
            [c for c in self.children.values() if c.name == _PROVIDER],
        ):
            for child in group:
                child.signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            for child in group:
                if child.process is None:
                    continue
                try:
                    status = child.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.stragglers.append(child.name)
                    child.kill()
                    continue
                if status != 0:
                    self.unclean.append({"process": child.name, "status": status, "log": child.tail(3)})
                child.process = None

    def close(self) -> None:
        for closing in (self.admin, self.store):
            if closing is not None:
                with contextlib.suppress(Exception):
                    closing.close()

    # -------------------------------------------------------------- judgement

    def judge(self) -> ChaosReport:
        from shiftchange.checkers import context_for, judge
        from shiftchange.core import StoreError
        from shiftchange.runtime.codehost import read_ledger

        try:
            mine = set(self.task_ids)
            events = [event for event in self.store.events() if event.task_id.startswith(self.prefix)]
            records = read_ledger(self.ledger_path) if self.ledger_path.exists() else []
            ledger = ledger_entries(records, self.store, self.prefix)
            keyless = () if self.idempotency else ("code_host",)  # its code host ignores keys: findings there are final
            verdicts = judge(events, ledger, self.store, context=context_for(self.config.core, keyless=keyless))
            tasks = {task_id: self.store.get_task(task_id) for task_id in sorted(mine)}
        except (StoreError, OSError, ValueError) as error:
            raise ChaosError(f"cannot read the run back for judgement: {type(error).__name__}: {error}") from None
        measures = self._measure(events, ledger)
        metrics = self._metrics(events, ledger, verdicts, tasks, measures, getattr(records, "torn", 0))
        return ChaosReport(
            store=_masked(self.store_url),
            task_prefix=self.prefix,
            run_dir=str(self.run_dir),
            workers=self.workers,
            duration_s=self.duration_s,
            seed=self.seed,
            rate_per_s=self.rate_per_s,
            idempotency=self.idempotency,
            faults=self.faults,
            config=json.loads(self.config.to_json()),
            verdicts=verdicts,
            metrics=metrics,
            delivered=self.delivered,
            spec=self.spec.to_json() if self.spec is not None else {},
            rerun=self.rerun(),
            scraped=self.scraped,
        )

    def rerun(self) -> str:
        """The `shiftchange chaos` command that runs this configuration again: same store, load, seed, faults and spec, a fresh
        run dir. The store's password is masked; a fault cadence is named only where it is not the default."""
        words = ["shiftchange", "chaos", "--store", _masked(self.store_url), "--workers", str(self.workers)]
        words += ["--duration", _number(self.duration_s), "--seed", str(self.seed), "--rate", _number(self.rate_per_s)]
        if self.drain_s != DRAIN_DEFAULT_S:
            words += ["--drain", _number(self.drain_s)]
        defaults = ChaosFaults()
        for kind in FAULT_KINDS:
            if kind == SKEW and self.kind != "postgresql":
                continue  # refused on SQLite: one machine, one clock
            if self.faults.every_s(kind) != defaults.every_s(kind):
                words += [f"--{kind.replace('_', '-')}-every", _number(self.faults.every_s(kind))]
        if self.kind == "postgresql" and self.faults.skew_s != defaults.skew_s:
            words += ["--skew", _number(self.faults.skew_s)]
        if not self.idempotency:
            words.append("--no-idempotency")
        if self.metrics:
            words.append("--metrics")
        if self.spec is not None and self.spec.source is not None:
            words += ["--spec", self.spec.source]
        return shlex.join(words)

    def _measure(self, events: list[Event], ledger: list[LedgerEntry]) -> Measures:
        """The shared measures over the run: each kill or pause of a worker holding a lease is a strike, then the history folds."""
        from shiftchange.checkers import Measures

        accepted = sorted((event for event in events if event.accepted), key=lambda event: (event.at, event.seq))
        measures = Measures()
        struck = [(item, measures.struck(claim.task_id, claim.attempt_id, item.at)) for item, claim in self._hits(accepted)]
        for event in accepted:
            measures.event(event)
        for entry in ledger:
            measures.landed(entry.landed())
        for item, strike in struck:
            item.detect_s = None if strike.detect_s is None else _round(strike.detect_s)
            item.recover_s = None if strike.recover_s is None else _round(strike.recover_s)
        return measures

    def _hits(self, accepted: list[Event]) -> list[tuple[Delivered, Event]]:
        """Each kill or pause with the claim of the Attempt its worker held at that instant (and names it on the fault)."""
        leased = self._table.leased
        claims: dict[str, list[Event]] = {}
        by_attempt: dict[str, list[Event]] = {}
        for event in accepted:
            if event.attempt_id is not None:
                by_attempt.setdefault(event.attempt_id, []).append(event)
            if event.kind == "claim" and event.attempt_id is not None:
                claims.setdefault(event.worker_id or "", []).append(event)
        hits = []
        for item in self.delivered:
            if item.kind not in _STRIKES:
                continue
            held = None
            for claim in claims.get(item.target, ()):
                if claim.at >= item.at:
                    break
                held = claim
            if held is None:
                continue
            ended = any(
                event.seq > held.seq and event.at < item.at and event.to_state is not None and event.to_state not in leased
                for event in by_attempt.get(held.attempt_id or "", ())
            )
            if not ended:
                item.attempt_id = held.attempt_id
                hits.append((item, held))
        return hits

    def _metrics(
        self,
        events: list[Event],
        ledger: list[Any],
        verdicts: Mapping[str, Any],
        tasks: Mapping[str, Any],
        measures: Measures,
        torn: int,
    ) -> dict[str, Any]:
        states: dict[str, int] = {}
        lost: list[str] = []
        for task_id, task in tasks.items():
            state = task.state if task is not None else "missing"
            states[state] = states.get(state, 0) + 1
            if task is None or task.state not in self.at_rest:
                lost.append(f"{task_id} ({state})")
        counts = dict.fromkeys(FAULT_KINDS, 0)
        for item in self.delivered:
            counts[item.kind] += 1
        span_s = max(1e-9, (self.drain_ended or self.wall.now()) - self.began)
        load_s = max(1e-9, (self.load_ended or self.wall.now()) - self.began)
        done = states.get("done", 0)
        retries = sum(getattr(event, "retries", 0) for event in events)
        fence_verdict = verdicts.get("fenced_writes")
        postgres = self.kind == "postgresql"
        return {
            "tasks_submitted": len(tasks),
            "tasks_done": done,
            "tasks_at_rest_otherwise": {state: n for state, n in sorted(states.items()) if state != "done" and state in self.at_rest},
            "tasks_lost": len(lost),
            "lost": lost[:20],
            "final_states": dict(sorted(states.items())),
            "submit_failures": self.submit_failures[:20],
            "stale_writes_refused": sum(1 for event in events if not event.accepted and event.late),
            "stale_writes_accepted": fence_verdict.violations if fence_verdict is not None else None,
            "worker_kills": counts[KILL],
            "pauses": counts[PAUSE],
            "orchestrator_kills": counts[ORCHESTRATOR_KILL],
            "connection_kills": counts[CONN_KILL] if postgres else None,
            "connection_kills_note": None if postgres else "n/a on SQLite",
            "backends_terminated": self.backends_terminated if postgres else None,
            "connection_kill_error": self.admin_error or None,
            "drops_asked": counts[DROP],
            "clock_skews": counts[SKEW] if postgres else None,
            "clock_skews_ahead": sum(1 for item in self.delivered if item.kind == SKEW and item.skew_s > 0) if postgres else None,
            "clock_skews_behind": sum(1 for item in self.delivered if item.kind == SKEW and item.skew_s < 0) if postgres else None,
            "clock_skews_note": None if postgres else "n/a on SQLite (one machine, one clock)",
            "workers_skewed_at_end": sorted(child.name for child in self.workers_by_index if child.env.get(SKEW_VARIABLE)),
            "dropped_responses": self.provider_counters.get("dropped_responses"),
            "faults_skipped": {kind: n for kind, n in self.skipped.items() if n},
            **measures.summary(),
            "events": len(events),
            "events_per_s": _round(len(events) / span_s),
            "transactions_retried": retries,
            "transactions_retried_per_s": _round(retries / span_s),
            "effects": len(ledger),
            "effects_per_s": _round(len(ledger) / span_s),
            "ledger_torn_lines": torn,
            "provider_counters": self.provider_counters,
            "tasks_done_per_s": _round(done / span_s),
            "tasks_submitted_per_s": _round(len(tasks) / load_s),
            "load_s": _round(load_s),
            "drain_s": _round((self.drain_ended or self.wall.now()) - (self.load_ended or self.wall.now())),
            "drained": self.drained,
            "process_starts": {child.name: child.starts for child in self.children.values()},
            "unexpected_exits": self.unexpected[:50],
            "unexpected_exit_count": len(self.unexpected),
            "unclean_exits": self.unclean,
            "stragglers_killed": self.stragglers,
        }


def ledger_entries(records: Iterable[Mapping[str, Any]], store: Any, prefix: str = "") -> list[Any]:
    """The checkers' `LedgerEntry`s for the provider's ledger records (`read_ledger`), keeping those of tasks whose id starts with `prefix`.

    A record that names no task is named by the intent its key was minted for
    (as `shiftchange.checkers.ledger_from` does); one with no intent either is
    kept, and the audit judges it.
    """
    from shiftchange.checkers import LedgerEntry

    entries = []
    for record in records:
        task_id = str(record.get("task_id") or "")
        if not task_id:
            intent = store.get_intent(str(record["key"]))
            task_id = intent.task_id if intent is not None else ""
        if task_id and not task_id.startswith(prefix):
            continue
        entries.append(
            LedgerEntry(
                float(record["at"]),
                str(record["provider_id"]),
                str(record["key"]),
                str(record["operation"]),
                str(record["identity"]),
                task_id,
                str(record.get("dependency") or "code_host"),
                str(record.get("worker_id") or ""),
                bool(record.get("via_gateway", True)),
            )
        )
    return entries


def _round(value: float) -> float:
    return round(value, 3)


def _number(value: float) -> str:
    """A number as a command line gives it back: 15 for 15.0, 0.8 for 0.8000000000000002."""
    return format(value, ".12g")


def _scraped_row(scraped: Mapping[str, Any]) -> str:
    """What the processes' own metrics said when the drain ended: the orchestrator's duties and the workers' calls."""
    read = {name: found["samples"] for name, found in scraped.items() if "samples" in found}
    workers = [samples for name, samples in read.items() if name != _ORCHESTRATOR]

    def summed(sample: str) -> int:
        return round(sum(samples.get(sample, 0.0) for samples in workers))

    parts = [f"{len(read)} of {len(scraped)} processes read (each since its latest start)"]
    if _ORCHESTRATOR in read:
        own = read[_ORCHESTRATOR]
        accepted, expired = own.get("shiftchange_contracts_accepted_total", 0.0), own.get("shiftchange_leases_expired_total", 0.0)
        parts.append(f"orchestrator {accepted:,.0f} contracts accepted, {expired:,.0f} leases expired")
    if workers:
        accepted, refused = summed("shiftchange_contracts_accepted_total"), summed("shiftchange_contracts_refused_total")
        parts.append(f"workers {accepted:,} accepted, {refused:,} refused, {summed('shiftchange_calls_held_back_total'):,} held back")
    return "; ".join(parts)


def _metrics_url(log_path: Path) -> str:
    """The metrics URL a process logged since its latest start mark (a restarted process serves on another port)."""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    latest = text[text.rfind("=== shiftchange chaos: start") :]
    found = re.search(r"serving metrics on (http://\S+)", latest)
    if found is None:
        raise ValueError(f"no metrics URL in {log_path} since its latest start")
    return found.group(1)


def _copy_spec(spec: RunSpec, folder: Path) -> Path:
    """Copy the files `spec` was read from into `folder` (a revision's with `git show`), and check the copy is that spec."""
    from shiftchange.spec import SpecError, load_spec

    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in spec.files:
            path = Path(name)
            if path.is_file():
                text = path.read_bytes()
            else:  # REV:folder/file, as the revision's files are named
                shown = subprocess.run(["git", "show", name], capture_output=True, check=False)
                if shown.returncode:
                    raise ChaosError(f"cannot copy the spec into the run dir: git show {name} failed")
                text = shown.stdout
            (folder / path.name).write_bytes(text)
    except OSError as error:
        raise ChaosError(f"cannot copy the spec into {folder}: {error.strerror or error}") from None
    try:
        copied = load_spec(folder).digest
    except SpecError as error:
        raise ChaosError(f"the spec {spec.label} changed while chaos read it: {error}") from None
    if copied != spec.digest:
        raise ChaosError(f"the spec {spec.label} changed while chaos read it (digest {spec.digest}, then {copied}): run again")
    return folder


# ------------------------------------------------------------------ the entry point


def run_chaos(
    store_url: str,
    *,
    workers: int = 8,
    duration_s: float = 600.0,
    seed: int = 0,
    rate_per_s: float | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    faults: ChaosFaults | None = None,
    idempotency: bool = True,
    config: RuntimeConfig | None = None,
    drain_s: float = DRAIN_DEFAULT_S,
    progress: Callable[[str], None] | None = None,
    spec: RunSpec | str | os.PathLike[str] | None = None,
    metrics: bool = False,
) -> ChaosReport:
    """Run the processes under the faults for `duration_s`, drain, stop them, and judge the run; every child is stopped on any exit.

    `rate_per_s` defaults to `RATE_PER_WORKER_PER_S` per worker. `spec` is the
    spec every core runs: a `RunSpec` (`resolve_spec`), a folder or git
    revision to resolve, or None for the packaged one. With `metrics`, the
    orchestrator and workers serve Prometheus metrics and each is scraped
    when the drain ends (`ChaosReport.scraped`; needs prometheus_client, the
    metrics extra). Bad arguments raise
    ValueError (a `spec` that names no spec: `SpecSourceError`; a malformed
    one: `SpecError`, before anything starts); a run that cannot be set up or
    read back raises ChaosError; KeyboardInterrupt stops every child and propagates.
    """
    from shiftchange.runtime.config import RuntimeConfig

    _kind_of(store_url)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= WORKERS_MAX:
        raise ValueError(f"workers must be a whole number from 1 to {WORKERS_MAX}, not {workers!r}")
    for name, value in (("duration_s", duration_s), ("drain_s", drain_s)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be positive seconds, not {value!r}")
    rate = RATE_PER_WORKER_PER_S * workers if rate_per_s is None else rate_per_s
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate_per_s must be positive tasks per second, not {rate!r}")
    if metrics:
        try:
            import prometheus_client  # noqa: F401 - the children serve with it, the harness scrapes with its parser
        except ImportError:
            missing = "--metrics needs the prometheus_client package, which is not installed: pip install 'shiftchange[metrics]'"
            raise ValueError(missing) from None
    faults = ChaosFaults() if faults is None else faults
    config = RuntimeConfig() if config is None else config
    spec = spec if isinstance(spec, RunSpec) else resolve_spec(spec)
    directory = Path(tempfile.mkdtemp(prefix="shiftchange-chaos-")) if run_dir is None else Path(run_dir)
    run = _Run(
        store_url,
        workers,
        float(duration_s),
        seed,
        float(rate),
        directory,
        faults,
        idempotency,
        config,
        float(drain_s),
        progress,
        spec,
        metrics,
    )
    began = time.perf_counter()
    try:
        run.prepare()
        run.start_processes()
        run.play()
        run.drain()
        run.scrape()
        run.stop_all()
        report = run.judge()
    finally:
        if not run.stopping:
            run.stop_all()
        run.close()
    report.wall_s = time.perf_counter() - began
    with contextlib.suppress(OSError):
        (directory / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return report


# ------------------------------------------------------------------ the report


def render_text(report: ChaosReport) -> str:
    """The report a person reads: what ran, each invariant's verdict (as `sim run` prints them), then the figures.

    An invariant's example holds recorded words with the store's Unix times as bare numbers (a refusal's "expired at
    1796499303.79..."): they are written as ISO times here (`core.timeline.readable_times`); report.json keeps them as recorded.
    """
    from shiftchange.checkers.history import invariant_rows, tally
    from shiftchange.core.timeline import readable_times

    m = report.metrics
    lines = [
        f"shiftchange chaos: {report.store}, {report.workers} workers, {report.duration_s:g} s at {report.rate_per_s:g} tasks/s,"
        f" seed {report.seed}, provider idempotency {'on' if report.idempotency else 'off'}; drain {m['drain_s']:.1f} s,"
        f" {report.wall_s:.1f} s wall",
        f"run dir: {report.run_dir} (config.json, ledger.jsonl, report.json, logs/{', spec/' if report.spec.get('source') else ''})",
        *([f"spec: {report.spec['label']}, digest {report.spec['digest']}"] if report.spec else []),
        *([f"rerun: {report.rerun}"] if report.rerun else []),
        "",
        "invariants",
        *invariant_rows(dict(report.verdicts)),
        tally(dict(report.verdicts)),
        "",
        "figures",
        *_figure_rows(report),
    ]
    if m["tasks_lost"]:
        lines += ["", f"lost: {m['tasks_lost']} tasks not at rest after the drain, e.g. {', '.join(m['lost'][:5])}"]
    verdict = "PASS: every invariant holds and no task was lost" if report.ok else "FAIL: see above; the processes' logs are in the run dir"
    lines += ["", verdict]
    return readable_times("\n".join(lines) + "\n")


def _seconds(m: Mapping[str, Any], measure: str, what: str) -> str:
    count, of = m[f"{measure}_count"], m["strikes"]
    if not count:
        return f"none measured ({of} faults hit a worker holding a lease; {what})"
    p50, mean, top = m[f"{measure}_s_p50"], m[f"{measure}_s_mean"], m[f"{measure}_s_max"]
    return f"p50 {p50:.1f} s, mean {mean:.1f} s, max {top:.1f} s over {count} of {of} faults that hit a worker holding a lease"


def _figure_rows(report: ChaosReport) -> list[str]:
    m = report.metrics
    rest = ", ".join(f"{state} {n}" for state, n in m["tasks_at_rest_otherwise"].items())
    skipped = m["faults_skipped"]

    def faults(kind: str, count: int | None, extra: str = "") -> str:
        missed = skipped.get(kind, 0)
        note = f" ({missed} skipped: no process to take it)" if missed else ""
        return f"{count:,}{extra}{note}"

    if m["connection_kills"] is None:
        connections = "n/a on SQLite"
    else:
        connections = faults(CONN_KILL, m["connection_kills"], f" ({m['backends_terminated']:,} sessions terminated)")
        if m["connection_kill_error"]:
            connections += f"; {m['connection_kill_error']}"
    if m["clock_skews"] is None:
        skews = m["clock_skews_note"]
    else:
        extra = f" ({m['clock_skews_ahead']:,} ahead, {m['clock_skews_behind']:,} behind, by {report.faults.skew_s:g} s;"
        skews = faults(SKEW, m["clock_skews"], f"{extra} {_counted(len(m['workers_skewed_at_end']), 'worker')} skewed at the end)")
    dropped = m["dropped_responses"]
    restarted = m["process_starts"].get(_PROVIDER, 1) > 1
    counted = (f", {dropped:,} dropped" + (" since the provider's last start" if restarted else "")) if dropped is not None else ""
    drops = faults(DROP, m["drops_asked"], " asked" + (counted or ", the provider's count unread"))
    pauses = [item.hold_s for item in report.delivered if item.kind == PAUSE]
    pause_extra = f" of {min(pauses):.1f}-{max(pauses):.1f} s (lease {report.config['core']['lease_ttl_s']:g} s)" if pauses else ""
    stale = m["stale_writes_accepted"]
    processes = f"{m['unexpected_exit_count']} unexpected exits, {len(m['unclean_exits'])} unclean exits on SIGTERM"
    processes += f", {len(m['stragglers_killed'])} SIGKILLed at shutdown"
    rows = [
        (
            "tasks",
            f"{m['tasks_submitted']:,} submitted: {m['tasks_done']:,} done, "
            f"{sum(m['tasks_at_rest_otherwise'].values()):,} at rest otherwise{f' ({rest})' if rest else ''}, {m['tasks_lost']:,} lost",
        ),
        ("duplicate effects", f"{m['duplicate_effects']:,} in the ledger (effects beyond the first of one logical operation)"),
        ("stale writes", f"{m['stale_writes_refused']:,} refused (late); {'?' if stale is None else stale} accepted (fenced_writes)"),
        ("worker kills", faults(KILL, m["worker_kills"])),
        ("pauses", faults(PAUSE, m["pauses"], pause_extra)),
        ("orchestrator kills", faults(ORCHESTRATOR_KILL, m["orchestrator_kills"])),
        ("connection kills", connections),
        ("dropped responses", drops),
        ("clock skews", skews),
        ("time to detect", _seconds(m, "detect", "no expiry seen")),
        ("time to recover", _seconds(m, "recover", "none reclaimed")),
        (
            "events",
            f"{m['events']:,} written ({m['events_per_s']:,.1f}/s); {m['transactions_retried']:,} transactions retried"
            f" ({m['transactions_retried_per_s']:,.2f}/s)",
        ),
        ("effects", f"{m['effects']:,} landed at the provider ({m['effects_per_s']:,.1f}/s)"),
        ("throughput", f"{m['tasks_done_per_s']:.2f} tasks done/s (submitted {m['tasks_submitted_per_s']:.2f}/s)"),
        ("processes", processes),
    ]
    if m["submit_failures"]:
        rows.append(("submissions failed", f"{len(m['submit_failures'])}, e.g. {m['submit_failures'][0]}"))
    if report.scraped is not None:
        rows.append(("metrics scraped", _scraped_row(report.scraped)))
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


# ------------------------------------------------------------------ the command


def _counted(count: int, noun: str) -> str:
    """A count and its noun, singular for one (`1 worker`, `3 workers`)."""
    return f"{count:,} {noun if count == 1 else noun + 's'}"
