"""The recovery timeline: built from a store, rendered for an operator, and served by `shiftchange timeline`."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from shiftchange.cli.main import main
from shiftchange.core import (
    BreakerConfig,
    Fallback,
    LedgerProvider,
    ManualClock,
    MemoryStore,
    NotFound,
    Orchestrator,
    Plan,
    RateLimitConfig,
    ReliabilityConfig,
)
from shiftchange.core.timeline import build_timeline, render_timeline
from shiftchange.stores.sqlite import SQLiteStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "recovery.py"


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The example's store and the task id it printed; run as a script, the way a reader runs it."""
    path = tmp_path_factory.mktemp("story") / "recovery.sqlite"
    done = subprocess.run([sys.executable, str(EXAMPLE), str(path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return path, done.stdout.strip()


def timeline_command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["timeline", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def attempt_block(output: str, number: int) -> str:
    """The text of one attempt's block (from its heading to the next blank line)."""
    start = output.index(f"\nAttempt {number} (")
    end = output.find("\n\n", start + 1)
    return output[start : end if end != -1 else len(output)]


def test_timeline_shows_both_attempts_with_their_hypothesis_and_the_retry_reason(story, capsys):
    """Each Attempt shows its hypothesis (kept: an executor failure is retried, not corrected); the second names the retry's reason."""
    path, task_id = story
    status, out, err = timeline_command(capsys, "--store", str(path), task_id)
    assert (status, err) == (0, "")
    with SQLiteStore(path) as store:
        first, second = store.get_attempts(task_id)
        task = store.get_task(task_id)
    assert first.hypothesis == second.hypothesis
    assert f"hypothesis  {first.hypothesis}" in attempt_block(out, 1)
    assert f"hypothesis  {second.hypothesis}" in attempt_block(out, 2)
    assert len(second.reason) >= 10
    assert f"recovery    after {first.attempt_id}: {second.reason}" in attempt_block(out, 2)
    assert "Attempt 1 (" in out and "): failed" in attempt_block(out, 1)
    assert "): succeeded" in attempt_block(out, 2)
    assert second.backoff_s > 0 and "backoff     waited" in attempt_block(out, 2)
    assert (task.decision, task.state) == ("verify", "review")


def test_timeline_shows_the_expired_attempt_failing_after_reconciliation_finds_its_pr(story, capsys):
    """Attempt 1 goes Suspect then Reconciling, and ends failed (executor), not verified: its PR landed but no result was reported."""
    path, task_id = story
    _status, out, _err = timeline_command(capsys, "--store", str(path), task_id)
    first = attempt_block(out, 1)
    assert "path        queued -> admitted -> claimed -> running -> suspect -> reconciling -> failed" in first
    assert "verifying" not in first
    assert "reconciliation  landed" in first
    assert "failure         executor, signature 'executor:lease lost after effects landed'" in first
    landed = [line for line in first.splitlines() if " effects_landed " in line]
    assert len(landed) == 1 and "reconciling -> failed" in landed[0] and landed[0].endswith(": create-pr-1")
    decided = [line for line in first.splitlines() if " decide " in line]
    assert len(decided) == 1 and "retry" in decided[0]


def test_timeline_marks_the_late_completion_refused(story, capsys):
    """Worker 1's completion after its lease expired is shown REFUSED and late, not as a success."""
    path, task_id = story
    _status, out, _err = timeline_command(capsys, "--store", str(path), task_id)
    late = [line for line in attempt_block(out, 1).splitlines() if " complete " in line]
    assert len(late) == 1
    assert "worker-1 gen 1" in late[0]
    assert "REFUSED (late: the lease is no longer honoured (expired at 30.0)" in late[0]
    assert "worker's claim" not in attempt_block(out, 1)


def test_timeline_shows_the_second_attempt_receiving_the_first_attempts_pr(story, capsys):
    """Attempt 2's grant presents the same key and gets the PR reconciliation found for Attempt 1: one key, one PR, no second."""
    path, task_id = story
    _status, out, _err = timeline_command(capsys, "--store", str(path), task_id)
    with SQLiteStore(path) as store:
        first, second = store.get_attempts(task_id)
        assert store.get_intents(first.attempt_id) == []
        (intent,) = store.get_intents(second.attempt_id)
        grants = [e for e in store.events(task_id) if e.kind == "grant_tool" and e.accepted]
    assert intent.key == f"create-pr:{task_id}:{intent.identity}" and intent.receipt == "create-pr-1"
    assert [(e.attempt_id, e.detail) for e in grants] == [(first.attempt_id, intent.key), (second.attempt_id, intent.key)]
    assert f"receipt         {intent.key} -> create-pr-1" in attempt_block(out, 2)
    assert f"verdict         {intent.key}: create-pr-1 passed" in attempt_block(out, 2)
    assert "create-pr-2" not in out
    assert (first.cost_usd, second.cost_usd, second.tokens) == (1.20, 0.0, 0)


def test_timeline_budget_figures_match_the_store(story, capsys):
    """What the header says is used and left in every dimension is what the Task record holds."""
    path, task_id = story
    _status, out, _err = timeline_command(capsys, "--store", str(path), task_id)
    with SQLiteStore(path) as store:
        task = store.get_task(task_id)
        attempts = store.get_attempts(task_id)
    budget = task.budget
    assert task.cost_usd == pytest.approx(sum(a.cost_usd for a in attempts))
    assert task.tokens == sum(a.tokens for a in attempts)
    header = {" ".join(line.split()) for line in out.split("\nAttempt 1 (")[0].splitlines()}
    used_and_limit = {
        "attempts": (f"{len(attempts)}", f"{budget.attempts_max}", f"{budget.attempts_max - len(attempts)}"),
        "elapsed time": (f"{task.elapsed_s:.0f}s", f"{budget.elapsed_max_s:.0f}s", f"{budget.elapsed_max_s - task.elapsed_s:.0f}s"),
        "cost": (f"${task.cost_usd:.2f}", f"${budget.cost_max_usd:.2f}", f"${budget.cost_max_usd - task.cost_usd:.2f}"),
        "tokens": (f"{task.tokens}", f"{budget.tokens_max}", f"{budget.tokens_max - task.tokens}"),
        "human interruptions": (f"{task.interruptions}", f"{budget.interruptions_max}", f"{budget.interruptions_max - task.interruptions}"),
    }
    for name, (used, limit, left) in used_and_limit.items():
        assert f"{name} {used} of {limit} used, {left} left" in header
    assert "cost $1.20 of $5.00 used, $3.80 left" in header
    assert f"state {task.state}" in header and task.state == "review"


def test_timeline_command_only_reads_the_store(story, capsys):
    """Printing a timeline leaves the store file byte for byte as it was."""
    path, task_id = story
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    status, _out, _err = timeline_command(capsys, "--store", str(path), task_id)
    assert status == 0
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_missing_store_exits_2_without_creating_a_file(tmp_path, capsys):
    """A store path that does not exist is one line on stderr and exit 2, and no database appears there."""
    missing = tmp_path / "nowhere.sqlite"
    status, out, err = timeline_command(capsys, "--store", str(missing), "any-task")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and str(missing) in err
    assert list(tmp_path.iterdir()) == []


def test_unknown_task_exits_2_with_one_line(story, capsys):
    """A task id the store does not hold is one line on stderr and exit 2."""
    path, _task_id = story
    status, out, err = timeline_command(capsys, "--store", str(path), "no-such-task")
    assert status == 2 and out == ""
    assert err == "shiftchange: unknown task 'no-such-task'\n"


@pytest.mark.parametrize("content", [b"", b"not a database, just notes\n" * 10], ids=["empty", "text"])
def test_file_that_is_not_a_store_exits_2_and_stays_unchanged(tmp_path, capsys, content):
    """A file that is not a shiftchange store is refused in one line, and not turned into one."""
    path = tmp_path / "notes.sqlite"
    path.write_bytes(content)
    status, out, err = timeline_command(capsys, "--store", str(path), "any-task")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert path.read_bytes() == content


# ------------------------------------------------------------ build_timeline on a memory store


def one_verified_attempt() -> tuple[MemoryStore, LedgerProvider]:
    """A task whose single Attempt opens a PR, records its receipt, and passes CI; plus two refused calls."""
    store, clock = MemoryStore(), ManualClock(100.0)
    provider = LedgerProvider(clock=clock)
    orchestrator = Orchestrator(store, clock, provider)
    orchestrator.create_task("t", "add a health probe", "ws")
    orchestrator.accept_task("t")
    orchestrator.dispatch("t", Plan("probe the database connection"))
    orchestrator.admit("t#1")
    lease = orchestrator.claim_attempt("t", "worker-a", "ws").lease
    assert not orchestrator.claim_attempt("t", "worker-b", "ws").accepted
    orchestrator.start_attempt("t#1", lease.generation, lease.token)
    assert not orchestrator.renew_lease("t#1", lease.generation + 1, lease.token).accepted
    clock.advance(3.0)
    grant = orchestrator.grant_tool("t#1", lease.generation, lease.token, "create-pr", "c0ffee", cost_usd=0.5, tokens=1000)
    effect = provider.perform(grant.key, "create-pr", "c0ffee", "")
    orchestrator.record_receipt("t#1", lease.generation, lease.token, grant.key, effect.provider_id)
    clock.advance(2.0)
    orchestrator.complete_attempt("t#1", lease.generation, lease.token, "done", head_sha="c0ffee")
    orchestrator.verify_attempt("t#1")
    orchestrator.decide("t")
    return store, provider


def test_build_timeline_on_a_memory_store_holds_the_attempt_data():
    """The timeline's values (path, receipts, spend, budget, decision) are those of the records, not only text."""
    store, provider = one_verified_attempt()
    timeline = build_timeline(store, "t")
    assert (timeline.task_id, timeline.objective, timeline.state, timeline.decision) == ("t", "add a health probe", "review", "verify")
    (attempt,) = timeline.attempts
    assert attempt.number == 1 and attempt.recovery_reason is None and attempt.previous_attempt_id is None
    assert attempt.hypothesis == "probe the database connection"
    assert (attempt.worker_id, attempt.generation, attempt.head_sha) == ("worker-a", 1, "c0ffee")
    assert attempt.state_path == ("queued", "admitted", "claimed", "running", "verifying", "succeeded")
    assert (attempt.cost_usd, attempt.tokens, attempt.elapsed_s) == (0.5, 1000, 5.0)
    (receipt,) = attempt.evidence.receipts
    assert (receipt.key, receipt.receipt) == ("create-pr:t:c0ffee", provider.ledger[0].provider_id)
    assert attempt.evidence.claimed_result == "done" and attempt.evidence.evidence.endswith("passed")
    assert [a.seq for a in attempt.actions] == sorted(a.seq for a in attempt.actions)
    assert [a.kind for a in timeline.task_actions] == ["create", "accept", "dispatch", "attempt_succeeded"]
    budget = {line.name: line for line in timeline.budget}
    assert (budget["attempts"].used, budget["attempts"].left) == (1, budget["attempts"].limit - 1)
    assert (budget["cost"].used, budget["tokens"].used, budget["elapsed time"].used) == (0.5, 1000, 5.0)
    assert timeline.exhausted is None and timeline.repeating_signature is None


def test_build_timeline_marks_a_stale_fence_late_and_a_lost_race_only_refused():
    """A renewal with a stale generation is late; a second worker's refused claim is refused but not late."""
    store, _provider = one_verified_attempt()
    (attempt,) = build_timeline(store, "t").attempts
    refused = {action.kind: action for action in attempt.actions if not action.accepted}
    assert set(refused) == {"claim", "renew"}
    assert refused["renew"].late and refused["renew"].reason.startswith("late: stale fence")
    assert not refused["claim"].late
    text = render_timeline(build_timeline(store, "t"))
    assert "REFUSED (late: stale fence, generation 2 presented, current is 1)" in text
    assert "REFUSED (no 'claim' from 'claimed')" in text


def test_build_timeline_of_an_unknown_task_raises_not_found():
    """An id that names no task is NotFound, the core's typed error, not an empty timeline."""
    with pytest.raises(NotFound, match="unknown task 'ghost'"):
        build_timeline(MemoryStore(), "ghost")


def test_only_fenced_calls_after_expiry_are_late():
    """After the lease expires, the holder's renewal is late; another worker's refused claim is not, it never held a lease."""
    store, clock = MemoryStore(), ManualClock()
    orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock))
    orchestrator.create_task("t", "rotate a credential", "ws")
    orchestrator.accept_task("t")
    orchestrator.dispatch("t", Plan("rotate, then redeploy"))
    orchestrator.admit("t#1")
    lease = orchestrator.claim_attempt("t", "worker-a", "ws").lease
    clock.advance(orchestrator.config.lease_ttl_s + 1.0)
    orchestrator.reap()
    assert not orchestrator.claim_attempt("t", "worker-b", "ws").accepted
    assert not orchestrator.renew_lease("t#1", lease.generation, lease.token).accepted
    (attempt,) = build_timeline(store, "t").attempts
    refused = {action.kind: action for action in attempt.actions if not action.accepted}
    assert not refused["claim"].late
    assert refused["renew"].late and f"expired at {lease.expires_at}" in refused["renew"].reason
    assert attempt.state_path == ("queued", "admitted", "claimed", "suspect")


def test_timeline_shows_the_backoff_and_the_fallback_of_an_attempt():
    """An Attempt that waited out a backoff and was switched to a declared fallback says both, in data and in text."""
    store, clock = MemoryStore(), ManualClock(0.0)
    reliability = ReliabilityConfig(
        breaker=BreakerConfig(failures_to_open=1),
        rate_limits={"code_host": RateLimitConfig(), "model_provider": RateLimitConfig(), "small_model": RateLimitConfig()},
        fallbacks=(Fallback("model_provider", "small_model", "same API, smaller model", 0.3, 0.5, "lower", "draft PR only"),),
    )
    orchestrator = Orchestrator(store, clock, LedgerProvider(clock=clock), reliability=reliability)
    orchestrator.create_task("t", "summarize the incident", "ws")
    orchestrator.accept_task("t")
    orchestrator.dispatch("t", Plan("summarize from the logs"))
    orchestrator.admit("t#1")
    lease = orchestrator.claim_attempt("t", "worker-a", "ws").lease
    orchestrator.start_attempt("t#1", lease.generation, lease.token)
    orchestrator.report_failure("t#1", lease.generation, lease.token, "provider", "503 from the model provider")
    orchestrator.reconcile_attempt("t#1")
    assert orchestrator.retry("t", "the provider answered 503; transient", Plan("summarize from the logs")).accepted
    second = store.get_attempt("t#2")
    assert second.backoff_s > 0 and second.eligible_at == second.backoff_s
    clock.advance(second.backoff_s)
    orchestrator.admit("t#2")
    lease = orchestrator.claim_attempt("t", "worker-a", "ws").lease
    orchestrator.start_attempt("t#2", lease.generation, lease.token)
    grant = orchestrator.grant_tool("t#2", lease.generation, lease.token, "summarize", "logs-1", dependency="model_provider")
    orchestrator.report_call_failure("t#2", lease.generation, lease.token, grant.key, "503")
    switched = orchestrator.grant_tool("t#2", lease.generation, lease.token, "summarize", "logs-2", dependency="model_provider")
    assert switched.dependency == "small_model"
    timeline = build_timeline(store, "t")
    assert timeline.attempts[1].backoff_s == second.backoff_s and timeline.attempts[1].fallback == "model_provider -> small_model"
    text = render_timeline(timeline)
    assert "backoff     waited" in text and "fallback    model_provider -> small_model" in text
    assert "backoff" not in text.split("Attempt 2")[0].split("Attempt 1")[1]
