"""Admission control: bulkheads, backpressure by queue age, and load shedding that respects priority and deadlines.

Unit tests pin each behaviour with time passed in by hand; a Hypothesis state
machine then interleaves enqueue, decide, release, remove and time advances
and checks, after every step, what must hold under any load.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from shiftchange.core.admission import ADMIT, DEFER, SHED, AdmissionController, AdmissionDecision
from shiftchange.core.config import AdmissionConfig, CoreConfig
from shiftchange.core.errors import InputError, NotFound
from shiftchange.core.machine import ATTEMPT

GUARDS_BY_TRIGGER = {ADMIT: (True, False), DEFER: (False, False), SHED: (False, True)}


def controller(
    depth: int = 100, age_s: float = 600.0, partition_max: int = 2, capacity_max: int = 100, per_step: int = 1
) -> AdmissionController:
    config = AdmissionConfig(queue_depth_max=depth, queue_age_max_s=age_s, partition_concurrency_max=partition_max)
    return AdmissionController(config, capacity_max=capacity_max, backpressure_admissions_max=per_step)


def by_trigger(decisions: list[AdmissionDecision], trigger: str) -> list[str]:
    return [decision.item_id for decision in decisions if decision.trigger == trigger]


# ------------------------------------------------------------------ admit


def test_admits_highest_priority_first_and_earliest_among_equals():
    """Admission walks the queue by priority, then by enqueue time, and stops at capacity."""
    admission = controller(capacity_max=3, partition_max=5)
    admission.enqueue("low", "repo", 1, 0.0)
    admission.enqueue("late-high", "repo", 5, 2.0)
    admission.enqueue("early-high", "repo", 5, 1.0)
    admission.enqueue("middle", "repo", 3, 0.5)
    decisions = admission.decide(3.0)
    assert by_trigger(decisions, ADMIT) == ["early-high", "late-high", "middle"]
    assert by_trigger(decisions, DEFER) == ["low"]
    assert admission.status("low") == "waiting"
    assert admission.in_flight() == 3


def test_default_capacity_is_the_cores_admitted_max():
    """One number bounds admitted and leased attempts: the controller's default is CoreConfig.admitted_max."""
    assert AdmissionController(AdmissionConfig()).capacity_max == CoreConfig().admitted_max


def test_decisions_carry_guards_the_attempt_table_accepts():
    """Each decision's trigger and guards fire the spec's row from queued to where the decision says."""
    admission = controller(depth=1, partition_max=1)
    for item_id, priority in (("a", 3), ("b", 2), ("c", 1)):
        admission.enqueue(item_id, "repo", priority, 0.0)
    decisions = admission.decide(0.0)
    assert [decision.trigger for decision in decisions] == [ADMIT, DEFER, SHED]
    expected = {ADMIT: "admitted", DEFER: "queued", SHED: "failed"}
    for decision in decisions:
        holds = {**decision.guards, "budget_left": True}
        fired = ATTEMPT.fire("queued", decision.trigger, holds.__getitem__)
        assert fired is not None, decision
        assert fired[0] == expected[decision.trigger]


# --------------------------------------------------------------- bulkhead


def test_full_partition_defers_its_work_without_starving_other_partitions():
    """A partition at its limit defers its own items while another partition's lower-priority work is admitted."""
    admission = controller(partition_max=2)
    for number in range(4):
        admission.enqueue(f"busy-{number}", "busy-repo", 9, float(number))
    admission.enqueue("quiet", "quiet-repo", 1, 10.0)
    decisions = admission.decide(10.0)
    assert by_trigger(decisions, ADMIT) == ["busy-0", "busy-1", "quiet"]
    assert by_trigger(decisions, DEFER) == ["busy-2", "busy-3"]
    deferral = next(decision for decision in decisions if decision.item_id == "busy-2")
    assert "bulkhead" in deferral.reason and "'busy-repo' holds 2 of 2" in deferral.reason
    assert admission.in_flight("busy-repo") == 2


