"""Sweep throughput: runs and tasks per second on one process and on every local CPU, and what the time series costs a run.

    python benchmarks/sweep.py [--scenario NAME] [--tasks N] [--runs N] [--jobs N] [--repeats N]

Throughput. One sweep of `--runs` seeds (0, 1, ...) of one scenario, no grid,
is timed with `time.perf_counter` from the call to `sweep` to its rows,
first with jobs=1 (in this process, no pool) and then with `--jobs` local
processes (default: one per CPU). Both timings include everything a user
waits for: planning, spawning the pool, and gathering the rows. Runs per
second and tasks per second are printed for each, and the speed-up (one
process's wall time over the pool's). The two sweeps must give the same rows;
that is checked too, since a faster sweep with other rows would be no sweep.

For reference, the same pool runs a fixed amount of pure Python arithmetic
per process, one process's worth at a time and then all at once: on a machine
whose CPUs are shared, throttled or hyperthreads, that ratio is below the
jobs too, and it is the most any sweep could reach there. It is printed, not
judged.

Series cost. One run of the same config is played with `series=True` and
with `series=False`, alternately, `--repeats` times each; the fastest of each
is kept (the least disturbed by the rest of the machine) and the cost is how
much longer the recorded run took, as a share of the unrecorded one.

Targets: speed-up at least 0.8 x the jobs (not measured on one CPU); the
series costs at most 10% of a run. Exit status 0 when every target measured
passes, 1 otherwise. The scenario, tasks and seeds are printed so the figures
can be reproduced.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from common import positive, verdict

from shiftchange.lab.sweep import sweep_rows
from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import play

SCENARIO_DEFAULT = "mixed"
TASKS_DEFAULT = 200
RUNS_DEFAULT = 8
REPEATS_DEFAULT = 5
ARITHMETIC_STEPS = 20_000_000
"""The pure-Python reference work per process: about a second on a 2020s CPU."""
SPEEDUP_PER_JOB_MIN = 0.8
"""The pool's speed-up over one process, at least this many times its jobs."""
SERIES_COST_MAX = 0.10
"""A run that records its time series takes at most this share longer than one that does not."""


def timed_sweep(scenario: str, tasks: int, runs: int, jobs: int) -> tuple[list[dict], float]:
    began = time.perf_counter()
    rows = sweep_rows(seeds=range(runs), scenario=scenario, tasks=tasks, jobs=jobs)
    return rows, time.perf_counter() - began


def throughput(scenario: str, tasks: int, runs: int, jobs: int) -> bool:
    """Time the sweep on one process and on `jobs`; print the rates and the speed-up; True when its targets pass."""
    alone, alone_s = timed_sweep(scenario, tasks, runs, 1)
    report("jobs 1", alone, alone_s)
    if jobs == 1:
        print("speed-up   not measured: one job (pass --jobs N, or run on more than one CPU)")
        return True
    pooled, pooled_s = timed_sweep(scenario, tasks, runs, jobs)
    report(f"jobs {jobs}", pooled, pooled_s)
    same = pooled == alone
    speedup = alone_s / pooled_s
    target = SPEEDUP_PER_JOB_MIN * jobs
    print(f"same rows on 1 and {jobs} jobs   {'yes' if same else 'NO'}   {verdict(same)}")
    print(f"reference  {arithmetic_speedup(jobs):>6.2f}x   {jobs} processes of pure arithmetic against one at a time (not a target)")
    print(f"speed-up   {speedup:>6.2f}x   target >= {target:.2f}x ({SPEEDUP_PER_JOB_MIN:g} x {jobs} jobs)   {verdict(speedup >= target)}")
    return same and speedup >= target


def arithmetic(steps: int) -> int:
    total = 0
    for step in range(steps):
        total += step
    return total


def arithmetic_speedup(jobs: int) -> float:
    """How much faster `jobs` spawned processes do `jobs` units of arithmetic at once than one unit after another."""
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(arithmetic, [1] * jobs))
        began = time.perf_counter()
        for _ in range(jobs):
            pool.submit(arithmetic, ARITHMETIC_STEPS).result()
        alone_s = time.perf_counter() - began
        began = time.perf_counter()
        list(pool.map(arithmetic, [ARITHMETIC_STEPS] * jobs))
        return alone_s / (time.perf_counter() - began)


def report(label: str, rows: list[dict], wall_s: float) -> None:
    tasks = sum(row["tasks"] for row in rows)
    held = sum(row["ok"] for row in rows)
    print(
        f"{label:<8} {len(rows):>4} runs  {wall_s:>7.2f} s wall   {len(rows) / wall_s:>7.2f} runs/s   {tasks / wall_s:>9,.0f} tasks/s"
        f"   ({held} of {len(rows)} runs held every invariant)"
    )


def series_cost(scenario: str, tasks: int, repeats: int) -> bool:
    """Time one run with and without its time series, alternating so drift hits both alike; True when the cost is within target."""
    config = scenario_config(scenario, 0, tasks)
    fastest_s = {True: float("inf"), False: float("inf")}
    for _ in range(repeats):
        for series in (True, False):
            began = time.perf_counter()
            play(config, 0, scenario, series=series)
            fastest_s[series] = min(fastest_s[series], time.perf_counter() - began)
    cost = fastest_s[True] / fastest_s[False] - 1.0
    print(f"run with series {fastest_s[True]:.3f} s, without {fastest_s[False]:.3f} s (fastest of {repeats} each)")
    print(f"series cost   {100 * cost:>6.1f}% of a run   target <= {100 * SERIES_COST_MAX:g}%   {verdict(cost <= SERIES_COST_MAX)}")
    return cost <= SERIES_COST_MAX


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=SCENARIO_DEFAULT, help=f"default {SCENARIO_DEFAULT}")
    parser.add_argument("--tasks", type=positive, default=TASKS_DEFAULT, help=f"tasks per run (default {TASKS_DEFAULT})")
    parser.add_argument("--runs", type=positive, default=RUNS_DEFAULT, help=f"runs in each sweep, seeds 0 to N-1 (default {RUNS_DEFAULT})")
    parser.add_argument("--jobs", type=positive, default=os.cpu_count() or 1, help="local processes of the parallel sweep (default: CPUs)")
    parser.add_argument("--repeats", type=positive, default=REPEATS_DEFAULT, help=f"timings of each kind (default {REPEATS_DEFAULT})")
    arguments = parser.parse_args(argv)
    scenario, tasks, runs = arguments.scenario, arguments.tasks, arguments.runs
    print(f"scenario {scenario}, {tasks:,} tasks a run, seeds 0-{runs - 1} (the same sweep: shiftchange sim sweep --scenario {scenario}")
    load = os.getloadavg()[0]
    print(f"  --tasks {tasks} --seeds 0-{runs - 1} --jobs N); {os.cpu_count()} CPUs, load average {load:.2f} (other work slows the pool)")
    results = [throughput(scenario, tasks, runs, arguments.jobs), series_cost(scenario, tasks, arguments.repeats)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
