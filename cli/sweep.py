"""`shiftchange sim sweep`: a grid of settings times seeds from the command line, its table, and its exit status.

The command is a thin front on `shiftchange.lab.sweep`: it parses the
grid, the seeds and the fixed settings, runs the sweep, prints a compact
table (or writes `--out`) and the replay command of every run that failed.
`--summary` prints, instead of a line per run, a line per grid point: its
runs, the runs that held every invariant and a few rates pooled over its
seeds, each with its exact interval (`shiftchange.lab.summary`); an `--out`
resumed is summarized whole, the rows it held and the rows just played.
Exit status follows `shiftchange`'s contract: 0 when every run held every
invariant, 1 when any run violated one or could not judge one, 2 on bad input
as one line on stderr. `--spec DIR|REV` is read before any run (see
`shiftchange.cli.common.sim_table`); every run plays it and every row carries
its digest. Nothing from `shiftchange.sim` is imported until the command
runs: the parser is built for every command, and none of the others needs the
simulator.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["add_parser", "run_sweep"]

SEEDS_MAX = 100_000
"""`--seeds` names at most this many seeds (a range such as 0-99999 included)."""
TABLE_METRICS = ("tasks_done", "false_expiries", "expiries", "queue_age_s_p99", "throughput_tasks_per_h")
"""The metrics the printed table shows, those of them a run has."""
SUMMARY_RATES = ("false_expiries_per_1000_leases", "renewals_unanswered_share", "tasks_done_share")
"""The pooled rates `--summary` prints (and `--metric`, if it names another); `shiftchange.lab.summary.summarize` gives them all."""
CONFIDENCE_DEFAULT = 0.95
"""The confidence of `--summary`'s and `--plot`'s exact intervals when `--confidence` is not given."""


def add_parser(sim_commands: Any) -> argparse.ArgumentParser:
    """Add `sweep` to the `shiftchange sim` subcommands; its handler returns the exit status."""
    sweep = sim_commands.add_parser("sweep", help="play a grid of settings times seeds, one row per run")
    sweep.add_argument(
        "--grid",
        metavar="PATH=V1,V2,...",
        action="append",
        type=_axis,
        default=[],
        help="values to sweep, split at commas (repeatable: the product)",
    )
    sweep.add_argument("--seeds", metavar="A-B|I,J,...", type=_seeds, default=[0], help="seeds, a range or a list (default 0)")
    sweep.add_argument("--scenario", metavar="NAME", help="see `sim scenarios` (default: mixed, or the anti-pattern's own scenario)")
    sweep.add_argument("--tasks", metavar="N", type=_whole, help="tasks per run (default: the scenario's)")
    sweep.add_argument(
        "--set",
        metavar="PATH=VALUE",
        dest="assignments",
        action="append",
        type=_assignment,
        default=[],
        help="a fixed setting (repeatable)",
    )
    sweep.add_argument("--config", metavar="FILE", help="settings from a TOML file, applied before --set")
    sweep.add_argument("--antipattern", metavar="NAME", help="break the core in one named way (see `sim antipatterns`)")
    sweep.add_argument("--spec", metavar="DIR|REV", help=_spec_help("every run plays it, and each row carries its digest (spec_digest)"))
    sweep.add_argument("--jobs", metavar="N", type=_whole, help="local processes, or Dask workers (default: one per CPU)")
    sweep.add_argument("--executor", metavar="NAME", default="processes", help="processes (default) or dask")
    sweep.add_argument("--scheduler", metavar="ADDRESS", help="with --executor dask: a running scheduler (default: a local cluster)")
    sweep.add_argument("--out", metavar="FILE", help="write the rows to a .csv or .parquet file, resuming from the rows it holds")
    sweep.add_argument("--artifacts", metavar="DIR", help="write each run's artifacts under this directory")
    sweep.add_argument(
        "--coverage", metavar="FILE.json", help="write the transition coverage summed over every run (see spec review --coverage)"
    )
    sweep.add_argument(
        "--fault",
        metavar="TEXT",
        action="append",
        default=[],
        help='a fault placed in every run, "KIND TARGET at=SECONDS for=SECONDS [key=value ...]" (repeatable)',
    )
    sweep.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw --metric against the first swept setting (a line per value of the second); the y axis is logarithmic when"
        " the positive values drawn span more than two decades, linear otherwise",
    )
    sweep.add_argument(
        "--metric",
        metavar="NAME",
        default="throughput_tasks_per_h",
        help="the column --plot draws (default %(default)s); a pooled rate (false_expiries_per_1000_leases,"
        " renewals_unanswered_share, tasks_done_share, ...) is drawn pooled over the seeds, its exact interval as error bars",
    )
    sweep.add_argument("--target", metavar="VALUE", type=_number, help="with --plot: draw VALUE as a labelled horizontal line")
    sweep.add_argument(
        "--summary",
        action="store_true",
        help="print a line per grid point instead of per run: runs, runs that held, rates pooled over its seeds with exact intervals",
    )
    sweep.add_argument(
        "--confidence",
        metavar="P",
        type=_confidence,
        help=f"the confidence of --summary's and --plot's intervals, between 0 and 1 (default {CONFIDENCE_DEFAULT})",
    )
    sweep.set_defaults(handler=run_sweep)
    return sweep


# ------------------------------------------------------------------ argument types


def _spec_help(then: str) -> str:
    """`--spec`'s help as `sim run` gives it, then what this command does with the spec."""
    from shiftchange.cli.common import SIM_SPEC_HELP

    return f"{SIM_SPEC_HELP}; {then}"


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None


