"""`shiftchange sim phase`: a recoverability map from the command line, drawn as text (and a heatmap), with its rows.

A thin front on `shiftchange.lab.phase`: it parses the axes, triggers,
disciplines and settings, plays the map, and prints one grid per discipline
and trigger (the first axis across, the second down), each cell its status
and how many of its seeds recovered; then the replay commands of the first
metastable seed of each discipline, control and triggered. Exit status: 0
when every run held every invariant (the map's statuses are findings, not
failures), 1 when a run violated one, 2 on bad input as one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .sweep import _assignment, _axis, _seeds, _spec_help, _whole, check_settings

__all__ = ["add_parser", "run_phase"]

LETTERS = {"recovers": "R", "metastable": "M", "overloaded": "O", "unjudged": "?"}


def add_parser(sim_commands: Any) -> argparse.ArgumentParser:
    """Add `phase` to the `shiftchange sim` subcommands; its handler returns the exit status."""
    phase = sim_commands.add_parser(
        "phase", help="map where a world recovers from a trigger, goes metastable, or is overloaded (a control arm per cell)"
    )
    phase.add_argument(
        "--axis",
        metavar="PATH=V1,V2,...",
        action="append",
        type=_axis,
        default=[],
        help="a setting by dotted path, or trigger.for_s / trigger.at_s / trigger.factor / trigger.mode, and its values"
        " (one or two; the first is drawn across)",
    )
    phase.add_argument(
        "--trigger",
        metavar="TEXT",
        action="append",
        default=[],
        help='a placed provider fault, "KIND TARGET at=SECONDS for=SECONDS [key=value ...]" (repeatable: a third axis)',
    )
    phase.add_argument(
        "--discipline",
        metavar="NAME",
        action="append",
        default=[],
        help="a retry discipline (repeatable; default: defaults): defaults, none, backoff, backoff+breaker, synchronised-breaker,"
        " no-concurrency-limit",
    )
    phase.add_argument("--seeds", metavar="A-B|I,J,...", type=_seeds, default=[0, 1, 2], help="seeds per cell (default 0-2)")
    phase.add_argument("--scenario", metavar="NAME", default="retry-storm", help="the world (default %(default)s)")
    phase.add_argument("--tasks", metavar="N", type=_whole, help="tasks per run (default: as many as arrive in --arrivals-s)")
    phase.add_argument("--arrivals-s", metavar="S", type=float, default=2400.0, help="seconds of arrivals per run (default %(default)g)")
    phase.add_argument(
        "--set", metavar="PATH=VALUE", dest="assignments", action="append", type=_assignment, default=[], help="a fixed setting"
    )
    phase.add_argument("--spec", metavar="DIR|REV", help=_spec_help("both arms of every job play it"))
    phase.add_argument("--jobs", metavar="N", type=_whole, help="local processes, or Dask workers (default: one per CPU)")
    phase.add_argument("--executor", metavar="NAME", default="processes", help="processes (default) or dask")
    phase.add_argument("--scheduler", metavar="ADDRESS", help="with --executor dask: a running scheduler (default: a local cluster)")
    phase.add_argument("--out", metavar="FILE.csv", help="write the rows (one per cell and seed) to this file")
    phase.add_argument("--cells", metavar="FILE.csv", help="write the cells (one per discipline, trigger and axis values) to this file")
    phase.add_argument("--plot", metavar="FILE.png", help="draw a heatmap per discipline and trigger, the boundary between statuses drawn")
    phase.add_argument("--json", action="store_true", help="print the cells as JSON instead of the grids")
    phase.set_defaults(handler=run_phase)
    return phase


def run_phase(args: argparse.Namespace) -> int:
    """Play the map the arguments name and print it."""
    from pathlib import Path

    from shiftchange.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput, sim_table
    from shiftchange.core import InputError
    from shiftchange.lab.phase import TRIGGER_PREFIX, phase, write_rows

    try:
        axes = dict(args.axis)
        if len(axes) != len(args.axis):
            raise InputError("an --axis path is given twice")
        if not 1 <= len(axes) <= 2:
            raise InputError(f"a map takes one or two --axis, not {len(axes)}")
        if args.cells is not None and Path(args.cells).suffix != ".csv":
            raise InputError(f"--cells writes a .csv file, not {Path(args.cells).name!r}")
        for name, path in (("--plot", args.plot), ("--cells", args.cells)):
            if path is not None and not Path(path).parent.is_dir():
                raise InputError(f"cannot write {name} {path}: no directory {Path(path).parent}")
        if args.plot is not None:
            from shiftchange.lab.report.plot import check_figure_path

            check_figure_path(args.plot)  # a suffix matplotlib cannot draw is refused before any job plays
        seed = args.seeds[0] if args.seeds else 0
        check_settings("--set", args.scenario, seed, args.assignments)
        settings = [(path, value) for path, values in axes.items() if not path.startswith(TRIGGER_PREFIX) for value in values]
        check_settings("--axis", args.scenario, seed, settings, fixed=args.assignments)
        table = sim_table(args.spec)
        result = phase(
            axes,
            args.trigger,
            args.discipline or ["defaults"],
            args.seeds,
            args.scenario,
            args.tasks,
            args.arrivals_s,
            args.assignments,
            jobs=args.jobs,
            executor=args.executor,
            scheduler=args.scheduler,
            out=args.out,
            progress=sys.stderr.isatty(),
            log=_plan_line(args.json),
            spec=table,
        )
        if args.cells:
            write_rows(Path(args.cells), result.cells)
        if args.plot:
            result.plot(args.plot)
    except InputError as error:
        raise BadInput(str(error)) from None
    except KeyboardInterrupt:
        print("shiftchange: map interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(result.cells, indent=2))
    else:
        _print(result)
        for name, path in (("rows", args.out), ("cells", args.cells), ("heatmap", args.plot)):
            if path:
                print(f"{name} written to {path}")
    return EXIT_OK if all(row["control.invariants_ok"] and row["triggered.invariants_ok"] for row in result.rows) else EXIT_FAILED


def _plan_line(quiet: bool) -> Any:
    """The map's plan line (jobs and runs), printed unless `quiet` (--json); every input is accepted by then, so the held
    `read spec` line is said first (`shiftchange.cli.common.say_notes`)."""
    from shiftchange.cli.common import say_notes

    def said(line: str) -> None:
        say_notes()
        if not quiet:
            print(line, flush=True)

    return said


def _print(result: Any) -> None:
    from shiftchange.lab.phase import panel_trigger
    from shiftchange.lab.summary import counted

    axes = result.axes
    across, down = axes[0], axes[1] if len(axes) > 1 else None
    panels: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in result.cells:
        panels.setdefault((cell["discipline"], cell["trigger"]), []).append(cell)
    for (discipline, trigger), cells in panels.items():
        print(f"\n{discipline}, trigger {panel_trigger(trigger, axes)}: R recovers, M metastable, O overloaded (recovered/seeds)")
        xs = list(dict.fromkeys(cell[across] for cell in cells))
        ys = list(dict.fromkeys(cell[down] for cell in cells)) if down else [None]
        by = {(cell[across], cell[down] if down else None): cell for cell in cells}
        width = max(8, *(len(str(x)) + 1 for x in xs))
        label = max(len(str(down or "")), *(len(str(y)) for y in ys))
        print(f"{(down or ''):>{label}} | " + "".join(f"{x!s:>{width}}" for x in xs) + f"   <- {across}")
        for y in ys:
            marks = []
            for x in xs:
                cell = by.get((x, y))
                marks.append("" if cell is None else f"{LETTERS[cell['status']]} {cell['recovered']}/{cell['seeds']}")
            print(f"{'' if y is None else str(y):>{label}} | " + "".join(f"{mark:>{width}}" for mark in marks))
        counts = {status: sum(cell["status"] == status for cell in cells) for status in LETTERS}
        print("  " + ", ".join(f"{count} {status}" for status, count in counts.items() if count))
    broken = [row for row in result.rows if not (row["control.invariants_ok"] and row["triggered.invariants_ok"])]
    if broken:
        names = sorted(
            {name for row in broken for arm in ("control", "triggered") for name in row[f"{arm}.invariants_broken"].split(",") if name}
        )
        print(f"\n{len(broken)} of {counted(len(result.rows), 'job')} broke an invariant ({', '.join(names)}); the first:")
        print("  " + (broken[0]["triggered.replay"] if broken[0]["triggered.invariants_broken"] else broken[0]["control.replay"]))
    seen = set()
    for row in result.rows:
        if row["status"] == "metastable" and row["discipline"] not in seen:
            seen.add(row["discipline"])
            print(f"\nmetastable, {row['discipline']} seed {row['seed']} ({row['why']}):")
            print("  control:   " + row["control.replay"])
            print("  triggered: " + row["triggered.replay"])
