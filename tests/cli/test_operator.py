"""`shiftchange timeline --list` and `shiftchange status` on real stores (SQLite and PostgreSQL), with human times."""

from __future__ import annotations

import json
import re

import pytest

from shiftchange.cli.main import main
from shiftchange.cli.operator import REFUSALS_SHOWN
from shiftchange.core import LedgerProvider, ManualClock, Orchestrator, Plan, Submission
from shiftchange.core.timeline import moment, offset, readable_times
from shiftchange.stores import open_store

UNIX_START_S = 1_800_000_000.0
"""2027-01-15T08:00:00Z: a store whose records are on a real (Unix) clock."""


def stocked(store, clock) -> None:
    """Four tasks a second apart (t0 oldest): t0 to t2 dispatched and admitted, t0 claimed, t3 left in the inbox; one refused renewal."""
    orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock))
    for number in range(3):
        orchestrator.submit_many([Submission(f"t{number}", f"objective {number}", "ws", Plan("p"))])
        clock.advance(1.0)
    orchestrator.create_task("t3", "objective 3", "ws")
    clock.advance(1.0)
    orchestrator.run_admission()
    orchestrator.claim_attempt("t0", "worker-1", "ws")
    clock.advance(2.0)
    orchestrator.renew_lease("t0#1", 7, "not the token")


@pytest.fixture
def sqlite_store(tmp_path):
    path = tmp_path / "ops.sqlite"
    clock = ManualClock(UNIX_START_S)
    with open_store(f"sqlite:///{path}") as store:
        stocked(store, clock)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_list_is_newest_first_and_filters_by_state(sqlite_store, capsys):
    status, out, err = run(capsys, "timeline", "--store", str(sqlite_store), "--list")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "4 task(s), newest first"
    assert [line.split()[0] for line in lines[1:]] == ["t3", "t2", "t1", "t0"]
    assert "inbox" in lines[1] and "no attempt" in lines[1] and "attempt 1 claimed" in lines[4]
    assert "2027-01-15T08:00:00.000Z" in lines[4]  # t0, created first, in ISO 8601 UTC
    status, out, _ = run(capsys, "timeline", "--store", f"sqlite:///{sqlite_store}", "--list", "--state", "in_progress", "--limit", "2")
    assert status == 0
    assert out.splitlines()[0] == "3 task(s) in in_progress, newest first; the newest 2 shown (--limit)"
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["t2", "t1"]


def test_timeline_times_are_iso_with_their_offset_after_creation(sqlite_store, capsys):
    status, out, _ = run(capsys, "timeline", "--store", str(sqlite_store), "t0")
    assert status == 0
    assert "created     2027-01-15T08:00:00.000Z" in out
    assert "2027-01-15T08:00:00.000Z (+0.0s)  operator" in out
    refused = next(line for line in out.splitlines() if "REFUSED" in line)
    assert "2027-01-15T08:00:06.000Z (+6.0s)" in refused and "renew" in refused


