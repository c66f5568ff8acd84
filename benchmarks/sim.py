"""Simulator cost: wall time per SimPy event of a mixed run against raw SimPy timeouts, and peak memory as the run grows.

    python benchmarks/sim.py [--tasks N] [--seed N] [--breakdown] [--memory] [--tracemalloc]
    python benchmarks/sim.py --baseline REV [--repeat N] [--tasks N] [--seed N]

Speed. One run of the main job (scenario `mixed`, default 10,000 tasks) is
played with `play`, timed with `time.perf_counter` from building the world to
its verdicts, and its SimPy events are counted (`outcome.events_processed`).
In the same process, a bare SimPy world of the same size is timed: as many
processes as the run has workers, each yielding `env.timeout(...)` in a loop,
until as many events have been processed. Both count events the same way (the
world's `CountingEnvironment`), so the ratio run/raw says how much the core,
the checkers and the roles cost on top of what SimPy costs anyway.

Memory (`--memory`, minutes: 100,000 tasks is a long run). The same run at
10,000 and at 100,000 tasks, each in a fresh subprocess so their peaks do not
mix, measuring peak resident memory (`ru_maxrss`, KiB on Linux) after imports
and after the run. The world forgets retired tasks, so a run ten times longer
should not need ten times the memory. With `--tracemalloc`, each size is run
once more with `tracemalloc` tracing (several times slower, and it inflates
RSS, hence its own subprocess) for the peak of Python allocations alone.

Side by side (`--baseline REV`, e.g. the previous release). The run alone
(one `play` of the same scenario, seed and size; CPU seconds by
`time.process_time` and wall seconds, from building the world to its
verdicts) is played in fresh subprocesses, alternately on the current code
(the working tree, through the editable install) and on REV's (extracted with
`git archive` into a temporary importable tree, see common.py), `--repeat`
times each. Printed for each: events, CPU ms per simulated task (minimum and
median), simulated tasks per CPU second, and the ratio current/baseline. The
target: CPU per task no higher than REV's, judged on the minima (the least
disturbed run of each; no slack beyond that). The raw SimPy comparison is
not repeated there; it does not depend on the revision.

Targets: run/raw at most 3x per event; peak RSS at 100,000 tasks at most 2x
the peak at 10,000. Exit status 0 when every target measured passes, 1 otherwise.
The seed and scenario are printed so the figures can be reproduced.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import time
import tracemalloc

from common import positive, side_by_side_runs, spread, verdict

from shiftchange.sim.scenarios import scenario_config
from shiftchange.sim.world import CountingEnvironment, play

SCENARIO = "mixed"
SEED_DEFAULT = 1
TASKS_DEFAULT = 10_000
MEMORY_TASKS = (10_000, 100_000)
"""The two run sizes whose peaks are compared: ten times the tasks."""
RUN_RAW_RATIO_MAX = 3.0
"""Wall time per event of the run, as a multiple of a raw SimPy timeout event, at most this."""
PEAK_RATIO_MAX = 2.0
"""Peak RSS of the larger run, as a multiple of the smaller run's, at most this."""
REPEAT_DEFAULT = 3
"""With --baseline: fresh processes per tree, played alternately."""
BREAKDOWN_TASKS_MAX = 2_000
"""The timed breakdown runs at most this many tasks: its shares, not its total, are the point."""
RAW_TIMEOUT_S = 1.0
"""The raw world's timeout; each process's is offset a little so their events interleave on the heap."""


