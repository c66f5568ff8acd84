"""The store suite: every field the core writes by update comes back, and ids never alias and sort by code point."""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from typing import Any

from shiftchange.core import (
    Attempt,
    Intent,
    Task,
)
from shiftchange.core.store import WRITABLE

from ..checks import Check, collector, expect, expect_equal
from .builders import event_fields, fresh, make_attempt, make_intent, make_task, minimal_attempt, minimal_task, seed
from .history import _ids, _implements
from .registry import StoreFactory

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

# ---- every field the core writes by update comes back, not only those an insert wrote


def _away_from_defaults() -> dict[type, dict[str, Any]]:
    """For each record type, a value for every field `store.WRITABLE` lets an update write, none of them the seeded record's."""
    task, attempt, intent = make_task(), make_attempt(previous_attempt_id="attempt-1"), make_intent(attempt_id="attempt-2")
    return {
        kind: {name: getattr(record, name) for name in WRITABLE[kind]}
        for kind, record in ((Task, task), (Attempt, attempt), (Intent, intent))
    }


def _update_seeds() -> tuple[Task, Attempt, Attempt, Intent]:
    """The records the update check seeds: defaults everywhere (an intent of Attempt 1, Attempt 2 to hand it to)."""
    minimal_intent = Intent("k-1", "task-1", "attempt-1", "push", "sha", "", 1.0)
    return minimal_task("task-1"), minimal_attempt("attempt-1"), minimal_attempt("attempt-2", number=2), minimal_intent


@_check
def every_writable_field_round_trips_after_an_update(make_store: StoreFactory) -> None:
    """Every field the core writes by update (store.WRITABLE) comes back after an update, exactly, away from its default, its type kept."""
    values = _away_from_defaults()
    targets = ((Task, "task", "task-1"), (Attempt, "attempt", "attempt-2"), (Intent, "intent", "k-1"))
    with fresh(make_store) as store:
        seed(store, *_update_seeds())
        with store.transaction() as tx:
            for kind, name, identity in targets:
                getattr(tx, "update_" + name)(getattr(tx, name)(identity), **values[kind])
                _same_fields(getattr(tx, name)(identity), values[kind], f"the {name} read in the updating transaction")
        readers = {"task": store.get_task, "attempt": store.get_attempt, "intent": store.get_intent}
        for kind, name, identity in targets:
            _same_fields(readers[name](identity), values[kind], f"the {name} after an update of every writable field")


def _same_fields(record: object, values: dict[str, Any], what: str) -> None:
    expect(record is not None, f"{what}: the store has no record of it")
    for name, wanted in sorted(values.items()):
        got = getattr(record, name)
        expect_equal(got, wanted, f"{what}: field {name}")
        expect_equal(type(got), type(wanted), f"{what}: type of field {name}")


# ---- ids: no two alias, and every promised order is code-point order

ALIASING_IDS = ("task-1", "task-10", "task-1 ", "task", "Task-1", "TASK-1", "caf\u00e9", "cafe\u0301", "CAF\u00c9")
"""Ids a store must keep apart: prefixes of one another, case variants, and café in NFC and NFD (equal once normalised)."""
assert unicodedata.normalize("NFC", ALIASING_IDS[7]) == ALIASING_IDS[6], "the NFD café must normalise to the NFC one"

ORDERED_IDS = (
    "a", "B", "b", "\x00", "a\x00", "a\x00b", "a\x01", "\x01", "\ufdd0", "\ufdd0x", "\uffff", "\U0001f600",
    "caf\u00e9", "cafe\u0301", "\u00e9", "Z", " ", "~", "a\U0010ffff", "a\ufffd",
)  # fmt: skip
"""Ids in no particular order; a store lists them as Python's `sorted` does (NUL, U+0001, U+FDD0, U+FFFF, astral characters)."""


@_check
def ids_that_differ_by_a_prefix_case_or_normalisation_never_alias(make_store: StoreFactory) -> None:
    """Ids that are prefixes of one another, differ by case, or by Unicode normalisation name different records in every read."""
    with fresh(make_store) as store:
        for n, task_id in enumerate(ALIASING_IDS):
            task = replace(minimal_task(task_id), objective=f"objective {n}", workspace=task_id)
            attempt = replace(minimal_attempt("a:" + task_id, task_id, state="admitted"), created_at=float(n))
            seed(store, task, attempt, Intent("k:" + task_id, task_id, "a:" + task_id, "push", str(n), "", 1.0))
            with store.transaction() as tx:
                tx.append_event(**event_fields(task_id, attempt_id="a:" + task_id, detail=str(n)))
        for n, task_id in enumerate(ALIASING_IDS):
            what = f"id {task_id!r}"
            expect_equal(getattr(store.get_task(task_id), "objective", None), f"objective {n}", f"get_task of {what}: its objective")
            expect_equal(
                getattr(store.get_attempt("a:" + task_id), "task_id", None), task_id, f"get_attempt of {'a:' + task_id!r}: its task"
            )
            expect_equal(_ids(store.get_attempts(task_id)), ["a:" + task_id], f"attempts_of {what}")
            expect_equal([i.key for i in store.get_intents("a:" + task_id)], ["k:" + task_id], f"intents_of {'a:' + task_id!r}")
            expect_equal(getattr(store.get_intent("k:" + task_id), "identity", None), str(n), f"get_intent of {'k:' + task_id!r}")
            expect_equal([e.detail for e in store.events(task_id=task_id)], [str(n)], f"events(task_id={task_id!r})")
            with store.transaction() as tx:
                expect_equal(_ids(tx.claimable(["admitted"], 50, task_id)), ["a:" + task_id], f"claimable in workspace {task_id!r}")


@_check
def every_promised_order_is_code_point_order(make_store: StoreFactory) -> None:
    """attempts_in, tasks_in, intents_of and claimable's ties go by code point, as Python's sorted (NUL, U+FDD0); attempts_of by number."""
    ordered = sorted(ORDERED_IDS)
    with fresh(make_store) as store:
        seed(store, *(replace(minimal_task(task_id), state="ready") for task_id in ORDERED_IDS))
        seed(store, *(replace(minimal_attempt(task_id, task_id, state="admitted"), created_at=5.0) for task_id in ORDERED_IDS))
        seed(store, *(Intent(task_id, ORDERED_IDS[0], ORDERED_IDS[0], "push", "sha", "", 1.0) for task_id in ORDERED_IDS))
        seed(store, minimal_task("numbered"), *(minimal_attempt(f"n-{13 - n:02d}", "numbered", n) for n in range(1, 13)))
        with store.transaction() as tx:
            expect_equal(_ids(tx.attempts_in(["admitted"])), ordered, "attempts_in(['admitted']), by attempt id")
            expect_equal(_ids(tx.claimable(["admitted"], 50)), ordered, "claimable(['admitted']) with created_at tied, by attempt id")
            expect_equal([i.key for i in tx.intents_of(ORDERED_IDS[0])], ordered, "intents_of, by key")
            expect_equal([a.number for a in tx.attempts_of("numbered")], list(range(1, 13)), "attempts_of, by number (1..12)")
            if _implements(tx, "tasks_in"):
                expect_equal(_ids(tx.tasks_in(["ready"])), ordered, "tasks_in(['ready']), by task id")
