"""The `shiftchange` command: argument parsing and exit codes, nothing else.

Exit status is the contract scripts rely on: 0 when everything asked for
holds, 1 when a checked property or invariant fails (each named), 2 on bad
input (arguments, a malformed spec, an unwritable file), always as one line
on stderr and never as a traceback. A traceback means a bug in shiftchange.
Ctrl-C ends any command with one line and status 130; a `sim run` then
reports what it played, and a `sim sweep` keeps every row it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from shiftchange import __version__
from shiftchange.spec import SpecError, check_spec, editing_directory, load_spec, shown_directory
from shiftchange.spec.diagram import FORMATS, INSTALL_GRAPHVIZ, RENDERERS, DiagramError, render
from shiftchange.spec.loader import FILES
from shiftchange.spec.review import write_review

from .common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    PROG,
    PROGRESS_INTERVAL_S,
    SIM_SCENARIO_DEFAULT,
    SIM_SEED_DEFAULT,
    SIM_SPEC_HELP,
    SIM_TASKS_MAX,
    BadInput,
    UsageError,
    drop_notes,
    say_notes,
    sim_table,
)
from .explore import add_parser as add_explore_parser
from .mutate import add_parser as add_spec_mutate_parser
from .operator import add_parsers as add_operator_parsers
from .phase import add_parser as add_phase_parser
from .spec_diff import add_parser as add_spec_diff_parser
from .spec_diff import add_run_arguments
from .sweep import add_parser as add_sweep_parser
from .tune import add_parser as add_tune_parser


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and an exception, not a printed usage block and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # `main` prefixes every error with "shiftchange: ", so the command is named without it: "sim run: argument --seed: ..."
        command = self.prog.removeprefix(PROG).strip()
        raise UsageError(f"{command}: {message} (see --help)" if command else f"{message} (see --help)")


def _load_edited(args: argparse.Namespace) -> Any:
    """The spec a spec command reads: --spec, else the checkout's spec/ beside the current directory, else the packaged one.

    Its output says which files it read, first (`_say_read`): a reviewer must know whether the verdicts are those of the
    proposal in front of them. The line is printed once the command has done what can fail, so a refusal stays one line.
    """
    directory = args.spec if args.spec is not None else editing_directory()
    return load_spec(directory)


def _say_read(args: argparse.Namespace, spec: Any) -> None:
    """The spec command's first line of output: which spec, and which of its files, it read (none with --json)."""
    if not getattr(args, "json", False):
        print(f"read {shown_directory(spec.directory)}: " + ", ".join(FILES.values()))


def _spec_check(args: argparse.Namespace) -> int:
    spec = _load_edited(args)
    results = check_spec(spec)
    _say_read(args, spec)
    held = sum(r.ok for r in results)
    if args.json:
        machines = {m.name: {"states": len(m.states), "rows": len(m.rows)} for m in spec.machines.values()}
        found = {
            "spec": shown_directory(spec.directory),
            "files": list(FILES.values()),
            "machines": machines,
            "failure_domains": len(spec.domains),
            "invariants": len(spec.invariants),
            "properties": [{"name": r.name, "ok": r.ok, "summary": r.summary, "witness": list(r.witness)} for r in results],
            "held": held,
            "ok": held == len(results),
        }
        print(json.dumps(found, indent=2))
        return EXIT_OK if held == len(results) else EXIT_FAILED
    counts = "; ".join(f"{m.name}: {len(m.states)} states, {len(m.rows)} rows" for m in spec.machines.values())
    where = shown_directory(spec.directory)
    print(f"shiftchange spec check: {where} ({counts}; {len(spec.domains)} failure domains; {len(spec.invariants)} invariants)")
    width = max(len(r.name) for r in results)
    for result in results:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.name:<{width}}  {result.summary}")
        for witness in result.witness:
            print(f"      witness: {witness}")
    print(f"{held} of {len(results)} properties hold")
    return EXIT_OK if held == len(results) else EXIT_FAILED


