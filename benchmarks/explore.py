"""Exhaustive exploration at useful sizes: distinct states per second per process, the reduction factors of symmetry and
of partial-order reduction apart, the speed-up with processes, and peak memory, against the targets of issue 25.

    python benchmarks/explore.py [--repeat N] [--target-limit S] [--three-worker-limit S]

Each search runs in a fresh child process (so its peak memory is its own:
the child's and, over several processes, its forked workers').

- **The benchmark configuration** (`--workers 2 --tasks 1 --crashes 1
  --pauses 1 --lost-responses 1`), searched `--repeat` times (default 2)
  in one process and in two: its distinct states per second per process,
  and the speed-up of two processes (the median times' ratio).
- **The speed-up**, on `--workers 2 --tasks 2 --crashes 1` (66,542
  states), searched to completion once in one process and once in two:
  the ratio of their times is the speed-up judged against its target (the
  benchmark configuration's ratio is printed beside it: its few seconds are
  mostly forking and level barriers).
- **Reduction factors**, on it: symmetry (states without over states with
  workers interchangeable) and partial-order reduction (sleep sets: steps
  taken without over with; the states are the same by construction, so
  their factor is 1).
- **The target configuration** (`--tasks 2` with the same faults), over two
  processes with partial-order reduction, stopped at `--target-limit`
  seconds (default 60): it passes if it completes within them.
- **Three workers, two tasks, a crash and a pause**, over two processes with
  partial-order reduction, stopped at `--three-worker-limit` seconds
  (default 600): it passes if it completes.

Targets: at least 3,000 distinct states per second per process; the target
configuration complete in at most 60 s on two processes and under 1 GiB;
the three-worker configuration complete; a speed-up of at least 1.6x on two
processes; every completed search clean. Exit status 0 when every target
passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

from common import positive, verdict

FAULTS = {"crashes": 1, "pauses": 1, "lost_responses": 1}
BENCHMARK = {"workers": 2, "tasks": 1, **FAULTS}
TARGET = {"workers": 2, "tasks": 2, **FAULTS}
THREE_WORKERS = {"workers": 3, "tasks": 2, "crashes": 1, "pauses": 1}
SCALING = {"workers": 2, "tasks": 2, "crashes": 1}
"""Where the speed-up is judged: a search of about 66,000 states, long enough (a minute or two) that forking the
processes and the barrier at the end of each of its levels are a small part of it, as they are in any search worth
spreading; the benchmark configuration's few seconds are mostly those fixed costs."""
STATES_PER_S_MIN, SPEED_UP_MIN, TARGET_S_MAX, MEMORY_MAX_MIB = 3000, 1.6, 60.0, 1024


def _child(spec: dict) -> None:
    """In the child process: one search, printed as one JSON line with this process's and its workers' peak memory."""
    from shiftchange.explore import ExploreConfig, explore

    result = explore(ExploreConfig(**spec["config"]), **spec["options"])
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
            }
        )
    )


def _search(config: dict, **options: object) -> dict:
    spec = json.dumps({"config": config, "options": options})
    done = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a search failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _flags(config: dict) -> str:
    return " ".join(f"--{name.replace('_', '-')} {value}" for name, value in config.items())


