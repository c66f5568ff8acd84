"""`shiftchange spec mutate`: every single-point mutant of the table, each put on trial, and the mutation score.

The work is `shiftchange.lab` (`lab.mutants` makes the mutants, `lab.trial`
judges one, `lab.mutate` runs them all on local processes or Dask); this
module reads the arguments, refuses bad ones in one line before anything
runs, and prints the report (text, `--json`, and `-o PAGE.html`). The scale
flags (`--explore`, `--scenarios`, `--seeds`, `--tasks`) are shared with
`spec diff --run` (`add_scale_arguments`, `scale_from`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["add_parser", "add_scale_arguments", "run_mutate", "scale_from"]

_DESCRIPTION = """\
Make every single-point mutant of the transition tables (drop a guard, negate
a guard, unfence a fenced row, move a destination to each other state, drop an
effect, drop a row, widen a row's sources by one state) and put each through
the structural check, an exhaustive exploration of small configurations and a
simulation, cheapest first, stopping at the first check that kills it (fails
something the base passes).

The report: the mutation score overall, per kind, per check (with the number
of mutants, runs and the time each took) and per row; every surviving mutant
with its row (file:line), the change and a one-line reading; with --json every
mutant's verdict. Mutants with replay commands (killed by the explorer or the
simulator) and survivors are written as spec folders under --out.

Every trial is deterministic, so --processes 1, --processes N and --dask give
the same verdicts. Exit status: 0 when the analysis ran; 2 on bad input."""


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that set what a trial runs (`lab.trial.Scale`); each default is the scale's."""
    from shiftchange.lab.trial import DEFAULT_EXPLORE, DEFAULT_SCENARIOS, DEFAULT_SEEDS, DEFAULT_TASKS

    parser.add_argument(
        "--explore",
        metavar="COUNTS",
        action="append",
        help="an exploration, as name=number words ('workers=2 pauses=1': the explorer's counts, timings such as"
        " call_deadline_s=5, operations=N, idempotent_provider=0); repeat for more; 'none' for none"
        f" (default: {'; '.join(DEFAULT_EXPLORE)})",
    )
    parser.add_argument("--scenarios", metavar="A,B", help=f"the simulated scenarios, or 'none' (default {','.join(DEFAULT_SCENARIOS)})")
    parser.add_argument("--seeds", metavar="N,M", help=f"the simulations' seeds (default {','.join(map(str, DEFAULT_SEEDS))})")
    parser.add_argument("--tasks", metavar="N", help=f"tasks per simulated run (default {DEFAULT_TASKS})")


def scale_from(args: argparse.Namespace, shrink_runs: int = 0) -> Any:
    """The `Scale` the flags name; a bad one is `BadInput` (one line, exit 2)."""
    from shiftchange.lab.trial import Scale, TrialError

    from .common import BadInput

    given: dict[str, Any] = {"shrink_runs": shrink_runs}
    if args.explore is not None:
        given["explore"] = () if args.explore == ["none"] else tuple(text.strip() for text in args.explore)
    if args.scenarios is not None:
        given["scenarios"] = () if args.scenarios.strip() == "none" else tuple(s.strip() for s in args.scenarios.split(",") if s.strip())
    try:
        if args.seeds is not None:
            given["seeds"] = tuple(whole_number(text, "--seeds") for text in args.seeds.split(",") if text.strip())
        if args.tasks is not None:
            given["tasks"] = whole_number(args.tasks, "--tasks")
        return Scale(**given)
    except TrialError as error:
        raise BadInput(str(error)) from None


def whole_number(text: str, flag: str) -> int:
    from .common import BadInput

    if not text.strip().isdigit():
        raise BadInput(f"{flag} takes whole numbers, not {text.strip()!r}")
    return int(text)


