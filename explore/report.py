"""A search's report: the honest summary, the invariant table as `sim run` prints it, the coverage, and the JSON object."""

from __future__ import annotations

from typing import Any

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED, Verdict, invariant_rows
from shiftchange.checkers.rules import INVARIANTS
from shiftchange.checkers.run import Run

from .config import ExploreConfig
from .flags import replay_command, steps_flags
from .search import BFS, Exploration

MACHINES = ("attempt", "task")


def summary_lines(result: Exploration) -> list[str]:
    """The honest summary: what was searched, how far, how fast, and whether it completed."""
    how = "breadth-first" if result.strategy == BFS else f"depth-first to depth {result.depth_bound}"
    reduction = "workers interchangeable" if result.symmetry else "no symmetry reduction"
    processes = f" over {result.processes} processes" if result.processes > 1 else ""
    processes += ", partial-order reduction" if result.por else ""
    lines = [
        f"explore {steps_flags(result.config)}",
        _spec_line(result),
        f"  {how}{processes}, {reduction}"
        + (f", depth bound {result.depth_bound}" if result.depth_bound is not None and result.strategy == BFS else "")
        + (f", state bound {result.states_bound:,}" if result.states_bound is not None else "")
        + (f", time limit {result.time_bound_s:g} s" if result.time_bound_s is not None else ""),
        f"  {result.states:,} distinct states, {result.explored:,} explored, {result.transitions:,} transitions,"
        f" maximum depth {result.depth}, {result.quiescent:,} quiescent"
        + (f", {result.pruned:,} steps skipped (their other order was taken)" if result.por else ""),
        "  the work can finish: "
        + ("yes, some run ends with every task done" if result.finishes else "no run found that ends with every task done"),
        f"  {result.elapsed_s:.1f} s, {result.states_per_s:,.0f} distinct states per second"
        + (f", {result.spilled:,} states waited on disk" if result.spilled else ""),
        f"  states kept as {result.fingerprint_bits}-bit fingerprints: the chance two of them collided is at most"
        f" {result.collision_probability:.1e}",
    ]
    return [*lines, _ending(result)]


def _spec_line(result: Exploration) -> str:
    """Which transition table the core ran: the spec's label and digest, and the anti-pattern's edit of it, if any."""
    spec, played = result.spec, result.table
    line = f"  spec: {spec.label} (digest {spec.digest})"
    if played is not None and played is not spec:
        line += f", run with the {result.config.antipattern} edit (digest {played.digest})"
    return line


def _spec_json(result: Exploration) -> dict[str, Any]:
    spec, played = result.spec, result.table
    table = played if played is not None else spec
    return {"label": spec.label, "digest": spec.digest, "ran": {"label": table.label, "digest": table.digest}}


def _ending(result: Exploration) -> str:
    if result.stopped_by is None:
        return "  the search completed: every reachable state was visited"
    if result.stopped_by == "violation":
        return "  the search stopped at the first violation"
    if result.stopped_by == "depth":
        return f"  INCOMPLETE: the depth bound left {result.cut:,} states unexpanded"
    if result.stopped_by == "states":
        return f"  INCOMPLETE: the state bound of {result.states_bound:,} was reached"
    if result.stopped_by == "time":
        return f"  INCOMPLETE: the time limit of {result.time_bound_s:g} s was reached"
    return "  INCOMPLETE: interrupted"


def verdicts(result: Exploration) -> dict[str, Verdict]:
    """Each invariant's verdict over the search: held in every reachable state, violated, or unknown (not searched to the end)."""
    example = result.counterexample
    judged = {}
    for name in INVARIANTS:
        if example is not None and name == example.invariant:
            judged[name] = Verdict(name, example.status, int(example.status == VIOLATED), example.example)
        elif result.complete:
            judged[name] = Verdict(name, OK, 0, ())
        else:
            judged[name] = Verdict(name, UNKNOWN, 0, (f"held in the {result.states:,} states visited; {_why_unknown(result)}",))
    return judged


def _why_unknown(result: Exploration) -> str:
    if result.counterexample is not None:
        return "the search stopped at a violation"
    if result.stopped_by == "interrupted":
        return "the search was interrupted"
    return f"the search stopped at its {result.stopped_by} bound"