def _number(text: str) -> float:
    """A finite number (`--target`): 1, 0.5, 1e-3."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def _confidence(text: str) -> float:
    """`--confidence`: a number strictly between 0 and 1, as `shiftchange.lab.summary.check_confidence` takes it."""
    from shiftchange.core import InputError
    from shiftchange.lab.summary import check_confidence

    try:
        return check_confidence(float(text))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"must be a number strictly between 0 and 1 (0.95 is 95%), not {text!r}") from None


def _assignment(text: str) -> tuple[str, str]:
    from shiftchange.core import InputError
    from shiftchange.lab.settings import parse_assignment

    try:
        return parse_assignment(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def check_settings(flag: str, scenario: str, seed: int, given: Sequence[tuple[str, Any]], fixed: Sequence[tuple[str, Any]] = ()) -> None:
    """Each PATH=VALUE `flag` gave, applied to the scenario's config (before `fixed`, as a map applies a discipline's):
    one that names no setting or holds a bad value is refused in the user's words, `--candidate PATH=VALUE: ...`, before
    any run, and not as the cell or discipline it would have become.
    """
    from shiftchange.core import InputError
    from shiftchange.lab.settings import apply, format_value
    from shiftchange.sim.scenarios import scenario_config

    base = scenario_config(scenario, seed)
    for path, value in given:
        try:
            apply(base, [(path, value), *fixed])
        except InputError as error:
            shown = value if isinstance(value, str) else format_value(value)
            raise InputError(f"{flag} {path}={shown}: {error}") from None


def _axis(text: str) -> tuple[str, list[str]]:
    """`PATH=V1,V2,...`: one swept path and its values, in order."""
    path, joined = _assignment(text)
    values = [value.strip() for value in joined.split(",")]
    if not all(values):
        raise argparse.ArgumentTypeError(f"--grid {text!r} has an empty value; give PATH=V1,V2,...")
    return path, values


def _seeds(text: str) -> list[int]:
    """`0-19` (both ends included), `1,5,9`, or both mixed: `0-3,7`."""
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not (low.isdigit() and low.isascii() and (not dash or (high.isdigit() and high.isascii()))):
            raise argparse.ArgumentTypeError(f"seeds are a range A-B or a list I,J,... of non-negative whole numbers, not {text!r}")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise argparse.ArgumentTypeError(f"the seed range {part.strip()} runs backwards")
        if len(seeds) + last - first + 1 > SEEDS_MAX:
            raise argparse.ArgumentTypeError(f"--seeds names more than {SEEDS_MAX:,} seeds")
        seeds.extend(range(first, last + 1))
    return seeds


# ------------------------------------------------------------------ the command


def run_sweep(args: argparse.Namespace) -> int:
    """Run the sweep the arguments name, print its table or where it was written, and each failing run's replay."""
    from shiftchange.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, BadInput, sim_table
    from shiftchange.core import InputError
    from shiftchange.lab.summary import counted
    from shiftchange.lab.sweep import sweep_rows

    try:
        grid = _grid(args.grid)
        _plottable(args, grid)
        _summarizable(args)
        table = sim_table(args.spec)
        rows = sweep_rows(
            grid,
            args.seeds,
            _scenario(args),
            args.tasks,
            [*_file_overrides(args.config), *args.assignments],
            args.antipattern,
            args.jobs,
            args.executor,
            args.scheduler,
            args.out,
            args.artifacts,
            progress=sys.stderr.isatty(),
            faults=args.fault,
            log=_plan_line,
            coverage=args.coverage,
            spec=table,
        )
    except InputError as error:
        raise BadInput(str(error)) from error
    except KeyboardInterrupt:
        kept = f"{args.out} keeps every row finished, and the same command plays only the rest" if args.out else "no --out kept its rows"
        print(f"shiftchange: sweep interrupted; {kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.out is not None:
        print(f"{args.out}: {counted(len(rows), 'row')}")
    if args.summary:
        try:
            print(_summary(rows, list(grid), _confidence_of(args), args.metric), end="")
        except InputError as error:  # rows that are no counts (a hand-edited --out): the file keeps them, the summary says why not
            raise BadInput(f"cannot summarize the rows: {error}") from error
    elif args.out is None:
        print(_table(rows, list(grid)), end="")
    if args.coverage is not None:
        print(f"{args.coverage}: transition coverage of {counted(len(rows), 'run')}")
    if args.plot is not None:
        _plot(args, rows, list(grid))
    failed = [row for row in rows if not row["ok"]]
    print(_verdict(len(rows), len(failed)))
    for row in failed:
        print(f"replay: {row['replay']}")
    return EXIT_FAILED if failed else EXIT_OK


def _plan_line(line: str) -> None:
    """The sweep's plan (how many runs, how many to play), flushed: a reader of a pipe sees it before the first run ends.

    Every input is accepted by then, so the held `read spec` line is said first (`shiftchange.cli.common.say_notes`).
    """
    from shiftchange.cli.common import say_notes

    say_notes()
    print(line, flush=True)


def _plottable(args: argparse.Namespace, grid: dict[str, list[str]]) -> None:
    """A plot needs a swept setting to draw against and a folder to go in: checked before any run."""
    from shiftchange.core import InputError
    from shiftchange.lab.report.plot import check_figure_path

    if args.plot is None:
        if args.target is not None:
            raise InputError("--target draws a line on the plot: give --plot FILE.png too")
        return
    if not grid:
        raise InputError("--plot draws a metric against a swept setting: give at least one --grid")
    check_figure_path(args.plot)
    known = _metric_columns()
    if args.metric not in known and not args.metric.startswith(("final_states.", "provider_calls.")):
        raise InputError(f"--metric {args.metric!r} is not a metric of a run or a pooled rate; use one of {', '.join(known)}")


def _summarizable(args: argparse.Namespace) -> None:
    """`--confidence` sets intervals only `--summary` and `--plot` draw: given alone it is a mistake, said before any run."""
    from shiftchange.core import InputError

    if args.confidence is not None and not args.summary and args.plot is None:
        raise InputError("--confidence sets the intervals of --summary and --plot: give one of them too")


def _confidence_of(args: argparse.Namespace) -> float:
    return CONFIDENCE_DEFAULT if args.confidence is None else args.confidence


def _metric_columns() -> list[str]:
    """The columns a row's metrics and verdicts have (final_states.* and provider_calls.* vary with the run), then the pooled rates."""
    from shiftchange.checkers.rules import INVARIANTS
    from shiftchange.lab.summary import POOLED_RATES
    from shiftchange.sim.metrics import Metrics

    summary = Metrics(1.0).summary(0.0, {})
    metrics = [name for name, value in summary.items() if not isinstance(value, dict)]
    pooled = [rate.name for rate in POOLED_RATES if rate.name not in metrics]
    return [*metrics, *(f"violations.{name}" for name in INVARIANTS), *pooled]


def _plot(args: argparse.Namespace, rows: list[dict[str, Any]], swept: list[str]) -> None:
    from shiftchange.cli.common import BadInput
    from shiftchange.lab.report.plot import plot_sweep

    try:
        plot_sweep(
            rows,
            swept[0],
            args.metric,
            args.plot,
            by=swept[1] if len(swept) > 1 else None,
            target=args.target,
            confidence=_confidence_of(args),
        )
    except (OSError, ValueError) as error:
        raise BadInput(f"cannot draw {args.plot}: {error}") from error
    print(f"{args.plot}: {args.metric} against {swept[0]}")


def _grid(axes: list[tuple[str, list[str]]]) -> dict[str, list[str]]:
    from shiftchange.core import InputError

    grid: dict[str, list[str]] = {}
    for path, values in axes:
        if path in grid:
            raise InputError(f"--grid names {path} twice; give all its values in one --grid {path}=V1,V2,...")
        grid[path] = values
    return grid


def _scenario(args: argparse.Namespace) -> str:
    """As `sim run` chooses: the named scenario, else the anti-pattern's own, else mixed."""
    from shiftchange.antipatterns import antipattern
    from shiftchange.cli.common import SIM_SCENARIO_DEFAULT

    if args.scenario is not None:
        return args.scenario
    return antipattern(args.antipattern).scenario if args.antipattern is not None else SIM_SCENARIO_DEFAULT


def _file_overrides(path: str | None) -> list[tuple[str, Any]]:
    from shiftchange.core import InputError
    from shiftchange.lab.settings import read_overrides

    if path is None:
        return []
    try:
        return list(read_overrides(path).items())
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None


def _verdict(runs: int, failed: int) -> str:
    from shiftchange.lab.summary import counted

    if not failed:
        return "the run held every invariant" if runs == 1 else f"all {runs:,} runs held every invariant"
    if runs == 1:
        return "the run violated an invariant or could not judge one; replay it:"
    return f"{failed:,} of {counted(runs, 'run')} violated an invariant or could not judge one; replay each:"


def _table(rows: Sequence[dict[str, Any]], swept: list[str]) -> str:
    """The swept values, the seed, ok, and the key metrics of each run, aligned in columns."""
    from shiftchange.lab.settings import format_value

    shown = [*swept, "seed", "ok", *(name for name in TABLE_METRICS if name in rows[0])]
    body = [[_shown(row[column], column in swept, format_value) for column in shown] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(shown, *body, strict=True)]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)) for cells in [shown, *body]]
    return "\n".join(lines) + "\n"


