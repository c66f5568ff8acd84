"""The `shiftchange` command: argument parsing and exit codes, nothing else.

Exit status is the contract scripts rely on: 0 when everything asked for
holds, 1 when a checked property or invariant fails (each named), 2 on bad
input (arguments, a malformed spec, an unwritable file), always as one line
on stderr and never as a traceback. A traceback means a bug in shiftchange.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from shiftchange.spec import SpecError, check_spec, load_spec
from shiftchange.spec.diagram import FORMATS, RENDERERS, DiagramError, render
from shiftchange.spec.review import write_review

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad arguments: reported as one line, exit status 2."""


class BadInput(Exception):
    """Input that names nothing usable (a missing store, a file that is not a store, an unknown task): one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and an exception, not a printed usage block and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _spec_check(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    results = check_spec(spec)
    counts = "; ".join(f"{m.name}: {len(m.states)} states, {len(m.rows)} rows" for m in spec.machines.values())
    print(f"shiftchange spec check: {spec.directory} ({counts}; {len(spec.domains)} failure domains; {len(spec.invariants)} invariants)")
    width = max(len(r.name) for r in results)
    for result in results:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.name:<{width}}  {result.summary}")
        for witness in result.witness:
            print(f"      witness: {witness}")
    held = sum(r.ok for r in results)
    print(f"{held} of {len(results)} properties hold")
    return EXIT_OK if held == len(results) else EXIT_FAILED


def _spec_diagram(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    used = render(spec.machines[args.machine], args.format, args.output, args.renderer)
    print(f"wrote {args.output} ({args.machine} machine, {args.format}, {used})")
    return EXIT_OK


def _spec_review(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    page = write_review(spec, args.output, args.renderer)
    print(f"wrote {page}")
    return EXIT_OK


def _timeline(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the core compiles the packaged spec when it is imported, and
    # `spec check` must still report a broken spec as one line rather than fail on import.
    from shiftchange.core import CoreError
    from shiftchange.core.sqlite_store import SQLiteStore
    from shiftchange.core.timeline import build_timeline, render_timeline

    path = Path(args.store)
    # SQLite creates a database for a path that does not exist, and the store lays its schema into an
    # empty file; a command that only reads must change neither, so both are refused before opening.
    if not path.is_file():
        raise BadInput(f"no store at {path}")
    if path.stat().st_size == 0:
        raise BadInput(f"{path} is empty, not a shiftchange store")
    try:
        with SQLiteStore(path) as store:
            text = render_timeline(build_timeline(store, args.task_id))
    except CoreError as error:
        raise BadInput(str(error)) from error
    print(text, end="")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shiftchange", description="Durable agent execution: the spec, its reference core, and its simulator.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    spec = commands.add_parser("spec", help="check, draw and review the transition tables")
    spec_commands = spec.add_subparsers(dest="spec_command", required=True, parser_class=_Parser)

    check = spec_commands.add_parser("check", help="validate the spec and check its structural properties")
    check.add_argument("--spec", metavar="DIR", help="a spec directory (default: the packaged spec)")
    check.set_defaults(handler=_spec_check)

    diagram = spec_commands.add_parser("diagram", help="draw one machine")
    diagram.add_argument("--spec", metavar="DIR", help="a spec directory (default: the packaged spec)")
    diagram.add_argument("--machine", choices=("attempt", "task"), required=True)
    diagram.add_argument("--format", choices=FORMATS, required=True)
    diagram.add_argument("-o", "--output", metavar="FILE", required=True)
    diagram.add_argument(
        "--renderer", choices=RENDERERS, default="auto", help="for svg and png: graphviz when `dot` exists, else matplotlib"
    )
    diagram.set_defaults(handler=_spec_diagram)

    review = spec_commands.add_parser("review", help="write the design-review page with diagrams")
    review.add_argument("--spec", metavar="DIR", help="a spec directory (default: the packaged spec)")
    review.add_argument("-o", "--output", metavar="DIR", required=True)
    review.add_argument("--renderer", choices=RENDERERS, default="auto")
    review.set_defaults(handler=_spec_review)

    timeline = commands.add_parser("timeline", help="print a task's recovery timeline from a SQLite store")
    timeline.add_argument("--store", metavar="PATH", required=True, help="a SQLite store file; it is only read")
    timeline.add_argument("task_id", metavar="TASK_ID")
    timeline.set_defaults(handler=_timeline)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except (UsageError, BadInput, SpecError, DiagramError) as error:
        print(f"shiftchange: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def run() -> None:
    """The console script's entry point."""
    sys.exit(main())
