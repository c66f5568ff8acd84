"""`shiftchange spec diff OLD [NEW]`: what a proposed change does to the spec, read from folders or git revisions.

The comparison is `shiftchange.spec.diff`, pure; this module finds the two
specs (a folder, or the four files of a revision extracted into a temporary
folder), adds the simulator's anti-patterns that the touched invariants catch,
draws the changed machines on request, and picks the exit status. Nothing from
`shiftchange.sim` is imported until a touched invariant needs its
anti-patterns: the core compiles the packaged spec on import.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shiftchange.spec import Spec, SpecError
from shiftchange.spec.diagram import RENDERERS, render
from shiftchange.spec.diff import SpecDiff, diff_specs, marks_for, render_text, to_json
from shiftchange.spec.source import SpecSourceError, read_spec, work_tree_spec

__all__ = ["add_parser", "run_diff"]

DIAGRAM_FORMATS = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".mermaid": "mermaid"}
"""`--diagram FILE`: its format, by the file's extension."""

_DESCRIPTION = """\
Compare two specs and say what the change does: per machine, the transition
rows added, removed and changed field by field (rows are numbered as in the
review page and the diagrams), states, vocabulary, roles; failure domains and
invariants; the structural properties whose verdict moved; and the invariants
the change touches, with the anti-patterns they catch.

OLD and NEW are each a spec folder or a git revision of the repository holding
the current directory: REV reads its spec/ folder, REV:path another folder. A
folder wins over a revision of the same name. NEW defaults to the work tree's
spec/ (or the packaged spec outside a git work tree).

With --run, both specs are also put on trial (shiftchange.lab): the
structural check, an exhaustive exploration of small configurations and a
simulation over scenarios and seeds (printed, and set by --explore,
--scenarios, --seeds, --tasks). Their verdicts are shown side by side per
invariant, and for each invariant the proposal breaks and the base holds, its
shortest counterexample (the explorer's path when a search found it, else the
shrunk simulated run), drawn as the violating task's timeline, with replay
commands. --review DIR writes NEW's review page (review.md, review.html) with
the section "What this change does".

Exit status: 0 when the new spec fails no property the old one passed (a
property that already failed in OLD is shown but does not count against the
change) and, with --run, violates no invariant the old one holds; 1 when the
change breaks a property (PASS before, FAIL after, or a new property that
fails) or, with --run, an invariant; 2 on bad input, as one line on stderr."""


