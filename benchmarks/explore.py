"""Exhaustive exploration: distinct states per second, the time to complete the benchmark configuration, and how the
state count grows with workers, with and without symmetry reduction.

    python benchmarks/explore.py [--repeat N] [--workers-max N]

The benchmark configuration is `shiftchange explore --workers 2 --tasks 1
--crashes 1 --pauses 1 --lost-responses 1`: it is searched breadth-first to
completion `--repeat` times (default 3) and the median time is reported with
its distinct states, transitions and depth. Then the same faults with 1 to
`--workers-max` workers (default 3), each searched once with workers
interchangeable (the default) and once without; the reduction factor is the
state count without symmetry over the count with it.

Targets: the benchmark configuration completes with no violation; symmetry
reduction never counts more states than the full search, and reduces them
once there are two workers or more. Exit status 0 when every target passes,
1 otherwise. There is no speed target: the figures are printed for the note.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys

from common import positive, verdict

from shiftchange.explore import ExploreConfig, explore

FAULTS = {"crashes": 1, "pauses": 1, "lost_responses": 1}


def _search(workers: int, symmetry: bool) -> object:
    return explore(ExploreConfig(workers=workers, tasks=1, **FAULTS), symmetry=symmetry)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=positive, default=3, help="searches of the benchmark configuration (default 3)")
    parser.add_argument("--workers-max", type=positive, default=3, help="the largest worker count of the growth table (default 3)")
    args = parser.parse_args()

    print("benchmark configuration: shiftchange explore --workers 2 --tasks 1 --crashes 1 --pauses 1 --lost-responses 1")
    runs = [_search(2, True) for _ in range(args.repeat)]
    times = [run.elapsed_s for run in runs]
    first = runs[0]
    median_s = statistics.median(times)
    clean = all(run.ok and run.complete for run in runs)
    same = len({(run.states, run.transitions, run.depth) for run in runs}) == 1
    print(f"  {first.states:,} distinct states, {first.transitions:,} transitions, maximum depth {first.depth}")
    print(f"  time to complete: median {median_s:.2f} s of {args.repeat} (" + ", ".join(f"{t:.2f}" for t in times) + ")")
    print(f"  {first.states / median_s:,.0f} distinct states per second, {first.transitions / median_s:,.0f} transitions per second")
    print(f"  {verdict(clean)}  completes with no violation" + ("" if same else " (the searches disagreed on their counts!)"))

    print()
    print(f"growth with workers (the same faults), symmetry reduction on and off, up to {args.workers_max} workers:")
    print(f"  {'workers':>7}  {'reduced':>9}  {'full':>9}  {'factor':>6}  {'reduced s':>9}  {'full s':>7}")
    growth_ok = True
    for workers in range(1, args.workers_max + 1):
        reduced, full = _search(workers, True), _search(workers, False)
        factor = full.states / reduced.states
        fits = reduced.states <= full.states and (workers == 1 or reduced.states < full.states)
        fits = fits and reduced.ok and full.ok and reduced.complete and full.complete
        growth_ok = growth_ok and fits
        print(
            f"  {workers:>7}  {reduced.states:>9,}  {full.states:>9,}  {factor:>5.2f}x  {reduced.elapsed_s:>9.2f}  {full.elapsed_s:>7.2f}"
            + ("" if fits else "  <- unexpected")
        )
    print(f"  {verdict(growth_ok)}  symmetry reduction never adds states, and removes some from two workers on (every search clean)")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of this process: {peak_mib:,.0f} MiB")
    return 0 if clean and same and growth_ok else 1


if __name__ == "__main__":
    sys.exit(main())