def verdict_lines(result: Exploration) -> list[str]:
    """The invariant table, as `sim run` prints it; then, for a violation, its timeline and replay command."""
    judged = verdicts(result)
    unknown = [v for v in judged.values() if v.status == UNKNOWN]
    lines = invariant_rows({name: v if v.status != UNKNOWN else Verdict(name, UNKNOWN, 0, ()) for name, v in judged.items()})
    if unknown:
        lines.append(f"  ({len(unknown)} could not tell: {unknown[0].example[0]})")
    example = result.counterexample
    if example is None:
        if result.complete:
            return [*lines, "no invariant is violated in any reachable state"]
        return [*lines, "no invariant is violated in any state visited (the search did not complete, so this is not a proof)"]
    shortest = " (a shortest path)" if result.strategy == BFS else ""
    lines += ["", f"{example.invariant} is violated after {len(example.steps)} steps{shortest}"]
    lines += ["", "timeline:", *list(example.timeline)]
    lines += ["", "replay:", f"  {replay_command(result.config, example.steps)}"]
    return lines


def coverage_lines(result: Exploration) -> list[str]:
    coverage = result.coverage()
    lines = []
    for machine in MACHINES:
        rows = len(coverage.identity[machine])
        lines.append(f"{machine} rows fired: {coverage.rows_fired(machine)} of {rows}")
        lines += [f"  never reached: {row}" for row in coverage.never_fired(machine)]
    return lines


SEARCH_FIELDS = (
    "strategy",
    "symmetry",
    "depth_bound",
    "states_bound",
    "time_bound_s",
    "processes",
    "por",
    "pruned",
    "states",
    "explored",
    "transitions",
    "depth",
    "quiescent",
    "finishes",
    "complete",
    "stopped_by",
    "spilled",
    "fingerprint_bits",
    "collision_probability",
)
"""What a search's record says of the search: how it went, how far, what it reduced, and whether it completed."""


def search_flags(result: Exploration) -> str:
    """The flags that give the search itself, beyond its configuration: strategy, bounds, processes, reduction."""
    parts = [" --dfs"] if result.strategy != BFS else []
    parts += [f" --depth {result.depth_bound}"] if result.depth_bound is not None else []
    parts += [f" --states {result.states_bound}"] if result.states_bound is not None else []
    parts += [f" --time-limit {result.time_bound_s:g}"] if result.time_bound_s is not None else []
    parts += [f" --processes {result.processes}"] if result.processes > 1 else []
    parts += [" --por"] if result.por else []
    parts += [" --no-symmetry"] if not result.symmetry else []
    return "".join(parts)


def to_record(result: Exploration) -> Run:
    """A search as the one record every driver's run is (`checkers.run.Run`): what was searched and how far is its
    `search`; its counterexample, if any, its `subject`; it delivers no fault at a time (its faults are bounds in its
    configuration), and it replays as the command that searches the same configuration (a counterexample's own replay
    plays its path)."""
    config = result.config
    search = {name: getattr(result, name) for name in SEARCH_FIELDS}
    search |= {"elapsed_s": round(result.elapsed_s, 3), "states_per_s": round(result.states_per_s, 1)}
    return Run(
        driver="explore",
        ok=result.ok,
        config={name: getattr(config, name) for name in ExploreConfig.__dataclass_fields__} | {"operations": list(config.operations)},
        spec=_spec_json(result),
        verdicts=verdicts(result),
        metrics={},
        replay=f"shiftchange explore {steps_flags(config)}{search_flags(result)}",
        tasks=config.tasks,
        antipattern=config.antipattern,
        search=search,
        coverage=_coverage_json(result),
        wall_s=result.elapsed_s,
        subject={"counterexample": _counterexample_json(result)},
    )


def as_json(result: Exploration) -> dict[str, Any]:
    """The `--json` report of a search: its record's one JSON shape (`checkers.run.Run.to_json`)."""
    return to_record(result).to_json()


def _counterexample_json(result: Exploration) -> dict[str, Any] | None:
    example = result.counterexample
    if example is None:
        return None
    return {
        "invariant": example.invariant,
        "example": list(example.example),
        "steps": list(example.steps),
        "timeline": list(example.timeline),
        "replay": replay_command(result.config, example.steps),
    }


def _coverage_json(result: Exploration) -> dict[str, Any]:
    coverage = result.coverage()
    return {
        machine: {
            "fired": coverage.rows_fired(machine),
            "rows": len(coverage.identity[machine]),
            "never_reached": [str(row) for row in coverage.never_fired(machine)],
        }
        for machine in MACHINES
    }
