"""The capacity metrics: deadline misses by priority, goodput, and Little's law's three instruments on the queue.

Each metric is checked two ways: on a few hand-written events whose answer
can be worked out on paper, and on a small overloaded run whose whole
history is kept, where the same figure is computed again from the history
alone, by a different route than the metrics' running sums.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from shiftchange.checkers.history import Retired
from shiftchange.core import Event, Task
from shiftchange.core.records import Budget
from shiftchange.lab import settings
from shiftchange.sim import antipattern, scenario_config
from shiftchange.sim.metrics import Metrics
from shiftchange.sim.world import World

TASKS = 160


def _event(at: float, kind: str, task_id: str, attempt_id: str | None, from_state: str | None, to_state: str | None) -> Event:
    return Event(0, at, "orchestrator", kind, task_id, attempt_id, True, "accepted", from_state, to_state)


def _arrive(metrics: Metrics, at: float, task_id: str) -> None:
    metrics.event(_event(at, "create", task_id, None, None, "inbox"))
    metrics.event(_event(at, "append", task_id, f"{task_id}#1", None, "queued"))


def _retire(metrics: Metrics, task_id: str, state: str, priority: int, deadline_at: float) -> None:
    task = Task(task_id, "objective", "scope", "repo-0", state, Budget(), 0.0, priority=priority, deadline_at=deadline_at)
    metrics.retired(Retired(10_000.0, task, (), ()))


def _hand_written() -> Metrics:
    """Four tasks, deadline 100 s after arrival: in time, admitted late, shed, and cancelled while it waited."""
    metrics = Metrics(60.0)
    _arrive(metrics, 0.0, "a")
    metrics.event(_event(4.0, "admit", "a", "a#1", "queued", "admitted"))
    _arrive(metrics, 10.0, "b")
    _arrive(metrics, 20.0, "c")
    metrics.event(_event(30.0, "cancel", "c", None, "in_progress", "cancelled"))
    metrics.event(_event(30.0, "cancel", "c", "c#1", "queued", "cancelling"))
    _arrive(metrics, 40.0, "d")
    metrics.event(_event(130.0, "shed", "d", "d#1", "queued", "failed"))
    metrics.event(_event(150.0, "admit", "b", "b#1", "queued", "admitted"))
    _retire(metrics, "a", "done", 2, 100.0)
    _retire(metrics, "b", "done", 2, 110.0)
    _retire(metrics, "c", "cancelled", 0, 120.0)
    _retire(metrics, "d", "escalated", 0, 140.0)
    return metrics


def test_a_task_misses_its_deadline_unless_it_started_or_was_cancelled_by_then():
    """b was admitted 40 s late and d was shed: two misses; a started in time and c was withdrawn before its deadline."""
    summary = _hand_written().summary(200.0, {})
    assert summary["tasks_by_priority"] == {"0": 2, "2": 2}
    assert summary["deadline_misses"] == {"0": 1, "2": 1}
    assert summary["tasks_done_in_time"] == 1


def test_goodput_is_done_in_time_per_hour_of_the_arrival_span():
    """One task done in time over the 40 s from the first arrival to the last: 90 an hour, whatever the run's length."""
    summary = _hand_written().summary(200.0, {})
    assert summary["arrival_span_s"] == 40.0
    assert summary["goodput_tasks_per_h"] == pytest.approx(3600.0 / 40.0)


def test_littles_law_instruments_read_the_queue_up_to_the_last_arrival():
    """Worked on paper over [0, 40]: a waits 4 s, b and c are queued from 10 and 20 (c leaves at 30), d enters at the end.

    L = (4 + 30 + 10) / 40; λ = three entries (d's comes after its own arrival's snapshot) / 40;
    W = the waits of the two that left by 40, a's 4 s and c's 10 s. L and λW differ by b's age at 40 s: the edge term.
    """
    summary = _hand_written().summary(200.0, {})
    assert summary["queue_length_mean"] == pytest.approx(44.0 / 40.0)
    assert summary["queue_entries_per_s"] == pytest.approx(3 / 40.0)
    assert summary["queue_wait_s_mean"] == pytest.approx(7.0)


