"""Refusals are data: a code, the guards that failed, the state, lateness; events carry them, the lease expiry and the key.

Each test drives the reference core into one kind of refusal and checks the
fields a caller decides by (never the reason text), on every store (the
`store` fixture: memory, SQLite, PostgreSQL), and that the refused event in
the history says the same. The last tests check the
SQLite schema: a version-2 file is migrated in place, its old history keeping
what it said, and a file of an unknown version is refused.
"""

from __future__ import annotations

import sqlite3

import pytest

from shiftchange.core import REFUSAL_CODES, BreakerConfig, Grant, Refused, ReliabilityConfig, StoreError
from shiftchange.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from shiftchange.testing.rig import WORKSPACE, World, fence

LEASE_TTL_S = 30.0


def test_a_stale_fence_is_late_with_its_code_on_the_answer_and_the_event(store):
    """A renewal under a replaced lease: code stale_fence, late, no guard asked (the fence refused first)."""
    world = World.over(store)
    attempt_id, generation, token = fence(world.running())
    refused = world.orchestrator.renew_lease(attempt_id, generation + 1, token)
    assert isinstance(refused, Refused)
    assert (refused.code, refused.late, refused.guards, refused.state) == ("stale_fence", True, (), "running")
    event = world.last_event("renew")
    assert (event.accepted, event.code, event.late) == (False, "stale_fence", True)


def test_a_forged_token_is_refused_but_not_late(store):
    """A token that never matched proved nothing: code forged, and not late (it never had authority to lose)."""
    world = World.over(store)
    attempt_id, generation, _token = fence(world.running())
    refused = world.orchestrator.checkpoint(attempt_id, generation, "not-the-token", "tools-done")
    assert (refused.code, refused.late) == ("forged", False)
    assert (world.last_event("checkpoint").code, world.last_event("checkpoint").late) == ("forged", False)


def test_a_call_after_expiry_is_late_naming_the_guard_and_the_expiry(store):
    """After the lease ran out, a completion is refused expired_lease with lease_current failed; its event carries the expiry."""
    world = World.over(store)
    held = fence(world.running())
    expires_at = world.store.get_attempt(held[0]).expires_at
    world.clock.advance(LEASE_TTL_S + 1.0)
    refused = world.orchestrator.complete_attempt(*held, "opened the pull request")
    assert (refused.code, refused.late, refused.guards) == ("expired_lease", True, ("lease_current",))
    event = next(e for e in world.store.events() if e.kind == "complete")
    assert (event.code, event.late, event.expires_at) == ("expired_lease", True, expires_at)


def test_a_call_out_of_order_is_no_row_with_the_state_it_found(store):
    """A second start finds the Attempt running: code no_row, state running, nothing late."""
    world = World.over(store)
    held = fence(world.running())
    refused = world.orchestrator.start_attempt(*held)
    assert (refused.code, refused.state, refused.late, refused.guards) == ("no_row", "running", False, ())


def test_an_open_circuit_is_its_own_code_in_the_provider_domain(store):
    """Once the breaker opened, a grant is refused open_circuit, counted as provider, with how long to wait."""
    world = World.over(store, ReliabilityConfig(breaker=BreakerConfig(failures_to_open=1, cool_down_s=10.0)))
    held = fence(world.running())
    grant = world.orchestrator.grant_tool(*held, "create-pr", "sha-1")
    assert isinstance(grant, Grant)
    assert world.orchestrator.report_call_failure(*held, grant.key, "503 from the code host").accepted
    refused = world.orchestrator.grant_tool(*held, "push", "sha-1")
    assert (refused.code, refused.domain, refused.guards) == ("open_circuit", "provider", ("circuit_allows",))
    assert refused.retry_after_s == pytest.approx(10.0)


def test_a_spend_past_the_ceiling_is_code_budget(store):
    world = World.over(store, ReliabilityConfig(attempt_spend_max_usd=1.0))
    held = fence(world.running())
    refused = world.orchestrator.grant_tool(*held, "model-call", "step-0", cost_usd=2.0, dependency="model_provider")
    assert (refused.code, refused.guards, refused.domain) == ("budget", ("spend_within_budget",), None)


def test_a_claim_with_nothing_to_claim_is_not_found(store):
    world = World.over(store)
    world.orchestrator.create_task("task-1", "make the flaky test pass", WORKSPACE)
    refused = world.orchestrator.claim_attempt("task-1", "worker-a", WORKSPACE)
    assert (refused.code, refused.state) == ("not_found", None)