def _shown(value: Any, swept: bool, format_value: Any) -> str:
    if value is None:
        return "-"
    if swept:
        return format_value(value)
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)


def _summary(rows: Sequence[dict[str, Any]], swept: list[str], confidence: float, metric: str) -> str:
    """A line per group of the swept values: runs, runs that held every invariant, the pooled rates, invariants not held."""
    from shiftchange.lab.settings import format_value
    from shiftchange.lab.summary import POOLED_RATES, SHARE, summarize

    groups = summarize(rows, swept, confidence)
    names = [*SUMMARY_RATES, *([metric] if metric not in SUMMARY_RATES else [])]
    rates = [rate for name in names for rate in POOLED_RATES if rate.name == name and rate.name in groups[0]]
    level = f"{100 * confidence:g}%"
    heading = [*swept, "runs", f"ok runs [{level}]", *(rate.label for rate in rates), "invariants not held"]
    body = []
    for group in groups:
        cells = [format_value(group[column]) if group[column] is not None else "-" for column in swept]
        cells += [f"{group['runs']:,}", _interval_cell(group, "runs_ok", "runs_ok", "runs", share=True)]
        for rate in rates:
            cells.append(_interval_cell(group, rate.name, f"sum.{rate.numerator}", f"sum.{rate.denominator}", share=rate.scale == SHARE))
        cells.append(_not_held(group))
        body.append(cells)
    widths = [max(len(cell) for cell in column) for column in zip(heading, *body, strict=True)]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)) for cells in [heading, *body]]
    runs = sum(group["runs"] for group in groups)
    counted = f"{runs:,} runs in {len(groups):,} group{'' if len(groups) == 1 else 's'}"
    intro = [
        f"summary of {counted}: each rate is its events/trials summed over the group's runs (not a mean",
        f"of the runs' rates), then the rate (per 1,000, or a percentage) and [low, high], its exact {level} interval",
    ]
    return "\n".join([*intro, *lines]) + "\n"