def _spec_diagram(args: argparse.Namespace) -> int:
    fmt = _diagram_format(args.output, args.format)  # before anything is read or written
    spec = _load_edited(args)
    used = render(spec.machines[args.machine], fmt, args.output, args.renderer)
    _say_read(args, spec)
    drawn = {"text": "text, nothing to install", "graphviz": "drawn by Graphviz's dot", "matplotlib": "drawn by matplotlib"}[used]
    hint = f"; {INSTALL_GRAPHVIZ}" if used == "matplotlib" and args.renderer == "auto" else ""
    print(f"wrote {args.output} ({args.machine} machine, {fmt}, {drawn}{hint})")
    return EXIT_OK


def _diagram_format(output: str, given: str | None) -> str:
    """The format `spec diagram` writes: `--format`, else the one `-o`'s suffix names; a suffix naming another is refused.

    Refused before anything is written: `--format png -o x.svg` would put PNG bytes in a file every viewer reads as SVG.
    A suffix no format claims (`x.txt`, none) is taken as given with `--format`, and refused without it.
    """
    from .spec_diff import DIAGRAM_FORMATS

    suffix = Path(output).suffix.lower()
    implied = DIAGRAM_FORMATS.get(suffix)
    if given is None:
        if implied is None:
            endings = ", ".join(DIAGRAM_FORMATS)
            raise BadInput(f"cannot tell the diagram's format from {output!r}: give --format, or end the file in one of {endings}")
        return implied
    if implied is not None and implied != given:
        raise BadInput(f"-o {output} ends in {suffix}, a {implied} file, but --format is {given}: make them agree")
    return given


def _spec_review(args: argparse.Namespace) -> int:
    """Write the review page; print the failing properties, as `spec check` does, and exit 1 when any fails.

    With --run, the reviewed spec and its base (--base, default the last commit's spec/) are put on trial as `spec diff
    --run` puts them, and the page gains "What this change does"; exit 1 also when the spec breaks an invariant the
    base holds.
    """
    from shiftchange.spec.coverage import CoverageError, read_coverage

    from .spec_diff import run_scale, trial_base

    scale = run_scale(args, ("base", "explore", "scenarios", "seeds", "tasks", "shrink_runs"))
    if scale is not None and Path(args.output).exists() and not Path(args.output).is_dir():
        raise BadInput(f"-o {args.output} is a file, not a folder")  # said before both trials run, not after
    spec = _load_edited(args)
    base, base_label = trial_base(args.base) if scale is not None else (None, "")
    try:
        coverage = read_coverage(args.coverage) if args.coverage is not None else None
        if coverage is not None:
            coverage.check_against(spec, args.coverage)
    except CoverageError as error:
        raise BadInput(str(error)) from error
    ran = None
    if scale is not None:
        from shiftchange.lab.compare import compare

        label = shown_directory(spec.directory)
        print(f"spec review --run: putting {base_label} and {label} on trial", file=sys.stderr, flush=True)
        ran = compare(base, spec, scale, base_label=base_label, proposal_label=label)
    results = check_spec(spec)
    page = write_review(spec, args.output, args.renderer, coverage, results, change=None if ran is None else ran.change_run())
    _say_read(args, spec)
    if ran is not None:
        print("\n".join(ran.lines()))
    failed = [result for result in results if not result.ok]
    for result in failed:
        print(f"FAIL  {result.name}  {result.summary}")
        for witness in result.witness:
            print(f"      witness: {witness}")
    print(f"wrote {page} and {page.with_name('review.html')}")
    if failed:
        print(f"{len(results) - len(failed)} of {len(results)} properties hold; the page marks the failing ones FAIL")
    return EXIT_FAILED if failed or (ran is not None and ran.broken) else EXIT_OK


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the seed must be a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"the seed must not be negative, not {value}")
    return value


def _tasks(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"tasks must be a whole number, not {text!r}") from None
    if not 1 <= value <= SIM_TASKS_MAX:
        raise argparse.ArgumentTypeError(f"tasks must be from 1 to {SIM_TASKS_MAX:,}, not {value:,}")
    return value


def _faults(text: str) -> tuple[int, ...]:
    """`--faults 0,3,7`: indices into the seed's fault schedule; `none` keeps no fault at all."""
    if text.strip() == "none":
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and part.isascii() for part in parts):
        raise argparse.ArgumentTypeError(f"faults must be comma-separated non-negative whole numbers (or none), not {text!r}")
    return tuple(sorted({int(part) for part in parts}))


