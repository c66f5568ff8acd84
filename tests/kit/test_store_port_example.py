"""examples/store_port.py, the minimal port of the store, passes the kit by the command a porter runs.

The example is documentation that must keep working (SimPy's examples run as
tests): it is checked exactly as the README tells a porter to check theirs,
`shiftchange check-store examples.store_port:make_store --json` from the
repository root, in a process of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shiftchange.testing import check_store, shared_store_checks
from shiftchange.testing.stores import clock as kit_clock
from shiftchange.testing.stores import durability as kit_durability

ROOT = Path(__file__).resolve().parents[2]
NO_CLOCK = {check.name for check in kit_clock.CHECKS}
NOT_DURABLE = {check.name for check in kit_durability.CHECKS}


def test_the_example_port_passes_every_check_of_the_command():
    """Goal: the command exits 0, and its JSON says no check failed and only the two-handle ones (one handle here) were skipped."""
    command = [sys.executable, "-m", "shiftchange", "check-store", "examples.store_port:make_store", "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout)
    checks = [check for suite in report["suites"] for check in suite["checks"]]
    failed = [(check["name"], check["detail"]) for check in checks if not check["passed"] and not check["skipped"]]
    assert report["ok"] is True and failed == [] and report["totals"]["failed"] == 0
    skipped = {check["name"] for check in checks if check["skipped"]}
    assert skipped == {check.name for check in shared_store_checks()} | NO_CLOCK | NOT_DURABLE
    assert report["totals"]["passed"] == len(checks) - len(skipped) > 100


def test_the_example_port_passes_through_two_handles_with_reopen():
    """Goal: with `--reopen examples.store_port:reopen` every two-handle check runs and passes, but the killed writer's (a child
    process holds a copy of memory, which the kit says) and the clock's (the example has none)."""
    command = [sys.executable, "-m", "shiftchange", "check-store", "examples.store_port:make_store", "--reopen"]
    done = subprocess.run([*command, "examples.store_port:reopen", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    checks = {check["name"]: check for suite in json.loads(done.stdout)["suites"] for check in suite["checks"]}
    skipped = {name for name, check in checks.items() if check["skipped"]}
    assert skipped == NO_CLOCK | NOT_DURABLE | {
        "both_handles_read_the_same_store_clock",
        "a_writer_killed_mid_transaction_leaves_nothing_visible",
    }
    assert "does not share this store" in checks["a_writer_killed_mid_transaction_leaves_nothing_visible"]["detail"]
    ran = {check.name for check in shared_store_checks()} - skipped
    assert len(ran) >= 9 and all(checks[name]["passed"] for name in ran)


def test_the_example_port_is_written_against_the_public_protocol_only():
    """Goal: the example imports nothing private of shiftchange (no underscore names, no adapter), so a porter can copy its shape."""
    source = (ROOT / "examples" / "store_port.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("from shiftchange", "import shiftchange"))]
    assert imports and all("._" not in line and " _" not in line and "stores" not in line.split(" import ")[0] for line in imports)


def test_a_break_in_the_example_port_is_caught(monkeypatch):
    """Goal: the kit can fail the example: with its version guard gone, the stale-write check fails (so the pass above means something)."""
    sys.path.insert(0, str(ROOT))
    try:
        from examples import store_port
    finally:
        sys.path.remove(str(ROOT))

    original = store_port.DictTransaction._update

    def unguarded(table, identity, record, changes):
        stored = table.get(identity)
        if stored is not None:
            record.version = stored.version
        original(table, identity, record, changes)

    monkeypatch.setattr(store_port.DictTransaction, "_update", staticmethod(unguarded))
    failed = {result.name for result in check_store(store_port.make_store).failures}
    assert "stale_version_write_conflicts_and_changes_nothing" in failed