def _interval_cell(group: dict[str, Any], name: str, events: str, trials: str, share: bool) -> str:
    """`events/trials value [low, high]`, a share as percentages and a rate per 1,000 as it is; no trials, no rate (`-`)."""
    counts = f"{group[events]:,}/{group[trials]:,}"
    value = group[f"{name}.share" if name == "runs_ok" else name]
    if value is None:
        return f"{counts} -"
    scale = 100.0 if share else 1.0
    low, high = (_rate(scale * group[f"{name}.{end}"], share) for end in ("low", "high"))
    return f"{counts} {_rate(scale * value, share)} [{low}, {high}]"


def _rate(value: float, percent: bool) -> str:
    """A rate with the digits it needs (213.3, 17.2, 8.65, 0.83, 0.0071, 0); a percentage short of 100 never prints as 100."""
    if value == 0 or value >= 1000 or (percent and value == 100):
        text = f"{value:,.0f}"
    elif value >= 10:
        decimals = 1
        while percent and round(value, decimals) >= 100 and decimals < 6:
            decimals += 1
        text = f"{value:,.{decimals}f}"
    elif value >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.2g}"
    return f"{text}%" if percent else text


def _not_held(group: dict[str, Any]) -> str:
    """Each invariant some run of the group did not hold, as `NAME held/judged` (and how many runs could not judge it)."""
    parts = []
    for column, held in group.items():
        if column.startswith("invariant.") and column.endswith(".held") and held < group["runs"]:
            name = column.removeprefix("invariant.").removesuffix(".held")
            unknown = group["runs"] - group[f"invariant.{name}.judged"]
            parts.append(f"{name} {held}/{group['runs'] - unknown}" + (f" ({unknown} unknown)" if unknown else ""))
    return ", ".join(parts) or "none"
