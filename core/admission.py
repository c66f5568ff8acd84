"""Admission control at queued -> admitted: bulkheads, backpressure and load shedding, sans-I/O.

The controller answers one question for every waiting Attempt: admit it,
defer it (it stays queued), or shed it (it is rejected, classified as
capacity). It keeps only what that answer needs: the waiting queue and the
attempts in flight (admitted or leased) per partition. It never touches the
store and never reads a clock: the orchestrator passes `now_s`, fires each
decision's `trigger` through the attempt table with the decision's `guards`,
and reports back with `release` when an admitted attempt ends.

The chapter's terms, as this module applies them:

- Bulkhead: a partition (workspace, repository, workflow family) holds at
  most `partition_concurrency_max` attempts in flight, so one partition
  that exhausts its share cannot starve the others.
- Capacity: all partitions together hold at most `capacity_max` in flight;
  the orchestrator passes its `CoreConfig.admitted_max`, so one number bounds
  admitted and leased attempts everywhere (that is also the default).
- Backpressure: queue age is the signal (as in CoDel, which reacts to how
  long items have sat in a queue rather than how many there are). When the
  oldest waiting item whose partition has room has waited longer than
  `queue_age_max_s`, downstream is saturated, and one decide step admits at
  most `backpressure_admissions_max` attempts: admissions slow to a trickle
  instead of stopping, so the queue still drains and nothing deadlocks. An
  item held by its own full bulkhead does not count towards that age: its
  wait is its partition's business, and counting it would let one saturated
  partition slow every other, which is what bulkheads exist to prevent.
  A step reads that age before it sheds the expired: an item that waited
  past its deadline is the plainest sign that downstream is saturated, and
  `backpressure(now_s)` read before the step says what the step applies.
- Load shedding: an item whose deadline has already passed is shed at the
  first step that sees it, whatever the depth and whatever the room:
  admitting it would only serve it late, and keeping it is the chapter's
  silent queue growth, a queue that keeps promising work it can no longer
  deliver in time. Deadlines pass while items wait, so every step checks
  every waiting item. `AdmissionConfig.shed_past_deadline` switches the rule
  off (the simulator's silent-queue-growth anti-pattern does).
  Then, when the queue is still deeper than `queue_depth_max` after every
  admission the step allows, the excess is shed. Items whose deadline can no
  longer be met (it is nearer than the least time the work needs) go first:
  keeping them only promises work that cannot be delivered; then the lowest
  priority; among equals the newest, so the item that waited longest keeps
  its place. Apart from the expired, only an item that cannot be admitted
  now (its bulkhead or the capacity is full, or backpressure has spent the
  step's admissions) is ever shed: nothing whose deadline is still ahead is
  shed while there is room for it.
  After an item is shed for its priority, no lower-priority item is left
  waiting, and a lower-priority item admitted in the same step comes from
  another partition, into a slot the shed item's full bulkhead could never
  have used. (A deadline out of reach outranks priority: that item goes
  first, whatever its priority.)
- Cancellation is never blocked: `remove` succeeds at once, whatever the load.

Why a list from `decide` rather than a step function: one step must see the
whole queue to know how deep it stays after admissions, and so who is shed;
a step function would have to recompute that for every item. Why `release`
takes the attempt id rather than the partition: a duplicate or misdirected
release by partition would silently free another attempt's slot and break
the bulkhead; by id it fails loudly. Why defer decisions are reported only
when an item's cause changes: an item waits through many steps, and the
history should record each backpressure signal once, not once per tick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from .config import AdmissionConfig, CoreConfig
from .errors import InputError, NotFound

ADMIT, DEFER, SHED = "admit", "defer", "shed"
"""The attempt table's triggers at queued, one per kind of decision."""

