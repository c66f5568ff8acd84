"""The store suite: values at their limits, as a real backend's column types, sizes and lookups meet them.

The other round trips use the kit's own small values. A backend changes
other values: a `VARCHAR(64)` truncates, a byte-counted size refuses 4-byte
characters early, a millisecond timestamp drops the last digits of a lease's
expiry, a 32-bit float rounds a budget, a `LIKE` lookup lets `_` match any
character. So these checks write values at exactly the limits the store
holds (`Store.limits`, at most `shiftchange.core.LIMITS`): ids and texts of
the longest length, in full Unicode, counted in characters; times at today's
epoch with sub-millisecond parts; every field of every record away from its
default; keys holding pattern metacharacters. The fixed examples at the limits
come first; then Hypothesis draws more (`LIMIT_EXAMPLES` each, derandomized,
so a run is repeatable). Without Hypothesis installed those draws are
skipped, saying what to install; the fixed examples still run.

The last check holds the core to its side: a store's declared limits are no
wider than what the core may write, and the reference core refuses a value
one character past them with InputError, changing nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from shiftchange.core import (
    Attempt,
    Budget,
    InputError,
    Intent,
    Leader,
    Plan,
    Task,
)

from ..checks import Check, collector, expect, expect_equal, expect_raises
from .builders import _same_record, event_fields, fresh, limits_of, make_attempt, make_intent, make_task, seed
from .history import _admitted, _implements, _reference
from .registry import LIMIT_EXAMPLES, TODAY_S, StoreFactory

DRAWN_TEXT_CHARS_MAX = 2_000
"""The longest text Hypothesis draws (the fixed examples are at the store's limit; the draws vary content, not length)."""
DRAWN_TIMES_BEFORE_S = 10 * 86_400.0
"""How far before TODAY_S the drawn times reach."""
DRAWN_TIMES_AFTER_S = 365 * 86_400.0
"""How far after TODAY_S the drawn times reach."""
DRAWN_STEP_MAX_S = 600.0
"""The largest gap between the times of one drawn record."""

CHECKS: list[Check] = []
"""This module's checks, in the order they are defined (the suite's order within it)."""
_check = collector(CHECKS)

ASTRAL = "\U0001f680"
"""A character of four UTF-8 bytes and two UTF-16 code units: a limit counted in bytes or code units is reached early."""
METACHARACTERS = ("%", "_", "*", "?", "[", "]", "\\", ".", "^", "$", "+")
"""Characters a pattern lookup (`LIKE`, `GLOB`, a regular expression, a wildcard scan) reads as more than themselves."""


def _long(length: int, seed_text: str) -> str:
    """A text of exactly `length` characters: `seed_text` and then astral characters (4 UTF-8 bytes each)."""
    head = seed_text[:length]
    return head + ASTRAL * (length - len(head))


def _hypothesis() -> Any:
    """The Hypothesis modules, or None when it is not installed (the draws are then skipped, the fixed examples still run)."""
    try:
        import hypothesis
        from hypothesis import strategies
    except ModuleNotFoundError as error:
        if error.name != "hypothesis":
            raise
        return None
    return hypothesis, strategies


def _draws(check: Callable[..., None], **strategies: Any) -> None:
    """Run `check` on `LIMIT_EXAMPLES` draws of the given strategies (a function of the strategies module each)."""
    found = _hypothesis()
    if found is None:
        return  # the fixed examples ran; the report of the whole run says Hypothesis is missing (see `values_are_drawn_by_hypothesis`)
    hypothesis, st = found
    settings = hypothesis.settings(
        max_examples=LIMIT_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    drawn = {name: make(st) for name, make in strategies.items()}
    settings(hypothesis.given(**drawn)(check))()


def _unicode(st: Any, size_min: int, size_max: int) -> Any:
    """Any Unicode text a UTF-8 codec can encode (no lone surrogates), NUL and line breaks included."""
    return st.text(st.characters(codec="utf-8"), min_size=size_min, max_size=size_max)


@_check
def values_are_drawn_by_hypothesis(make_store: StoreFactory) -> None:
    """The checks of values at their limits draw more than their fixed examples with Hypothesis: install it to run them whole."""
    if _hypothesis() is None:
        from ..checks import skip

        skip("Hypothesis is not installed: the limit checks ran their fixed examples only (pip install 'shiftchange[testing]')")


@_check
def ids_at_their_limit_round_trip_and_look_up_in_full_unicode(make_store: StoreFactory) -> None:
    """Ids of the longest length the store holds, any Unicode, counted in characters, round trip and find their records."""
    numbers = itertools.count()
    with fresh(make_store) as store:
        limits = limits_of(store)

        def round_trip(task_id: str, other: str) -> None:
            attempt_id = (task_id + "#1" + other * limits.id_chars_max)[: limits.id_chars_max]
            workspace = (f"w{next(numbers)}-" + other * limits.id_chars_max)[: limits.id_chars_max]
            task = make_task(task_id, workspace=workspace, state="running")
            attempt = make_attempt(attempt_id, task_id, worker_id=workspace, state="admitted", previous_attempt_id=attempt_id)
            key = (f"key-{next(numbers)}-" + other * limits.key_chars_max)[: limits.key_chars_max]
            intent = make_intent(key, attempt_id, task_id=task_id, identity=workspace, dependency=workspace)
            seed(store, task, attempt, intent)
            with store.transaction() as tx:
                tx.append_event(**event_fields(task_id, attempt_id=attempt_id, worker_id=workspace, actor=workspace, operation_key=key))
                expect_equal(
                    [a.attempt_id for a in tx.claimable(["admitted"], 5, workspace)], [attempt_id], "claimable by a long workspace"
                )
                expect_equal([a.attempt_id for a in tx.attempts_of(task_id)], [attempt_id], "attempts_of a long task id")
                expect_equal([i.key for i in tx.intents_of(attempt_id)], [intent.key], "intents_of a long attempt id")
            what = f"ids of {len(task_id)} and {len(attempt_id)} characters ({task_id[:12]!r}...)"
            _same_record(store.get_task(task_id), task, f"a task with {what}")
            _same_record(store.get_attempt(attempt_id), attempt, f"an Attempt with {what}")
            _same_record(store.get_intent(intent.key), intent, f"an intent with {what}")
            events = store.events(task_id=task_id)
            expect_equal([e.operation_key for e in events], [key], f"the history, a key of {len(key)} characters, of the task with {what}")

        top = limits.task_id_chars_max
        round_trip(_long(top, "t-"), "w")
        round_trip(_long(top, "\u00e9\u4e2d\u05e9"), "\U00010348")
        round_trip(("x" * top)[:-1] + "\U0010ffff", "\u0000")

        def drawn(tail: str, other: str) -> None:
            # Unique by a number in front; the drawn tail (trailing spaces included: a PAD SPACE collation would alias them).
            round_trip(f"{next(numbers):05d}{tail}", other)

        _draws(drawn, tail=lambda st: _unicode(st, top - 12, top - 5), other=lambda st: _unicode(st, 1, 1))


@_check
def texts_at_their_limit_round_trip_counted_in_characters(make_store: StoreFactory) -> None:
    """Texts of the longest length the store holds, counted in characters (four UTF-8 bytes each), come back exactly."""
    numbers = itertools.count()
    with fresh(make_store) as store:
        limits = limits_of(store)
        top = limits.text_chars_max

        def round_trip(text: str) -> None:
            task_id = f"task-{next(numbers)}"
            attempt_id = f"{task_id}#1"
            task = make_task(task_id, objective=text, decision_reason=text)
            attempt = make_attempt(attempt_id, task_id, result=text, checkpoint=text, evidence=text, plan=Plan(hypothesis=text))
            intent = make_intent(f"key-{task_id}", attempt_id, task_id=task_id, request=text, result=text)
            seed(store, task, attempt, intent)
            with store.transaction() as tx:
                tx.append_event(**event_fields(task_id, attempt_id=attempt_id, reason=text, detail=text))
            what = f"a text of {len(text)} characters, {len(text.encode())} UTF-8 bytes"
            _same_record(store.get_task(task_id), task, f"{what} in a Task")
            _same_record(store.get_attempt(attempt_id), attempt, f"{what} in an Attempt")
            _same_record(store.get_intent(intent.key), intent, f"{what} in an Intent")
            (event,) = store.events(task_id=task_id)
            expect_equal((event.reason, event.detail), (text, text), f"{what} in an Event")

        round_trip(ASTRAL * top)
        round_trip(_long(top, "line one\nline two\x00\u2028'\"%_"))
        _draws(round_trip, text=lambda st: _unicode(st, 0, min(top, DRAWN_TEXT_CHARS_MAX)))


def _today(offset_s: float) -> float:
    return TODAY_S + offset_s


@_check
def times_keep_sub_millisecond_parts_at_todays_epoch(make_store: StoreFactory) -> None:
    """Every time field at today's epoch magnitude, with sub-millisecond parts, comes back to the last bit of its double."""
    numbers = itertools.count()
    with fresh(make_store) as store:

        def round_trip(at: float, step: float) -> None:
            n = next(numbers)
            task_id, attempt_id = f"task-{n}", f"task-{n}#1"
            times = [at + step * k for k in range(12)]
            task = make_task(task_id, created_at=times[0], deadline_at=times[1])
            attempt = make_attempt(
                attempt_id, task_id, created_at=times[2], claimed_at=times[3], heartbeat_at=times[4], expires_at=times[5],
                started_at=times[6], ended_at=times[7], cancel_deadline_at=times[8], eligible_at=times[9],
            )  # fmt: skip
            intent = make_intent(f"key-{n}", attempt_id, task_id=task_id, minted_at=times[10], granted_at=times[11], deadline_at=at)
            seed(store, task, attempt, intent)
            with store.transaction() as tx:
                tx.append_event(**event_fields(task_id, attempt_id=attempt_id, at=at, expires_at=times[5]))
                leases = _implements(tx, "put_leader")
                if leases:
                    tx.put_leader(f"leader-{n}", "orchestrator-1", 1, times[5])
            what = f"times from {at!r} by {step!r} s"
            _same_record(store.get_task(task_id), task, f"a task with {what}")
            _same_record(store.get_attempt(attempt_id), attempt, f"an Attempt with {what}")
            _same_record(store.get_intent(intent.key), intent, f"an intent with {what}")
            (event,) = store.events(task_id=task_id)
            expect_equal((event.at, event.expires_at), (at, times[5]), f"an event's times, {what}")
            if leases:
                with store.transaction() as tx:
                    expect_equal(tx.leader(f"leader-{n}"), Leader(f"leader-{n}", "orchestrator-1", 1, times[5]), f"a leader lease, {what}")

        round_trip(_today(0.000123456), 0.000_000_5)
        round_trip(_today(86_400.999_999), 1.000_001)
        round_trip(float(2**31) + 0.25, 30.000_07)  # past a 32-bit seconds column
        _draws(
            round_trip,
            at=lambda st: st.floats(TODAY_S - DRAWN_TIMES_BEFORE_S, TODAY_S + DRAWN_TIMES_AFTER_S),
            step=lambda st: st.floats(1e-6, DRAWN_STEP_MAX_S),
        )


def _every_field(n: int, cents: int, version: int, big: int) -> tuple[Task, Attempt, Intent, dict[str, Any]]:
    """Records with every field away from its default, numbers drawn: plan versions, budgets to a millionth of a dollar."""
    task_id, attempt_id = f"task-{n}", f"task-{n}#1"
    budget = Budget(
        attempts_max=1 + big % 1000, elapsed_max_s=3600.000_001 * (1 + version), cost_max_usd=cents / 1_000_000,
        tokens_max=big, repeated_signatures_max=big % 997, interruptions_max=1 + big % 991,
    )  # fmt: skip
    plan = Plan(
        hypothesis=f"hypothesis {n}", base_sha=f"{big:040x}"[-40:], executor=f"executor/{version}", model=f"model/{version + 1}",
        context_version=f"context/{version + 2}", policy_version=f"policy/{version + 3}",
    )  # fmt: skip
    task = make_task(task_id, budget=budget, cost_usd=cents / 1_000_000, tokens=big, priority=-big, elapsed_s=cents / 7)
    attempt = make_attempt(
        attempt_id, task_id, number=1, plan=plan, generation=big, cost_usd=cents / 3_000_000, tokens=big, backoff_s=cents / 1e9,
        timeout_budget_s=cents / 1e3,
    )  # fmt: skip
    intent = make_intent(f"key-{n}", attempt.attempt_id, task_id=task_id, dependency=f"dependency-{version}", outcome="succeeded")
    event = event_fields(task_id, attempt_id=attempt.attempt_id, generation=big, retries=version, late=bool(big % 2))
    return task, attempt, intent, event


@_check
def every_field_round_trips_at_non_default_values(make_store: StoreFactory) -> None:
    """Every field of every record away from its default (every version of a plan, budgets to a millionth of a dollar) round trips."""
    numbers = itertools.count()
    with fresh(make_store) as store:

        def round_trip(cents: int, version: int, big: int) -> None:
            task, attempt, intent, event = _every_field(next(numbers), cents, version, big)
            seed(store, task, attempt, intent)
            with store.transaction() as tx:
                appended = tx.append_event(**event)
            what = f"cost {cents / 1_000_000!r} USD, version {version}, {big}"
            _same_record(store.get_task(task.task_id), task, f"a task at {what}")
            _same_record(store.get_attempt(attempt.attempt_id), attempt, f"an Attempt at {what}")
            _same_record(store.get_intent(intent.key), intent, f"an intent at {what}")
            (read,) = store.events(task_id=task.task_id)
            expect_equal(replace(read, seq=0), replace(appended, seq=0), f"an event at {what}")

        round_trip(12_345_678, 7, 2**62)
        round_trip(1, 123_456_789, 10**12 - 1)
        round_trip(9_999_999_999_999, 0, 3)
        _draws(
            round_trip,
            cents=lambda st: st.integers(1, 10**13),
            version=lambda st: st.integers(0, 10**9),
            big=lambda st: st.integers(1, 2**62),
        )


def _metacharacter_ids() -> Iterator[str]:
    for mark in METACHARACTERS:
        yield f"a{mark}b"
    yield from ("axb", "a%", "a", "%", "_", "*", "a\\%b")


@_check
def keys_with_pattern_metacharacters_match_only_themselves(make_store: StoreFactory) -> None:
    """Ids and keys holding %, _, *, ?, [ ] and backslashes are looked up exactly: never as a pattern matching another."""
    names = list(dict.fromkeys(_metacharacter_ids()))
    with fresh(make_store) as store:
        records: list[Any] = []
        for name in names:
            records += [
                make_task(f"t{name}"),
                make_attempt(f"t{name}#1", f"t{name}"),
                make_intent(f"k{name}", f"t{name}#1", task_id=f"t{name}"),
            ]
        seed(store, *records)
        with store.transaction() as tx:
            for name in names:
                tx.append_event(**event_fields(f"t{name}", attempt_id=f"t{name}#1", operation_key=f"k{name}"))
                if _implements(tx, "put_leader"):
                    tx.put_leader(f"l{name}", f"holder {name}", 1, 5.5)
        with store.transaction() as tx:
            for name in names:
                expect_equal(getattr(tx.task(f"t{name}"), "task_id", None), f"t{name}", f"the task looked up by t{name}")
                expect_equal([a.attempt_id for a in tx.attempts_of(f"t{name}")], [f"t{name}#1"], f"attempts_of(t{name})")
                expect_equal(getattr(tx.attempt(f"t{name}#1"), "attempt_id", None), f"t{name}#1", f"the Attempt looked up by t{name}#1")
                expect_equal(getattr(tx.intent(f"k{name}"), "key", None), f"k{name}", f"the intent looked up by k{name}")
                expect_equal([i.key for i in tx.intents_of(f"t{name}#1")], [f"k{name}"], f"intents_of(t{name}#1)")
                if _implements(tx, "leader"):
                    expect_equal(getattr(tx.leader(f"l{name}"), "holder", None), f"holder {name}", f"the leader lease named l{name}")
            for absent in ("ta?", "ta%b%", "tazb", "k_b", "k%%", "ta.", "t", "kaxbx"):
                expect_equal(tx.task(absent), None, f"the task looked up by {absent!r}, which nobody wrote")
                expect_equal(tx.intent(absent), None, f"the intent looked up by {absent!r}, which nobody wrote")
                expect_equal(tx.attempt(absent + "#1"), None, f"the Attempt looked up by {absent + '#1'!r}, which nobody wrote")
        for name in names:
            expect_equal([e.task_id for e in store.events(task_id=f"t{name}")], [f"t{name}"], f"the history of t{name}")


@_check
def declared_limits_are_enforced_by_the_core(make_store: StoreFactory) -> None:
    """The store's limits are no wider than the core writes, and the reference core refuses one character past them, writing nothing."""
    with _reference(make_store) as (orchestrator, clock):
        store = orchestrator.store
        limits = limits_of(store)
        too_long = "t" * (limits.task_id_chars_max + 1)
        with expect_raises(InputError, f"create_task with a task id of {len(too_long)} characters"):
            orchestrator.create_task(too_long, "objective", "repo-a", scope="")
        workspace = "w" * (limits.id_chars_max + 1)
        with expect_raises(InputError, f"create_task in a workspace of {len(workspace)} characters"):
            orchestrator.create_task("task-2", "objective", workspace, scope="")
        expect_equal(store.events(), [], "the history after two refused create_task calls")
        for task_id in (too_long, "task-2"):
            expect_equal(store.get_task(task_id), None, f"task {task_id[:12]!r} after its create_task was refused")
        _admitted(orchestrator, clock, "task-1", "repo-a")
        claim = orchestrator.claim_next("worker-a", "repo-a", True)
        lease = getattr(claim, "lease", None)
        expect(lease is not None, f"claim_next of an admitted Attempt returned {claim!r}")
        started = orchestrator.start_attempt(lease.attempt_id, lease.generation, lease.token)
        expect_equal(getattr(started, "state", started), "running", "start_attempt of the claimed Attempt")
        before = (store.events(), store.get_attempt(lease.attempt_id))
        result = "r" * (limits.text_chars_max + 1)
        with expect_raises(InputError, f"complete_attempt with a result of {len(result)} characters"):
            orchestrator.complete_attempt(lease.attempt_id, lease.generation, lease.token, result)
        expect_equal((store.events(), store.get_attempt(lease.attempt_id)), before, "the store after a refused complete_attempt")