def test_release_frees_a_slot_for_the_next_waiting_item():
    """Releasing an admitted attempt lets the next item of that partition in at the next step."""
    admission = controller(partition_max=1)
    admission.enqueue("first", "repo", 1, 0.0)
    admission.enqueue("second", "repo", 1, 1.0)
    assert by_trigger(admission.decide(1.0), ADMIT) == ["first"]
    assert admission.decide(2.0) == []
    admission.release("first")
    assert admission.status("first") == "gone"
    assert by_trigger(admission.decide(3.0), ADMIT) == ["second"]
    assert admission.in_flight("repo") == 1


def test_release_of_an_attempt_not_in_flight_fails_loudly():
    """A second release would free another attempt's slot, so it is refused rather than counted."""
    admission = controller()
    admission.enqueue("only", "repo", 1, 0.0)
    admission.decide(0.0)
    admission.release("only")
    with pytest.raises(NotFound):
        admission.release("only")
    assert admission.in_flight("repo") == 0


def test_global_capacity_defers_when_every_slot_is_taken():
    """With all partitions together at capacity_max, items with partition room still wait."""
    admission = controller(capacity_max=2, partition_max=5)
    for item_id, repo in (("a", "one"), ("b", "two"), ("c", "three")):
        admission.enqueue(item_id, repo, 1, 0.0)
    decisions = admission.decide(0.0)
    assert by_trigger(decisions, ADMIT) == ["a", "b"]
    assert "2 of 2 attempts in flight (capacity)" in decisions[-1].reason


def test_restored_attempts_count_against_the_bulkhead():
    """Rebuilding from the store: attempts already admitted take their partition's slots."""
    admission = controller(partition_max=1)
    admission.restore("leased-before-restart", "repo")
    admission.enqueue("new", "repo", 1, 0.0)
    assert by_trigger(admission.decide(0.0), DEFER) == ["new"]
    assert admission.status("leased-before-restart") == "in_flight"


# ----------------------------------------------------------- backpressure


def test_old_queue_slows_admissions_to_the_backpressure_allowance():
    """Once the oldest item has waited past queue_age_max_s, one step admits only the allowance, highest first."""
    admission = controller(age_s=60.0, partition_max=10, per_step=1)
    admission.enqueue("old", "repo", 1, 0.0)
    admission.enqueue("urgent", "repo", 9, 50.0)
    admission.enqueue("normal", "repo", 5, 50.0)
    assert admission.backpressure(60.0) is False
    assert admission.backpressure(61.0) is True
    assert admission.queue_age_s(61.0) == 61.0
    decisions = admission.decide(61.0)
    assert by_trigger(decisions, ADMIT) == ["urgent"]
    assert by_trigger(decisions, DEFER) == ["normal", "old"]
    assert "queue age 61 s over 60 s" in decisions[-1].reason and "backpressure" in decisions[-1].reason
    assert by_trigger(admission.decide(62.0), ADMIT) == ["normal"]


def test_without_backpressure_every_item_with_room_is_admitted():
    """A young queue is drained in one step: backpressure, not the controller, is what slows admissions."""
    admission = controller(age_s=60.0, partition_max=10, per_step=1)
    for number in range(3):
        admission.enqueue(f"item-{number}", "repo", 1, 0.0)
    assert len(by_trigger(admission.decide(60.0), ADMIT)) == 3


def test_items_held_by_their_own_bulkhead_do_not_trigger_backpressure():
    """An old item waiting on its full partition does not slow the other partitions."""
    admission = controller(age_s=60.0, partition_max=1, per_step=1)
    admission.enqueue("running", "busy", 1, 0.0)
    admission.enqueue("stuck", "busy", 1, 0.0)
    admission.decide(0.0)
    for number in range(3):
        admission.enqueue(f"quiet-{number}", f"quiet-{number}", 1, 100.0)
    assert admission.queue_age_s(100.0) == 100.0
    assert admission.backpressure(100.0) is False
    assert by_trigger(admission.decide(100.0), ADMIT) == ["quiet-0", "quiet-1", "quiet-2"]


