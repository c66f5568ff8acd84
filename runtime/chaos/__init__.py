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
(`scraped`, in the subject of the report's JSON; docs/metrics.md says what each means). A process
killed and restarted starts its counters afresh: a scrape counts its last
incarnation only.

Every process writes its stdout and stderr to its own log in the run
directory (`logs/NAME.log`, appended to across restarts, each start marked);
the directory also holds `config.json` (the `RuntimeConfig` every process
reads), the provider's ledger.jsonl and the run's record, report.json. It is kept.

The spec. Every core of the run (the harness's own, the orchestrator's, each
worker's) runs one table: the packaged spec, or the one `spec` names (a
folder or a git revision, read as `shiftchange spec check` reads one:
`resolve_spec`). A named spec is copied into the run directory (`spec/`) as
it was read, and the children are started with `--spec` naming that copy, so
a folder edited or a branch moved mid-run cannot change what a restarted
process runs. The report records the spec's label and digest, and the
command that runs the same configuration again (the record's `replay`) carries `--spec`.

This module imports only the standard library at load time: `shiftchange`
builds its whole parser before it runs any command, and must not compile the
spec to do so. The runtime and the checkers are imported when a run starts.

The package, one concern a module: `plan` (the fault kinds, the schedule,
the report), `processes` (the children and the store URLs), `run` (one run:
prepare, start, play, drain, stop), `delivery` (the faults delivered, the
keeper), `judging` (the verdicts and figures), `report` (the text), and
`run_chaos` here, the entry point.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .judging import ledger_entries
from .plan import (
    CONN_KILL,
    DRAIN_DEFAULT_S,
    DROP,
    FAULT_KINDS,
    KILL,
    ORCHESTRATOR_KILL,
    PAUSE,
    RATE_PER_WORKER_PER_S,
    SKEW,
    SKEW_MAX_S,
    SKEW_VARIABLE,
    WORKERS_MAX,
    ChaosError,
    ChaosFaults,
    ChaosReport,
    Delivered,
    Fault,
    RunSpec,
    plan_faults,
    resolve_spec,
)
from .processes import _Child, _kind_of
from .run import _Run

if TYPE_CHECKING:
    from shiftchange.runtime.config import RuntimeConfig

__all__ = [
    "CONN_KILL",
    "DRAIN_DEFAULT_S",
    "DROP",
    "FAULT_KINDS",
    "KILL",
    "ORCHESTRATOR_KILL",
    "PAUSE",
    "RATE_PER_WORKER_PER_S",
    "SKEW",
    "SKEW_MAX_S",
    "SKEW_VARIABLE",
    "WORKERS_MAX",
    "ChaosError",
    "ChaosFaults",
    "ChaosReport",
    "Delivered",
    "Fault",
    "RunSpec",
    "_Child",
    "_Run",
    "_kind_of",
    "ledger_entries",
    "plan_faults",
    "resolve_spec",
    "run_chaos",
]


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
