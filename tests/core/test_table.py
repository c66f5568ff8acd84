"""The table drives the core: an edit of any column of a row changes what the core accepts or does, and nothing else does.

For each column kind (fence, guards, destination, effects) one scripted
sequence of contract calls runs twice, on the same kind of world (a
MemoryStore, a ManualClock, a LedgerProvider): once with the shipped table,
once with the table a named edit of `spec.edits` makes. The shipped run shows
the shipped behaviour; the edited run shows the core doing what the edited
row says, with no second copy of the row anywhere in the contracts.

Then what a table may not change: a vocabulary the core does not implement
is refused when the table is compiled, naming the file and line. And the
structural rule that keeps the table in charge of the fence: only
`Context.fire` checks it (an AST scan of core/*.py, shown to catch the old
hand-written fence calls).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import shiftchange.core
from shiftchange.core import MemoryStore, Orchestrator, Plan
from shiftchange.core.table import Table, packaged
from shiftchange.spec import SpecError, load_spec
from shiftchange.spec.edits import drop_effect, drop_guard, move_dest, unfence
from shiftchange.testing.rig import FIRST_HYPOTHESIS, World, fence, refused_on, states_passed

SHIPPED = load_spec()


@contextmanager
def world(table: Table) -> Iterator[World]:
    """The reference core running `table` over a fresh MemoryStore, with the kit's manual clock and ledger provider."""

    def make(*, clock, provider, config, reliability):
        return Orchestrator(MemoryStore(), clock, provider, config, reliability, table=table)

    made = World(make)
    try:
        assert made.orchestrator.table is table
        yield made
    finally:
        made.close()


def shipped() -> Table:
    return packaged()


def edited(spec) -> Table:
    table = Table(spec)
    assert table.digest != packaged().digest, "the edit must change what the table decides"
    return table


# ====================================================================== the fence column


def stale_complete(table: Table):
    """A worker whose lease was lost (expired, reconciled, failed; the retry claimed by worker-b) completes with its old fence."""
    with world(table) as w:
        old = w.running(worker_id="worker-a")
        w.expired(old)
        reconciled = w.orchestrator.reconcile_attempt(old.attempt_id)
        assert reconciled.state == "failed", reconciled
        new = w.retried(worker_id="worker-b")
        assert new.attempt_id != old.attempt_id and new.generation > old.generation
        result = w.orchestrator.complete_attempt(*fence(old), "the stale worker's result", "sha-stale")
        event = w.last_event("complete")
        return result, old, new, w.attempt(old.attempt_id), w.attempt(new.attempt_id), event


def test_shipped_complete_is_fenced_so_a_lost_lease_cannot_complete():
    """Goal: with the shipped table, a stale worker's complete is refused and the replacement's Attempt is untouched."""
    result, old, new, old_after, new_after, event = stale_complete(shipped())
    assert not result.accepted and result.code == "expired_lease", result
    assert (old_after.state, old_after.result) == ("failed", None)
    assert (new_after.state, new_after.result, new_after.generation) == ("running", None, new.generation)
    assert not event.accepted and event.attempt_id == old.attempt_id


def test_unfenced_complete_lands_on_the_replacements_attempt_with_the_stale_generation():
    """Goal: unfence(complete): the same call is accepted, lands on the task's current Attempt (the replacement's), and its
    event carries the stale generation the caller presented (the chapter's stale worker recording over a replacement)."""
    table = edited(unfence(SHIPPED, "complete"))
    assert not table.fences("complete") and table.fences("renew")
    result, old, new, old_after, new_after, event = stale_complete(table)
    assert result.accepted and result.state == "verifying", result
    assert (new_after.state, new_after.result, new_after.head_sha) == ("verifying", "the stale worker's result", "sha-stale")
    assert (old_after.state, old_after.result) == ("failed", None)
    assert event.accepted and event.attempt_id == new.attempt_id
    assert event.generation == old.generation != new_after.generation


# ====================================================================== the guards column


def checkpoint_after_expiry(table: Table):
    """The lease holder checkpoints with its own fence after its lease expired (the reaper has not run yet)."""
    with world(table) as w:
        lease = w.running()
        w.clock.set(lease.expires_at + 1)
        result = w.orchestrator.checkpoint(*fence(lease), "step 3 of 5")
        return result, w.attempt(lease.attempt_id)


