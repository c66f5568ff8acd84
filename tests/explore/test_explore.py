"""Exhaustive exploration: the correct core's small configurations complete clean, every in-scope anti-pattern is found
with a short counterexample that replays, and the search says honestly how far it went."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from shiftchange.agent import Looked
from shiftchange.antipatterns import ANTIPATTERNS
from shiftchange.checkers.rules import INVARIANTS
from shiftchange.cli.main import main
from shiftchange.core.machine import SPEC
from shiftchange.core.provider import Effect
from shiftchange.explore import (
    DFS,
    EXPOSURES,
    OUT_OF_SCOPE,
    ExploreConfig,
    ExploreError,
    StepError,
    World,
    explore,
    exposing_config,
    parse_steps,
    replay,
    replay_command,
)
from shiftchange.explore.digest import digest
from shiftchange.spec.coverage import read_coverage

# ------------------------------------------------------------- correct core

CLEAN = {
    "two workers": {},
    "one crash": {"crashes": 1},
    "one pause": {"pauses": 1},
    "lost answer, idempotent code host": {"lost_responses": 1},
    "lost answer, code host without keys": {"lost_responses": 1, "idempotent_provider": False},
    "crash, code host without keys": {"crashes": 1, "idempotent_provider": False},
    "a cancellation": {"cancels": 1},
    "two cancellations": {"cancels": 2},
    "a stall and a cancellation": {"workers": 1, "stalls": 1, "cancels": 1},
    "an operator out of turn, a task the budget stopped": {"workers": 1, "ci_failures": 1, "retries": 0, "operator_calls": 1},
    "a blocked task released": {"workers": 1, "deletions": 1, "operator_calls": 1},
    "a quarantined task released": {"workers": 1, "ci_failures": 2, "retries": 1, "operator_calls": 1},
    "a task escalated on a revoked credential, released": {"workers": 1, "refusals": 1, "operator_calls": 1},
    "a pull request deleted outside, and a crash": {"workers": 1, "deletions": 1, "crashes": 1},
    "a refusal crossing a cancellation": {"workers": 1, "refusals": 1, "cancels": 1},
    "provider refusals": {"refusals": 2},
    "lost requests": {"lost_requests": 1},
    "lost requests, code host without keys": {"lost_requests": 1, "idempotent_provider": False},
    "a pause, code host without keys": {"pauses": 1, "idempotent_provider": False},
    "two CI failures": {"ci_failures": 2, "retries": 2},
    "duplicate requests": {"duplicates": 2},
    "two tasks": {"tasks": 2},
    "two operations and a crash": {"operations": ("push", "create-pr"), "crashes": 1},
    "three workers and a crash": {"workers": 3, "crashes": 1},
    "two crashes and a pause": {"crashes": 2, "pauses": 1, "retries": 2},
    "a duplicate, a crash and a lost answer without keys": {
        "duplicates": 1,
        "crashes": 1,
        "lost_responses": 1,
        "idempotent_provider": False,
    },
}


HEAVY = {"two crashes and a pause", "a duplicate, a crash and a lost answer without keys"}
"""The configurations whose search takes seconds: part of the default suite, left out of the fast tier."""


@pytest.mark.parametrize(
    "changes", [pytest.param(changes, id=name, marks=[pytest.mark.heavy] if name in HEAVY else []) for name, changes in CLEAN.items()]
)
def test_the_correct_core_completes_small_configurations_with_no_violation(changes):
    result = explore(ExploreConfig(**changes))
    assert result.counterexample is None, "\n".join(result.counterexample.timeline)
    assert result.complete and result.stopped_by is None
    assert result.quiescent >= 1 and result.states > 10
    assert result.explored == result.states  # complete: every distinct state had all its steps taken


@pytest.mark.heavy
def test_the_benchmark_configuration_completes_with_no_violation():
    result = explore(ExploreConfig(workers=2, tasks=1, crashes=1, pauses=1, lost_responses=1))
    assert result.ok and result.complete
    assert result.states > 1000  # the faults multiply the interleavings: a search this small would not have placed them
    coverage = result.coverage()
    fired = {row.trigger for row in SPEC.attempt.rows if coverage.count("attempt", row.index + 1)}
    assert {"expire", "reconcile", "effects_landed", "effects_absent"} <= fired  # every recovery path was walked


def test_a_stalled_holder_renews_in_every_holder_state_and_keeps_its_lease():
    """Goal: the stall reaches the renewals no other fault does (claimed, running, cancelling, all accepted on time), and a
    slow holder whose heartbeat runs is never taken for dead: no expiry, no Suspect, in any interleaving."""
    result = explore(ExploreConfig(workers=1, stalls=1, cancels=1))
    assert result.ok and result.complete
    coverage = result.coverage()
    renewed = {row.sources for row in SPEC.attempt.rows if row.trigger == "renew" and coverage.count("attempt", row.index + 1)}
    assert renewed == {("claimed",), ("running",), ("cancelling",)}
    assert not any(coverage.count("attempt", row.index + 1) for row in SPEC.attempt.rows if row.trigger == "expire")
    without = explore(ExploreConfig(workers=1, cancels=1)).coverage()
    renewed = {row.sources for row in SPEC.attempt.rows if row.trigger == "renew" and without.count("attempt", row.index + 1)}
    assert ("claimed",) not in renewed and ("running",) not in renewed  # without the stall, no holder renews while it works


def test_an_operator_out_of_turn_is_refused_and_a_release_hands_the_task_back_to_the_loop():
    """Goal: the operator's accept, approve and release are offered in every state; out of turn the table refuses them,
    and a release of a task the budget stopped extends it by one Attempt and lets the loop finish the work."""
    result = explore(ExploreConfig(workers=1, ci_failures=1, retries=0, operator_calls=1))
    assert result.ok and result.complete and result.finishes
    coverage = result.coverage()
    fired = {row.trigger for row in SPEC.task.rows if coverage.count("task", row.index + 1)}
    assert {"release", "stop", "approve", "retry"} <= fired
    world = World(ExploreConfig(workers=1, operator_calls=1))
    with world.store.transaction() as tx:
        assert tx.task("task-1").state == "inbox"  # with an operator, a new task waits in its inbox for its intake
    offered = {"operator:accept:task-1", "operator:approve:task-1", "operator:release:task-1", "control:intake:task-1"}
    assert offered <= set(world.actions())
    world.apply("control:intake:task-1")  # accepted and dispatched; the operator may now also ask admission for Attempt 1
    assert "control:intake:task-1" not in world.actions() and "operator:admit:task-1#1" in world.actions()
    world.apply("operator:approve:task-1")  # the task is in progress: refused, and the budget is spent
    assert world.budgets.operator_calls == 0 and not any(a.startswith("operator:") for a in world.actions())
    with world.store.transaction() as tx:
        assert tx.task("task-1").state == "in_progress"


@pytest.mark.parametrize("call", ["approve", "release"])
def test_an_operators_call_on_a_task_in_its_inbox_is_refused_and_the_intake_still_sends_it_to_work(call):
    """Goal: approve and release presented to a task still in its inbox are refused (truthful_states would judge them
    accepted), and the intake that follows accepts and dispatches it as before."""
    world = World(ExploreConfig(workers=1, operator_calls=1))
    heard: list = []
    world.store.subscribe(heard.append)
    world.apply(f"operator:{call}:task-1")
    world.apply("control:intake:task-1")
    with world.store.transaction() as tx:
        assert tx.task("task-1").state == "in_progress" and len(tx.attempts_of("task-1")) == 1
    refused = [e for e in heard if e.kind == call]
    assert refused and not refused[0].accepted and refused[0].from_state == "inbox"


def test_a_released_task_the_loop_declines_goes_back_to_rest_instead_of_waiting_in_ready():
    """Goal: an operator's release hands a resting task to the loop; when the loop declines another Attempt (the evidence
    still contradicts, the signature is still poison) the task rests again, from ready. Before, it stayed ready forever:
    the retry needs a failed Attempt, and the loop's decisions fired only from in_progress (a no_lost_tasks violation)."""
    for changes, trigger in (({"deletions": 1}, "attempt_blocked"), ({"ci_failures": 2, "retries": 1}, "attempt_quarantined")):
        result = explore(ExploreConfig(workers=1, operator_calls=1, **changes))
        assert result.ok and result.complete, "\n".join(result.counterexample.timeline) if result.counterexample else ""
        coverage = result.coverage()
        row = next(r for r in SPEC.task.rows if r.trigger == trigger)
        assert "ready" in row.sources and coverage.count("task", row.index + 1) >= 2  # from in_progress, and after the release


