"""Recoverability-map throughput: cells a minute of `phase` on one process and on every local CPU, and how long `sim tune lease` takes.

    python benchmarks/phase.py [--seeds N] [--jobs N] [--arrivals-s S] [--skip-tune]

Map throughput. One fixed small map is played twice with `phase`: the
retry-storm scenario, the axes workload.arrival_rate_per_s 0.06,0.1 and
trigger.for_s 15,120, the trigger "slowdown model_provider at=400 for=60
factor=4", the disciplines defaults and none, seeds 0 to `--seeds` - 1 (default
0-1), each arrival rate with as many tasks as arrive in `--arrivals-s`
(default 2400). Each job is one cell and seed, and plays two runs (a control and
the triggered run). The map is timed with `time.perf_counter` from the call to
`phase` to its rows, first with jobs=1 (in this process, no pool) and then with
`--jobs` local processes (default: one per CPU); both timings include planning,
spawning the pool and gathering the rows. Cells (jobs) a minute and runs a
minute are printed for each, and the speed-up (one process's wall time over the
pool's). The two maps must give the same rows: a faster map with other rows is
no map, so that is checked and judged. Cells a minute counts jobs (each cell
once per seed). For reference, benchmarks/sweep.py's pure-arithmetic speed-up of
the same pool is printed, not judged: on shared, throttled or hyperthreaded
CPUs it is below the jobs too, and it is the most any map could reach there.

Tuning time. `tune_lease(tool_call_s=30, renewal_loss=0.1,
target_per_1000_leases=1, heartbeat_s=15)`, the README's lease question, at its
default scale (the seeds planned from the closed form, 300 tasks a run) on
every local CPU, timed from the call to its answer; its answer line and whether
the runs confirmed it are printed. `--skip-tune` leaves it out.

Targets: speed-up at least 0.8 x the jobs (not measured on one CPU); the same
rows on one process and on the pool; `sim tune lease` for the README's question
answers in under 120 s (the issue: under two minutes on two cores at its
default scale). Exit status 0 when every target measured passes, 1 otherwise.
The map's settings and the CPU count are printed so the figures can be
reproduced; other work on the machine slows both.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from common import positive, verdict
from sweep import arithmetic_speedup

from shiftchange.lab.phase import PhaseMap, phase
from shiftchange.lab.tune import tune_lease

SCENARIO = "retry-storm"
AXES = {"workload.arrival_rate_per_s": [0.06, 0.1], "trigger.for_s": [15, 120]}
TRIGGER = "slowdown model_provider at=400 for=60 factor=4"
DISCIPLINES = ("defaults", "none")
SEEDS_DEFAULT = 2
ARRIVALS_S_DEFAULT = 2400.0
RUNS_PER_JOB = 2
"""Each job of a map plays a control and a triggered run."""
SPEEDUP_PER_JOB_MIN = 0.8
"""The pool's speed-up over one process, at least this many times its jobs."""
TUNE_S_MAX = 120.0
"""`sim tune lease` for the README's question answers within this long."""
TUNE_QUESTION = {"tool_call_s": 30, "renewal_loss": 0.1, "target_per_1000_leases": 1, "heartbeat_s": 15}


def seconds(text: str) -> float:
    """A command-line span of time: a positive finite number of seconds."""
    value = float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def timed_map(seeds: int, arrivals_s: float, jobs: int) -> tuple[PhaseMap, float]:
    began = time.perf_counter()
    played = phase(AXES, [TRIGGER], DISCIPLINES, seeds=range(seeds), scenario=SCENARIO, arrivals_s=arrivals_s, jobs=jobs)
    return played, time.perf_counter() - began


def report(label: str, played: PhaseMap, wall_s: float) -> None:
    jobs = len(played.rows)
    statuses = ", ".join(f"{sum(cell['status'] == status for cell in played.cells)} {status}" for status in _statuses(played))
    print(
        f"{label:<8} {jobs:>4} cells x seeds  {wall_s:>7.2f} s wall   {60 * jobs / wall_s:>7.1f} cells/min"
        f"   {60 * RUNS_PER_JOB * jobs / wall_s:>7.1f} runs/min   ({len(played.cells)} cells: {statuses})"
    )


