"""`shiftchange chaos`: the command line of the chaos harness (`shiftchange.runtime.chaos`).

Its arguments are declared here, importing only the standard library and the
harness's own constants (which import nothing of the core): `shiftchange`
builds its whole parser before any command runs. The harness itself is
imported when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from shiftchange.runtime.arguments import spec_argument
from shiftchange.runtime.chaos import (
    CONN_KILL,
    DRAIN_DEFAULT_S,
    DROP,
    KILL,
    ORCHESTRATOR_KILL,
    PAUSE,
    RATE_PER_WORKER_PER_S,
    SKEW,
    SKEW_MAX_S,
    WORKERS_MAX,
    ChaosError,
    ChaosFaults,
    _kind_of,
    resolve_spec,
    run_chaos,
)

from .check_store import _whole

__all__ = ["add_parser", "run_chaos_command"]


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add `chaos` to the `shiftchange` commands (nothing of the runtime is imported); its handler returns the exit status."""
    defaults = ChaosFaults()
    chaos = commands.add_parser(
        "chaos", help="run the real processes under kills, pauses, cut connections, dropped responses and skewed clocks, and judge the run"
    )
    chaos.add_argument("--store", metavar="URL", required=True, help="sqlite:///path or postgresql://... (a schema with ?schema=NAME)")
    chaos.add_argument("--workers", metavar="N", type=_workers, default=8, help="worker processes (default %(default)s)")
    chaos.add_argument("--duration", metavar="S", type=_positive, default=600.0, help="seconds of load and faults (default %(default)g)")
    chaos.add_argument("--seed", metavar="N", type=_whole, default=0, help="the fault schedule's seed (default %(default)s)")
    chaos.add_argument(
        "--rate",
        metavar="TASKS_PER_S",
        type=_positive,
        default=None,
        help=f"tasks submitted per second (default {RATE_PER_WORKER_PER_S:g} per worker: {RATE_PER_WORKER_PER_S * 8:g} with 8)",
    )
    chaos.add_argument("--drain", metavar="S", type=_positive, default=DRAIN_DEFAULT_S, help="the drain limit (default %(default)g s)")
    chaos.add_argument("--no-idempotency", action="store_true", help="the provider ignores operation keys")
    chaos.add_argument("--run-dir", metavar="DIR", help="where the config, ledger, logs and report go (default: a fresh temp dir)")
    spec_argument(chaos, "the spec every process's core runs (read before any process starts; copied into the run dir)")
    for flag, kind, what in (
        ("--kill-every", KILL, "SIGKILL a worker and restart it"),
        ("--pause-every", PAUSE, "SIGSTOP a worker past its lease, then SIGCONT"),
        ("--orchestrator-kill-every", ORCHESTRATOR_KILL, "SIGKILL the orchestrator and restart it"),
        ("--conn-kill-every", CONN_KILL, "terminate a worker's PostgreSQL sessions"),
        ("--drop-every", DROP, "drop the provider's next response"),
    ):
        chaos.add_argument(
            flag,
            metavar="S",
            type=_non_negative,
            default=defaults.every_s(kind),
            help=f"{what} about every S s (default %(default)g; 0: never)",
        )
    chaos.add_argument(
        "--skew-every",
        metavar="S",
        type=_non_negative,
        default=None,
        help=f"restart a worker with its clock --skew s ahead or behind about every S s (default {defaults.every_s(SKEW):g}"
        " on PostgreSQL; 0: never; refused on SQLite, where one machine has one clock)",
    )
    chaos.add_argument(
        "--skew",
        metavar="S",
        type=_skew,
        default=None,
        help=f"how far a skewed worker's clock is off, either way (default {defaults.skew_s:g} s)",
    )
    chaos.add_argument(
        "--metrics",
        action="store_true",
        help="the orchestrator and workers serve Prometheus metrics (--metrics-port 0), each scraped into the report when the drain"
        " ends (needs the metrics extra; docs/metrics.md)",
    )
    chaos.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    chaos.add_argument(
        "--report",
        metavar="FILE.html",
        help="write one self-contained HTML page: verdicts with evidence, figures, the history per window with faults shaded,"
        " the faults delivered, task timelines",
    )
    chaos.set_defaults(handler=run_chaos_command)
    return chaos


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def _positive(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {text!r}")
    return value


def _skew(text: str) -> float:
    value = _number(text)
    if not 0 < value <= SKEW_MAX_S:
        raise argparse.ArgumentTypeError(f"must be seconds from 0 (exclusive) to {SKEW_MAX_S:g}, not {text!r}")
    return value


def _skewing(args: argparse.Namespace, postgres: bool) -> dict[str, float]:
    """The skew fault's settings: the defaults on PostgreSQL; asked for on SQLite, a BadInput (one machine has one clock)."""
    from shiftchange.cli.common import BadInput

    asked = (args.skew_every is not None and args.skew_every > 0) or args.skew is not None
    if not postgres:
        if asked:
            raise BadInput(
                "--skew-every/--skew: clock skew is a PostgreSQL fault (leases are judged on the server's clock there);"
                " on SQLite one machine has one clock, and a skewed process would break leases by contract"
            )
        return {"skew_every_s": 0.0}
    settings = {} if args.skew_every is None else {"skew_every_s": args.skew_every}
    return settings if args.skew is None else {**settings, "skew_s": args.skew}


def _workers(text: str) -> int:
    value = _whole(text)
    if not 1 <= value <= WORKERS_MAX:
        raise argparse.ArgumentTypeError(f"must be from 1 to {WORKERS_MAX}, not {value}")
    return value


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While the run lasts, SIGTERM to the harness stops it as Ctrl-C does (every child stopped), not abruptly."""

    def interrupt(_number: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stderr_line(stream: IO[str]) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    return say


def run_chaos_command(args: argparse.Namespace) -> int:
    """`shiftchange chaos`: 0 when every invariant holds and no task was lost, 1 otherwise, 2 on bad input, 130 on Ctrl-C."""
    from shiftchange.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput

    if args.run_dir is not None:
        directory = Path(args.run_dir)
        existing = next(parent for parent in (directory.absolute(), *directory.absolute().parents) if parent.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK):
            raise BadInput(f"cannot write the run into {directory}: {existing} is not a writable folder")
    _check_report(args.report)
    try:
        postgres = _kind_of(args.store) == "postgresql"
        faults = ChaosFaults(
            kill_every_s=args.kill_every,
            pause_every_s=args.pause_every,
            orchestrator_kill_every_s=args.orchestrator_kill_every,
            conn_kill_every_s=args.conn_kill_every,
            drop_every_s=args.drop_every,
            **_skewing(args, postgres),
        )
    except ValueError as error:
        raise BadInput(str(error)) from None
    spec = _resolve_spec(args.spec)  # the harness names it and the files it read once the run is set up
    if args.metrics:
        from shiftchange.runtime.metrics import _client

        try:
            _client()  # before the run's folder is made: a refused run leaves nothing behind
        except ValueError as error:
            raise BadInput(str(error).replace("--metrics-port", "--metrics")) from None
    run_dir = args.run_dir if args.run_dir is not None else tempfile.mkdtemp(prefix="shiftchange-chaos-")
    try:
        with _sigterm_interrupts():
            report = run_chaos(
                args.store,
                workers=args.workers,
                duration_s=args.duration,
                seed=args.seed,
                rate_per_s=args.rate,
                run_dir=run_dir,
                faults=faults,
                idempotency=not args.no_idempotency,
                drain_s=args.drain,
                progress=_stderr_line(sys.stderr),
                spec=spec,
                metrics=args.metrics,
            )
    except KeyboardInterrupt:
        print(f"shiftchange chaos: interrupted; every process it started was stopped; logs kept in {run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, ChaosError) as error:
        raise BadInput(str(error)) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2), flush=True)
    else:
        from shiftchange.lab.report import render

        print(render(report.to_record()), end="", flush=True)
    if args.report is not None:
        # After the report is printed: a page that cannot be written (exit 2) must not cost the run's verdicts.
        _write_report(args.report, report, args.store)
        if not args.json:
            print(f"report: {args.report}")
    return EXIT_OK if report.ok else EXIT_FAILED


def _resolve_spec(source: str | None) -> Any:
    """The spec the run's cores run (`runtime.chaos.resolve_spec`), read and compiled now: a name that names no spec, or a
    malformed one, is one line and exit status 2 before any process starts."""
    from shiftchange.cli.common import BadInput
    from shiftchange.spec import SpecError
    from shiftchange.spec.source import SpecSourceError

    try:
        return resolve_spec(source)
    except SpecSourceError as error:
        raise BadInput(f"--spec: {error}") from None
    except SpecError as error:
        raise BadInput(f"--spec {source}: {error}") from None


def _check_report(path: str | None) -> None:
    """`--report` names an .html file in a writable folder: checked before any process starts, so a typo costs no run."""
    from shiftchange.cli.common import BadInput
    from shiftchange.core import InputError
    from shiftchange.lab.report.html import check_report_path

    if path is None:
        return
    try:
        check_report_path(path)
    except InputError as error:
        raise BadInput(str(error)) from None


def _write_report(path: str, report: Any, store_url: str) -> None:
    """Write the run's page, reading its timelines from the store it ran on (opened again: the harness closed its own)."""
    from shiftchange.cli.common import BadInput
    from shiftchange.core import CoreError
    from shiftchange.lab.report.html import chaos_page, write_page
    from shiftchange.stores import open_store

    try:
        with open_store(store_url) as store:
            write_page(chaos_page(report, store), path)
    except (CoreError, OSError) as error:
        raise BadInput(f"cannot write the report to {path}: {error}") from None