def test_a_deleted_pull_request_blocks_the_attempt_on_contradictory_evidence():
    """Goal: deleting the landed effect outside the system reaches the rows no honest provider does (the contradiction,
    the task blocked), and a second pull request after the first was deleted is no duplicate."""
    result = explore(ExploreConfig(workers=1, deletions=1))
    assert result.ok and result.complete
    coverage = result.coverage()
    assert any(coverage.count("attempt", r.index + 1) for r in SPEC.attempt.rows if r.trigger == "evidence_contradictory")
    assert any(coverage.count("task", r.index + 1) for r in SPEC.task.rows if r.trigger == "attempt_blocked")
    assert explore(ExploreConfig(workers=1, deletions=1, crashes=1)).ok  # the retry's pull request replaces a deleted one


def test_a_stall_is_a_step_of_its_own_and_replays():
    """Goal: `stall` is the nemesis's labelled step, spent from its budget, recorded as a fault, and a path through it replays."""
    world = World(ExploreConfig(workers=1, stalls=1))
    for label in ("control:admit", "worker-1:claim:task-1"):
        world.apply(label)
    assert "worker-1:stall" in world.actions()
    world.apply("worker-1:stall")
    assert world.budgets.stalls == 0 and "worker-1:stall" not in world.actions()
    assert [a for a in world.actions() if a.startswith("worker-1:")] == []  # slow: no step of its own at this instant
    assert any(a.startswith("clock:advance:") for a in world.actions())  # but time may pass, and its heartbeat renews
    with pytest.raises(ExploreError, match="stalls must be a whole number from 0 to 4"):
        ExploreConfig(stalls=5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes",
    [
        {"crashes": 1, "pauses": 1, "lost_responses": 1, "cancels": 1, "ci_failures": 1},  # 64,737 states, about two minutes
        {"tasks": 2, "crashes": 1},  # 66,542 states: two tasks' steps interleaved
    ],
    ids=["every kind of fault once", "two tasks and a crash"],
)
def test_larger_configurations_complete_with_no_violation(changes):
    result = explore(ExploreConfig(**changes))
    assert result.ok and result.complete, None if result.ok else "\n".join(result.counterexample.timeline)