def raw_events(processes: int, events: int) -> tuple[int, float, float]:
    """Process at least `events` bare timeout events with `processes` processes; returns (events, wall seconds, CPU seconds)."""
    env = CountingEnvironment()
    rounds = -(-events // processes)

    def ticker(delay_s: float):
        for _ in range(rounds):
            yield env.timeout(delay_s)

    for index in range(processes):
        env.process(ticker(RAW_TIMEOUT_S + index / (processes * 1000.0)))
    began, began_cpu = time.perf_counter(), time.process_time()
    env.run()
    return env.processed, time.perf_counter() - began, time.process_time() - began_cpu


def speed(tasks: int, seed: int) -> bool:
    config = scenario_config(SCENARIO, seed, tasks)
    began, began_cpu = time.perf_counter(), time.process_time()
    outcome = play(config, seed, SCENARIO)
    run_s, run_cpu_s = time.perf_counter() - began, time.process_time() - began_cpu
    workers = outcome.config.workers.workers
    raw_count, raw_s, raw_cpu_s = raw_events(workers, outcome.events_processed)
    run_us, raw_us = 1e6 * run_s / outcome.events_processed, 1e6 * raw_s / raw_count
    ratio = run_us / raw_us
    ok = ratio <= RUN_RAW_RATIO_MAX
    held = "every invariant holds" if outcome.ok else "NOT every invariant holds"
    print(f"run   {outcome.events_processed:>12,} events   {run_s:>8.2f} s wall ({run_cpu_s:.2f} s CPU)   {run_us:>7.2f} us/event")
    events_per_task, ms_per_task = outcome.events_processed / tasks, 1e3 * run_cpu_s / tasks
    print(f"      {events_per_task:.1f} events and {ms_per_task:.2f} ms CPU per task (the ratio below is per event: fewer events raise it)")
    print(f"      {held}; history digest {outcome.digest}")
    print(f"raw   {raw_count:>12,} events   {raw_s:>8.2f} s wall ({raw_cpu_s:.2f} s CPU)   {raw_us:>7.2f} us/event")
    print(f"      {workers} processes (the run's workers), each yielding env.timeout in a loop")
    print(f"run / raw per event   {ratio:>6.2f}x   target <= {RUN_RAW_RATIO_MAX:g}x   {verdict(ok)}")
    return ok


def speed_child(tasks: int, seed: int) -> None:
    """In a fresh process: play the run once and print its speed figures as one JSON line (with where the core came from)."""
    import shiftchange.core

    config = scenario_config(SCENARIO, seed, tasks)
    began, began_cpu = time.perf_counter(), time.process_time()
    outcome = play(config, seed, SCENARIO)
    wall_s, cpu_s = time.perf_counter() - began, time.process_time() - began_cpu
    figures = {
        "tasks": tasks,
        "events": outcome.events_processed,
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "ok": outcome.ok,
        "digest": outcome.digest,
        "origin": shiftchange.core.__file__,
    }
    print(json.dumps(figures))


def side_by_side(tasks: int, seed: int, revision: str, repeat: int) -> bool:
    """CPU per simulated task of the current code against `revision`'s, fresh processes played alternately."""
    argv = [__file__, "--speed-child", str(tasks), "--seed", str(seed)]

    def show(figures: dict) -> str:
        held = "invariants hold" if figures["ok"] else "INVARIANTS DO NOT ALL HOLD"
        return (
            f"{figures['events']:>12,} events  {figures['cpu_s']:>7.2f} s CPU  {figures['wall_s']:>7.2f} s wall"
            f"  {1e3 * figures['cpu_s'] / tasks:>6.3f} ms CPU/task  {held}; digest {figures['digest'][:16]}"
        )

    current, baseline = side_by_side_runs("side by side", revision, argv, repeat, show)
    summary = {}
    for name, figures in (("current", current), ("baseline", baseline)):
        cpu_min, cpu_median, _ = spread([1e3 * each["cpu_s"] / tasks for each in figures])
        wall_min, wall_median, _ = spread([1e3 * each["wall_s"] / tasks for each in figures])
        events = sorted({each["events"] for each in figures})
        summary[name] = (cpu_min, cpu_median)
        print(
            f"{name:<9} {', '.join(f'{count:,}' for count in events)} events"
            f"   CPU per task  min {cpu_min:.3f} ms  median {cpu_median:.3f} ms"
            f"   {1e3 / cpu_min:,.0f} tasks/CPU s (median {1e3 / cpu_median:,.0f})"
            f"   wall per task  min {wall_min:.3f} ms  median {wall_median:.3f} ms"
        )
    (current_min, current_median), (baseline_min, baseline_median) = summary["current"], summary["baseline"]
    print(f"current / baseline   CPU per task  min {current_min / baseline_min:.3f}x   median {current_median / baseline_median:.3f}x")
    digests = {each["digest"] for each in current + baseline}
    if len(digests) > 1:
        print("   (the two trees' histories differ: their digests are not the same, so their runs are not event for event alike)")
    ok = current_min <= baseline_min and all(each["ok"] for each in current)
    print(f"CPU per task no higher than {revision}'s: {verdict(ok)}")
    return ok


CONTRACTS = [
    "create_task",
    "accept_task",
    "dispatch",
    "retry",
    "run_admission",
    "admit",
    "claim_attempt",
    "start_attempt",
    "renew_lease",
    "grant_tool",
    "record_receipt",
    "report_call_failure",
    "checkpoint",
    "complete_attempt",
    "report_failure",
    "reap",
    "reconcile_attempt",
    "verify_attempt",
    "cancel_attempt",
    "acknowledge_cancel",
    "decide",
    "approve",
    "cancel_task",
]


def breakdown(tasks: int, seed: int) -> None:
    """Where a run's time goes: inside core contracts, in the history (checkers and digest), and everything else.

    Every public contract of the Orchestrator and `History.append` are wrapped
    with a wall-clock timer (outermost calls only, so a contract calling
    another is not counted twice); the history runs inside contracts, as the
    store's listeners, so its time is taken out of theirs. The timers cost a
    little themselves, which lands in "contracts" and "history".
    """
    from shiftchange.checkers import history as history_module
    from shiftchange.sim import world as world_module

    spent = {"contracts": 0.0, "history": 0.0}
    depth = [0]

    def timed(function, bucket):
        @functools.wraps(function)  # the transport names a call by its function's name (lossy_calls)
        def wrapper(*args, **kwargs):
            if depth[0]:
                return function(*args, **kwargs)
            depth[0] += 1
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[bucket] += time.perf_counter() - began
                depth[0] -= 1

        return wrapper

    original_orchestrator, original_append = world_module.Orchestrator, history_module.History.append
    timed_orchestrator = type("TimedOrchestrator", (original_orchestrator,), {})
    for name in CONTRACTS:
        setattr(timed_orchestrator, name, timed(getattr(original_orchestrator, name), "contracts"))
    history_time = [0.0]

    def append(self, entry):
        began = time.perf_counter()
        try:
            return original_append(self, entry)
        finally:
            history_time[0] += time.perf_counter() - began

    world_module.Orchestrator, history_module.History.append = timed_orchestrator, append
    try:
        began = time.perf_counter()
        outcome = play(scenario_config(SCENARIO, seed, tasks), seed, SCENARIO)
        total_s = time.perf_counter() - began
    finally:
        world_module.Orchestrator, history_module.History.append = original_orchestrator, original_append
    history_s = history_time[0]
    contracts_s = spent["contracts"] - min(history_s, spent["contracts"])
    rest_s = total_s - contracts_s - history_s
    print(f"where the time goes ({tasks:,} tasks, {outcome.events_processed:,} events, {total_s:.2f} s with timers):")
    for label, seconds in (
        ("core contracts (store, table, guards)", contracts_s),
        ("history: checkers and digest", history_s),
        ("SimPy, roles, transport, control plane", rest_s),
    ):
        print(
            f"   {label:<40} {seconds:>7.2f} s  {100 * seconds / total_s:>5.1f}%  {1e6 * seconds / outcome.events_processed:>6.2f} us/event"
        )


def measure_child(tasks: int, seed: int, traced: bool) -> None:
    """In a fresh process: play one run and print its memory figures as one JSON line."""
    imports_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if traced:
        tracemalloc.start()
    began = time.perf_counter()
    outcome = play(scenario_config(SCENARIO, seed, tasks), seed, SCENARIO)
    figures = {
        "tasks": tasks,
        "wall_s": time.perf_counter() - began,
        "events": outcome.events_processed,
        "imports_kib": imports_kib,
        "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "traced_peak_bytes": tracemalloc.get_traced_memory()[1] if traced else None,
    }
    print(json.dumps(figures))


def child(tasks: int, seed: int, traced: bool) -> dict:
    argv = [sys.executable, __file__, "--child", str(tasks), "--seed", str(seed)] + (["--tracemalloc"] if traced else [])
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {tasks:,}-task run failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def memory(seed: int, traced: bool) -> bool:
    small, large = (child(tasks, seed, traced=False) for tasks in MEMORY_TASKS)
    for figures in (small, large):
        raised_mib = (figures["peak_kib"] - figures["imports_kib"]) / 1024
        print(
            f"{figures['tasks']:>9,} tasks   peak RSS {figures['peak_kib'] / 1024:>8.1f} MiB"
            f"   (peak by the end of imports {figures['imports_kib'] / 1024:.1f} MiB; the run raised it {raised_mib:.1f} MiB)"
            f"   {figures['events']:,} events in {figures['wall_s']:.0f} s"
        )
    ratio = large["peak_kib"] / small["peak_kib"]
    ok = ratio <= PEAK_RATIO_MAX
    print(f"peak RSS {MEMORY_TASKS[1]:,} / {MEMORY_TASKS[0]:,}   {ratio:>6.2f}x   target <= {PEAK_RATIO_MAX:g}x   {verdict(ok)}")
    if traced:
        small_traced, large_traced = (child(tasks, seed, traced=True) for tasks in MEMORY_TASKS)
        for figures in (small_traced, large_traced):
            print(f"{figures['tasks']:>9,} tasks   tracemalloc peak {figures['traced_peak_bytes'] / 2**20:>8.1f} MiB")
        traced_ratio = large_traced["traced_peak_bytes"] / small_traced["traced_peak_bytes"]
        print(f"tracemalloc peak {MEMORY_TASKS[1]:,} / {MEMORY_TASKS[0]:,}   {traced_ratio:>6.2f}x   (reported, not a target)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=positive, default=TASKS_DEFAULT, help=f"tasks in the timed run (default {TASKS_DEFAULT:,})")
    parser.add_argument("--seed", type=int, default=SEED_DEFAULT, help=f"default {SEED_DEFAULT}")
    sizes = " and ".join(f"{tasks:,}" for tasks in MEMORY_TASKS)
    parser.add_argument("--memory", action="store_true", help=f"also compare peak memory at {sizes} tasks (minutes)")
    parser.add_argument("--tracemalloc", action="store_true", help="with --memory: also the tracemalloc peak (slow)")
    parser.add_argument("--breakdown", action="store_true", help="also time core contracts and the history apart from the rest")
    parser.add_argument(
        "--baseline", metavar="REV", help="compare the run's CPU per task with this git revision's, side by side in fresh processes"
    )
    parser.add_argument(
        "--repeat", type=positive, default=REPEAT_DEFAULT, help=f"with --baseline: processes per tree (default {REPEAT_DEFAULT})"
    )
    parser.add_argument("--child", type=positive, metavar="TASKS", help=argparse.SUPPRESS)
    parser.add_argument("--speed-child", type=positive, metavar="TASKS", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child is not None:
        measure_child(arguments.child, arguments.seed, arguments.tracemalloc)
        return 0
    if arguments.speed_child is not None:
        speed_child(arguments.speed_child, arguments.seed)
        return 0
    seed, tasks = arguments.seed, arguments.tasks
    print(f"scenario {SCENARIO}, seed {seed}, {tasks:,} tasks (the same run: shiftchange sim run --seed {seed} --tasks {tasks})")
    side = arguments.baseline is not None
    results = [side_by_side(tasks, seed, arguments.baseline, arguments.repeat) if side else speed(tasks, seed)]
    if arguments.breakdown:
        breakdown(min(tasks, BREAKDOWN_TASKS_MAX), seed)
    if arguments.memory:
        results.append(memory(seed, arguments.tracemalloc))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
