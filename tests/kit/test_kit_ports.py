"""The ports a real backend plausibly makes, one per check of the clock, values at their limits, scale and age,
atomicity, two handles and durability: each rejected from the command line naming the check it breaks, and the same
wrappers broken in nothing accepted.

`shiftchange check-store tests.kit.broken_stores:NAME [--reopen tests.kit.broken_stores:reopen]`, run in this process
as a user runs it from the repository root: exit 1, a FAIL line naming the check and a line under it saying what broke.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.core import InputError, StoreLimits
from shiftchange.testing import check_store, shared_store_checks
from shiftchange.testing.rig import World, reference_orchestrator
from tests.kit import broken_stores

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def from_the_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))


def _command(name: str, shared: bool) -> list[str]:
    return ["check-store", f"tests.kit.broken_stores:{name}", *(["--reopen", "tests.kit.broken_stores:reopen"] if shared else [])]


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(broken_stores.KIT_PORTS))
def test_each_broken_port_is_rejected_from_the_command_line_naming_its_check(name, from_the_root, capsys):
    """Goal: exit 1, `FAIL  <the check it breaks>`, and under it a line saying what the store did wrong."""
    check, shared = broken_stores.KIT_PORTS[name]
    assert main(_command(name, shared)) == 1
    lines = capsys.readouterr().out.splitlines()
    failed = f"FAIL  {check}"
    assert failed in lines, "\n".join(line for line in lines if line.startswith(("FAIL", "      ")))
    detail = lines[lines.index(failed) + 1]
    assert detail.startswith("      ") and len(detail.strip()) > 20, detail


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(broken_stores.UNBROKEN_PORTS))
def test_the_same_wrappers_broken_in_nothing_pass_from_the_command_line(name, from_the_root, capsys):
    """Goal: each failure above is its port's break alone: the wrapper with a clock, with narrower limits, or with two handles passes."""
    assert main(_command(name, broken_stores.UNBROKEN_PORTS[name])) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "FAIL" not in out
    if name == "make_journal":  # shared between processes: the killed writer's check runs, and passes
        assert "PASS  a_writer_killed_mid_transaction_leaves_nothing_visible" in out


def test_through_two_handles_in_one_process_only_the_kill_check_is_skipped():
    """Goal: two handles on one memory store run every two-handle check; only the killed child's is skipped (it holds a copy)."""
    report = check_store(broken_stores.make_shared_memory, reopen=broken_stores.reopen)
    assert report.ok, [(r.name, r.detail) for r in report.failures]
    shared = {check.name for check in shared_store_checks()}
    skipped = {r.name: r.detail for r in report.skips if r.name in shared}
    assert set(skipped) == {"both_handles_read_the_same_store_clock", "a_writer_killed_mid_transaction_leaves_nothing_visible"}
    assert "does not share this store" in skipped["a_writer_killed_mid_transaction_leaves_nothing_visible"]


def test_a_port_declaring_narrower_limits_has_the_core_refuse_past_them_and_write_nothing():
    """Goal: the core over a store declaring ids of 64 and texts of 4,000 refuses one past each with InputError, writing nothing."""
    world = World(reference_orchestrator(broken_stores.make_narrow_declared))
    limits = world.store.limits
    assert limits == StoreLimits(id_chars_max=64, text_chars_max=4_000)
    world.task("t" * limits.task_id_chars_max)
    with pytest.raises(InputError, match="task_id is 45 characters, longer than this store holds \\(44"):
        world.orchestrator.create_task("t" * 45, "objective", "repo-a", scope="")
    lease = world.running("task-2")
    with pytest.raises(InputError, match="checkpoint is 4001 characters"):
        world.orchestrator.checkpoint(lease.attempt_id, lease.generation, lease.token, "c" * 4_001)
    before = world.snapshot()
    with pytest.raises(InputError, match="result is 4001 characters"):
        world.orchestrator.complete_attempt(lease.attempt_id, lease.generation, lease.token, "r" * 4_001)
    assert world.snapshot() == before
    world.close()


def test_a_declaration_that_is_not_store_limits_is_refused_when_the_core_is_built():
    """Goal: the core refuses a store whose `limits` is not a StoreLimits, before anything is read or written."""

    class Odd(broken_stores.WrappedStore):
        limits = ("id_chars_max", 64)

    with pytest.raises(InputError, match="limits must be a StoreLimits"):
        World(reference_orchestrator(Odd))


def test_the_runtimes_fenced_store_keeps_the_ports_declarations_and_the_core_enforces_them():
    """Goal: the leader-fenced store the runtime's control plane builds its orchestrator on passes the limits through: refused there too."""
    from shiftchange.core import LedgerProvider, ManualClock, Orchestrator
    from shiftchange.core.leadership import FencedStore, Leadership

    store, clock = broken_stores.make_narrow_declared(), ManualClock(10.0)
    leadership = Leadership(store, "admission", "orchestrator-1", 30.0, clock)
    assert leadership.hold()
    fenced = FencedStore(store, leadership)
    assert (fenced.limits, fenced.lock_timeout_s) == (store.limits, store.lock_timeout_s)
    orchestrator = Orchestrator(fenced, clock, LedgerProvider(clock=clock))
    with pytest.raises(InputError, match="longer than this store holds"):
        orchestrator.create_task("t" * 45, "objective", "repo-a", scope="")
    assert store.events() == []
    orchestrator.create_task("t" * 44, "objective", "repo-a", scope="")
    assert [event.kind for event in store.events()] == ["create"]


@pytest.mark.parametrize(
    "declared", [{"id_chars_max": 63}, {"key_chars_max": 127}, {"text_chars_max": 999}, {"id_chars_max": True}, {"text_chars_max": 1.5e3}]
)
def test_limits_below_the_least_a_store_may_declare_are_refused(declared):
    """Goal: a StoreLimits below the named minimums (ids 64, keys 128, texts 1,000) or not a whole number is an InputError naming it."""
    with pytest.raises(InputError, match=f"StoreLimits.{next(iter(declared))} must be a whole number of characters >= "):
        StoreLimits(**declared)