def test_status_counts_states_the_oldest_wait_leases_and_refusals(sqlite_store, capsys):
    status, out, _ = run(capsys, "status", "--store", str(sqlite_store), "--json")
    assert status == 0
    found = json.loads(out)
    assert found["tasks_by_state"] == {"in_progress": 3, "inbox": 1}
    assert found["attempts_by_state"] == {"admitted": 2, "claimed": 1}
    assert found["oldest_admitted"]["attempt_id"] == "t1#1"
    assert found["leases_held"] == 1 and found["refusals"] == 1
    assert found["latest_refusals"][0]["kind"] == "renew" and found["latest_refusals"][0]["late"]
    status, text, _ = run(capsys, "status", "--store", str(sqlite_store))
    assert status == 0 and "tasks            4: in_progress 3, inbox 1" in text and "leases held      1" in text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["timeline", "--store", "memory:", "--list"], "memory: holds no history"),
        (["status", "--store", "/no/such/store.sqlite"], "no store at /no/such/store.sqlite"),
        (["timeline", "--store", "STORE", "--list", "--state", "bogus"], "'bogus' is no task state; one of inbox"),
        (["timeline", "--store", "STORE", "--list", "--state", "canceled"], "'canceled' is no task state, did you mean 'cancelled'; one"),
        (["timeline", "--store", "STORE"], "name a TASK_ID, or --list"),
        (["timeline", "--store", "STORE", "t0", "--list"], "a TASK_ID or --list, not both"),
        (["timeline", "--store", "STORE", "--list", "--limit", "0"], "--limit must be a whole number of at least 1"),
        (["timeline", "--store", "STORE", "ghost"], "unknown task 'ghost'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(sqlite_store, capsys, argv, said):
    status, out, err = run(capsys, *[str(sqlite_store) if word == "STORE" else word for word in argv])
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and said in err


def test_operator_commands_on_postgresql(make_postgres_store, capsys):
    store = make_postgres_store()
    stocked(store, ManualClock(UNIX_START_S))
    url = f"{make_postgres_store.url}?schema={store.schema}"
    status, out, _ = run(capsys, "timeline", "--store", url, "--list")
    assert status == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["t3", "t2", "t1", "t0"]
    status, out, _ = run(capsys, "status", "--store", url, "--json")
    found = json.loads(out)
    assert status == 0 and found["now_from"] == "the store's clock"
    assert found["attempts_by_state"] == {"admitted": 2, "claimed": 1} and found["refusals"] == 1
    status, out, _ = run(capsys, "timeline", "--store", url, "t0")
    assert status == 0 and "REFUSED (late: stale fence" in out


def test_moment_and_offset():
    assert moment(UNIX_START_S) == "2027-01-15T08:00:00.000Z"
    assert moment(12.25, 2.0) == "t=12.2s (+10.2s)"  # a simulated clock's seconds
    assert [offset(s) for s in (4.24, 187.0, 7500.0, -1.5)] == ["+4.2s", "+3m07.0s", "+2h05m", "-1.5s"]


# ---------------------------------------------------------------- --json agrees with the text; times a person reads


EPOCH_FLOAT = re.compile(r"\d{10,}\.\d+")
"""A Unix time written as the clock's bare number (1796499303.7910109), as a reason recorded by the core holds it."""


@pytest.fixture
def expired_store(tmp_path):
    """t0's lease ran out (its late renewal refused, 'expired at <Unix time>'), then the reaper made it Suspect; t1 waits."""
    path = tmp_path / "expired.sqlite"
    clock = ManualClock(UNIX_START_S + 0.7910109)
    with open_store(f"sqlite:///{path}") as store:
        orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock))
        for number in range(2):
            orchestrator.submit_many([Submission(f"t{number}", f"objective {number}", "ws", Plan("p"))])
        orchestrator.run_admission()
        lease = orchestrator.claim_attempt("t0", "worker-1", "ws").lease
        clock.advance(orchestrator.config.lease_ttl_s + 5.0)
        refused = orchestrator.renew_lease(lease.attempt_id, lease.generation, lease.token)
        assert not refused.accepted and EPOCH_FLOAT.search(refused.reason), refused.reason
        orchestrator.reap()
    return path, lease.expires_at


def timeline_from(data: dict):
    """The `Timeline` a `timeline --json` object holds (JSON's lists back to the tuples it was made of)."""
    from shiftchange.core.timeline import Action, AttemptTimeline, BudgetLine, Evidence, Receipt, Timeline

    def attempt(item: dict) -> AttemptTimeline:
        evidence = Evidence(**{**item["evidence"], "receipts": tuple(Receipt(**r) for r in item["evidence"]["receipts"])})
        actions = tuple(Action(**action) for action in item["actions"])
        return AttemptTimeline(**{**item, "state_path": tuple(item["state_path"]), "actions": actions, "evidence": evidence})

    return Timeline(
        **{
            **data,
            "budget": tuple(BudgetLine(**line) for line in data["budget"]),
            "task_actions": tuple(Action(**action) for action in data["task_actions"]),
            "attempts": tuple(attempt(item) for item in data["attempts"]),
        }
    )


@pytest.mark.parametrize("which", ["stocked", "expired"])
def test_timeline_json_holds_exactly_what_the_text_shows(which, sqlite_store, expired_store, capsys):
    """Goal: `timeline TASK --json` is the timeline's data: rendered, it is the text `timeline TASK` prints, line for line."""
    from shiftchange.core.timeline import render_timeline

    path = sqlite_store if which == "stocked" else expired_store[0]
    status, text, _ = run(capsys, "timeline", "--store", str(path), "t0")
    assert status == 0
    status, out, err = run(capsys, "timeline", "--store", str(path), "t0", "--json")
    assert (status, err) == (0, "")
    data = json.loads(out)
    assert data["task_id"] == "t0" and data["attempts"][0]["attempt_id"] == "t0#1"
    assert render_timeline(timeline_from(data)) == text
    refused = [action for action in data["attempts"][0]["actions"] if not action["accepted"]]
    assert refused and all(f"REFUSED ({readable_times(action['reason'])})" in text for action in refused)