class _Progress:
    """One line on a terminal's stderr, redrawn in place: simulated time and tasks retired."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.drawn_at = -PROGRESS_INTERVAL_S
        self.width = 0

    def __call__(self, sim_time_s: float, tasks_retired: int, tasks: int) -> None:
        now = time.monotonic()
        if now - self.drawn_at < PROGRESS_INTERVAL_S:
            return
        self.drawn_at = now
        self.show(f"simulated {_clock(sim_time_s)}  tasks retired {tasks_retired:,} of {tasks:,}")

    def show(self, text: str) -> None:
        self.stream.write(f"\r{text:<{self.width}}")
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            self.stream.write(f"\r{'':<{self.width}}\r")
            self.stream.flush()
            self.width = 0


def _clock(sim_time_s: float) -> str:
    """Simulated seconds as H:MM:SS."""
    hours, rest = divmod(int(sim_time_s), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


@contextmanager
def _cleared(progress: _Progress | None) -> Iterator[None]:
    """The progress line is wiped when the work it shows ends, however it ends, so the report starts on a clean line."""
    try:
        yield
    finally:
        if progress is not None:
            progress.clear()


def _sim_run(args: argparse.Namespace) -> int:
    # Imported here, as in `_timeline`: the parser is built for every command, and none of them but this needs the simulator.
    from shiftchange.core import InputError
    from shiftchange.lab.report import render, render_minimal
    from shiftchange.lab.run import Outputs, play_run, shrink_run
    from shiftchange.lab.settings import to_toml
    from shiftchange.sim.world import Interrupted

    config, scenario, pattern = _sim_config(args)
    table = sim_table(args.spec)
    if args.dump_config:
        print(to_toml(config if pattern is None else pattern.configure(config), comments=True), end="")
        return EXIT_OK
    if args.list_faults:
        return _sim_list_faults(args, config, pattern)
    outputs = Outputs(args.series, args.plot, args.artifacts, args.report, args.coverage)
    progress = _Progress(sys.stderr) if sys.stderr.isatty() and not args.json else None
    began = time.perf_counter()
    try:
        outputs.check(table)
        say_notes()
        with _cleared(progress):
            played = play_run(
                config, args.seed, scenario, pattern, faults_kept=args.faults, table=table, outputs=outputs, progress=progress
            )
    except Interrupted as interrupted:
        return _sim_interrupted(args, interrupted, time.perf_counter() - began, table)
    except InputError as error:
        raise BadInput(str(error)) from error
    outcome, record = played.outcome, played.record
    if not args.json:
        print(render(record), end="", flush=True)
        if played.covered is not None:
            print(played.covered)
        if args.report is not None:
            print(f"report: {args.report}")
    shrinking = not outcome.ok and not args.no_shrink
    minimal = None
    if shrinking:
        with _cleared(progress):
            minimal = shrink_run(outcome, config, pattern, progress, table)
    if args.json:
        report = record.to_json()
        if minimal is not None:
            report["minimal"] = minimal
        print(json.dumps(report, indent=2))
    elif minimal is not None:
        print()
        print(render_minimal(minimal), end="")
    elif shrinking:
        print("\nnot shrunk: no invariant was violated, some could not be judged (unknown), and the shrinker chases violations")
    return EXIT_OK if outcome.ok else EXIT_FAILED


def _sim_interrupted(args: argparse.Namespace, interrupted: Any, elapsed_s: float, table: Any = None) -> int:
    """Ctrl-C mid-run: one line on stderr, then the report of what was played, judged as far as it went."""
    from shiftchange.lab.report import render, to_record

    world, now = interrupted.world, interrupted.world.env.now
    faults = world.kept(interrupted.faults_kept)
    struck = sum(1 for fault in faults if fault.at <= now)
    where = (
        f"simulated {_clock(now)} with {world.metrics.tasks_retired:,} of {world.config.workload.tasks:,} tasks retired"
        f" and {struck:,} of {len(faults):,} faults struck"
    )
    try:
        partial = interrupted.partial()
    except Exception as error:  # the interrupt may strike mid-step, where a record is half written: then only the counts are sure
        print(f"shiftchange: interrupted at {where}; no partial report ({type(error).__name__}: {error})", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"shiftchange: interrupted at {where}; the partial report follows (invariants judged on the history so far)", file=sys.stderr)
    if args.json:
        report = to_record(partial, elapsed_s, table).to_json()
        report["interrupted"] = {"sim_time_s": now, "tasks_retired": world.metrics.tasks_retired, "faults_struck": struck}
        print(json.dumps(report, indent=2))
    else:
        print(render(to_record(partial, elapsed_s, table)), end="")
    return EXIT_INTERRUPTED


def _sim_config(args: argparse.Namespace) -> tuple[Any, str, Any]:
    """The config the arguments name, with its scenario and anti-pattern: the scenario's, `--config` over it, each `--set`, `--tasks`."""
    from shiftchange.antipatterns import antipattern
    from shiftchange.core import InputError
    from shiftchange.lab import settings
    from shiftchange.sim.config import FaultSpec
    from shiftchange.sim.scenarios import scenario_config

    try:
        pattern = antipattern(args.antipattern) if args.antipattern is not None else None
        scenario = args.scenario or (pattern.scenario if pattern is not None else SIM_SCENARIO_DEFAULT)
        config = scenario_config(scenario, args.seed)
        if args.config is not None:
            config = settings.load(args.config, base=config)
        assignments = [settings.parse_assignment(text) for text in args.set]
        config = settings.apply(config, assignments)
        if args.fault:
            placed = tuple(FaultSpec.parse(text) for text in args.fault)
            config = settings.apply(config, {settings.PLACED_PATH: config.nemesis.placed + placed})
        config = config if args.tasks is None else config.with_tasks(args.tasks)
        if pattern is not None:
            named = {path for path, _ in assignments} | (set(settings.read_overrides(args.config)) if args.config else set())
            overridden = sorted(set(settings.diff(config, pattern.configure(config))) & named)
            if overridden:
                raise InputError(f"the anti-pattern {pattern.name} sets {overridden[0]} itself; --set and --config cannot change it")
        return config, scenario, pattern
    except InputError as error:
        raise BadInput(str(error)) from error


