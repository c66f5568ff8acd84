"""The control plane's decisions: what the loop's decision retries and with which plan, and what the history says is due."""

from __future__ import annotations

from types import SimpleNamespace

from shiftchange.agent import Agenda, Delays, Retry, blind_retry, next_hypothesis, reconcile_settled, retry_for
from shiftchange.core import Decision, Refused


def latest(state="failed", number=2, hypothesis="hypothesis 1 for task-1"):
    return SimpleNamespace(attempt_id=f"task-1#{number}", number=number, state=state, hypothesis=hypothesis)


def event(to_state, attempt_id="task-1#2", from_state="running", at=10.0, kind="complete", accepted=True):
    return SimpleNamespace(
        accepted=accepted, from_state=from_state, to_state=to_state, attempt_id=attempt_id, task_id="task-1", at=at, kind=kind
    )


def test_a_retry_keeps_the_plan_and_a_correction_changes_the_hypothesis():
    retry = retry_for("task-1", Decision("retry", "transient provider failure", "retry"), latest())
    assert retry == Retry("task-1", "retry: transient provider failure", "hypothesis 1 for task-1")
    correct = retry_for("task-1", Decision("correct", "validation failed", "correct"), latest())
    assert correct.hypothesis == next_hypothesis("task-1", 2) == "hypothesis 3 for task-1"
    assert correct.plan.hypothesis == correct.hypothesis
    assert correct.reason.startswith("correct: ")


def test_verify_stop_escalate_and_refusals_retry_nothing():
    for decision in (Decision("verify", "passed", "verify"), Decision("escalate", "auth", "escalate"), Refused("none", code="not_found")):
        assert retry_for("task-1", decision, latest()) is None


def test_the_blind_loop_reruns_only_a_failed_attempt_unchanged():
    retry = blind_retry("task-1", latest())
    assert (retry.blind, retry.hypothesis) == (True, "hypothesis 1 for task-1")
    assert blind_retry("task-1", latest(state="succeeded")) is None


def test_the_agenda_notes_what_each_committed_event_asks_for():
    agenda = Agenda(Delays(ci_s=5.0, review_s=2.0, retire_grace_s=60.0))
    agenda.admission_due = False
    agenda.note(event("suspect"))
    agenda.note(event("verifying", attempt_id="task-1#3"))
    agenda.note(event("failed", attempt_id="task-1#4"))
    agenda.note(event("review", attempt_id=None, at=20.0))
    assert list(agenda.reconcile) == ["task-1#2"]
    assert agenda.verify == {"task-1#3": 15.0}
    assert list(agenda.decide) == ["task-1"]
    assert agenda.due(agenda.approve, 21.0) == [] and agenda.due(agenda.approve, 22.0) == ["task-1"]
    assert agenda.admission_due  # an ended Attempt freed its slot


def test_an_operators_release_puts_the_task_back_before_the_loop():
    """Goal: a released task is the loop's to decide on again (it retries, or rests the task once more); an accept does not."""
    agenda = Agenda()
    agenda.note(event("ready", attempt_id=None, kind="accept", from_state="inbox"))
    assert agenda.decide == {}
    agenda.note(event("ready", attempt_id=None, kind="release", from_state="escalated"))
    assert list(agenda.decide) == ["task-1"]


def test_the_agenda_ignores_refusals_self_loops_and_decisions():
    agenda = Agenda()
    agenda.note(event("suspect", accepted=False))
    agenda.note(event("running", from_state="running"))
    agenda.note(event("failed", kind="decide"))
    assert (agenda.reconcile, agenda.decide) == ({}, {})


def test_a_settled_reconciliation_and_a_verdict_leave_the_agenda_and_pending_ones_come_back():
    agenda = Agenda(Delays(ci_s=4.0))
    agenda.reconcile["a"] = None
    agenda.reconciled("a", SimpleNamespace(outcome="pending"))
    assert "a" in agenda.reconcile
    agenda.reconciled("a", SimpleNamespace(outcome="landed"))
    assert "a" not in agenda.reconcile and reconcile_settled(Refused("changed", code="changed"))
    agenda.verify["b"] = 1.0
    agenda.verified("b", SimpleNamespace(detail="pending"), 10.0)
    assert agenda.verify["b"] == 12.0
    agenda.verified("b", SimpleNamespace(detail="passed"), 12.0)
    assert "b" not in agenda.verify


def test_a_survey_of_the_records_says_the_same_as_the_history_would():
    agenda = Agenda(Delays(ci_s=5.0, review_s=2.0))
    recovering = [SimpleNamespace(attempt_id="task-1#1")]
    verifying = [SimpleNamespace(attempt_id="task-2#1", ended_at=3.0), SimpleNamespace(attempt_id="task-3#1", ended_at=None)]
    agenda.survey(recovering, verifying, ["task-4"], ["task-5"], now=4.0)
    assert (list(agenda.reconcile), agenda.verify, list(agenda.decide)) == (["task-1#1"], {"task-2#1": 8.0, "task-3#1": 4.0}, ["task-4"])
    agenda.survey([], [], [], ["task-5"], now=9.0)
    assert agenda.approve == {"task-5": 6.0}  # first seen at 4.0: due 2 s later, not pushed back by a later survey