def test_an_empty_run_reports_no_rate_and_no_mean():
    """Nothing arrived: no span to divide by, so the rates are None or zero rather than a division error."""
    summary = Metrics(60.0).summary(0.0, {})
    assert summary["goodput_tasks_per_h"] == 0.0
    assert summary["queue_length_mean"] is None and summary["queue_wait_s_mean"] is None


# ------------------------------------------------------------ against a whole history


def _overloaded(pattern: str | None):
    """A short run at three times capacity with a tight deadline, so there are sheds, late admissions and retries."""
    config = scenario_config("capacity-overload", 0, TASKS)
    config = settings.apply(config, {"workload.arrival_rate_per_s": 1.2, "workload.deadline_s": 120.0})
    config = replace(config, workload=replace(config.workload, cancel_probability=0.1))
    world = World(config, 0, antipattern=None if pattern is None else antipattern(pattern), keep_history=True)
    outcome = world.play()
    return outcome.metrics, list(world.history.tail)


def _events(entries: list) -> list[Event]:
    return [entry for entry in entries if isinstance(entry, Event) and entry.accepted]


@pytest.mark.parametrize("pattern", [None, "silent-queue-growth"])
def test_deadline_misses_and_goodput_agree_with_the_history(pattern):
    """Recomputed from the history's admissions, cancellations and final records: the same misses per priority and goodput."""
    metrics, entries = _overloaded(pattern)
    events = _events(entries)
    first_admitted: dict[str, float] = {}
    cancelled: dict[str, float] = {}
    for event in events:
        if event.kind == "admit" and event.to_state == "admitted":
            first_admitted.setdefault(event.task_id, event.at)
        elif event.kind == "cancel" and event.attempt_id is None:
            cancelled.setdefault(event.task_id, event.at)
    misses: dict[str, int] = {}
    done_in_time = 0
    for retired in (entry for entry in entries if isinstance(entry, Retired)):
        task = retired.task
        started = first_admitted.get(task.task_id, float("inf")) <= task.deadline_at
        withdrawn = cancelled.get(task.task_id, float("inf")) <= min(task.deadline_at, first_admitted.get(task.task_id, float("inf")))
        misses.setdefault(str(task.priority), 0)
        if not started and not withdrawn:
            misses[str(task.priority)] += 1
        done_in_time += task.state == "done" and started
    creates = [event.at for event in events if event.kind == "create" and event.attempt_id is None]
    assert sum(misses.values()) > 0, "the run should be overloaded enough to miss deadlines"
    assert metrics["deadline_misses"] == dict(sorted(misses.items()))
    assert metrics["tasks_done_in_time"] == done_in_time
    assert metrics["goodput_tasks_per_h"] == pytest.approx(done_in_time / (creates[-1] - creates[0]) * 3600.0, abs=0.05)


@pytest.mark.parametrize("pattern", [None, "silent-queue-growth"])
def test_littles_law_instruments_agree_with_the_history(pattern):
    """L from each Attempt's stay in queued clipped to the arrival span, λ and W counted up to the last arrival: the same figures."""
    metrics, entries = _overloaded(pattern)
    events = _events(entries)
    creates = [index for index, event in enumerate(events) if event.kind == "create" and event.attempt_id is None]
    first, last = events[creates[0]].at, events[creates[-1]].at
    entered: dict[str, float] = {}
    left: dict[str, float] = {}
    entries_in_span = 0
    waits: list[float] = []
    for index, event in enumerate(events):
        if event.attempt_id is None or (event.to_state == "queued") == (event.from_state == "queued"):
            continue
        if event.to_state == "queued":
            entered[event.attempt_id] = event.at
            entries_in_span += index < creates[-1]
        else:
            left[event.attempt_id] = event.at
            if index < creates[-1]:
                waits.append(event.at - entered[event.attempt_id])
    area = sum(max(0.0, min(left.get(attempt, last), last) - since) for attempt, since in entered.items())
    assert metrics["queue_length_mean"] == pytest.approx(area / (last - first), rel=1e-5)
    assert metrics["queue_entries_per_s"] == pytest.approx(entries_in_span / (last - first), rel=1e-5)
    assert metrics["queue_wait_s_mean"] == pytest.approx(sum(waits) / len(waits), rel=1e-5)