Status = Literal["waiting", "in_flight", "gone"]


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """One answer for one waiting attempt; `trigger` and `guards` feed the attempt table directly."""

    item_id: str
    trigger: str
    """admit, defer or shed."""
    reason: str
    """Why, in words, for the history."""
    capacity_available: bool
    """The spec guard: this attempt may be admitted now (its deadline has not passed; bulkhead, capacity and backpressure allow it)."""
    selected_for_shedding: bool
    """The spec guard: its deadline has passed, or capacity is exhausted and it is the lowest in the shedding order, so it goes."""

    @property
    def guards(self) -> dict[str, bool]:
        """The guard values the admit, defer and shed rows read; the orchestrator adds budget_left for admit."""
        return {"capacity_available": self.capacity_available, "selected_for_shedding": self.selected_for_shedding}


@dataclass(slots=True)
class _Waiting:
    item_id: str
    partition: str
    priority: int
    enqueued_at_s: float
    deadline_s: float | None
    duration_min_s: float
    sequence: int
    deferred_for: str | None = None
    """The cause ("bulkhead", "capacity", "backpressure") of the last defer decision reported for this item."""

    def walk_key(self) -> tuple[int, float, int]:
        """Admission order: highest priority first; among equals the earliest enqueued."""
        return (-self.priority, self.enqueued_at_s, self.sequence)

    def out_of_reach(self, now_s: float) -> bool:
        """Its deadline has passed, or is nearer than the least time the work needs."""
        return self.deadline_s is not None and now_s + self.duration_min_s > self.deadline_s