def test_events_carry_the_operation_key_and_the_lease_expiry_as_fields(store):
    """The grant's, the receipt's and the call failure's events name their key; a claim's and a renewal's their expiry."""
    world = World.over(store)
    held = fence(world.running())
    claimed = world.last_event("claim")
    assert claimed.expires_at == world.clock.now() + LEASE_TTL_S and claimed.operation_key is None
    world.clock.advance(5.0)
    renewal = world.orchestrator.renew_lease(*held)
    assert world.last_event("renew").expires_at == renewal.expires_at == world.clock.now() + LEASE_TTL_S
    grant = world.orchestrator.grant_tool(*held, "create-pr", "sha-1")
    assert world.orchestrator.record_receipt(*held, grant.key, "pr-7").accepted
    second = world.orchestrator.grant_tool(*held, "push", "sha-1")
    assert world.orchestrator.report_call_failure(*held, second.key, "timeout").accepted
    keys = [(e.kind, e.operation_key) for e in world.store.events() if e.operation_key is not None]
    expected = [("grant_tool", grant.key), ("record_receipt", grant.key), ("grant_tool", second.key)]
    assert keys == [*expected, ("report_call_failure", second.key)]
    assert world.last_event("create").expires_at is None


def test_every_code_the_core_writes_is_in_the_vocabulary(store):
    """The vocabulary is closed: a Refused with another code cannot be made, and every refused event's code is known."""
    with pytest.raises(AssertionError):
        Refused("why", "something_new")
    world = World.over(store)
    attempt_id, generation, token = fence(world.running())
    world.orchestrator.renew_lease(attempt_id, generation + 1, token)
    world.orchestrator.start_attempt(attempt_id, generation, token)
    codes = {event.code for event in world.store.events() if not event.accepted}
    assert codes and codes <= REFUSAL_CODES.keys()
    assert all(event.code is None and not event.late for event in world.store.events() if event.accepted)


def test_fence_codes_are_exactly_what_the_reference_fence_answers():
    """Workers read a refusal's `state` only when the table, not the fence, refused: FENCE_CODES must name every fence answer."""
    from dataclasses import replace

    from shiftchange.core import Attempt
    from shiftchange.core.fence import LeaseFence, token_digest
    from shiftchange.core.results import FENCE_CODES

    leased = Attempt("t1#1", "t1", 1, "running", 0.0, "h", generation=2, token_digest=token_digest("right"), expires_at=9.0)
    fence = LeaseFence()
    answers = {
        fence.check(replace(leased, token_digest=None), 2, "right")[0],
        fence.check(leased, 1, "right")[0],
        fence.check(leased, 2, "wrong")[0],
    }
    assert fence.check(leased, 2, "right") is None
    assert answers == FENCE_CODES and REFUSAL_CODES.keys() >= FENCE_CODES


# --------------------------------------------------------- SQLite schema


def _as_version_2(path) -> None:
    """Turn a current file into what schema version 2 wrote: no code, late, expires_at, operation_key or retries
    columns, no tasks_by_state index, no leaders table."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        for column in ("code", "late", "expires_at", "operation_key", "retries"):
            raw.execute(f"ALTER TABLE events DROP COLUMN {column}")
        raw.execute("DROP INDEX tasks_by_state")
        raw.execute("DROP TABLE leaders")
        raw.execute("PRAGMA user_version = 2")
    finally:
        raw.close()


def test_a_version_2_file_is_migrated_and_its_history_keeps_what_it_said(tmp_path):
    """Opening a version-2 store adds the columns; a refusal v2 worded late is marked late, a grant's key is filled in."""
    path = tmp_path / "old.sqlite"
    with SQLiteStore(path) as store:
        world = World.over(store)
        attempt_id, generation, token = fence(world.running())
        grant = world.orchestrator.grant_tool(attempt_id, generation, token, "create-pr", "sha-1")
        world.orchestrator.renew_lease(attempt_id, generation + 1, token)
        before = [(e.seq, e.kind, e.accepted, e.reason, e.detail) for e in store.events()]
    _as_version_2(path)
    with SQLiteStore(path) as store:
        events = store.events()
        assert [(e.seq, e.kind, e.accepted, e.reason, e.detail) for e in events] == before
        late = [e for e in events if e.late]
        assert [(e.kind, e.code) for e in late] == [("renew", "stale_fence")]
        assert [e.operation_key for e in events if e.kind == "grant_tool"] == [grant.key]
        assert all(e.expires_at is None for e in events)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    raw.close()
    with SQLiteStore(path) as store:  # a migrated file opens as a current one, and keeps working
        world = World.over(store)
        world.clock.set(100.0)
        assert world.running("task-2").attempt_id == "task-2#1"


@pytest.mark.parametrize("version", [1, SCHEMA_VERSION + 1])
def test_a_file_of_an_unknown_schema_version_is_refused(tmp_path, version):
    path = tmp_path / "other.sqlite"
    SQLiteStore(path).close()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(f"PRAGMA user_version = {version}")
    raw.close()
    with pytest.raises(StoreError, match=f"schema version {version}"):
        SQLiteStore(path)