# ------------------------------------------------------------ anti-patterns


def test_every_anti_pattern_is_either_explored_or_out_of_scope_with_a_reason():
    assert set(EXPOSURES) | set(OUT_OF_SCOPE) == set(ANTIPATTERNS)
    assert set(OUT_OF_SCOPE) == {"retry-storm", "silent-queue-growth", "budget-burn"}
    assert all(len(why) > 40 for why in OUT_OF_SCOPE.values())
    with pytest.raises(ExploreError, match="out of scope"):
        explore(ExploreConfig(antipattern="retry-storm"))


@pytest.mark.parametrize("name", EXPOSURES)
def test_each_anti_pattern_is_found_with_a_short_counterexample_that_replays(name):
    config = exposing_config(name)
    result = explore(config)
    example = result.counterexample
    assert example is not None, f"{name} passed every interleaving of {config}"
    assert example.invariant == EXPOSURES[name].invariant
    assert 1 <= len(example.steps) <= 20
    played = replay(config, example.steps)
    assert played.violation is not None and played.violation[0] == example.invariant
    assert played.violation[1] == example.example
    # Breadth-first: no shorter path violates anything, so the path less its last step is clean.
    assert replay(config, example.steps[:-1]).violation is None


@pytest.mark.parametrize("name", EXPOSURES)
def test_the_same_steps_violate_nothing_on_the_correct_core(name):
    """The counterexample is the anti-pattern's: played on the reference core, its steps fit until the core takes
    another course (a grant that is a replay, a refused write), and up to there nothing is violated."""
    steps = explore(exposing_config(name)).counterexample.steps
    correct = ExploreConfig(**EXPOSURES[name].changes)
    fitting = len(steps)
    while True:
        try:
            played = replay(correct, steps[:fitting])
            break
        except ExploreError:
            fitting -= 1
    assert played.violation is None
    assert fitting >= 1
    if name == "no-fencing":
        assert fitting == len(steps)  # the very same steps fit the reference core, whose fence refuses the stale write


