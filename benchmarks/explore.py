"""Exhaustive exploration at useful sizes: distinct states on the abstract clock against the concrete one, states per
second per process, each reduction's factor, the speed-up with processes, peak memory, and the anti-patterns found at two
tasks, against the targets of issue 38.

    python benchmarks/explore.py [--baseline REV] [--repeat N] [--target-limit S] [--large-limit S] [--antipattern-limit S]

Each search runs in a fresh child process (so its peak memory is its own:
the child's and, over several processes, its forked workers').

- **The benchmark configuration** (`--workers 2 --tasks 1 --crashes 1
  --pauses 1 --lost-responses 1`), searched `--repeat` times (default 2) in
  one process on each clock, and with `--baseline REV` (the previous
  release) on that revision's code, alternately: distinct states, states
  per second, and the current code's per-state speed over the baseline's
  (the concrete clock's search is the same search as the baseline's).
- **Reduction factors**, on it: the abstract clock (concrete states over
  abstract ones), symmetry (states without over states with workers
  interchangeable) and partial-order reduction (sleep sets: steps taken
  without over with; the states are the same by construction).
- **The speed-up**, on `--workers 2 --tasks 2 --pauses 1` (about 22,000
  abstract states, a minute in one process), searched to completion once
  in one process and once in two.
- **The three configurations of the targets**, each on two processes with
  partial-order reduction, on the abstract clock and then on the concrete
  one, each stopped at its limit: `--target-limit` (default 60 s) for two
  workers, two tasks, a crash, a pause and a lost answer; `--large-limit`
  (default 600 s) for three workers and two tasks, and for two workers and
  three tasks, with a crash and a pause. A concrete search that did not
  complete prints the states it reached in the same time: at least that
  many states, against the abstract search's.
- **Every in-scope anti-pattern at two tasks**, on the abstract clock, one
  process, each stopped at `--antipattern-limit` (default 300 s): the
  invariant, the shortest path's length, and whether that path violates the
  same invariant when played again on the concrete clock.

Targets: the first configuration complete in at most 60 s on two processes
and under 1 GiB; three workers complete in at most 600 s; three tasks
complete (the time is printed); a speed-up of at least 1.6x; every
completed search clean; every anti-pattern found at two tasks by a path
that replays on the concrete clock. Exit status 0 when every target
passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from common import baseline_tree, child_env, describe_current, positive, resolve_revision, verdict

FAULTS = {"crashes": 1, "pauses": 1, "lost_responses": 1}
BENCHMARK = {"workers": 2, "tasks": 1, **FAULTS}
TARGET = {"workers": 2, "tasks": 2, **FAULTS}
THREE_WORKERS = {"workers": 3, "tasks": 2, "crashes": 1, "pauses": 1}
THREE_TASKS = {"workers": 2, "tasks": 3, "crashes": 1, "pauses": 1}
SCALING = {"workers": 2, "tasks": 2, "pauses": 1}
"""Where the speed-up is judged: a search of about a minute in one process, long enough that forking the processes and
the barrier at the end of each of its levels are a small part of it, as they are in any search worth spreading."""
SPEED_UP_MIN, TARGET_S_MAX, LARGE_S_MAX, MEMORY_MAX_MIB = 1.6, 60.0, 600.0, 1024
ABSTRACT, CONCRETE = {"time": "abstract"}, {"time": "concrete"}


def _child(spec: dict) -> None:
    """In the child process: one search, printed as one JSON line with this process's and its workers' peak memory."""
    import shiftchange.core
    from shiftchange.explore import ExploreConfig, explore

    config = spec["config"] | ({"operations": tuple(spec["config"]["operations"])} if "operations" in spec["config"] else {})
    result = explore(ExploreConfig(**config), **spec["options"])  # JSON carries the operations as a list
    example = result.counterexample
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    processes = spec["options"].get("processes", 1)
    print(
        json.dumps(
            {
                "states": result.states,
                "transitions": result.transitions,
                "pruned": result.pruned,
                "depth": result.depth,
                "quiescent": result.quiescent,
                "elapsed_s": result.elapsed_s,
                "complete": result.complete,
                "ok": result.ok,
                "stopped_by": result.stopped_by,
                "collision_probability": result.collision_probability,
                "memory_mib": own + (workers * processes if processes > 1 else 0),
                "invariant": None if example is None else example.invariant,
                "steps": None if example is None else len(example.steps),
                "replays": None if example is None else getattr(example, "replays", True),
                "origin": shiftchange.core.__file__,
            }
        )
    )


def _search(config: dict, path_entry: Path | None = None, **options: object) -> dict:
    spec = json.dumps({"config": config, "options": options})
    argv = [sys.executable, __file__, "--child", spec]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=child_env(path_entry))
    if done.returncode != 0:
        raise SystemExit(f"a search failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _flags(config: dict) -> str:
    return " ".join(f"--{name.replace('_', '-')} {value}" for name, value in config.items())


def _line(name: str, run: dict) -> str:
    ending = "complete" if run["complete"] else f"stopped by {run['stopped_by']}"
    found = f", {run['invariant']} violated" if run["invariant"] else (", clean" if run["complete"] else "")
    return (
        f"  {name:<30} {run['states']:>9,} states {run['transitions']:>10,} steps {run['elapsed_s']:>7.1f} s"
        f" {run['states'] / run['elapsed_s']:>6,.0f} states/s {run['memory_mib']:>6,.0f} MiB  {ending}{found}"
    )


def _per_process(run: dict, processes: int) -> float:
    return run["states"] / run["elapsed_s"] / processes


def _benchmark(repeat: int, baseline: str | None, checks: list[tuple[bool, str]]) -> tuple[dict, dict]:
    """The benchmark configuration on each clock (and the baseline's code), alternately; the median run of each."""
    print(f"benchmark configuration: shiftchange explore {_flags(BENCHMARK)}, one process")
    print(f"  current  = {describe_current()}")
    runs: dict[str, list[dict]] = {"abstract": [], "concrete": [], "baseline": []}

    def play(path_entry: Path | None) -> None:
        for _ in range(repeat):
            for name, clock in (("abstract", ABSTRACT), ("concrete", CONCRETE)):
                runs[name].append(_search(BENCHMARK | clock))
                print(_line(f"{name} clock", runs[name][-1]))
            if path_entry is not None:
                runs["baseline"].append(_search(BENCHMARK, path_entry))
                print(_line(f"{baseline} (concrete)", runs["baseline"][-1]))

    if baseline is None:
        play(None)
    else:
        commit = resolve_revision(baseline)
        with baseline_tree(commit) as path_entry:
            print(f"  baseline = {commit[:12]}, importable from {path_entry}")
            play(path_entry)
    median = {name: statistics.median(run["elapsed_s"] for run in each) for name, each in runs.items() if each}
    abstract, concrete = runs["abstract"][0], runs["concrete"][0]
    for name in median:
        print(f"  {name:<9} median {median[name]:.2f} s, {runs[name][0]['states'] / median[name]:,.0f} states/s")
    if runs["baseline"]:
        base = runs["baseline"][0]
        same = (base["states"], base["transitions"]) == (concrete["states"], concrete["transitions"])
        ratio = (concrete["states"] / median["concrete"]) / (base["states"] / median["baseline"])
        print(f"  concrete states/s, current over {baseline}: {ratio:.2f}x ({'the same' if same else 'NOT the same'} states and steps)")
        checks.append((same, f"the concrete clock searches what {baseline} searched: the same states and steps"))
    clean = all(run["ok"] and run["complete"] for each in runs.values() for run in each)
    checks.append((clean, "the benchmark configuration completes clean on both clocks"))
    return abstract, concrete


def _reductions(abstract: dict, concrete: dict) -> None:
    print("\nreduction factors on the benchmark configuration:")
    full = _search(BENCHMARK | ABSTRACT, symmetry=False)
    reduced = _search(BENCHMARK | ABSTRACT, por=True)
    print(_line("concrete clock", concrete))
    print(_line("abstract clock (the default)", abstract))
    print(_line("abstract, no symmetry", full))
    print(_line("abstract, sleep sets", reduced))
    for name, wider in (("abstract clock", concrete), ("symmetry", full)):
        states, steps = wider["states"] / abstract["states"], wider["transitions"] / abstract["transitions"]
        print(f"  {name}: {states:.2f}x fewer states, {steps:.2f}x fewer steps")
    print(
        f"  partial-order reduction (sleep sets): {abstract['states'] / reduced['states']:.2f}x fewer states (they visit them all),"
        f" {abstract['transitions'] / reduced['transitions']:.2f}x fewer steps ({reduced['pruned']:,} skipped)"
    )


def _speed_up(checks: list[tuple[bool, str]]) -> None:
    print(f"\nspeed-up: shiftchange explore {_flags(SCALING)}, to completion in one process and in two")
    alone, spread = _search(SCALING), _search(SCALING, processes=2)
    print(_line("one process", alone))
    print(_line("two processes", spread))
    speed_up = alone["elapsed_s"] / spread["elapsed_s"]
    print(f"  {speed_up:.2f}x on two processes: {_per_process(spread, 2):,.0f} distinct states per second per process")
    same = (alone["states"], alone["transitions"]) == (spread["states"], spread["transitions"])
    checks.append((speed_up >= SPEED_UP_MIN, f"speed-up on two processes {speed_up:.2f}x (target {SPEED_UP_MIN}x)"))
    checks.append((same and alone["ok"] and alone["complete"], "one and two processes find the same states and steps, clean"))


def _target(name: str, config: dict, limit_s: float, bound_s: float | None, memory: bool = False) -> tuple[bool, str]:
    """One configuration of the targets on each clock, two processes, sleep sets; whether it met its target (within
    `bound_s` if given, under `MEMORY_MAX_MIB` if `memory`)."""
    print(f"\n{name}: shiftchange explore {_flags(config)} --processes 2 --por --time-limit {limit_s:g}")
    abstract = _search(config | ABSTRACT, processes=2, por=True, time_limit_s=limit_s)
    concrete = _search(config | CONCRETE, processes=2, por=True, time_limit_s=limit_s)
    print(_line("abstract clock", abstract))
    print(_line("concrete clock", concrete))
    if abstract["complete"] and concrete["complete"]:
        print(f"  abstract clock: {concrete['states'] / abstract['states']:.2f}x fewer states")
    elif abstract["complete"]:
        fewer = concrete["states"] / abstract["states"]
        print(f"  abstract clock: more than {fewer:.2f}x fewer states (the concrete search did not complete)")
    else:
        print("  neither search completed: the state counts are lower bounds")
    within = abstract["complete"] and abstract["ok"]
    said = "completes on the abstract clock"
    if bound_s is not None:
        within, said = within and abstract["elapsed_s"] <= bound_s, f"{said} in <= {bound_s:g} s"
    else:
        said += f" (within the {limit_s:g} s given)"
    if memory:
        within, said = within and abstract["memory_mib"] < MEMORY_MAX_MIB, f"{said} and < {MEMORY_MAX_MIB} MiB"
    said += ", clean"
    took = f"{abstract['elapsed_s']:.0f} s, {abstract['states']:,} states" + ("" if abstract["complete"] else ", incomplete")
    return within, f"{_flags(config)} {said} ({took})"


def _antipatterns(limit_s: float, checks: list[tuple[bool, str]]) -> None:
    from shiftchange.explore import EXPOSURES
    from shiftchange.explore.config import CLOCK_READERS

    print(
        f"\nevery in-scope anti-pattern at two tasks, abstract clock (concrete for {', '.join(sorted(CLOCK_READERS))}), one process,"
        f" --time-limit {limit_s:g}"
    )
    found = 0
    for name, exposure in EXPOSURES.items():
        clock = CONCRETE if name in CLOCK_READERS else ABSTRACT  # its core reads the clock's value: `ExploreConfig.time`
        config = {**exposure.changes, "tasks": 2, "antipattern": name, **clock}
        run = _search(config, time_limit_s=limit_s)
        shows = run["invariant"] == exposure.invariant and run["replays"]
        found += shows
        replays = "yes" if run["replays"] else "NO"
        path = f"{run['steps']} steps, replays on the concrete clock: {replays}" if run["invariant"] else "not found"
        print(f"  {name:<28} {run['states']:>8,} states {run['elapsed_s']:>6.1f} s  {run['invariant'] or '-'}: {path}")
    said = f"{found} of {len(EXPOSURES)} anti-patterns found at two tasks by a path that replays on the concrete clock"
    checks.append((found == len(EXPOSURES), said))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", help="also search the benchmark configuration on this revision's code, alternately")
    parser.add_argument("--repeat", type=positive, default=2, help="searches of the benchmark configuration per clock (default 2)")
    parser.add_argument("--target-limit", type=positive, default=int(TARGET_S_MAX), help="seconds for the first target configuration (60)")
    parser.add_argument("--large-limit", type=positive, default=int(LARGE_S_MAX), help="seconds for each larger configuration (600)")
    parser.add_argument("--antipattern-limit", type=positive, default=300, help="seconds for each anti-pattern at two tasks (300)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(json.loads(args.child))
        return 0
    checks: list[tuple[bool, str]] = []
    abstract, concrete = _benchmark(args.repeat, args.baseline, checks)
    _reductions(abstract, concrete)
    _speed_up(checks)
    checks.append(_target("target configuration", TARGET, float(args.target_limit), TARGET_S_MAX, memory=True))
    checks.append(_target("three workers", THREE_WORKERS, float(args.large_limit), LARGE_S_MAX))
    checks.append(_target("three tasks", THREE_TASKS, float(args.large_limit), None))
    _antipatterns(float(args.antipattern_limit), checks)
    print("\ntargets:")
    for ok, text in checks:
        print(f"  {verdict(ok)}  {text}")
    return 0 if all(ok for ok, _text in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