def _statuses(played: PhaseMap) -> list[str]:
    return sorted({cell["status"] for cell in played.cells})


def throughput(seeds: int, arrivals_s: float, jobs: int) -> bool:
    """Time the map on one process and on `jobs`; print the rates, the speed-up and whether the rows agree; True when its targets pass."""
    alone, alone_s = timed_map(seeds, arrivals_s, 1)
    report("jobs 1", alone, alone_s)
    if jobs == 1:
        print("speed-up   not measured: one job (pass --jobs N, or run on more than one CPU)")
        return True
    pooled, pooled_s = timed_map(seeds, arrivals_s, jobs)
    report(f"jobs {jobs}", pooled, pooled_s)
    same = pooled.rows == alone.rows
    speedup = alone_s / pooled_s
    target = SPEEDUP_PER_JOB_MIN * jobs
    print(f"same rows on 1 and {jobs} jobs   {'yes' if same else 'NO'}   {verdict(same)}")
    print(f"reference  {arithmetic_speedup(jobs):>6.2f}x   {jobs} processes of pure arithmetic against one at a time (not a target)")
    print(f"speed-up   {speedup:>6.2f}x   target >= {target:.2f}x ({SPEEDUP_PER_JOB_MIN:g} x {jobs} jobs)   {verdict(speedup >= target)}")
    return same and speedup >= target


def tune_time() -> bool:
    """Time the README's lease question at the default scale on every local CPU; print its answer; True when within target."""
    question = ", ".join(f"{name}={value:g}" for name, value in TUNE_QUESTION.items())
    print(f"tune_lease({question}), default scale, jobs {os.cpu_count() or 1}")
    began = time.perf_counter()
    result = tune_lease(**TUNE_QUESTION, jobs=os.cpu_count() or 1)
    wall_s = time.perf_counter() - began
    runs = len(result.hold_replays) + sum(check.runs for check in result.checks)
    checked = ", ".join(f"TTL {check.lease_ttl_s:g} s on {check.runs} runs" for check in result.checks)
    print(f"  {result.answer}")
    print(f"  {'confirmed' if result.confirmed else 'NOT confirmed'} by the runs ({len(result.hold_replays)} hold runs; {checked})")
    ok = wall_s < TUNE_S_MAX
    print(f"tune lease {wall_s:>6.1f} s wall, {runs} runs   target < {TUNE_S_MAX:g} s   {verdict(ok)}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=positive, default=SEEDS_DEFAULT, help=f"seeds per cell, 0 to N-1 (default {SEEDS_DEFAULT})")
    parser.add_argument("--jobs", type=positive, default=os.cpu_count() or 1, help="local processes of the parallel map (default: CPUs)")
    parser.add_argument(
        "--arrivals-s",
        type=seconds,
        default=ARRIVALS_S_DEFAULT,
        help=f"seconds of arrivals each run plays (default {ARRIVALS_S_DEFAULT:g})",
    )
    parser.add_argument("--skip-tune", action="store_true", help="leave out the timing of tune_lease")
    arguments = parser.parse_args(argv)
    seeds, arrivals_s = arguments.seeds, arguments.arrivals_s
    axes = " ".join(f"--axis {path}={','.join(f'{value:g}' for value in values)}" for path, values in AXES.items())
    disciplines = " ".join(f"--discipline {name}" for name in DISCIPLINES)
    print(f"map: scenario {SCENARIO}, seeds 0-{seeds - 1}, arrivals {arrivals_s:g} s, {RUNS_PER_JOB} runs a cell (the same map:")
    print(f"  shiftchange sim phase --scenario {SCENARIO} {axes}")
    print(f"  --trigger '{TRIGGER}' {disciplines} --seeds 0-{seeds - 1} --arrivals-s {arrivals_s:g} --jobs N)")
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.2f} (other work slows the pool)")
    results = [throughput(seeds, arrivals_s, arguments.jobs)]
    if not arguments.skip_tune:
        results.append(tune_time())
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