def _sim_list_faults(args: argparse.Namespace, config: Any, pattern: Any) -> int:
    """Print the run's fault schedule (drawn from the seed and placed by the config) with the indices `--faults` keeps."""
    from shiftchange.core import InputError
    from shiftchange.sim.world import World

    try:
        schedule = World(config, args.seed, pattern).schedule
    except InputError as error:
        raise BadInput(str(error)) from error
    placed = sum(fault.placed for fault in schedule)
    noun = "fault" if len(schedule) == 1 else "faults"
    print(f"{len(schedule)} {noun}: {len(schedule) - placed} drawn from seed {args.seed}, {placed} placed by the config")
    for index, fault in enumerate(schedule):
        parameters = " ".join(f"{name}={','.join(v) if isinstance(v, tuple) else v}" for name, v in fault.parameters)
        origin = "placed" if fault.placed else "drawn"
        print(f"  {index:>4}  t={fault.at:>9.2f} to {fault.until:>9.2f}  {origin:<6}  {fault.kind} {fault.target} {parameters}".rstrip())
    return EXIT_OK


def _sim_scenarios(args: argparse.Namespace) -> int:
    from shiftchange.sim.scenarios import SCENARIOS

    if args.show is not None:
        return _sim_scenario_show(args.show, args.seed)
    width = max(len(name) for name in SCENARIOS)
    for scenario in SCENARIOS.values():
        print(f"{scenario.name:<{width}}  {scenario.summary}")
    return EXIT_OK


