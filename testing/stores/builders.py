"""Records with every field away from its default (so a dropped or mangled column shows), and the helpers that make a
fresh store and seed it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from shiftchange.core import (
    LIMITS,
    Attempt,
    Budget,
    Intent,
    Plan,
    Store,
    StoreLimits,
    Task,
)

from ..checks import expect, expect_equal
from .registry import StoreFactory

# ---- builders: every field away from its default, so a dropped or mangled column shows.


def make_task(task_id: str = "task-1", **overrides: Any) -> Task:
    values: dict[str, Any] = dict(
        task_id=task_id,
        objective="fix the flaky test",
        scope="tests/",
        workspace="repo-a",
        state="ready",
        budget=Budget(
            attempts_max=3, elapsed_max_s=90.5, cost_max_usd=1.25, tokens_max=1000, repeated_signatures_max=2, interruptions_max=1
        ),
        created_at=10.25,
        cost_usd=0.5,
        tokens=42,
        elapsed_s=3.5,
        interruptions=1,
        priority=-7,
        deadline_at=3600.125,
        decision="retry",
        decision_reason="validation failed with a new signature",
    )
    values.update(overrides)
    return Task(**values)


def make_attempt(
    attempt_id: str = "attempt-1", task_id: str = "task-1", number: int = 1, state: str = "running", **overrides: Any
) -> Attempt:
    values: dict[str, Any] = dict(
        attempt_id=attempt_id,
        task_id=task_id,
        number=number,
        state=state,
        created_at=11.0,
        hypothesis="the fixture leaks a port",
        reason="first try at the task",
        plan=Plan(hypothesis="the fixture leaks a port", base_sha="a" * 40, executor="executor/2", model="model/3"),
        worker_id="worker-7",
        generation=4,
        token_digest="d" * 64,
        claimed_at=12.0,
        heartbeat_at=13.5,
        expires_at=43.5,
        manifest_digest="m" * 64,
        worktree="/work/trees/1",
        base_sha="a" * 40,
        head_sha="b" * 40,
        started_at=12.5,
        ended_at=50.0,
        timeout_budget_s=600.0,
        checkpoint="step-3",
        result="tests pass",
        reconciliation="landed",
        failure_domain="provider",
        failure_signature="sig-1",
        evidence="ci run 99",
        cancel_requested=True,
        cancel_reason="operator asked",
        cancel_deadline_at=70.0,
        eligible_at=12.75,
        backoff_s=1.5,
        fallback="model_provider -> small_model",
        cost_usd=0.75,
        tokens=1234,
        elapsed_s=38.0,
    )
    values.update(overrides)
    return Attempt(**values)


def make_intent(key: str = "create-pr:task-1:" + "b" * 40, attempt_id: str = "attempt-1", **overrides: Any) -> Intent:
    values: dict[str, Any] = dict(
        key=key,
        task_id="task-1",
        attempt_id=attempt_id,
        operation="create-pr",
        identity="b" * 40,
        request='{"title": "fix"}',
        minted_at=20.0,
        granted_at=21.0,
        deadline_at=51.0,
        receipt="pr-17",
        dependency="model_provider",
        outcome="failed",
        result="created",
    )
    values.update(overrides)
    return Intent(**values)


def event_fields(task_id: str = "task-1", **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        at=30.0,
        actor="worker",
        kind="renew",
        task_id=task_id,
        attempt_id="attempt-1",
        accepted=False,
        reason="stale generation",
        from_state="running",
        to_state="running",
        generation=3,
        worker_id="worker-7",
        detail="presented 3, current 4",
        code="stale_fence",
        late=True,
        expires_at=44.0,
        operation_key="create-pr:task-1:" + "b" * 40,
        retries=2,
    )
    values.update(overrides)
    return values


def minimal_attempt(attempt_id: str, task_id: str = "task-1", number: int = 1, state: str = "queued") -> Attempt:
    return Attempt(attempt_id=attempt_id, task_id=task_id, number=number, state=state, created_at=1.0, hypothesis="h")


def minimal_task(task_id: str) -> Task:
    return Task(task_id=task_id, objective="o", scope="s", workspace="w", state="inbox", budget=Budget(), created_at=0.0)


@contextmanager
def fresh(make_store: StoreFactory) -> Iterator[Store]:
    """A store from the factory, closed when the block ends."""
    store = make_store()
    try:
        yield store
    finally:
        store.close()


def seed(store: Store, *records: Task | Attempt | Intent) -> None:
    """Insert records in one committed transaction, in order."""
    with store.transaction() as tx:
        for record in records:
            {Task: tx.insert_task, Attempt: tx.insert_attempt, Intent: tx.insert_intent}[type(record)](record)


def _same_record(read: object, written: object, what: str) -> None:
    """Equal field by field, each field's type kept (a bool stays a bool, None stays None, a Budget a Budget)."""
    expect(read is not None, f"{what}: the store has no record of it")
    expect_equal(type(read), type(written), f"{what}: record type")
    for field in fields(written):  # type: ignore[arg-type]
        got, wanted = getattr(read, field.name), getattr(written, field.name)
        expect_equal(got, wanted, f"{what}: field {field.name}")
        if wanted is None or isinstance(wanted, bool | str | Budget | Plan):
            expect_equal(type(got), type(wanted), f"{what}: type of field {field.name}")


def limits_of(store: Store) -> StoreLimits:
    """The limits the store declares, checked to be a StoreLimits no wider than LIMITS (the kit writes up to these)."""
    declared = getattr(store, "limits", LIMITS)
    expect(isinstance(declared, StoreLimits), f"store.limits must be a shiftchange.core.StoreLimits, not {type(declared).__name__}")
    wider = declared.beyond(LIMITS)
    expect(not wider, f"store.limits declares {wider} wider than the core ever writes ({LIMITS}): declare at most LIMITS")
    return declared