def add_parser(spec_commands: Any) -> argparse.ArgumentParser:
    """Add `diff` to the `shiftchange spec` subcommands; its handler returns the exit status."""
    diff = spec_commands.add_parser(
        "diff",
        help="what a change to the spec does: rows, states, verdicts, touched invariants",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("old", metavar="OLD", help="a spec folder, or a git revision (REV or REV:path)")
    diff.add_argument("new", metavar="NEW", nargs="?", help="the same; default: the work tree's spec/")
    diff.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    diff.add_argument(
        "--diagram",
        metavar="FILE",
        help="draw the new machine, its changes marked (.svg .png .dot .mmd); another changed one goes to STEM-<machine>.EXT",
    )
    diff.add_argument("--machine", choices=("attempt", "task"), help="with --diagram: draw this machine only, changed or not")
    diff.add_argument("--renderer", choices=RENDERERS, default="auto", help="for svg and png: graphviz when `dot` exists, else matplotlib")
    diff.add_argument("--run", action="store_true", help="also put OLD and NEW on trial: structure, exploration, simulation")
    add_run_arguments(diff)
    diff.add_argument("--review", metavar="DIR", help='with --run: write NEW\'s review page, with "What this change does", into DIR')
    diff.set_defaults(handler=run_diff)
    return diff


SHRINK_RUNS = 30
"""`spec diff --run`'s (and `spec review --run`'s) default budget of runs for shrinking a violating simulation."""
_RUN_ONLY = ("explore", "scenarios", "seeds", "tasks", "shrink_runs", "review")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that scale a trial of two specs (`spec diff --run`, `spec review --run`)."""
    from .mutate import add_scale_arguments

    add_scale_arguments(parser)
    parser.add_argument(
        "--shrink-runs", metavar="N", help=f"with --run: runs the shrinker may spend on a violation (default {SHRINK_RUNS})"
    )


def run_diff(args: argparse.Namespace) -> int:
    from shiftchange.cli.common import EXIT_FAILED, EXIT_OK, UsageError

    if args.machine is not None and args.diagram is None:
        raise UsageError("spec diff: --machine chooses what --diagram draws; give --diagram FILE too (see --help)")
    diagram_format = _diagram_format(args.diagram) if args.diagram is not None else None
    scale = run_scale(args, _RUN_ONLY)
    old, old_label = _spec_named(args.old)
    new, new_label = _spec_named(args.new) if args.new is not None else _work_tree_spec()
    diff = diff_specs(old, new, old_label, new_label)
    caught_by = _caught_by(diff)
    drawn = _draw(diff, args, diagram_format) if diagram_format is not None else []
    ran = _run(old, new, old_label, new_label, scale) if scale is not None else None
    page = _review(new, ran, args) if ran is not None and args.review is not None else None
    if args.json:
        report = to_json(diff, caught_by)
        report["diagrams"] = drawn
        if ran is not None:
            report["run"] = ran.to_json()
            report["run"]["review"] = None if page is None else str(page)
        print(json.dumps(report, indent=2))
    else:
        print(render_text(diff, caught_by), end="")
        for each in drawn:
            print(f"wrote {each['path']} ({each['machine']} machine, {each['format']}, {each['renderer']})")
        if diagram_format is not None and not drawn:
            print("no machine changed, so no diagram was drawn (name one with --machine)")
        if ran is not None:
            print()
            print("\n".join(ran.lines()))
        if page is not None:
            print(f"\nwrote {page} and {page.with_name('review.html')}")
    return EXIT_FAILED if diff.broken or (ran is not None and ran.broken) else EXIT_OK


def run_scale(args: argparse.Namespace, run_only: tuple[str, ...]) -> Any:
    """The trial's scale with --run (checked before anything is read or run); without it, a trial flag is a usage error."""
    from shiftchange.cli.common import BadInput, UsageError

    from .mutate import scale_from, whole_number

    if not args.run:
        given = [name for name in run_only if getattr(args, name, None) is not None]
        if given:
            raise UsageError(f"spec {args.spec_command}: --{given[0].replace('_', '-')} is for a trial; give --run too (see --help)")
        return None
    shrink_runs = whole_number(args.shrink_runs, "--shrink-runs") if args.shrink_runs is not None else SHRINK_RUNS
    review = getattr(args, "review", None)
    if review is not None and Path(review).exists() and not Path(review).is_dir():
        raise BadInput(f"--review {review} is a file, not a folder")
    return scale_from(args, shrink_runs)


def trial_base(text: str | None) -> tuple[Spec, str]:
    """`spec review --run`'s base: the spec --base names, else the last commit's spec/ in a git work tree, else the packaged spec."""
    from shiftchange.spec.source import SpecSourceError, read_spec

    if text is not None:
        return _spec_named(text)
    try:
        read = read_spec("HEAD")
    except SpecSourceError:
        read = read_spec(None)  # outside a git work tree (or one with no commit): the spec this package ships
    return read.spec, read.label


def _run(old: Spec, new: Spec, old_label: str, new_label: str, scale: Any) -> Any:
    from shiftchange.lab.compare import compare

    print(f"spec diff --run: putting {old_label} and {new_label} on trial", file=sys.stderr, flush=True)
    return compare(old, new, scale, base_label=old_label, proposal_label=new_label)


def _review(new: Spec, ran: Any, args: argparse.Namespace) -> Path:
    from shiftchange.spec.diagram import DiagramError
    from shiftchange.spec.review import write_review

    from .common import BadInput

    try:
        return write_review(new, args.review, args.renderer, change=ran.change_run())
    except DiagramError as error:
        raise BadInput(str(error)) from None


def _diagram_format(path: str) -> str:
    from shiftchange.cli.common import BadInput

    suffix = Path(path).suffix.lower()
    if suffix not in DIAGRAM_FORMATS:
        raise BadInput(f"cannot tell the diagram's format from {path!r}; end it in one of {', '.join(DIAGRAM_FORMATS)}")
    return DIAGRAM_FORMATS[suffix]


def _spec_named(text: str) -> tuple[Spec, str]:
    """The spec a command-line argument names, with its label: a folder, else a git revision (`spec.source`)."""
    from shiftchange.cli.common import BadInput

    try:
        read = read_spec(text)
    except SpecSourceError as error:
        raise BadInput(str(error)) from None
    return read.spec, read.label


def _work_tree_spec() -> tuple[Spec, str]:
    read = work_tree_spec()
    return read.spec, read.label


def _caught_by(diff: SpecDiff) -> dict[str, list[tuple[str, str]]]:
    """The anti-patterns each touched invariant catches (the simulator's catalogue), as (name, failure mode)."""
    if not diff.touched:
        return {}
    try:
        from shiftchange.antipatterns import ANTIPATTERNS
    except SpecError as error:
        # The simulator runs the packaged spec; when that is the broken one, the diff still stands without its anti-patterns.
        print(f"shiftchange: anti-patterns not shown, the simulator cannot load the packaged spec: {error}", file=sys.stderr)
        return {}

    touched = {invariant.name for invariant in diff.touched}
    caught: dict[str, list[tuple[str, str]]] = {}
    for pattern in ANTIPATTERNS.values():
        if pattern.invariant in touched:
            caught.setdefault(pattern.invariant, []).append((pattern.name, pattern.failure_mode))
    return caught


def _draw(diff: SpecDiff, args: argparse.Namespace, diagram_format: str) -> list[dict[str, str]]:
    """Draw each changed machine (or the one `--machine` names) of the new spec with its marks; returns what was written."""
    names = [args.machine] if args.machine is not None else [name for name, change in diff.machines.items() if change]
    first = Path(args.diagram)
    drawn = []
    for number, name in enumerate(names):
        path = first if number == 0 else first.with_name(f"{first.stem}-{name}{first.suffix}")
        used = render(diff.machines[name].new, diagram_format, path, args.renderer, marks=marks_for(diff, name))
        drawn.append({"machine": name, "path": str(path), "format": diagram_format, "renderer": used})
    return drawn
