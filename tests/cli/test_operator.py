"""`shiftchange timeline --list` and `shiftchange status` on real stores (SQLite and PostgreSQL), with human times."""

from __future__ import annotations

import json

import pytest

from shiftchange.cli.main import main
from shiftchange.core import LedgerProvider, ManualClock, Orchestrator, Plan, Submission
from shiftchange.core.timeline import moment, offset
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