def test_list_json_agrees_with_the_text(sqlite_store, capsys):
    """Goal: `timeline --list --json` holds each task the text lists, in its order, with the same state, latest Attempt and time."""
    for extra in ([], ["--state", "in_progress", "--limit", "2"]):
        status, text, _ = run(capsys, "timeline", "--store", str(sqlite_store), "--list", *extra)
        assert status == 0
        status, out, _ = run(capsys, "timeline", "--store", str(sqlite_store), "--list", *extra, "--json")
        assert status == 0
        found = json.loads(out)
        lines = text.splitlines()
        assert lines[0].startswith(f"{found['tasks']} task(s)")
        assert [line.split()[0] for line in lines[1:]] == [task["task_id"] for task in found["shown"]]
        for line, task in zip(lines[1:], found["shown"], strict=True):
            latest = task["latest_attempt"]
            words = "no attempt" if latest is None else f"attempt {latest['number']} {latest['state']}"
            assert task["state"] in line and words in line and moment(task["created_at"]) in line and task["objective"] in line
        assert found["states"] == (["in_progress"] if extra else None) and len(found["shown"]) == (2 if extra else 4)


@pytest.mark.parametrize("which", ["stocked", "expired"])
def test_status_json_agrees_with_the_text(which, sqlite_store, expired_store, capsys, monkeypatch):
    """Goal: every figure `status` prints is the one `status --json` holds: counts by state, the oldest wait, the leases, the
    history, and each of the latest refusals (its time, kind, record and reason, the reason's times as a person reads them)."""
    import types

    from shiftchange.cli import operator

    monkeypatch.setattr(operator, "time", types.SimpleNamespace(time=lambda: UNIX_START_S + 3600.0))  # one "now" for both runs
    path = sqlite_store if which == "stocked" else expired_store[0]
    status, text, _ = run(capsys, "status", "--store", str(path))
    assert status == 0
    status, out, _ = run(capsys, "status", "--store", str(path), "--json")
    assert status == 0
    found = json.loads(out)
    lines = text.splitlines()
    assert lines[0] == f"store status at {moment(found['now'])} ({found['now_from']})"
    for label in ("tasks", "attempts"):
        counts = ", ".join(f"{state} {n:,}" for state, n in found[f"{label}_by_state"].items())
        assert f"  {label:<16} {found[label]:,}: {counts}" in lines
    oldest = found["oldest_admitted"]
    assert f"  oldest admitted  {oldest['attempt_id']}, waiting {offset(oldest['waited_s']).lstrip('+')}" in lines
    assert f"  leases held      {found['leases_held']:,} ({found['leases_run_out']:,} run out, not yet reaped)" in lines
    assert f"  history          {found['events']:,} events, {found['refusals']:,} refused" in lines
    shown = lines[lines.index(f"  latest refusals  (newest first, at most {REFUSALS_SHOWN})") + 1 :]
    assert len(shown) == len(found["latest_refusals"]) >= 1
    for line, event in zip(shown, found["latest_refusals"], strict=True):
        assert line.startswith(f"    {moment(event['at'])} (") and event["kind"] in line
        assert line.endswith(f"{event['attempt_id'] or event['task_id']}: {readable_times(event['reason'])}")


def test_no_epoch_float_in_status_timeline_or_list_text(expired_store, capsys):
    """Goal (issue 42, defect 5): a reason recorded as 'expired at 1800000030.79...' reads 'expired at 2027-01-15T08:00:30.791Z'
    in every operator text; --json keeps the number as recorded."""
    path, expires_at = expired_store
    expired = f"expired at {moment(expires_at)}"
    for argv, says in (
        (["status"], expired),
        (["timeline", "t0"], expired),
        (["timeline", "--list"], "t0"),
    ):
        status, text, _ = run(capsys, *argv, "--store", str(path))
        assert status == 0 and says in text, text
        assert not EPOCH_FLOAT.search(text), f"{argv}: {EPOCH_FLOAT.search(text).group()} in\n{text}"
    status, out, _ = run(capsys, "status", "--store", str(path), "--json")
    assert f"expired at {expires_at}" in json.loads(out)["latest_refusals"][0]["reason"]
