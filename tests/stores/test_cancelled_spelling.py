"""A store written before the Task state `canceled` was spelled `cancelled` opens with its tasks and history in the new spelling.

Each test cancels a dispatched task on the current code (so the Task and its
Attempt both end `cancelled`), turns the store back into what the previous
schema version held by writing the old spelling into the task and its
task-level events with plain SQL, and opens it again: the task reads back
`cancelled`, the history is what it was before the round trip, event for
event, and the store keeps working.
"""

from __future__ import annotations

import sqlite3

import pytest

from shiftchange.core import MemoryStore
from shiftchange.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from shiftchange.testing.rig import World

OLD = "canceled"
NEW = "cancelled"


def cancelled_task(store) -> list:
    """Dispatch task-1 and cancel it (its unclaimed Attempt is cancelled too); the history it leaves."""
    world = World.over(store)
    world.dispatched("task-1")
    assert world.orchestrator.cancel_task("task-1", "the objective was withdrawn").accepted
    with store.transaction() as tx:
        assert tx.task("task-1").state == NEW and tx.attempt("task-1#1").state == NEW
    return store.events()


def task_level_seqs(events: list) -> list[int]:
    """The events that moved the Task into or out of `cancelled`: the ones the old code wrote `canceled` in."""
    seqs = [event.seq for event in events if event.attempt_id is None and NEW in (event.from_state, event.to_state)]
    assert seqs, "the cancel must leave a task-level event naming the state, or the old spelling is never in the history"
    return seqs


def old_spelling(execute, placeholder: str, seqs: list[int]) -> None:
    """Write what the previous version stored: the Task state and its task-level events spelled `canceled`."""
    execute(f"UPDATE tasks SET state = {placeholder} WHERE task_id = {placeholder}", (OLD, "task-1"))
    for seq in seqs:
        for column in ("from_state", "to_state"):
            execute(f"UPDATE events SET {column} = {placeholder} WHERE seq = {placeholder} AND {column} = {placeholder}", (OLD, seq, NEW))


def still_works(store) -> None:
    """The migrated task is the terminal state the machine knows (a second cancel: no row leaves it), and new work runs."""
    world = World.over(store)
    again = world.orchestrator.cancel_task("task-1", "once more")
    assert not again.accepted and (again.code, again.state) == ("no_row", NEW)
    assert world.dispatched("task-2") == "task-2#1"


def test_an_sqlite_file_of_version_4_is_migrated_to_the_new_spelling(tmp_path):
    """Goal: opening a version-4 file holding `canceled` rewrites the task and its history, and records version 5."""
    path = tmp_path / "old.sqlite"
    with SQLiteStore(path) as store:
        before = cancelled_task(store)
    raw = sqlite3.connect(path, isolation_level=None)
    old_spelling(raw.execute, "?", task_level_seqs(before))
    raw.execute("PRAGMA user_version = 4")
    assert raw.execute("SELECT count(*) FROM events WHERE to_state = ?", (OLD,)).fetchone()[0] >= 1
    raw.close()
    with SQLiteStore(path) as store:
        with store.transaction() as tx:
            assert tx.task("task-1").state == NEW
            assert [task.task_id for task in tx.tasks_in([NEW])] == ["task-1"]
        assert store.events() == before
        still_works(store)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (5,)
    raw.close()


@pytest.mark.heavy
def test_a_postgresql_schema_of_version_4_is_migrated_to_the_new_spelling(make_postgres_store):
    """Goal: migration 5 rewrites a version-4 schema's `canceled` task and history; the store opens and keeps working."""
    import psycopg

    from shiftchange.stores.postgres import migrate

    store = make_postgres_store()
    before = cancelled_task(store)
    store.close()
    with psycopg.connect(make_postgres_store.url, autocommit=True) as connection:
        connection.execute(f'SET search_path TO "{store.schema}"')
        old_spelling(connection.execute, "%s", task_level_seqs(before))
        connection.execute("DELETE FROM schema_migrations WHERE version = 5")
        assert connection.execute("SELECT count(*) FROM events WHERE to_state = %s", (OLD,)).fetchone()[0] >= 1
    with pytest.raises(Exception, match="migrate"):  # a version-4 schema is not opened as it is when told not to migrate
        make_postgres_store(schema=store.schema, migrate=False)
    assert migrate(make_postgres_store.url, store.schema) == [5]
    again = make_postgres_store(schema=store.schema)
    with again.transaction() as tx:
        assert tx.task("task-1").state == NEW
        assert [task.task_id for task in tx.tasks_in([NEW])] == ["task-1"]
    assert again.events() == before
    still_works(again)


def test_the_memory_store_keeps_nothing_to_migrate():
    """Goal: the new spelling is what the core writes on every store, the memory store included (it has no file to migrate)."""
    before = cancelled_task(MemoryStore())
    assert all(OLD not in (event.from_state, event.to_state) for event in before)