def _sim_scenario_show(name: str, seed: int) -> int:
    """What one scenario changes from the defaults, one `path = value` line each (the value as `--set` takes it)."""
    from shiftchange.core import InputError
    from shiftchange.lab.settings import diff, format_value
    from shiftchange.sim.config import SimConfig
    from shiftchange.sim.scenarios import scenario_config

    try:
        changes = diff(SimConfig(), scenario_config(name, seed))
    except InputError as error:
        raise BadInput(str(error)) from error
    for path, value in changes.items():
        print(f"{path} = {format_value(value)}")
    if not changes:
        print(f"# {name} changes nothing: it runs the defaults")
    return EXIT_OK


def _sim_antipatterns(_args: argparse.Namespace) -> int:
    from shiftchange.antipatterns import ANTIPATTERNS

    rows = [("anti-pattern", "scenario", "expected invariant", "failure mode")]
    rows += [(pattern.name, pattern.scenario, pattern.invariant, pattern.failure_mode) for pattern in ANTIPATTERNS.values()]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for name, scenario, invariant, failure_mode in rows:
        print(f"{name:<{widths[0]}}  {scenario:<{widths[1]}}  {invariant:<{widths[2]}}  {failure_mode}")
    return EXIT_OK


SPEC_HELP = "a spec directory (default: ./spec when it holds the spec files, as in a checkout; else the packaged spec)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Durable agent execution: the spec, its reference core, and its simulator.")
    # Not argparse's version action, which prints and exits as soon as it is read: `--version --nosuch` would exit 0.
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    # Not required here (`--version` alone names none): `main` asks for a command when there is none.
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    spec = commands.add_parser("spec", help="check, draw and review the transition tables")
    spec_commands = spec.add_subparsers(dest="spec_command", required=True, parser_class=_Parser)

    check = spec_commands.add_parser("check", help="validate the spec and check its structural properties")
    check.add_argument("--spec", metavar="DIR", help=SPEC_HELP)
    check.add_argument("--json", action="store_true", help="one JSON object: the files read, every property with its witness, ok")
    check.set_defaults(handler=_spec_check)

    diagram = spec_commands.add_parser("diagram", help="draw one machine")
    diagram.add_argument("--spec", metavar="DIR", help=SPEC_HELP)
    diagram.add_argument("--machine", choices=("attempt", "task"), required=True)
    diagram.add_argument(
        "--format", choices=FORMATS, help="default: the one -o's suffix names (.mmd .dot .svg .png); a suffix naming another is refused"
    )
    diagram.add_argument("-o", "--output", metavar="FILE", required=True)
    diagram.add_argument(
        "--renderer", choices=RENDERERS, default="auto", help="for svg and png: graphviz when `dot` exists, else matplotlib"
    )
    diagram.set_defaults(handler=_spec_diagram)

    review = spec_commands.add_parser("review", help="write the design-review page with diagrams")
    review.add_argument("--spec", metavar="DIR", help=SPEC_HELP)
    review.add_argument("-o", "--output", metavar="DIR", required=True)
    review.add_argument("--renderer", choices=RENDERERS, default="auto")
    review.add_argument(
        "--coverage", metavar="FILE.json", help="a coverage file (`sim run --coverage`): the transition tables gain a fired column"
    )
    review.add_argument(
        "--run", action="store_true", help='also put the spec and its base on trial, as `spec diff --run`: "What this change does"'
    )
    review.add_argument(
        "--base", metavar="DIR|REV", help="with --run: the spec the change is judged against (default: HEAD, else the packaged spec)"
    )
    add_run_arguments(review)
    review.set_defaults(handler=_spec_review)
    add_spec_diff_parser(spec_commands)
    add_spec_mutate_parser(spec_commands)

    add_operator_parsers(commands)

    sim = commands.add_parser("sim", help="run the simulator against the reference core, under faults")
    sim_commands = sim.add_subparsers(dest="sim_command", required=True, parser_class=_Parser)
    run = sim_commands.add_parser("run", help="play one seeded run and judge every invariant")
    run.add_argument(
        "--scenario", metavar="NAME", help=f"see `sim scenarios` (default: {SIM_SCENARIO_DEFAULT}, or the anti-pattern's own scenario)"
    )
    run.add_argument("--seed", type=_seed, default=SIM_SEED_DEFAULT, help=f"default {SIM_SEED_DEFAULT}")
    run.add_argument(
        "--tasks", type=_tasks, help=f"1 to {SIM_TASKS_MAX:,}; wins over --config and --set (default: the config's workload.tasks)"
    )
    run.add_argument("--antipattern", metavar="NAME", help="break the core in one named way (see `sim antipatterns`)")
    run.add_argument("--spec", metavar="DIR|REV", help=SIM_SPEC_HELP)
    run.add_argument(
        "--faults", metavar="I,J,...", type=_faults, help="keep only these indices of the seed's fault schedule (`none`: no fault)"
    )
    run.add_argument("--config", metavar="FILE", help="a TOML file of settings, applied over the scenario's (see --dump-config)")
    run.add_argument(
        "--set",
        metavar="PATH=VALUE",
        action="append",
        default=[],
        help="one setting by its dotted path, after --config (e.g. core.lease_ttl_s=90); repeatable, applied in order",
    )
    run.add_argument(
        "--fault",
        metavar="TEXT",
        action="append",
        default=[],
        help='a fault at a chosen time, "KIND TARGET at=SECONDS for=SECONDS [key=value ...]" (e.g. "outage model_provider at=600 '
        "for=120 mode=hang\"); repeatable, played beside the seed's schedule",
    )
    run.add_argument("--list-faults", action="store_true", help="print the fault schedule with its indices, and exit without running")
    run.add_argument("--dump-config", action="store_true", help="print the run's whole config as TOML, and exit without running")
    run.add_argument("--series", metavar="FILE.csv", help="write the time series, one row per window of series.window_s")
    run.add_argument("--plot", metavar="FILE.png", help="draw the series' main panels (throughput, providers, queue, leases)")
    run.add_argument(
        "--artifacts", metavar="DIR", help="write report.json, config.toml, series.csv, series.png, history.jsonl and report.html here"
    )
    run.add_argument(
        "--report",
        metavar="FILE.html",
        help="write one self-contained HTML page: verdicts with evidence, metrics, series with faults shaded, schedule, task timelines",
    )
    run.add_argument("--coverage", metavar="FILE.json", help="write the run's transition coverage: accepted events per row")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    run.add_argument("--no-shrink", action="store_true", help="on a failure, do not search for the shortest counterexample")
    run.set_defaults(handler=_sim_run)
    scenarios = sim_commands.add_parser("scenarios", help="list the scenarios, or show what one changes")
    scenarios.add_argument("--show", metavar="NAME", help="print each setting this scenario changes from the defaults, as path = value")
    scenarios.add_argument("--seed", type=_seed, default=SIM_SEED_DEFAULT, help=f"the seed swarm draws from (default {SIM_SEED_DEFAULT})")
    scenarios.set_defaults(handler=_sim_scenarios)
    antipatterns = sim_commands.add_parser("antipatterns", help="list the anti-patterns, where they show and what must catch them")
    antipatterns.set_defaults(handler=_sim_antipatterns)
    add_sweep_parser(sim_commands)
    add_phase_parser(sim_commands)
    add_tune_parser(sim_commands)
    add_explore_parser(commands)
    from .check_store import add_parser as add_check_store_parser

    add_check_store_parser(commands)
    from .runtime import add_parsers as add_runtime_parsers

    add_runtime_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    drop_notes()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.version:
            print(f"{PROG} {__version__}")
            return EXIT_OK
        if args.command is None:
            parser.error("the following arguments are required: command")
        status = args.handler(args)
        if status in (EXIT_BAD_INPUT, EXIT_INTERRUPTED):
            drop_notes()  # a refusal or an interrupt before the work began: its one line is all
        say_notes()
        return status
    except (UsageError, BadInput, SpecError, DiagramError) as error:
        drop_notes()  # what was read is not said: the refusal is the one line
        print(f"{PROG}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        drop_notes()
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


EXIT_BROKEN_PIPE = 141
"""What a shell reports for a process its pipe's reader stopped reading (128 + SIGPIPE), as `head` does to `yes`."""


def run() -> None:
    """The console script's entry point; a reader that stops early (`| head`) ends the command quietly, not in a traceback."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit, into the same closed pipe: point it at nothing first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = EXIT_BROKEN_PIPE
    sys.exit(status)
