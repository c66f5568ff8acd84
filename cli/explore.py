"""`shiftchange explore`: every interleaving of a small configuration, checked against every invariant.

Exit status: 0 when the search completed with no violation, 1 on a violation
(with its shortest counterexample and the command that replays it), 2 on bad
arguments, 3 when a depth, state or time bound stopped the search before it
completed (no violation among the states it visited, which proves nothing
about the rest), 130 when interrupted. `--replay STEPS` plays one path and
exits 1 if it violates an invariant, 0 if not.

`--spec DIR|REV` runs the core on another transition table: a folder, or a
git revision, named as `shiftchange spec check` names one. It is read before
anything runs (a bad name or a malformed file is one line and exit 2), the
files read are named on stderr, the report names the spec's label and digest,
and a counterexample's replay command carries the same `--spec`.

The arguments are declared here importing nothing of the core: `shiftchange`
builds its whole parser before any command runs. The explorer is imported
when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

__all__ = ["EXIT_INCOMPLETE", "add_parser"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

_COUNTS = (
    ("workers", "N", "workers, interchangeable (1-4, default 2)"),
    ("tasks", "N", "tasks (1-3, default 1)"),
    ("crashes", "N", "worker crashes the nemesis may place (0-4, default 0)"),
    ("pauses", "N", "stop-the-world pauses of a worker (0-4, default 0)"),
    ("stalls", "N", "slow spells of a worker holding a lease: no step for a lease's length, its heartbeat still renewing (0-4, default 0)"),
    ("lost-requests", "N", "provider calls that never arrive: nothing lands (0-4, default 0)"),
    ("lost-responses", "N", "provider answers lost after the effect landed (0-4, default 0)"),
    ("duplicates", "N", "worker requests delivered a second time, later (0-4, default 0)"),
    ("cancels", "N", "operator cancellations of a task (0-2, default 0)"),
    ("operator-calls", "N", "an operator's accept, approve, release or admission at any moment, whatever the state (0-2, default 0)"),
    ("ci-failures", "N", "effects whose CI verdict fails, with one signature (0-4, default 0)"),
    ("refusals", "N", "provider calls refused in the authorization or configuration domain (0-4, default 0)"),
    ("deletions", "N", "landed effects deleted at the code host by someone outside: contradictory evidence (0-2, default 0)"),
    ("retries", "N", "automatic retries per task: the budget allows N+1 Attempts (0-4, default 1)"),
)


def _whole(text: str) -> int:
    if not text.strip().isdigit() or not text.strip().isascii():
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}")
    return int(text)


def _bound(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a bound must be at least 1, not {value}")
    return value


def _operations(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(","))


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None


def _limit(text: str) -> float:
    value = _seconds(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"a time limit must be a positive number of seconds, not {text!r}")
    return value


_TIMINGS = (
    ("gateway-retries", "gateway_retries_max", _whole, "N", "asks again for one call before the Attempt fails (0-3, default 1)"),
    ("lease-ttl", "lease_ttl_s", _seconds, "S", "the lease's time to live (default 3)"),
    ("heartbeat", "heartbeat_interval_s", _seconds, "S", "a live worker's renewal cadence (default 1)"),
    ("call-deadline", "call_deadline_s", _seconds, "S", "a granted call's deadline (default 2)"),
    ("cancel-ack-timeout", "cancel_ack_timeout_s", _seconds, "S", "how long a cancellation waits for its acknowledgement (default 2)"),
    ("backoff-base", "backoff_base_s", _seconds, "S", "the first backoff (Attempts, a call's retries), doubling (default 1)"),
    ("backoff-cap", "backoff_cap_s", _seconds, "S", "the longest backoff (default 4)"),
    ("gateway-retry", "gateway_retry_s", _seconds, "S", "a worker's pause before asking the gateway again after a lost answer (default 2)"),
)
_SEARCH_ONLY = ("depth", "states", "time_limit", "processes", "por", "dfs", "no_symmetry", "coverage", "report", "time")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    explore = commands.add_parser(
        "explore",
        help="enumerate every interleaving of a small configuration over the real core, against every invariant",
        description="Breadth-first by default, so the first violation is a shortest one. Exit 0: completed, no violation;"
        " 1: a violation (or a replayed path that violates); 2: bad arguments; 3: a bound stopped the search first.",
    )
    for name, metavar, text in _COUNTS:
        explore.add_argument(f"--{name}", metavar=metavar, type=_whole, default=None, help=text)
    explore.add_argument(
        "--operations", metavar="A,B", type=_operations, default=None, help="the workflow's side effects, in order (default create-pr)"
    )
    explore.add_argument("--no-idempotency", action="store_true", default=None, help="the code host ignores operation keys")
    for flag, _name, kind, metavar, text in _TIMINGS:
        explore.add_argument(f"--{flag}", metavar=metavar, type=kind, default=None, help=text)
    explore.add_argument(
        "--antipattern",
        metavar="NAME",
        help="explore the core broken this way; the flags not given come from the configuration that exposes it",
    )
    explore.add_argument("--antipatterns", action="store_true", help="list which anti-patterns exploration exposes, and which not and why")
    explore.add_argument(
        "--spec",
        metavar="DIR|REV",
        help="run the core on this spec: a folder holding the spec files, or a git revision (REV or REV:folder); default the packaged spec",
    )
    explore.add_argument("--depth", metavar="N", type=_bound, help="do not expand states at this depth (needed with --dfs)")
    explore.add_argument("--max-states", "--states", dest="states", metavar="N", type=_bound, help="stop after this many distinct states")
    explore.add_argument("--time-limit", metavar="S", type=_limit, help="stop after this many seconds (the summary says so)")
    explore.add_argument(
        "--processes", metavar="N", type=_bound, default=None, help="spread a breadth-first search over N local processes (default 1)"
    )
    explore.add_argument("--dfs", action="store_true", help="depth-first (with --depth): less memory, no shortest counterexample")
    explore.add_argument("--no-symmetry", action="store_true", help="count a state and its image under renamed workers apart")
    explore.add_argument(
        "--time",
        choices=("abstract", "concrete"),
        default=None,
        help="abstract (default): states that differ only in when things happened are one (sound for the invariants; timings"
        " in 1/1024 s); concrete: every time a number on the clock. Paths, and replays, are on the concrete clock either way",
    )
    explore.add_argument(
        "--por",
        action="store_true",
        help="partial-order reduction: skip the second order of independent steps (sleep sets; the same states and verdicts)",
    )
    explore.add_argument("--replay", metavar="STEPS", help="play one path (comma-separated steps, as a counterexample prints them)")
    explore.add_argument("--coverage", metavar="FILE", help="write which transition rows the search fired (for spec review --coverage)")
    explore.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    explore.add_argument("--report", metavar="PAGE.html", help="also write the search's report page (one self-contained HTML file)")
    explore.set_defaults(handler=run_explore)
    return explore


def _config(args: argparse.Namespace) -> Any:
    from shiftchange.explore import ExploreConfig, exposing_config

    given = {name.replace("-", "_"): getattr(args, name.replace("-", "_")) for name, _m, _t in _COUNTS}
    given["operations"] = args.operations
    given["idempotent_provider"] = None if args.no_idempotency is None else False
    given |= {name: getattr(args, flag.replace("-", "_")) for flag, name, _kind, _m, _t in _TIMINGS}
    given["spec"] = args.spec
    given["time"] = "concrete" if args.replay is not None else getattr(args, "time", None)  # a replay plays on the concrete clock
    given = {name: value for name, value in given.items() if value is not None}
    if args.antipattern is not None:
        return exposing_config(args.antipattern, **given)
    return ExploreConfig(**given)


def run_explore(args: argparse.Namespace) -> int:
    from shiftchange.explore import ExploreError

    from .common import BadInput, say_notes

    if args.antipatterns:
        own = [name.replace("-", "_") for name, _m, _t in _COUNTS] + [flag.replace("-", "_") for flag, *_rest in _TIMINGS]
        own += ["operations", "no_idempotency", "antipattern", "spec", "replay", "json", *_SEARCH_ONLY]
        extra = [name for name in own if getattr(args, name) not in (None, False)]
        if extra:
            raise BadInput(f"--antipatterns lists them and takes no other flag (given: --{extra[0].replace('_', '-')})")
        return _list_antipatterns()
    try:
        config = _config(args)
        if config.spec is not None:
            _read_spec(config)
        if args.replay is not None:
            extra = [name for name in _SEARCH_ONLY if getattr(args, name) not in (None, False)]
            if extra:
                raise BadInput(f"--replay plays one path; --{extra[0].replace('_', '-')} is for a search")
            return _replay(args, config)
        if args.report is not None:
            from shiftchange.core import InputError
            from shiftchange.lab.report.html import check_report_path

            try:
                check_report_path(args.report)
            except InputError as error:
                raise BadInput(str(error)) from error
        if args.coverage is not None:
            from shiftchange.spec.coverage import CoverageError, check_writable

            try:
                check_writable(args.coverage)
            except CoverageError as error:
                raise BadInput(str(error)) from error
        say_notes()
        return _search(args, config)
    except ExploreError as error:
        raise BadInput(str(error)) from error


def _read_spec(config: Any) -> None:
    """Read and compile the spec `--spec` names before anything runs, and say on stderr which files were read.

    A name that is neither a spec folder nor a git revision is bad input; a malformed file (or one whose vocabulary the
    core does not implement) is the loader's `SpecError`, naming its line: both one line and exit 2.
    """
    from shiftchange.spec.source import SpecSourceError, read_spec

    from .common import BadInput, note

    try:
        read = read_spec(config.spec)
    except SpecSourceError as error:
        raise BadInput(str(error)) from error
    config.table()  # compiled now, once for this process (and the processes it forks), so a bad table never starts a search
    note(f"read spec: {', '.join(read.files)}")  # said when the search or replay begins, so a refusal before it is one line


def _search(args: argparse.Namespace, config: Any) -> int:
    from shiftchange.explore import BFS, DFS, explore
    from shiftchange.explore.report import to_record
    from shiftchange.lab.report import render

    bar = _bar(args) if sys.stderr.isatty() and not args.json else None

    def shown(result: Any) -> None:
        bar.update(result.states - bar.n)
        bar.set_postfix_str(f"{result.transitions:,} transitions, depth {result.depth}", refresh=False)

    try:
        result = explore(
            config,
            DFS if args.dfs else BFS,
            depth_max=args.depth,
            states_max=args.states,
            symmetry=not args.no_symmetry,
            progress=shown if bar is not None else None,
            processes=args.processes or 1,
            por=args.por,
            time_limit_s=args.time_limit,
        )
    finally:
        if bar is not None:
            bar.close()
    covered = _write_coverage(args.coverage, result)
    _write_report(args.report, result)
    if result.stopped_by == "interrupted":
        print("shiftchange: interrupted; the summary of what was searched follows", file=sys.stderr)
    if args.json:
        report = to_record(result).to_json()
        if covered is not None:
            report["coverage"]["written_to"] = args.coverage
        print(json.dumps(report, indent=2))
    else:
        print(render(to_record(result)), end="")
        if covered is not None:
            print(covered)
    if result.stopped_by == "interrupted":
        return EXIT_INTERRUPTED
    if not result.ok:
        return EXIT_FAILED
    return EXIT_OK if result.complete else EXIT_INCOMPLETE


def _bar(args: argparse.Namespace) -> Any:
    """A progress bar on stderr: distinct states so far (against the state bound, if any), their rate, and the depth."""
    from tqdm import tqdm

    return tqdm(total=args.states, unit=" states", unit_scale=True, file=sys.stderr, leave=False, dynamic_ncols=True)


def _write_coverage(path: str | None, result: Any) -> str | None:
    from shiftchange.spec.coverage import CoverageError, write_coverage

    from .common import BadInput

    if path is None:
        return None
    try:
        write_coverage(result.coverage(), path)
    except CoverageError as error:
        raise BadInput(str(error)) from error
    return f"coverage written to {path}"


def _write_report(path: str | None, result: Any) -> None:
    """Write the search's page (`--report`), from the very record `--json` prints."""
    from shiftchange.core import InputError
    from shiftchange.explore.report import to_record
    from shiftchange.lab.report.html import explore_page, write_page

    from .common import BadInput

    if path is None:
        return
    try:
        write_page(explore_page(to_record(result).to_json()), path)
    except (OSError, InputError) as error:
        raise BadInput(f"cannot write the report to {path}: {error}") from error
    if result.stopped_by != "interrupted":
        print(f"report: {path}", file=sys.stderr)