class AdmissionController:
    """Decides admit, defer or shed for every waiting attempt; see the module docstring for the rules."""

    def __init__(self, config: AdmissionConfig, *, capacity_max: int | None = None, backpressure_admissions_max: int = 1) -> None:
        if not isinstance(config, AdmissionConfig):
            raise InputError("config must be an AdmissionConfig")
        self.config = config
        self.capacity_max = _count(CoreConfig().admitted_max if capacity_max is None else capacity_max, "capacity_max")
        """Attempts in flight across all partitions; defaults to CoreConfig.admitted_max."""
        self.backpressure_admissions_max = _count(backpressure_admissions_max, "backpressure_admissions_max")
        """Admissions one decide step may make while backpressure applies."""
        self._waiting: dict[str, _Waiting] = {}
        self._in_flight: dict[str, str] = {}
        self._partition_in_flight: dict[str, int] = {}
        self._sequence = 0
        self._now_s = -math.inf

    # ------------------------------------------------------------ the queue

    def enqueue(
        self,
        item_id: str,
        partition: str,
        priority: int,
        enqueued_at_s: float,
        deadline_s: float | None = None,
        *,
        duration_min_s: float = 0.0,
    ) -> None:
        """Add a queued attempt. Higher priority is more important; `deadline_s` is on the same clock as `now_s`.

        `duration_min_s` is the least time the work needs once admitted: with
        it, a deadline still ahead can already be out of reach.
        """
        _text(item_id, "item_id")
        _text(partition, "partition")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InputError(f"priority must be an integer, not {priority!r}")
        _time(enqueued_at_s, "enqueued_at_s")
        if deadline_s is not None:
            _time(deadline_s, "deadline_s")
        if _time(duration_min_s, "duration_min_s") < 0:
            raise InputError(f"duration_min_s must not be negative, not {duration_min_s!r}")
        if self.status(item_id) != "gone":
            raise InputError(f"{item_id!r} is already {self.status(item_id)}; an attempt is enqueued once")
        self._sequence += 1
        self._waiting[item_id] = _Waiting(item_id, partition, priority, enqueued_at_s, deadline_s, duration_min_s, self._sequence)

    def remove(self, item_id: str) -> bool:
        """Take a waiting attempt out (cancelled); never blocked by load. False when it was not waiting.

        An attempt already in flight keeps its slot until `release`: a
        cancelled attempt still holds its executor until the protocol ends.
        """
        return self._waiting.pop(item_id, None) is not None

    def queue_depth(self) -> int:
        """How many attempts are waiting."""
        return len(self._waiting)

    def queue_age_s(self, now_s: float) -> float:
        """How long the oldest waiting attempt has waited at `now_s`; 0 when nothing waits."""
        _time(now_s, "now_s")
        return max((now_s - item.enqueued_at_s for item in self._waiting.values()), default=0.0)

    def backpressure(self, now_s: float) -> bool:
        """Whether downstream is saturated: the upstream signal to slow dispatch, and the brake on admissions."""
        return self._pressing_age_s(now_s) > self.config.queue_age_max_s

    def _pressing_age_s(self, now_s: float) -> float:
        """The queue age backpressure reads: the oldest waiting item whose own bulkhead does not explain its wait."""
        _time(now_s, "now_s")
        ages = (now_s - item.enqueued_at_s for item in self._waiting.values() if self._partition_has_room(item.partition))
        return max(ages, default=0.0)

    # ------------------------------------------------------------ in flight

    def release(self, item_id: str) -> None:
        """An admitted attempt ended (or its admission was refused by the table): free its slot."""
        partition = self._in_flight.pop(item_id, None)
        if partition is None:
            raise NotFound(f"{item_id!r} is not in flight; release is called once per admitted attempt")
        self._partition_in_flight[partition] -= 1
        if not self._partition_in_flight[partition]:
            del self._partition_in_flight[partition]

    def restore(self, item_id: str, partition: str) -> None:
        """Count an attempt the store already holds admitted or leased, when rebuilding after a restart.

        The store is the truth, so this may exceed a lowered limit; the
        controller then admits nothing more there until the partition drains.
        """
        _text(item_id, "item_id")
        _text(partition, "partition")
        if self.status(item_id) != "gone":
            raise InputError(f"{item_id!r} is already {self.status(item_id)}")
        self._occupy(item_id, partition)

    def in_flight(self, partition: str | None = None) -> int:
        """Attempts admitted and not yet released: in one partition, or in all."""
        return len(self._in_flight) if partition is None else self._partition_in_flight.get(partition, 0)

    def status(self, item_id: str) -> Status:
        """Where an attempt is; "gone" once shed, removed or released (the controller forgets it), or if never seen."""
        if item_id in self._waiting:
            assert item_id not in self._in_flight, f"{item_id!r} is both waiting and in flight"
            return "waiting"
        return "in_flight" if item_id in self._in_flight else "gone"

    # ------------------------------------------------------------- decide

    def decide(self, now_s: float, admissions_max: int | None = None) -> list[AdmissionDecision]:
        """One admission step at `now_s`: the sheds of expired items, the admissions in admission order, then the other sheds and deferrals.

        Every admitted or shed attempt leaves the queue at once; a deferred one
        stays, and is reported again only when the cause that holds it changes.
        An item whose deadline has passed is shed first, before the walk, so it
        takes no slot and no admission from the step. `admissions_max` caps
        this step's admissions (an admission rate limit); items it holds back
        are deferred, and shed if the queue is too deep.
        """
        if admissions_max is not None and (isinstance(admissions_max, bool) or not isinstance(admissions_max, int) or admissions_max < 0):
            raise InputError(f"admissions_max must be a non-negative integer or None, not {admissions_max!r}")
        if _time(now_s, "now_s") < self._now_s:
            raise InputError(f"now_s went backwards: {now_s!r} after {self._now_s!r}")
        self._now_s = now_s
        age_s = self._pressing_age_s(now_s)
        braking_age_s = age_s if age_s > self.config.queue_age_max_s else None
        decisions: list[AdmissionDecision] = []
        walk: list[_Waiting] = []
        for item in sorted(self._waiting.values(), key=_Waiting.walk_key):
            if self._expired(item, now_s):
                decisions.append(self._shed_expired(item, now_s))
            else:
                walk.append(item)
        held: list[tuple[_Waiting, str, str]] = []
        admissions = 0
        for item in walk:
            hold = self._hold(item, admissions, braking_age_s, admissions_max)
            if hold is None:
                decisions.append(self._admit(item))
                admissions += 1
            else:
                held.append((item, *hold))
        victims = self._victims([item for item, _, _ in held], now_s)
        for item, cause, words in held:
            if item.item_id in victims:
                decisions.append(self._shed(item, victims[item.item_id], words, len(held)))
            elif item.deferred_for != cause:
                item.deferred_for = cause
                decisions.append(AdmissionDecision(item.item_id, DEFER, f"deferred: {words}", False, False))
        assert len(self._waiting) <= self.config.queue_depth_max, "shedding left the queue deeper than queue_depth_max"
        return decisions

    def _expired(self, item: _Waiting, now_s: float) -> bool:
        """Whether this item's deadline has passed at `now_s`, so the step sheds it whatever the depth and the room.

        Only a deadline already passed: one merely out of reach (nearer than
        `duration_min_s`) is a shedding-order criterion under depth pressure.
        `AdmissionConfig.shed_past_deadline` False switches the rule off: late
        work is admitted while there is room (silent queue growth).
        """
        return self.config.shed_past_deadline and item.deadline_s is not None and item.deadline_s <= now_s

    def _hold(self, item: _Waiting, admissions: int, braking_age_s: float | None, admissions_max: int | None) -> tuple[str, str] | None:
        """Why this item cannot be admitted now, as (cause, words); None when it can."""
        held = self._partition_in_flight.get(item.partition, 0)
        if held >= self.config.partition_concurrency_max:
            return "bulkhead", f"partition {item.partition!r} holds {held} of {self.config.partition_concurrency_max} in flight (bulkhead)"
        if len(self._in_flight) >= self.capacity_max:
            return "capacity", f"{len(self._in_flight)} of {self.capacity_max} attempts in flight (capacity)"
        if admissions_max is not None and admissions >= admissions_max:
            return "rate", f"{admissions} admission(s) this step use up the admission rate limit (a capacity denial)"
        if braking_age_s is not None and admissions >= self.backpressure_admissions_max:
            return "backpressure", (
                f"queue age {braking_age_s:g} s over {self.config.queue_age_max_s:g} s; "
                f"{self.backpressure_admissions_max} admission(s) per step (backpressure)"
            )
        return None

    def _admit(self, item: _Waiting) -> AdmissionDecision:
        del self._waiting[item.item_id]
        self._occupy(item.item_id, item.partition)
        reason = (
            f"admitted: partition {item.partition!r} holds {self._partition_in_flight[item.partition]} "
            f"of {self.config.partition_concurrency_max}, {len(self._in_flight)} of {self.capacity_max} in flight"
        )
        return AdmissionDecision(item.item_id, ADMIT, reason, True, False)

    def _victims(self, held: list[_Waiting], now_s: float) -> dict[str, str]:
        """The items to shed, each with why it goes first: out-of-reach deadlines, then lowest priority, then newest."""
        excess = len(held) - self.config.queue_depth_max
        if excess <= 0:
            return {}
        order = sorted(held, key=lambda item: (not item.out_of_reach(now_s), item.priority, -item.enqueued_at_s, -item.sequence))
        victims = {}
        for item in order[:excess]:
            if item.out_of_reach(now_s):
                victims[item.item_id] = (
                    f"its deadline {item.deadline_s:g} s cannot be met at {now_s:g} s (needs at least {item.duration_min_s:g} s)"
                )
            else:
                victims[item.item_id] = f"lowest priority waiting ({item.priority})"
        return victims

    def _shed_expired(self, item: _Waiting, now_s: float) -> AdmissionDecision:
        del self._waiting[item.item_id]
        reason = f"shed: its deadline {item.deadline_s:g} s passed at {now_s:g} s; the work is no longer worth doing"
        return AdmissionDecision(item.item_id, SHED, reason, False, True)

    def _shed(self, item: _Waiting, why: str, words: str, depth: int) -> AdmissionDecision:
        del self._waiting[item.item_id]
        reason = f"shed: queue depth {depth} over {self.config.queue_depth_max} and no room ({words}); {why}"
        return AdmissionDecision(item.item_id, SHED, reason, False, True)

    def _occupy(self, item_id: str, partition: str) -> None:
        self._in_flight[item_id] = partition
        self._partition_in_flight[partition] = self._partition_in_flight.get(partition, 0) + 1

    def _partition_has_room(self, partition: str) -> bool:
        return self._partition_in_flight.get(partition, 0) < self.config.partition_concurrency_max


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InputError(f"{name} must be a non-empty string of at most 200 characters, not {value!r:.60}")
    return value


def _time(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number of seconds, not {value!r}")
    return value


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be a positive integer, not {value!r}")
    return value
