"""The structural checker passes the shipped spec and fails each deliberately broken copy with the right property named."""

from __future__ import annotations

import pytest

from shiftchange.cli.main import main
from shiftchange.spec import check_spec, load_spec


def failing(capsys, directory) -> tuple[int, set[str], str]:
    status = main(["spec", "check", "--spec", str(directory)])
    out = capsys.readouterr().out
    names = {line.split()[1] for line in out.splitlines() if line.startswith("FAIL ")}
    return status, names, out


def test_shipped_spec_passes_every_property(capsys):
    status = main(["spec", "check"])
    out = capsys.readouterr().out
    passed = [line for line in out.splitlines() if line.startswith("PASS ")]
    assert status == 0, out
    assert len(passed) >= 8
    assert not any(line.startswith("FAIL ") for line in out.splitlines())
    for name in (
        "attempt.reachable",
        "attempt.suspect_then_reconcile",
        "attempt.fenced_worker_writes",
        "attempt.cancel_through_reconciliation",
        "attempt.deterministic",
        "attempt.rows_traceable",
        "task.rows_traceable",
        "domains.classified",
    ):
        assert any(name in line for line in passed), name


def test_every_property_has_a_distinct_name():
    names = [p.name for p in check_spec(load_spec())]
    assert len(names) == len(set(names))


SUSPECT_TO_FAILED = """
[triggers.give_up]
description = "Broken on purpose: an expired attempt is declared failed without reconciling."

[[transition]]
trigger = "give_up"
source = "suspect"
dest = "failed"
actor = "reaper"
"""

UNREACHABLE_STATE = """
[states.orphan]
description = "Broken on purpose: nothing leads here."

[[transition]]
trigger = "cancel"
source = "orphan"
dest = "cancelling"
actor = "operator"
effects = ["request_cancel"]
"""

TERMINAL_EXIT = """
[[transition]]
trigger = "start"
source = "succeeded"
dest = "running"
actor = "worker"
fenced = true
"""

NONDETERMINISTIC_PAIR = """
[[transition]]
trigger = "shed"
source = "queued"
dest = "cancelled"
actor = "orchestrator"
guards = ["selected_for_shedding"]
"""

INDISTINGUISHABLE_ROWS = """
[[transition]]
trigger = "shed"
source = "queued"
dest = "failed"
actor = "orchestrator"
guards = ["capacity_available", "selected_for_shedding"]
"""
"""Told apart from the shedding row by its guards (so still deterministic), but an event of either is `shed: queued -> failed`."""

UNUSED_TRIGGER = """
[triggers.pause]
description = "Broken on purpose: declared, never used."
"""

BROKEN = {
    "suspect_to_failed": ("attempt.toml", None, SUSPECT_TO_FAILED, "attempt.suspect_then_reconcile"),
    "expire_straight_to_failed": (
        "attempt.toml",
        ('dest = "suspect"\nactor = "reaper"', 'dest = "failed"\nactor = "reaper"'),
        None,
        "attempt.suspect_then_reconcile",
    ),
    "unfenced_worker_completion": (
        "attempt.toml",
        (
            'effects = ["record_result", "revoke_authority"]\nfenced = true',
            'effects = ["record_result", "revoke_authority"]\nfenced = false',
        ),
        None,
        "attempt.fenced_worker_writes",
    ),
    "unreachable_state": ("attempt.toml", None, UNREACHABLE_STATE, "attempt.reachable"),
    "exit_from_terminal": ("attempt.toml", None, TERMINAL_EXIT, "attempt.terminal_absorbing"),
    "nondeterministic_pair": ("attempt.toml", None, NONDETERMINISTIC_PAIR, "attempt.deterministic"),
    "cancel_skips_reconciliation": (
        "attempt.toml",
        (
            'trigger = "cancel_unclaimed"\nsource = "cancelling"\ndest = "reconciling"',
            'trigger = "cancel_unclaimed"\nsource = "cancelling"\ndest = "cancelled"',
        ),
        None,
        "attempt.cancel_through_reconciliation",
    ),
    "no_cancel_while_verifying": (
        "attempt.toml",
        ('"suspect", "verifying"]\ndest = "cancelling"', '"suspect"]\ndest = "cancelling"'),
        None,
        "attempt.cancel_everywhere",
    ),
    "unused_trigger": ("attempt.toml", None, UNUSED_TRIGGER, "attempt.vocabulary_used"),
    "indistinguishable_rows": ("attempt.toml", None, INDISTINGUISHABLE_ROWS, "attempt.rows_traceable"),
    "dispatch_from_inbox": (
        "task.toml",
        ('trigger = "dispatch"\nsource = "ready"', 'trigger = "dispatch"\nsource = ["inbox", "ready"]'),
        None,
        "task.dispatch_only_when_dispatchable",
    ),
    "task_state_with_no_way_out": (
        "task.toml",
        ('source = ["blocked", "escalated", "quarantined"]\ndest = "ready"', 'source = ["blocked", "quarantined"]\ndest = "ready"'),
        None,
        None,
    ),
    "missing_domain": ("failure_domains.toml", ("[domains.repository]", "[domains.repo_trouble]"), None, "domains.classified"),
    "stopping_domain_that_retries": (
        "failure_domains.toml",
        ('response = "stop"\nretries_max = 0', 'response = "stop"\nretries_max = 2'),
        None,
        "domains.classified",
    ),
    "missing_invariant": ("invariants.toml", ("[invariants.single_owner]", "[invariants.sole_owner]"), None, "invariants.catalogued"),
}


@pytest.mark.parametrize("case", sorted(k for k, v in BROKEN.items() if v[3]))
def test_broken_spec_fails_the_right_property(case, spec_copy, capsys):
    file, replacement, addition, expected = BROKEN[case]
    if replacement:
        spec_copy.replace(file, *replacement)
    if addition:
        spec_copy.append(file, addition)
    status, failed, out = failing(capsys, spec_copy.root)
    assert status == 1, out
    assert expected in failed, out
    assert "witness:" in out


def test_witness_shows_the_offending_path(spec_copy, capsys):
    spec_copy.append("attempt.toml", SUSPECT_TO_FAILED)
    _status, _failed, out = failing(capsys, spec_copy.root)
    witness = [line for line in out.splitlines() if "witness:" in line and "without passing reconciling" in line]
    assert witness, out
    assert "give_up" in witness[0] and "suspect" in witness[0] and "failed" in witness[0]


def test_state_without_exit_to_terminal_fails_terminal_reachable(spec_copy, capsys):
    # Escalated loses its release row but keeps cancel: still fine. Remove both to strand it.
    spec_copy.replace("task.toml", *BROKEN["task_state_with_no_way_out"][1])
    spec_copy.replace(
        "task.toml",
        '"review", "blocked", "escalated", "quarantined"]\ndest = "cancelled"',
        '"review", "blocked", "quarantined"]\ndest = "cancelled"',
    )
    status, failed, out = failing(capsys, spec_copy.root)
    assert status == 1
    assert {"task.terminal_reachable", "task.cancel_everywhere"} <= failed, out