def add_parser(spec_commands: Any) -> argparse.ArgumentParser:
    """Add `mutate` to the `shiftchange spec` subcommands."""
    from shiftchange.lab.mutants import KINDS

    mutate = spec_commands.add_parser(
        "mutate",
        help="mutation analysis: every single-point mutant of the table, on trial; the score and the survivors",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mutate.add_argument("--spec", metavar="DIR|REV", help="a spec folder or a git revision (default: the checkout's spec/)")
    mutate.add_argument("--kinds", metavar="K,K", help=f"only these kinds: {', '.join(KINDS)} (default: every kind)")
    mutate.add_argument("--processes", metavar="N", help="local processes, or Dask workers of a local cluster (default: one per CPU)")
    mutate.add_argument("--dask", metavar="ADDRESS", help="run on Dask: a scheduler's address, or 'local' for a local cluster")
    add_scale_arguments(mutate)
    mutate.add_argument("--out", metavar="DIR", default="spec-mutants", help="where mutants with replays go (default spec-mutants)")
    mutate.add_argument("--killed", action="store_true", help="also list every killed mutant, with its check and invariant")
    mutate.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    mutate.add_argument("-o", "--output", metavar="PAGE.html", help="also write the report as an HTML page")
    mutate.set_defaults(handler=run_mutate)
    return mutate


def run_mutate(args: argparse.Namespace) -> int:
    from shiftchange.lab.mutants import MutantError, check_kinds
    from shiftchange.spec.source import SpecSourceError, read_spec, work_tree_spec

    from .common import EXIT_OK, BadInput

    try:
        kinds = check_kinds(k.strip() for k in args.kinds.split(",") if k.strip()) if args.kinds is not None else ()
    except MutantError as error:
        raise BadInput(str(error)) from None
    if args.kinds is not None and not kinds:
        raise BadInput("--kinds names no kind")
    processes = whole_number(args.processes, "--processes") if args.processes is not None else (os.cpu_count() or 1)
    if processes < 1:
        raise BadInput("--processes must be at least 1")
    if args.dask is not None:
        _check_dask()
    scale = scale_from(args)
    if args.output is not None and not args.output.lower().endswith((".html", ".htm")):
        raise BadInput(f"-o writes an HTML page: end {args.output!r} in .html")
    try:
        read = read_spec(args.spec) if args.spec is not None else work_tree_spec()
    except SpecSourceError as error:
        raise BadInput(str(error)) from None
    _check_out(args.out)
    report = _run(read, scale, kinds, args, processes)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        from shiftchange.lab.mutate import killed_lines, summary_lines

        print(f"read {read.label}: {', '.join(read.files)}")
        print("\n".join(summary_lines(report)))
        if args.killed:
            print(f"\nkilled: {len(report.killed)}")
            print("\n".join(killed_lines(report)))
    if args.output is not None:
        from shiftchange.lab.page import write_mutation_page

        try:
            page = write_mutation_page(report, args.output)
        except OSError as error:
            raise BadInput(f"cannot write {args.output}: {error.strerror or error}") from None
        if not args.json:
            print(f"wrote {page}")
    return EXIT_OK


def _run(read: Any, scale: Any, kinds: tuple[str, ...], args: argparse.Namespace, processes: int) -> Any:
    from shiftchange.core import InputError
    from shiftchange.lab.mutate import mutate

    from .common import BadInput, say_notes

    bar = None
    if sys.stderr.isatty() and not args.json:
        from tqdm import tqdm

        bar = tqdm(unit=" mutants", file=sys.stderr, leave=False, dynamic_ncols=True)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    say_notes()
    try:
        return mutate(
            read.spec,
            scale,
            kinds,
            label=read.label,
            out=args.out,
            processes=processes,
            dask=args.dask,
            progress=progress if bar is not None else None,
        )
    except InputError as error:
        raise BadInput(str(error)) from None
    finally:
        if bar is not None:
            bar.close()


def _check_dask() -> None:
    from .common import BadInput

    try:
        import distributed  # noqa: F401
    except ImportError:
        raise BadInput("--dask needs Dask: pip install 'shiftchange[dask]'") from None


def _check_out(out: str) -> None:
    from pathlib import Path

    from .common import BadInput

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"--out {out} is a file, not a folder")