def test_the_interleavings_the_simulator_reaches_only_by_luck_are_found_every_time():
    """worker-minted-keys needs a crash after the call was sent and before its receipt; exploration places it there."""
    steps = list(explore(exposing_config("worker-minted-keys")).counterexample.steps)
    crash = next(i for i, step in enumerate(steps) if step.endswith(":crash"))
    crashed_worker = steps[crash].split(":")[0]
    sent = max(i for i, step in enumerate(steps[:crash]) if step == f"{crashed_worker}:perform")
    assert f"{crashed_worker}:receipt" not in steps[sent:crash]
    assert any(step.startswith("provider:land") for step in steps[sent:])


def test_depth_first_with_a_bound_finds_a_counterexample_too():
    config = exposing_config("no-fencing")
    bfs = explore(config).counterexample
    # Unfenced, a stale write lands on the task's current Attempt: the shortest needs a retry and its claim (13 steps).
    dfs = explore(config, DFS, depth_max=16).counterexample
    assert dfs is not None and dfs.invariant == bfs.invariant
    assert len(dfs.steps) >= len(bfs.steps)
    assert replay(config, dfs.steps).violation[0] == bfs.invariant


# --------------------------------------------------------- search mechanics


@pytest.mark.heavy
def test_symmetry_reduction_merges_mirror_images_of_workers():
    config = ExploreConfig(workers=2, crashes=1, pauses=1)
    reduced, full = explore(config), explore(config, symmetry=False)
    assert reduced.complete and full.complete and reduced.ok and full.ok
    assert reduced.states < full.states


def test_the_digest_leaves_out_lease_tokens_and_the_history():
    steps = ("control:admit", "worker-1:claim:task-1", "worker-1:start")
    first, second = World(ExploreConfig()), World(ExploreConfig())
    for world in (first, second):
        for step in steps:
            world.apply(step)
    assert first.workers[0].agent.fence[2] != second.workers[0].agent.fence[2]  # the tokens are random, as they must be
    assert digest(first, True) == digest(second, True)
    # A renewal at the same instant changes no record but the version counter, and adds an event to the history.
    assert second.orchestrator.renew_lease(*second.workers[0].agent.fence).accepted
    assert digest(first, True) == digest(second, True)
    second.clock.set(0.5)
    assert digest(first, True) != digest(second, True)  # the time does count
    mirrored = World(ExploreConfig())
    for step in steps:
        mirrored.apply(step.replace("worker-1", "worker-2"))
    assert digest(mirrored, True) == digest(first, True)
    assert digest(mirrored, False) != digest(first, False)


def test_searches_are_deterministic():
    config = exposing_config("restart-from-scratch")
    first, second = explore(config), explore(config)
    assert (first.states, first.transitions) == (second.states, second.transitions)
    assert first.counterexample.steps == second.counterexample.steps


def test_bounds_say_the_search_did_not_complete():
    config = ExploreConfig(crashes=1, pauses=1)
    cut = explore(config, depth_max=4)
    assert cut.stopped_by == "depth" and not cut.complete and cut.cut > 0 and cut.depth == 4
    capped = explore(config, states_max=7)
    assert capped.stopped_by == "states" and capped.states == 7


def test_a_step_that_does_not_fit_is_refused():
    with pytest.raises(ExploreError, match="step 1 of the replay does not fit"):
        replay(ExploreConfig(), ("worker-1:claim:task-1",))  # nothing is admitted yet
    world = World(ExploreConfig())
    with pytest.raises(StepError):
        world.apply("clock:advance:3")


@pytest.mark.parametrize(
    "changes",
    [{"workers": 0}, {"workers": 5}, {"crashes": -1}, {"retries": True}, {"operations": ()}, {"operations": ("push", "push")},
     {"lease_ttl_s": 1.0, "heartbeat_interval_s": 1.0}, {"call_deadline_s": float("nan")}],
)  # fmt: skip
def test_a_bad_configuration_is_a_typed_error(changes):
    with pytest.raises(ExploreError):
        ExploreConfig(**changes)


