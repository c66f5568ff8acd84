"""How long `shiftchange check-store` takes on the shipped stores, through two handles, beside the previous release's kit.

    python benchmarks/check_store.py [--baseline REV] [--repeat N] [--postgres URL]

Each run is a fresh process that runs the command a porter runs, in
process (`shiftchange check-store TARGET --json`), on:

- `sqlite:///DIR`: fresh SQLite files, each opened a second time (two handles);
- `postgresql://...`: fresh schemas on the server, two handles on each (the
  URL as given: synced commits, which the kit's durability check reads);
- `memory:`, through one handle, for scale.

Every check is timed (the kit's check lists are wrapped in the child), so
the output says what the checks this release added cost, by name, beside the
whole. With `--baseline REV` the previous release's kit runs on the same
targets, alternately with the current one, in the same run.

Targets (issue 39): PostgreSQL through two handles in at most 3 minutes,
SQLite in at most 1, on two cores. Exit status 0 when both hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import baseline_tree, describe_current, positive, resolve_revision, run_child, verdict

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
TARGETS_S = {"sqlite": 60.0, "postgresql": 180.0}
"""The issue's bounds on the whole command's wall time, through two handles."""


def child(target: str) -> None:
    """In a fresh process: run the command on `target`, timing every check; print one JSON line of figures."""
    import shiftchange.core
    from shiftchange.cli.main import main
    from shiftchange.testing import checks, contracts
    from shiftchange.testing import stores as kit_stores

    timings: dict[str, float] = {}

    def timed(check: checks.Check) -> checks.Check:
        def run(factory: object) -> None:
            began = time.perf_counter()
            try:
                check.run(factory)
            finally:
                timings[check.name] = timings.get(check.name, 0.0) + time.perf_counter() - began

        return checks.Check(check.name, check.goal, run)

    kit_stores._CHECKS[:] = [timed(check) for check in kit_stores._CHECKS]
    kit_stores._SHARED_CHECKS[:] = [timed(check) for check in kit_stores._SHARED_CHECKS]
    contracts._CHECKS = tuple(timed(check) for check in contracts._CHECKS)
    with tempfile.TemporaryDirectory(prefix="check-store-bench-") as directory:
        argv = ["check-store", target.replace("DIR", directory), "--json"]
        out = io.StringIO()
        began = time.perf_counter()
        with contextlib.redirect_stdout(out):
            status = main(argv)
        elapsed = time.perf_counter() - began
    report = json.loads(out.getvalue())
    failed = [c["name"] for suite in report["suites"] for c in suite["checks"] if not c["passed"] and not c["skipped"]]
    figures = {"status": status, "elapsed_s": elapsed, "totals": report["totals"], "failed": failed, "timings": timings}
    print(json.dumps({**figures, "origin": shiftchange.core.__file__}))


def _targets(postgres: str) -> dict[str, str]:
    return {"sqlite": "sqlite:///DIR", "postgresql": postgres, "memory": "memory:"}


def _show(run: dict) -> str:
    totals = run["totals"]
    failed = f", FAILED: {', '.join(run['failed'])}" if run["failed"] else ""
    return f"{run['elapsed_s']:7.1f} s  {totals['checks']} checks, {totals['passed']} pass, {totals['skipped']} skipped{failed}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", metavar="TARGET", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", metavar="REV", help="also run the kit of this revision on the same targets, alternately")
    parser.add_argument("--repeat", type=positive, default=1, help="runs of each kit on each target (default %(default)s)")
    parser.add_argument("--postgres", metavar="URL", default=POSTGRES_URL, help="the server (default %(default)s)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    print(f"check-store on the shipped stores: current = {describe_current()}")
    ok = True
    with contextlib.ExitStack() as stack:
        path_entry, tree = None, Path("/nonexistent")
        if args.baseline:
            commit = resolve_revision(args.baseline)
            path_entry = tree = stack.enter_context(baseline_tree(commit))
            print(f"   baseline = {args.baseline} ({commit[:12]}), importable from {path_entry}")
        for kind, target in _targets(args.postgres).items():
            print(f"\n{kind}: shiftchange check-store {target} --json ({'one handle' if kind == 'memory' else 'two handles'})")
            current, baseline = [], []
            for _ in range(args.repeat):
                current.append(run_child([__file__, "--child", target], None, tree))
                print(f"   current   {_show(current[-1])}")
                if path_entry is not None:
                    baseline.append(run_child([__file__, "--child", target], path_entry, tree))
                    print(f"   baseline  {_show(baseline[-1])}")
            elapsed = statistics.median(run["elapsed_s"] for run in current)
            if baseline:
                before = statistics.median(run["elapsed_s"] for run in baseline)
                new = sorted(set(current[0]["timings"]) - set(baseline[0]["timings"]))
                added = statistics.median(sum(run["timings"][name] for name in new) for run in current)
                print(
                    f"   median {elapsed:.1f} s against the baseline's {before:.1f} s ({elapsed / before:.2f}x); the {len(new)} checks this"
                    f" release added take {added:.1f} s of it"
                )
                slowest = sorted(new, key=lambda name: -current[0]["timings"][name])[:6]
                print("   slowest added: " + ", ".join(f"{name} {current[0]['timings'][name]:.1f} s" for name in slowest))
            if any(run["status"] != 0 for run in current):
                ok = False
                print(f"   {verdict(False)}: the current kit does not pass the shipped {kind} store")
            if kind in TARGETS_S:
                holds = elapsed <= TARGETS_S[kind]
                ok = ok and holds
                print(f"   {verdict(holds)}: {elapsed:.1f} s, target at most {TARGETS_S[kind]:.0f} s through two handles on two cores")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