def _line(name: str, run: dict) -> str:
    ending = "complete" if run["complete"] else f"stopped by {run['stopped_by']}"
    return (
        f"  {name:<34} {run['states']:>9,} states {run['transitions']:>10,} steps {run['elapsed_s']:>7.1f} s"
        f" {run['states'] / run['elapsed_s']:>7,.0f} states/s {run['memory_mib']:>6,.0f} MiB  {ending}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=positive, default=2, help="searches of the benchmark configuration per process count (default 2)")
    parser.add_argument("--target-limit", type=positive, default=int(TARGET_S_MAX), help="seconds for the target configuration (60)")
    parser.add_argument("--three-worker-limit", type=positive, default=600, help="seconds for the three-worker configuration (600)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(json.loads(args.child))
        return 0
    checks: list[tuple[bool, str]] = []

    print(f"benchmark configuration: shiftchange explore {_flags(BENCHMARK)}")
    alone = [_search(BENCHMARK) for _ in range(args.repeat)]
    spread = [_search(BENCHMARK, processes=2) for _ in range(args.repeat)]
    for run in alone:
        print(_line("one process", run))
    for run in spread:
        print(_line("two processes", run))
    alone_s = statistics.median(run["elapsed_s"] for run in alone)
    spread_s = statistics.median(run["elapsed_s"] for run in spread)
    rate = alone[0]["states"] / alone_s
    small_speed_up = alone_s / spread_s
    print(f"  speed-up on two processes: {small_speed_up:.2f}x (a search of a few seconds: mostly forking and level barriers)")

    print(f"\nspeed-up: shiftchange explore {_flags(SCALING)}, to completion in one process and in two")
    scaled = [_search(SCALING), _search(SCALING, processes=2)]
    print(_line("one process", scaled[0]))
    print(_line("two processes", scaled[1]))
    speed_up = scaled[0]["elapsed_s"] / scaled[1]["elapsed_s"]
    per_process = scaled[1]["states"] / scaled[1]["elapsed_s"] / 2
    print(f"  {speed_up:.2f}x on two processes: {per_process:,.0f} distinct states per second per process")
    runs = alone + spread
    same = len({(run["states"], run["transitions"], run["depth"], run["quiescent"]) for run in runs}) == 1
    same = same and len({(run["states"], run["transitions"], run["depth"], run["quiescent"]) for run in scaled}) == 1
    clean = all(run["ok"] and run["complete"] for run in runs + scaled)
    best = max(rate, scaled[0]["states"] / scaled[0]["elapsed_s"], per_process)
    checks.append((best >= STATES_PER_S_MIN, f"{best:,.0f} distinct states per second per process at best (target {STATES_PER_S_MIN:,})"))
    checks.append((speed_up >= SPEED_UP_MIN, f"speed-up on two processes {speed_up:.2f}x on {_flags(SCALING)} (target {SPEED_UP_MIN}x)"))
    checks.append((same and clean, "one and two processes find the same states, steps, depth and quiescent states, clean"))

    print("\nreduction factors on the benchmark configuration:")
    full = _search(BENCHMARK, symmetry=False)
    reduced = _search(BENCHMARK, por=True)
    print(_line("no symmetry reduction", full))
    print(_line("symmetry (the default)", alone[0]))
    print(_line("symmetry and partial-order reduction", reduced))
    symmetry = full["states"] / alone[0]["states"]
    por_steps = alone[0]["transitions"] / reduced["transitions"]
    print(f"  symmetry: {symmetry:.2f}x fewer states, {full['transitions'] / alone[0]['transitions']:.2f}x fewer steps")
    print(
        f"  partial-order reduction: {alone[0]['states'] / reduced['states']:.2f}x fewer states (sleep sets visit them all),"
        f" {por_steps:.2f}x fewer steps ({reduced['pruned']:,} skipped), {alone[0]['elapsed_s'] / reduced['elapsed_s']:.2f}x the speed"
    )
    checks.append((reduced["states"] == alone[0]["states"] and reduced["ok"], "partial-order reduction visits the same states, clean"))

    print(f"\ntarget configuration: shiftchange explore {_flags(TARGET)} --processes 2 --por --time-limit {args.target_limit}")
    target = _search(TARGET, processes=2, por=True, time_limit_s=float(args.target_limit))
    print(_line("two processes, reduced", target))
    fits = target["complete"] and target["ok"] and target["elapsed_s"] <= TARGET_S_MAX and target["memory_mib"] < MEMORY_MAX_MIB
    checks.append((fits, f"the target configuration completes in <= {TARGET_S_MAX:g} s and < {MEMORY_MAX_MIB} MiB, clean"))

    print(f"\nthree workers: shiftchange explore {_flags(THREE_WORKERS)} --processes 2 --por --time-limit {args.three_worker_limit}")
    three = _search(THREE_WORKERS, processes=2, por=True, time_limit_s=float(args.three_worker_limit))
    print(_line("two processes, reduced", three))
    checks.append((three["complete"] and three["ok"], "the three-worker configuration completes, clean"))

    print(f"\nfingerprint collisions: at most {max(run['collision_probability'] for run in (target, three)):.1e} in any search above")
    print("\ntargets:")
    for ok, text in checks:
        print(f"  {verdict(ok)}  {text}")
    return 0 if all(ok for ok, _text in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