def test_shipped_checkpoint_needs_a_current_lease():
    result, attempt = checkpoint_after_expiry(shipped())
    assert refused_on(result, "lease_current") and result.code == "expired_lease", result
    assert (attempt.state, attempt.checkpoint) == ("running", None)


def test_dropping_lease_current_from_checkpoint_accepts_a_checkpoint_after_expiry():
    """Goal: drop_guard(checkpoint, lease_current): the guard is not asked, the expired holder's checkpoint is recorded."""
    result, attempt = checkpoint_after_expiry(edited(drop_guard(SHIPPED, "checkpoint", "lease_current")))
    assert result.accepted and result.state == "running", result
    assert attempt.checkpoint == "step 3 of 5"


def retry_without_reason(table: Table):
    """Attempt 1 fails; the loop asks for a retry and gives no reason."""
    with world(table) as w:
        w.failed(w.running())
        result = w.orchestrator.retry("task-1", "", Plan(FIRST_HYPOTHESIS))
        return result, w.store.get_attempts("task-1")


def test_shipped_retry_needs_a_reason():
    result, attempts = retry_without_reason(shipped())
    assert refused_on(result, "reason_given"), result
    assert [a.attempt_id for a in attempts] == ["task-1#1"]


def test_dropping_reason_given_from_the_task_retry_appends_an_attempt_without_a_reason():
    """Goal: drop_guard(retry, reason_given, task): the task table's guard is not asked either; Attempt 2 is appended."""
    result, attempts = retry_without_reason(edited(drop_guard(SHIPPED, "retry", "reason_given", "task")))
    assert result.accepted and result.state == "in_progress", result
    assert [(a.attempt_id, a.state) for a in attempts] == [("task-1#1", "failed"), ("task-1#2", "queued")]


# ====================================================================== the destination column


def completed(table: Table):
    """The lease holder completes its running Attempt."""
    with world(table) as w:
        lease = w.running()
        result = w.orchestrator.complete_attempt(*fence(lease), "all tests pass", "sha-1")
        return result, w.attempt(lease.attempt_id), states_passed(w.store, lease.attempt_id)


def test_shipped_complete_goes_to_verifying():
    result, attempt, path = completed(shipped())
    assert result.state == attempt.state == "verifying"
    assert path == ["queued", "admitted", "claimed", "running", "verifying"]


def test_moving_complete_to_succeeded_skips_verification():
    """Goal: move_dest(complete, succeeded): the worker's word alone ends the Attempt succeeded, never passing verifying."""
    result, attempt, path = completed(edited(move_dest(SHIPPED, "complete", "succeeded")))
    assert result.accepted and result.state == attempt.state == "succeeded", result
    assert path == ["queued", "admitted", "claimed", "running", "succeeded"]
    assert attempt.result == "all tests pass" and attempt.ended_at is not None


def reaped(table: Table):
    """The lease holder vanishes; its lease runs out and the reaper runs."""
    with world(table) as w:
        lease = w.running()
        w.clock.advance(w.config.lease_ttl_s + 1)
        return w.orchestrator.reap(), w.attempt(lease.attempt_id)


def test_shipped_expiry_makes_the_attempt_suspect():
    moved, attempt = reaped(shipped())
    assert moved == [("task-1#1", "suspect")] and attempt.state == "suspect"


def test_moving_expire_to_failed_fails_the_attempt_at_expiry():
    """Goal: move_dest(expire, failed): the reaper's row ends the Attempt failed (the chapter's expiry-is-failure mistake)."""
    moved, attempt = reaped(edited(move_dest(SHIPPED, "expire", "failed")))
    assert moved == [("task-1#1", "failed")] and attempt.state == "failed"


# ====================================================================== the effects column


def renewed(table: Table):
    """The lease holder renews five seconds into its lease."""
    with world(table) as w:
        lease = w.running()
        before = w.attempt(lease.attempt_id)
        w.clock.advance(5)
        result = w.orchestrator.renew_lease(*fence(lease))
        return result, before, w.attempt(lease.attempt_id), w.clock.now() + w.config.lease_ttl_s