def test_a_deferral_is_reported_once_per_cause():
    """A waiting item is reported when first held and again only when what holds it changes."""
    admission = controller(age_s=60.0, partition_max=1, per_step=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.enqueue("waiter", "repo", 1, 0.0)
    assert by_trigger(admission.decide(0.0), DEFER) == ["waiter"]
    assert admission.decide(10.0) == []
    admission.release("holder")
    admission.enqueue("first-in-line", "other", 9, 100.0)
    decisions = admission.decide(100.0)
    assert by_trigger(decisions, ADMIT) == ["first-in-line"]
    assert by_trigger(decisions, DEFER) == ["waiter"]
    assert "backpressure" in decisions[-1].reason


# ----------------------------------------------------------- load shedding


def test_overflow_sheds_the_lowest_priority_and_the_newest_among_equals():
    """Beyond queue_depth_max, the lowest priority goes first; among equals the newest, so the longest wait keeps its place."""
    admission = controller(depth=2, partition_max=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.decide(0.0)
    for item_id, priority, enqueued_at_s in (("high", 5, 1.0), ("low-old", 1, 2.0), ("low-new", 1, 3.0), ("mid", 3, 4.0)):
        admission.enqueue(item_id, "repo", priority, enqueued_at_s)
    decisions = admission.decide(5.0)
    assert by_trigger(decisions, SHED) == ["low-old", "low-new"]
    assert admission.queue_depth() == 2
    assert admission.status("high") == admission.status("mid") == "waiting"
    shed = next(decision for decision in decisions if decision.trigger == SHED)
    assert "queue depth 4 over 2" in shed.reason and "lowest priority" in shed.reason


def test_newest_of_equal_priority_is_shed_first():
    """With one item to shed among equals, the one enqueued last goes."""
    admission = controller(depth=1, partition_max=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.decide(0.0)
    admission.enqueue("older", "repo", 1, 1.0)
    admission.enqueue("newer", "repo", 1, 2.0)
    assert by_trigger(admission.decide(3.0), SHED) == ["newer"]
    assert admission.status("older") == "waiting"


def test_out_of_reach_deadline_is_shed_before_lower_priority_work():
    """Under depth pressure, an item whose deadline is out of reach goes first, even above lower-priority items."""
    admission = controller(depth=1, partition_max=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.decide(0.0)
    admission.enqueue("tight-high", "repo", 8, 0.0, deadline_s=20.0, duration_min_s=15.0)
    admission.enqueue("patient-low", "repo", 1, 0.0)
    decisions = admission.decide(11.0)
    assert by_trigger(decisions, SHED) == ["tight-high"]
    assert "deadline 20 s cannot be met at 11 s" in decisions[0].reason and "queue depth 2 over 1" in decisions[0].reason
    assert admission.status("patient-low") == "waiting"


def test_a_future_deadline_nearer_than_the_work_needs_is_out_of_reach():
    """duration_min_s makes a deadline still ahead count as missed, so that item is shed first."""
    admission = controller(depth=1, partition_max=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.decide(0.0)
    admission.enqueue("too-tight", "repo", 8, 0.0, deadline_s=20.0, duration_min_s=15.0)
    admission.enqueue("roomy", "repo", 8, 0.0, deadline_s=100.0, duration_min_s=15.0)
    assert by_trigger(admission.decide(10.0), SHED) == ["too-tight"]


def test_a_shed_beside_a_lower_admission_only_across_bulkheads():
    """Lower-priority work is admitted beside a shed only from another partition, into a slot the shed item could not use."""
    admission = controller(depth=1, partition_max=1)
    admission.enqueue("holder", "busy", 9, 0.0)
    admission.decide(0.0)
    admission.enqueue("busy-high", "busy", 9, 1.0)
    admission.enqueue("busy-mid", "busy", 5, 1.0)
    admission.enqueue("quiet-low", "quiet", 1, 1.0)
    decisions = admission.decide(2.0)
    assert by_trigger(decisions, ADMIT) == ["quiet-low"]
    assert by_trigger(decisions, SHED) == ["busy-mid"]
    assert "'busy' holds 1 of 1" in decisions[-1].reason
    assert admission.status("busy-high") == "waiting"


def test_an_overflowing_queue_admits_what_has_room_instead_of_shedding_it():
    """Depth over the limit sheds nothing while every item can be admitted."""
    admission = controller(depth=1, partition_max=5)
    for number in range(4):
        admission.enqueue(f"item-{number}", "repo", 1, 0.0)
    decisions = admission.decide(0.0)
    assert by_trigger(decisions, SHED) == []
    assert len(by_trigger(decisions, ADMIT)) == 4


# ------------------------------------------------------------ passed deadlines


def test_an_item_whose_deadline_passed_is_shed_though_there_is_room():
    """Silent queue growth: work past its deadline is shed, not admitted late, while its partition and the capacity have room."""
    admission = controller()
    admission.enqueue("late", "repo", 9, 0.0, deadline_s=900.0)
    admission.enqueue("on-the-dot", "repo", 9, 0.0, deadline_s=912.0)
    admission.enqueue("no-deadline", "repo", 1, 0.0)
    decisions = admission.decide(912.0)
    assert by_trigger(decisions, SHED) == ["late", "on-the-dot"]
    assert by_trigger(decisions, ADMIT) == ["no-deadline"]
    assert decisions[0].reason == "shed: its deadline 900 s passed at 912 s; the work is no longer worth doing"
    assert decisions[0].guards == {"capacity_available": False, "selected_for_shedding": True}
    assert ATTEMPT.fire("queued", SHED, {**decisions[0].guards, "budget_left": True}.__getitem__)[0] == "failed"
    assert admission.status("late") == admission.status("on-the-dot") == "gone"
    assert admission.in_flight("repo") == 1


def test_a_deadline_that_passes_while_the_item_waits_is_shed_at_the_next_step():
    """Every step checks every waiting item: a deferred item is shed once its deadline passes, though the queue is shallow."""
    admission = controller(depth=5, partition_max=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.enqueue("waiter", "repo", 1, 0.0, deadline_s=10.0)
    assert by_trigger(admission.decide(0.0), DEFER) == ["waiter"]
    assert admission.decide(9.0) == []
    decisions = admission.decide(10.0)
    assert by_trigger(decisions, SHED) == ["waiter"]
    assert "deadline 10 s passed at 10 s" in decisions[0].reason
    assert admission.queue_depth() == 0


def test_expired_items_take_no_admission_from_the_step():
    """The expired leave before the walk, so under backpressure the step's one admission goes to live work."""
    admission = controller(age_s=60.0, per_step=1, partition_max=10)
    admission.enqueue("expired-urgent", "repo", 9, 0.0, deadline_s=50.0)
    admission.enqueue("live", "repo", 1, 0.0)
    admission.enqueue("also-live", "repo", 1, 1.0)
    decisions = admission.decide(61.0)
    assert by_trigger(decisions, SHED) == ["expired-urgent"]
    assert by_trigger(decisions, ADMIT) == ["live"]
    assert "backpressure" in next(decision.reason for decision in decisions if decision.item_id == "also-live")


def test_the_age_of_an_expired_item_still_brakes_the_step_that_sheds_it():
    """Backpressure reads the queue before the expired leave: waiting past a deadline is the plainest sign of saturation."""
    admission = controller(age_s=60.0, per_step=1, partition_max=10)
    admission.enqueue("expired-old", "repo", 1, 0.0, deadline_s=50.0)
    admission.enqueue("young", "repo", 1, 55.0)
    admission.enqueue("younger", "repo", 1, 56.0)
    assert admission.backpressure(61.0) is True
    decisions = admission.decide(61.0)
    assert by_trigger(decisions, SHED) == ["expired-old"]
    assert by_trigger(decisions, ADMIT) == ["young"]
    assert by_trigger(decisions, DEFER) == ["younger"]
    assert admission.backpressure(61.0) is False


def test_a_deadline_still_ahead_is_admitted_with_room_though_out_of_reach():
    """duration_min_s only orders shedding under depth pressure: with room, work whose deadline is still ahead is admitted."""
    admission = controller()
    admission.enqueue("tight", "repo", 1, 0.0, deadline_s=20.0, duration_min_s=15.0)
    assert by_trigger(admission.decide(10.0), ADMIT) == ["tight"]


class SilentQueueGrowth(AdmissionController):
    """The anti-pattern: nothing is ever expired, so a queue with room admits work after its deadline."""

    def _expired(self, item, now_s: float) -> bool:
        return False


def test_overriding_the_expiry_hook_switches_the_rule_off():
    """With `_expired` returning False, a passed deadline is admitted while there is room, and only depth pressure sheds it."""
    config = AdmissionConfig(queue_depth_max=1, partition_concurrency_max=1)
    admission = SilentQueueGrowth(config, capacity_max=10)
    admission.enqueue("late", "repo", 9, 0.0, deadline_s=5.0)
    admission.enqueue("late-too", "repo", 9, 1.0, deadline_s=5.0)
    admission.enqueue("patient", "repo", 1, 2.0)
    decisions = admission.decide(10.0)
    assert by_trigger(decisions, ADMIT) == ["late"]
    assert by_trigger(decisions, SHED) == ["late-too"]
    shed = next(decision for decision in decisions if decision.trigger == SHED)
    assert "queue depth 2 over 1" in shed.reason and "deadline 5 s cannot be met at 10 s" in shed.reason
    assert admission.status("patient") == "waiting"


# ------------------------------------------------------------ cancellation


def test_remove_succeeds_at_once_under_full_load():
    """Cancelling a waiting item is never blocked: with every slot taken and the queue overflowing, it leaves at once."""
    admission = controller(depth=2, partition_max=1, capacity_max=1)
    admission.enqueue("holder", "repo", 9, 0.0)
    admission.decide(0.0)
    for number in range(5):
        admission.enqueue(f"waiting-{number}", "repo", 5, 1.0)
    assert admission.remove("waiting-3") is True
    assert admission.status("waiting-3") == "gone"
    assert admission.queue_depth() == 4
    assert "waiting-3" not in [decision.item_id for decision in admission.decide(2.0)]


def test_remove_is_harmless_for_items_not_waiting():
    """A duplicate cancellation, or one for an attempt already in flight, changes nothing and keeps the slot."""
    admission = controller()
    admission.enqueue("admitted", "repo", 1, 0.0)
    admission.decide(0.0)
    assert admission.remove("admitted") is False
    assert admission.remove("never-seen") is False
    assert admission.in_flight("repo") == 1


# ------------------------------------------------------------- bad input


def test_bad_input_is_refused_before_anything_changes():
    """Duplicate ids, non-integer priorities and time going backwards are input errors."""
    admission = controller()
    admission.enqueue("a", "repo", 1, 0.0)
    with pytest.raises(InputError):
        admission.enqueue("a", "repo", 1, 0.0)
    with pytest.raises(InputError):
        admission.enqueue("b", "repo", 1.5, 0.0)
    with pytest.raises(InputError):
        admission.enqueue("c", "", 1, 0.0)
    admission.decide(10.0)
    with pytest.raises(InputError):
        admission.decide(9.0)
    with pytest.raises(InputError):
        controller(per_step=0)
    assert admission.queue_depth() == 0 and admission.in_flight() == 1


# ------------------------------------------------------- the state machine

PARTITIONS = ("repo-a", "repo-b", "repo-c")


@dataclass(frozen=True)
class Item:
    item_id: str
    partition: str
    priority: int
    enqueued_at_s: float
    deadline_s: float | None
    duration_min_s: float
    sequence: int

    def walk_key(self) -> tuple[int, float, int]:
        return (-self.priority, self.enqueued_at_s, self.sequence)

    def out_of_reach(self, now_s: float) -> bool:
        return self.deadline_s is not None and now_s + self.duration_min_s > self.deadline_s

    def expired(self, now_s: float) -> bool:
        return self.deadline_s is not None and self.deadline_s <= now_s


class AdmissionUnderLoad(RuleBasedStateMachine):
    """A model of where each item is, checked against the controller after every enqueue, decide, release and remove.

    Half the runs drive the controller as shipped, half the silent-queue-growth
    subclass with the expiry hook off: every other property holds for both.
    """

    def __init__(self) -> None:
        super().__init__()
        self.admission: AdmissionController | None = None
        self.now_s = 0.0
        self.items: dict[str, Item] = {}
        self.where: dict[str, str] = {}
        self.deferred_before: set[str] = set()

    @initialize(
        depth=st.integers(1, 5), partition_max=st.integers(1, 3), capacity_max=st.integers(1, 6), age_s=st.sampled_from([5.0, 30.0]),
        per_step=st.integers(1, 2), expires=st.booleans(),
    )  # fmt: skip
    def configure(self, depth: int, partition_max: int, capacity_max: int, age_s: float, per_step: int, expires: bool) -> None:
        self.config = AdmissionConfig(queue_depth_max=depth, queue_age_max_s=age_s, partition_concurrency_max=partition_max)
        kind = AdmissionController if expires else SilentQueueGrowth
        self.admission = kind(self.config, capacity_max=capacity_max, backpressure_admissions_max=per_step)
        self.expires = expires

    def ids(self, where: str) -> list[str]:
        return sorted(item_id for item_id, place in self.where.items() if place == where)

    def count(self, partition: str) -> int:
        return sum(1 for item_id in self.ids("in_flight") if self.items[item_id].partition == partition)

    @rule(
        arrivals=st.lists(
            st.tuples(
                st.sampled_from(PARTITIONS), st.integers(0, 3), st.none() | st.sampled_from([0.0, 5.0, 40.0]), st.sampled_from([0.0, 10.0])
            ),
            min_size=1,
            max_size=4,
        )
    )
    def enqueue(self, arrivals: list[tuple[str, int, float | None, float]]) -> None:
        """Items arrive together, so a step can find the queue overflowing across several partitions."""
        for partition, priority, deadline_in_s, duration_min_s in arrivals:
            item_id = f"attempt-{len(self.items)}"
            deadline_s = None if deadline_in_s is None else self.now_s + deadline_in_s
            self.admission.enqueue(item_id, partition, priority, self.now_s, deadline_s, duration_min_s=duration_min_s)
            self.items[item_id] = Item(item_id, partition, priority, self.now_s, deadline_s, duration_min_s, len(self.items))
            self.where[item_id] = "waiting"

    @rule(seconds=st.sampled_from([1.0, 4.0, 31.0]))
    def advance(self, seconds: float) -> None:
        self.now_s += seconds

    @precondition(lambda self: "in_flight" in self.where.values())
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        item_id = data.draw(st.sampled_from(self.ids("in_flight")))
        self.admission.release(item_id)
        self.where[item_id] = "gone"

    @precondition(lambda self: self.items)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        item_id = data.draw(st.sampled_from(sorted(self.items)))
        was_waiting = self.where[item_id] == "waiting"
        assert self.admission.remove(item_id) is was_waiting
        if was_waiting:
            self.where[item_id] = "gone"

    @rule()
    def decide(self) -> None:
        waiting = sorted((self.items[item_id] for item_id in self.ids("waiting")), key=Item.walk_key)
        braking = self.pressing_age_s() > self.config.queue_age_max_s
        if braking:
            event("backpressure")
        decisions = {decision.item_id: decision for decision in self.check_guards(self.admission.decide(self.now_s))}
        expired = [item for item in waiting if self.expires and item.expired(self.now_s)]
        self.check_expired_are_shed(expired, waiting, decisions)
        live = [item for item in waiting if item not in expired]
        admitted = [item for item in live if item.item_id in decisions and decisions[item.item_id].trigger == ADMIT]
        self.check_admissions_follow_room(live, admitted, braking)
        held = [item for item in live if item not in admitted]
        shed = [item for item in held if item.item_id in decisions and decisions[item.item_id].trigger == SHED]
        survivors = [item for item in held if item not in shed]
        assert len(shed) == max(0, len(held) - self.config.queue_depth_max), "shed more or less than the excess depth"
        for victim in shed:
            self.check_priority_respected(victim, admitted, survivors)
        for item in survivors:
            if item.item_id not in self.deferred_before:
                assert decisions[item.item_id].trigger == DEFER, "an item held for the first time was not reported"
                self.deferred_before.add(item.item_id)
        for item in admitted:
            self.where[item.item_id] = "in_flight"
        for item in expired + shed:
            self.where[item.item_id] = "gone"
        assert self.admission.queue_depth() <= self.config.queue_depth_max

    def check_guards(self, decisions: list[AdmissionDecision]) -> list[AdmissionDecision]:
        assert len({decision.item_id for decision in decisions}) == len(decisions), "two decisions for one item"
        for decision in decisions:
            assert self.where.get(decision.item_id) == "waiting", "a decision for an item that was not waiting"
            assert (decision.capacity_available, decision.selected_for_shedding) == GUARDS_BY_TRIGGER[decision.trigger]
            assert decision.reason
        return decisions

    def pressing_age_s(self) -> float:
        ages = [
            self.now_s - self.items[item_id].enqueued_at_s
            for item_id in self.ids("waiting")
            if self.count(self.items[item_id].partition) < self.config.partition_concurrency_max
        ]
        return max(ages, default=0.0)

    def check_expired_are_shed(self, expired: list[Item], waiting: list[Item], decisions: dict[str, AdmissionDecision]) -> None:
        """Every item whose deadline has passed is shed in this step, whatever the depth and the room, and says so.

        They leave before the walk, so they take no slot and no admission from
        it. With the hook off, late work is admitted while there is room.
        """
        for item in expired:
            event("shed: deadline passed")
            decision = decisions.get(item.item_id)
            assert decision is not None and decision.trigger == SHED, f"{item} is past its deadline but was not shed"
            assert f"its deadline {item.deadline_s:g} s passed at {self.now_s:g} s" in decision.reason, decision.reason
        for item in waiting:
            decision = decisions.get(item.item_id)
            if decision is not None and decision.trigger == ADMIT and item.expired(self.now_s):
                assert not self.expires, f"{item} was admitted after its deadline passed"
                event("admitted after its deadline (expiry hook off)")

    def check_admissions_follow_room(self, waiting: list[Item], admitted: list[Item], braking: bool) -> None:
        """Replay the walk over the live items: one is admitted exactly when it has room, so nothing live is held (or shed) with room."""
        counts = {partition: self.count(partition) for partition in PARTITIONS}
        total = sum(counts.values())
        admissions = 0
        for item in waiting:
            room = (
                counts[item.partition] < self.config.partition_concurrency_max
                and total < self.admission.capacity_max
                and not (braking and admissions >= self.admission.backpressure_admissions_max)
            )
            assert (item in admitted) is room, f"{item.item_id}: room={room} but admitted={item in admitted}"
            if room:
                counts[item.partition] += 1
                total += 1
                admissions += 1
        self.counts_after_walk = counts

    def check_priority_respected(self, victim: Item, admitted: list[Item], survivors: list[Item]) -> None:
        """A priority shed leaves no lower or out-of-reach item behind, and lower admissions came from other full-bulkhead partitions.

        Nothing lower is left waiting, so no lower item that waited beside the
        shed one can be admitted later in the run either.
        """
        if victim.out_of_reach(self.now_s):
            event("shed: deadline out of reach")
            return
        event("shed: lowest priority")
        for item in survivors:
            assert item.priority >= victim.priority, f"shed {victim} while lower {item} survives"
            assert not item.out_of_reach(self.now_s), f"shed {victim} by priority while out-of-reach {item} survives"
        for item in admitted:
            if item.priority < victim.priority:
                event("shed beside a lower admission from another partition")
                assert item.partition != victim.partition, f"shed {victim} while lower {item} of its partition was admitted"
                assert self.counts_after_walk[victim.partition] >= self.config.partition_concurrency_max

    @invariant()
    def bulkheads_hold(self) -> None:
        for partition in PARTITIONS:
            assert self.admission.in_flight(partition) <= self.config.partition_concurrency_max
            assert self.admission.in_flight(partition) == self.count(partition)
        assert self.admission.in_flight() <= self.admission.capacity_max

    @invariant()
    def every_item_is_in_exactly_one_place(self) -> None:
        for item_id, place in self.where.items():
            assert self.admission.status(item_id) == place, item_id
        assert self.admission.queue_depth() == len(self.ids("waiting"))
        assert self.admission.in_flight() == len(self.ids("in_flight"))


AdmissionUnderLoad.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_admission_under_load = pytest.mark.heavy(AdmissionUnderLoad.TestCase)  # 200 examples: 3-4 s