def test_quiescent_states_judge_lost_tasks(monkeypatch):
    """A task left in progress with nothing able to happen is lost: a world whose retries are refused shows it."""
    from shiftchange.explore.control import ControlPlane

    def refuse_retry(self, world, action, argument):
        if action == "retry":
            self.retries.pop(argument)  # the control plane forgets the retry it decided
            return
        original(self, world, action, argument)

    original = ControlPlane.apply
    monkeypatch.setattr(ControlPlane, "apply", refuse_retry)
    result = explore(ExploreConfig(ci_failures=1))
    assert result.counterexample is not None and result.counterexample.invariant == "no_lost_tasks"


def test_a_state_that_only_loops_back_to_itself_is_judged_as_ended(monkeypatch):
    """A retry that is asked again and again but never appended changes nothing: that task is lost all the same."""
    from shiftchange.explore.control import ControlPlane

    def retry_in_vain(self, world, action, argument):
        if action == "retry":
            return  # still due, never done: the step leads back to the very same state
        original(self, world, action, argument)

    original = ControlPlane.apply
    monkeypatch.setattr(ControlPlane, "apply", retry_in_vain)
    result = explore(ExploreConfig(ci_failures=1))
    assert result.counterexample is not None and result.counterexample.invariant == "no_lost_tasks"
    assert result.counterexample.steps[-1] != "control:retry:task-1"  # judged where it got stuck, not one loop later
    played = replay(ExploreConfig(ci_failures=1), result.counterexample.steps)
    assert played.violation is not None and played.violation.invariant == "no_lost_tasks"


def test_a_call_sent_past_its_deadline_lands_nothing():
    """A worker paused between its grant and its call sends it too late: the provider lands nothing past a deadline."""
    world = World(ExploreConfig(pauses=1))
    for step in ("control:admit", "worker-1:claim:task-1", "worker-1:start", "worker-1:grant", "worker-1:pause"):
        world.apply(step)
    while world.clock.now() < 2.0:  # the grant's deadline: the paused holder's lease runs out at 3
        world.apply(next(label for label in world.actions() if label.startswith("clock:")))
    world.apply("worker-1:wake")
    world.apply("worker-1:perform")
    assert world.network.calls == [] and world.provider.ledger == []
    assert "worker-1:report" in world.actions()  # it heard the timeout at once: the deadline has passed


def test_lost_requests_reach_effects_absent_on_reconciliation():
    coverage = explore(ExploreConfig(lost_requests=1, crashes=1)).coverage()
    absent = next(row.index + 1 for row in SPEC.attempt.rows if row.trigger == "effects_absent" and row.dest == "failed")
    assert coverage.count("attempt", absent) > 0


def test_an_interrupted_search_exits_130_with_its_summary(monkeypatch, capsys):
    from shiftchange.explore import world as explore_world

    calls = {"n": 0}
    original = explore_world.World.apply

    def interrupted_later(self, label, checked=True):
        calls["n"] += 1
        if calls["n"] == 40:
            raise KeyboardInterrupt
        return original(self, label, checked)

    monkeypatch.setattr(explore_world.World, "apply", interrupted_later)
    assert main(["explore", "--crashes", "1", "--pauses", "1"]) == 130
    captured = capsys.readouterr()
    assert "INCOMPLETE: interrupted" in captured.out and "interrupted" in captured.err


# ----------------------------------------------------------------- command