def test_shipped_renewal_moves_the_expiry():
    result, before, after, extended = renewed(shipped())
    assert result.accepted and after.expires_at == extended > before.expires_at
    assert result.expires_at == extended


def test_dropping_extend_lease_from_renew_accepts_the_renewal_but_leaves_the_expiry():
    """Goal: drop_effect(renew, extend_lease): the renewal is accepted (its row fires) and writes nothing: expiry stays."""
    result, before, after, _extended = renewed(edited(drop_effect(SHIPPED, "renew", "extend_lease")))
    assert result.accepted, result
    assert (after.expires_at, after.heartbeat_at) == (before.expires_at, before.heartbeat_at)
    assert result.expires_at == before.expires_at


def test_a_guard_named_on_a_row_whose_contract_does_not_gather_its_input_is_named_when_asked():
    """Goal: a table may name any guard on any row, but a guard asked of a call that lacks its input (the claimer's
    workspace, on a renewal) is a design error named with the guard, the trigger and the missing input, never a KeyError."""
    from dataclasses import replace

    from shiftchange.core.vocabulary import Unaskable

    rows = tuple(replace(row, guards=(*row.guards, "workspace_matches")) if row.trigger == "renew" else row for row in SHIPPED.attempt.rows)
    table = edited(replace(SHIPPED, attempt=replace(SHIPPED.attempt, rows=rows)))
    with world(table) as w:
        lease = w.running()
        with pytest.raises(Unaskable, match=r"guard 'workspace_matches' cannot be asked of a 'renew' call.*'workspace'"):
            w.orchestrator.renew_lease(*fence(lease))


def test_shipped_complete_records_the_result():
    result, attempt, _path = completed(shipped())
    assert result.accepted and (attempt.result, attempt.head_sha) == ("all tests pass", "sha-1")


def test_dropping_record_result_from_complete_records_no_result():
    """Goal: drop_effect(complete, record_result): the Attempt moves to verifying and the worker's result is not recorded."""
    result, attempt, _path = completed(edited(drop_effect(SHIPPED, "complete", "record_result")))
    assert result.accepted and attempt.state == "verifying", result
    assert (attempt.result, attempt.head_sha) == (None, None)
    assert attempt.ended_at is not None, "the row's other effect, revoke_authority, still ran"


# ====================================================================== a vocabulary the core does not implement


def refused_table(spec_copy) -> SpecError:
    with pytest.raises(SpecError) as raised:
        Table(load_spec(spec_copy.root))
    return raised.value


def test_a_guard_the_core_does_not_implement_is_refused_with_its_file_and_line(spec_copy):
    """Goal: a vocabulary declaring guard nosuch is refused when compiled, at the line of [guards.nosuch]."""
    spec_copy.replace(
        "attempt.toml", "[guards.lease_issued]\n", '[guards.nosuch]\ndescription = "no core asks it"\n[guards.lease_issued]\n'
    )
    line = spec_copy.line_of("attempt.toml", "[guards.nosuch]")
    error = refused_table(spec_copy)
    assert (Path(error.where.file).name, error.where.line) == ("attempt.toml", line)
    assert f"attempt.toml:{line}:" in str(error) and "'nosuch'" in str(error) and "no implementation" in str(error)


def test_an_effect_declared_with_the_wrong_material_flag_is_refused_with_its_file_and_line(spec_copy):
    """Goal: record_admission (not material in the core) declared material is refused at its line in attempt.toml."""
    header = "[effects.record_admission]\n"
    spec_copy.replace(
        "attempt.toml",
        header + 'description = "Record the admission decision and the budgets it reserved."\nmaterial = false',
        header + 'description = "Record the admission decision and the budgets it reserved."\nmaterial = true',
    )
    line = spec_copy.line_of("attempt.toml", "[effects.record_admission]")
    error = refused_table(spec_copy)
    assert (Path(error.where.file).name, error.where.line) == ("attempt.toml", line)
    assert f"attempt.toml:{line}:" in str(error) and "'record_admission'" in str(error) and "declared material" in str(error)


def test_the_shipped_spec_and_its_copy_compile():
    """Goal: the refusals above are the edits', not the copy's: the shipped files compile."""
    assert Table(SHIPPED).digest == packaged().digest


