"""The abstract clock: two states that differ only in when things happened are one state, if nothing can tell them apart.

`explore --time abstract` (the default) keeps every step of the world as it
is (the real core and the real agent run on the explorer's concrete clock,
and every path it takes is a path of the concrete search), and changes only
what a state is known by: its digest writes each time the state holds
relative to the clock, not as a number on it (Lamport, "Real-Time Model
Checking is Really Simple", CHARME 2005: states that differ only by a
translation of every clock are one), and each time already reached, whose
distance from now nothing reads, as one value (UPPAAL's regions do the same
with a clock past the largest constant it is compared with):

- a time still to come (a lease's expiry, a backoff's end, a call's or a
  cancellation's deadline, a worker's wait) by how far ahead it is, exactly:
  it is never further than the longest timing of the configuration;
- a time reached (now or earlier), as `REACHED`, save when a record was
  created, which is kept as its rank among the creations the state holds
  (admission and `claim_next` serve Attempts in creation order); and
  whether a worker renewed at this very instant, which its renewal step
  reads, as a flag of its own;
- what is measured from a time past to now, an Attempt's and a task's
  `elapsed_s`, not at all.

**Why no behaviour is lost, and none is added.** Two worlds with one
abstract text take the same steps and reach worlds that again share their
text, and every checker gives the same verdicts on what those steps append
(a clock step's label names its target on the clock: the same step, with
another number). The argument rests on what the core, the agent and the
explorer's actors do with a time, each checked against the code:

1. **Nothing reads the clock's value, only differences.** Every time the
   core or the agent writes is now plus a timing (an expiry, a deadline, a
   backoff's end), and every guard compares a stored time with now or two
   stored times with each other. So moving every time of a world by the
   same amount moves every time it will ever write by that amount, and no
   guard changes its answer (translation invariance). In floating point
   this holds only when the sums are exact: the abstract clock takes
   timings that are whole multiples of 1/1024 s (`DYADIC_UNIT_S`), which a
   float adds without rounding in any range a search reaches; other
   timings are refused with a pointer to `--time concrete`.
2. **A time past is read only as past, or in creation order.** Expiries,
   deadlines and backoffs already past are compared with now only (`<=`),
   and past is past however long ago; the control plane's agenda (verify,
   approve) is due when its time is not in the future. Creation times are
   read in order, which the rank keeps. What reads how long ago something
   began is an Attempt's time budget (`CoreConfig.timeout_budget_s`,
   measured from `started_at`), a task's elapsed budget
   (`Budget.elapsed_max_s`, the sum of its Attempts' `elapsed_s`) and the
   admission queue's age limit (`AdmissionConfig.queue_age_max_s`, measured
   from the oldest waiting Attempt's creation): those are out of the
   abstract search's scope, as rate limits and breakers are out of every
   search's (`ExploreConfig.reliability`). No path may come near them: the
   clock's step stops the search with an error before it passes
   `horizon_s`, after which one of them could bind. An anti-pattern whose
   broken core reads the clock's value itself (`timestamp-keys` mints keys
   from it) is searched on the concrete clock only (`CLOCK_READERS`).
3. **Times to come are kept exactly**, relative to now: they are the
   offsets every timed guard (a lease's expiry against a renewal, a
   deadline against a call's landing, the clock's next instant) decides on.
4. **The history is not part of a state in either mode** (`search.py`): the
   checkers judge each path's own entries, with its own times, and a state
   reached again is judged for its own step, then merged, in both modes
   alike. The checkers that read times (a write accepted after its lease
   ran out) compare times of one path, which a translation leaves as they
   are.

So the abstract search visits one state for every class of concrete states
with one text (`tests/explore/test_abstract_time.py` checks, on small
configurations and timings, that the abstract texts of the concrete
search's states are exactly those the abstract search visited, and that
both searches find the same violation for every in-scope anti-pattern but
the clock reader, and none on the correct core).
Each path it reports is a concrete path, and `explore --replay` plays it on
the concrete clock.

**What it cannot show**, in either mode: liveness beyond "the work can still
be finished" and rates (how often, how soon); timings that differ in kind
from the configuration's (the search explores one set of timings, every
interleaving of them); and the limits named in 2.
"""

from __future__ import annotations

import operator
from dataclasses import fields
from typing import Any

REACHED = "reached"
"""A time not after now: every guard reads such a time only as reached (`<=` now), never how long ago."""
DYADIC_UNIT_S = 1 / 1024
"""The abstract clock's timings are whole multiples of this: floating-point sums of them are exact."""
TIME_FIELDS = frozenset(
    (
        "claimed_at",
        "heartbeat_at",
        "expires_at",
        "started_at",
        "ended_at",
        "cancel_deadline_at",
        "eligible_at",
        "minted_at",
        "granted_at",
        "deadline_at",
    )
)
"""The records' fields that hold an instant (creation is apart: it is read in order)."""
CREATED = "created_at"
MEASURED = frozenset(("elapsed_s",))
"""Durations measured from a time past to now: read only by the time budgets the abstract search keeps out of reach."""

_ROWS: dict[type, tuple[operator.attrgetter, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
"""Each record type's getter of every field but `version`, and where among them are its instants, its creation, the
durations measured to now, and the lease token's digest."""


def dyadic(seconds: float) -> bool:
    """Whether `seconds` is a whole multiple of `DYADIC_UNIT_S` (a float sum of such numbers is exact)."""
    return float(seconds / DYADIC_UNIT_S).is_integer()


def relative(at: float | None, now: float) -> float | str | None:
    """An instant as the abstract clock writes it: how far ahead of now, or `REACHED`."""
    if at is None:
        return None
    ahead = at - now
    return ahead if ahead > 0 else REACHED


def creation_ranks(records: list[Any]) -> dict[float, int]:
    """Each creation time the records hold, as the abstract clock writes it: its rank among them (ties share one)."""
    return {at: rank for rank, at in enumerate(sorted({r.created_at for r in records}))}


def concrete_row(record: Any) -> tuple:
    """A store record as plain values, in field order, every time as a number on the clock: `version` left out (a
    compare-and-set counter that decides nothing once the write is in), a lease token counted only as issued or not."""
    getter, _instants, _created, _measured, token = _layout_of(type(record))
    values = getter(record)
    if not token:
        return values
    row = list(values)
    for index in token:
        row[index] = row[index] is not None
    return tuple(row)


def record_row(record: Any, now: float, ranks: dict[float, int]) -> tuple:
    """A store record as `concrete_row` gives it, every time written as the abstract clock writes it."""
    getter, instants, created, measured, token = _layout_of(type(record))
    row = list(getter(record))
    for index in instants:
        at = row[index]
        if at is not None:
            row[index] = at - now if at > now else REACHED
    for index in created:
        row[index] = ranks[row[index]]
    for index in measured:
        row[index] = None
    for index in token:
        row[index] = row[index] is not None
    return tuple(row)


def _layout_of(kind: type) -> tuple[operator.attrgetter, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    found = _ROWS.get(kind)
    if found is None:
        found = _ROWS[kind] = _layout(kind)
    return found


def _layout(kind: type) -> tuple[operator.attrgetter, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    names = tuple(item.name for item in fields(kind) if item.name != "version")

    def where(wanted: frozenset[str]) -> tuple[int, ...]:
        return tuple(index for index, name in enumerate(names) if name in wanted)

    created, token = where(frozenset((CREATED,))), where(frozenset(("token_digest",)))
    return operator.attrgetter(*names), where(TIME_FIELDS), created, where(MEASURED), token
