"""Mutants: every single-point change of a row, counted by kind on a small hand-made table, each one change and no more."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from shiftchange.lab.mutants import KINDS, MutantError, check_kinds, mutants_of
from shiftchange.spec.edits import drop_row, negate_guard, widen_source
from shiftchange.spec.loader import packaged_spec
from shiftchange.spec.model import STAY, Row, Where


def _row(index: int, trigger: str, sources: tuple[str, ...], dest: str, guards=(), effects=(), fenced=False, actor="worker") -> Row:
    return Row(index, trigger, sources, dest, actor, tuple(guards), tuple(effects), fenced, Where("hand.toml", 10 + index))


@pytest.fixture
def small():
    """The packaged spec's vocabulary and states (13 Attempt states, 9 Task states) with three hand-made rows per machine."""
    spec = packaged_spec()
    attempt = replace(
        spec.attempt,
        rows=(
            _row(0, "claim", ("admitted",), "claimed", ("workspace_matches", "!lease_current"), ("issue_lease", "freeze_manifest")),
            _row(1, "start", ("claimed",), "running", ("lease_current",), ("record_start",), fenced=True),
            _row(2, "renew", ("claimed", "running"), STAY, ("lease_current",), ("extend_lease",), fenced=True),
        ),
    )
    task = replace(
        spec.task,
        rows=(
            _row(0, "accept", ("inbox",), "ready", actor="operator"),
            _row(1, "cancel", ("inbox", "ready"), "cancelled", ("no_active_attempt",), actor="operator"),
            _row(2, "release", ("blocked",), STAY, actor="operator"),
        ),
    )
    return replace(spec, attempt=attempt, task=task)


def test_mutants_are_counted_by_kind_on_a_small_table(small):
    """Goal: one mutant per guard (twice: dropped, negated), fenced row, other destination, effect, row and source not left."""
    assert (len(small.attempt.states), len(small.task.states)) == (13, 9)
    counts = Counter(mutant.kind for mutant in mutants_of(small))
    assert counts == {
        "drop_guard": 2 + 1 + 1 + 1,  # attempt rows: 2, 1, 1; task: the cancel row's 1
        "negate_guard": 5,
        "unfence": 2,
        "move_dest": 12 + 12 + 13 + 8 + 8 + 8,  # every state but the row's own; "=source" rows: every state, but not a lone source
        "drop_effect": 2 + 1 + 1,
        "drop_row": 6,
        "widen_source": 12 + 12 + 11 + 8 + 7 + 8,
    }
    assert Counter(m.kind for m in mutants_of(small, ["unfence", "drop_row"])) == {"unfence": 2, "drop_row": 6}


def test_each_mutant_changes_its_one_row_and_no_other(small):
    """Goal: a mutant's spec differs from the base in the row it names, and only there; every mutant's spec is another."""
    digests = set()
    for mutant in mutants_of(small):
        changed = mutant.apply(small)
        digests.add(changed.digest)
        machine, base = changed.machines[mutant.machine], small.machines[mutant.machine]
        if mutant.kind == "drop_row":
            assert len(machine.rows) == len(base.rows) - 1
            assert [row.index for row in machine.rows] == list(range(len(machine.rows)))
            continue
        differing = [number for number, (a, b) in enumerate(zip(machine.rows, base.rows, strict=True), 1) if a != b]
        assert differing == [mutant.row], mutant.id
        other = "task" if mutant.machine == "attempt" else "attempt"
        assert changed.machines[other] == small.machines[other]
    assert small.digest not in digests
    assert len(digests) == len(mutants_of(small))


def test_the_new_edits_do_what_they_say(small):
    """Goal: negate flips a guard's sense, drop_row removes one row and renumbers, widen adds one source; a no-op is refused."""
    negated = negate_guard(small, "attempt", 1, "lease_current")
    assert negated.attempt.rows[0].guards == ("workspace_matches", "lease_current")
    assert negate_guard(negated, "attempt", 1, "lease_current").attempt.rows[0].guards == small.attempt.rows[0].guards
    dropped = drop_row(small, "task", 2)
    assert [row.trigger for row in dropped.task.rows] == ["accept", "release"]
    assert dropped.task.rows[1].where == small.task.rows[2].where
    assert widen_source(small, "attempt", 2, "suspect").attempt.rows[1].sources == ("claimed", "suspect")
    with pytest.raises(ValueError, match="no row of the attempt machine changes"):
        widen_source(small, "attempt", 2, "claimed")
    with pytest.raises(ValueError, match="rows 1 to 3, not 4"):
        drop_row(small, "attempt", 4)
    with pytest.raises(ValueError, match="no machine 'nosuch'"):
        drop_row(small, "nosuch", 1)


def test_an_unknown_kind_is_refused_and_a_mutant_of_another_table_does_not_fit(small):
    with pytest.raises(MutantError, match="unknown mutant kind 'drop_state'"):
        check_kinds(["unfence", "drop_state"])
    assert check_kinds([]) == KINDS
    assert check_kinds(["widen_source", "unfence"]) == ("unfence", "widen_source")
    mutant = next(m for m in mutants_of(packaged_spec(), ["drop_guard"]) if m.row > 3)
    with pytest.raises(MutantError, match="does not fit this spec"):
        mutant.apply(small)