# ====================================================================== only Context.fire checks the fence

CORE = Path(shiftchange.core.__file__).parent


def _receiver(node: ast.expr) -> str:
    """The dotted text of an attribute chain's receiver (`self._context`, `context.fence`), '?' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_receiver(node.value)}.{node.attr}"
    return "?"


def fence_calls_outside_fire(module: str, source: str) -> list[str]:
    """Where `source` (the text of core/<module>) checks a fence by hand, or asks a context whether a call is fenced.

    Allowed: `<...>.fence.check(...)` (any receiver whose last name mentions a fence) inside `Context.fire` of context.py.
    Never allowed: a call of a method `fenced` on a context (`context.fenced`, `self._context.fenced`, `self.fenced` in
    class Context), nor a `Context.fenced` method for one to call.
    """
    found: list[str] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if module == "context.py" and scope == ("Context",) and node.name == "fenced":
                found.append(f"{module}:{node.lineno}: Context defines fenced()")
            scope = (*scope, node.name)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = _receiver(node.func.value)
            last = receiver.rsplit(".", 1)[-1].lower()
            where = f"{module}:{node.lineno}: {receiver}.{node.func.attr}( in {'.'.join(scope) or 'the module'}"
            if node.func.attr == "check" and "fence" in last and (module, scope) != ("context.py", ("Context", "fire")):
                found.append(where)
            on_context = last in ("context", "_context") or (receiver == "self" and scope[:1] == ("Context",))
            if node.func.attr == "fenced" and on_context:
                found.append(where)
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), ())
    return found


def test_only_context_fire_checks_the_fence():
    """Goal: no contract checks the fence by hand; the fence is asked only where the row says so, in Context.fire."""
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) > 10 and CORE / "context.py" in modules
    found = [hit for path in modules for hit in fence_calls_outside_fire(path.name, path.read_text())]
    assert found == []
    context = (CORE / "context.py").read_text()
    assert ".fence.check(" in context, "Context.fire must still check the fence on a fenced row"


OLD_CORE = {
    # From core/context.py and core/lease.py before the table drove the core (git show 946fa26~1:core/...): the fence was
    # checked by a Context method every fenced contract called by hand, whatever its row said.
    "context.py": """
class Context:
    def fenced(self, tx, attempt, trigger, generation, token, operation_key=None):
        failed = self.fence.check(attempt, generation, token)
        if failed is None:
            return None

    def fire(self, tx, attempt, trigger, actor, holds, presented=None, detail="", operation_key=None, **changes):
        fired = self.attempt_machine.fire(attempt.state, trigger, holds.__getitem__)
""",
    "lease.py": """
class Leases:
    def renew(self, attempt_id, generation, token):
        context = self._context
        with context as tx:
            attempt = context.attempt(tx, attempt_id)
            refused = context.fenced(tx, attempt, "renew", generation, token)
            if refused is not None:
                return refused
""",
    "gateway.py": """
class ToolGateway:
    def grant(self, attempt_id, generation, token, minted):
        with self._context as tx:
            refused = self._context.fenced(tx, attempt, "grant_tool", generation, token, minted)
""",
}


def test_the_scan_flags_the_old_hand_written_fence_calls():
    """Goal: the scan can fail: the old Context.fenced, its fence.check and every contract's call of it are each flagged."""
    found = {module: fence_calls_outside_fire(module, source) for module, source in OLD_CORE.items()}
    assert len(found["context.py"]) == 2, found  # the method itself, and the fence.check inside it (not inside fire)
    assert any("self.fence.check( in Context.fenced" in hit for hit in found["context.py"]), found
    assert found["lease.py"] == ["lease.py:7: context.fenced( in Leases.renew"], found
    assert found["gateway.py"] == ["gateway.py:5: self._context.fenced( in ToolGateway.grant"], found
    assert fence_calls_outside_fire("lease.py", "def f(context):\n    context.fence.check(a, 1, 't')\n")
    assert fence_calls_outside_fire("gateway.py", "def f(seams):\n    LEASE_FENCE.check(a, 1, 't')\n")
    assert not fence_calls_outside_fire("context.py", "class Context:\n    def fire(self):\n        self.table.attempt.fenced(s, t)\n")
