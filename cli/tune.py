"""`shiftchange sim tune`: a question about the core's settings answered from the simulator, with the runs behind it.

Each question is a subcommand of `tune` (`add_parser` builds the group; each
question adds itself to it with a function of its own, as `_add_lease` does),
so another question sits beside `lease` without touching the rest.

`tune lease` is a thin front on `shiftchange.lab.tune.tune_lease`: it prints
the answer first, in one line, then the runs behind it (per TTL: leases, false
expiries, the rate per 1,000 leases with its exact interval, crash detection),
the replay command of every run, and whether each target holds. Exit status
follows `shiftchange`'s contract: 0 when the simulation confirms the answer,
1 when it does not (a bound the runs cannot reach, a target missed, an
invariant violated), 2 on bad input as one line on stderr. Nothing from
`shiftchange.sim` is imported until the command runs (see cli/sweep.py for why).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .sweep import _assignment, _axis, _seeds, _spec_help, _whole, check_settings

__all__ = ["add_parser", "run_calls", "run_lease"]


def add_parser(sim_commands: Any) -> argparse.ArgumentParser:
    """Add `tune` to the `shiftchange sim` subcommands, with one subcommand per question; each handler returns the exit status."""
    tune = sim_commands.add_parser("tune", help="answer a tuning question from simulation, with the runs behind the answer")
    questions = tune.add_subparsers(dest="tune_command", required=True, parser_class=type(tune))
    _add_lease(questions)
    _add_calls(questions)
    return tune


def _add_lease(questions: Any) -> argparse.ArgumentParser:
    lease = questions.add_parser(
        "lease",
        help="the lease TTL and heartbeat for a false-expiry target (and a crash-detection bound), confirmed in simulation",
        description="Choose the lease TTL and heartbeat from the tool calls, the renewal loss and a target, by the closed-form rule,"
        " and confirm them in seeded runs of the baseline scenario with exact binomial intervals.",
    )
    lease.add_argument(
        "--tool-call-s", metavar="S", type=_real, required=True, help="mean tool-call duration (the simulator plays it exponential)"
    )
    lease.add_argument("--tool-calls", metavar="N", type=_whole, help="tool calls per Attempt (default: the baseline's)")
    lease.add_argument("--renewal-loss", metavar="P", type=_real, required=True, help="probability a renewal is lost")
    lease.add_argument(
        "--target-per-1000", metavar="R", type=_real, required=True, help="false expiries per 1,000 leases, at most, at --confidence"
    )
    lease.add_argument("--confidence", metavar="C", type=_real, default=0.95, help="of the exact interval (default %(default)s)")
    lease.add_argument("--detect-max-s", metavar="S", type=_real, help="a crash must be detected within this long (worst case)")
    lease.add_argument("--heartbeat-s", metavar="S", type=_real, help="fix the heartbeat interval (default: chosen, see the answer's rule)")
    lease.add_argument(
        "--seeds", metavar="A-B|I,J,...", type=_seeds, help="seeds for every TTL checked (default: as many as the closed form plans)"
    )
    lease.add_argument("--tasks", metavar="N", type=_whole, help="tasks per run (default 300)")
    lease.add_argument("--jobs", metavar="N", type=_whole, help="local processes, or Dask workers (default: one per CPU)")
    lease.add_argument("--executor", metavar="NAME", default="processes", help="processes (default) or dask (a local cluster)")
    lease.add_argument("--spec", metavar="DIR|REV", help=_spec_help("every run, the holds' and the checks', plays it"))
    lease.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    lease.set_defaults(handler=run_lease)
    return lease


def _add_calls(questions: Any) -> argparse.ArgumentParser:
    calls = questions.add_parser(
        "calls",
        help="the breaker, concurrency-limit and retry settings that bring a world back from its triggers within a bound",
        description="Play each candidate setting as a discipline of a recoverability map over the triggers and durations given"
        " (a control and a triggered run per cell and seed), and answer with the one that recovers everywhere its control holds"
        " up, fastest, at the least spend.",
    )
    calls.add_argument("--scenario", metavar="NAME", default="retry-storm", help="the world (default %(default)s)")
    calls.add_argument(
        "--set",
        metavar="PATH=VALUE",
        dest="assignments",
        action="append",
        type=_assignment,
        default=[],
        help="a world setting",
    )
    calls.add_argument("--trigger", metavar="TEXT", action="append", default=[], help="a placed provider fault (repeatable; default:"
                       " a hang outage and a slowdown of the model provider)")  # fmt: skip
    calls.add_argument("--durations-s", metavar="S1,S2,...", help="how long each trigger lasts (default 15,60,120)")
    calls.add_argument("--recovery-max-s", metavar="S", type=_real, default=480.0, help="recovered within this long (default %(default)g)")
    calls.add_argument(
        "--candidate",
        metavar="PATH=V1,V2,...",
        action="append",
        type=_axis,
        default=[],
        help="a setting to try and its values (the product; default: breaker cool-down 10,30,60 x concurrency decrease_factor 0.5,0.9)",
    )
    calls.add_argument("--seeds", metavar="A-B|I,J,...", type=_seeds, default=[0, 1], help="seeds per cell (default 0-1)")
    calls.add_argument("--arrivals-s", metavar="S", type=_real, default=2400.0, help="seconds of arrivals per run (default %(default)g)")
    calls.add_argument("--jobs", metavar="N", type=_whole, help="local processes, or Dask workers (default: one per CPU)")
    calls.add_argument("--executor", metavar="NAME", default="processes", help="processes (default) or dask (a local cluster)")
    calls.add_argument("--spec", metavar="DIR|REV", help=_spec_help("every run of the map plays it"))
    calls.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    calls.set_defaults(handler=run_calls)
    return calls


def run_calls(args: argparse.Namespace) -> int:
    """Answer the calls question: print the answer, every candidate, the map's command and the slowest cell's replays."""
    import dataclasses
    import sys

    from shiftchange.cli.common import EXIT_FAILED, EXIT_OK, BadInput, sim_table
    from shiftchange.core import InputError
    from shiftchange.lab.tune_calls import DURATIONS_DEFAULT_S, TRIGGERS_DEFAULT, tune_calls

    try:
        durations = DURATIONS_DEFAULT_S if args.durations_s is None else _durations(args.durations_s)
        seed = args.seeds[0] if args.seeds else 0
        check_settings("--set", args.scenario, seed, args.assignments)
        candidates = [(path, value) for path, values in args.candidate for value in values]
        check_settings("--candidate", args.scenario, seed, candidates, fixed=args.assignments)
        table = sim_table(args.spec)
        result = tune_calls(
            args.scenario,
            args.assignments,
            args.trigger or TRIGGERS_DEFAULT,
            durations,
            args.recovery_max_s,
            dict(args.candidate) or None,
            args.seeds,
            arrivals_s=args.arrivals_s,
            jobs=args.jobs,
            executor=args.executor,
            progress=sys.stderr.isatty(),
            spec=table,
        )
    except InputError as error:
        raise BadInput(str(error)) from error
    if args.json:
        print(
            json.dumps(
                {
                    "answer": None if result.answer is None else dataclasses.asdict(result.answer),
                    "candidates": [dataclasses.asdict(candidate) for candidate in result.candidates],
                    "recovery_max_s": result.recovery_max_s,
                    "command": result.command,
                    "replays": list(result.replays),
                },
                indent=2,
            )
        )
    else:
        print(render_calls(result), end="")
    return EXIT_OK if result.answer is not None else EXIT_FAILED


def _durations(text: str) -> list[float]:
    from shiftchange.core import InputError

    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"--durations-s takes seconds split at commas, not {text!r}") from None


def render_calls(result: Any) -> str:
    """The answer line, a line per candidate, the command that plays the answer's map, and its slowest cell's replays."""
    answer = result.answer
    if answer is None:
        lines = [f"no candidate recovers everywhere within {result.recovery_max_s:g} s; see each one's reason below"]
    else:
        settings = ", ".join(f"{path}={value:g}" if isinstance(value, float) else f"{path}={value}" for path, value in answer.settings)
        lines = [
            f"{settings}: recovers in all {answer.cells_recovered} cells whose control holds up, slowest after"
            f" {'-' if answer.recovery_s_max is None else format(answer.recovery_s_max, 'g')} s (bound {result.recovery_max_s:g} s),"
            f" ${answer.spend_usd_mean:.2f} per triggered run"
        ]
    lines += ["", f"{'candidate':<40} {'recovered':>10} {'slowest s':>10} {'spend $':>8} {'escalated':>10} {'false exp':>9}  verdict"]
    for candidate in result.candidates:
        slowest = "-" if candidate.recovery_s_max is None else f"{candidate.recovery_s_max:g}"
        verdict = "meets" if candidate.meets else candidate.why
        chosen = " <- the answer" if answer is not None and candidate.name == answer.name else ""
        recovered = f"{candidate.cells_recovered:>4}/{candidate.cells_stable:<5}"
        lines.append(
            f"{candidate.name:<40} {recovered} {slowest:>10} {candidate.spend_usd_mean:>8.2f}"
            f" {candidate.escalated_mean:>10.1f} {candidate.false_expiries:>9}  {verdict}{chosen}"
        )
    lines += ["", "the answer's map again:", f"  {result.command}"]
    if result.replays:
        lines += ["its slowest cell:", f"  control:   {result.replays[0]}", f"  triggered: {result.replays[1]}"]
    return "\n".join(lines) + "\n"


def _real(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None


# ------------------------------------------------------------------ the command


def run_lease(args: argparse.Namespace) -> int:
    """Answer the lease question the arguments ask, print the answer and its evidence; 0 when the runs confirm it."""
    import sys

    from shiftchange.cli.common import EXIT_FAILED, EXIT_OK, BadInput, sim_table
    from shiftchange.core import InputError
    from shiftchange.lab.tune import TASKS_DEFAULT, tune_lease

    try:
        table = sim_table(args.spec)
        result = tune_lease(
            args.tool_call_s,
            args.renewal_loss,
            args.target_per_1000,
            confidence=args.confidence,
            detect_max_s=args.detect_max_s,
            heartbeat_s=args.heartbeat_s,
            tool_calls=args.tool_calls,
            seeds=args.seeds,
            tasks=TASKS_DEFAULT if args.tasks is None else args.tasks,
            jobs=args.jobs,
            executor=args.executor,
            progress=sys.stderr.isatty(),
            spec=table,
        )
    except InputError as error:
        raise BadInput(str(error)) from error
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render(result), end="")
    return EXIT_OK if result.confirmed else EXIT_FAILED


def render(result: Any) -> str:
    """The report: the answer, the runs behind it, their replay commands, then each target's verdict and the notes."""
    confidence = f"{100 * result.confidence:g}%"
    lines = [result.answer, ""]
    lines += _table(result, confidence)
    lines += [
        "",
        f"holds: {result.holds_measured:,} leases in {len(result.hold_replays)} lossless runs, mean {result.hold_s_mean:.1f} s,"
        f" longest {result.hold_s_max:.1f} s ({result.tool_calls} tool calls of {result.tool_call_s:g} s mean,"
        f" arrivals {result.arrival_rate_per_s:g}/s)",
        "",
        "replay:",
        "  the lossless runs the holds come from:",
        *(f"    {command}" for command in result.hold_replays),
    ]
    for check in result.checks:
        lines.append(f"  TTL {check.lease_ttl_s:g} s:")
        lines += [f"    {command}" for command in check.replays]
    lines += ["", "targets:", *_verdicts(result, confidence)]
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def _table(result: Any, confidence: str) -> list[str]:
    head = [
        "TTL",
        "k",
        "runs",
        "leases",
        "false expiries",
        f"per 1,000 leases [{confidence}]",
        "closed form",
        "crashes",
        "detect mean",
        "detect max",
        "worst case",
    ]
    body = [
        [
            f"{check.lease_ttl_s:g} s",
            str(check.renewals_per_window),
            f"{check.runs:,}",
            f"{check.leases:,}",
            f"{check.false_expiries:,}",
            f"{check.false_expiries_per_1000_leases:.3g} [{check.interval_low_per_1000_leases:.3g},"
            f" {check.interval_high_per_1000_leases:.3g}]",
            f"{check.closed_form_per_1000_leases:.3g}",
            f"{check.crashes_detected:,}",
            "-" if check.detect_s_mean is None else f"{check.detect_s_mean:.1f} s",
            "-" if check.detect_s_max is None else f"{check.detect_s_max:.1f} s",
            f"{check.detect_bound_s:g} s",
        ]
        for check in result.checks
    ]
    widths = [max(len(cell) for cell in column) for column in zip(head, *body, strict=True)]
    return ["  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)).rstrip() for cells in [head, *body]]


def _verdicts(result: Any, confidence: str) -> list[str]:
    best = result.checks[0]
    lines = [
        f"  false expiries at TTL {best.lease_ttl_s:g} s: at most {best.interval_high_per_1000_leases:.3g} per 1,000 leases"
        f" ({confidence} interval), target {result.target_per_1000_leases:g}: {_met(result.false_expiry_target_met)}"
    ]
    if result.detect_max_s is None:
        lines.append(f"  crash detection: no bound given (worst case {result.detect_bound_s:g} s)")
    else:
        measured = "none measured" if best.detect_s_max is None else f"at most {best.detect_s_max:.1f} s measured"
        lines.append(
            f"  crash detection: {measured}, worst case {result.detect_bound_s:g} s, bound {result.detect_max_s:g} s:"
            f" {_met(result.detect_target_met)}"
        )
    failed = [command for check in result.checks for command in check.failed_replays]
    lines.append(
        "  invariants: every run held every invariant"
        if result.invariants_held
        else f"  invariants: {len(failed) or 'a hold run'} run(s) violated an invariant or could not judge one (replay above)"
    )
    lines.append("confirmed" if result.confirmed else "NOT confirmed by the runs")
    return lines


def _met(met: bool | None) -> str:
    return "met" if met else "NOT met"