def test_the_command_exits_0_on_a_completed_clean_search(capsys):
    assert main(["explore", "--workers", "2", "--crashes", "1"]) == 0
    out = capsys.readouterr().out
    assert "the search completed" in out and "distinct states per second" in out and "never reached" in out
    assert out.count("PASS ") == len(INVARIANTS)
    assert main(["explore", "--workers", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["driver"] == "explore" and report["search"]["complete"]
    assert all(verdict["ok"] is True for verdict in report["invariants"].values())


def test_the_command_exits_1_with_a_replayable_counterexample(capsys):
    assert main(["explore", "--antipattern", "db-only-dedup", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["search"]["stopped_by"] == "violation"
    assert report["subject"]["counterexample"]["invariant"] == "one_effect_per_operation"
    judged = report["invariants"]
    assert judged.pop("one_effect_per_operation")["ok"] is False
    assert len(judged) == len(INVARIANTS) - 1  # the others were not searched to the end: unknown, which is not a pass
    assert all(verdict["ok"] is False and verdict["status"] == "unknown" for verdict in judged.values())
    command = report["subject"]["counterexample"]["replay"]
    assert command.startswith("shiftchange explore ") and "--no-idempotency" in command
    argv = command.split()[1:]
    steps = command.split("--replay ")[1].strip("'")
    argv = [*argv[: argv.index("--replay")], "--replay", steps, "--json"]
    assert main(argv) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["violation"]["invariant"] == "one_effect_per_operation"
    assert parse_steps(steps) == tuple(report["subject"]["counterexample"]["steps"])


def test_the_command_exits_3_when_a_bound_stopped_it(capsys):
    assert main(["explore", "--crashes", "1", "--pauses", "1", "--states", "20", "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["search"]["complete"] is False and report["search"]["stopped_by"] == "states" and report["search"]["states"] == 20


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--antipattern", "budget-burn"], "out of scope"),
        (["--antipattern", "nope"], "unknown anti-pattern"),
        (["--workers", "7"], "workers must be"),
        (["--dfs"], "depth bound"),
        (["--replay", "worker-1:claim:task-1"], "does not fit"),
        (["--replay", " , "], "needs the steps"),
        (["--operations", "push,push"], "operations must differ"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, message):
    assert main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_command_lists_what_exploration_covers(capsys):
    assert main(["explore", "--antipatterns"]) == 0
    out = capsys.readouterr().out
    for name in ANTIPATTERNS:
        assert name in out
    assert "out of scope" in out


def test_coverage_is_written_for_spec_review(tmp_path, capsys):
    path = tmp_path / "explore-coverage.json"
    assert main(["explore", "--crashes", "1", "--coverage", str(path)]) == 0
    coverage = read_coverage(path)
    coverage.check_against(SPEC)
    expire = next(row.index + 1 for row in SPEC.attempt.rows if row.trigger == "expire")
    assert coverage.count("attempt", expire) > 0
    assert any("explore" in who for who in coverage.recorded_by)
    without = tmp_path / "clean.json"
    assert main(["explore", "--coverage", str(without)]) == 0
    assert read_coverage(without).count("attempt", expire) == 0  # no crash, no pause: no lease can run out
    assert "coverage written to" in capsys.readouterr().out


def test_replay_command_spells_out_every_setting():
    config = exposing_config("blind-retry")
    command = replay_command(config, ("control:admit",))
    for flag in ("--workers 2", "--ci-failures 1", "--retries 1", "--antipattern blind-retry", "--replay 'control:admit'"):
        assert flag in command
    assert "--lease-ttl" not in command  # the timings are the defaults
    timed = replay_command(ExploreConfig(lease_ttl_s=2.0, gateway_retries_max=2), ())
    assert "--lease-ttl 2.0" in timed and "--gateway-retries 2" in timed


def test_a_replay_command_with_its_own_timings_replays(capsys):
    config = ExploreConfig(crashes=1, lease_ttl_s=2.0, heartbeat_interval_s=0.5, call_deadline_s=1.5)
    path = ("control:admit", "worker-1:claim:task-1", "worker-1:crash", "clock:advance:2.0", "control:reap")
    argv = replay_command(config, path).split()[1:]
    argv = [*argv[: argv.index("--replay")], "--replay", ",".join(path)]
    assert main(argv) == 0
    assert "reaper: expire task-1#1" in capsys.readouterr().out


def test_a_reader_that_stops_early_ends_the_command_quietly(monkeypatch, tmp_path):
    """`shiftchange explore | head -1`: a write into the closed pipe ends the command with 141, not a traceback."""
    import sys

    from shiftchange.cli import main as cli

    def closed_pipe():
        print("explore --workers 2 ...")
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "main", closed_pipe)
    with open(tmp_path / "stdout", "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        with pytest.raises(SystemExit) as stopped:
            cli.run()
    assert stopped.value.code == cli.EXIT_BROKEN_PIPE == 141


def test_a_checker_that_crashes_stops_the_search_as_unknown(monkeypatch):
    """A checker that raises judges nothing: the search stops there and says so, never reads it as a pass."""
    from shiftchange.checkers import rules

    def broken(self, state, event):
        raise ValueError("no such field")

    monkeypatch.setattr(rules.FencedWrites, "_on_event", broken)
    result = explore(ExploreConfig())
    example = result.counterexample
    assert example is not None and example.invariant == "fenced_writes" and example.status == "unknown"
    assert "checker crashed" in example.example[0]
    assert not result.ok


# ------------------------------------------------------------------ workers


class _ScriptedWire:
    """An orchestrator-like object and a provider that answer from a script, recording every contract called."""

    def __init__(self, provider_answers):
        self.contracts = []
        self.provider_answers = list(provider_answers)
        self.sent = []

    def request(self, worker_id, call, duplicate):
        self.contracts.append(call.contract)
        if call.contract == "claim_attempt":
            lease = SimpleNamespace(attempt_id="task-1#1", generation=1, token="t", task_id="task-1")
            return SimpleNamespace(accepted=True, lease=lease, manifest=SimpleNamespace(hypothesis="h1"))
        if call.contract == "grant_tool":
            key = f"create-pr:{len(self.contracts)}"
            return SimpleNamespace(accepted=True, replay=None, key=key, deadline_at=self.now + 2.0)
        return SimpleNamespace(accepted=True, cancel_requested=False)

    def look(self, attempt_id):
        return Looked("h1")

    def send(self, worker, perform):
        self.sent.append(perform.key)
        return len(self.sent)


def _drive(worker, wire):
    """Run one Attempt: take the worker's one enabled step (not a renewal), answer its provider calls from the script, and
    let the clock run to whatever it waits for; the contracts called, in order."""
    from shiftchange.explore.workers import PERFORM, RENEW

    wire.now = 0.0
    worker.act("claim", "task-1", wire, wire.now)
    worker.settle(wire, wire.now)
    while worker.command is not None:
        steps = [step for step, _argument in worker.steps([], wire.now) if step != RENEW]
        if steps == [PERFORM]:
            worker.act(PERFORM, "", wire, wire.now)
            answer = wire.provider_answers.pop(0)
            worker.lost() if answer is None else worker.answered(answer, wire.now)
        elif steps:
            (step,) = steps
            worker.act(step, "", wire, wire.now)
        else:
            wire.now = worker.wait_until  # a Wait, or a lost call's deadline
        worker.settle(wire, wire.now)
    return wire.contracts


def _worker():
    from shiftchange.agent import Agent
    from shiftchange.core import Backoff
    from shiftchange.explore.workers import Worker

    config = ExploreConfig()
    return Worker(Agent("worker-1", config.agent(), Backoff(config.reliability().backoff, random.Random(0)), config.workflow()))


def test_a_worker_runs_one_attempt_against_a_scripted_orchestrator_and_provider():
    """The explorer's worker is the agent: driven by hand with scripted answers, it calls the contracts the agent asks for."""
    wire = _ScriptedWire([Effect("create-pr-1", "k", "create-pr", "task-1:abc", "", 0.0)])
    assert _drive(_worker(), wire) == ["claim_attempt", "start_attempt", "grant_tool", "record_receipt", "complete_attempt"]


def test_a_worker_whose_answer_was_lost_reports_the_timeout_and_backs_off_before_asking_again():
    wire = _ScriptedWire([None, Effect("create-pr-1", "k", "create-pr", "task-1:abc", "", 0.0)])
    contracts = _drive(_worker(), wire)
    assert contracts == [
        "claim_attempt", "start_attempt", "grant_tool", "report_call_failure", "grant_tool", "record_receipt", "complete_attempt",
    ]  # fmt: skip
    assert wire.now == 2.0 + 1.0  # the call's deadline, then the first backoff (exponential from 1 s)


def test_a_worker_out_of_asks_reports_the_attempt_failed():
    wire = _ScriptedWire([None, None])
    contracts = _drive(_worker(), wire)  # gateway_retries_max 1: one ask again, then the Attempt fails
    assert contracts[-3:] == ["grant_tool", "report_call_failure", "report_failure"]
    assert contracts.count("grant_tool") == 2
