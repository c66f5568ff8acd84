"""A search as the one record of a run (`checkers.run.Run`): its verdicts, what was searched and how far, its
counterexample and coverage. The text and the page are the lab's one renderer each, over this record."""

from __future__ import annotations

from typing import Any

from shiftchange.checkers.history import OK, UNKNOWN, VIOLATED, Verdict
from shiftchange.checkers.rules import INVARIANTS
from shiftchange.checkers.run import Run

from .config import ExploreConfig
from .flags import replay_command, steps_flags
from .search import BFS, Exploration

MACHINES = ("attempt", "task")


def _spec_json(result: Exploration) -> dict[str, Any]:
    spec, played = result.spec, result.table
    table = played if played is not None else spec
    return {"label": spec.label, "digest": spec.digest, "ran": {"label": table.label, "digest": table.digest}}


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
    "cut",
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
    search |= {"time": config.time, "elapsed_s": round(result.elapsed_s, 3), "states_per_s": round(result.states_per_s, 1)}
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
        "replays_on_concrete_clock": example.replays,
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