def _replay(args: argparse.Namespace, config: Any) -> int:
    from shiftchange.explore import parse_steps, replay, replay_command

    from .common import say_notes

    began = time.perf_counter()
    played = replay(config, parse_steps(args.replay))
    elapsed_s = time.perf_counter() - began
    say_notes()  # the path played: a path that does not parse, or does not fit, was refused in one line
    if args.json:
        found = played.violation
        violation = None if found is None else {"invariant": found.invariant, "status": found.status, "example": list(found.example)}
        report = {
            "command": "explore",
            "replay": list(played.steps),
            "timeline": list(played.timeline),
            "violation": violation,
            "spec": {"label": config.table().label, "digest": config.table().digest},
            "elapsed_s": round(elapsed_s, 3),
            "ok": played.violation is None,
        }
        print(json.dumps(report, indent=2))
    else:
        print(f"replay of {len(played.steps)} steps: {replay_command(config, played.steps)}")
        print("\n".join(played.timeline))
        print()
        if played.violation is None:
            print("no invariant is violated on this path")
        else:
            found = played.violation
            print(f"{'FAIL' if found.status == 'violated' else 'UNKNOWN'}  {found.invariant}")
            print("\n".join(f"      {line}" for line in found.example))
    return EXIT_OK if played.violation is None else EXIT_FAILED


def _list_antipatterns() -> int:
    from shiftchange.explore import EXPOSURES, OUT_OF_SCOPE, exposing_config, steps_flags

    width = max(len(name) for name in (*EXPOSURES, *OUT_OF_SCOPE))
    print("exposed by exploration (shiftchange explore --antipattern NAME):")
    for name, exposure in EXPOSURES.items():
        flags = steps_flags(exposing_config(name))  # on the clock it is searched on (`--time concrete` where it must be)
        print(f"  {name:<{width}}  caught by {exposure.invariant}: {exposure.window}")
        print(f"  {'':<{width}}  in: {flags}")
    print("out of scope (quantitative by nature):")
    for name, why in OUT_OF_SCOPE.items():
        print(f"  {name:<{width}}  {why}")
    return EXIT_OK
